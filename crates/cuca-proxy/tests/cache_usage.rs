//! A Claude Code call through the recording proxy whose upstream sends the cache usage a real
//! Anthropic answer sends (26 input, 1,201 cache-creation tokens split 5-minute/1-hour, 3,401
//! cache-read): every kind is in the session, structured, the call-log row is priced from
//! them, and replay answers with the usage as sent; and a Responses answer's cached and
//! reasoning tokens the same way.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod support;

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use cuca_events::{SessionEvent, TokenDetail};
use cuca_wire::Format;
use serde_json::{json, Value};
use support::*;

/// Claude Code's answer: the usage in `message_start` and again, cumulative, in
/// `message_delta`, as Anthropic sends it.
fn anthropic_stream() -> String {
    let usage = |output: u64| {
        json!({
            "input_tokens": 26,
            "cache_creation_input_tokens": 1201,
            "cache_read_input_tokens": 3401,
            "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 201},
            "output_tokens": output,
            "service_tier": "standard",
        })
    };
    let events = [
        (
            "message_start",
            json!({"type":"message_start","message":{"id":"msg_01Cache","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":usage(1)}}),
        ),
        (
            "content_block_start",
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"The vault is in Lisbon."}}),
        ),
        (
            "content_block_stop",
            json!({"type":"content_block_stop","index":0}),
        ),
        (
            "message_delta",
            json!({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":usage(57)}),
        ),
        ("message_stop", json!({"type":"message_stop"})),
    ];
    events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect()
}

/// A Responses answer that read 1,920 of 2,048 prompt tokens from the cache and reasoned 256
/// of its 300 output tokens.
fn responses_stream() -> String {
    let response = |status: &str, usage: Option<Value>| {
        let mut r = json!({"id":"resp_cache","object":"response","created_at":1,"status":status,"model":"o4-mini","output":[]});
        if let Some(usage) = usage {
            r["usage"] = usage;
            r["output"] = json!([{"type":"message","id":"msg_r","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Lisbon.","annotations":[]}]}]);
        }
        r
    };
    let usage = json!({"input_tokens":2048,"input_tokens_details":{"cached_tokens":1920},"output_tokens":300,"output_tokens_details":{"reasoning_tokens":256},"total_tokens":2348});
    let events = [
        (
            "response.created",
            json!({"type":"response.created","sequence_number":0,"response":response("in_progress", None)}),
        ),
        (
            "response.output_item.added",
            json!({"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"msg_r","status":"in_progress","role":"assistant","content":[]}}),
        ),
        (
            "response.output_text.delta",
            json!({"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_r","output_index":0,"content_index":0,"delta":"Lisbon."}),
        ),
        (
            "response.output_item.done",
            json!({"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":{"type":"message","id":"msg_r","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Lisbon.","annotations":[]}]}}),
        ),
        (
            "response.completed",
            json!({"type":"response.completed","sequence_number":4,"response":response("completed", Some(usage))}),
        ),
    ];
    events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect()
}

