//! What a recording proxy keeps in memory does not grow with what its calls carried: 1,500
//! one-question conversations of 200 KB each (300 MB of prompts) leave the process's resident
//! memory within 64 MiB of where it started. The proxy used to keep every conversation's
//! messages for its lifetime (446 MB at this size). A file of its own, so no other test's
//! memory is counted.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use axum::body::{Body, Bytes};
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use serde_json::json;
use support::{client, recording_at};

/// Conversations recorded, and the bytes of each one's question: the sizes the proxy was
/// seen to keep whole.
const CONVERSATIONS: usize = 1_500;
const QUESTION_BYTES: usize = 200 * 1024;

/// The most the resident set may grow.
const MAX_GROWTH_BYTES: u64 = 64 << 20;

/// This process's resident set, from `/proc/self/status`.
fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    kib * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifteen_hundred_conversations_of_200_kb_leave_memory_bounded() {
    if !std::path::Path::new("/proc/self/status").exists() {
        return;
    }
    // An upstream that answers every call the same, reading nothing of it.
    let answer = json!({"id": "m", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "ok"}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
    .to_string();
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move |_: Bytes| {
            let answer = answer.clone();
            async move {
                Response::builder()
                    .header("content-type", "application/json")
                    .body(Body::from(answer))
                    .unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let dir = tempfile::tempdir().unwrap();
    let proxy = recording_at(&upstream, dir.path()).await;
    let url = proxy.chat_url(Some("eval"));
    let filler = "x".repeat(QUESTION_BYTES);
    let http = client();
    let mut before = 0;
    for n in 0..CONVERSATIONS {
        let body = json!({"model": "m", "messages": [
            {"role": "user", "content": format!("Question {n}: {filler}")}
        ]})
        .to_string();
        let response = http.post(&url).body(body).send().await.unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
        // Measured after a few calls, once the runtime, the client and the writer are warm.
        if n == 20 {
            before = resident_bytes();
        }
    }
    proxy.proxy.settled_all().await;
    let growth = resident_bytes().saturating_sub(before);
    assert!(
        growth < MAX_GROWTH_BYTES,
        "the resident set grew by {} MiB over {CONVERSATIONS} conversations of {} KiB",
        growth >> 20,
        QUESTION_BYTES >> 10
    );
}
