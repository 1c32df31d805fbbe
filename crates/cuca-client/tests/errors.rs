//! Every error path against a loopback server, each asserting the error value.

// Helpers outside #[test] functions unwrap too: a broken fixture should stop the test.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use cuca_client::{CucaClient, ProviderEndpoint, RetryPolicy};
use cuca_events::{Message, MessageContentBlock, PluginError, UnifiedRequest};
use futures::StreamExt;
use support::{Reply, TestServer};

fn request() -> UnifiedRequest {
    UnifiedRequest::new(vec![Message::user(
        "The vault is in Lisbon. Reply with: noted",
    )])
}

/// Retries with no back-off, so retry tests are fast; Retry-After is honoured up to 1 s.
fn fast_retries(max_retries: u32) -> RetryPolicy {
    RetryPolicy::new(
        max_retries,
        Duration::ZERO,
        Duration::ZERO,
        Duration::from_secs(1),
    )
    .unwrap()
}

fn client(base_url: &str, retry: RetryPolicy) -> CucaClient {
    CucaClient::builder()
        .with_provider(ProviderEndpoint::LlamaCpp)
        .with_base_url(base_url)
        .with_retry_policy(retry)
        .build()
        .unwrap()
}

fn first_events(n_lines: usize) -> Vec<u8> {
    support::STREAM_BASIC
        .split_inclusive(|&b| b == b'\n')
        .take(n_lines)
        .flatten()
        .copied()
        .collect()
}

#[tokio::test]
async fn an_html_500_names_the_url_and_status_and_clips_the_page() {
    let page = format!(
        "<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body>{}</body></html>",
        "<center>nginx</center>\n".repeat(200)
    );
    let server = TestServer::start(vec![Reply::Status {
        status: 500,
        content_type: "text/html",
        headers: Vec::new(),
        body: page.into_bytes(),
    }])
    .await;
    let err = client(&server.base_url, RetryPolicy::none())
        .generate(request())
        .await
        .unwrap_err();
    let PluginError::Provider {
        url,
        status,
        message,
        retry_after_s,
    } = &err
    else {
        panic!("expected Provider, got {err:?}");
    };
    assert_eq!(url, &format!("{}/v1/chat/completions", server.base_url));
    assert_eq!(*status, 500);
    assert_eq!(*retry_after_s, None);
    assert!(
        message.starts_with("502 Bad Gateway nginx nginx"),
        "{message}"
    );
    assert!(message.ends_with("bytes in all)"), "{message}");
    assert!(message.len() < 400, "clipped: {} bytes", message.len());
    assert!(err
        .to_string()
        .starts_with(&format!("{url} answered HTTP 500: 502 Bad Gateway")));
}

