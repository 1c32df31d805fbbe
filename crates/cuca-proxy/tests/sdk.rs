//! The proxy's proof with an OpenAI SDK nobody here wrote: the Python `openai` package
//! (pinned in `.ci/run`, which makes the virtual environment and sets `CUCA_TEST_PYTHON`)
//! records through the proxy against the committed llama-server transcripts, then the same
//! script runs against a replaying proxy with the upstream stopped.
//!
//! Without `CUCA_TEST_PYTHON` (a developer's `cargo test`), the SDK part is skipped with a
//! line saying why, and the same flow runs with reqwest as the caller; under `CI` a missing
//! interpreter fails the test, so CI cannot pass without the SDK having run.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use support::*;

const KEY: &str = "sk-sdk-secret-91f2";

fn python() -> Option<PathBuf> {
    match std::env::var_os("CUCA_TEST_PYTHON") {
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(
                path.exists(),
                "CUCA_TEST_PYTHON={} does not exist; .ci/run creates it with `python3 -m venv` and pip install openai",
                path.display()
            );
            Some(path)
        }
        None if std::env::var_os("CI").is_some() => panic!(
            "CI is set but CUCA_TEST_PYTHON is not: the proxy's proof needs the openai SDK in the virtual environment .ci/run creates (target/py-venv)"
        ),
        None => {
            eprintln!(
                "skipping the openai SDK part: CUCA_TEST_PYTHON is not set (.ci/run sets it to a venv with the pinned openai package); running the same flow with reqwest"
            );
            None
        }
    }
}

async fn drive(python: &Path, phase: &str, proxy: &str) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/drive.py");
    let overflow = fixtures_dir().join("error-context-overflow.request.json");
    let mut command = std::process::Command::new(python);
    command.arg(script).arg(phase).arg(proxy).arg(overflow);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        output.status.success(),
        "drive.py {phase} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn text_of(name: &str) -> String {
    joined(&blocks_of_sse(&fixture(&format!("{name}.body"))), false)
}

fn reasoning_of(name: &str) -> String {
    joined(&blocks_of_sse(&fixture(&format!("{name}.body"))), true)
}

fn nonstream(name: &str, field: &str) -> Value {
    let body: Value = serde_json::from_slice(&fixture(&format!("{name}.body"))).unwrap();
    body["choices"][0]["message"][field].clone()
}

