//! Unit tests of the replay index: keys, refresh, the cap and the memory bound.

// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use cuca_events::{
    Message, MessageContentBlock, PluginError, ReadAfter, ReadMark, Role, SessionBackend,
    SessionEvent, SessionRecord, SessionStamp,
};
use cuca_replay::SessionReplay;
use cuca_store_file::FileBackend;

use super::*;
use crate::matching::{Matching, DEFAULT_IGNORE};

fn defaults() -> Matching {
    let ignore: Vec<String> = DEFAULT_IGNORE.iter().map(|p| (*p).to_owned()).collect();
    Matching::new(&ignore, true).unwrap()
}

/// The records the proxy's session log writes for call `k` of one growing conversation, its
/// answer `answer` long.
fn turn(session: &str, k: u64, sequence: &mut u64, answer: usize) -> Vec<SessionRecord> {
    let mut events = vec![SessionEvent::SystemPrompt {
        text: "You are terse.".into(),
    }];
    if k > 0 {
        events.push(SessionEvent::Message(Message::assistant(format!(
            "noted {}",
            k - 1
        ))));
    }
    events.extend([
        SessionEvent::Message(Message::user(format!("question {k}"))),
        SessionEvent::CallRequest {
            model: "tiny".into(),
            parameters: "{}".into(),
            tools: "[]".into(),
            messages: 2 * k + 2,
        },
        SessionEvent::Output {
            text: format!("noted {k} {}", "x".repeat(answer)),
        },
        SessionEvent::CallFinish {
            finish_reason: Some("stop".into()),
            model: "tiny".into(),
        },
        SessionEvent::Latency { duration_ms: 41 },
        SessionEvent::TokenUsage {
            prompt_tokens: 31,
            completion_tokens: 2,
        },
    ]);
    events
        .into_iter()
        .map(|event| {
            *sequence += 1;
            SessionRecord {
                session_id: session.to_owned(),
                sequence: *sequence - 1,
                timestamp_ms: 0,
                event,
            }
        })
        .collect()
}

fn append(backend: &dyn SessionBackend, records: Vec<SessionRecord>) {
    for record in records {
        backend.append(record).unwrap();
    }
}

fn indexes(dir: &std::path::Path) -> Indexes {
    let backend: Arc<dyn SessionBackend> = Arc::new(FileBackend::new(dir).unwrap());
    Indexes::new(SessionReplay::new(backend), defaults())
}

