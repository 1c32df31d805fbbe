//! Replay that does not re-read the session per request: the replaying
//! proxy keeps an index of each session's turns, refreshed from the file's tail, so what
//! another process appends after the index was built, a fork made after it, and a file
//! replaced under it are all replayed as they now are.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod support;

use cuca_events::{SessionBackend, SessionEvent};
use cuca_store_file::FileBackend;
use support::*;

async fn post(url: &str, body: Vec<u8>) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let response = client().post(url).body(body).send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.bytes().await.unwrap().to_vec())
}

/// Records `name` into `session` through a recording proxy of its own, as another process
/// would, with the upstream answering `answer` (`X-Test-Answer`) when given.
async fn record_elsewhere(dir: &std::path::Path, session: &str, name: &str, answer: Option<&str>) {
    let upstream = upstream().await;
    let proxy = recording(&upstream, dir).await;
    let mut builder = client()
        .post(proxy.chat_url(Some(session)))
        .body(request(name));
    if let Some(answer) = answer {
        builder = builder.header("X-Test-Answer", answer);
    }
    let response = builder.send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.bytes().await.unwrap();
    drop(proxy);
    upstream.stop().await;
}

/// "Keep an index of each session's turns, refreshed from the file's tail when it grows
/// (another process may be appending)": a turn recorded by another proxy after this one
/// indexed the session is replayed at the next request, with its own answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_appended_by_another_writer_after_indexing_is_replayed_with_its_new_turns() {
    let dir = tempfile::tempdir().unwrap();
    record_elsewhere(dir.path(), "demo", "stream-basic", None).await;
    let replay = replaying(dir.path()).await;
    let (status, headers, _) = post(&replay.chat_url(Some("demo")), request("stream-basic")).await;
    assert_eq!(
        (status, &headers["x-cuca-turn"]),
        (200, &"1".parse().unwrap())
    );
    // Not recorded yet: a 404, and the session is indexed.
    let (status, _, body) = post(
        &replay.chat_url(Some("demo")),
        request("stream-second-turn"),
    )
    .await;
    assert_eq!(status, 404, "{}", String::from_utf8_lossy(&body));

    record_elsewhere(dir.path(), "demo", "stream-second-turn", None).await;
    let (status, headers, body) = post(
        &replay.chat_url(Some("demo")),
        request("stream-second-turn"),
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(headers["x-cuca-turn"], "2");
    assert_eq!(
        blocks_of_sse(&body),
        blocks_of_sse(&fixture("stream-second-turn.body"))
    );
    // The first turn is still served as it was.
    let (status, _, body) = post(&replay.chat_url(Some("demo")), request("stream-basic")).await;
    assert_eq!(status, 200);
    assert_eq!(
        blocks_of_sse(&body),
        blocks_of_sse(&fixture("stream-basic.body"))
    );
}

/// "invalidated correctly when a session is forked": a fork another process makes after the
/// original was indexed is replayed from its own records (and what is recorded into it
/// later), and the original, which gained the fork's audit record, still replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_made_after_indexing_is_seen_and_the_original_still_replays() {
    let dir = tempfile::tempdir().unwrap();
    record_elsewhere(dir.path(), "demo", "stream-basic", None).await;
    record_elsewhere(dir.path(), "demo", "stream-second-turn", None).await;
    let replay = replaying(dir.path()).await;
    for name in ["stream-basic", "stream-second-turn"] {
        assert_eq!(
            post(&replay.chat_url(Some("demo")), request(name)).await.0,
            200
        );
    }

    // Another process forks the original after its first turn.
    let other = FileBackend::new(dir.path().join("sessions")).unwrap();
    let first_end = other
        .replay("demo")
        .unwrap()
        .iter()
        .find(|r| matches!(r.event, SessionEvent::TokenUsage { .. }))
        .unwrap()
        .sequence;
    let fork = other.fork("demo", &format!("demo:{first_end}")).unwrap();
    drop(other);

    let fork_url = replay.chat_url(Some(&fork));
    let (status, headers, body) = post(&fork_url, request("stream-basic")).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(headers["x-cuca-session"], fork.as_str());
    assert_eq!(
        blocks_of_sse(&body),
        blocks_of_sse(&fixture("stream-basic.body"))
    );
    // The fork holds only the first turn: its second is not recorded.
    assert_eq!(post(&fork_url, request("stream-second-turn")).await.0, 404);
    // Recorded into the fork later, with another answer: replayed from the fork.
    record_elsewhere(dir.path(), &fork, "stream-second-turn", Some("tools")).await;
    let (status, _, body) = post(&fork_url, request("stream-second-turn")).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(blocks_of_sse(&body), blocks_of_sse(TOOL_STREAM.as_bytes()));
    // The original kept both turns and its own answers.
    let (status, headers, body) = post(
        &replay.chat_url(Some("demo")),
        request("stream-second-turn"),
    )
    .await;
    assert_eq!(
        (status, &headers["x-cuca-session"]),
        (200, &"demo".parse().unwrap())
    );
    assert_eq!(
        blocks_of_sse(&body),
        blocks_of_sse(&fixture("stream-second-turn.body"))
    );
}

/// "invalidated correctly when a session is … truncated/repaired": a session file replaced
/// under the index (as `cuca repair` renames its repaired file over it) is indexed anew, so
/// its new answer is served and a turn it no longer holds is a 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_replaced_after_indexing_is_indexed_anew() {
    let dir = tempfile::tempdir().unwrap();
    record_elsewhere(dir.path(), "demo", "stream-basic", None).await;
    record_elsewhere(dir.path(), "demo", "stream-second-turn", None).await;
    let replay = replaying(dir.path()).await;
    for name in ["stream-basic", "stream-second-turn"] {
        assert_eq!(
            post(&replay.chat_url(Some("demo")), request(name)).await.0,
            200
        );
    }
    let elsewhere = tempfile::tempdir().unwrap();
    record_elsewhere(elsewhere.path(), "demo", "stream-basic", Some("tools")).await;
    std::fs::rename(
        elsewhere.path().join("sessions/demo.cslog"),
        dir.path().join("sessions/demo.cslog"),
    )
    .unwrap();
    let (status, _, body) = post(&replay.chat_url(Some("demo")), request("stream-basic")).await;
    assert_eq!(status, 200);
    assert_eq!(blocks_of_sse(&body), blocks_of_sse(TOOL_STREAM.as_bytes()));
    let (status, _, _) = post(
        &replay.chat_url(Some("demo")),
        request("stream-second-turn"),
    )
    .await;
    assert_eq!(status, 404);
}
