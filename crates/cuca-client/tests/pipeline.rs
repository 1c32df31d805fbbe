//! The plugin pipeline around a live (loopback) call: order, mutation, failure rules.

// Helpers outside #[test] functions unwrap too: a broken fixture should stop the test.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use cuca_client::{CucaClient, RetryPolicy};
use cuca_events::{
    CucaPlugin, Message, MessageContentBlock, PluginError, SessionBackend, UnifiedRequest,
    UnifiedResponse,
};
use cuca_session_log::SessionLogPlugin;
use cuca_store_mem::InMemoryBackend;
use futures::StreamExt;
use support::{Reply, TestServer};

type Log = Arc<Mutex<Vec<String>>>;

/// A plugin that writes what it sees into a shared log, and can be told to fail a hook.
struct Probe {
    name: &'static str,
    log: Log,
    fail_on: Option<&'static str>,
    /// Appended to the first message's text in `on_request`.
    stamp: Option<&'static str>,
}

impl Probe {
    fn new(name: &'static str, log: &Log) -> Self {
        Probe {
            name,
            log: Arc::clone(log),
            fail_on: None,
            stamp: None,
        }
    }

    fn note(&self, hook: &str, detail: impl std::fmt::Display) -> Result<(), PluginError> {
        self.log
            .lock()
            .unwrap()
            .push(format!("{} {hook} {detail}", self.name));
        if self.fail_on == Some(hook) {
            return Err(PluginError::Plugin {
                plugin: self.name.into(),
                message: format!("{hook} refused"),
            });
        }
        Ok(())
    }
}

#[async_trait]
impl CucaPlugin for Probe {
    fn name(&self) -> &str {
        self.name
    }

    async fn on_request(&self, request: &mut UnifiedRequest) -> Result<(), PluginError> {
        let seen = request.messages[0].text();
        let call_id = request.metadata.call_id.clone().unwrap_or_default();
        if let Some(stamp) = self.stamp {
            request.messages[0] = Message::user(format!("{seen}{stamp}"));
        }
        self.note("on_request", format!("{seen:?} call_id={}", call_id.len()))
    }

    async fn on_stream_chunk(&self, block: &MessageContentBlock) -> Result<(), PluginError> {
        let text = match block {
            MessageContentBlock::Text { text } => text.clone(),
            other => other.kind().to_owned(),
        };
        self.note("on_stream_chunk", format!("{text:?}"))
    }

    async fn on_response_complete(&self, response: &UnifiedResponse) -> Result<(), PluginError> {
        self.note(
            "on_response_complete",
            format!("{} blocks", response.content.len()),
        )
    }

    async fn on_error(
        &self,
        _request: &UnifiedRequest,
        error: &PluginError,
    ) -> Result<(), PluginError> {
        self.log
            .lock()
            .unwrap()
            .push(format!("{} on_error {error}", self.name));
        Ok(())
    }
}

fn client(base_url: &str, plugins: Vec<Arc<dyn CucaPlugin>>) -> CucaClient {
    let mut builder = CucaClient::builder()
        .with_base_url(base_url)
        .with_retry_policy(RetryPolicy::none());
    for plugin in plugins {
        builder = builder.register_plugin(plugin);
    }
    builder.build().unwrap()
}

fn request() -> UnifiedRequest {
    UnifiedRequest::new(vec![Message::user("hi")])
}

/// Two events: the role chunk (no block) and one text delta, then finish and [DONE].
const ONE_BLOCK: &[u8] = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null}}],\"model\":\"m\"}\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"noted\"}}],\"model\":\"m\"}\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"!\"},\"finish_reason\":\"stop\"}],\"model\":\"m\"}\n\n\
data: [DONE]\n\n";

#[tokio::test]
async fn hooks_run_in_registration_order_and_see_earlier_mutations() {
    // "It records the request as earlier on_request hooks left it."
    let log = Log::default();
    let first = Probe {
        stamp: Some(" [scrubbed]"),
        ..Probe::new("first", &log)
    };
    let second = Probe::new("second", &log);
    let server = TestServer::start(vec![Reply::sse(ONE_BLOCK)]).await;
    let client = client(&server.base_url, vec![Arc::new(first), Arc::new(second)]);
    let mut stream = client.generate_stream(request());
    let mut seen_by_caller = Vec::new();
    while let Some(block) = stream.next().await {
        // Every plugin saw the block before the caller did.
        seen_by_caller.push((block.unwrap(), log.lock().unwrap().len()));
    }
    assert_eq!(
        *log.lock().unwrap(),
        vec![
            "first on_request \"hi\" call_id=16",
            "second on_request \"hi [scrubbed]\" call_id=16",
            "first on_stream_chunk \"noted\"",
            "second on_stream_chunk \"noted\"",
            "first on_stream_chunk \"!\"",
            "second on_stream_chunk \"!\"",
            "first on_response_complete 2 blocks",
            "second on_response_complete 2 blocks",
        ]
    );
    assert_eq!(
        seen_by_caller,
        vec![
            (MessageContentBlock::text("noted"), 4),
            (MessageContentBlock::text("!"), 6)
        ]
    );
    // The server got the request as the plugins left it.
    assert_eq!(
        server.requests()[0].json()["messages"][0]["content"],
        "hi [scrubbed]"
    );
}

