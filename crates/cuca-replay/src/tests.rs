//! Unit tests for `SessionReplay`: binding, loading, prefixes and their refusals.

use std::sync::Arc;

use cuca_events::{PluginError, SessionBackend, SessionEvent};
use cuca_store_mem::InMemoryBackend;
use cuca_testkit::{append_all, demo_turn, record};

use super::{ReplayConfig, SessionReplay};

fn backend_with(records: &[cuca_events::SessionRecord]) -> Arc<InMemoryBackend> {
    let backend = Arc::new(InMemoryBackend::new());
    append_all(backend.as_ref(), records);
    backend
}

fn refusal(result: Result<impl std::fmt::Debug, PluginError>) -> (String, String) {
    match result {
        Err(PluginError::Validation { schema, message }) => (schema, message),
        other => panic!("expected a validation refusal, got {other:?}"),
    }
}

#[test]
fn with_config_validates_the_config() {
    let backend: Arc<dyn SessionBackend> = Arc::new(InMemoryBackend::new());
    let bad = ReplayConfig {
        max_turn_blocks: 0,
        ..ReplayConfig::default()
    };
    let (schema, _) = refusal(SessionReplay::with_config(Arc::clone(&backend), bad));
    assert_eq!(schema, "ReplayConfig::max_turn_blocks");
    let good = ReplayConfig::new(10, 10, None).unwrap();
    let replay = SessionReplay::with_config(backend, good).unwrap();
    assert_eq!(replay.config(), good);
    assert_eq!(
        SessionReplay::new(Arc::new(InMemoryBackend::new())).config(),
        ReplayConfig::default()
    );
}

#[test]
fn holds_one_arc_and_one_copy_config() {
    // "SessionReplay holds one Arc and one Copy config, so it does not grow with traffic."
    assert_eq!(
        std::mem::size_of::<SessionReplay>(),
        std::mem::size_of::<Arc<dyn SessionBackend>>() + std::mem::size_of::<ReplayConfig>()
    );
    let backend = backend_with(&demo_turn("demo", 0));
    let replay = SessionReplay::new(Arc::clone(&backend) as Arc<dyn SessionBackend>);
    for _ in 0..3 {
        assert_eq!(replay.load("demo").unwrap().usage().records, 7);
    }
    // Loads keep no handle on the backend: only the service and this test hold it.
    assert_eq!(Arc::strong_count(&backend), 2);
}

#[test]
fn an_unknown_session_loads_empty_but_a_prefix_of_it_is_refused() {
    // "A session id the backend does not know loads as an empty trajectory with
    // InMemoryBackend and FileBackend. load_prefix and load_at_point refuse it because no
    // record matches."
    let replay = SessionReplay::new(Arc::new(InMemoryBackend::new()));
    let empty = replay.load("never").unwrap();
    assert!(empty.is_empty());
    assert_eq!(empty.len(), 0);
    assert_eq!(empty.session_id(), "never");
    assert_eq!(empty.usage().records, 0);
    assert_eq!(empty.usage().turns, 0);
    assert!(empty.turn(0).is_none());
    let (schema, message) = refusal(empty.stream_turn(0).map(|_| ()));
    assert_eq!(schema, "turn_idx");
    assert!(message.contains("has 0 turns"), "{message}");

    let (schema, message) = refusal(replay.load_prefix("never", 0));
    assert_eq!(schema, "point_id");
    assert!(message.contains("\"never\""), "{message}");
    let (schema, _) = refusal(replay.load_at_point("never:0"));
    assert_eq!(schema, "point_id");
}

#[test]
fn load_prefix_keeps_records_up_to_and_including_the_sequence() {
    let mut records = demo_turn("demo", 0);
    records.extend(demo_turn("demo", 7));
    let replay = SessionReplay::new(backend_with(&records));
    let prefix = replay.load_prefix("demo", 8).unwrap();
    assert_eq!(prefix.usage().records, 9);
    assert_eq!(prefix.len(), 2);
    assert!(prefix.turn(0).unwrap().is_complete());
    let tail = prefix.turn(1).unwrap();
    assert!(!tail.is_complete());
    assert_eq!(tail.sequence_range(), 7..=8);
    assert_eq!(tail.system_prompts(), ["You are terse.".to_owned()]);
    assert_eq!(tail.messages().len(), 1);

    let (_, message) = refusal(replay.load_prefix("demo", 99));
    assert!(message.contains("has sequence 99"), "{message}");
}

#[test]
fn load_at_point_splits_at_the_last_colon() {
    // "load_at_point splits at the last :, since a fork session id can itself contain :."
    let backend = backend_with(&demo_turn("demo", 0));
    let branch = backend.fork("demo", "demo:4").unwrap();
    assert_eq!(branch, "demo:fork:demo:4:0");
    let replay = SessionReplay::new(backend);
    let prefix = replay.load_at_point(&format!("{branch}:2")).unwrap();
    assert_eq!(prefix.session_id(), branch);
    assert_eq!(prefix.usage().records, 3);
    assert_eq!(prefix.turn(0).unwrap().blocks().len(), 1);

    let (schema, _) = refusal(replay.load_at_point("demo"));
    assert_eq!(schema, "point_id");
    let (schema, _) = refusal(replay.load_at_point("demo:x"));
    assert_eq!(schema, "point_id");
}

