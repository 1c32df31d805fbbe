//! The session-log seed example's flow, driven by the real client against a loopback
//! server serving the two captured seed turns.

// Helpers outside #[test] functions unwrap too: a broken fixture should stop the test.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use cuca_client::{CucaClient, ProviderEndpoint, RetryPolicy};
use cuca_events::{CucaPlugin, Message, SessionBackend, SessionEvent, UnifiedRequest};
use cuca_session_log::SessionLogPlugin;
use cuca_store_file::FileBackend;
use cuca_store_mem::InMemoryBackend;
use support::{Reply, TestServer};

fn kinds(records: &[cuca_events::SessionRecord]) -> Vec<&'static str> {
    records.iter().map(|r| r.event.kind()).collect()
}

#[tokio::test]
async fn two_turns_through_two_logs_then_a_fork_at_the_first_message() {
    // "examples/session_log.rs records the same two live turns through two plugin
    // instances, one over InMemoryBackend and one over FileBackend, then forks the
    // in-memory session at its first Message record."
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![
        Reply::sse(support::STREAM_BASIC),
        Reply::sse(support::STREAM_SECOND_TURN),
    ])
    .await;
    let memory_backend = Arc::new(InMemoryBackend::new());
    let memory_log = Arc::new(
        SessionLogPlugin::new(Arc::clone(&memory_backend) as Arc<dyn SessionBackend>)
            .with_session_id("demo"),
    );
    let file_log = Arc::new(
        SessionLogPlugin::new(Arc::new(FileBackend::new(dir.path()).unwrap()))
            .with_session_id("demo"),
    );
    let client = CucaClient::builder()
        .with_provider(ProviderEndpoint::LlamaCpp)
        .with_base_url(&server.base_url)
        .with_retry_policy(RetryPolicy::none())
        .register_plugin(Arc::clone(&memory_log) as Arc<dyn CucaPlugin>)
        .register_plugin(Arc::clone(&file_log) as Arc<dyn CucaPlugin>)
        .build()
        .unwrap();

    let mut conversation = vec![
        Message::system("You are terse."),
        Message::user("The vault is in Lisbon. Reply with: noted"),
    ];
    let first = client
        .generate(UnifiedRequest::new(conversation.clone()))
        .await
        .unwrap();
    let after_first = memory_backend.replay("demo").unwrap();
    let mut expected = vec!["SystemPrompt", "Message"];
    expected.extend(std::iter::repeat_n("Output", first.content.len()));
    expected.extend(["TokenDetail", "Latency", "TokenUsage"]);
    assert_eq!(kinds(&after_first), expected);

    conversation.push(Message::assistant(first.text()));
    conversation.push(Message::user("Where is the vault? Answer in one word."));
    let second = client
        .generate(UnifiedRequest::new(conversation))
        .await
        .unwrap();
    let recorded = memory_backend.replay("demo").unwrap();
    let turn_two = &recorded[after_first.len()..];
    // "Turn 2 appends a second SystemPrompt because only user and assistant messages are
    // deduplicated by position."
    let mut expected = vec!["SystemPrompt", "Message", "Message"];
    expected.extend(std::iter::repeat_n("Output", second.content.len()));
    expected.extend(["TokenDetail", "Latency", "TokenUsage"]);
    assert_eq!(kinds(turn_two), expected);

    // "The file backend replays the same trajectory."
    let from_file = file_log.backend().replay("demo").unwrap();
    assert_eq!(
        from_file
            .iter()
            .map(|r| (r.sequence, &r.event))
            .collect::<Vec<_>>(),
        recorded
            .iter()
            .map(|r| (r.sequence, &r.event))
            .collect::<Vec<_>>()
    );

    let point = recorded
        .iter()
        .find(|r| matches!(r.event, SessionEvent::Message(_)))
        .unwrap()
        .point_id();
    assert_eq!(point, "demo:1");
    let branch = memory_log.fork_session("demo", &point).unwrap();
    assert_eq!(branch, "demo:fork:demo:1:0");
    assert_eq!(
        kinds(&memory_backend.replay(&branch).unwrap()),
        vec!["SystemPrompt", "Message"]
    );
    let original = memory_backend.replay("demo").unwrap();
    assert_eq!(original.len(), recorded.len() + 1);
    assert_eq!(
        original.last().unwrap().event,
        SessionEvent::Fork {
            from_point: "demo:1".into(),
            to_session: "demo:fork:demo:1:0".into()
        }
    );
}
