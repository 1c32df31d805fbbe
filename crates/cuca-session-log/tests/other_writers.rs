//! The plugin and other writers of its session: the store refuses a sequence it already
//! holds (`PluginError::SequenceTaken`), and the plugin re-reads the tail once and retries.

// Helpers outside #[test] fns unwrap too: a failed append is a failed case.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use cuca_events::{
    BackendGauge, CucaPlugin, MessageContentBlock, PluginError, SessionBackend, SessionEvent,
    SessionRecord,
};
use cuca_session_log::SessionLogPlugin;
use cuca_store_file::FileBackend;
use cuca_store_mem::InMemoryBackend;

fn output(text: &str) -> SessionEvent {
    SessionEvent::Output { text: text.into() }
}

fn sequences(backend: &dyn SessionBackend, session: &str) -> Vec<u64> {
    backend
        .replay(session)
        .unwrap()
        .iter()
        .map(|record| record.sequence)
        .collect()
}

/// A session forked through another handle (a second plugin, or `backend().fork`) never gets
/// its audit record's sequence handed out again by the session's own plugin: the sequences are
/// `[0, 1, 2, 3]`, never `[0, 1, 2, 2]`, in every store.
#[test]
fn a_fork_through_the_backend_handle_leaves_dense_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let backends: [Arc<dyn SessionBackend>; 2] = [
        Arc::new(InMemoryBackend::new()),
        Arc::new(FileBackend::new(dir.path()).unwrap()),
    ];
    for backend in backends {
        let log = SessionLogPlugin::new(Arc::clone(&backend)).with_session_id("demo");
        log.append_log(output("a")).unwrap();
        log.append_log(output("b")).unwrap();
        let branch = log.backend().fork("demo", "demo:1").unwrap();
        let next = log.append_log(output("after the fork")).unwrap();
        assert_eq!(next.sequence, 3, "{}", backend.name());
        let records = backend.replay("demo").unwrap();
        assert_eq!(sequences(backend.as_ref(), "demo"), [0, 1, 2, 3]);
        assert_eq!(
            records[2].event,
            SessionEvent::Fork {
                from_point: "demo:1".into(),
                to_session: branch
            }
        );
        assert_eq!(records[3], next);
    }
}

/// The same through the hooks, with a second plugin on the same session doing the fork.
#[test]
fn a_fork_by_a_second_plugin_leaves_the_first_one_dense() {
    let backend: Arc<dyn SessionBackend> = Arc::new(InMemoryBackend::new());
    let first = SessionLogPlugin::new(Arc::clone(&backend)).with_session_id("demo");
    let second = SessionLogPlugin::new(Arc::clone(&backend)).with_session_id("demo");
    futures::executor::block_on(async {
        first
            .on_stream_chunk(&MessageContentBlock::text("one"))
            .await
            .unwrap();
        second.fork_session("demo", "demo:0").unwrap();
        first
            .on_stream_chunk(&MessageContentBlock::thinking("two"))
            .await
            .unwrap();
        first
            .on_stream_chunk(&MessageContentBlock::text("three"))
            .await
            .unwrap();
    });
    assert_eq!(sequences(backend.as_ref(), "demo"), [0, 1, 2, 3]);
    // The second plugin, realigned by its own fork, also continues densely.
    second.append_log(output("four")).unwrap();
    assert_eq!(sequences(backend.as_ref(), "demo"), [0, 1, 2, 3, 4]);
}

/// Two plugins taking turns on one session (two programs using the default session id)
/// never store one sequence twice: each refusal moves the stale one past the other's records.
#[test]
fn two_plugins_taking_turns_store_dense_unique_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn SessionBackend> = Arc::new(FileBackend::new(dir.path()).unwrap());
    let a = SessionLogPlugin::new(Arc::clone(&backend));
    let b = SessionLogPlugin::new(Arc::clone(&backend));
    for round in 0..20 {
        for _ in 0..(round % 3) + 1 {
            a.append_log(output("a")).unwrap();
        }
        b.append_log(output("b")).unwrap();
    }
    let stored = sequences(backend.as_ref(), "default");
    assert_eq!(stored, (0..stored.len() as u64).collect::<Vec<_>>());
    assert_eq!(
        stored.len(),
        20 + (0..20).map(|round| round % 3 + 1).sum::<usize>()
    );
}

