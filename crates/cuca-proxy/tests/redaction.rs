//! Redaction at write time through the proxy: keys of every default kind and a rule of the
//! user's own, in a system prompt, a user prompt, a tool call's arguments, a tool's output
//! and the answer that echoes them, never reach the session file or the call log; the
//! caller still gets the upstream's answer byte for byte; and the redacted recording
//! replays, the incoming request redacted by the same rules before it is compared.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod support;

#[path = "../../cuca-redact/tests/common/mod.rs"]
mod fakes;

use cuca_proxy::{Mode, ProxyConfig};
use cuca_redact::Config;
use serde_json::json;
use support::*;

/// The user's own rule, and a value only it finds.
const EMPLOYEE_RULE: &str = "employee=EMP-[0-9]{6}";
const EMPLOYEE_ID: &str = "EMP-004211";

fn rules() -> Config {
    let mut config = Config::default();
    config.add_regex_flag(EMPLOYEE_RULE).unwrap();
    config
}

/// A chat request whose every part holds keys: the system prompt, an assistant's tool call,
/// the tool's output, and the last user message — a question the stand-in upstream answers
/// by echoing it word by word, so the answer streams the keys too, split across deltas.
fn request_with_keys() -> Vec<u8> {
    let all: Vec<&str> = fakes::FAKES.iter().map(|fake| fake.text).collect();
    let question = format!("Name the owner of {} and {EMPLOYEE_ID}", all.join(" and "));
    json!({
        "model": "tiny",
        "stream": true,
        "messages": [
            {"role": "system", "content": format!("You deploy with {}", fakes::FAKES[0].text)},
            {"role": "user", "content": format!("Check the env of {EMPLOYEE_ID}")},
            {"role": "assistant", "content": null, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "env", "arguments": json!({
                    "token": fakes::FAKES[3].text, "note": fakes::FAKES[7].text,
                }).to_string()},
            }]},
            {"role": "tool", "tool_call_id": "call_1", "content": all.join("\n")},
            {"role": "user", "content": question},
        ],
    })
    .to_string()
    .into_bytes()
}

/// Every file under `dir`, read whole.
fn every_file(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }
    out
}

/// Fails naming the file and the secret when any 8-byte window of a fake's secret (or the
/// user rule's value) is in any file under `dir`.
fn assert_no_secret_in(dir: &std::path::Path) {
    let files = every_file(dir);
    assert!(files
        .iter()
        .any(|(path, _)| path.extension().is_some_and(|e| e == "cslog")));
    for (path, bytes) in &files {
        let text = String::from_utf8_lossy(bytes);
        for fake in fakes::FAKES {
            for window in fakes::windows(fake.secret) {
                assert!(
                    !text.contains(window),
                    "{} holds {window:?} of the {} fake",
                    path.display(),
                    fake.rule
                );
            }
        }
        assert!(
            !text.contains(EMPLOYEE_ID),
            "{} holds the employee id",
            path.display()
        );
    }
}

/// A recording proxy over `dir` with [`rules`] in force.
async fn recording_with_rules(upstream: &Upstream, dir: &std::path::Path) -> Running {
    let mut config = ProxyConfig::new(Mode::Record, Some(upstream.url.clone())).unwrap();
    config.redaction = rules();
    start(config, dir).await
}

