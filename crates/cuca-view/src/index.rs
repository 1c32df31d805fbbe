//! One pass over a session that keeps a few numbers per turn: what its summary header, its
//! pager (total pages, last page, go to turn N), its turns sorted by latency or tokens, its
//! next-error links and its timeline are built from.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use cuca_events::{ReadAfter, ReadMark, SessionBackend, SessionEvent};

use crate::error::ViewError;

/// What one turn (a model call) took, without its text.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TurnStat {
    /// The turn's number, from 1, as every page shows it.
    pub number: usize,
    /// Its first record's sequence.
    pub first_sequence: u64,
    /// Its last record's sequence.
    pub last_sequence: u64,
    /// When the call started, milliseconds since the Unix epoch: its Latency record's time
    /// less the latency, or its first record's time when it has no Latency.
    pub start_ms: u64,
    /// When the call ended: its last record's time.
    pub end_ms: u64,
    /// The call's wall time, when a Latency record says.
    pub latency_ms: Option<u64>,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Whether the turn's token counts are known: false when no `TokenUsage` was recorded,
    /// or when a call cut short was closed with a zero `TokenUsage` (the recorder never
    /// learned them). Pages leave unknown counts off rather than show "0 / 0".
    pub tokens_known: bool,
    /// The model asked for or answering, when call metadata says.
    pub model: Option<String>,
    /// Every token kind the call's answer reported, from its `TokenDetail` record; `None`
    /// for a call recorded without one (priced from the two folded counts).
    pub tokens: Option<cuca_events::TokenDetail>,
    /// What went wrong in it, in words, when something did (an incomplete call, a failed
    /// tool); `None` for a clean turn.
    pub error: Option<String>,
    /// Whether a Latency + TokenUsage pair closed it.
    pub complete: bool,
    /// Files its workspace snapshot says changed since the previous one.
    pub n_files_changed: u64,
    /// Shell commands recorded in it (the commands run after the previous call's answer).
    pub n_commands: u64,
    /// Of those, the ones that ended with a status other than 0, or never ran.
    pub n_failed_commands: u64,
}

/// One shell command, as the timeline marks it: when, how long, how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommandMark {
    /// The turn it was recorded in (from 1).
    pub turn: usize,
    /// Its record's sequence.
    pub sequence: u64,
    /// When it ended (its record's time), milliseconds since the Unix epoch.
    pub end_ms: u64,
    /// Its wall time.
    pub duration_ms: u64,
    /// Its exit status; `None` when it never ran.
    pub exit_status: Option<i32>,
}

impl CommandMark {
    /// When it started.
    pub fn start_ms(&self) -> u64 {
        self.end_ms.saturating_sub(self.duration_ms)
    }

    /// Whether it failed: a status other than 0, or it never ran.
    pub fn failed(&self) -> bool {
        self.exit_status != Some(0)
    }
}

/// One workspace snapshot: where it is and what it says changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SnapshotMark {
    /// The turn it was recorded in (from 1).
    pub turn: usize,
    /// Its record's sequence.
    pub sequence: u64,
    /// When it was taken, milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The tree it names; `None` when the record's address does not parse.
    pub tree: Option<cuca_workspace::ObjectId>,
    /// Files it says changed.
    pub n_changes: u64,
}

/// Most command and snapshot marks an index keeps: one a call and a few commands a call for
/// the longest sessions seen (12,392 calls), each some 40 bytes; past it the timeline marks
/// the first ones and a page still shows every turn's own records.
pub const MAX_MARKS: usize = 65_536;

