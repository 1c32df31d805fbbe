//! The replay index: each session's turns as the match needs them — where each turn's
//! records lie, how many messages it was asked with, keys of its messages and system
//! prompts — kept between requests and read on from the file's tail when it grows.
//!
//! A replayed request used to load and segment its whole session (7.8 ms a
//! request at 1,000 turns, so replaying a 1,000-turn run was quadratic). The index holds no
//! text: a message is a 128-bit key of what [`Matching::same_message`] compares, a turn a few
//! numbers and the [`ReadMark`] before its first record. The answer is read from that mark
//! when it is served ([`TurnIndex::read_turn`]), and so is a recorded message a 409 quotes.
//!
//! **Refresh rule.** Each lookup first reads the session on from the mark after its last
//! complete turn ([`cuca_events::SessionBackend::replay_after`]): records another process
//! appended meanwhile are indexed, a complete turn is kept, and the open final turn (a call
//! being recorded, a fork's audit record after the last call) is indexed anew on each
//! refresh, since it may still grow. A mark the store calls stale (the file was replaced by
//! `cuca repair`, cut short, compacted, or another recording was copied over it in place)
//! drops the index and reads the session from its start. So does a turn read to answer from
//! that does not hold the messages and system prompts the index keyed for it: that call is
//! refused ("ask again"), never answered from a turn chosen by text the file no longer holds.
//! A fork is a new session, indexed when first asked for; the original's audit record is an
//! append like any other.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::ops::{ControlFlow, RangeInclusive};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use cuca_events::{
    Message, MessageContentBlock, PluginError, ReadAfter, ReadMark, Role, SessionEvent,
};
use cuca_replay::{ReplayTurn, SessionReplay, TurnPart, TurnSplitter};

use crate::matching::Matching;

#[cfg(test)]
mod tests;

/// How many sessions' indexes one proxy keeps; past it the least recently used is dropped
/// (and rebuilt from its file if asked for again). The proxy's writers are capped at 4,096
/// sessions (`ProxyConfig::max_sessions`), and so are its indexes: at the ceiling the tests
/// hold a turn to (`INDEX_BYTES_PER_TURN`), 4,096 sessions of 1,000 turns are under 1 GiB,
/// and one of 1,000 turns under 250 KiB.
pub(crate) const MAX_INDEXED_SESSIONS: usize = 4096;

/// A message's or a turn's system prompts' key: two independently keyed SipHash values of
/// what the match compares. The keys are drawn at random when the proxy starts, so no
/// caller can aim at a collision, and 128 bits make an accidental one (a recorded answer
/// served to a conversation that differs) far less likely than a disk error.
pub(crate) type Key = u128;

/// How keys are made: the two hash states and the normalisation the match applies first.
#[derive(Debug)]
pub(crate) struct Keys {
    a: RandomState,
    b: RandomState,
    matching: Matching,
}

/// Writes into both hashers at once.
struct KeyHasher(std::hash::DefaultHasher, std::hash::DefaultHasher);

impl KeyHasher {
    fn put<T: Hash + ?Sized>(&mut self, value: &T) {
        value.hash(&mut self.0);
        value.hash(&mut self.1);
    }

    fn finish(self) -> Key {
        (u128::from(self.0.finish()) << 64) | u128::from(self.1.finish())
    }
}

impl Keys {
    pub(crate) fn new(matching: Matching) -> Keys {
        Keys {
            a: RandomState::new(),
            b: RandomState::new(),
            matching,
        }
    }

    fn hasher(&self) -> KeyHasher {
        KeyHasher(self.a.build_hasher(), self.b.build_hasher())
    }

    /// What [`Matching::same_message`] compares, as a key: two messages have one key exactly
    /// when they are the same once normalised.
    pub(crate) fn message(&self, message: &Message) -> Key {
        let mut h = self.hasher();
        h.put(&message.role);
        h.put(&message.content.len());
        for block in &message.content {
            match block {
                MessageContentBlock::Text { text } => {
                    h.put(&0u8);
                    h.put(&*self.matching.normal(text));
                }
                MessageContentBlock::Thinking { thinking } => {
                    h.put(&1u8);
                    h.put(&*self.matching.normal(thinking));
                }
                MessageContentBlock::ToolCall {
                    id,
                    name,
                    arguments,
                } => {
                    h.put(&2u8);
                    h.put(id.as_str());
                    h.put(name.as_str());
                    h.put(&*self.matching.normal(arguments));
                }
                MessageContentBlock::ToolResult {
                    tool_call_id,
                    content,
                    is_error,
                } => {
                    h.put(&3u8);
                    h.put(tool_call_id.as_str());
                    h.put(is_error);
                    h.put(&*self.matching.normal(content));
                }
                MessageContentBlock::ImageBase64 { media_type, data } => {
                    h.put(&4u8);
                    h.put(media_type.as_str());
                    h.put(data.as_str());
                }
            }
        }
        h.finish()
    }

