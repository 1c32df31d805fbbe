//! An upstream that sends an index no real server sends (a content part numbered 4,000,000)
//! in each wire format, driven through a recording proxy: the caller still gets the upstream's
//! bytes, the session says what it could not record, naming the index, and the proxy's memory
//! stays bounded whatever the upstream numbers.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod support;

use axum::body::Body;
use axum::http::header::CONTENT_TYPE;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use cuca_events::SessionEvent;
use cuca_proxy::{Mode, ProxyConfig};
use support::{client, start};

/// The index the hostile events carry: far past any real stream's, far past the decoders'
/// bound, and (before the bound) enough to take a proxy to gigabytes.
const HOSTILE: u64 = 4_000_000;

/// How much the process's peak resident memory may grow over the whole test.
const MAX_GROWTH_KIB: u64 = 64 * 1024;

/// Chat: a tool call numbered `HOSTILE`, between an ordinary text delta and the end.
fn chat_stream() -> String {
    [
        r#"{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}"#.to_owned(),
        format!(r#"{{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":{HOSTILE},"id":"call_1","type":"function","function":{{"name":"f","arguments":"{{}}"}}}}]}},"finish_reason":null}}]}}"#),
        r#"{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#.to_owned(),
        "[DONE]".to_owned(),
    ]
    .iter()
    .map(|data| format!("data: {data}\n\n"))
    .collect()
}

/// Messages: a content block numbered `HOSTILE`, started and given a delta.
fn messages_stream() -> String {
    [
        ("message_start", r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}"#.to_owned()),
        ("content_block_start", format!(r#"{{"type":"content_block_start","index":{HOSTILE},"content_block":{{"type":"text","text":""}}}}"#)),
        ("content_block_delta", format!(r#"{{"type":"content_block_delta","index":{HOSTILE},"delta":{{"type":"text_delta","text":"x"}}}}"#)),
        ("content_block_stop", format!(r#"{{"type":"content_block_stop","index":{HOSTILE}}}"#)),
        ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":1}}"#.to_owned()),
        ("message_stop", r#"{"type":"message_stop"}"#.to_owned()),
    ]
    .iter()
    .map(|(event, data)| format!("event: {event}\ndata: {data}\n\n"))
    .collect()
}

/// Responses: the ~170-byte delta for content part `HOSTILE` of a message item, which the item
/// as done then lists with one part.
fn responses_stream() -> String {
    [
        r#"{"type":"response.created","response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"m","output":[]}}"#.to_owned(),
        r#"{"type":"response.output_item.added","output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}"#.to_owned(),
        format!(r#"{{"type":"response.output_text.delta","output_index":0,"content_index":{HOSTILE},"delta":"x"}}"#),
        r#"{"type":"response.output_item.done","output_index":0,"item":{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"x","annotations":[]}]}}"#.to_owned(),
        r#"{"type":"response.completed","response":{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"m","output":[],"usage":{"input_tokens":3,"output_tokens":1,"total_tokens":4}}}"#.to_owned(),
    ]
    .iter()
    .map(|data| format!("data: {data}\n\n"))
    .collect()
}

/// A hand-made upstream answering each format's route with its hostile stream.
async fn hostile_upstream() -> String {
    fn answer(body: String) -> Response {
        Response::builder()
            .header(CONTENT_TYPE, "text/event-stream")
            .body(Body::from(body))
            .unwrap()
    }
    let app = Router::new()
        .route(
            "/v1/chat/completions",
            post(|| async { answer(chat_stream()) }),
        )
        .route("/v1/messages", post(|| async { answer(messages_stream()) }))
        .route(
            "/v1/responses",
            post(|| async { answer(responses_stream()) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// The process's peak resident set so far, in KiB (`VmHWM` of `/proc/self/status`).
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// One test for the three formats, run one after another, so the peak memory it reads is this
/// test's alone (no other test of this binary runs beside it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_past_the_bound_is_forwarded_said_in_the_session_and_costs_no_memory() {
    let upstream = hostile_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = start(
        ProxyConfig::new(Mode::Record, Some(upstream)).unwrap(),
        dir.path(),
    )
    .await;
    let before = peak_rss_kib();
    let cases = [
        (
            "chat",
            "/v1/chat/completions",
            chat_stream(),
            "tool_calls[].index",
        ),
        ("messages", "/v1/messages", messages_stream(), "index"),
        (
            "responses",
            "/v1/responses",
            responses_stream(),
            "content_index",
        ),
    ];
    for (session, route, sent, field) in cases {
        let body = serde_json::json!({
            "model": "m",
            "stream": true,
            "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}],
            "input": "hi",
        });
        let response = client()
            .post(format!("{}/s/{session}{route}", proxy.url))
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{session}");
        let got = response.bytes().await.unwrap();
        assert_eq!(
            String::from_utf8_lossy(&got),
            sent,
            "{session}: the caller gets the upstream's bytes"
        );
        proxy.proxy.settled(session).await;
        let reasons: Vec<String> = proxy
            .records(session)
            .into_iter()
            .filter_map(|r| match r.event {
                SessionEvent::CallIncomplete { reason } => Some(reason),
                _ => None,
            })
            .collect();
        let named = format!("{field} {HOSTILE} is past {}", cuca_wire::MAX_INDEX);
        assert!(
            reasons.iter().any(|reason| reason.contains(&named)),
            "{session}: {reasons:?}"
        );
    }
    let growth = peak_rss_kib().saturating_sub(before);
    assert!(
        growth < MAX_GROWTH_KIB,
        "the peak resident memory grew by {growth} KiB"
    );
}
