//! The Anthropic Messages and OpenAI Responses routes, driven over HTTP against the
//! stand-in upstream serving llama-server's own transcripts of both: recorded byte for byte
//! into the one session vocabulary, replayed offline in the caller's format with the recorded
//! ids, signatures, stop reason and usage, and refused in the caller's error shape.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod support;

use cuca_events::{MessageContentBlock, SessionEvent};
use cuca_wire::{Format, StreamSummary};
use serde_json::{json, Value};
use support::*;

/// Decodes a whole streamed body of `format`.
fn decode_stream(format: Format, body: &[u8]) -> (Vec<MessageContentBlock>, StreamSummary) {
    let mut decoder = format.decoder(false);
    let mut blocks = Vec::new();
    decoder.feed(body, &mut blocks).unwrap();
    let summary = decoder.finish(&mut blocks).unwrap();
    (blocks, summary)
}

async fn post(
    url: &str,
    body: Vec<u8>,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let mut request = client().post(url).body(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.bytes().await.unwrap().to_vec())
}

const SECRET_KEY: &str = "sk-ant-api03-cuca-SECRET-never-written";

/// "Routes … `POST /v1/messages` (with or without a query string such as `?beta=true`) …
/// Every header is forwarded as today; `x-api-key`, like `Authorization`, reaches the upstream
/// and is written nowhere; `anthropic-version` and `anthropic-beta` pass through."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_code_shaped_call_passes_byte_for_byte_with_its_query_and_headers_and_is_recorded()
{
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording(&upstream, dir.path()).await;
    let (status, headers, got) = post(
        &format!("{}/s/m1/v1/messages?beta=true", proxy.url),
        request("messages-stream"),
        &[
            ("x-api-key", SECRET_KEY),
            ("anthropic-version", "2023-06-01"),
            ("anthropic-beta", "interleaved-thinking-2025-05-14"),
        ],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(headers["x-cuca-session"], "m1");
    assert_eq!(got, fixture("messages-stream.body"));
    let seen = upstream.last();
    assert_eq!(seen.path, "/v1/messages?beta=true");
    assert_eq!(seen.headers["x-api-key"], SECRET_KEY);
    assert_eq!(seen.headers["anthropic-version"], "2023-06-01");
    assert_eq!(
        seen.headers["anthropic-beta"],
        "interleaved-thinking-2025-05-14"
    );
    assert_eq!(seen.body.as_ref(), request("messages-stream").as_slice());

    // "Anthropic's top-level `system` … are `SystemPrompt`s; … text is `Output`."
    let records = proxy.records("m1");
    let kinds: Vec<&str> = records.iter().map(|r| r.event.kind()).collect();
    let n_outputs = kinds.iter().filter(|k| **k == "Output").count();
    let (blocks, summary) = decode_stream(Format::Messages, &got);
    assert_eq!(n_outputs, blocks.len());
    let mut expected = vec!["SystemPrompt", "Message", "CallRequest", "RequestDigest"];
    expected.extend(std::iter::repeat_n("Output", n_outputs));
    expected.extend([
        "CallWire",
        "CallFinish",
        "TokenDetail",
        "Latency",
        "TokenUsage",
    ]);
    assert_eq!(kinds, expected);
    assert_eq!(
        records[0].event,
        SessionEvent::SystemPrompt {
            text: "You are terse.".into()
        }
    );
    match &records[2].event {
        SessionEvent::CallRequest {
            model,
            parameters,
            messages,
            ..
        } => {
            assert_eq!(model, "cuca-tiny-random");
            assert_eq!(parameters, r#"{"max_tokens":12}"#);
            assert_eq!(*messages, 2);
        }
        other => panic!("expected the CallRequest, got {other:?}"),
    }
    let finish = records
        .iter()
        .find_map(|r| match &r.event {
            SessionEvent::CallFinish { finish_reason, .. } => Some(finish_reason.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(finish, summary.finish_reason);
    let usage = summary.usage.clone().unwrap();
    assert!(records.iter().any(|r| r.event
        == SessionEvent::TokenUsage {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
        }));

    // Written nowhere: not in a record, not in the call log.
    drop(proxy);
    for entry in walk(dir.path()) {
        let bytes = std::fs::read(&entry).unwrap();
        assert!(
            !bytes
                .windows(SECRET_KEY.len())
                .any(|w| w == SECRET_KEY.as_bytes()),
            "{} holds the x-api-key",
            entry.display()
        );
    }
    upstream.stop().await;
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Records `request` on `route` in session `session` through a recording proxy, then replays
/// it through a replaying proxy on the same directory with the upstream gone; returns the
/// recorded answer's bytes and the replayed one's.
async fn record_then_replay(
    route: &str,
    session: &str,
    body: Vec<u8>,
) -> (Vec<u8>, Vec<u8>, tempfile::TempDir) {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording(&upstream, dir.path()).await;
    let (status, _, recorded) = post(
        &format!("{}/s/{session}{route}", proxy.url),
        body.clone(),
        &[],
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&recorded));
    proxy.proxy.settled(session).await;
    drop(proxy);
    upstream.stop().await;
    let replay = replaying(dir.path()).await;
    let (status, headers, replayed) =
        post(&format!("{}/s/{session}{route}", replay.url), body, &[]).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&replayed));
    assert_eq!(headers["x-cuca-turn"], "1");
    (recorded, replayed, dir)
}

/// "Replay answers in the wire format the request came in … such that the client cannot
/// tell it from the recorded answer: the same text, … the same thinking blocks **with their
/// signatures** …, the same stop reason and usage."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anthropic_thinking_stream_replays_offline_with_its_signature_stop_reason_and_usage() {
    let (recorded, replayed, _dir) = record_then_replay(
        "/v1/messages",
        "think",
        request("messages-reasoning-stream"),
    )
    .await;
    let (want_blocks, want) = decode_stream(Format::Messages, &recorded);
    let (got_blocks, got) = decode_stream(Format::Messages, &replayed);
    assert!(want_blocks
        .iter()
        .any(|b| matches!(b, MessageContentBlock::Thinking { .. })));
    assert_eq!(got_blocks, want_blocks);
    assert_eq!(got.finish_reason, want.finish_reason);
    assert_eq!(got.usage, want.usage);
    assert_eq!(got.model, want.model);
    assert_eq!(got.wire, want.wire);
    let replayed = String::from_utf8(replayed).unwrap();
    assert!(replayed.contains(SIGNATURE), "{replayed}");
    for event in [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ] {
        assert!(
            replayed.contains(&format!("event: {event}\n")),
            "no {event} in {replayed}"
        );
    }
}

/// "… or message object": a non-streamed call replays as the message object, with the
/// recorded id and text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anthropic_message_object_replays_with_its_id_text_and_usage() {
    let (recorded, replayed, _dir) =
        record_then_replay("/v1/messages", "whole", request("messages-basic")).await;
    let recorded: Value = serde_json::from_slice(&recorded).unwrap();
    let replayed: Value = serde_json::from_slice(&replayed).unwrap();
    for field in ["id", "type", "role", "model", "content", "stop_reason"] {
        assert_eq!(replayed[field], recorded[field], "{field}");
    }
    assert_eq!(
        replayed["usage"]["output_tokens"],
        recorded["usage"]["output_tokens"]
    );
}

/// "… a Responses event stream (`response.created`, `response.output_item.added`,
/// `response.output_text.delta`, …, `response.completed`) or response object."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_responses_stream_and_object_replay_offline_with_their_ids_and_usage() {
    for (fixture_name, session) in [
        ("responses-stream", "rs"),
        ("responses-reasoning-stream", "rr"),
    ] {
        let (recorded, replayed, _dir) =
            record_then_replay("/v1/responses", session, request(fixture_name)).await;
        let (want_blocks, want) = decode_stream(Format::Responses, &recorded);
        let (got_blocks, got) = decode_stream(Format::Responses, &replayed);
        assert!(!want_blocks.is_empty());
        assert_eq!(got_blocks, want_blocks, "{fixture_name}");
        assert_eq!(got.finish_reason, want.finish_reason, "{fixture_name}");
        assert_eq!(got.usage, want.usage, "{fixture_name}");
        assert_eq!(
            got.wire.as_ref().map(|w| w["id"].clone()),
            want.wire.as_ref().map(|w| w["id"].clone()),
            "{fixture_name}"
        );
        let replayed = String::from_utf8(replayed).unwrap();
        for event in [
            "response.created",
            "response.output_item.added",
            "response.completed",
        ] {
            assert!(replayed.contains(event), "no {event} in {replayed}");
        }
    }
    let (recorded, replayed, _dir) =
        record_then_replay("/v1/responses", "ro", request("responses-basic")).await;
    let recorded: Value = serde_json::from_slice(&recorded).unwrap();
    let replayed: Value = serde_json::from_slice(&replayed).unwrap();
    assert_eq!(replayed["id"], recorded["id"]);
    assert_eq!(replayed["object"], "response");
    assert_eq!(
        replayed["output"][0]["content"][0]["text"],
        recorded["output"][0]["content"][0]["text"]
    );
    assert_eq!(
        replayed["usage"]["output_tokens"],
        recorded["usage"]["output_tokens"]
    );
}