/// The keys stand for `Matching::same_message`: equal exactly when the match says the
/// messages are the same, normalisation included.
#[test]
fn keys_are_equal_exactly_when_the_match_says_the_messages_are_the_same() {
    let matching = defaults();
    let keys = Keys::new(defaults());
    let tool = |id: &str, content: &str, is_error: bool| Message {
        role: Role::Tool,
        content: vec![MessageContentBlock::ToolResult {
            tool_call_id: id.into(),
            content: content.into(),
            is_error,
        }],
    };
    let call = |id: &str, arguments: &str| Message {
        role: Role::Assistant,
        content: vec![MessageContentBlock::ToolCall {
            id: id.into(),
            name: "lookup".into(),
            arguments: arguments.into(),
        }],
    };
    let image = |data: &str| Message {
        role: Role::User,
        content: vec![MessageContentBlock::ImageBase64 {
            media_type: "image/png".into(),
            data: data.into(),
        }],
    };
    let messages = [
        Message::user("ALPHA"),
        Message::user("BETA"),
        Message::assistant("ALPHA"),
        Message::user("at 2026-11-30T10:00:01Z in /tmp/.tmpAbC1"),
        Message::user("at 2026-12-01T11:12:13Z in /tmp/.tmpXyZ2"),
        tool("call_1", "Chunk ID: 3fa2b1\nALPHA", false),
        tool("call_1", "Chunk ID: 9c0d77\nALPHA", false),
        tool("call_1", "Chunk ID: 9c0d77\nALPHA", true),
        tool("call_2", "Chunk ID: 9c0d77\nALPHA", false),
        tool("call_1", "Chunk ID: 9c0d77\nBETA", false),
        call("call_1", r#"{"city":"Lisbon"}"#),
        call("call_1", r#"{"city":"Porto"}"#),
        call("call_2", r#"{"city":"Lisbon"}"#),
        image("AAAA"),
        image("AAAB"),
        Message {
            role: Role::User,
            content: vec![
                MessageContentBlock::text("AL"),
                MessageContentBlock::text("PHA"),
            ],
        },
    ];
    let mut n_same = 0;
    for a in &messages {
        for b in &messages {
            let same = matching.same_message(a, b);
            n_same += usize::from(same);
            assert_eq!(
                keys.message(a) == keys.message(b),
                same,
                "{a:?} against {b:?}"
            );
        }
    }
    // The normalised pairs (dates and paths, chunk ids) match both ways, besides each with
    // itself.
    assert_eq!(n_same, messages.len() + 4);
    assert_eq!(
        keys.text("today is 2026-12-01"),
        keys.text("today is 2026-11-30")
    );
    assert_ne!(keys.systems(&[keys.text("a")]), keys.systems(&[]));
}

/// The index agrees with a load of the session turn by turn, and a turn read from its mark
/// is the turn the load holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_agrees_with_a_load_and_reads_a_turn_where_it_lies() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let mut sequence = 0;
    for k in 0..12 {
        append(&backend, turn("demo", k, &mut sequence, 10));
    }
    let loaded = SessionReplay::new(Arc::new(backend)).load("demo").unwrap();
    let indexes = indexes(dir.path());
    let index = indexes.index("demo").await.unwrap();
    assert_eq!(index.len(), loaded.len());
    for (t, (indexed, turn)) in index.turns().iter().zip(loaded.turns()).enumerate() {
        assert_eq!(indexed.sequence_range(), turn.sequence_range(), "turn {t}");
        assert_eq!(indexed.n_messages, turn.messages().len());
        assert_eq!(
            indexed.asked_with,
            turn.call().request().map(|r| r.messages)
        );
        assert_eq!(indexed.complete, turn.is_complete());
        let prompts: Vec<Key> = turn
            .system_prompts()
            .iter()
            .map(|p| index.keys().text(p))
            .collect();
        assert_eq!(indexed.systems, index.keys().systems(&prompts));
        let read = index.read_turn(t).await.unwrap();
        assert_eq!(&read, turn, "turn {t} read from its mark");
    }
    let keys: Vec<Key> = loaded
        .turns()
        .iter()
        .flat_map(|turn| turn.messages())
        .map(|m| index.keys().message(m))
        .collect();
    let indexed: Vec<Key> = index.messages().iter().map(|m| m.key).collect();
    assert_eq!(indexed, keys);
    assert_eq!(
        index.read_message(5).await.unwrap(),
        loaded
            .turns()
            .iter()
            .flat_map(|t| t.messages())
            .nth(5)
            .cloned()
            .unwrap()
    );
}

/// "refreshed from the file's tail when it grows (another process may be appending)": turns
/// another writer appends after the index was built are in it at the next lookup, a turn
/// still being recorded is indexed open and then closed, and a file replaced since is
/// indexed anew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_reads_the_tail_another_writer_appended_and_a_replaced_file_anew() {
    let dir = tempfile::tempdir().unwrap();
    let indexes = indexes(dir.path());
    let writer = FileBackend::new(dir.path()).unwrap();
    let mut sequence = 0;
    for k in 0..3 {
        append(&writer, turn("demo", k, &mut sequence, 10));
    }
    assert_eq!(indexes.index("demo").await.unwrap().len(), 3);

    // Another writer appends half a turn: it is the open final turn.
    let mut next = turn("demo", 3, &mut sequence, 10);
    let rest = next.split_off(4);
    append(&writer, next);
    let index = indexes.index("demo").await.unwrap();
    assert_eq!(index.len(), 4);
    assert!(!index.turns()[3].complete);
    // The rest of it, and one more turn: the open turn closes, and the new one follows.
    append(&writer, rest);
    append(&writer, turn("demo", 4, &mut sequence, 10));
    let index = indexes.index("demo").await.unwrap();
    assert_eq!(index.len(), 5);
    assert!(index.turns().iter().all(|t| t.complete));
    assert_eq!(index.messages().len(), 9);
    assert_eq!(
        index.read_turn(4).await.unwrap().blocks(),
        [MessageContentBlock::text(format!(
            "noted 4 {}",
            "x".repeat(10)
        ))]
    );
    // The snapshot a lookup holds does not change under it.
    append(&writer, turn("demo", 5, &mut sequence, 10));
    assert_eq!(index.len(), 5);
    assert_eq!(indexes.index("demo").await.unwrap().len(), 6);

    // Replaced by a shorter recording, as `cuca repair` renames a file over the session's.
    writer.close("demo");
    let elsewhere = tempfile::tempdir().unwrap();
    let other = FileBackend::new(elsewhere.path()).unwrap();
    let mut sequence = 0;
    for k in 0..2 {
        append(&other, turn("demo", k, &mut sequence, 99));
    }
    other.close("demo");
    std::fs::rename(
        elsewhere.path().join("demo.cslog"),
        dir.path().join("demo.cslog"),
    )
    .unwrap();
    let index = indexes.index("demo").await.unwrap();
    assert_eq!(index.len(), 2);
    assert_eq!(
        index.read_turn(1).await.unwrap().blocks(),
        [MessageContentBlock::text(format!(
            "noted 1 {}",
            "x".repeat(99)
        ))]
    );
}

/// The ceiling a turn of the tests' shape (two messages) holds the index to, in bytes: an
/// `IndexedTurn` and two `IndexedMessage`s, twice over for the room a growing `Vec` keeps.
const INDEX_BYTES_PER_TURN: usize = 512;

/// "memory bounded by the index, not the session": a session of 1,000 turns with a 16 KiB
/// answer each (16 MiB of text) is indexed in under 1,000 × [`INDEX_BYTES_PER_TURN`] bytes,
/// a few hundredths of the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_of_a_large_session_is_bounded_by_its_turns_not_its_text() {
    let dir = tempfile::tempdir().unwrap();
    let writer = FileBackend::new(dir.path()).unwrap();
    let n_turns = 1_000;
    let mut sequence = 0;
    for k in 0..n_turns {
        append(&writer, turn("big", k, &mut sequence, 16 * 1024));
    }
    let file_len = std::fs::metadata(dir.path().join("big.cslog"))
        .unwrap()
        .len() as usize;
    let indexes = indexes(dir.path());
    let index = indexes.index("big").await.unwrap();
    assert_eq!(index.len(), n_turns as usize);
    let bytes = index.heap_bytes();
    assert!(
        bytes <= n_turns as usize * INDEX_BYTES_PER_TURN,
        "{bytes} bytes for {n_turns} turns"
    );
    assert!(
        bytes * 50 < file_len,
        "{bytes} bytes for a {file_len}-byte file"
    );
}

