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
//!
//! **Unchanged sessions.** Before each read the store's stamp of the session is taken
//! ([`cuca_events::SessionBackend::stamp`]: for a file, one `stat`, its length, inode and
//! times); a lookup that finds the same stamp again reads nothing, and when every session it
//! needs is unchanged it does not leave the runtime's thread for the blocking pool at all.
//! Whatever another process appends after a stamp changes the next one. A turn read to answer
//! from is read with the few complete turns after it, within a budget, and the complete ones
//! are kept for the next lookups (an agent loop asks them next, in order): bounded across the
//! proxy, and only while the session is unchanged — a refresh that reads anything starts a
//! new reading of the session, which nothing kept from the old one answers.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::ops::{ControlFlow, RangeInclusive};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use cuca_events::{
    Message, MessageContentBlock, PluginError, ReadAfter, ReadMark, Role, SessionEvent,
    SessionStamp,
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

/// How many turns after the asked one a read of a turn reads too, at most: the next
/// requests of an agent loop replayed in order, each then served without a read of its own.
/// Eight turns make a hop to the blocking pool and an `open` of the file one in nine turns'
/// cost, not one in one.
const READ_AHEAD_TURNS: usize = 8;

/// How many bytes of records a read takes past the asked turn, at most, as
/// [`approx_bytes`] counts them: a few ordinary turns (an answer, a tool call and its
/// result), so that reading ahead never costs a turn noticeably more than it did, whatever
/// the next turns hold.
const READ_AHEAD_BYTES: usize = 256 << 10;

/// How many records (by sequence) the turns read ahead may span, at most, whatever their
/// bytes: a turn streamed one token a record is read ahead only while it is short.
const READ_AHEAD_RECORDS: u64 = 1024;

/// A turn spanning more records than this is read alone: it is a long turn, and what is read
/// with it must stay far below the record cap a load checks (`ReplayConfig::max_records`).
const READ_AHEAD_AFTER_RECORDS: u64 = 4096;

/// How many turns the proxy keeps read, across its sessions, at most.
const KEPT_TURNS: usize = 64;

/// How many bytes of turns the proxy keeps read, across its sessions, at most, as
/// [`approx_bytes`] counts their records: what a few hundred short turns hold, small beside
/// the indexes' own bound (`MAX_INDEXED_SESSIONS`).
const KEPT_BYTES: usize = 4 << 20;