#[test]
fn the_fork_audit_record_lands_in_the_turn_after_the_last_pair() {
    let backend = backend_with(&demo_turn("demo", 0));
    let branch = backend.fork("demo", "demo:1").unwrap();
    let trajectory = SessionReplay::new(backend).load("demo").unwrap();
    assert_eq!(trajectory.len(), 2);
    let audit = trajectory.turn(1).unwrap();
    assert!(!audit.is_complete());
    assert_eq!(audit.sequence_range(), 7..=7);
    assert_eq!(
        audit.notes(),
        [super::ReplayNote::Fork {
            from_point: "demo:1".into(),
            to_session: branch,
        }]
    );
}

#[test]
fn backend_errors_pass_through_unchanged() {
    // "SessionBackend::replay errors pass through load* unchanged."
    #[derive(Debug)]
    struct Broken;
    impl SessionBackend for Broken {
        fn name(&self) -> &str {
            "broken"
        }
        fn append(&self, _: cuca_events::SessionRecord) -> Result<(), PluginError> {
            Ok(())
        }
        fn replay(&self, session_id: &str) -> Result<Vec<cuca_events::SessionRecord>, PluginError> {
            Err(PluginError::NotFound {
                what: "disk".into(),
                id: session_id.into(),
            })
        }
        fn fork(&self, _: &str, _: &str) -> Result<String, PluginError> {
            Ok(String::new())
        }
        fn sessions(&self) -> Result<Vec<String>, PluginError> {
            Ok(Vec::new())
        }
        fn gauge(&self) -> cuca_events::BackendGauge {
            cuca_events::BackendGauge::default()
        }
    }
    let replay = SessionReplay::new(Arc::new(Broken));
    for result in [
        replay.load("demo"),
        replay.load_prefix("demo", 0),
        replay.load_at_point("demo:0"),
    ] {
        match result {
            Err(PluginError::NotFound { what, id }) => {
                assert_eq!((what.as_str(), id.as_str()), ("disk", "demo"))
            }
            other => panic!("expected the backend's error, got {other:?}"),
        }
    }
}

#[test]
fn a_prefix_is_capped_by_what_it_retains() {
    // "max_records is the most records one load may retain": a prefix under the cap loads
    // from a session over it.
    let records: Vec<_> = (0..10)
        .map(|sequence| record("long", sequence, SessionEvent::Output { text: "x".into() }))
        .collect();
    let config = ReplayConfig::new(5, 100, None).unwrap();
    let replay = SessionReplay::with_config(backend_with(&records), config).unwrap();
    let (schema, message) = refusal(replay.load("long"));
    assert_eq!(schema, "ReplayConfig::max_records");
    assert!(
        message.contains("10 records, over the cap of 5"),
        "{message}"
    );
    assert_eq!(replay.load_prefix("long", 4).unwrap().usage().records, 5);
    let (schema, _) = refusal(replay.load_prefix("long", 5));
    assert_eq!(schema, "ReplayConfig::max_records");
}

#[test]
fn load_moves_the_backends_text_into_the_turns_without_copying_it() {
    // "load* moves that Vec into the trajectory, so the steady state is one trajectory and
    // not a trajectory plus its source records." A backend that hands over one prepared
    // Vec lets the test see where each string's heap buffer ends up.
    #[derive(Debug)]
    struct HandOver(std::sync::Mutex<Option<Vec<cuca_events::SessionRecord>>>);
    impl SessionBackend for HandOver {
        fn name(&self) -> &str {
            "hand-over"
        }
        fn append(&self, _: cuca_events::SessionRecord) -> Result<(), PluginError> {
            Ok(())
        }
        fn replay(&self, _: &str) -> Result<Vec<cuca_events::SessionRecord>, PluginError> {
            Ok(self.0.lock().unwrap().take().unwrap_or_default())
        }
        fn fork(&self, _: &str, _: &str) -> Result<String, PluginError> {
            Ok(String::new())
        }
        fn sessions(&self) -> Result<Vec<String>, PluginError> {
            Ok(Vec::new())
        }
        fn gauge(&self) -> cuca_events::BackendGauge {
            cuca_events::BackendGauge::default()
        }
    }
    let records = demo_turn("demo", 0);
    let text_ptr = |event: &SessionEvent| match event {
        SessionEvent::SystemPrompt { text }
        | SessionEvent::Reasoning { text }
        | SessionEvent::Output { text } => text.as_ptr(),
        other => panic!("no text in {other:?}"),
    };
    let prompt = text_ptr(&records[0].event);
    let output = text_ptr(&records[4].event);
    let replay = SessionReplay::new(Arc::new(HandOver(std::sync::Mutex::new(Some(records)))));
    let trajectory = replay.load("demo").unwrap();
    let turn = trajectory.turn(0).unwrap();
    assert_eq!(turn.system_prompts()[0].as_ptr(), prompt);
    match turn.blocks().last() {
        Some(cuca_events::MessageContentBlock::Text { text }) => assert_eq!(text.as_ptr(), output),
        other => panic!("expected the Output block, got {other:?}"),
    }
}