/// The proxy keeps at most its cap of indexes, dropping the least recently used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_cap_the_least_recently_used_index_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let writer = FileBackend::new(dir.path()).unwrap();
    for session in ["a", "b", "c"] {
        let mut sequence = 0;
        append(&writer, turn(session, 0, &mut sequence, 1));
    }
    let backend: Arc<dyn SessionBackend> = Arc::new(FileBackend::new(dir.path()).unwrap());
    let indexes = Indexes::with_max_sessions(SessionReplay::new(backend), defaults(), 2);
    for session in ["a", "b", "a", "c"] {
        assert_eq!(indexes.index(session).await.unwrap().len(), 1);
    }
    assert_eq!(indexes.n_indexed(), 2);
    let kept: Vec<bool> = ["a", "b", "c"].iter().map(|s| indexes.has(s)).collect();
    assert_eq!(kept, [true, false, true]);
}

/// One one-turn conversation asking `question`, as the proxy records it.
fn asking(session: &str, question: &str, from: u64) -> Vec<SessionRecord> {
    [
        SessionEvent::Message(Message::user(question)),
        SessionEvent::CallRequest {
            model: "tiny".into(),
            parameters: "{}".into(),
            tools: "[]".into(),
            messages: 1,
        },
        SessionEvent::Output { text: "ok".into() },
        SessionEvent::CallFinish {
            finish_reason: Some("stop".into()),
            model: "tiny".into(),
        },
        SessionEvent::Latency { duration_ms: 1 },
        SessionEvent::TokenUsage {
            prompt_tokens: 1,
            completion_tokens: 1,
        },
    ]
    .into_iter()
    .enumerate()
    .map(|(i, event)| SessionRecord {
        session_id: session.to_owned(),
        sequence: from + i as u64,
        timestamp_ms: 0,
        event,
    })
    .collect()
}