    /// One system prompt's key, normalised as [`Matching::same_text`] compares it.
    pub(crate) fn text(&self, text: &str) -> Key {
        let mut h = self.hasher();
        h.put(&*self.matching.normal(text));
        h.finish()
    }

    /// The key of a turn's system prompts, in order, from each one's [`Keys::text`].
    pub(crate) fn systems(&self, prompts: &[Key]) -> Key {
        let mut h = self.hasher();
        h.put(prompts);
        h.finish()
    }
}

/// The key of the first user or assistant message of `messages` (role and key each, in
/// order): tool results and system prompts are not compared everywhere, these always are.
pub(crate) fn first_dialogue_key(messages: impl IntoIterator<Item = (Role, Key)>) -> Option<Key> {
    messages
        .into_iter()
        .find(|(role, _)| matches!(role, Role::User | Role::Assistant))
        .map(|(_, key)| key)
}

/// One recorded message in the index: its key and role (the role decides whether it is
/// compared: tool results only where the recording holds any).
#[derive(Debug, Clone, Copy)]
pub(crate) struct IndexedMessage {
    pub(crate) key: Key,
    pub(crate) role: Role,
}

/// One recorded turn in the index: what choosing it needs, and where to read it.
#[derive(Debug, Clone)]
pub(crate) struct IndexedTurn {
    /// The mark just before the turn's first record: its records are read from here.
    start: ReadMark,
    first_sequence: u64,
    last_sequence: u64,
    /// Where the turn's messages begin in [`TurnIndex::messages`], and how many it has.
    pub(crate) messages_from: usize,
    pub(crate) n_messages: usize,
    /// How many messages its `CallRequest` says it was asked with.
    pub(crate) asked_with: Option<u64>,
    /// The key of its system prompts ([`Keys::systems`]).
    pub(crate) systems: Key,
    /// Closed by a Latency-then-TokenUsage pair.
    pub(crate) complete: bool,
    /// Marked `CallIncomplete`.
    pub(crate) incomplete: bool,
    /// Has a `CallFinish`, and whether that names a finish reason.
    pub(crate) has_finish: bool,
    pub(crate) finish_reason: bool,
}

impl IndexedTurn {
    /// The sequences of the turn's first and last records, as [`ReplayTurn::sequence_range`].
    pub(crate) fn sequence_range(&self) -> RangeInclusive<u64> {
        self.first_sequence..=self.last_sequence
    }

    /// Whether the call came back whole: not marked incomplete, and not closed without a
    /// finish reason (a stream cut short).
    pub(crate) fn is_whole(&self) -> bool {
        !self.incomplete && (!self.has_finish || self.finish_reason)
    }
}

/// A turn read from the store, as the callers that asked for it at once share it.
type TurnRead = Result<ReplayTurn, String>;

/// The turn reads in flight, by session and sequence range: callers that ask for a turn
/// while it is being read wait for that read and share its blocks, so N concurrent callers
/// of one long turn hold one copy of it, not N (a 50 MB turn read by 16 callers once took
/// 1.04 GB). Nothing is kept past the read: a caller that comes after it reads again.
#[derive(Debug, Default)]
struct Reads(Mutex<InFlight>);

/// The reads in flight: a turn by its session and first and last sequence.
type InFlight = HashMap<(String, u64, u64), Arc<tokio::sync::OnceCell<TurnRead>>>;