#[tokio::test]
async fn a_5xx_is_retried_up_to_the_bound_and_then_returned() {
    let html = |_| Reply::Status {
        status: 503,
        content_type: "text/html",
        headers: Vec::new(),
        body: b"<h1>loading model</h1>".to_vec(),
    };
    let server = TestServer::start((0..3).map(html).collect()).await;
    let err = client(&server.base_url, fast_retries(2))
        .generate(request())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, PluginError::Provider { status: 503, message, .. } if message == "loading model"),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 3, "one attempt and two retries");
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried_and_then_succeeds() {
    let server = TestServer::start(vec![
        Reply::Status {
            status: 429,
            content_type: "application/json",
            headers: vec![("Retry-After", "0".into())],
            body: br#"{"error":{"code":429,"message":"slots busy"}}"#.to_vec(),
        },
        Reply::sse(support::STREAM_BASIC),
    ])
    .await;
    let response = client(&server.base_url, fast_retries(2))
        .generate(request())
        .await
        .unwrap();
    assert_eq!(response.content.len(), 12);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_retry_after_beyond_the_cap_is_returned_not_waited_for() {
    let server = TestServer::start(vec![Reply::Status {
        status: 429,
        content_type: "application/json",
        headers: vec![("Retry-After", "120".into())],
        body: br#"{"error":{"message":"rate limited"}}"#.to_vec(),
    }])
    .await;
    let err = client(&server.base_url, fast_retries(2))
        .generate(request())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, PluginError::Provider { status: 429, retry_after_s: Some(s), message, .. }
            if *s == 120.0 && message == "rate limited"),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_llama_cpp_400_gives_its_message_and_is_not_retried() {
    let server = TestServer::start(vec![Reply::json_error(400, support::ERROR_NO_MESSAGES)]).await;
    let err = client(&server.base_url, fast_retries(2))
        .generate(request())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, PluginError::Provider { status: 400, message, .. } if message == "'messages' is required"),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_refused_connection_says_which_server_it_expected_and_how_to_point_elsewhere() {
    let base_url = support::refused_base_url().await;
    let err = client(&base_url, fast_retries(1))
        .generate(request())
        .await
        .unwrap_err();
    let PluginError::Transport { url, message, .. } = &err else {
        panic!("expected Transport, got {err:?}");
    };
    assert_eq!(url, &format!("{base_url}/v1/chat/completions"));
    assert_eq!(
        message,
        &format!(
            "connection refused: cuca expected a llama.cpp llama-server at {base_url}; start it \
             there, or point cuca elsewhere with CUCA_BASE_URL (and CUCA_MODEL for the model to ask for)"
        )
    );
}

#[tokio::test]
async fn a_server_closing_mid_stream_fails_after_the_blocks_it_sent() {
    let server = TestServer::start(vec![Reply::SseCut(vec![first_events(6)])]).await;
    let client = client(&server.base_url, fast_retries(2));
    let mut stream = client.generate_stream(request());
    assert_eq!(
        stream.next().await.unwrap().unwrap(),
        MessageContentBlock::text("phas")
    );
    assert_eq!(
        stream.next().await.unwrap().unwrap(),
        MessageContentBlock::text(" temporal")
    );
    let err = stream.next().await.unwrap().unwrap_err();
    let PluginError::Transport { message, .. } = &err else {
        panic!("expected Transport, got {err:?}");
    };
    assert!(
        message.starts_with("the connection broke mid-stream after 3 events and 2 blocks"),
        "{message}"
    );
    assert!(
        stream.next().await.is_none(),
        "the stream ends after its error"
    );
    assert_eq!(
        server.requests().len(),
        1,
        "never retried once a block reached the caller"
    );
}

#[tokio::test]
async fn a_malformed_json_chunk_is_a_decode_error() {
    let mut body = first_events(4);
    body.extend_from_slice(b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"\n\n");
    let server = TestServer::start(vec![Reply::Sse(vec![body])]).await;
    let err = client(&server.base_url, RetryPolicy::none())
        .generate(request())
        .await
        .unwrap_err();
    let PluginError::Decode { url, message } = &err else {
        panic!("expected Decode, got {err:?}");
    };
    assert!(url.ends_with("/v1/chat/completions"));
    assert!(
        message.starts_with("event 3 is not a chat.completion.chunk"),
        "{message}"
    );
    assert!(
        message.ends_with("{\"choices\":[{\"delta\":{\"content\":\"x\""),
        "{message}"
    );
}

#[tokio::test]
async fn an_empty_body_is_an_error() {
    let server = TestServer::start(vec![Reply::Sse(vec![])]).await;
    let err = client(&server.base_url, RetryPolicy::none())
        .generate(request())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, PluginError::Transport { message, .. }
            if message == "the response body ended before any event: the server sent an empty stream"),
        "{err:?}"
    );
}

#[tokio::test]
async fn no_done_is_accepted_after_a_finish_reason() {
    // Documented rule: a stream that ends without `data: [DONE]` is complete when a
    // finish_reason arrived (here also the usage chunk), and an error otherwise.
    let body = support::STREAM_BASIC;
    let cut = body.windows(12).position(|w| w == b"data: [DONE]").unwrap();
    let server = TestServer::start(vec![Reply::Sse(vec![body[..cut].to_vec()])]).await;
    let response = client(&server.base_url, RetryPolicy::none())
        .generate(request())
        .await
        .unwrap();
    assert_eq!(response.finish_reason.as_deref(), Some("length"));
    assert_eq!(response.token_usage.completion_tokens, 12);
}