#[tokio::test]
async fn only_the_conversations_a_request_can_match_are_read_on() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let ids: Vec<String> = (0..4)
        .map(|n| match n {
            0 => "harness".to_owned(),
            n => cuca_events::conversation_session_id("harness", n),
        })
        .collect();
    for (n, id) in ids.iter().enumerate() {
        append(&backend, asking(id, &format!("question {n}"), 0));
    }
    let indexes = indexes(dir.path());
    let all = indexes.conversations("harness", None).await.unwrap();
    assert_eq!(all.len(), 4);
    assert!(all.iter().all(|(_, index)| index.len() == 1));

    // Another writer answers conversations 2 and 3 once more.
    for id in &ids[2..] {
        append(&backend, asking(id, "again", 6));
    }
    let third = indexes.keys().message(&Message::user("question 3"));
    let asked = indexes.conversations("harness", Some(third)).await.unwrap();
    let turns: Vec<usize> = asked.iter().map(|(_, index)| index.len()).collect();
    // The one that starts as the request does is read on; the one that cannot answer it is
    // handed back as last read, not read.
    assert_eq!(turns, [1, 1, 1, 2]);
    assert_eq!(asked[3].1.first_key(), Some(third));

    // Without a first message to go by, every conversation is read on.
    let all = indexes.conversations("harness", None).await.unwrap();
    let turns: Vec<usize> = all.iter().map(|(_, index)| index.len()).collect();
    assert_eq!(turns, [1, 1, 2, 2]);

    // A conversation recorded after the last read is found whatever the request asks.
    append(
        &backend,
        asking(
            &cuca_events::conversation_session_id("harness", 4),
            "question 4",
            0,
        ),
    );
    let found = indexes.conversations("harness", Some(third)).await.unwrap();
    assert_eq!(found.len(), 5);
}

/// A store that counts the reads made of it (`replay_after`, what a refresh and a turn read
/// both go through) and hands on everything else, the stamp included.
#[derive(Debug)]
struct Counting {
    inner: FileBackend,
    reads: std::sync::atomic::AtomicUsize,
    /// Whether it hands on the file store's stamps, or gives none (the trait's default).
    stamps: bool,
}

impl Counting {
    fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }
}

impl SessionBackend for Counting {
    fn name(&self) -> &str {
        "counting"
    }
    fn append(&self, record: SessionRecord) -> Result<(), PluginError> {
        self.inner.append(record)
    }
    fn replay(&self, session_id: &str) -> Result<Vec<SessionRecord>, PluginError> {
        self.inner.replay(session_id)
    }
    fn replay_after(
        &self,
        session_id: &str,
        after: &ReadMark,
        visit: &mut dyn FnMut(
            cuca_events::ReplayedRecord<'_>,
            &ReadMark,
        ) -> Result<(), PluginError>,
    ) -> Result<ReadAfter, PluginError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.replay_after(session_id, after, visit)
    }
    fn stamp(&self, session_id: &str) -> Option<SessionStamp> {
        self.inner.stamp(session_id).filter(|_| self.stamps)
    }
    fn fork(&self, session_id: &str, point_id: &str) -> Result<String, PluginError> {
        self.inner.fork(session_id, point_id)
    }
    fn sessions(&self) -> Result<Vec<String>, PluginError> {
        self.inner.sessions()
    }
    fn gauge(&self) -> cuca_events::BackendGauge {
        self.inner.gauge()
    }
}

fn counting(dir: &std::path::Path) -> (Arc<Counting>, Indexes) {
    counting_with(dir, true)
}

fn counting_with(dir: &std::path::Path, stamps: bool) -> (Arc<Counting>, Indexes) {
    let backend = Arc::new(Counting {
        inner: FileBackend::new(dir).unwrap(),
        reads: Default::default(),
        stamps,
    });
    let shared: Arc<dyn SessionBackend> = backend.clone();
    (
        backend,
        Indexes::new(SessionReplay::new(shared), defaults()),
    )
}

