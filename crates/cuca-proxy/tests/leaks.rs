//! The proxy's call log keeps the provider's own words and nothing of the request:
//! "every `error` the proxy writes to a row (the upstream's error sentence, the
//! decoder's error, a transport error) goes through `redact_error` with the caller's request
//! body and headers".
//!
//! The upstream here is a stand-in the test starts on a loopback port. It answers what the
//! `x-test-reply` header names: a real llama-server error body from the fixtures, a "Missing
//! 'role'" body in llama-server's envelope quoting the caller's message, an error that echoes
//! the caller's key headers, or a stream that fails with an error event quoting the prompt.
//! Each test then reads `calls.jsonl` whole and looks for the prompt and the keys anywhere
//! in it.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod support;

use std::net::SocketAddr;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use cuca_calllog::{Record, MIN_QUOTED_BYTES, QUOTE_MARKER};
use cuca_proxy::{Mode, ProxyConfig};
use support::{client, fixture, request, start, Running};

/// The real llama-server error transcripts (fixtures) and the sentence each one's body holds.
const REAL_ERRORS: [(&str, &str); 3] = [
    (
        "error-context-overflow",
        "request (15014 tokens) exceeds the available context size (2048 tokens), try increasing it",
    ),
    ("error-no-messages", "'messages' is required"),
    (
        "error-bad-json",
        "[json.exception.parse_error.101] parse error at line 2, column 1: syntax error while parsing object key - unexpected end of input; expected string literal",
    ),
];

/// What the stand-in upstream answers a call, chosen by its `x-test-reply` header.
async fn answer(headers: HeaderMap, body: Bytes) -> Response {
    let reply = headers
        .get("x-test-reply")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let json = |status: u16, body: String| {
        Response::builder()
            .status(StatusCode::from_u16(status).unwrap())
            .header("Content-Type", "application/json; charset=utf-8")
            .header("Server", "llama.cpp")
            .body(Body::from(body))
            .unwrap()
    };
    if let Some(n) = reply.strip_prefix("fixture-") {
        // The real server's bytes, as captured. By number: the header is request text too,
        // and a name such as `error-no-messages` would rightly take "messages" with it.
        let name = REAL_ERRORS[n.parse::<usize>().unwrap()].0;
        let body = String::from_utf8(fixture(&format!("{name}.body"))).unwrap();
        return json(400, body);
    }
    match reply.as_str() {
        "missing-role" => {
            // llama-server's sentence for a message without `role`, in its envelope (the
            // fixtures' `{"error":{"code":…,"message":…,"type":…}}`): the message it choked
            // on, compact, then the whole conversation as `dump(2)`.
            let request: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let messages = &request["messages"];
            let culprit = messages
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m.get("role").is_none())
                .unwrap();
            let message = format!(
                "Failed to parse messages: Missing 'role' in message: {culprit}; messages = {}",
                serde_json::to_string_pretty(messages).unwrap()
            );
            let envelope = serde_json::json!({
                "error": {"code": 500, "message": message, "type": "server_error"}
            });
            json(500, envelope.to_string())
        }
        "echo-keys" => {
            // An upstream that names the credentials it refused, verbatim.
            let value = |name: &str| {
                headers
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned()
            };
            let message = format!(
                "invalid credentials: Authorization: {} api-key: {} x-api-key: {} (none of these is known here)",
                value("authorization"),
                value("api-key"),
                value("x-api-key")
            );
            let envelope = serde_json::json!({
                "error": {"code": 401, "message": message, "type": "authentication_error"}
            });
            json(401, envelope.to_string())
        }
        "stream-error" => {
            // A stream that starts and then fails with an error event quoting the prompt.
            let request: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let prompt = request["messages"][0]["content"].as_str().unwrap();
            let event = serde_json::json!({
                "error": {"code": 500, "message": format!("generation failed for prompt: {prompt}"), "type": "server_error"}
            });
            let body = format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"Hel\"}}}}]}}\n\ndata: {event}\n\n"
            );
            Response::builder()
                .status(StatusCode::OK)
                .header("Content-Type", "text/event-stream")
                .body(Body::from(body))
                .unwrap()
        }
        other => json(
            418,
            format!("{{\"error\":{{\"message\":\"no reply {other}\"}}}}"),
        ),
    }
}