/// A backend where another writer gets in before every append of the plugin's session: the
/// plugin retries once, not forever, and hands the refusal back.
#[derive(Debug)]
struct Crowded {
    inner: InMemoryBackend,
    appends: AtomicUsize,
    crowded: AtomicBool,
}

impl SessionBackend for Crowded {
    fn name(&self) -> &str {
        "crowded"
    }
    fn append(&self, record: SessionRecord) -> Result<(), PluginError> {
        self.appends.fetch_add(1, Ordering::SeqCst);
        if !self.crowded.load(Ordering::SeqCst) {
            return self.inner.append(record);
        }
        let tail = self
            .inner
            .replay(&record.session_id)?
            .last()
            .map_or(0, |last| last.sequence + 1);
        self.inner.append(SessionRecord {
            sequence: tail.max(record.sequence),
            event: output("the other writer"),
            ..record.clone()
        })?;
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

#[test]
fn a_second_refusal_is_returned_after_one_retry_and_the_cursor_follows_the_tail() {
    let crowded = Arc::new(Crowded {
        inner: InMemoryBackend::new(),
        appends: AtomicUsize::new(0),
        crowded: AtomicBool::new(true),
    });
    let log = SessionLogPlugin::new(Arc::clone(&crowded) as Arc<dyn SessionBackend>)
        .with_session_id("busy");
    let refused = log.append_log(output("mine"));
    match refused {
        Err(PluginError::SequenceTaken {
            session_id,
            sequence: 1,
            last: 1,
        }) => assert_eq!(session_id, "busy"),
        other => panic!("expected the retry's refusal, got {other:?}"),
    }
    assert_eq!(crowded.appends.load(Ordering::SeqCst), 2, "one retry");
    assert_eq!(sequences(&crowded.inner, "busy"), [0, 1]);
    // The cursor learned the tail from the last refusal: once the other writer is quiet,
    // the next record follows it at the first try.
    crowded.crowded.store(false, Ordering::SeqCst);
    futures::executor::block_on(log.on_stream_chunk(&MessageContentBlock::text("mine"))).unwrap();
    assert_eq!(crowded.appends.load(Ordering::SeqCst), 3, "no retry needed");
    assert_eq!(sequences(&crowded.inner, "busy"), [0, 1, 2]);
}

/// Several `cuca proxy` processes record into one schema at once, and sessions and
/// conversations stay consistent. A conversation one writer began and another continued is
/// continued by the first again: its first record is refused (the other took the tail), so it
/// reads the session anew and records each message once, in order, not again what the other
/// recorded.
#[test]
fn a_conversation_another_writer_continued_is_read_anew_and_each_message_kept_once() {
    use cuca_events::{Message, Role, UnifiedRequest};
    let backend: Arc<dyn SessionBackend> = Arc::new(InMemoryBackend::new());
    let first = SessionLogPlugin::new(Arc::clone(&backend)).with_session_id("c");
    let second = SessionLogPlugin::new(Arc::clone(&backend)).with_session_id("c");
    let history = |turns: usize| {
        let mut messages = Vec::new();
        for turn in 1..=turns {
            if turn > 1 {
                messages.push(Message::assistant(format!("answer {}", turn - 1)));
            }
            messages.push(Message::user(format!("question {turn}")));
        }
        UnifiedRequest::new(messages)
    };
    first.record_request_with(&history(1), "{}").unwrap();
    second.record_request_with(&history(2), "{}").unwrap();
    let point = first.record_request_with(&history(3), "{}").unwrap();
    let texts: Vec<String> = backend
        .replay("c")
        .unwrap()
        .into_iter()
        .filter_map(|record| match record.event {
            SessionEvent::Message(message) if message.role != Role::System => Some(message.text()),
            _ => None,
        })
        .collect();
    assert_eq!(
        texts,
        [
            "question 1",
            "answer 1",
            "question 2",
            "answer 2",
            "question 3"
        ]
    );
    assert_eq!(sequences(&*backend, "c"), (0..5).collect::<Vec<_>>());
    assert_eq!(
        point,
        Some(3),
        "the call starts after the other writer's records"
    );
}