/// A lookup of a session whose file has not changed since its index was read reads nothing
/// (the store's stamp of it is the one taken before that read), and one that another writer
/// appended to since — another process's handle on the same file — finds what it appended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_session_is_not_read_again_and_another_writers_turn_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let writer = FileBackend::new(dir.path()).unwrap();
    let mut sequence = 0;
    for k in 0..3 {
        append(&writer, turn("demo", k, &mut sequence, 10));
    }
    let (store, indexes) = counting(dir.path());
    assert_eq!(indexes.index("demo").await.unwrap().len(), 3);
    // The first lookup of its conversations reads the first (none yet) once.
    let asked = indexes.keys().message(&Message::user("question 0"));
    assert_eq!(
        indexes
            .conversations("demo", Some(asked))
            .await
            .unwrap()
            .len(),
        1
    );
    let read = store.reads();
    assert_eq!(read, 2);
    for _ in 0..10 {
        assert_eq!(indexes.index("demo").await.unwrap().len(), 3);
        let asked = indexes.keys().message(&Message::user("question 0"));
        let all = indexes.conversations("demo", Some(asked)).await.unwrap();
        assert_eq!(all.len(), 1);
    }
    assert_eq!(store.reads(), read, "an unchanged session read again");

    // Another writer appends a turn after the index was built: the next lookup finds it.
    append(&writer, turn("demo", 3, &mut sequence, 10));
    let index = indexes.index("demo").await.unwrap();
    assert_eq!(index.len(), 4);
    assert_eq!(
        index.read_turn(3).await.unwrap().blocks(),
        [MessageContentBlock::text(format!(
            "noted 3 {}",
            "x".repeat(10)
        ))]
    );
    // Half a turn, then the other half: the open turn is read on each time the file grows.
    let mut next = turn("demo", 4, &mut sequence, 10);
    let rest = next.split_off(4);
    append(&writer, next);
    let index = indexes.index("demo").await.unwrap();
    assert_eq!(index.len(), 5);
    assert!(!index.turns()[4].complete);
    append(&writer, rest);
    let index = indexes.index("demo").await.unwrap();
    assert!(index.turns()[4].complete);
    // A conversation another writer begins is found too.
    let second = cuca_events::conversation_session_id("demo", 1);
    append(&writer, asking(&second, "question 0", 0));
    let asked = indexes.keys().message(&Message::user("question 0"));
    let all = indexes.conversations("demo", Some(asked)).await.unwrap();
    assert_eq!(all.len(), 2);
}

/// An agent loop replays its turns in order: a turn is read with the few after it, and those
/// are then served without a read of the store, each the turn a load of the session holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_replayed_in_order_are_read_a_few_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let writer = FileBackend::new(dir.path()).unwrap();
    let n_turns = 30;
    let mut sequence = 0;
    for k in 0..n_turns {
        append(&writer, turn("loop", k, &mut sequence, 10));
    }
    let loaded = SessionReplay::new(Arc::new(FileBackend::new(dir.path()).unwrap()))
        .load("loop")
        .unwrap();
    let (store, indexes) = counting(dir.path());
    let before = store.reads();
    for (t, expected) in loaded.turns().iter().enumerate() {
        let index = indexes.index("loop").await.unwrap();
        assert_eq!(&index.read_turn(t).await.unwrap(), expected, "turn {t}");
    }
    // The index's first read, then one read for each turn and the eight after it.
    let reads = store.reads() - before;
    let expected = 1 + (n_turns as usize).div_ceil(READ_AHEAD_TURNS + 1);
    assert_eq!(reads, expected, "{reads} reads for {n_turns} turns");
    assert!(
        reads * 4 <= n_turns as usize,
        "{reads} reads for {n_turns} turns"
    );
    // The same turn asked again is kept too.
    let index = indexes.index("loop").await.unwrap();
    let again = store.reads();
    assert_eq!(
        &index.read_turn(n_turns as usize - 1).await.unwrap(),
        loaded.turns().last().unwrap()
    );
    assert_eq!(store.reads(), again);
}

