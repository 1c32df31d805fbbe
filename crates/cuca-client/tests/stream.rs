//! The client against a loopback server serving real llama-server transcripts.

// Helpers outside #[test] functions unwrap too: a broken fixture should stop the test.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use cuca_client::{CucaClient, ProviderEndpoint, RetryPolicy};
use cuca_events::{
    Message, MessageContentBlock, PromptCacheUsage, TokenUsage, UnifiedRequest, UnifiedResponse,
};
use futures::StreamExt;
use proptest::prelude::*;
use support::{Reply, TestServer};

fn client(base_url: &str) -> CucaClient {
    CucaClient::builder()
        .with_provider(ProviderEndpoint::LlamaCpp)
        .with_base_url(base_url)
        .with_model("tiny")
        .with_retry_policy(RetryPolicy::none())
        .build()
        .unwrap()
}

fn seed_turn_one() -> UnifiedRequest {
    let mut request = UnifiedRequest::new(vec![
        Message::system("You are terse."),
        Message::user("The vault is in Lisbon. Reply with: noted"),
    ]);
    request.max_tokens = Some(12);
    request.temperature = Some(0.0);
    request
}

/// A captured request body; curl sent `"temperature":0`, the client sends the f32 `0.0`.
fn captured_request(text: &str) -> serde_json::Value {
    let mut captured: serde_json::Value = serde_json::from_str(text).unwrap();
    captured["temperature"] = serde_json::json!(0.0);
    captured
}

async fn collect(client: &CucaClient, request: UnifiedRequest) -> Vec<MessageContentBlock> {
    let mut stream = client.generate_stream(request);
    let mut blocks = Vec::new();
    while let Some(block) = stream.next().await {
        blocks.push(block.unwrap());
    }
    blocks
}

#[tokio::test]
async fn the_request_is_the_fixture_request_streaming_with_usage() {
    let server = TestServer::start(vec![Reply::sse(support::STREAM_BASIC)]).await;
    let blocks = collect(&client(&server.base_url), seed_turn_one()).await;
    assert_eq!(blocks.len(), 12);
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].method, "POST");
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].header("accept"), Some("text/event-stream"));
    // The captured request that produced the transcript, field for field.
    let captured = captured_request(include_str!(
        "fixtures/llama-server/stream-basic.request.json"
    ));
    assert_eq!(requests[0].json(), captured);
}

#[tokio::test]
async fn generate_aggregates_the_stream_into_the_response() {
    let server = TestServer::start(vec![Reply::sse(support::STREAM_BASIC)]).await;
    let response = client(&server.base_url)
        .generate(seed_turn_one())
        .await
        .unwrap();
    assert_eq!(
        response.model, "cuca-tiny-random",
        "the server's model field"
    );
    assert_eq!(response.provider, "llamacpp");
    assert_eq!(response.content.len(), 12);
    assert!(response
        .text()
        .starts_with("phas temporal succeed Captain LEFT"));
    assert_eq!(response.finish_reason.as_deref(), Some("length"));
    assert_eq!(
        response.token_usage,
        TokenUsage {
            prompt_tokens: 40,
            completion_tokens: 12
        }
    );
    assert_eq!(response.usage.as_ref().map(|u| u.prompt_tokens), Some(40));
    assert_eq!(
        response.prompt_cache_usage,
        Some(PromptCacheUsage { cached_tokens: 0 })
    );
    let call_id = response.call_id.clone().unwrap();
    assert_eq!(call_id.len(), 16);
    assert!(call_id.chars().all(|c| c.is_ascii_hexdigit()));
}

#[tokio::test]
async fn a_reasoning_stream_yields_thinking_blocks() {
    let server = TestServer::start(vec![Reply::sse(support::STREAM_REASONING)]).await;
    let response = client(&server.base_url)
        .generate(seed_turn_one())
        .await
        .unwrap();
    assert_eq!(response.content.len(), 24);
    assert!(response
        .content
        .iter()
        .all(|b| matches!(b, MessageContentBlock::Thinking { .. })));
    assert_eq!(response.text(), "", "thinking ate the answer");
    assert_eq!(response.finish_reason.as_deref(), Some("length"));
}

