//! Unit tests of the hook rules, sequencing, resume, fork realignment and error propagation.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cuca_events::{
    BackendGauge, CucaPlugin, Message, MessageContentBlock, PluginError, Role, SessionBackend,
    SessionEvent, SessionRecord, TokenUsage, UnifiedRequest, UnifiedResponse,
};
use cuca_store_mem::InMemoryBackend;
use futures::executor::block_on;

use super::{SessionLogPlugin, DEFAULT_SESSION_ID};

fn memory() -> Arc<dyn SessionBackend> {
    Arc::new(InMemoryBackend::new())
}

fn plugin(backend: &Arc<dyn SessionBackend>) -> SessionLogPlugin {
    SessionLogPlugin::new(Arc::clone(backend)).with_session_id("demo")
}

fn events(backend: &Arc<dyn SessionBackend>, session_id: &str) -> Vec<SessionEvent> {
    backend
        .replay(session_id)
        .unwrap()
        .into_iter()
        .map(|record| record.event)
        .collect()
}

fn sequences(backend: &Arc<dyn SessionBackend>, session_id: &str) -> Vec<u64> {
    backend
        .replay(session_id)
        .unwrap()
        .iter()
        .map(|record| record.sequence)
        .collect()
}

fn request(messages: Vec<Message>) -> UnifiedRequest {
    UnifiedRequest::new(messages)
}

fn system(text: &str) -> SessionEvent {
    SessionEvent::SystemPrompt { text: text.into() }
}

fn tool_message(tool_call_id: &str, content: &str) -> Message {
    Message {
        role: Role::Tool,
        content: vec![MessageContentBlock::ToolResult {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
            is_error: false,
        }],
    }
}

/// A backend that refuses appends while `failures` is above zero, one failure per refusal,
/// and otherwise passes everything to an InMemoryBackend.
#[derive(Debug)]
struct Flaky {
    inner: InMemoryBackend,
    failures: AtomicUsize,
    replay_failures: AtomicUsize,
}

impl Flaky {
    fn new() -> Arc<Self> {
        Arc::new(Flaky {
            inner: InMemoryBackend::new(),
            failures: AtomicUsize::new(0),
            replay_failures: AtomicUsize::new(0),
        })
    }

    fn fail_next(&self, n: usize) {
        self.failures.store(n, Ordering::SeqCst);
    }

    fn refusal() -> PluginError {
        PluginError::Backend {
            backend: "flaky".into(),
            message: "disk on fire".into(),
            source: None,
        }
    }