/// The stand-in upstream, serving until the test ends.
async fn stand_in() -> String {
    let router = Router::new().route("/v1/chat/completions", post(answer));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}")
}

async fn proxy(dir: &std::path::Path) -> Running {
    let upstream = stand_in().await;
    start(ProxyConfig::new(Mode::Record, Some(upstream)).unwrap(), dir).await
}

/// Sends `body` through the proxy with the reply named and `headers`, reading the answer
/// whole; returns the status.
async fn call(proxy: &Running, reply: &str, body: Vec<u8>, headers: &[(&str, &str)]) -> u16 {
    let mut builder = client()
        .post(proxy.chat_url(Some("leaks")))
        .header("Content-Type", "application/json")
        .header("x-test-reply", reply)
        .body(body);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let response = builder.send().await.unwrap();
    let status = response.status().as_u16();
    response.bytes().await.unwrap();
    status
}

/// A streamed chat request for `messages`.
fn streamed(messages: serde_json::Value) -> Vec<u8> {
    serde_json::json!({"model": "tiny", "stream": true, "messages": messages})
        .to_string()
        .into_bytes()
}

fn end_rows(proxy: &Running) -> Vec<Record> {
    proxy
        .rows()
        .into_iter()
        .filter(|r| r.phase.is_empty())
        .collect()
}

