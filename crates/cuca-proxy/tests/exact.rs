//! Recordings that never lie: the proxy never leaves a recording that is wrong while
//! every tool calls it clean. Each test here failed before the fix it names.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use cuca_events::{SessionBackend, SessionEvent};
use cuca_session_log::SessionLogPlugin;
use cuca_store_file::FileBackend;
use serde_json::Value;
use support::*;

fn call_request(records: &[cuca_events::SessionRecord]) -> (String, String) {
    records
        .iter()
        .find_map(|r| match &r.event {
            SessionEvent::CallRequest {
                parameters, tools, ..
            } => Some((parameters.clone(), tools.clone())),
            _ => None,
        })
        .unwrap()
}

fn incomplete(records: &[cuca_events::SessionRecord]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| match &r.event {
            SessionEvent::CallIncomplete { reason } => Some(reason.clone()),
            _ => None,
        })
        .collect()
}

async fn post(url: &str, body: String) -> reqwest::Response {
    client()
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
}

/// 28.4: "`X-Cuca-Point` can name another writer's record [...] Take it from the first
/// record actually written." Another writer appends to the session between two calls; the
/// second call's point is its own first record, not the tail the proxy last knew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_point_header_names_the_first_record_the_call_wrote() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording(&upstream, dir.path()).await;
    let body = serde_json::json!({"model": "tiny", "stream": true,
        "messages": [{"role": "system", "content": "You are terse."},
                     {"role": "user", "content": "The vault is in Lisbon. Reply with: noted"}]})
    .to_string();
    let first = post(&proxy.chat_url(Some("p")), body.clone()).await;
    assert_eq!(first.headers()["x-cuca-point"], "p:0");
    first.bytes().await.unwrap();
    proxy.proxy.settled("p").await;

    let other = SessionLogPlugin::new(Arc::clone(&proxy.backend) as Arc<dyn SessionBackend>)
        .with_session_id("p");
    for n in 0..3 {
        other
            .append_log(SessionEvent::Output {
                text: format!("another writer {n}"),
            })
            .unwrap();
    }
    let n_before = proxy.records("p").len() as u64;
    let second = post(&proxy.chat_url(Some("p")), body).await;
    let point = second.headers()["x-cuca-point"]
        .to_str()
        .unwrap()
        .to_owned();
    second.bytes().await.unwrap();
    proxy.proxy.settled("p").await;
    assert_eq!(point, format!("p:{n_before}"));
    let records = proxy.records("p");
    assert_eq!(
        records[n_before as usize].event,
        SessionEvent::SystemPrompt {
            text: "You are terse.".into()
        }
    );
}