/// What is read ahead and kept is bounded: turns read ahead stop at their budget of bytes,
/// a long turn is never kept, and the proxy keeps at most its cap of turns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_read_ahead_and_kept_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let writer = FileBackend::new(dir.path()).unwrap();
    // Answers of 150 KiB: the turn after the asked one fits the read-ahead budget, the one
    // after that does not.
    let mut sequence = 0;
    for k in 0..6 {
        append(&writer, turn("wide", k, &mut sequence, 150 << 10));
    }
    // One answer longer than a kept turn may be.
    let mut sequence = 0;
    append(&writer, turn("long", 0, &mut sequence, KEPT_TURN_BYTES + 1));
    // Many short sessions, each turn kept as it is read.
    for s in 0..KEPT_TURNS + 10 {
        let mut sequence = 0;
        append(&writer, turn(&format!("short-{s}"), 0, &mut sequence, 10));
    }
    let (_, indexes) = counting(dir.path());
    let kept = Arc::clone(&indexes.0.kept);

    let index = indexes.index("wide").await.unwrap();
    index.read_turn(0).await.unwrap();
    assert_eq!(kept.len(), 2, "the asked turn and one read ahead");

    let index = indexes.index("long").await.unwrap();
    index.read_turn(0).await.unwrap();
    assert_eq!(kept.len(), 2, "a long turn kept");

    for s in 0..KEPT_TURNS + 10 {
        let index = indexes.index(&format!("short-{s}")).await.unwrap();
        index.read_turn(0).await.unwrap();
    }
    assert_eq!(kept.len(), KEPT_TURNS);
    assert!(kept.lock().bytes <= KEPT_BYTES);
}

/// A file replaced since a turn was kept is read anew, and the turn served is the new
/// file's, though the old one's had the same sequences.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_kept_from_a_replaced_file_is_never_served() {
    let dir = tempfile::tempdir().unwrap();
    let writer = FileBackend::new(dir.path()).unwrap();
    let mut sequence = 0;
    for k in 0..3 {
        append(&writer, turn("demo", k, &mut sequence, 10));
    }
    let (_, indexes) = counting(dir.path());
    let index = indexes.index("demo").await.unwrap();
    let old = index.read_turn(1).await.unwrap();
    assert_eq!(
        old.blocks(),
        [MessageContentBlock::text(format!(
            "noted 1 {}",
            "x".repeat(10)
        ))]
    );

    writer.close("demo");
    let elsewhere = tempfile::tempdir().unwrap();
    let other = FileBackend::new(elsewhere.path()).unwrap();
    let mut sequence = 0;
    for k in 0..3 {
        append(&other, turn("demo", k, &mut sequence, 99));
    }
    other.close("demo");
    std::fs::rename(
        elsewhere.path().join("demo.cslog"),
        dir.path().join("demo.cslog"),
    )
    .unwrap();
    let index = indexes.index("demo").await.unwrap();
    let new = index.read_turn(1).await.unwrap();
    assert_eq!(new.sequence_range(), old.sequence_range());
    assert_eq!(
        new.blocks(),
        [MessageContentBlock::text(format!(
            "noted 1 {}",
            "x".repeat(99)
        ))]
    );
}

/// A store that gives no stamp is read on at every lookup, as before stamps, and each turn
/// is read alone: nothing is read ahead or kept, since the next lookup's reading would drop
/// it unused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_stamps_every_lookup_reads_on_and_each_turn_is_read_alone() {
    let dir = tempfile::tempdir().unwrap();
    let writer = FileBackend::new(dir.path()).unwrap();
    let n_turns = 10;
    let mut sequence = 0;
    for k in 0..n_turns {
        append(&writer, turn("plain", k, &mut sequence, 10));
    }
    let (store, indexes) = counting_with(dir.path(), false);
    let kept = Arc::clone(&indexes.0.kept);
    for t in 0..n_turns as usize {
        let index = indexes.index("plain").await.unwrap();
        assert_eq!(index.len(), n_turns as usize);
        index.read_turn(t).await.unwrap();
    }
    assert_eq!(
        store.reads(),
        2 * n_turns as usize,
        "a refresh and a turn each"
    );
    assert_eq!(kept.len(), 0);
    // Another writer's turn is found, as ever.
    append(&writer, turn("plain", n_turns, &mut sequence, 10));
    assert_eq!(
        indexes.index("plain").await.unwrap().len(),
        n_turns as usize + 1
    );
}