impl Reads {
    fn lock(&self) -> std::sync::MutexGuard<'_, InFlight> {
        // The map holds no invariant a panic could break halfway.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A session's index, as one lookup sees it: shared with the proxy's copy until the next
/// refresh changes that (copy on write), so a lookup never waits for a refresh.
#[derive(Debug, Clone)]
pub(crate) struct TurnIndex {
    session_id: String,
    turns: Vec<IndexedTurn>,
    messages: Vec<IndexedMessage>,
    /// Whether any recorded message is a tool result.
    knows_tools: bool,
    replay: SessionReplay,
    keys: Arc<Keys>,
    reads: Arc<Reads>,
    /// Set when a turn read to answer from did not hold what the index keyed for it: the
    /// file changed under the index in a way its marks did not show (see
    /// [`TurnIndex::read_turn`]). The next refresh reads the session from its start.
    changed: Arc<AtomicBool>,
}

impl TurnIndex {
    fn new(
        session_id: &str,
        replay: SessionReplay,
        keys: Arc<Keys>,
        reads: Arc<Reads>,
    ) -> TurnIndex {
        TurnIndex {
            session_id: session_id.to_owned(),
            turns: Vec::new(),
            messages: Vec::new(),
            knows_tools: false,
            replay,
            keys,
            reads,
            changed: Arc::default(),
        }
    }

    /// Every turn, in recorded order (the open final turn included).
    pub(crate) fn turns(&self) -> &[IndexedTurn] {
        &self.turns
    }

    /// Every recorded message, in order, across the turns.
    pub(crate) fn messages(&self) -> &[IndexedMessage] {
        &self.messages
    }

    pub(crate) fn len(&self) -> usize {
        self.turns.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }

    pub(crate) fn knows_tools(&self) -> bool {
        self.knows_tools
    }

    /// The key of the first recorded user or assistant message: what a request must start
    /// its dialogue with to be answered from this recording. `None` while none is recorded.
    pub(crate) fn first_key(&self) -> Option<Key> {
        first_dialogue_key(self.messages.iter().map(|m| (m.role, m.key)))
    }

    pub(crate) fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The bytes the index holds on the heap: what bounds its memory, whatever the
    /// session's text.
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        self.session_id.capacity()
            + self.turns.capacity() * std::mem::size_of::<IndexedTurn>()
            + self.messages.capacity() * std::mem::size_of::<IndexedMessage>()
    }

    /// Turn `turn_idx`, read from where it lies in the store (on a blocking thread: a turn
    /// may be long), or joined from the read of it already running.
    pub(crate) async fn read_turn(&self, turn_idx: usize) -> Result<ReplayTurn, String> {
        let Some(turn) = self.turns.get(turn_idx) else {
            return Err(format!(
                "session {:?} has no turn {turn_idx}",
                self.session_id
            ));
        };
        let key = (
            self.session_id.clone(),
            turn.first_sequence,
            turn.last_sequence,
        );
        let cell = Arc::clone(self.reads.lock().entry(key.clone()).or_default());
        let read = cell
            .get_or_init(|| self.read_turn_now(turn_idx, turn.clone()))
            .await
            .clone();
        // Done: the next caller reads afresh.
        let mut reads = self.reads.lock();
        if reads
            .get(&key)
            .is_some_and(|current| Arc::ptr_eq(current, &cell))
        {
            reads.remove(&key);
        }
        read
    }

    async fn read_turn_now(&self, turn_idx: usize, turn: IndexedTurn) -> TurnRead {
        let replay = self.replay.clone();
        let id = self.session_id.clone();
        let range = turn.sequence_range();
        let read = tokio::task::spawn_blocking(move || {
            replay.load_after(&id, &turn.start, turn.last_sequence)
        })
        .await;
        let changed = || {
            format!(
                "session {:?} changed while turn {turn_idx} was read from it; ask again",
                self.session_id
            )
        };
        match read {
            Ok(Ok(Some(trajectory))) => match trajectory.turns() {
                [one] if one.sequence_range() == range && self.holds(&turn, one) => Ok(one.clone()),
                [one] if one.sequence_range() == range => {
                    // The turn was chosen by keys of other text: never answered from.
                    self.changed.store(true, Ordering::Release);
                    Err(changed())
                }
                _ => Err(changed()),
            },
            Ok(Ok(None)) => Err(changed()),
            Ok(Err(error)) => Err(format!(
                "cannot read turn {turn_idx} of session {:?}: {error}",
                self.session_id
            )),
            Err(join) => Err(format!(
                "reading turn {turn_idx} of session {:?} stopped: {join}",
                self.session_id
            )),
        }
    }