#[tokio::test]
async fn without_a_usage_chunk_tokens_come_from_llama_timings() {
    let server = TestServer::start(vec![Reply::sse(support::STREAM_NO_USAGE)]).await;
    let response = client(&server.base_url)
        .generate(seed_turn_one())
        .await
        .unwrap();
    assert_eq!(response.usage, None);
    // timings: cache_n 3 + prompt_n 15, predicted_n 8.
    assert_eq!(
        response.token_usage,
        TokenUsage {
            prompt_tokens: 18,
            completion_tokens: 8
        }
    );
}

#[tokio::test]
async fn dropping_the_stream_cancels_the_http_request() {
    let (closed_tx, mut closed_rx) = tokio::sync::mpsc::unbounded_channel();
    let first_event = support::STREAM_BASIC
        .split_inclusive(|&b| b == b'\n')
        .take(4)
        .flatten()
        .copied()
        .collect::<Vec<u8>>();
    let server = TestServer::start(vec![Reply::SseHold(vec![first_event], closed_tx)]).await;
    let client = client(&server.base_url);
    let mut stream = client.generate_stream(seed_turn_one());
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(first, MessageContentBlock::text("phas"));
    drop(stream);
    let seen = tokio::time::timeout(Duration::from_secs(10), closed_rx.recv())
        .await
        .unwrap();
    assert_eq!(seen, Some("client closed the connection"));
}

#[tokio::test]
async fn the_second_seed_turn_sends_the_whole_conversation() {
    let server = TestServer::start(vec![Reply::sse(support::STREAM_SECOND_TURN)]).await;
    let mut request = UnifiedRequest::new(vec![
        Message::system("You are terse."),
        Message::user("The vault is in Lisbon. Reply with: noted"),
        Message::assistant("noted"),
        Message::user("Where is the vault? Answer in one word."),
    ]);
    request.max_tokens = Some(12);
    request.temperature = Some(0.0);
    let response: UnifiedResponse = client(&server.base_url).generate(request).await.unwrap();
    assert!(!response.content.is_empty());
    let captured = captured_request(include_str!(
        "fixtures/llama-server/stream-second-turn.request.json"
    ));
    assert_eq!(server.requests()[0].json(), captured);
}

fn blocks_and_usage(body: &[u8], cuts: &[usize]) -> (Vec<MessageContentBlock>, UnifiedResponse) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let server = TestServer::start(vec![Reply::Sse(support::split_at(body, cuts))]).await;
        let client = client(&server.base_url);
        let blocks = collect(&client, seed_turn_one()).await;
        let server = TestServer::start(vec![Reply::Sse(support::split_at(body, cuts))]).await;
        let client = self::client(&server.base_url);
        let response = client.generate(seed_turn_one()).await.unwrap();
        (blocks, response)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Real transcripts re-chunked at random byte boundaries on a real socket: the same
    /// blocks and usage whatever the chunking.
    #[test]
    fn any_chunking_on_the_wire_gives_the_same_blocks_and_usage(
        cuts in proptest::collection::vec(any::<usize>(), 0..24),
        which in 0usize..3,
    ) {
        let body = [support::STREAM_BASIC, support::STREAM_REASONING, support::STREAM_SECOND_TURN][which];
        let (whole_blocks, whole) = blocks_and_usage(body, &[]);
        let (blocks, response) = blocks_and_usage(body, &cuts);
        prop_assert_eq!(&blocks, &whole_blocks);
        prop_assert_eq!(&response.content, &whole_blocks);
        prop_assert_eq!(response.token_usage, whole.token_usage);
        prop_assert_eq!(response.usage, whole.usage);
        prop_assert_eq!(response.finish_reason, whole.finish_reason);
    }
}