/// A session's turns and totals.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SessionIndex {
    /// Records read.
    pub n_records: u64,
    /// Every turn, in order. A final block of notes only (a fork audit after the last call)
    /// is not a turn and is not here.
    pub turns: Vec<TurnStat>,
    /// The sequence of the first record of a final notes-only block, when there is one.
    pub notes_after: Option<u64>,
    /// Every model named, sorted.
    pub models: BTreeSet<String>,
    /// The first record's time.
    pub start_ms: Option<u64>,
    /// The last record's time.
    pub end_ms: Option<u64>,
    /// The file's length when this index was made: a longer file is read again.
    pub(crate) bytes: u64,
    /// Where a deep page's read starts: for each turn just before a page's first turn, its
    /// index and the read mark before its first record. A page read from there warms its
    /// echo detection on that one turn and reads only its own turns after it, instead of the
    /// session from the start (one mark per page: 32 bytes for 20 turns).
    pub(crate) page_marks: Vec<(usize, ReadMark)>,
    /// Every workspace snapshot, in order (at most [`MAX_MARKS`]): a turn's diff is against
    /// the snapshot before its own, which may be pages back.
    pub snapshots: Vec<SnapshotMark>,
    /// Every shell command, in order (at most [`MAX_MARKS`]), for the timeline.
    pub commands: Vec<CommandMark>,
}

impl SessionIndex {
    /// Prompt tokens over every turn.
    pub fn prompt_tokens(&self) -> u64 {
        self.turns.iter().map(|t| t.prompt_tokens).sum()
    }

    /// Completion tokens over every turn.
    pub fn completion_tokens(&self) -> u64 {
        self.turns.iter().map(|t| t.completion_tokens).sum()
    }

    /// What the session's calls cost, each priced by the configured table
    /// (`cuca_cost::configured`) from its token kinds, or its two folded counts when it has
    /// none; `None` when the table cannot be read.
    pub fn cost(&self) -> Option<cuca_cost::Totals> {
        let table = cuca_cost::configured().ok()?;
        let mut totals = cuca_cost::Totals::default();
        for turn in self.turns.iter().filter(|t| t.tokens_known) {
            totals.add_call(&call_of(turn), table);
        }
        Some(totals)
    }

    /// Turns with an error.
    pub fn n_errors(&self) -> usize {
        self.turns.iter().filter(|t| t.error.is_some()).count()
    }

    /// The first turn with an error whose number is above `after`.
    pub fn next_error(&self, after: usize) -> Option<&TurnStat> {
        self.turns
            .iter()
            .find(|t| t.number > after && t.error.is_some())
    }

    /// Where to read the page whose first turn is `first_turn` (0-based) from: the turn the
    /// read starts at and the mark before it; `None` to read from the start.
    pub(crate) fn page_mark(&self, first_turn: usize) -> Option<(usize, ReadMark)> {
        let before = first_turn.checked_sub(1)?;
        let at = self
            .page_marks
            .binary_search_by_key(&before, |(turn_idx, _)| *turn_idx)
            .ok()?;
        self.page_marks.get(at).copied()
    }

    /// The tree of the last snapshot before the one at `sequence`, which its changes are
    /// counted against; `None` for the session's first (every file is new then), or when the
    /// index has no mark for it.
    pub fn snapshot_before(&self, sequence: u64) -> Option<cuca_workspace::ObjectId> {
        let at = self.snapshots.partition_point(|s| s.sequence < sequence);
        at.checked_sub(1)
            .and_then(|before| self.snapshots.get(before))
            .and_then(|s| s.tree)
    }

    /// The turn numbers sorted by `key`, largest first, ties by number.
    pub fn sorted_by(&self, key: SortKey) -> Vec<&TurnStat> {
        let mut turns: Vec<&TurnStat> = self.turns.iter().collect();
        turns.sort_by(|a, b| {
            key.of(b)
                .cmp(&key.of(a))
                .then_with(|| a.number.cmp(&b.number))
        });
        turns
    }
}

/// What turns can be sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    /// Wall time, slowest first.
    Latency,
    /// Prompt plus completion tokens, most first.
    Tokens,
}