/// The call log's rows once `n` calls have their end row (or after 4 s).
async fn rows_once_ended(proxy: &Running, n: usize) -> Vec<cuca_calllog::Record> {
    let mut rows = proxy.rows();
    for _ in 0..200 {
        if rows.iter().filter(|row| !row.is_start()).count() >= n {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        rows = proxy.rows();
    }
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_reaches_the_store_or_the_call_log_and_the_redacted_recording_replays() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording_with_rules(&upstream, dir.path()).await;
    let sent = request_with_keys();
    let response = client()
        .post(proxy.chat_url(Some("keys")))
        .body(sent.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let answered = response.bytes().await.unwrap();
    // Redaction is about what is kept: the caller and the upstream see every byte.
    assert_eq!(upstream.last().body.as_ref(), sent.as_slice());
    let answer = joined(&blocks_of_sse(&answered), false);
    assert!(answer.contains(fakes::FAKES[0].text), "{answer}");
    // Let the call's last records and its end row land.
    let rows = rows_once_ended(&proxy, 1).await;
    drop(proxy);

    assert_no_secret_in(dir.path());
    // The end row counts what each rule replaced: every default rule, and the user's.
    let end = rows.iter().find(|row| !row.is_start()).unwrap();
    for fake in fakes::FAKES {
        assert!(
            end.redacted.get(fake.rule).is_some_and(|n| *n > 0),
            "{} missing from {:?}",
            fake.rule,
            end.redacted
        );
    }
    assert!(end.redacted["employee"] >= 3, "{:?}", end.redacted);

    // The recording holds markers where the keys were, and replays: the same request, keys
    // and all, is redacted as it comes in and matches.
    let backend = cuca_store_file::FileBackend::new(dir.path().join("sessions")).unwrap();
    let recorded = cuca_events::SessionBackend::replay(&backend, "keys").unwrap();
    let recorded_text = format!("{recorded:?}");
    assert!(recorded_text.contains("[REDACTED:employee]"));
    assert!(recorded_text.contains("[REDACTED:private-key]"));
    drop(backend);
    let mut config = ProxyConfig::new(Mode::Replay, None).unwrap();
    config.redaction = rules();
    let replay = start(config, dir.path()).await;
    let response = client()
        .post(replay.chat_url(Some("keys")))
        .body(sent)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let replayed = joined(&blocks_of_sse(&response.bytes().await.unwrap()), false);
    assert!(
        replayed.starts_with("Answer 1 to Name the owner of [REDACTED:openai-key]"),
        "{replayed}"
    );
    assert!(!replayed.contains(fakes::FAKES[0].text));
    upstream.stop().await;
}

/// A rule turned off is off: its keys are recorded as they passed, and only its.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_rule_turned_off_records_its_kind_as_it_passed() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = ProxyConfig::new(Mode::Record, Some(upstream.url.clone())).unwrap();
    config.redaction.disable.push("aws-access-key-id".into());
    let proxy = start(config, dir.path()).await;
    let body = json!({"model": "tiny", "messages": [
        {"role": "user", "content": "Name AKIAZ7Q3X9M2P5L8N4R6 and ghp_R8mK2xQ9wL4zT7vN3cY6bH1jF5gS0dA2eU8i"},
    ]});
    let response = client()
        .post(proxy.chat_url(Some("off")))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.bytes().await.unwrap();
    let text = format!("{:?}", proxy.records("off"));
    assert!(text.contains("AKIAZ7Q3X9M2P5L8N4R6"), "{text}");
    assert!(!text.contains("ghp_R8mK2x"), "{text}");
    upstream.stop().await;
}

/// The proxy reads a message it has read before (an agent sends its whole conversation with
/// every call) from what it kept then: a second call holding the same keys is redacted and
/// counted exactly as the first, and records no key either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_read_before_are_redacted_and_counted_as_the_first_time() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording_with_rules(&upstream, dir.path()).await;
    let sent = request_with_keys();
    for session in ["first", "again"] {
        let response = client()
            .post(proxy.chat_url(Some(session)))
            .body(sent.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
    }
    let rows = rows_once_ended(&proxy, 2).await;
    drop(proxy);
    let ends: Vec<_> = rows.iter().filter(|row| !row.is_start()).collect();
    assert_eq!(ends.len(), 2);
    assert!(ends[0].redacted["employee"] >= 3, "{:?}", ends[0].redacted);
    assert_eq!(ends[0].redacted, ends[1].redacted);
    assert_no_secret_in(dir.path());
    let backend = cuca_store_file::FileBackend::new(dir.path().join("sessions")).unwrap();
    let first = cuca_events::SessionBackend::replay(&backend, "first").unwrap();
    let again = cuca_events::SessionBackend::replay(&backend, "again").unwrap();
    let requests = |records: &[cuca_events::SessionRecord]| -> Vec<cuca_events::SessionEvent> {
        records
            .iter()
            .map(|record| record.event.clone())
            .take_while(|event| !matches!(event, cuca_events::SessionEvent::Output { .. }))
            .collect()
    };
    assert_eq!(requests(&first), requests(&again));
    upstream.stop().await;
}