fn assert_no_key_on_disk(dir: &Path) {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out)
            } else {
                out.push(path)
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, &mut files);
    assert!(!files.is_empty());
    for file in files {
        let bytes = std::fs::read(&file).unwrap();
        assert!(
            !bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
            "{} holds the API key",
            file.display()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_openai_python_sdk_records_through_the_proxy_and_replays_offline() {
    let Some(python) = python() else {
        return reqwest_flow().await;
    };
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream().await;
    let proxy = recording(&upstream, dir.path()).await;
    let record = drive(&python, "record", &proxy.url).await;
    eprintln!("openai {}", record["openai"]);

    // Streamed and non-streamed answers, reasoning content and usage, as the SDK parsed them.
    let basic = &record["basic"];
    assert_eq!(basic["text"], text_of("stream-basic"));
    assert_eq!(basic["finish"], "length");
    assert_eq!(basic["usage"], serde_json::json!([40, 12]));
    assert_eq!(basic["session"], "sdk-basic");
    assert_eq!(basic["point"], "sdk-basic:0");
    assert_eq!(record["second"]["text"], text_of("stream-second-turn"));
    assert_eq!(
        record["whole"]["text"],
        nonstream("nonstream-basic", "content")
    );
    assert_eq!(
        record["reasoning"]["reasoning"],
        reasoning_of("stream-reasoning")
    );
    assert_eq!(record["reasoning"]["text"], "");
    assert_eq!(
        record["whole_reasoning"]["reasoning"],
        nonstream("nonstream-reasoning", "reasoning_content")
    );
    assert_eq!(record["no_usage"]["text"], text_of("stream-no-usage"));
    assert_eq!(record["no_usage"]["usage"], Value::Null);

    // "A decoded [DONE] (or the finish and usage seen) ends the turn as
    // answered": each of the twenty SDK streams that hung up at `[DONE]`, 2 ms before the
    // upstream ended its body, is recorded whole, and its call-log row is not `cancelled`.
    let gaps = record["gap"].as_array().unwrap();
    assert_eq!(gaps.len(), 20);
    let rows = proxy.rows();
    for (i, call) in gaps.iter().enumerate() {
        let session = format!("sdk-gap{i}");
        assert_eq!(call["usage"], serde_json::json!([40, 12]), "{session}");
        proxy.proxy.settled(&session).await;
        let records = proxy.records(&session);
        assert!(
            records.iter().all(|r| r.event.kind() != "CallIncomplete"),
            "{session}: {records:?}"
        );
        let finish = records.iter().find_map(|r| match &r.event {
            cuca_events::SessionEvent::CallFinish { finish_reason, .. } => {
                Some(finish_reason.clone())
            }
            _ => None,
        });
        assert_eq!(finish, Some(Some("length".to_owned())), "{session}");
        assert_eq!(
            records.last().map(|r| r.event.clone()),
            Some(cuca_events::SessionEvent::TokenUsage {
                prompt_tokens: 40,
                completion_tokens: 12
            }),
            "{session}"
        );
        let end = rows
            .iter()
            .find(|r| r.node == session && r.phase.is_empty())
            .unwrap();
        assert_eq!(end.ended, "", "{session}: {end:?}");
        assert_eq!(end.finish, "length", "{session}");
        assert_eq!(end.completion_tokens, 12, "{session}");
    }

    // The two 400s reach the SDK as the upstream wrote them.
    let overflow = &record["overflow"];
    assert_eq!(overflow["class"], "BadRequestError");
    assert_eq!(overflow["status"], 400);
    assert_eq!(overflow["type"], "exceed_context_size_error");
    assert_eq!(record["bad_json"]["status"], 400);
    let bad_json: Value = serde_json::from_slice(&fixture("error-bad-json.body")).unwrap();
    assert_eq!(record["bad_json"]["body"], bad_json);

    // The caller that hung up mid-stream cancelled the upstream call.
    tokio::time::timeout(Duration::from_secs(30), upstream.hang_dropped.notified())
        .await
        .expect("closing the SDK's stream did not close the upstream connection");
    proxy.proxy.settled("sdk-hang").await;
    let hang_end = proxy
        .rows()
        .into_iter()
        .find(|r| r.node == "sdk-hang" && r.phase.is_empty())
        .unwrap();
    assert_eq!(hang_end.ended, "cancelled");

    assert_eq!(record["models"], serde_json::json!(["cuca-tiny-random"]));

    // 16 concurrent SDK clients on 16 sessions.
    let sixteen = record["sixteen"].as_array().unwrap();
    assert_eq!(sixteen.len(), 16);
    for (i, call) in sixteen.iter().enumerate() {
        assert_eq!(call["text"], text_of("stream-basic"));
        assert_eq!(call["session"], format!("sdk-c{i}"));
        assert_eq!(
            proxy.kinds(&format!("sdk-c{i}")).last(),
            Some(&"TokenUsage")
        );
    }
    assert_no_key_on_disk(dir.path());

    // The same script, replaying, with the upstream stopped.
    drop(proxy);
    upstream.stop().await;
    let replay_proxy = replaying(dir.path()).await;
    let replay = drive(&python, "replay", &replay_proxy.url).await;
    for key in [
        "basic",
        "second",
        "whole",
        "reasoning",
        "whole_reasoning",
        "no_usage",
    ] {
        for field in ["text", "reasoning", "finish", "usage"] {
            assert_eq!(replay[key][field], record[key][field], "{key}.{field}");
        }
    }
    assert_eq!(replay["whole"]["model"], record["whole"]["model"]);
    // Replayed, the twenty streams get the usage they got live (not `completion_tokens: 0`).
    for (live, replayed) in gaps.iter().zip(replay["gap"].as_array().unwrap()) {
        assert_eq!(replayed["usage"], live["usage"]);
        assert_eq!(replayed["text"], live["text"]);
    }
    for call in replay["sixteen"].as_array().unwrap() {
        assert_eq!(call["text"], text_of("stream-basic"));
    }
    // A changed prompt gets the 409; an unknown session and a turn past the end the 404.
    let changed = &replay["changed"];
    assert_eq!(changed["class"], "ConflictError");
    assert_eq!(changed["status"], 409);
    assert_eq!(changed["param"], "messages[1]");
    let message = changed["message"].as_str().unwrap();
    assert!(
        message.contains("expected user \"The vault is in Lisbon"),
        "{message}"
    );
    assert!(
        message.contains("got user \"The vault is in Porto"),
        "{message}"
    );
    assert_eq!(replay["unknown"]["class"], "NotFoundError");
    assert_eq!(replay["unknown"]["code"], "cuca_session_not_found");
    assert_eq!(replay["past_end"]["status"], 404);
    assert_eq!(replay["past_end"]["code"], "cuca_turn_not_found");
}

/// The flow without the SDK: record a streamed call and a second turn with reqwest, then
/// replay them with the upstream stopped, and change the prompt.
async fn reqwest_flow() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream().await;
    let proxy = recording(&upstream, dir.path()).await;
    let mut recorded = Vec::new();
    for (session, name) in [
        ("flow", "stream-basic"),
        ("flow", "stream-second-turn"),
        ("flow-whole", "nonstream-basic"),
    ] {
        let response = client()
            .post(proxy.chat_url(Some(session)))
            .bearer_auth(KEY)
            .body(request(name))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        recorded.push(response.bytes().await.unwrap());
    }
    assert_no_key_on_disk(dir.path());
    drop(proxy);
    upstream.stop().await;
    let replay = replaying(dir.path()).await;
    for (name, got) in ["stream-basic", "stream-second-turn"].iter().zip(&recorded) {
        let response = client()
            .post(replay.chat_url(Some("flow")))
            .body(request(name))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let again = response.bytes().await.unwrap();
        assert_eq!(blocks_of_sse(&again), blocks_of_sse(got), "{name}");
    }
    let mut changed: Value = serde_json::from_slice(&request("stream-basic")).unwrap();
    changed["messages"][1]["content"] = Value::String("The vault is in Porto.".into());
    let response = client()
        .post(replay.chat_url(Some("flow")))
        .json(&changed)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 409);
}