    /// Whether `read` holds the messages and system prompts the index keyed for `turn`. A
    /// store's marks tell a replaced file apart by what lies around them (its identity, its
    /// first frame, the bytes before the mark); a file changed in place between them — the
    /// same first record and the same bytes before the mark, to the millisecond — is caught
    /// here, where it would otherwise answer a request with a turn chosen by the old text.
    fn holds(&self, turn: &IndexedTurn, read: &ReplayTurn) -> bool {
        let keyed = self
            .messages
            .get(turn.messages_from..turn.messages_from + turn.n_messages);
        let same_messages = keyed.is_some_and(|keyed| {
            keyed.len() == read.messages().len()
                && keyed
                    .iter()
                    .zip(read.messages())
                    .all(|(k, m)| k.key == self.keys.message(m))
        });
        let systems: Vec<Key> = read
            .system_prompts()
            .iter()
            .map(|text| self.keys.text(text))
            .collect();
        same_messages && self.keys.systems(&systems) == turn.systems
    }

    /// The recorded message at `at` in [`TurnIndex::messages`], read from its turn.
    pub(crate) async fn read_message(&self, at: usize) -> Result<Message, String> {
        let turn_idx = self
            .turns
            .partition_point(|turn| turn.messages_from + turn.n_messages <= at);
        let turn = self.read_turn(turn_idx).await?;
        let from = self.turns.get(turn_idx).map_or(0, |t| t.messages_from);
        turn.messages()
            .get(at - from)
            .cloned()
            .ok_or_else(|| format!("session {:?} has no message {at}", self.session_id))
    }
}

/// What a refresh keeps: the index up to its last complete turn and the mark after it.
#[derive(Debug, Clone, Copy, Default)]
struct Committed {
    mark: ReadMark,
    n_turns: usize,
    n_messages: usize,
}

/// One session's index and where its refresh reads on from.
#[derive(Debug)]
struct Entry {
    index: Arc<TurnIndex>,
    committed: Committed,
    last_used: u64,
}

/// What a refresh found.
enum Refreshed {
    Read,
    Stale,
}

impl Entry {
    /// Reads what the session gained since the last refresh into the index.
    fn refresh(&mut self) -> Result<(), PluginError> {
        // A turn read that did not hold what was keyed: the whole index is suspect.
        if self.index.changed.swap(false, Ordering::AcqRel) {
            let index = Arc::make_mut(&mut self.index);
            index.turns = Vec::new();
            index.messages = Vec::new();
            self.committed = Committed::default();
        }
        // A stale mark rebuilds from the start once; a second stale read in a row means the
        // file keeps changing under the read.
        for _ in 0..2 {
            match self.read_on()? {
                Refreshed::Read => return Ok(()),
                Refreshed::Stale => {
                    let index = Arc::make_mut(&mut self.index);
                    index.turns = Vec::new();
                    index.messages = Vec::new();
                    self.committed = Committed::default();
                }
            }
        }
        Err(PluginError::Backend {
            backend: "replay index".into(),
            message: format!(
                "session {:?} was replaced twice while it was read; ask again",
                self.index.session_id
            ),
            source: None,
        })
    }

    fn read_on(&mut self) -> Result<Refreshed, PluginError> {
        let before = self.committed;
        let index = Arc::make_mut(&mut self.index);
        // The open final turn is read again: it may have grown.
        index.turns.truncate(before.n_turns);
        index.messages.truncate(before.n_messages);
        let replay = index.replay.clone();
        let session_id = index.session_id.clone();
        let mut builder = Builder {
            index,
            committed: before,
            previous: before.mark,
            current: before.mark,
            open: None,
            systems: Vec::new(),
        };
        let parts = RefCell::new(Vec::new());
        let mut splitter = TurnSplitter::new(&session_id, |part| {
            parts.borrow_mut().push(part);
            Ok(ControlFlow::Continue(()))
        });
        let read =
            replay
                .backend()
                .replay_after(&session_id, &before.mark, &mut |record, after| {
                    builder.previous = builder.current;
                    builder.current = *after;
                    splitter.push(record.sequence, record.event)?;
                    for part in parts.borrow_mut().drain(..) {
                        builder.take(part);
                    }
                    Ok(())
                });
        let outcome = match read {
            Ok(ReadAfter::Read(_)) => splitter.finish().map(|_| Refreshed::Read),
            Ok(_) => Ok(Refreshed::Stale),
            Err(error) => Err(error),
        };
        for part in parts.borrow_mut().drain(..) {
            builder.take(part);
        }
        let committed = builder.committed;
        match outcome {
            Ok(Refreshed::Read) => {
                index.knows_tools = index.messages.iter().any(|m| m.role == Role::Tool);
                self.committed = committed;
                Ok(Refreshed::Read)
            }
            other => {
                // What a failed or stale read built is not kept.
                index.turns.truncate(before.n_turns);
                index.messages.truncate(before.n_messages);
                other
            }
        }
    }
}