#[tokio::test]
async fn no_done_and_no_finish_reason_is_an_error() {
    let server = TestServer::start(vec![Reply::Sse(vec![first_events(6)])]).await;
    let err = client(&server.base_url, RetryPolicy::none())
        .generate(request())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, PluginError::Transport { message, .. }
            if message.starts_with("the stream ended after 3 events without a finish_reason or [DONE]")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_json_answer_to_a_streaming_request_is_refused_clearly() {
    let server = TestServer::start(vec![Reply::Status {
        status: 200,
        content_type: "application/json",
        headers: Vec::new(),
        body: br#"{"object":"chat.completion","choices":[]}"#.to_vec(),
    }])
    .await;
    let err = client(&server.base_url, RetryPolicy::none())
        .generate(request())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, PluginError::Decode { message, .. } if message.ends_with("the server ignored \"stream\": true")),
        "{err:?}"
    );
}

#[tokio::test]
async fn no_first_token_in_time_is_a_first_token_timeout() {
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let server = TestServer::start(vec![Reply::SseHold(vec![first_events(2)], tx)]).await;
    let client = CucaClient::builder()
        .with_base_url(&server.base_url)
        .with_first_token_timeout(Duration::from_millis(150))
        .with_retry_policy(RetryPolicy::none())
        .build()
        .unwrap();
    let err = client.generate(request()).await.unwrap_err();
    assert!(
        matches!(&err, PluginError::Timeout { phase, after_ms: 150, .. } if phase == "first token"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{}/v1/chat/completions: no first token within 150 ms",
            server.base_url
        )
    );
}

#[tokio::test]
async fn silence_after_the_first_block_is_an_idle_timeout() {
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let server = TestServer::start(vec![Reply::SseHold(vec![first_events(4)], tx)]).await;
    let client = CucaClient::builder()
        .with_base_url(&server.base_url)
        .with_idle_timeout(Duration::from_millis(150))
        .with_retry_policy(RetryPolicy::none())
        .build()
        .unwrap();
    let mut stream = client.generate_stream(request());
    assert_eq!(
        stream.next().await.unwrap().unwrap(),
        MessageContentBlock::text("phas")
    );
    let err = stream.next().await.unwrap().unwrap_err();
    assert!(
        matches!(&err, PluginError::Timeout { phase, after_ms: 150, .. } if phase == "data"),
        "{err:?}"
    );
}

/// The idle timeout is the longest silence between two pieces, however long the stream:
/// the reads share one timer, and a deadline an earlier read armed must not end a later read
/// that is well inside its own. Six pieces 150 ms apart take about 750 ms against an idle
/// timeout of 400 ms; a timer armed once and never moved on would end the call at 400 ms.
#[tokio::test]
async fn a_slow_steady_stream_never_meets_the_idle_timeout_of_an_earlier_read() {
    let events: Vec<Vec<u8>> = support::STREAM_BASIC
        .split_inclusive(|&b| b == b'\n')
        .collect::<Vec<_>>()
        .chunks(2)
        .map(|event| event.concat())
        .collect();
    let (head, tail) = events.split_at(6);
    let mut pieces = head.to_vec();
    pieces.push(tail.concat());
    let server = TestServer::start(vec![Reply::SsePaced(pieces, Duration::from_millis(150))]).await;
    let client = CucaClient::builder()
        .with_base_url(&server.base_url)
        .with_idle_timeout(Duration::from_millis(400))
        .with_retry_policy(RetryPolicy::none())
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let response = client.generate(request()).await.unwrap();
    assert!(
        started.elapsed() > Duration::from_millis(400),
        "the stream outlasted one idle timeout ({:?})",
        started.elapsed()
    );
    let whole = response.text();
    assert!(whole.starts_with("phas temporal"), "{whole:?}");
}

#[tokio::test]
async fn the_total_timeout_bounds_the_whole_call() {
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let server = TestServer::start(vec![Reply::SseHold(vec![first_events(4)], tx)]).await;
    let client = CucaClient::builder()
        .with_base_url(&server.base_url)
        .with_total_timeout(Duration::from_millis(150))
        .with_retry_policy(RetryPolicy::none())
        .build()
        .unwrap();
    let err = client.generate(request()).await.unwrap_err();
    assert!(
        matches!(&err, PluginError::Timeout { phase, after_ms: 150, .. } if phase == "response"),
        "{err:?}"
    );
}