impl SortKey {
    /// The key's value for one turn.
    pub fn of(self, turn: &TurnStat) -> u64 {
        match self {
            SortKey::Latency => turn.latency_ms.unwrap_or(0),
            SortKey::Tokens => turn.prompt_tokens + turn.completion_tokens,
        }
    }

    /// The word in a URL (`?sort=latency`).
    pub fn word(self) -> &'static str {
        match self {
            SortKey::Latency => "latency",
            SortKey::Tokens => "tokens",
        }
    }

    /// The key a URL word names.
    pub fn parse(word: &str) -> Option<SortKey> {
        match word {
            "latency" => Some(SortKey::Latency),
            "tokens" => Some(SortKey::Tokens),
            _ => None,
        }
    }
}

/// Whether a record is a note (not part of a call): a block of notes only is not a turn.
/// The workspace's records are notes too: they join the call they come before, and after
/// the last call (the agent's last commands) they open no turn of their own, as in `cuca
/// replay`.
pub(crate) fn is_note(event: &SessionEvent) -> bool {
    matches!(
        event,
        SessionEvent::Fork { .. }
            | SessionEvent::ModelSwap { .. }
            | SessionEvent::WorkspaceSnapshot { .. }
            | SessionEvent::ShellCommand { .. }
    )
}

/// What a record says went wrong, when it says so.
pub(crate) fn error_of(event: &SessionEvent) -> Option<String> {
    match event {
        SessionEvent::CallIncomplete { reason } => Some(format!("incomplete call: {reason}")),
        SessionEvent::ToolResult {
            is_error,
            exit_code,
            tool_call_id,
            ..
        } if *is_error || exit_code.is_some_and(|code| code != 0) => Some(match exit_code {
            Some(code) => format!("tool result for {tool_call_id} failed (exit code {code})"),
            None => format!("tool result for {tool_call_id} failed"),
        }),
        _ => None,
    }
}

/// Whether a turn's token counts are known: it recorded a `TokenUsage`, and it is not a call
/// cut short whose counts are zero (the recorder closes such a call with a zero `TokenUsage`
/// because it never learned them).
pub(crate) fn tokens_known(token_usage: bool, incomplete: bool, total: u64) -> bool {
    token_usage && !(incomplete && total == 0)
}

/// The turn being read.
#[derive(Debug, Default, Clone)]
struct Open {
    first_sequence: Option<u64>,
    last_sequence: u64,
    first_ms: u64,
    end_ms: u64,
    latency: Option<(u64, u64)>,
    prompt_tokens: u64,
    completion_tokens: u64,
    token_usage: bool,
    incomplete: bool,
    model: Option<String>,
    tokens: Option<cuca_events::TokenDetail>,
    error: Option<String>,
    content: bool,
    n_files_changed: u64,
    n_commands: u64,
    n_failed_commands: u64,
}

impl Open {
    fn close(self, number: usize, complete: bool) -> TurnStat {
        TurnStat {
            number,
            first_sequence: self.first_sequence.unwrap_or(0),
            last_sequence: self.last_sequence,
            start_ms: self
                .latency
                .map_or(self.first_ms, |(at, ms)| at.saturating_sub(ms)),
            end_ms: self.end_ms,
            latency_ms: self.latency.map(|(_, ms)| ms),
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
            tokens_known: tokens_known(
                self.token_usage,
                self.incomplete,
                self.prompt_tokens + self.completion_tokens,
            ),
            model: self.model,
            tokens: self.tokens,
            error: self.error,
            complete,
            n_files_changed: self.n_files_changed,
            n_commands: self.n_commands,
            n_failed_commands: self.n_failed_commands,
        }
    }
}

/// Reads the whole of `session` once and indexes its turns (seed 001's segmentation: a turn
/// ends at a Latency immediately followed by a TokenUsage).
pub fn build(backend: &dyn SessionBackend, session: &str) -> Result<SessionIndex, ViewError> {
    let mut builder = Builder::default();
    // A read from the start is never stale; a store that says otherwise has no marks worth
    // keeping.
    if !builder.extend(backend, session)? {
        builder.index.page_marks.clear();
    }
    Ok(builder.finish())
}