/// The largest turn kept: a quarter of [`KEPT_BYTES`], so one long turn never pushes out
/// every short one.
const KEPT_TURN_BYTES: usize = KEPT_BYTES / 4;

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
    /// The turns read from the store lately, kept for the next lookups (see [`Kept`]).
    kept: Arc<Kept>,
    /// Which reading of the session this index is: a new one each time the index is dropped
    /// and read from the start, so a turn kept from an earlier reading is never served from
    /// this one.
    generation: u64,
    /// Whether the store stamps the session ([`cuca_events::SessionBackend::stamp`]): only
    /// then does a reading outlast one lookup, so only then are turns read ahead and kept.
    stamped: bool,
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
        kept: Arc<Kept>,
    ) -> TurnIndex {
        TurnIndex {
            session_id: session_id.to_owned(),
            turns: Vec::new(),
            messages: Vec::new(),
            knows_tools: false,
            replay,
            keys,
            reads,
            generation: kept.next_generation(),
            stamped: false,
            kept,
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

    /// Turn `turn_idx`: kept from an earlier read ([`Kept`]), else read from where it lies
    /// in the store (on a blocking thread: a turn may be long), or joined from the read of it
    /// already running.
    pub(crate) async fn read_turn(&self, turn_idx: usize) -> Result<ReplayTurn, String> {
        let Some(turn) = self.turns.get(turn_idx) else {
            return Err(format!(
                "session {:?} has no turn {turn_idx}",
                self.session_id
            ));
        };
        if turn.complete {
            if let Some(kept) = self.kept.get(&self.session_id, self.generation, turn) {
                return Ok(kept);
            }
        }
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

    /// Reads turn `turn_idx` on a blocking thread and, while that is cheap, the complete
    /// turns after it too ([`TurnIndex::read_ahead`]): an agent loop replays its turns in
    /// order, so the next request's turn is then kept, and costs no hop to the blocking pool
    /// and no read of the file. Each complete turn read that holds what the index keyed for
    /// it is kept. A store that gives no stamp has every lookup read the session on, which
    /// starts a new reading each time: there the turn is read alone and nothing is kept.
    async fn read_turn_now(&self, turn_idx: usize, turn: IndexedTurn) -> TurnRead {
        let replay = self.replay.clone();
        let id = self.session_id.clone();
        let range = turn.sequence_range();
        let ahead = if self.stamped {
            self.read_ahead(turn_idx)
        } else {
            Vec::new()
        };
        let through = ahead.last().map_or(turn.last_sequence, |t| t.last_sequence);
        let start = turn.start;
        // The last sequence of the asked turn and of each read ahead, in order.
        let lasts: Vec<u64> = std::iter::once(&turn)
            .chain(&ahead)
            .map(|t| t.last_sequence)
            .collect();
        let read = tokio::task::spawn_blocking(move || {
            // The bytes of each turn's records, as `approx_bytes` counts them, and of those
            // read past the asked turn.
            let mut sizes = vec![0usize; lasts.len()];
            let mut past = 0usize;
            let mut at = 0;
            let read = replay.load_after_while(&id, &start, through, &mut |sequence, event| {
                let bytes = approx_bytes(event);
                while lasts.get(at).is_some_and(|last| sequence > *last) {
                    at += 1;
                }
                if at > 0 {
                    past += bytes;
                    if past > READ_AHEAD_BYTES {
                        return false;
                    }
                }
                if let Some(size) = sizes.get_mut(at) {
                    *size += bytes;
                }
                true
            });
            read.map(|read| (read, sizes))
        })
        .await;
        let changed = || {
            format!(
                "session {:?} changed while turn {turn_idx} was read from it; ask again",
                self.session_id
            )
        };
        match read {
            Ok(Ok((Some(trajectory), sizes))) => {
                let mut read = trajectory.turns().iter();
                let asked = match read.next() {
                    Some(one) if one.sequence_range() == range && self.holds(&turn, one) => {
                        one.clone()
                    }
                    Some(one) if one.sequence_range() == range => {
                        // The turn was chosen by keys of other text: never answered from.
                        self.changed.store(true, Ordering::Release);
                        return Err(changed());
                    }
                    _ => return Err(changed()),
                };
                let mut sizes = sizes.into_iter();
                if let (true, Some(bytes)) = (turn.complete && self.stamped, sizes.next()) {
                    self.kept
                        .keep(&self.session_id, self.generation, &turn, &asked, bytes);
                }
                for ((indexed, one), bytes) in ahead.iter().zip(read).zip(sizes) {
                    // A turn the budget cut short ends the turns read ahead.
                    if one.sequence_range() != indexed.sequence_range() {
                        break;
                    }
                    if !self.holds(indexed, one) {
                        self.changed.store(true, Ordering::Release);
                        break;
                    }
                    self.kept
                        .keep(&self.session_id, self.generation, indexed, one, bytes);
                }
                Ok(asked)
            }
            Ok(Ok((None, _))) => Err(changed()),
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

    /// The turns to read after turn `turn_idx` in the same read: the complete ones that
    /// follow it and are not kept yet, while they span few records — and none after a turn
    /// that spans many (a long turn is read alone, as before, and the caps a load checks
    /// are never reached by what is read ahead).
    fn read_ahead(&self, turn_idx: usize) -> Vec<IndexedTurn> {
        let Some(turn) = self.turns.get(turn_idx) else {
            return Vec::new();
        };
        if span(turn) > READ_AHEAD_AFTER_RECORDS {
            return Vec::new();
        }
        let mut records = 0u64;
        self.turns
            .iter()
            .skip(turn_idx + 1)
            .take(READ_AHEAD_TURNS)
            .take_while(|next| {
                records += span(next);
                next.complete
                    && records <= READ_AHEAD_RECORDS
                    && !self.kept.has(&self.session_id, self.generation, next)
            })
            .cloned()
            .collect()
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

/// How many records a turn spans by sequence (its records, and any gaps between them).
fn span(turn: &IndexedTurn) -> u64 {
    turn.last_sequence.saturating_sub(turn.first_sequence) + 1
}

/// The bytes a record holds in memory once read, roughly: its text, and a fixed amount for
/// the rest. What bounds the turns read ahead and kept, so it counts every field that can
/// be long.
fn approx_bytes(event: &SessionEvent) -> usize {
    /// A record's fixed part and a string's or an element's own.
    const FIXED: usize = 64;
    let block = |block: &MessageContentBlock| {
        FIXED
            + match block {
                MessageContentBlock::Text { text } => text.len(),
                MessageContentBlock::Thinking { thinking } => thinking.len(),
                MessageContentBlock::ToolCall {
                    id,
                    name,
                    arguments,
                } => id.len() + name.len() + arguments.len(),
                MessageContentBlock::ToolResult {
                    tool_call_id,
                    content,
                    ..
                } => tool_call_id.len() + content.len(),
                MessageContentBlock::ImageBase64 { media_type, data } => {
                    media_type.len() + data.len()
                }
            }
    };
    let text = |text: &Option<String>| text.as_ref().map_or(0, String::len);
    FIXED
        + match event {
            SessionEvent::SystemPrompt { text }
            | SessionEvent::Reasoning { text }
            | SessionEvent::Output { text } => text.len(),
            SessionEvent::Message(message) => message.content.iter().map(block).sum(),
            SessionEvent::ToolCall {
                id,
                name,
                arguments,
            } => id.len() + name.len() + arguments.len(),
            SessionEvent::ToolResult {
                tool_call_id,
                content,
                stdout,
                stderr,
                ..
            } => tool_call_id.len() + content.len() + text(stdout) + text(stderr),
            SessionEvent::CallRequest {
                model,
                parameters,
                tools,
                ..
            } => model.len() + parameters.len() + tools.len(),
            SessionEvent::CallWire { format, wire } => format.len() + wire.len(),
            SessionEvent::WorkspaceSnapshot {
                snapshot,
                changes,
                skipped,
            } => {
                snapshot.len()
                    + changes.len() * FIXED
                    + skipped.iter().map(|s| FIXED + s.len()).sum::<usize>()
            }
            SessionEvent::ShellCommand {
                command,
                cwd,
                stdout,
                stderr,
                ..
            } => command.len() + cwd.len() + stdout.tail.len() + stderr.tail.len(),
            // The rest hold a few short fields.
            _ => FIXED,
        }
}

/// Turns read from the store, kept for the lookups after: a turn once complete never changes,
/// so the next request that is answered from it (an agent loop's next turn, read ahead with
/// the one before; the same request asked again) is served without a read. Bounded across
/// the proxy by [`KEPT_TURNS`] and [`KEPT_BYTES`], the oldest dropped first.
///
/// A turn is kept for one reading of its session (an index's `generation`) and only after it
/// held what that reading keyed for it. A refresh that finds the session may have changed
/// (its stamp is not the one taken before the last read) starts a new reading, so a session
/// appended to, replaced, cut short or changed in place is never answered from what was kept
/// of it before: only a session the store says is unchanged is.
#[derive(Debug, Default)]
struct Kept {
    turns: Mutex<KeptTurns>,
    /// The last generation handed out.
    generations: AtomicU64,
}

#[derive(Debug, Default)]
struct KeptTurns {
    /// Oldest first.
    turns: VecDeque<KeptTurn>,
    bytes: usize,
}

#[derive(Debug)]
struct KeptTurn {
    session_id: String,
    generation: u64,
    first_sequence: u64,
    last_sequence: u64,
    bytes: usize,
    turn: ReplayTurn,
}

impl KeptTurn {
    fn is(&self, session_id: &str, generation: u64, turn: &IndexedTurn) -> bool {
        self.generation == generation
            && self.first_sequence == turn.first_sequence
            && self.last_sequence == turn.last_sequence
            && self.session_id == session_id
    }
}

impl Kept {
    fn lock(&self) -> std::sync::MutexGuard<'_, KeptTurns> {
        // A list of turns and their sum: a panic between the two leaves at worst a sum a
        // little off, which only moves when the next turn is dropped.
        self.turns.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn next_generation(&self) -> u64 {
        self.generations.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Turn `turn` of the reading `generation` of `session_id`, if kept.
    fn get(&self, session_id: &str, generation: u64, turn: &IndexedTurn) -> Option<ReplayTurn> {
        let kept = self.lock();
        kept.turns
            .iter()
            .rev()
            .find(|kept| kept.is(session_id, generation, turn))
            .map(|kept| kept.turn.clone())
    }

    fn has(&self, session_id: &str, generation: u64, turn: &IndexedTurn) -> bool {
        self.lock()
            .turns
            .iter()
            .any(|kept| kept.is(session_id, generation, turn))
    }

    /// Keeps `read`, turn `turn` of the reading `generation` of `session_id`, `bytes` long;
    /// a turn over [`KEPT_TURN_BYTES`] is not kept.
    fn keep(
        &self,
        session_id: &str,
        generation: u64,
        turn: &IndexedTurn,
        read: &ReplayTurn,
        bytes: usize,
    ) {
        if bytes > KEPT_TURN_BYTES {
            return;
        }
        let mut kept = self.lock();
        if kept
            .turns
            .iter()
            .any(|kept| kept.is(session_id, generation, turn))
        {
            return;
        }
        while kept.turns.len() >= KEPT_TURNS || kept.bytes + bytes > KEPT_BYTES {
            let Some(oldest) = kept.turns.pop_front() else {
                break;
            };
            kept.bytes = kept.bytes.saturating_sub(oldest.bytes);
        }
        kept.bytes += bytes;
        kept.turns.push_back(KeptTurn {
            session_id: session_id.to_owned(),
            generation,
            first_sequence: turn.first_sequence,
            last_sequence: turn.last_sequence,
            bytes,
            turn: read.clone(),
        });
    }

    /// Drops every turn kept of `session_id`: its index is being read anew.
    fn forget(&self, session_id: &str) {
        let mut kept = self.lock();
        let before = kept.turns.len();
        kept.turns.retain(|kept| kept.session_id != session_id);
        if kept.turns.len() != before {
            kept.bytes = kept.turns.iter().map(|kept| kept.bytes).sum();
        }
    }

    /// How many turns are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().turns.len()
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
    /// The store's stamp of the session taken before the read that brought the index up to
    /// date ([`cuca_events::SessionBackend::stamp`]); `None` when the store gives none or
    /// the last refresh failed. While the store still gives this stamp, the session has not
    /// changed since, and a refresh reads nothing.
    stamp: Option<SessionStamp>,
    last_used: u64,
}

/// What a refresh found.
enum Refreshed {
    Read,
    Stale,
}

impl Entry {
    /// Reads what the session gained since the last refresh into the index: nothing when
    /// the store's stamp of the session is the one taken before the last read.
    fn refresh(&mut self) -> Result<(), PluginError> {
        // A turn read that did not hold what was keyed: the whole index is suspect.
        if self.index.changed.swap(false, Ordering::AcqRel) {
            self.reset();
        }
        // Taken before the read: whatever is appended from now on, by this process or
        // another, changes the next stamp, so a refresh that skips on it misses nothing.
        let stamp = self.index.replay.backend().stamp(&self.index.session_id);
        if stamp.is_some() && stamp == self.stamp {
            return Ok(());
        }
        // The session may have changed, in place too: the turns kept of it are read again,
        // and checked again against what the index keyed, when they are next asked for.
        self.renew();
        // A stale mark rebuilds from the start once; a second stale read in a row means the
        // file keeps changing under the read.
        for _ in 0..2 {
            match self.read_on()? {
                Refreshed::Read => {
                    self.stamp = stamp;
                    // The read made the index this entry's own: no copy is made here.
                    Arc::make_mut(&mut self.index).stamped = stamp.is_some();
                    return Ok(());
                }
                Refreshed::Stale => self.reset(),
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

    /// Drops the index, to read the session from its start.
    fn reset(&mut self) {
        let index = Arc::make_mut(&mut self.index);
        index.turns = Vec::new();
        index.messages = Vec::new();
        self.committed = Committed::default();
        self.renew();
    }

    /// Makes the index a new reading of the session, whose turns are kept apart from the
    /// old one's: what was kept of it is dropped, and what a lookup still holding the old
    /// index reads and keeps is never served to the new one.
    fn renew(&mut self) {
        let index = Arc::make_mut(&mut self.index);
        index.kept.forget(&index.session_id);
        index.generation = index.kept.next_generation();
        self.stamp = None;
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

/// Sessions' indexes by id, in order: a session and its conversations.
type Conversations = Vec<(String, Arc<TurnIndex>)>;

/// The indexes of one proxy, by session id.
#[derive(Debug)]
pub(crate) struct Indexes(Arc<Inner>);

/// What the indexes share with the blocking threads that refresh them.
#[derive(Debug)]
struct Inner {
    replay: SessionReplay,
    keys: Arc<Keys>,
    reads: Arc<Reads>,
    kept: Arc<Kept>,
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
            kept: Arc::default(),
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
    /// [`Indexes::conversations`] hands them back. When none of the sessions to refresh can
    /// have changed since its index was read (the store's stamp of each is the one taken
    /// before that read), the indexes are handed back at once, with no hop to the blocking
    /// pool: what an agent loop replaying its recording meets on every turn.
    async fn refreshed(
        &self,
        base: &str,
        conversations: Option<Option<Key>>,
    ) -> Result<Vec<(String, Arc<TurnIndex>)>, String> {
        if let Ok(Some(current)) = self
            .0
            .gather(base, conversations, |inner, id| Ok(inner.current(id)))
        {
            return Ok(current);
        }
        let inner = Arc::clone(&self.0);
        let name = base.to_owned();
        let base = base.to_owned();
        let refreshed = tokio::task::spawn_blocking(move || {
            inner
                .gather(&base, conversations, |inner, id| {
                    inner.refresh(id).map(Some)
                })?
                .ok_or_else(|| format!("session {base:?} has no index"))
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
                Arc::clone(&self.kept),
            )),
            committed: Committed::default(),
            stamp: None,
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

    /// `base`'s index from `get`, then, with `conversations` set, its conversations' as
    /// [`Indexes::conversations`] hands them back: each that a request with that first
    /// message can be answered from from `get`, the rest as last read. `None` when `get` has
    /// none for one of them.
    fn gather(
        &self,
        base: &str,
        conversations: Option<Option<Key>>,
        get: impl Fn(&Inner, &str) -> Result<Option<Arc<TurnIndex>>, String>,
    ) -> Result<Option<Conversations>, String> {
        let Some(index) = get(self, base)? else {
            return Ok(None);
        };
        let mut out = vec![(base.to_owned(), index)];
        if let Some(first) = conversations {
            for n in 1.. {
                let id = cuca_events::conversation_session_id(base, n);
                let index = match (first, self.indexed(&id)) {
                    (Some(asked), Some(kept))
                        if kept.first_key().is_some_and(|key| key != asked) =>
                    {
                        kept
                    }
                    _ => match get(self, &id)? {
                        Some(index) => index,
                        None => return Ok(None),
                    },
                };
                if index.is_empty() {
                    break;
                }
                out.push((id, index));
            }
        }
        Ok(Some(out))
    }

    /// The session's index, when the store says the session has not changed since it was
    /// read (its stamp is the one taken before that read); `None` when it may have, or when
    /// a refresh of it is running. One `stat` of its file, on the caller's thread: no read,
    /// no hop to the blocking pool.
    fn current(&self, session: &str) -> Option<Arc<TurnIndex>> {
        let entry = {
            // The map holds no invariant a panic could break halfway.
            let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(entries.get(session)?)
        };
        // A refresh running holds the entry: the caller takes the blocking path and waits
        // for it there, not here.
        let mut entry = entry.try_lock().ok()?;
        if entry.stamp.is_none() || entry.index.changed.load(Ordering::Acquire) {
            return None;
        }
        let stamp = self.replay.backend().stamp(session);
        if stamp != entry.stamp {
            return None;
        }
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