/// "Errors in the caller's own shape: an Anthropic-shaped error body on `/v1/messages`, an
/// OpenAI one elsewhere, so each SDK raises its own exception with cuca's message in it."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_has_the_callers_own_error_shape() {
    let (_, _, dir) = record_then_replay("/v1/messages", "shape", request("messages-stream")).await;
    let replay = replaying(dir.path()).await;
    let mut changed: Value = serde_json::from_slice(&request("messages-stream")).unwrap();
    changed["messages"][0]["content"] = json!("Something else entirely.");
    let (status, _, body) = post(
        &format!("{}/s/shape/v1/messages", replay.url),
        serde_json::to_vec(&changed).unwrap(),
        &[],
    )
    .await;
    assert_eq!(status, 409);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("diverges from the recording"));

    let (status, _, body) = post(
        &format!("{}/s/nothing-here/v1/responses", replay.url),
        request("responses-stream"),
        &[],
    )
    .await;
    assert_eq!(status, 404);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["error"]["code"], "cuca_session_not_found");
    assert_eq!(body["error"]["type"], "not_found_error");

    let (status, _, body) = post(
        &format!("{}/s/shape/v1/messages", replay.url),
        b"{not json".to_vec(),
        &[],
    )
    .await;
    assert_eq!(status, 400);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "invalid_request_error");
}