/// 28.5: "Requests nested ≥ 127 levels (a deep `response_format` schema) are forwarded and
/// answered but not recorded at all [...] Record what can be recorded, and mark what could
/// not." A 300-level schema is recorded byte for byte in the parameters; a tool whose schema
/// is as deep is kept as its JSON text, and the call is marked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_nested_deeper_than_serde_reads_is_recorded_as_sent() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording(&upstream, dir.path()).await;
    let deep = format!("{}{{}}{}", r#"{"a":"#.repeat(300), "}".repeat(300));
    let response_format = format!(r#"{{"type":"json_schema","json_schema":{{"schema":{deep}}}}}"#);
    let tool = format!(r#"{{"type":"function","function":{{"name":"deep","parameters":{deep}}}}}"#);
    let body = format!(
        r#"{{"model":"tiny","stream":true,"messages":[{{"role":"user","content":"Go deep"}}],"response_format":{response_format},"tools":[{tool}]}}"#
    );
    assert!(
        serde_json::from_str::<Value>(&body).is_err(),
        "the body must be past serde's depth"
    );
    let response = post(&proxy.chat_url(Some("deep")), body).await;
    assert_eq!(response.status(), 200);
    response.bytes().await.unwrap();
    proxy.proxy.settled("deep").await;
    let records = proxy.records("deep");
    let (parameters, tools) = call_request(&records);
    assert_eq!(
        parameters,
        format!(r#"{{"response_format":{response_format}}}"#)
    );
    assert!(
        tools.contains(&serde_json::to_string(&tool).unwrap()[1..40]),
        "{}",
        &tools[..80]
    );
    // The tool keeps its name, read without building its schema.
    assert!(
        tools.starts_with(r#"[{"description":"","name":"deep","#),
        "{}",
        &tools[..80]
    );
    let marks = incomplete(&records);
    assert_eq!(marks.len(), 1, "{marks:?}");
    assert!(
        marks[0].starts_with("tools[0] cannot be read as a value"),
        "{marks:?}"
    );
    // The answer itself was recorded whole.
    assert_eq!(records.last().unwrap().event.kind(), "TokenUsage");
    assert!(records.iter().any(|r| r.event.kind() == "Output"));
}

/// 28.5: "after a malformed event the rest of a stream is forwarded but not recorded": the
/// events after it are recorded, and the call says one event could not be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_event_costs_that_event_only_and_is_marked() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording(&upstream, dir.path()).await;
    let body = serde_json::json!({"model": "tiny", "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "MALFORMED please"}]})
    .to_string();
    let response = post(&proxy.chat_url(Some("bad")), body).await;
    let got = response.bytes().await.unwrap();
    // The caller gets every byte, the bad event included.
    assert!(got
        .windows(MALFORMED_EVENT.len())
        .any(|w| w == MALFORMED_EVENT.as_bytes()));
    proxy.proxy.settled("bad").await;
    let records = proxy.records("bad");
    let outputs: String = records
        .iter()
        .filter_map(|r| match &r.event {
            SessionEvent::Output { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        outputs,
        joined(&blocks_of_sse(&fixture("stream-basic.body")), false)
    );
    let marks = incomplete(&records);
    assert_eq!(marks.len(), 1, "{marks:?}");
    assert!(
        marks[0].starts_with("1 event(s) of the stream could not be decoded"),
        "{marks:?}"
    );
    assert!(records.iter().any(|r| r.event
        == SessionEvent::CallFinish {
            finish_reason: Some("length".into()),
            model: "cuca-tiny-random".into()
        }));
    assert_eq!(
        records.last().unwrap().event,
        SessionEvent::TokenUsage {
            prompt_tokens: 40,
            completion_tokens: 12
        }
    );
}

/// 28.6: "a LangChain call that sent only `max_completion_tokens` is recorded with a
/// `max_tokens` too [...] Record exactly what was sent."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_are_recorded_exactly_as_the_caller_sent_them() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording(&upstream, dir.path()).await;
    let body = r#"{"model":"tiny","stream":true,"max_completion_tokens":12,"temperature":0.7,"messages":[{"role":"user","content":"Hi"}]}"#;
    post(&proxy.chat_url(Some("lc")), body.into())
        .await
        .bytes()
        .await
        .unwrap();
    proxy.proxy.settled("lc").await;
    let (parameters, _) = call_request(&proxy.records("lc"));
    assert_eq!(
        parameters,
        r#"{"max_completion_tokens":12,"temperature":0.7}"#
    );
}

/// 28.7: "ids `.`, `..`, `...` pass the proxy's check but `FileBackend` refuses them, so the
/// call goes upstream and the caller gets a 500; a session another process holds likewise.
/// Check everything that can be checked before forwarding."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_cannot_be_recorded_is_refused_before_it_is_forwarded() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording(&upstream, dir.path()).await;
    let body = serde_json::json!({"model": "tiny", "stream": true,
        "messages": [{"role": "user", "content": "Hi"}]})
    .to_string();
    for id in [".", "..", "..."] {
        let response = client()
            .post(proxy.chat_url(None))
            .header("content-type", "application/json")
            .header("x-cuca-session", id)
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{id:?}");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["code"], "cuca_invalid_session", "{id:?}");
    }
    assert_eq!(upstream.calls(), 0);

    // Another writer holds the session's lock (a second FileBackend: its own open file, as
    // another process would have).
    let holder = FileBackend::new(dir.path().join("sessions")).unwrap();
    let held =
        SessionLogPlugin::new(Arc::new(holder) as Arc<dyn SessionBackend>).with_session_id("held");
    held.append_log(SessionEvent::Output {
        text: "mine".into(),
    })
    .unwrap();
    let response = post(&proxy.chat_url(Some("held")), body).await;
    assert_eq!(response.status(), 409);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "cuca_session_locked");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("was not forwarded"),
        "{error}"
    );
    assert_eq!(upstream.calls(), 0);
    let end = proxy.rows();
    assert!(
        end.is_empty(),
        "nothing was called, so nothing is logged: {end:?}"
    );
}

/// 28.2: "nothing closes the open turn on restart. The next call's records join it, and
/// replaying that next call is a 409". A call left open (its recorder killed: here its records
/// written as a killed proxy leaves them) is closed before the session's next call; the agent
/// retries the cut call and goes on, and replay answers both calls as they were answered live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_left_open_by_a_killed_proxy_is_closed_before_the_next_call() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let system = "You are terse.";
    let first = "The vault is in Lisbon. Reply with: noted";
    {
        let killed = SessionLogPlugin::new(Arc::new(
            FileBackend::new(dir.path().join("sessions")).unwrap(),
        ) as Arc<dyn SessionBackend>)
        .with_session_id("k")
        .with_call_metadata(true);
        let request = cuca_events::UnifiedRequest::new(vec![
            cuca_events::Message::system(system),
            cuca_events::Message::user(first),
        ]);
        killed.record_request_with(&request, "{}").unwrap();
        killed
            .append_log(SessionEvent::Output {
                text: "phas".into(),
            })
            .unwrap();
    }
    let proxy = recording(&upstream, dir.path()).await;
    let retry = serde_json::json!({"model": "tiny", "stream": true,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": first}]});
    let next = serde_json::json!({"model": "tiny", "stream": true,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": first},
                     {"role": "assistant", "content": "noted"},
                     {"role": "user", "content": "Where is the vault? Answer in one word."}]});
    let mut live = Vec::new();
    for body in [&retry, &next] {
        let got = post(&proxy.chat_url(Some("k")), body.to_string())
            .await
            .bytes()
            .await
            .unwrap();
        live.push(joined(&blocks_of_sse(&got), false));
        proxy.proxy.settled("k").await;
    }
    let kinds = proxy.kinds("k");
    assert_eq!(
        &kinds[..10],
        [
            "SystemPrompt",
            "Message",
            "CallRequest",
            "RequestDigest",
            "Output",
            "CallIncomplete",
            "CallFinish",
            "Latency",
            "TokenUsage",
            "SystemPrompt"
        ]
    );
    drop(proxy);
    upstream.stop().await;

    let replay = replaying(dir.path()).await;
    for (body, live) in [&retry, &next].into_iter().zip(&live) {
        let response = post(&replay.chat_url(Some("k")), body.to_string()).await;
        assert_eq!(response.status(), 200, "{body}");
        assert_eq!(
            &joined(&blocks_of_sse(&response.bytes().await.unwrap()), false),
            live
        );
    }
}

/// 28.3: "On a full disk the caller gets the whole answer, the session keeps [some] blocks in
/// an open turn, the call-log end row says `finish: stop` with no error [...]. A recording that
/// failed must say so where people look." A megabyte answer recorded onto a 128 KiB tmpfs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_mid_answer_is_said_in_the_call_log_and_the_session_is_closed_next() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let Some(_mount) = Tmpfs::mount(&dir.path().join("sessions"), "128k") else {
        return;
    };
    let proxy = recording(&upstream, dir.path()).await;
    let body = serde_json::json!({"model": "tiny", "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "HUGE answer"}]});
    let response = post(&proxy.chat_url(Some("full")), body.to_string()).await;
    assert_eq!(response.status(), 200);
    let got = response.bytes().await.unwrap();
    // The caller got the whole answer.
    let text = joined(&blocks_of_sse(&got), false);
    assert_eq!(text.len(), HUGE_EVENTS * 1000);
    proxy.proxy.settled("full").await;

    let end = proxy
        .rows()
        .into_iter()
        .find(|r| r.node == "full" && r.phase.is_empty())
        .unwrap();
    assert_eq!(end.finish, "length");
    assert!(
        end.error
            .starts_with("the session does not hold this call in full: block "),
        "{end:?}"
    );
    // What reached the disk reads back, and its call is not closed as if whole.
    let records = proxy.records("full");
    assert!(records.len() < HUGE_EVENTS, "{} records", records.len());
    assert!(!records.iter().any(|r| matches!(
        &r.event,
        SessionEvent::CallFinish {
            finish_reason: Some(_),
            ..
        }
    )));

    // The next call finds the disk still full: it is refused before it is forwarded.
    let calls_before = upstream.calls();
    let next = post(&proxy.chat_url(Some("full")), body.to_string()).await;
    assert_eq!(next.status(), 500);
    assert_eq!(upstream.calls(), calls_before);
}

/// A tmpfs mounted for one test and unmounted when dropped; `None` (with a line saying why)
/// where mounting is not allowed.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(path: &std::path::Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(path).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(path)
            .output();
        match mounted {
            Ok(out) if out.status.success() => Some(Tmpfs(path.to_owned())),
            Ok(out) => {
                eprintln!(
                    "skipping the full-disk test: mounting a tmpfs needs root ({})",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
                None
            }
            Err(error) => {
                eprintln!("skipping the full-disk test: cannot run mount ({error})");
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// A replayed call whose recording is marked incomplete (here the only call at its position,
/// cut by a caller that hung up) is served with `X-Cuca-Incomplete` saying why; a whole one
/// carries no such header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_incomplete_call_says_so_in_a_header() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording(&upstream, dir.path()).await;
    let hang = serde_json::json!({"model": "tiny", "stream": true,
        "messages": [{"role": "user", "content": "HANG please"}]});
    let mut response = post(&proxy.chat_url(Some("cut")), hang.to_string()).await;
    response.chunk().await.unwrap().unwrap();
    upstream.hang_started.notified().await;
    drop(response);
    let whole = serde_json::json!({"model": "tiny", "stream": true,
        "messages": [{"role": "user", "content": "Say hi"}]});
    post(&proxy.chat_url(Some("whole")), whole.to_string())
        .await
        .bytes()
        .await
        .unwrap();
    tokio::time::timeout(
        std::time::Duration::from_secs(30),
        upstream.hang_dropped.notified(),
    )
    .await
    .unwrap();
    proxy.proxy.settled("cut").await;
    proxy.proxy.settled("whole").await;
    drop(proxy);

    let replay = replaying(dir.path()).await;
    let cut = post(&replay.chat_url(Some("cut")), hang.to_string()).await;
    assert_eq!(cut.status(), 200);
    let why = cut.headers()[cuca_proxy::INCOMPLETE_HEADER]
        .to_str()
        .unwrap();
    assert!(why.starts_with("cut short: the caller hung up"), "{why}");
    let whole = post(&replay.chat_url(Some("whole")), whole.to_string()).await;
    assert_eq!(whole.status(), 200);
    assert!(whole.headers().get(cuca_proxy::INCOMPLETE_HEADER).is_none());
}
