//! A fork run in a restored copy of the workspace: the live model sees the copy's path (the
//! proxy forwards the agent's own bytes) and names it in its answer, but the fork is recorded
//! naming the recorded workspace, as its requests are, so a replay of the fork in any other
//! copy hands that copy's path to its agent, never the first copy's.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod support;

use cuca_events::{SessionBackend, SessionEvent};
use cuca_proxy::{Aliases, Mode, ProxyConfig, SESSION_HEADER};
use serde_json::json;
use support::*;

/// The recorded workspace, and two restored copies of it. The copies' paths hold a space, so
/// the stand-in upstream (one streamed event per word) splits a path across two events.
const WORKSPACE: &str = "/work/app";
const FIRST_COPY: &str = "/tmp/cuca run 1";
const SECOND_COPY: &str = "/tmp/cuca run 2";

/// What an agent working in `dir` sends: its working directory in the system prompt, and a
/// question naming a file by absolute path.
fn asked_in(dir: &str, question: &str) -> String {
    json!({"model": "tiny", "stream": true, "messages": [
        {"role": "system", "content": format!("cwd {dir}")},
        {"role": "user", "content": question},
    ]})
    .to_string()
}

async fn ask(url: &str, body: String) -> (String, String) {
    let response = client().post(url).body(body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let session = response.headers()[SESSION_HEADER]
        .to_str()
        .unwrap()
        .to_owned();
    let answer = joined(&blocks_of_sse(&response.bytes().await.unwrap()), false);
    (session, answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_in_a_copy_is_recorded_naming_the_workspace_and_replays_in_another_copy() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    // The run as recorded, in the workspace itself.
    let recording = recording(&upstream, dir.path()).await;
    ask(
        &recording.chat_url(Some("run")),
        asked_in(WORKSPACE, "Name the file"),
    )
    .await;
    recording.proxy.settled_all().await;
    drop(recording);

    // A fork run in the first copy: the changed question goes live.
    let forking = start(
        ProxyConfig::new(Mode::Fork, Some(upstream.url.clone())).unwrap(),
        dir.path(),
    )
    .await;
    assert!(forking
        .proxy
        .read_requests_with(Aliases::workspace(FIRST_COPY, WORKSPACE)));
    let question = |copy: &str| format!("Name the owner of {copy}/src/main.rs");
    let (fork, live) = ask(
        &forking.chat_url(Some("run")),
        asked_in(FIRST_COPY, &question(FIRST_COPY)),
    )
    .await;
    // The agent got the model's answer as sent, naming the copy it runs in.
    assert_eq!(live, answer_to(&question(FIRST_COPY), 1));
    assert_ne!(fork, "run");
    forking.proxy.settled_all().await;
    drop(forking);

    // The fork names the workspace, in its request and in its answer.
    let backend = cuca_store_file::FileBackend::new(dir.path().join("sessions")).unwrap();
    let records = backend.replay(&fork).unwrap();
    let text = format!("{records:?}");
    assert!(!text.contains(FIRST_COPY), "{text}");
    let output: String = records
        .iter()
        .filter_map(|record| match &record.event {
            SessionEvent::Output { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(output, answer_to(&question(WORKSPACE), 1));
    drop(backend);

    // Replayed in a second copy, the fork's answer names the second copy.
    let replaying = start(ProxyConfig::new(Mode::Replay, None).unwrap(), dir.path()).await;
    assert!(replaying
        .proxy
        .read_requests_with(Aliases::workspace(SECOND_COPY, WORKSPACE)));
    let (_, replayed) = ask(
        &replaying.chat_url(Some("run")),
        asked_in(SECOND_COPY, &question(SECOND_COPY)),
    )
    .await;
    assert_eq!(replayed, answer_to(&question(SECOND_COPY), 1));
    upstream.stop().await;
}