#[tokio::test]
async fn the_call_id_minted_before_on_request_is_echoed_on_the_response() {
    struct Grab(Mutex<Option<String>>);
    #[async_trait]
    impl CucaPlugin for Grab {
        async fn on_request(&self, request: &mut UnifiedRequest) -> Result<(), PluginError> {
            *self.0.lock().unwrap() = request.metadata.call_id.clone();
            Ok(())
        }
    }
    let grab = Arc::new(Grab(Mutex::new(None)));
    let server = TestServer::start(vec![Reply::sse(ONE_BLOCK), Reply::sse(ONE_BLOCK)]).await;
    let client = client(
        &server.base_url,
        vec![Arc::clone(&grab) as Arc<dyn CucaPlugin>],
    );
    let response = client.generate(request()).await.unwrap();
    let minted = grab.0.lock().unwrap().clone();
    assert!(minted.is_some());
    assert_eq!(response.call_id, minted);
    let second = client.generate(request()).await.unwrap();
    assert_ne!(second.call_id, response.call_id, "one id per call");
}

#[tokio::test]
async fn an_on_response_complete_failure_is_logged_and_does_not_abort_the_turn() {
    // "A failure in on_response_complete is logged by the client and does not abort the turn."
    let log = Log::default();
    let failing = Probe {
        fail_on: Some("on_response_complete"),
        ..Probe::new("failing", &log)
    };
    let after = Probe::new("after", &log);
    let server = TestServer::start(vec![Reply::sse(ONE_BLOCK)]).await;
    let client = client(&server.base_url, vec![Arc::new(failing), Arc::new(after)]);
    let response = client.generate(request()).await.unwrap();
    assert_eq!(response.text(), "noted!");
    let log = log.lock().unwrap();
    assert!(log.contains(&"after on_response_complete 2 blocks".to_owned()));
    assert!(!log.iter().any(|l| l.contains("on_error")), "{log:?}");
}

#[tokio::test]
async fn an_on_stream_chunk_failure_aborts_the_turn_and_reaches_on_error() {
    let log = Log::default();
    let failing = Probe {
        fail_on: Some("on_stream_chunk"),
        ..Probe::new("failing", &log)
    };
    let after = Probe::new("after", &log);
    let server = TestServer::start(vec![Reply::sse(ONE_BLOCK)]).await;
    let client = client(&server.base_url, vec![Arc::new(failing), Arc::new(after)]);
    let mut stream = client.generate_stream(request());
    let err = stream.next().await.unwrap().unwrap_err();
    assert!(
        matches!(&err, PluginError::Plugin { plugin, message } if plugin == "failing" && message == "on_stream_chunk refused"),
        "{err:?}"
    );
    assert!(stream.next().await.is_none());
    let log = log.lock().unwrap();
    assert_eq!(
        log[log.len() - 2..],
        [
            "failing on_error plugin failing: on_stream_chunk refused".to_owned(),
            "after on_error plugin failing: on_stream_chunk refused".to_owned(),
        ]
    );
    assert!(!log.contains(&"after on_stream_chunk \"noted\"".to_owned()));
}

#[tokio::test]
async fn an_on_request_failure_aborts_before_anything_is_sent() {
    let log = Log::default();
    let failing = Probe {
        fail_on: Some("on_request"),
        ..Probe::new("failing", &log)
    };
    let server = TestServer::start(vec![Reply::sse(ONE_BLOCK)]).await;
    let client = client(&server.base_url, vec![Arc::new(failing)]);
    let err = client.generate(request()).await.unwrap_err();
    assert!(matches!(err, PluginError::Plugin { .. }), "{err:?}");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn a_failed_call_reaches_on_error() {
    let log = Log::default();
    let probe = Probe::new("probe", &log);
    let base_url = support::refused_base_url().await;
    let client = client(&base_url, vec![Arc::new(probe)]);
    let err = client.generate(request()).await.unwrap_err();
    let log = log.lock().unwrap();
    assert_eq!(log.last().unwrap(), &format!("probe on_error {err}"));
}

#[tokio::test]
async fn a_session_log_records_the_seed_kinds_for_a_real_transcript() {
    // "on_stream_chunk appends one record per block" and "on_response_complete appends
    // Latency (duration_ms) and TokenUsage, in that order."
    let backend = Arc::new(InMemoryBackend::new());
    let log = Arc::new(
        SessionLogPlugin::new(Arc::clone(&backend) as Arc<dyn SessionBackend>)
            .with_session_id("demo"),
    );
    let server = TestServer::start(vec![Reply::sse(support::STREAM_REASONING)]).await;
    let client = client(&server.base_url, vec![log as Arc<dyn CucaPlugin>]);
    let request = UnifiedRequest::new(vec![
        Message::system("You are terse."),
        Message::user("The vault is in Lisbon. Reply with: noted"),
    ]);
    client.generate(request).await.unwrap();
    let records = backend.replay("demo").unwrap();
    let mut counts = BTreeMap::new();
    for record in &records {
        *counts.entry(record.event.kind()).or_insert(0) += 1;
    }
    assert_eq!(
        counts,
        BTreeMap::from([
            ("SystemPrompt", 1),
            ("Message", 1),
            ("Reasoning", 24),
            // Every token kind the answer's usage reported, just before the closing pair.
            ("TokenDetail", 1),
            ("Latency", 1),
            ("TokenUsage", 1)
        ])
    );
    let kinds: Vec<&str> = records.iter().map(|r| r.event.kind()).collect();
    assert_eq!(
        kinds[kinds.len() - 3..],
        ["TokenDetail", "Latency", "TokenUsage"]
    );
}