/// "`HEAD /` and `GET /` (a connectivity probe answers 200)", and count_tokens forwarded, or
/// estimated when nothing may reach the network.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_answers_and_count_tokens_is_forwarded_or_estimated() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording(&upstream, dir.path()).await;
    for path in ["/", "/s/probe/"] {
        let head = client()
            .head(format!("{}{path}", proxy.url))
            .send()
            .await
            .unwrap();
        assert_eq!(head.status(), 200, "HEAD {path}");
        let get = client()
            .get(format!("{}{path}", proxy.url))
            .send()
            .await
            .unwrap();
        assert_eq!(get.status(), 200, "GET {path}");
    }
    let (status, _, body) = post(
        &format!("{}/s/ct/v1/messages/count_tokens?beta=true", proxy.url),
        request("messages-count-tokens"),
        &[],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body, fixture("messages-count-tokens.body"));
    assert_eq!(upstream.last().path, "/v1/messages/count_tokens?beta=true");
    // Not a model call: nothing recorded.
    assert!(proxy.records("ct").is_empty());
    drop(proxy);
    upstream.stop().await;

    let replay = replaying(dir.path()).await;
    let (status, _, body) = post(
        &format!("{}/s/ct/v1/messages/count_tokens", replay.url),
        request("messages-count-tokens"),
        &[],
    )
    .await;
    assert_eq!(status, 200);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert!(body["input_tokens"].as_u64().unwrap() >= 1, "{body}");
}

