//! Recording never breaks the run it observes: a model call through `CucaClient` whose call
//! log sits on a full disk (`/dev/full`) still succeeds, block for block, and the log says so
//! once. The server is a loopback axum app the test starts itself.
// Helpers outside `#[test]` functions unwrap too: a failure there should stop the test.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use cuca_client::{CucaClient, RetryPolicy};
use cuca_events::{Message, MessageContentBlock, UnifiedRequest};
use futures::StreamExt;

const BODY: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"no\"}}]}\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ted\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}\n\n\
data: [DONE]\n\n";

async fn serve() -> std::net::SocketAddr {
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(|| async { ([("content-type", "text/event-stream")], BODY) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn calls_succeed_block_for_block_while_the_call_log_sits_on_a_full_disk() {
    // Seed 003: "A WRITE FAILURE IS NEVER A FAILED CALL".
    let addr = serve().await;
    let warnings = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = Arc::clone(&warnings);
    let log = cuca_calllog::CallLog::builder()
        .path(Some("/dev/full".into()))
        .warn_sink(Arc::new(move |line: &str| {
            sink.lock().unwrap().push(line.to_owned())
        }))
        .build();
    let client = CucaClient::builder()
        .with_base_url(format!("http://{addr}"))
        .with_model("m")
        .with_retry_policy(RetryPolicy::none())
        .with_call_log(log.clone())
        .build()
        .unwrap();
    for call in 0..3 {
        let mut stream = client.generate_stream(UnifiedRequest::new(vec![Message::user("hi")]));
        let mut blocks = Vec::new();
        while let Some(block) = stream.next().await {
            blocks.push(block.unwrap());
        }
        assert_eq!(
            blocks,
            [
                MessageContentBlock::text("no"),
                MessageContentBlock::text("ted")
            ],
            "call {call}"
        );
    }
    assert!(log.is_silenced());
    let warnings = warnings.lock().unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("/dev/full") && warnings[0].contains("No space left"),
        "{}",
        warnings[0]
    );
}