/// Asserts no run of [`MIN_QUOTED_BYTES`] of `secret` is anywhere in `file` (the raw
/// `calls.jsonl`), in the text or JSON-escaped.
fn assert_nowhere(file: &str, secret: &str) {
    let escaped = serde_json::to_string(secret).unwrap();
    for form in [secret, &escaped[1..escaped.len() - 1]] {
        for run in form.as_bytes().windows(MIN_QUOTED_BYTES) {
            let run = String::from_utf8_lossy(run);
            assert!(
                !file.contains(run.as_ref()),
                "{run:?} of {secret:?} in {file}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_llama_server_errors_keep_their_sentences_and_the_file_keeps_no_prompt() {
    // "the provider's own sentence (e.g. `exceeds the available context size (2048
    // tokens)`) is in `error`"; the context overflow's request is 15014 tokens of prompt.
    let dir = tempfile::tempdir().unwrap();
    let proxy = proxy(dir.path()).await;
    for (n, (name, _)) in REAL_ERRORS.iter().enumerate() {
        let status = call(&proxy, &format!("fixture-{n}"), request(name), &[]).await;
        assert_eq!(status, 400, "{name}");
    }
    let ends = end_rows(&proxy);
    let errors: Vec<&str> = ends.iter().map(|r| r.error.as_str()).collect();
    let sentences: Vec<&str> = REAL_ERRORS.iter().map(|(_, s)| *s).collect();
    assert_eq!(errors, sentences);
    let file = std::fs::read_to_string(&proxy.log_path).unwrap();
    assert!(!file.contains("lisbon"), "{file}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_role_answer_quoting_a_card_leaves_the_sentence_and_no_prompt() {
    // "A real llama-server answers a message without `role` with `Failed to
    // parse messages: Missing 'role' in message: {"content":"my card is 4111-…"}`, and that
    // is in `calls.jsonl`".
    const SYSTEM: &str = "You are the billing agent for Ana Lima, account 0042-7781";
    const CARD: &str = "my card is 4111-1111-1111-1111, exp 09/29, cvv 123 — \"urgent\"";
    let dir = tempfile::tempdir().unwrap();
    let proxy = proxy(dir.path()).await;
    let body = streamed(serde_json::json!([
        {"role": "system", "content": SYSTEM},
        {"content": CARD}
    ]));
    let status = call(&proxy, "missing-role", body, &[]).await;
    assert_eq!(status, 500);
    let ends = end_rows(&proxy);
    assert_eq!(ends.len(), 1);
    let error = &ends[0].error;
    assert!(
        error.starts_with(&format!(
            "Failed to parse messages: Missing 'role' in message: {{\"content\":\"{QUOTE_MARKER}\"}}; messages = ["
        )),
        "{error}"
    );
    let file = std::fs::read_to_string(&proxy.log_path).unwrap();
    assert_nowhere(&file, SYSTEM);
    assert_nowhere(&file, CARD);
    assert!(!file.contains("4111"), "{file}");
    assert!(!file.contains("Ana Lima"), "{file}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_echoing_authorization_and_api_key_leaves_no_key_in_the_file() {
    // "An upstream that echoes `Authorization`/`api-key` puts the keys there";
    // "an upstream echoing a key must never leave any 8+ char run of it".
    const BEARER: &str = "sk-proj-7Hq2Lx9Vm4Rt8Zp3Nc6W";
    const API_KEY: &str = "azure-5f2c9d1e7a3b4c8d";
    const X_API_KEY: &str = "sk-ant-api03-Yq8Wm2Kd";
    let dir = tempfile::tempdir().unwrap();
    let proxy = proxy(dir.path()).await;
    let authorization = format!("Bearer {BEARER}");
    let status = call(
        &proxy,
        "echo-keys",
        request("stream-basic"),
        &[
            ("Authorization", authorization.as_str()),
            ("api-key", API_KEY),
            ("x-api-key", X_API_KEY),
        ],
    )
    .await;
    assert_eq!(status, 401);
    let ends = end_rows(&proxy);
    assert_eq!(
        ends[0].error,
        format!(
            "invalid credentials: Authorization: {QUOTE_MARKER} api-key: {QUOTE_MARKER} \
             x-api-key: {QUOTE_MARKER} (none of these is known here)"
        )
    );
    let file = std::fs::read_to_string(&proxy.log_path).unwrap();
    for key in [authorization.as_str(), API_KEY, X_API_KEY] {
        assert_nowhere(&file, key);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_decoders_error_from_a_stream_loses_the_prompt_it_quotes() {
    // "every `error` the proxy writes to a row (the upstream's error sentence, the
    // decoder's error, ...)": an in-stream error event quoting the prompt.
    const PROMPT: &str = "Summarise the merger memo for Lisbon Holdings, strictly confidential";
    let dir = tempfile::tempdir().unwrap();
    let proxy = proxy(dir.path()).await;
    let body = streamed(serde_json::json!([{"role": "user", "content": PROMPT}]));
    let status = call(&proxy, "stream-error", body, &[]).await;
    assert_eq!(status, 200);
    let ends = end_rows(&proxy);
    assert_eq!(ends.len(), 1);
    assert!(
        ends[0]
            .error
            .contains(&format!("generation failed for prompt: {QUOTE_MARKER}")),
        "{}",
        ends[0].error
    );
    let file = std::fs::read_to_string(&proxy.log_path).unwrap();
    assert_nowhere(&file, PROMPT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transport_error_keeps_the_proxys_own_words_and_the_upstreams_address() {
    // "... a transport error" goes through the redaction too, and loses nothing: it quotes
    // no request text. The caller's `Host` names the proxy (127.0.0.1 as the upstream
    // does), which is the proxy's own address, not the caller's text, and is not looked for.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gone = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let dir = tempfile::tempdir().unwrap();
    let proxy = start(
        ProxyConfig::new(Mode::Record, Some(gone.clone())).unwrap(),
        dir.path(),
    )
    .await;
    let body = streamed(serde_json::json!([{"role": "user", "content": "Say hi to the vault"}]));
    let status = call(&proxy, "none", body, &[("api-key", "key-0123456789")]).await;
    assert_eq!(status, 502);
    let ends = end_rows(&proxy);
    assert!(
        ends[0]
            .error
            .starts_with(&format!("the upstream {gone} did not answer: ")),
        "{}",
        ends[0].error
    );
    assert!(!ends[0].error.contains(QUOTE_MARKER), "{}", ends[0].error);
}