/// "Responses' `previous_response_id` chains are followed so a call lands in its
/// conversation."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_previous_response_id_chain_is_recorded_in_its_conversation_and_replays() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording(&upstream, dir.path()).await;
    let url = format!("{}/s/chain/v1/responses", proxy.url);
    let first = request("responses-basic");
    let (status, _, answer) = post(&url, first.clone(), &[]).await;
    assert_eq!(status, 200);
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    let id = answer["id"].as_str().unwrap().to_owned();
    let second = serde_json::to_vec(&json!({
        "model": "cuca-tiny-random",
        "max_output_tokens": 12,
        "instructions": "You are terse.",
        "previous_response_id": id,
        "input": [{"role": "user", "content": "And where is the key?"}],
    }))
    .unwrap();
    let (status, _, _) = post(&url, second.clone(), &[]).await;
    assert_eq!(status, 200);
    proxy.proxy.settled("chain").await;
    let records = proxy.records("chain");
    // The second call carried its instructions and one message; it is recorded as the
    // fourth message of its conversation (instructions, question, answer, question), the
    // answer it continues included.
    let asked: Vec<u64> = records
        .iter()
        .filter_map(|r| match &r.event {
            SessionEvent::CallRequest { messages, .. } => Some(*messages),
            _ => None,
        })
        .collect();
    assert_eq!(asked, vec![2, 4]);
    let messages: Vec<&cuca_events::Message> = records
        .iter()
        .filter_map(|r| match &r.event {
            SessionEvent::Message(m) => Some(m),
            _ => None,
        })
        .collect();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert_eq!(
        messages[1].role,
        cuca_events::Role::Assistant,
        "{messages:?}"
    );
    assert_eq!(
        messages[1].text(),
        answer["output"][0]["content"][0]["text"].as_str().unwrap()
    );
    assert_eq!(messages[2].text(), "And where is the key?");
    drop(proxy);
    upstream.stop().await;

    let replay = replaying(dir.path()).await;
    let url = format!("{}/s/chain/v1/responses", replay.url);
    let (status, _, _) = post(&url, first, &[]).await;
    assert_eq!(status, 200);
    let (status, headers, body) = post(&url, second, &[]).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(headers["x-cuca-turn"], "2");
    let unknown = serde_json::to_vec(&json!({
        "model": "cuca-tiny-random",
        "previous_response_id": "resp_never_recorded",
        "input": "hello",
    }))
    .unwrap();
    let (status, _, body) = post(&url, unknown, &[]).await;
    assert_eq!(status, 404);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["error"]["code"], "cuca_previous_response_not_found");
}

/// A call recorded in one format answers a caller of another: the blocks are the session's,
/// whichever format wrote them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_recording_replays_to_an_anthropic_caller_as_an_anthropic_stream() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording(&upstream, dir.path()).await;
    let (status, _, recorded) =
        post(&proxy.chat_url(Some("cross")), request("stream-basic"), &[]).await;
    assert_eq!(status, 200);
    proxy.proxy.settled("cross").await;
    drop(proxy);
    upstream.stop().await;
    let chat: Value = serde_json::from_slice(&request("stream-basic")).unwrap();
    let system = chat["messages"][0]["content"].clone();
    let user = chat["messages"][1]["content"].clone();
    let as_anthropic = json!({
        "model": chat["model"],
        "max_tokens": chat["max_tokens"],
        "temperature": chat["temperature"],
        "stream": true,
        "system": system,
        "messages": [{"role": "user", "content": user}],
    });
    let replay = replaying(dir.path()).await;
    let (status, _, replayed) = post(
        &format!("{}/s/cross/v1/messages", replay.url),
        serde_json::to_vec(&as_anthropic).unwrap(),
        &[],
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&replayed));
    let (blocks, summary) = decode_stream(Format::Messages, &replayed);
    assert_eq!(
        joined(&blocks, false),
        joined(&blocks_of_sse(&recorded), false)
    );
    assert_eq!(summary.finish_reason.as_deref(), Some("max_tokens"));
}