/// Files a session's turn parts into its index as the records arrive.
struct Builder<'i> {
    index: &'i mut TurnIndex,
    committed: Committed,
    /// The marks before and after the record being read.
    previous: ReadMark,
    current: ReadMark,
    open: Option<IndexedTurn>,
    systems: Vec<Key>,
}

impl Builder<'_> {
    fn take(&mut self, part: TurnPart) {
        match part {
            TurnPart::Start { first_sequence, .. } => {
                self.systems.clear();
                self.open = Some(IndexedTurn {
                    start: self.previous,
                    first_sequence,
                    last_sequence: first_sequence,
                    messages_from: self.index.messages.len(),
                    n_messages: 0,
                    asked_with: None,
                    systems: 0,
                    complete: false,
                    incomplete: false,
                    has_finish: false,
                    finish_reason: false,
                });
            }
            TurnPart::SystemPrompt(text) => self.systems.push(self.index.keys.text(&text)),
            TurnPart::Message(message) => {
                let key = self.index.keys.message(&message);
                self.index.messages.push(IndexedMessage {
                    key,
                    role: message.role,
                });
            }
            TurnPart::Call(event) => {
                let Some(turn) = self.open.as_mut() else {
                    return;
                };
                match event {
                    SessionEvent::CallRequest { messages, .. } => turn.asked_with = Some(messages),
                    SessionEvent::CallFinish { finish_reason, .. } => {
                        turn.has_finish = true;
                        turn.finish_reason = finish_reason.is_some();
                    }
                    SessionEvent::CallIncomplete { .. } => turn.incomplete = true,
                    _ => {}
                }
            }
            TurnPart::End(outline) => {
                let Some(mut turn) = self.open.take() else {
                    return;
                };
                turn.last_sequence = outline.last_sequence;
                turn.complete = outline.is_complete();
                turn.systems = self.index.keys.systems(&self.systems);
                turn.n_messages = self.index.messages.len() - turn.messages_from;
                self.index.turns.push(turn);
                if outline.is_complete() {
                    // A closed turn never changes: the next refresh reads on after it.
                    self.committed = Committed {
                        mark: self.current,
                        n_turns: self.index.turns.len(),
                        n_messages: self.index.messages.len(),
                    };
                }
            }
            // Blocks and notes are the answer and bookkeeping: read when served, not indexed.
            _ => {}
        }
    }
}

/// The indexes of one proxy, by session id.
#[derive(Debug)]
pub(crate) struct Indexes(Arc<Inner>);

/// What the indexes share with the blocking threads that refresh them.
#[derive(Debug)]
struct Inner {
    replay: SessionReplay,
    keys: Arc<Keys>,
    reads: Arc<Reads>,
    entries: Mutex<HashMap<String, Arc<Mutex<Entry>>>>,
    clock: AtomicU64,
    max_sessions: usize,
}

impl Indexes {
    pub(crate) fn new(replay: SessionReplay, matching: Matching) -> Indexes {
        Indexes::with_max_sessions(replay, matching, MAX_INDEXED_SESSIONS)
    }

    pub(crate) fn with_max_sessions(
        replay: SessionReplay,
        matching: Matching,
        max_sessions: usize,
    ) -> Indexes {
        Indexes(Arc::new(Inner {
            replay,
            keys: Arc::new(Keys::new(matching)),
            reads: Arc::default(),
            entries: Mutex::new(HashMap::new()),
            clock: AtomicU64::new(0),
            max_sessions: max_sessions.max(1),
        }))
    }

    /// The session's index, refreshed from its tail first (on a blocking thread: the first
    /// refresh of a long session reads it whole).
    pub(crate) async fn index(&self, session: &str) -> Result<Arc<TurnIndex>, String> {
        let mut one = self.refreshed(session, None).await?;
        match one.pop() {
            Some((_, index)) => Ok(index),
            None => Err(format!("session {session:?} has no index")),
        }
    }

    /// The keys every index of this proxy shares: a request keyed with them once is compared
    /// with any of its sessions.
    pub(crate) fn keys(&self) -> &Keys {
        &self.0.keys
    }

    /// The same keys, shared.
    pub(crate) fn shared_keys(&self) -> Arc<Keys> {
        Arc::clone(&self.0.keys)
    }