async fn agent(python: &Path, proxy: &str, session: &str, result: &str) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/tools.py");
    let mut command = std::process::Command::new(python);
    command.arg(script).arg(proxy).arg(session).arg(result);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        output.status.success(),
        "tools.py failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Replay and fork mode through the real SDK: "the changed-tool replay gets a 409 naming the tool
/// result; with `--ignore` the volatile part is ignored and the replay matches; in fork mode
/// the changed-tool run forks at the tool result, the live upstream answers only the calls
/// from the divergence on (counted)".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_whose_tool_changed_is_refused_matched_when_ignored_and_forked_in_fork_mode() {
    let Some(python) = python() else {
        return;
    };
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let recorded = {
        let proxy = recording(&upstream, dir.path()).await;
        let seen = agent(&python, &proxy.url, "tool", "ALPHA").await;
        proxy.proxy.settled("tool").await;
        seen
    };
    assert_eq!(recorded["tool_calls"], 1, "{recorded}");
    let text = recorded["text"].as_str().unwrap().to_owned();
    {
        let replay = replaying(dir.path()).await;
        let same = agent(&python, &replay.url, "tool", "ALPHA").await;
        assert_eq!(same["text"], text.as_str(), "{same}");
        let changed = agent(&python, &replay.url, "tool", "BETA").await;
        assert_eq!(changed["status"], 409, "{changed}");
        let message = changed["message"].as_str().unwrap();
        assert!(
            message.contains("ALPHA") && message.contains("BETA"),
            "{message}"
        );
    }
    {
        let mut config = cuca_proxy::ProxyConfig::new(cuca_proxy::Mode::Replay, None).unwrap();
        config.ignore.push("ALPHA|BETA".into());
        let lenient = start(config, dir.path()).await;
        let ignored = agent(&python, &lenient.url, "tool", "BETA").await;
        assert_eq!(ignored["text"], text.as_str(), "{ignored}");
    }
    let before = upstream.calls();
    let config =
        cuca_proxy::ProxyConfig::new(cuca_proxy::Mode::Fork, Some(upstream.url.clone())).unwrap();
    let forking = start(config, dir.path()).await;
    let forked = agent(&python, &forking.url, "tool", "BETA").await;
    let session = forked["session"].as_str().unwrap();
    assert!(session.starts_with("tool:fork:tool:"), "{forked}");
    // The first call (unchanged) was replayed; only the call with the new result went live.
    assert_eq!(upstream.calls(), before + 1);
}