/// "Replay reads a recording through the SessionBackend seam and never writes" and "Every
/// load reads through SessionBackend::replay": each load is exactly one replay call, and no
/// load, stream or rebuilt response ever appends or forks.
#[test]
fn every_load_is_one_replay_call_and_nothing_ever_writes() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Debug, Default)]
    struct Counting {
        inner: InMemoryBackend,
        replays: AtomicUsize,
        writes: AtomicUsize,
    }
    impl SessionBackend for Counting {
        fn name(&self) -> &str {
            "counting"
        }
        fn append(&self, record: cuca_events::SessionRecord) -> Result<(), PluginError> {
            self.writes.fetch_add(1, Ordering::SeqCst);
            self.inner.append(record)
        }
        fn replay(&self, session_id: &str) -> Result<Vec<cuca_events::SessionRecord>, PluginError> {
            self.replays.fetch_add(1, Ordering::SeqCst);
            self.inner.replay(session_id)
        }
        fn fork(&self, session_id: &str, point_id: &str) -> Result<String, PluginError> {
            self.writes.fetch_add(1, Ordering::SeqCst);
            self.inner.fork(session_id, point_id)
        }
        fn sessions(&self) -> Result<Vec<String>, PluginError> {
            self.inner.sessions()
        }
        fn gauge(&self) -> cuca_events::BackendGauge {
            self.inner.gauge()
        }
    }

    let backend = Arc::new(Counting::default());
    append_all(&backend.inner, &demo_turn("demo", 0));
    let replay = SessionReplay::new(Arc::clone(&backend) as Arc<dyn SessionBackend>);
    let whole = replay.load("demo").unwrap();
    let prefix = replay.load_prefix("demo", 1).unwrap();
    let at_point = replay.load_at_point("demo:1").unwrap();
    assert_eq!(backend.replays.load(Ordering::SeqCst), 3);
    let blocks: Vec<_> = futures::executor::block_on(futures::StreamExt::collect::<Vec<_>>(
        whole.stream_turn(0).unwrap(),
    ));
    assert_eq!(blocks.len(), whole.turn(0).unwrap().blocks().len());
    let response = whole.turn(0).unwrap().response("m", "p");
    assert_eq!(response.token_usage.prompt_tokens, 31);
    assert_eq!(prefix, at_point);
    assert_eq!(backend.writes.load(Ordering::SeqCst), 0);
    assert_eq!(backend.inner.replay("demo").unwrap(), demo_turn("demo", 0));
}

/// Tool results a session log records among a request's records (before
/// its `CallRequest`) are the request's tool messages, where they were sent; a tool result
/// recorded after the answer began stays a block of the answer, as the seed has it.
#[test]
fn a_requests_tool_results_are_its_tool_messages_and_an_answers_stay_blocks() {
    use cuca_events::{Message, MessageContentBlock, Role};
    let result = |id: &str, text: &str| SessionEvent::ToolResult {
        tool_call_id: id.into(),
        content: text.into(),
        is_error: false,
        stdout: None,
        stderr: None,
        exit_code: None,
    };
    let user = |text: &str| {
        SessionEvent::Message(Message {
            role: Role::User,
            content: vec![MessageContentBlock::text(text)],
        })
    };
    let call_request = SessionEvent::CallRequest {
        model: "m".into(),
        parameters: "{}".into(),
        tools: "[]".into(),
        messages: 4,
    };
    let events = [
        user("look it up"),
        result("call_1", "ALPHA"),
        user("and then?"),
        call_request,
        SessionEvent::Output {
            text: "It said ALPHA".into(),
        },
        result("call_2", "after the answer"),
        SessionEvent::Latency { duration_ms: 1 },
        SessionEvent::TokenUsage {
            prompt_tokens: 1,
            completion_tokens: 1,
        },
    ];
    let records: Vec<_> = events
        .into_iter()
        .enumerate()
        .map(|(i, event)| record("tools", i as u64, event))
        .collect();
    let backend = backend_with(&records);
    let trajectory = SessionReplay::new(backend).load("tools").unwrap();
    let turn = &trajectory.turns()[0];
    let roles: Vec<Role> = turn.messages().iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Tool, Role::User]);
    assert_eq!(
        turn.messages()[1].content,
        vec![MessageContentBlock::ToolResult {
            tool_call_id: "call_1".into(),
            content: "ALPHA".into(),
            is_error: false,
        }]
    );
    assert_eq!(turn.blocks().len(), 2);
    assert!(matches!(
        turn.blocks()[1],
        MessageContentBlock::ToolResult { .. }
    ));
}