    /// The index of every conversation of session `base`: the base's, then each
    /// `{base}:conv:{n}`'s in order up to the first with no records — on one blocking thread,
    /// one hand-over per request rather than one per conversation.
    ///
    /// Only the conversations a request can be answered from are refreshed: those whose first
    /// compared message has the key `first` (the request's own first user or assistant
    /// message). A conversation's first message never changes once written, and a request
    /// that matches a recording holds the recording's first message where the recording has
    /// it, so a conversation indexed before with another first message cannot answer; its
    /// index is handed back as last read, for wording a refusal only. The base, a
    /// conversation not indexed yet or indexed while empty, and every conversation when
    /// `first` is `None` are refreshed, so the 1,000th conversation of an eval harness costs
    /// one refresh, not a thousand.
    pub(crate) async fn conversations(
        &self,
        base: &str,
        first: Option<Key>,
    ) -> Result<Vec<(String, Arc<TurnIndex>)>, String> {
        self.refreshed(base, Some(first)).await
    }

    /// `base`'s index refreshed, then, with `conversations` set, its conversations' as
    /// [`Indexes::conversations`] hands them back.
    async fn refreshed(
        &self,
        base: &str,
        conversations: Option<Option<Key>>,
    ) -> Result<Vec<(String, Arc<TurnIndex>)>, String> {
        let inner = Arc::clone(&self.0);
        let name = base.to_owned();
        let base = base.to_owned();
        let refreshed = tokio::task::spawn_blocking(move || {
            let mut out = vec![(base.clone(), inner.refresh(&base)?)];
            if let Some(first) = conversations {
                for n in 1.. {
                    let id = cuca_events::conversation_session_id(&base, n);
                    let index = match (first, inner.indexed(&id)) {
                        (Some(asked), Some(kept))
                            if kept.first_key().is_some_and(|key| key != asked) =>
                        {
                            kept
                        }
                        _ => inner.refresh(&id)?,
                    };
                    if index.is_empty() {
                        break;
                    }
                    out.push((id, index));
                }
            }
            Ok(out)
        })
        .await;
        match refreshed {
            Ok(result) => result,
            Err(join) => Err(format!("loading session {name:?} stopped: {join}")),
        }
    }

    /// How many sessions have an index.
    #[cfg(test)]
    pub(crate) fn n_indexed(&self) -> usize {
        self.0
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether `session` has an index.
    #[cfg(test)]
    pub(crate) fn has(&self, session: &str) -> bool {
        self.0
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(session)
    }
}

impl Inner {
    fn entry(&self, session: &str) -> Arc<Mutex<Entry>> {
        // The map holds no invariant a panic could break halfway.
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = entries.get(session) {
            return Arc::clone(entry);
        }
        if entries.len() >= self.max_sessions {
            let oldest = entries
                .iter()
                .min_by_key(|(_, entry)| lock(entry).last_used)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                entries.remove(&oldest);
            }
        }
        let entry = Arc::new(Mutex::new(Entry {
            index: Arc::new(TurnIndex::new(
                session,
                self.replay.clone(),
                Arc::clone(&self.keys),
                Arc::clone(&self.reads),
            )),
            committed: Committed::default(),
            last_used: 0,
        }));
        entries.insert(session.to_owned(), Arc::clone(&entry));
        entry
    }

    /// The session's index as last refreshed, not read again; `None` when it has none.
    fn indexed(&self, session: &str) -> Option<Arc<TurnIndex>> {
        let entry = {
            // The map holds no invariant a panic could break halfway.
            let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(entries.get(session)?)
        };
        let mut entry = lock(&entry);
        entry.last_used = self.clock.fetch_add(1, Ordering::Relaxed);
        Some(Arc::clone(&entry.index))
    }

    /// Refreshes one session's index (blocking) and returns it.
    fn refresh(&self, session: &str) -> Result<Arc<TurnIndex>, String> {
        let entry = self.entry(session);
        let mut entry = lock(&entry);
        entry.last_used = self.clock.fetch_add(1, Ordering::Relaxed);
        match entry.refresh() {
            Ok(()) => Ok(Arc::clone(&entry.index)),
            Err(error) => Err(format!("cannot load session {session:?}: {error}")),
        }
    }
}

fn lock(entry: &Mutex<Entry>) -> std::sync::MutexGuard<'_, Entry> {
    // A panic mid-refresh leaves at worst a half-read open turn, which the next refresh
    // truncates and reads again.
    entry.lock().unwrap_or_else(PoisonError::into_inner)
}