/// An index being built, kept so that a session that grew is indexed on from where the last
/// read stopped (its read mark) instead of from its start: the turns closed so far, the turn
/// still open, and the mark.
#[derive(Debug, Default, Clone)]
struct Builder {
    /// Closed turns and totals; `notes_after` is left to [`Builder::finish`].
    index: SessionIndex,
    open: Open,
    last_was_latency: bool,
    mark: ReadMark,
    /// Records the last [`Builder::extend`] read.
    records_read: u64,
}

impl Builder {
    /// Reads the records after the builder's mark into it. False when the mark no longer
    /// describes the session (the file was replaced): nothing was read, and the builder is to
    /// be dropped for a new one.
    fn extend(&mut self, backend: &dyn SessionBackend, session: &str) -> Result<bool, ViewError> {
        let Builder {
            index,
            open,
            last_was_latency,
            mark: from,
            records_read,
        } = self;
        *records_read = 0;
        let read = backend.replay_after(session, from, &mut |record, mark| {
            *records_read += 1;
            index.n_records += 1;
            let at = record.timestamp_ms;
            index.start_ms = Some(index.start_ms.map_or(at, |s| s.min(at)));
            index.end_ms = Some(index.end_ms.map_or(at, |e| e.max(at)));
            let event = &record.event;
            if open.first_sequence.is_none() {
                open.first_sequence = Some(record.sequence);
                open.first_ms = at;
            }
            open.last_sequence = record.sequence;
            open.end_ms = at;
            open.content |= !is_note(event);
            match event {
                SessionEvent::Latency { duration_ms } => open.latency = Some((at, *duration_ms)),
                SessionEvent::TokenUsage {
                    prompt_tokens,
                    completion_tokens,
                } => {
                    open.prompt_tokens += prompt_tokens;
                    open.completion_tokens += completion_tokens;
                    open.token_usage = true;
                }
                SessionEvent::CallIncomplete { .. } => open.incomplete = true,
                SessionEvent::WorkspaceSnapshot {
                    snapshot, changes, ..
                } => {
                    open.n_files_changed += changes.len() as u64;
                    if index.snapshots.len() < MAX_MARKS {
                        index.snapshots.push(SnapshotMark {
                            turn: index.turns.len() + 1,
                            sequence: record.sequence,
                            at_ms: at,
                            tree: cuca_workspace::ObjectId::parse(snapshot).ok(),
                            n_changes: changes.len() as u64,
                        });
                    }
                }
                SessionEvent::ShellCommand {
                    exit_status,
                    duration_ms,
                    ..
                } => {
                    let mark = CommandMark {
                        turn: index.turns.len() + 1,
                        sequence: record.sequence,
                        end_ms: at,
                        duration_ms: *duration_ms,
                        exit_status: *exit_status,
                    };
                    open.n_commands += 1;
                    open.n_failed_commands += u64::from(mark.failed());
                    if index.commands.len() < MAX_MARKS {
                        index.commands.push(mark);
                    }
                }
                SessionEvent::TokenDetail(detail) => open.tokens = Some(*detail),
                SessionEvent::CallRequest { model, .. }
                | SessionEvent::CallFinish { model, .. }
                    if !model.is_empty() =>
                {
                    if !index.models.contains(model) {
                        index.models.insert(model.clone());
                    }
                    if open.model.is_none() {
                        open.model = Some(model.clone());
                    }
                }
                _ => {}
            }
            if let Some(error) = error_of(event) {
                open.error.get_or_insert(error);
            }
            let closes = *last_was_latency && matches!(event, SessionEvent::TokenUsage { .. });
            *last_was_latency = matches!(event, SessionEvent::Latency { .. });
            if closes {
                let number = index.turns.len() + 1;
                index.turns.push(std::mem::take(open).close(number, true));
                // The next turn's index is `number`; a page starts after it when `number + 1`
                // is a multiple of the page length.
                if (number + 1).is_multiple_of(crate::sessions::TURNS_PER_PAGE) {
                    index.page_marks.push((number, *mark));
                }
            }
            Ok(())
        })?;
        match read {
            ReadAfter::Read(mark) => {
                *from = mark;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// The index as of the records read: the closed turns, then the open one (or a final
    /// block of notes, which is no turn).
    fn finish(&self) -> SessionIndex {
        let mut index = self.index.clone();
        if self.open.first_sequence.is_some() {
            if self.open.content {
                let number = index.turns.len() + 1;
                index.turns.push(self.open.clone().close(number, false));
            } else {
                index.notes_after = self.open.first_sequence;
            }
        }
        index
    }
}

/// How many indexes the process keeps: a few sessions being read at once.
const CACHED: usize = 8;

/// The indexes made most recently, newest last, each with the builder that made it: a
/// session being paged through is read once, not once per page, and when its file has grown
/// only what was appended is read.
static CACHE: Mutex<Vec<Cached>> = Mutex::new(Vec::new());

/// One cached index: its key (directory and session), the index, the builder to extend it.
#[derive(Debug)]
struct Cached {
    key: String,
    index: Arc<SessionIndex>,
    builder: Builder,
}

/// The index of `session` in `backend`, from the cache when the file has not changed length,
/// extended by the records appended since when it grew.
pub fn of(
    located: &crate::sessions::Located,
    session: &str,
) -> Result<Arc<SessionIndex>, ViewError> {
    Ok(of_counting(located, session)?.0)
}

/// [`of`], with the records it read to answer (none from the cache; what was appended when the
/// file grew; the session when it was first read or replaced).
pub(crate) fn of_counting(
    located: &crate::sessions::Located,
    session: &str,
) -> Result<(Arc<SessionIndex>, u64), ViewError> {
    // A store that is not a directory has no cheap way to say a session grew: its index is
    // built on every request (one read of the session).
    let Some(backend) = located.file() else {
        let index = build(located, session)?;
        let n_records = index.n_records;
        return Ok((Arc::new(index), n_records));
    };
    let bytes = backend.bytes_on_disk(session)?;
    let key = format!("{}\u{0}{session}", backend.dir().display());
    let mut builder = {
        let cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
        match cache.iter().find(|c| c.key == key) {
            Some(c) if c.index.bytes == bytes => return Ok((Arc::clone(&c.index), 0)),
            // Grown: read on from where the cached read stopped.
            Some(c) if c.index.bytes < bytes => c.builder.clone(),
            _ => Builder::default(),
        }
    };
    if !builder.extend(backend, session)? {
        builder = Builder::default();
        if !builder.extend(backend, session)? {
            builder.index.page_marks.clear();
        }
    }
    let mut index = builder.finish();
    index.bytes = bytes;
    let index = Arc::new(index);
    let n_read = builder.records_read;
    let mut cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    cache.retain(|c| c.key != key);
    if cache.len() >= CACHED {
        cache.remove(0);
    }
    cache.push(Cached {
        key,
        index: Arc::clone(&index),
        builder,
    });
    Ok((index, n_read))
}

/// An indexed turn as a priced call: its token kinds, else its two folded counts.
fn call_of(turn: &TurnStat) -> cuca_cost::Call {
    let (usage, counted) = match &turn.tokens {
        Some(detail) => (
            cuca_cost::Usage::from_detail(detail),
            cuca_cost::Counted::Detail,
        ),
        None => (
            cuca_cost::Usage::from_folded(turn.prompt_tokens, turn.completion_tokens),
            cuca_cost::Counted::Folded,
        ),
    };
    cuca_cost::Call {
        model: turn.model.clone().unwrap_or_default(),
        timestamp_ms: turn.end_ms,
        sequence: turn.last_sequence,
        usage,
        counted,
    }
}