    fn take(counter: &AtomicUsize) -> bool {
        counter
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

impl SessionBackend for Flaky {
    fn name(&self) -> &str {
        "flaky"
    }
    fn append(&self, record: SessionRecord) -> Result<(), PluginError> {
        if Self::take(&self.failures) {
            return Err(Self::refusal());
        }
        self.inner.append(record)
    }
    fn replay(&self, session_id: &str) -> Result<Vec<SessionRecord>, PluginError> {
        if Self::take(&self.replay_failures) {
            return Err(Self::refusal());
        }
        self.inner.replay(session_id)
    }
    fn fork(&self, session_id: &str, point_id: &str) -> Result<String, PluginError> {
        self.inner.fork(session_id, point_id)
    }
    fn sessions(&self) -> Result<Vec<String>, PluginError> {
        self.inner.sessions()
    }
    fn gauge(&self) -> BackendGauge {
        self.inner.gauge()
    }
}

fn assert_is_the_refusal(result: Result<(), PluginError>) {
    match result {
        Err(PluginError::Backend {
            backend,
            message,
            source: None,
        }) => {
            assert_eq!(backend, "flaky");
            assert_eq!(message, "disk on fire");
        }
        other => panic!("expected the backend's own error, got {other:?}"),
    }
}

#[test]
fn the_default_session_id_is_default_and_with_session_id_replaces_it() {
    let backend = memory();
    let plain = SessionLogPlugin::new(Arc::clone(&backend));
    assert_eq!(DEFAULT_SESSION_ID, "default");
    assert_eq!(plain.session_id(), "default");
    plain
        .append_log(SessionEvent::Output { text: "a".into() })
        .unwrap();
    assert_eq!(backend.sessions().unwrap(), vec!["default".to_owned()]);
    assert_eq!(plugin(&backend).session_id(), "demo");
}

/// `.backend()` is the handle replay binds to: the very Arc the plugin was given.
#[test]
fn backend_returns_the_handle_the_plugin_was_given() {
    let backend = memory();
    let log = plugin(&backend);
    assert!(Arc::ptr_eq(&log.backend(), &backend));
    assert_eq!(log.name(), "session-log");
}

/// "on_request appends a SystemPrompt for every System message on every request."
#[test]
fn on_request_appends_a_system_prompt_for_every_system_message_on_every_request() {
    let backend = memory();
    let log = plugin(&backend);
    let mut first = request(vec![
        Message::system("You are terse."),
        Message::system("Answer in English."),
        Message::user("hi"),
    ]);
    block_on(log.on_request(&mut first)).unwrap();
    let mut again = first.clone();
    block_on(log.on_request(&mut again)).unwrap();
    assert_eq!(
        events(&backend, "demo"),
        vec![
            system("You are terse."),
            system("Answer in English."),
            SessionEvent::Message(Message::user("hi")),
            system("You are terse."),
            system("Answer in English."),
        ]
    );
}

/// "It appends a Message for a User or Assistant message only the first time that message
/// position appears."
#[test]
fn on_request_appends_a_message_only_the_first_time_its_position_appears() {
    let backend = memory();
    let log = plugin(&backend);
    let mut turn1 = request(vec![Message::user("The vault is in Lisbon.")]);
    block_on(log.on_request(&mut turn1)).unwrap();
    let mut turn2 = request(vec![
        Message::user("The vault is in Lisbon."),
        Message::assistant("noted"),
        Message::user("Where is the vault?"),
    ]);
    block_on(log.on_request(&mut turn2)).unwrap();
    // Positions, not contents, decide: position 0 was seen even though its text changed.
    let mut turn3 = request(vec![
        Message::user("(summarised)"),
        Message::assistant("noted"),
        Message::user("Where is the vault?"),
        Message::assistant("Lisbon"),
    ]);
    block_on(log.on_request(&mut turn3)).unwrap();
    assert_eq!(
        events(&backend, "demo"),
        vec![
            SessionEvent::Message(Message::user("The vault is in Lisbon.")),
            SessionEvent::Message(Message::assistant("noted")),
            SessionEvent::Message(Message::user("Where is the vault?")),
            SessionEvent::Message(Message::assistant("Lisbon")),
        ]
    );
}

/// "Tool messages are not recorded."
#[test]
fn on_request_does_not_record_tool_messages() {
    let backend = memory();
    let log = plugin(&backend);
    let mut with_tool = request(vec![
        Message::user("list files"),
        tool_message("call-1", "a.txt"),
    ]);
    block_on(log.on_request(&mut with_tool)).unwrap();
    assert_eq!(
        events(&backend, "demo"),
        vec![SessionEvent::Message(Message::user("list files"))]
    );
}

/// A plugin registered before the log that scrubs the request.
struct Redact;

#[cuca_events::async_trait]
impl CucaPlugin for Redact {
    async fn on_request(&self, request: &mut UnifiedRequest) -> Result<(), PluginError> {
        for message in &mut request.messages {
            for block in &mut message.content {
                if let MessageContentBlock::Text { text } = block {
                    *text = text.replace("Lisbon", "[city]");
                }
            }
        }
        Ok(())
    }
}

/// "It records the request as earlier on_request hooks left it."
#[test]
fn on_request_records_the_request_as_earlier_hooks_left_it_and_does_not_change_it() {
    let backend = memory();
    let log = plugin(&backend);
    let plugins: Vec<Arc<dyn CucaPlugin>> = vec![Arc::new(Redact), Arc::new(log)];
    let mut sent = request(vec![
        Message::system("Lisbon is secret."),
        Message::user("The vault is in Lisbon."),
    ]);
    block_on(async {
        for plugin in &plugins {
            plugin.on_request(&mut sent).await.unwrap();
        }
    });
    assert_eq!(
        events(&backend, "demo"),
        vec![
            system("[city] is secret."),
            SessionEvent::Message(Message::user("The vault is in [city].")),
        ]
    );
    // The log only reads: what leaves the hooks is what Redact made.
    assert_eq!(sent.messages[1], Message::user("The vault is in [city]."));
}

/// "on_stream_chunk appends one record per block: Thinking becomes Reasoning, Text becomes
/// Output, ToolCall becomes ToolCall, and ToolResult becomes ToolResult with stdout, stderr,
/// and exit_code set to None. ImageBase64 blocks are not recorded. Blocks are recorded
/// verbatim."
#[test]
fn on_stream_chunk_appends_one_record_per_block_verbatim() {
    let backend = memory();
    let log = plugin(&backend);
    let blocks = [
        MessageContentBlock::thinking("  The user wants\n"),
        MessageContentBlock::text(" noted \u{1F510}"),
        MessageContentBlock::ToolCall {
            id: "call-1".into(),
            name: "ls".into(),
            arguments: "{\"dir\": \".\" }".into(),
        },
        MessageContentBlock::ImageBase64 {
            media_type: "image/png".into(),
            data: "iVBORw0KGgo=".into(),
        },
        MessageContentBlock::ToolResult {
            tool_call_id: "call-1".into(),
            content: "a.txt\n".into(),
            is_error: true,
        },
        MessageContentBlock::text(""),
    ];
    for block in &blocks {
        block_on(log.on_stream_chunk(block)).unwrap();
    }
    assert_eq!(
        events(&backend, "demo"),
        vec![
            SessionEvent::Reasoning {
                text: "  The user wants\n".into()
            },
            SessionEvent::Output {
                text: " noted \u{1F510}".into()
            },
            SessionEvent::ToolCall {
                id: "call-1".into(),
                name: "ls".into(),
                arguments: "{\"dir\": \".\" }".into(),
            },
            SessionEvent::ToolResult {
                tool_call_id: "call-1".into(),
                content: "a.txt\n".into(),
                is_error: true,
                stdout: None,
                stderr: None,
                exit_code: None,
            },
            SessionEvent::Output { text: "".into() },
        ]
    );
    assert_eq!(sequences(&backend, "demo"), vec![0, 1, 2, 3, 4]);
}

/// Blocks recorded together are the records `on_stream_chunk` makes one by one: the same
/// events at the same sequences, an image skipped.
#[test]
fn record_blocks_records_what_on_stream_chunk_records_block_by_block() {
    let blocks = [
        MessageContentBlock::thinking("  The user wants\n"),
        MessageContentBlock::text(" noted"),
        MessageContentBlock::ImageBase64 {
            media_type: "image/png".into(),
            data: "iVBORw0KGgo=".into(),
        },
        MessageContentBlock::ToolCall {
            id: "call-1".into(),
            name: "ls".into(),
            arguments: "{}".into(),
        },
        MessageContentBlock::text(""),
    ];
    let (one_by_one, together) = (memory(), memory());
    let first = plugin(&one_by_one);
    let second = plugin(&together);
    for log in [&first, &second] {
        log.append_log(system("You are terse.")).unwrap();
    }
    for block in &blocks {
        block_on(first.on_stream_chunk(block)).unwrap();
    }
    second.record_blocks(&blocks).unwrap();
    second.record_blocks(&[]).unwrap();
    assert_eq!(events(&together, "demo"), events(&one_by_one, "demo"));
    assert_eq!(sequences(&together, "demo"), vec![0, 1, 2, 3, 4]);
    // The cursor moved past them: the next record follows.
    second
        .append_log(SessionEvent::Latency { duration_ms: 1 })
        .unwrap();
    assert_eq!(sequences(&together, "demo"), vec![0, 1, 2, 3, 4, 5]);
}

/// Another writer appended since the cursor last read the session: the run is refused at its
/// first record, and written once more after the other writer's last record.
#[test]
fn record_blocks_after_another_writer_continues_after_its_last_record() {
    let backend = memory();
    let ours = plugin(&backend);
    let theirs = plugin(&backend);
    ours.append_log(system("ours")).unwrap();
    theirs.append_log(system("theirs")).unwrap();
    ours.record_blocks(&[
        MessageContentBlock::text("a"),
        MessageContentBlock::text("b"),
    ])
    .unwrap();
    assert_eq!(sequences(&backend, "demo"), vec![0, 1, 2, 3]);
    assert_eq!(
        events(&backend, "demo")[2..],
        [
            SessionEvent::Output { text: "a".into() },
            SessionEvent::Output { text: "b".into() }
        ]
    );
}

/// A memory store where another writer appends a record just before the plugin's record at
/// each of `cut_in_at`'s sequences, once each: the plugin's append there is refused as taken.
#[derive(Debug)]
struct CutIn {
    inner: InMemoryBackend,
    cut_in_at: std::sync::Mutex<Vec<u64>>,
}

impl SessionBackend for CutIn {
    fn name(&self) -> &str {
        "cut-in"
    }

    fn append(&self, record: SessionRecord) -> Result<(), PluginError> {
        let cut_in = {
            let mut at = self.cut_in_at.lock().unwrap();
            let due = at.iter().position(|s| *s == record.sequence);
            due.map(|i| at.remove(i))
        };
        if let Some(sequence) = cut_in {
            self.inner.append(SessionRecord {
                event: SessionEvent::Output {
                    text: format!("theirs at {sequence}"),
                },
                ..record.clone()
            })?;
        }
        self.inner.append(record)
    }

    fn replay(&self, session_id: &str) -> Result<Vec<SessionRecord>, PluginError> {
        self.inner.replay(session_id)
    }

    fn fork(&self, session_id: &str, point_id: &str) -> Result<String, PluginError> {
        self.inner.fork(session_id, point_id)
    }

    fn sessions(&self) -> Result<Vec<String>, PluginError> {
        self.inner.sessions()
    }

    fn gauge(&self) -> BackendGauge {
        self.inner.gauge()
    }
}

/// Another writer cutting in twice within one run: each refused record is tried again after
/// the other writer's record, as block-by-block recording tries each block again, and the
/// whole run is recorded.
#[test]
fn record_blocks_tries_each_refused_record_again_once() {
    let backend: Arc<dyn SessionBackend> = Arc::new(CutIn {
        inner: InMemoryBackend::new(),
        cut_in_at: std::sync::Mutex::new(vec![1, 3]),
    });
    let log = plugin(&backend);
    log.record_blocks(&["a", "b", "c"].map(MessageContentBlock::text))
        .unwrap();
    assert_eq!(
        events(&backend, "demo"),
        ["a", "theirs at 1", "b", "theirs at 3", "c"]
            .map(|text| SessionEvent::Output { text: text.into() })
    );
    assert_eq!(sequences(&backend, "demo"), vec![0, 1, 2, 3, 4]);
}

/// A block the store refuses in the middle of a run (one over the file store's frame limit):
/// the blocks before it are recorded and counted (an image among them counts as done), it and
/// the blocks after it are not, and the next record takes the refused one's sequence.
#[test]
fn record_blocks_refused_midway_counts_the_blocks_recorded_and_the_next_record_follows_them() {
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn SessionBackend> =
        Arc::new(cuca_store_file::FileBackend::new(dir.path()).unwrap());
    let log = plugin(&backend);
    let huge = "x".repeat(cuca_store_file::MAX_FRAME_LEN);
    let refused = log
        .record_blocks(&[
            MessageContentBlock::text("a"),
            MessageContentBlock::ImageBase64 {
                media_type: "image/png".into(),
                data: "iVBORw0KGgo=".into(),
            },
            MessageContentBlock::text("b"),
            MessageContentBlock::text(huge),
            MessageContentBlock::text("c"),
        ])
        .unwrap_err();
    assert_eq!(refused.stored, 3);
    assert!(
        matches!(refused.error, PluginError::Validation { .. }),
        "{refused}"
    );
    block_on(log.on_stream_chunk(&MessageContentBlock::text("d"))).unwrap();
    assert_eq!(sequences(&backend, "demo"), vec![0, 1, 2]);
    assert_eq!(
        events(&backend, "demo"),
        ["a", "b", "d"].map(|text| SessionEvent::Output { text: text.into() })
    );
}

/// "on_response_complete appends Latency (duration_ms) and TokenUsage, in that order."
#[test]
fn on_response_complete_appends_latency_then_token_usage() {
    let backend = memory();
    let log = plugin(&backend);
    let response = UnifiedResponse {
        duration: Duration::from_micros(412_999),
        token_usage: TokenUsage {
            prompt_tokens: 31,
            completion_tokens: 9,
        },
        ..UnifiedResponse::default()
    };
    block_on(log.on_response_complete(&response)).unwrap();
    assert_eq!(
        events(&backend, "demo"),
        vec![
            SessionEvent::Latency { duration_ms: 412 },
            SessionEvent::TokenUsage {
                prompt_tokens: 31,
                completion_tokens: 9
            },
        ]
    );
}

/// "execute_local_tool uses the trait default."
#[test]
fn execute_local_tool_is_the_trait_default_and_writes_nothing() {
    let backend = memory();
    let log = plugin(&backend);
    let call = MessageContentBlock::ToolCall {
        id: "call-1".into(),
        name: "ls".into(),
        arguments: "{}".into(),
    };
    assert_eq!(block_on(log.execute_local_tool(&call)).unwrap(), None);
    assert_eq!(backend.sessions().unwrap(), Vec::<String>::new());
}

/// "Every hook writes to the plugin's session id." and "The plugin assigns every sequence
/// number."
#[test]
fn every_hook_writes_to_the_plugins_session_id_with_dense_sequences_and_a_current_timestamp() {
    let backend = memory();
    let log = SessionLogPlugin::new(Arc::clone(&backend)).with_session_id("agent-7");
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    block_on(async {
        let mut req = request(vec![Message::system("s"), Message::user("u")]);
        log.on_request(&mut req).await.unwrap();
        log.on_stream_chunk(&MessageContentBlock::thinking("t"))
            .await
            .unwrap();
        log.on_stream_chunk(&MessageContentBlock::text("o"))
            .await
            .unwrap();
        log.on_response_complete(&UnifiedResponse::default())
            .await
            .unwrap();
    });
    let records = backend.replay("agent-7").unwrap();
    assert_eq!(backend.sessions().unwrap(), vec!["agent-7".to_owned()]);
    assert_eq!(records.len(), 6);
    for (index, record) in records.iter().enumerate() {
        assert_eq!(record.session_id, "agent-7");
        assert_eq!(record.sequence, index as u64);
        assert!(record.timestamp_ms >= before, "{record:?}");
    }
}

/// "ModelSwap records arrive through append_log, called by whoever holds the store handle. The
/// plugin's own hooks never write one."
#[test]
fn append_log_takes_the_next_sequence_and_returns_the_stored_record() {
    let backend = memory();
    let log = plugin(&backend);
    block_on(log.on_stream_chunk(&MessageContentBlock::text("noted"))).unwrap();
    let swap = SessionEvent::ModelSwap {
        from: "gemma-4-12b".into(),
        to: "gemma-4-27b".into(),
        reason: "escalation".into(),
    };
    let stored = log.append_log(swap.clone()).unwrap();
    assert_eq!(stored.sequence, 1);
    assert_eq!(stored.point_id(), "demo:1");
    assert_eq!(stored.event, swap);
    assert_eq!(backend.replay("demo").unwrap().last(), Some(&stored));
    let n_swaps = events(&backend, "demo")
        .iter()
        .filter(|event| matches!(event, SessionEvent::ModelSwap { .. }))
        .count();
    assert_eq!(n_swaps, 1, "only append_log wrote a ModelSwap");
}

/// "It resumes from the backend's replayed length" — a second plugin over the same store
/// continues the sequence and does not record the earlier messages again.
#[test]
fn a_new_plugin_over_a_store_with_records_resumes_sequence_and_message_positions() {
    let backend = memory();
    let turn1 = vec![
        Message::system("s"),
        Message::user("The vault is in Lisbon."),
    ];
    {
        let first = plugin(&backend);
        let mut req = request(turn1.clone());
        block_on(first.on_request(&mut req)).unwrap();
        block_on(first.on_stream_chunk(&MessageContentBlock::text("noted"))).unwrap();
    }
    let resumed = plugin(&backend);
    let mut turn2 = turn1.clone();
    turn2.push(Message::assistant("noted"));
    turn2.push(Message::user("Where is the vault?"));
    let mut req = request(turn2);
    block_on(resumed.on_request(&mut req)).unwrap();
    assert_eq!(sequences(&backend, "demo"), vec![0, 1, 2, 3, 4, 5]);
    assert_eq!(
        events(&backend, "demo")[3..],
        [
            system("s"),
            SessionEvent::Message(Message::assistant("noted")),
            SessionEvent::Message(Message::user("Where is the vault?")),
        ]
    );
}

/// Resuming uses last sequence + 1, so a session with a gap never gets a sequence twice.
#[test]
fn resume_continues_after_the_last_sequence_not_the_count() {
    let backend = memory();
    for sequence in [0, 7] {
        backend
            .append(cuca_testkit::record(
                "demo",
                sequence,
                SessionEvent::Output { text: "x".into() },
            ))
            .unwrap();
    }
    let log = plugin(&backend);
    let stored = log
        .append_log(SessionEvent::Output { text: "y".into() })
        .unwrap();
    assert_eq!(stored.sequence, 8);
}

/// "The original gains one SessionEvent::Fork record, and the plugin then realigns that
/// session's next sequence number to its replayed length."
#[test]
fn fork_session_realigns_the_next_sequence_after_the_audit_record() {
    let backend = memory();
    let log = plugin(&backend);
    let mut req = request(vec![Message::system("s"), Message::user("u")]);
    block_on(log.on_request(&mut req)).unwrap();
    block_on(log.on_stream_chunk(&MessageContentBlock::text("o"))).unwrap();
    let branch = log.fork_session("demo", "demo:1").unwrap();
    assert_eq!(branch, "demo:fork:demo:1:0");
    block_on(log.on_stream_chunk(&MessageContentBlock::text("after"))).unwrap();
    assert_eq!(sequences(&backend, "demo"), vec![0, 1, 2, 3, 4]);
    let original = events(&backend, "demo");
    assert_eq!(
        original[3],
        SessionEvent::Fork {
            from_point: "demo:1".into(),
            to_session: branch.clone(),
        }
    );
    assert_eq!(
        original[4],
        SessionEvent::Output {
            text: "after".into()
        }
    );
    assert_eq!(
        events(&backend, &branch),
        vec![system("s"), SessionEvent::Message(Message::user("u"))]
    );
}

/// A fork taken before the plugin's first append still leaves its next record after the audit.
#[test]
fn fork_session_before_any_hook_still_realigns() {
    let backend = memory();
    cuca_testkit::append_all(backend.as_ref(), &cuca_testkit::demo_turn("demo", 0));
    let log = plugin(&backend);
    log.fork_session("demo", "demo:1").unwrap();
    let next = log
        .append_log(SessionEvent::Output { text: "x".into() })
        .unwrap();
    assert_eq!(next.sequence, 8, "7 records, the audit at 7, then ours");
}

/// If the realigning replay fails, the fork id is still returned and the next append reads
/// the tail again instead of reusing the audit record's sequence.
#[test]
fn fork_session_whose_realigning_replay_fails_realigns_on_the_next_append() {
    let flaky = Flaky::new();
    let backend: Arc<dyn SessionBackend> = flaky.clone();
    let log = plugin(&backend);
    log.append_log(SessionEvent::Output { text: "a".into() })
        .unwrap();
    flaky.replay_failures.store(1, Ordering::SeqCst);
    let branch = log.fork_session("demo", "demo:0").unwrap();
    assert_eq!(branch, "demo:fork:demo:0:0");
    let next = log
        .append_log(SessionEvent::Output { text: "b".into() })
        .unwrap();
    assert_eq!(next.sequence, 2);
    assert_eq!(sequences(&backend, "demo"), vec![0, 1, 2]);
}

/// "SessionLogPlugin returns the PluginError its backend returns" — a failed fork changes
/// nothing and uses no sequence.
#[test]
fn fork_session_returns_the_backends_error_unchanged() {
    let backend = memory();
    let log = plugin(&backend);
    log.append_log(SessionEvent::Output { text: "a".into() })
        .unwrap();
    let missing = log.fork_session("demo", "demo:9");
    assert!(
        matches!(&missing, Err(PluginError::NotFound { what, id }) if what == "point" && id == "demo:9"),
        "{missing:?}"
    );
    let next = log
        .append_log(SessionEvent::Output { text: "b".into() })
        .unwrap();
    assert_eq!(next.sequence, 1);
}

/// "a hook propagates an append failure" — the full InMemoryBackend's CapacityExceeded comes
/// back from every hook unchanged.
#[test]
fn every_hook_propagates_the_backends_capacity_error_unchanged() {
    let backend: Arc<dyn SessionBackend> = Arc::new(InMemoryBackend::with_max_records(1).unwrap());
    let log = plugin(&backend);
    log.append_log(SessionEvent::Output { text: "a".into() })
        .unwrap();
    let full = |result: Result<(), PluginError>| match result {
        Err(PluginError::CapacityExceeded { resource, cap, .. }) => {
            assert_eq!(resource, "InMemoryBackend");
            assert_eq!(cap, 1);
        }
        other => panic!("expected CapacityExceeded, got {other:?}"),
    };
    let mut req = request(vec![Message::user("u")]);
    full(block_on(log.on_request(&mut req)));
    full(block_on(
        log.on_stream_chunk(&MessageContentBlock::text("o")),
    ));
    full(block_on(
        log.on_response_complete(&UnifiedResponse::default()),
    ));
    full(
        log.append_log(SessionEvent::Output { text: "b".into() })
            .map(|_| ()),
    );
    assert_eq!(sequences(&backend, "demo"), vec![0]);
}

/// "a failed append must not consume a sequence number" — the next successful append reuses
/// it, and a message whose append failed is recorded on the next request.
#[test]
fn a_failed_append_uses_no_sequence_and_leaves_the_message_position_unseen() {
    let flaky = Flaky::new();
    let backend: Arc<dyn SessionBackend> = flaky.clone();
    let log = plugin(&backend);
    block_on(log.on_stream_chunk(&MessageContentBlock::thinking("t"))).unwrap();

    flaky.fail_next(1);
    assert_is_the_refusal(block_on(
        log.on_stream_chunk(&MessageContentBlock::text("lost")),
    ));
    block_on(log.on_stream_chunk(&MessageContentBlock::text("kept"))).unwrap();

    // The request's Message append fails; the next request records it.
    let messages = vec![Message::user("u")];
    flaky.fail_next(1);
    assert_is_the_refusal(block_on(log.on_request(&mut request(messages.clone()))));
    block_on(log.on_request(&mut request(messages))).unwrap();

    // Latency fails, so TokenUsage is not written either: the pair stays together.
    flaky.fail_next(1);
    assert_is_the_refusal(block_on(
        log.on_response_complete(&UnifiedResponse::default()),
    ));

    assert_eq!(sequences(&backend, "demo"), vec![0, 1, 2]);
    assert_eq!(
        events(&backend, "demo"),
        vec![
            SessionEvent::Reasoning { text: "t".into() },
            SessionEvent::Output {
                text: "kept".into()
            },
            SessionEvent::Message(Message::user("u")),
        ]
    );
}

/// A replay failure on the plugin's first touch is returned unchanged and nothing is written.
#[test]
fn a_failed_resume_replay_is_returned_and_retried() {
    let flaky = Flaky::new();
    let backend: Arc<dyn SessionBackend> = flaky.clone();
    let log = plugin(&backend);
    flaky.replay_failures.store(1, Ordering::SeqCst);
    assert_is_the_refusal(block_on(
        log.on_stream_chunk(&MessageContentBlock::text("a")),
    ));
    block_on(log.on_stream_chunk(&MessageContentBlock::text("b"))).unwrap();
    assert_eq!(sequences(&backend, "demo"), vec![0]);
}

/// Concurrent turns through one plugin keep sequences dense and unique, in append order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_turns_through_one_plugin_get_dense_unique_sequences() {
    const N_TASKS: u64 = 8;
    const N_BLOCKS: u64 = 50;
    let backend = memory();
    let log = Arc::new(plugin(&backend));
    let mut tasks = Vec::new();
    for task in 0..N_TASKS {
        let log = Arc::clone(&log);
        tasks.push(tokio::spawn(async move {
            for block in 0..N_BLOCKS {
                let text = format!("task {task} block {block}");
                log.on_stream_chunk(&MessageContentBlock::thinking(text))
                    .await?;
                tokio::task::yield_now().await;
            }
            log.on_response_complete(&UnifiedResponse::default()).await
        }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let n_records = N_TASKS * (N_BLOCKS + 2);
    assert_eq!(
        sequences(&backend, "demo"),
        (0..n_records).collect::<Vec<_>>()
    );
    // Each task's blocks were recorded in its own order, and every Latency is followed by
    // its TokenUsage.
    let events = events(&backend, "demo");
    for task in 0..N_TASKS {
        let prefix = format!("task {task} block ");
        let mine: Vec<u64> = events
            .iter()
            .filter_map(|event| match event {
                SessionEvent::Reasoning { text } => text.strip_prefix(&prefix)?.parse().ok(),
                _ => None,
            })
            .collect();
        assert_eq!(mine, (0..N_BLOCKS).collect::<Vec<_>>());
    }
    for (index, event) in events.iter().enumerate() {
        if matches!(event, SessionEvent::Latency { .. }) {
            assert!(matches!(
                events.get(index + 1),
                Some(SessionEvent::TokenUsage { .. })
            ));
        }
    }
}

/// One step of the property below.
#[derive(Debug, Clone)]
enum Op {
    /// A streamed block.
    Chunk,
    /// A completion.
    Complete,
    /// The conversation grows by this many user/assistant messages, then is sent.
    Request(usize),
    /// The backend refuses the next append.
    FailNext,
    /// The process restarts: a new plugin over the same store.
    Restart,
    /// The plugin forks its own session at its first record.
    Fork,
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        3 => Just(Op::Chunk),
        1 => Just(Op::Complete),
        2 => (0usize..3).prop_map(Op::Request),
        1 => Just(Op::FailNext),
        1 => Just(Op::Restart),
        1 => Just(Op::Fork),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

    /// Whatever mix of hooks, refused appends, restarts and forks: the session's sequences are
    /// dense from 0, and its Message records are the conversation's user and assistant
    /// messages, each once, in order.
    #[test]
    fn sequences_stay_dense_and_messages_are_recorded_once(ops in proptest::collection::vec(op(), 0..40)) {
        let flaky = Flaky::new();
        let backend: Arc<dyn SessionBackend> = flaky.clone();
        let mut log = plugin(&backend);
        let mut conversation = vec![Message::system("s")];
        for op in ops {
            // Refusals are allowed to surface; the invariants are checked on what was stored.
            match op {
                Op::Chunk => { let _ = block_on(log.on_stream_chunk(&MessageContentBlock::text("o"))); }
                Op::Complete => { let _ = block_on(log.on_response_complete(&UnifiedResponse::default())); }
                Op::Request(n_new) => {
                    for _ in 0..n_new {
                        let n = conversation.len();
                        conversation.push(if n % 2 == 1 {
                            Message::user(format!("u{n}"))
                        } else {
                            Message::assistant(format!("a{n}"))
                        });
                    }
                    let _ = block_on(log.on_request(&mut request(conversation.clone())));
                }
                Op::FailNext => flaky.fail_next(1),
                Op::Restart => log = plugin(&backend),
                Op::Fork => {
                    if !backend.replay("demo").unwrap().is_empty() {
                        log.fork_session("demo", "demo:0").unwrap();
                    }
                }
            }
        }
        flaky.fail_next(0);
        block_on(log.on_request(&mut request(conversation.clone()))).unwrap();

        let records = backend.replay("demo").unwrap();
        let sequences: Vec<u64> = records.iter().map(|record| record.sequence).collect();
        proptest::prop_assert_eq!(sequences, (0..records.len() as u64).collect::<Vec<_>>());
        let recorded: Vec<&Message> = records
            .iter()
            .filter_map(|record| match &record.event {
                SessionEvent::Message(message) => Some(message),
                _ => None,
            })
            .collect();
        let expected: Vec<&Message> = conversation[1..].iter().collect();
        proptest::prop_assert_eq!(recorded, expected);
    }
}