/// An upstream that answers every Messages call with [`anthropic_stream`] and every
/// Responses call with [`responses_stream`].
async fn scripted_upstream() -> String {
    let sse = |body: String| -> Response {
        Response::builder()
            .status(StatusCode::OK)
            .header("Content-Type", "text/event-stream")
            .body(Body::from(body))
            .unwrap()
    };
    let app = Router::new()
        .route(
            "/v1/messages",
            post(move || async move { sse(anthropic_stream()) }),
        )
        .route(
            "/v1/responses",
            post(move || async move { sse(responses_stream()) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// Claude Code's betas, the 1M-context one among them: it decides the price of a long
/// prompt.
const BETA: &str = "context-1m-2025-08-07,interleaved-thinking-2025-05-14";

/// The call's `CallWire` object of `format`.
fn call_wire(records: &[cuca_events::SessionRecord], format: &str) -> Value {
    records
        .iter()
        .find_map(|r| match &r.event {
            SessionEvent::CallWire { format: f, wire } if f == format => {
                Some(serde_json::from_str(wire).unwrap())
            }
            _ => None,
        })
        .unwrap()
}

async fn send(url: &str, body: &Value) -> (u16, Vec<u8>) {
    let response = client()
        .post(url)
        .header("anthropic-version", "2023-06-01")
        // Sent with every call: the Messages call keeps it, the Responses call does not.
        .header("anthropic-beta", BETA)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.bytes().await.unwrap().to_vec())
}

fn decode(format: Format, body: &[u8]) -> cuca_wire::StreamSummary {
    let mut decoder = format.decoder(false);
    let mut blocks = Vec::new();
    decoder.feed(body, &mut blocks).unwrap();
    decoder.finish(&mut blocks).unwrap()
}

fn details(records: &[cuca_events::SessionRecord]) -> Vec<TokenDetail> {
    records
        .iter()
        .filter_map(|r| match &r.event {
            SessionEvent::TokenDetail(detail) => Some(*detail),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_cache_usage_is_recorded_kind_by_kind_priced_and_replayed_as_sent() {
    let upstream = scripted_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording_at(&upstream, dir.path()).await;
    let body = json!({
        "model": "claude-sonnet-4-5-20250929",
        "max_tokens": 64,
        "stream": true,
        "system": [{"type":"text","text":"You are terse.","cache_control":{"type":"ephemeral"}}],
        "messages": [{"role":"user","content":[{"type":"text","text":"Where is the vault?","cache_control":{"type":"ephemeral","ttl":"1h"}}]}],
    });
    let url = format!("{}/s/cc/v1/messages?beta=true", proxy.url);
    let (status, recorded) = send(&url, &body).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&recorded));
    proxy.proxy.settled("cc").await;

    let records = proxy.records("cc");
    assert_eq!(
        details(&records),
        [TokenDetail {
            input: Some(26),
            output: Some(57),
            cache_read: Some(3_401),
            cache_write: Some(1_201),
            cache_write_5m: Some(1_000),
            cache_write_1h: Some(201),
            ..TokenDetail::default()
        }]
    );
    // The request's betas and cache breakpoints, which the records of its blocks cannot
    // hold, beside the answer's wire fields.
    let wire = call_wire(&records, "messages");
    assert_eq!(
        wire["request"],
        json!({
            "anthropic_beta": BETA,
            "cache_control": [
                {"at": "system[0]", "cache_control": {"type": "ephemeral"}},
                {"at": "messages[0].content[0]", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
            ],
        })
    );
    assert_eq!(wire["id"], "msg_01Cache");
    // Before the closing pair, which stays adjacent; the folded counts are unchanged.
    let kinds: Vec<&str> = records.iter().map(|r| r.event.kind()).collect();
    assert_eq!(
        kinds[kinds.len() - 3..],
        ["TokenDetail", "Latency", "TokenUsage"]
    );
    assert_eq!(
        records.last().unwrap().event,
        SessionEvent::TokenUsage {
            prompt_tokens: 4_628,
            completion_tokens: 57
        }
    );

    // The call log's row is priced from the kinds, and says by what.
    let row = proxy.rows().into_iter().rfind(|r| !r.is_start()).unwrap();
    let expected = 26.0 * 3e-6 + 57.0 * 15e-6 + 3_401.0 * 0.3e-6 + 1_000.0 * 3.75e-6 + 201.0 * 6e-6;
    assert!(
        (row.cost - expected).abs() < 1e-12,
        "{} != {expected}",
        row.cost
    );
    assert!(
        row.cost_source.starts_with("LiteLLM"),
        "{}",
        row.cost_source
    );
    assert_eq!((row.cached_tokens, row.cache_write_tokens), (3_401, 1_201));
    drop(proxy);

    // Replayed offline: the caller gets the usage as it was sent, every kind.
    let replay = replaying(dir.path()).await;
    let (status, replayed) =
        send(&format!("{}/s/cc/v1/messages?beta=true", replay.url), &body).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&replayed));
    let want = decode(Format::Messages, &recorded);
    let got = decode(Format::Messages, &replayed);
    assert_eq!(got.usage, want.usage);
    // The request's part of the record is not the answer's: the replayed answer is the
    // recorded one, wire fields and all.
    assert_eq!(got.wire, want.wire);
    assert_eq!(
        got.usage.unwrap().detail.cache_write_1h,
        Some(201),
        "the 1-hour writes replay apart"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_cached_and_reasoning_tokens_are_recorded_and_replayed_as_sent() {
    let upstream = scripted_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording_at(&upstream, dir.path()).await;
    let body = json!({"model":"o4-mini","stream":true,"input":"Where is the vault?"});
    let (status, recorded) = send(&format!("{}/s/rs/v1/responses", proxy.url), &body).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&recorded));
    proxy.proxy.settled("rs").await;
    // An Anthropic header on a Responses call decides nothing there, and is not kept.
    assert_eq!(
        call_wire(&proxy.records("rs"), "responses").get("request"),
        None
    );
    assert_eq!(
        details(&proxy.records("rs")),
        [TokenDetail {
            prompt: Some(2_048),
            output: Some(300),
            cache_read: Some(1_920),
            reasoning: Some(256),
            ..TokenDetail::default()
        }]
    );
    drop(proxy);
    let replay = replaying(dir.path()).await;
    let (status, replayed) = send(&format!("{}/s/rs/v1/responses", replay.url), &body).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&replayed));
    let got = decode(Format::Responses, &replayed);
    assert_eq!(got.usage, decode(Format::Responses, &recorded).usage);
}
