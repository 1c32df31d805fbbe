//! `cuca-search`: find a text across every session of a store.
//!
//! A [`Search`] is a pattern (a regular expression, or a fixed string) and a few options; its
//! [`Search::run`] reads each session of a directory of `.cslog` files once, record by
//! record ([`Search::run_backend`] each session of any other `SessionBackend`, such as a
//! PostgreSQL store a fleet records into), and hands every [`Hit`] to a visitor as it is found: which session, which record
//! (its point id is what `cuca fork` and the viewer's `#point` take), which turn (numbered
//! from 1, as replay segments them: a turn ends at a Latency directly followed by a
//! TokenUsage), which kind of record and field, and a short snippet around the match.
//!
//! What is searched ([`SEARCHED_KINDS`]): system prompts and message text (every block of a
//! message: text, thinking, tool calls' names and arguments, tool results), streamed outputs
//! and reasoning, tool calls' names and arguments, tool results' content, stdout and stderr,
//! the models of `CallRequest` and `CallFinish` records and a finish reason, and why a call
//! is incomplete (`CallIncomplete`), shell commands' lines and the recorded tails of their
//! stdout and stderr (`ShellCommand`), and the paths a workspace snapshot says changed
//! (`WorkspaceSnapshot`). Consecutive `Output` records (and consecutive
//! `Reasoning` records) are searched as the one text they stream, so a word split across
//! tokens is found; the hit names the record where the match starts. A kind filter of
//! `ToolCall` (or `ToolResult`) also finds the tool calls (results) inside `Message` records,
//! where a proxy records an assistant's calls and the results sent back.
//!
//! A fork holds its parent's records through its fork point: when both are searched, a hit
//! in that copied prefix is handed over once, the parent's, and [`Hit::also_in_forks`] counts
//! the forks holding it too ([`Search::fold_forks`]). [`Search::offset`] and
//! [`Search::limit`] page through the hits; [`Search::matcher`] finds the same pattern in texts
//! outside sessions (a call log's error sentences, which the caller reads).
//!
//! ```
//! use std::ops::ControlFlow;
//! use cuca_events::{Message, SessionBackend, SessionEvent};
//! use cuca_store_file::FileBackend;
//! use cuca_search::Search;
//!
//! let dir = tempfile::tempdir()?;
//! let backend = FileBackend::new(dir.path())?;
//! let records = [
//!     SessionEvent::Message(Message::user("Where is the vault?")),
//!     SessionEvent::Output { text: "In Lis".into() },
//!     SessionEvent::Output { text: "bon.".into() },
//!     SessionEvent::Latency { duration_ms: 412 },
//!     SessionEvent::TokenUsage { prompt_tokens: 31, completion_tokens: 2 },
//! ];
//! for (sequence, event) in records.into_iter().enumerate() {
//!     backend.append(cuca_testkit::record("demo", sequence as u64, event))?;
//! }
//!
//! let mut hits = Vec::new();
//! let outcome = Search::new("lisbon").ignore_case(true).limit(10).run(dir.path(), |hit| {
//!     hits.push((hit.point_id(), hit.turn, hit.kind, hit.snippet));
//!     ControlFlow::Continue(())
//! })?;
//! assert_eq!(hits, [("demo:1".to_string(), 1, "Output", "In Lisbon.".to_string())]);
//! assert_eq!((outcome.sessions, outcome.records, outcome.hits), (1, 5, 1));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Memory and time
//!
//! A session is read as a stream (`FileBackend::skim_each`, each record's texts borrowed from
//! the read buffer, so nothing is allocated per record but a message's block list): memory is one read chunk and
//! one streamed text run (capped at [`MAX_RUN_BYTES`]), whatever the session's length, and
//! hits are handed over as they are found, never gathered. `benches/search.rs` (`search_1M`)
//! measures a search over a million records against a bare read of them. Another store is
//! read through `SessionBackend::replay_each`, each record owned as that store hands it over,
//! and costs what its `replay_each` costs (a PostgreSQL store reads a session in one query).
//!
//! # What it does not do
//!
//! It never writes and holds no format knowledge: it reads through `cuca-store-file`'s public
//! API and the `SessionBackend` trait. It does not search audit notes (Fork, ModelSwap), timings and token counts, the
//! tools a request offered or a call's wire fields. It indexes nothing: every search reads
//! the sessions again, which is what keeps it always current.
#![forbid(unsafe_code)]

use std::ops::{ControlFlow, Range};
use std::path::Path;

use cuca_events::{
    MessageContentBlock, PluginError, ReplayedRecord, Role, SessionBackend, SessionEvent,
};
use cuca_store_file::{FileBackend, SkimmedRecord};
use regex::{Regex, RegexBuilder};

mod error;
mod snippet;

#[cfg(test)]
mod tests;

pub use error::SearchError;

/// The record kinds a search reads, by their [`SessionEvent::KINDS`] names.
pub const SEARCHED_KINDS: [&str; 11] = [
    "SystemPrompt",
    "Message",
    "Reasoning",
    "Output",
    "ToolCall",
    "ToolResult",
    "CallRequest",
    "CallFinish",
    "CallIncomplete",
    "ShellCommand",
    "WorkspaceSnapshot",
];

/// The longest streamed text (consecutive `Output`, or `Reasoning`, records) searched as
/// one: past it the text is searched and started afresh, so a match that spans the cut is
/// not found. 1 MiB is far more than one answer streams, and bounds the memory of a session
/// that streams without end.
pub const MAX_RUN_BYTES: usize = 1 << 20;

/// Bytes of context a snippet shows on either side of the match, before it is cut at a line
/// end: enough for a few words, short enough for one terminal line with the hit's address.
pub const CONTEXT_BYTES: usize = 40;

/// The longest part of a match a snippet shows: a pattern like `.*` matches whole texts.
pub const MAX_MATCH_BYTES: usize = 120;

/// A pattern and its options; [`Search::run`] searches a directory with it.
#[derive(Debug, Clone)]
pub struct Search {
    pattern: String,
    fixed_strings: bool,
    ignore_case: bool,
    /// Bit `i` set: kind `SessionEvent::KINDS[i]` is searched.
    kinds: u32,
    limit: Option<usize>,
    offset: usize,
    fold_forks: bool,
}

/// One match: where it is, and a snippet of the text around it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Hit {
    /// The session the record belongs to.
    pub session_id: String,
    /// The record's sequence in its session (for a streamed text, the record where the match
    /// starts).
    pub sequence: u64,
    /// Milliseconds since the Unix epoch when that record was made.
    pub timestamp_ms: u64,
    /// The turn the record is in, numbered from 1 as replay segments turns.
    pub turn: u64,
    /// The record's kind, one of [`SEARCHED_KINDS`].
    pub kind: &'static str,
    /// Which text of the record matched: `text`, `thinking`, `name`, `arguments`, `content`,
    /// `stdout`, `stderr`, `model`, `finish_reason` or `reason`.
    pub field: &'static str,
    /// A message's role (`user`, `assistant`, …); `None` for other kinds.
    pub role: Option<&'static str>,
    /// The text around the match, cut at line ends and to [`CONTEXT_BYTES`] either side, with
    /// `…` where it was cut. Its characters are the recording's, unescaped.
    pub snippet: String,
    /// The match's byte range within [`Hit::snippet`] (clipped to [`MAX_MATCH_BYTES`]).
    pub matched: Range<usize>,
    /// How many forks searched with it hold this record too, in the prefix a fork copies
    /// from its parent: their copies of the hit are not handed over again
    /// ([`Search::fold_forks`]).
    pub also_in_forks: usize,
}

impl Hit {
    /// The record's point id, `{session_id}:{sequence}`: what `cuca fork` and the viewer's
    /// point links take.
    pub fn point_id(&self) -> String {
        format!("{}:{}", self.session_id, self.sequence)
    }
}

/// What a whole search read and found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Outcome {
    /// Sessions read.
    pub sessions: usize,
    /// Records read, across all sessions.
    pub records: u64,
    /// Hits handed to the visitor.
    pub hits: usize,
    /// Hits passed over before the first one handed to the visitor ([`Search::offset`]).
    pub skipped: usize,
    /// Hits in a fork's copied prefix, not handed over: the same record's hit in the parent
    /// was, with [`Hit::also_in_forks`] counting them ([`Search::fold_forks`]).
    pub folded: usize,
    /// Whether the search stopped at its limit (more hits may exist).
    pub limited: bool,
    /// Whether the visitor stopped the search.
    pub stopped: bool,
    /// Sessions that could not be read through: a load refuses them (their hits, if any,
    /// are from the records before the damage) or their file cannot be read.
    pub unreadable: Vec<Unreadable>,
}

/// A session a search could not read through, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Unreadable {
    /// The session.
    pub session_id: String,
    /// Why, in the store's words.
    pub reason: String,
}

impl Search {
    /// A search for the regular expression `pattern` (the `regex` crate's syntax), in every
    /// [`SEARCHED_KINDS`] kind, case-sensitive, with no limit.
    pub fn new(pattern: impl Into<String>) -> Self {
        Search {
            pattern: pattern.into(),
            fixed_strings: false,
            ignore_case: false,
            kinds: SEARCHED_KINDS
                .iter()
                .filter_map(|kind| kind_index(kind))
                .fold(0, |mask, index| mask | 1 << index),
            limit: None,
            offset: 0,
            fold_forks: true,
        }
    }

    /// Passes over the first `n` hits (counted in [`Outcome::skipped`]) and hands over those
    /// after them: the next page of a search whose first page held `n`. The limit counts
    /// from there.
    pub fn offset(mut self, n: usize) -> Self {
        self.offset = n;
        self
    }

    /// Whether a hit in a fork's copied prefix (the records through its fork point, which
    /// are its parent's) is left out when the parent is searched too, the parent's hit
    /// counting it in [`Hit::also_in_forks`]. On by default: a fork of a long session would
    /// otherwise repeat every hit of the parent's prefix.
    pub fn fold_forks(mut self, yes: bool) -> Self {
        self.fold_forks = yes;
        self
    }

    /// A matcher of this search's pattern, for texts that are not in sessions (a call log's
    /// error sentences): the same pattern, options and snippets as a session's hits.
    pub fn matcher(&self) -> Result<Matcher, SearchError> {
        Ok(Matcher {
            regex: self.regex()?,
        })
    }

    /// Whether the pattern is a fixed string to find as written (no regex syntax).
    pub fn fixed_strings(mut self, yes: bool) -> Self {
        self.fixed_strings = yes;
        self
    }

    /// Whether letters match in either case (Unicode simple case folding).
    pub fn ignore_case(mut self, yes: bool) -> Self {
        self.ignore_case = yes;
        self
    }

    /// Searches only these kinds (names of [`SEARCHED_KINDS`], in any case, `-` and `_`
    /// ignored: `tool-result` is `ToolResult`). An empty list keeps every kind.
    pub fn kinds<I, S>(mut self, kinds: I) -> Result<Self, SearchError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut mask = 0;
        for kind in kinds {
            let kind = kind.as_ref();
            let wanted: String = kind.chars().filter(|c| *c != '-' && *c != '_').collect();
            let index = SEARCHED_KINDS
                .iter()
                .find(|name| name.eq_ignore_ascii_case(&wanted))
                .and_then(|name| kind_index(name))
                .ok_or_else(|| SearchError::UnknownKind { kind: kind.into() })?;
            mask |= 1 << index;
        }
        if mask != 0 {
            self.kinds = mask;
        }
        Ok(self)
    }

    /// Stops after `n` hits ([`Outcome::limited`] then says so).
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }

    /// The compiled pattern, or why it does not compile.
    fn regex(&self) -> Result<Regex, SearchError> {
        let pattern = if self.fixed_strings {
            regex::escape(&self.pattern)
        } else {
            self.pattern.clone()
        };
        RegexBuilder::new(&pattern)
            .case_insensitive(self.ignore_case)
            .build()
            .map_err(|error| SearchError::Pattern {
                pattern: self.pattern.clone(),
                reason: one_line(&error.to_string()),
            })
    }

    /// Searches every session in `dir`, in session id order, handing each hit to `visit` as
    /// it is found; `visit` returning `Break` stops the search.
    ///
    /// A missing directory is [`SearchError::Dir`]; a session that cannot be read through is
    /// listed in [`Outcome::unreadable`] and the others are searched all the same.
    pub fn run(
        &self,
        dir: &Path,
        mut visit: impl FnMut(Hit) -> ControlFlow<()>,
    ) -> Result<Outcome, SearchError> {
        let regex = self.regex()?;
        match std::fs::metadata(dir) {
            Ok(metadata) if metadata.is_dir() => {}
            Ok(_) => {
                return Err(SearchError::Dir {
                    dir: dir.to_owned(),
                    source: std::io::Error::other("not a directory"),
                })
            }
            Err(source) => {
                return Err(SearchError::Dir {
                    dir: dir.to_owned(),
                    source,
                })
            }
        }
        let backend = FileBackend::new(dir)?;
        let mut ids = cuca_events::SessionBackend::sessions(&backend)?;
        ids.sort();
        let forks = self.forks(&ids);
        let mut outcome = Outcome::default();
        for id in &ids {
            let copies = forks.of(id);
            if self.session(&regex, &backend, id, &copies, &mut visit, &mut outcome) {
                break;
            }
        }
        Ok(outcome)
    }

    /// Searches one session of `backend` the same way, for a caller that shows one session
    /// (the viewer's session page).
    pub fn run_session(
        &self,
        backend: &FileBackend,
        session_id: &str,
        mut visit: impl FnMut(Hit) -> ControlFlow<()>,
    ) -> Result<Outcome, SearchError> {
        let regex = self.regex()?;
        let mut outcome = Outcome::default();
        // One session shown on its own: its whole record, copied prefix included.
        let copies = Copies::default();
        self.session(
            &regex,
            backend,
            session_id,
            &copies,
            &mut visit,
            &mut outcome,
        );
        Ok(outcome)
    }

    /// Searches every session of any store (a PostgreSQL database a fleet records into, a
    /// store in memory) the same way, through [`SessionBackend::replay_each`], in session id
    /// order. A session the store refuses is listed in [`Outcome::unreadable`] with the
    /// store's reason (its hits, if any, are from the records handed over before the refusal),
    /// and the others are searched all the same. A directory is better searched with
    /// [`Search::run`], which reads its files without allocating per record and reports damage
    /// by byte offset.
    pub fn run_backend(
        &self,
        backend: &dyn SessionBackend,
        mut visit: impl FnMut(Hit) -> ControlFlow<()>,
    ) -> Result<Outcome, SearchError> {
        let regex = self.regex()?;
        let mut ids = backend.sessions()?;
        ids.sort();
        let forks = self.forks(&ids);
        let mut outcome = Outcome::default();
        for id in &ids {
            let copies = forks.of(id);
            if self.stored_session(&regex, backend, id, &copies, &mut visit, &mut outcome) {
                break;
            }
        }
        Ok(outcome)
    }

    /// The fork relations among `ids`, when hits in copied prefixes are folded.
    fn forks(&self, ids: &[String]) -> Forks {
        if self.fold_forks {
            Forks::among(ids)
        } else {
            Forks::default()
        }
    }

    /// [`Search::session`] through the trait: each record as the store hands it over.
    fn stored_session(
        &self,
        regex: &Regex,
        backend: &dyn SessionBackend,
        session_id: &str,
        copies: &Copies,
        visit: &mut dyn FnMut(Hit) -> ControlFlow<()>,
        outcome: &mut Outcome,
    ) -> bool {
        let Some(mut reader) = self.reader(regex, session_id, copies, visit, outcome) else {
            return true;
        };
        let result = backend.replay_each(session_id, &mut |record| {
            reader.take(&record);
            if reader.over {
                // Not an error: the one way to stop a read early. Recognised by `over`.
                return Err(PluginError::validation("search", "stopped"));
            }
            Ok(())
        });
        if !reader.over {
            reader.flush_run();
        }
        let over = reader.over;
        match result {
            Ok(()) => {}
            Err(_) if over => {}
            Err(error) => outcome.unreadable.push(Unreadable {
                session_id: session_id.to_owned(),
                reason: error.to_string(),
            }),
        }
        over
    }

    /// A reader for one more session, counted; `None` when the limit is already reached.
    fn reader<'s>(
        &'s self,
        regex: &'s Regex,
        session_id: &'s str,
        copies: &'s Copies,
        visit: &'s mut dyn FnMut(Hit) -> ControlFlow<()>,
        outcome: &'s mut Outcome,
    ) -> Option<SessionReader<'s>> {
        if self.limit.is_some_and(|limit| outcome.hits >= limit) {
            outcome.limited = true;
            return None;
        }
        outcome.sessions += 1;
        Some(SessionReader {
            search: self,
            regex,
            session_id,
            copies,
            visit,
            outcome,
            turn: 1,
            last_was_latency: false,
            run: Run::default(),
            over: false,
        })
    }

    /// Searches one session into `outcome`; returns whether the search is over (the limit or
    /// the visitor stopped it).
    fn session(
        &self,
        regex: &Regex,
        backend: &FileBackend,
        session_id: &str,
        copies: &Copies,
        visit: &mut dyn FnMut(Hit) -> ControlFlow<()>,
        outcome: &mut Outcome,
    ) -> bool {
        let Some(mut reader) = self.reader(regex, session_id, copies, visit, outcome) else {
            return true;
        };
        let result = backend.skim_each(session_id, &mut |record| {
            reader.take(&record);
            if reader.over {
                // Not an error: the one way to stop a scan early. Recognised by `over`.
                return Err(PluginError::validation("search", "stopped"));
            }
            Ok(())
        });
        if !reader.over {
            reader.flush_run();
        }
        let over = reader.over;
        match result {
            Ok(summary) if !summary.is_loadable() => outcome.unreadable.push(Unreadable {
                session_id: session_id.to_owned(),
                reason: match summary.verdict {
                    cuca_store_file::Verdict::Refused { offset, reason } => {
                        format!("damaged at byte {offset}: {reason}")
                    }
                    other => format!("{other:?}"),
                },
            }),
            Ok(_) => {}
            Err(_) if over => {}
            Err(error) => outcome.unreadable.push(Unreadable {
                session_id: session_id.to_owned(),
                reason: error.to_string(),
            }),
        }
        over
    }
}

/// Indices in [`SessionEvent::KINDS`] the reader tells apart.
const MESSAGE: usize = 1;
const REASONING: usize = 2;
const OUTPUT: usize = 3;
const TOOL_CALL: usize = 4;
const TOOL_RESULT: usize = 5;
const LATENCY: usize = 6;
const TOKEN_USAGE: usize = 7;

/// Whether a text of a record of kind `index` is searched, by its field name; the name is the
/// one a hit reports. Ids, the parameters and tools a request offered, and images are not.
fn searched(index: usize, field: &'static str) -> Option<&'static str> {
    let kind = SessionEvent::KINDS[index];
    let wanted = match kind {
        "SystemPrompt" => field == "text",
        "Message" => matches!(
            field,
            "text" | "thinking" | "name" | "arguments" | "content"
        ),
        "ToolCall" => matches!(field, "name" | "arguments"),
        "ToolResult" => matches!(field, "content" | "stdout" | "stderr"),
        "CallRequest" => field == "model",
        "CallFinish" => matches!(field, "model" | "finish_reason"),
        "CallIncomplete" => field == "reason",
        // A command's line and the recorded tails of its streams (the whole streams are in
        // the workspace object store, not in the session).
        "ShellCommand" => matches!(field, "command" | "stdout" | "stderr"),
        // The paths a snapshot says changed: which call saw a file change.
        "WorkspaceSnapshot" => field == "path",
        _ => false,
    };
    wanted.then_some(field)
}

/// The kind's index in [`SessionEvent::KINDS`].
fn kind_index(kind: &str) -> Option<usize> {
    SessionEvent::KINDS.iter().position(|name| *name == kind)
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Consecutive `Output` (or `Reasoning`) records, joined: the text a turn streamed.
#[derive(Debug, Default)]
struct Run {
    /// The kind's index; meaningful only while `text` is not empty or `starts` is not.
    kind_index: usize,
    turn: u64,
    text: String,
    /// Where each record's text starts in `text`: (byte offset, sequence, timestamp).
    starts: Vec<(usize, u64, u64)>,
}

/// One session's read: the turn count and the streamed text in progress.
struct SessionReader<'s> {
    search: &'s Search,
    regex: &'s Regex,
    session_id: &'s str,
    /// Which of this session's records are copies a parent's hits stand for, and which
    /// forks hold copies of its own.
    copies: &'s Copies,
    visit: &'s mut dyn FnMut(Hit) -> ControlFlow<()>,
    outcome: &'s mut Outcome,
    turn: u64,
    last_was_latency: bool,
    run: Run,
    /// The limit was reached or the visitor stopped: read no further.
    over: bool,
}

/// A record as the reader reads it: where it is, its kind, and its texts with their field
/// names (a skimmed frame's, borrowed; or a record a store handed over, owned).
trait Readable {
    fn sequence(&self) -> u64;
    fn timestamp_ms(&self) -> u64;
    fn kind_index(&self) -> usize;
    /// Every searched text, in field order: the field, a message's role, the text.
    fn each_text(&self, visit: &mut dyn FnMut(&'static str, Option<Role>, &str));
}

impl Readable for SkimmedRecord<'_> {
    fn sequence(&self) -> u64 {
        self.sequence
    }

    fn timestamp_ms(&self) -> u64 {
        self.timestamp_ms
    }

    fn kind_index(&self) -> usize {
        SkimmedRecord::kind_index(self)
    }

    fn each_text(&self, visit: &mut dyn FnMut(&'static str, Option<Role>, &str)) {
        SkimmedRecord::each_text(self, visit);
    }
}

impl Readable for ReplayedRecord<'_> {
    fn sequence(&self) -> u64 {
        self.sequence
    }

    fn timestamp_ms(&self) -> u64 {
        self.timestamp_ms
    }

    fn kind_index(&self) -> usize {
        self.event.kind_index()
    }

    /// The texts [`SkimmedRecord::each_text`] hands over for the same record, in the same
    /// order, as far as [`searched`] keeps them (ids, parameters, tools, audit notes and
    /// images are never searched, so they are not handed over).
    fn each_text(&self, visit: &mut dyn FnMut(&'static str, Option<Role>, &str)) {
        let mut put = |field, text: &str| visit(field, None, text);
        match &self.event {
            SessionEvent::SystemPrompt { text }
            | SessionEvent::Reasoning { text }
            | SessionEvent::Output { text } => put("text", text),
            SessionEvent::Message(message) => {
                let role = Some(message.role);
                for block in &message.content {
                    match block {
                        MessageContentBlock::Text { text } => visit("text", role, text),
                        MessageContentBlock::Thinking { thinking } => {
                            visit("thinking", role, thinking)
                        }
                        MessageContentBlock::ToolCall {
                            name, arguments, ..
                        } => {
                            visit("name", role, name);
                            visit("arguments", role, arguments);
                        }
                        MessageContentBlock::ToolResult { content, .. } => {
                            visit("content", role, content)
                        }
                        MessageContentBlock::ImageBase64 { .. } => {}
                    }
                }
            }
            SessionEvent::ToolCall {
                name, arguments, ..
            } => {
                put("name", name);
                put("arguments", arguments);
            }
            SessionEvent::ToolResult {
                content,
                stdout,
                stderr,
                ..
            } => {
                put("content", content);
                if let Some(stdout) = stdout {
                    put("stdout", stdout);
                }
                if let Some(stderr) = stderr {
                    put("stderr", stderr);
                }
            }
            SessionEvent::CallRequest { model, .. } => put("model", model),
            SessionEvent::CallFinish {
                finish_reason,
                model,
            } => {
                if let Some(reason) = finish_reason {
                    put("finish_reason", reason);
                }
                put("model", model);
            }
            SessionEvent::CallIncomplete { reason } => put("reason", reason),
            SessionEvent::ShellCommand {
                command,
                stdout,
                stderr,
                ..
            } => {
                put("command", command);
                put("stdout", &stdout.tail);
                put("stderr", &stderr.tail);
            }
            SessionEvent::WorkspaceSnapshot { changes, .. } => {
                for change in changes {
                    put("path", &change.path);
                }
            }
            _ => {}
        }
    }
}

impl SessionReader<'_> {
    fn take(&mut self, record: &dyn Readable) {
        self.outcome.records += 1;
        let index = record.kind_index();
        let streamed = index == OUTPUT || index == REASONING;
        if !streamed || index != self.run.kind_index {
            self.flush_run();
        }
        let kinds = self.search.kinds;
        let wanted = kinds & (1 << index) != 0
            || (index == MESSAGE && kinds & (1 << TOOL_CALL | 1 << TOOL_RESULT) != 0);
        let closes_turn = self.last_was_latency && index == TOKEN_USAGE;
        self.last_was_latency = index == LATENCY;
        if wanted && !self.over {
            let at = At {
                sequence: record.sequence(),
                timestamp_ms: record.timestamp_ms(),
                kind: SessionEvent::KINDS[index],
                role: None,
            };
            if streamed {
                record.each_text(&mut |_, _, text| self.stream(&at, index, text));
            } else {
                record.each_text(&mut |field, role, text| {
                    let Some(field) = searched(index, field) else {
                        return;
                    };
                    // A message's tool calls and results are searched as such when their kind
                    // is asked for and Message is not: a proxy records an assistant's tool
                    // calls, and the results sent back, inside Message records.
                    let kind = match (index, field) {
                        (MESSAGE, _) if kinds & (1 << MESSAGE) != 0 => at.kind,
                        (MESSAGE, "name" | "arguments") if kinds & (1 << TOOL_CALL) != 0 => {
                            SessionEvent::KINDS[TOOL_CALL]
                        }
                        (MESSAGE, "content") if kinds & (1 << TOOL_RESULT) != 0 => {
                            SessionEvent::KINDS[TOOL_RESULT]
                        }
                        (MESSAGE, _) => return,
                        _ => at.kind,
                    };
                    let at = At {
                        role: role.map(|role| role.as_str()),
                        kind,
                        ..at
                    };
                    self.field(&at, field, text);
                });
            }
        }
        if closes_turn {
            self.turn += 1;
        }
    }

    /// Adds a streamed record's text to the run it continues.
    fn stream(&mut self, at: &At, index: usize, text: &str) {
        if self.run.text.len() + text.len() > MAX_RUN_BYTES {
            self.flush_run();
        }
        if self.run.starts.is_empty() {
            self.run.kind_index = index;
            self.run.turn = self.turn;
        }
        self.run
            .starts
            .push((self.run.text.len(), at.sequence, at.timestamp_ms));
        self.run.text.push_str(text);
    }

    /// Searches one text of the record at `at`, handing over its first match.
    fn field(&mut self, at: &At, field: &'static str, text: &str) {
        if self.over {
            return;
        }
        if let Some(found) = self.regex.find(text) {
            let hit = self.hit(at, self.turn, field, text, found.range());
            self.hand(hit);
        }
    }

    /// Searches the streamed text gathered so far and starts a new one.
    fn flush_run(&mut self) {
        if self.run.starts.is_empty() {
            return;
        }
        let mut run = std::mem::take(&mut self.run);
        if !self.over {
            if let Some(found) = self.regex.find(&run.text) {
                // The record whose text holds the match's first byte.
                let piece = run
                    .starts
                    .partition_point(|(offset, _, _)| *offset <= found.start())
                    .saturating_sub(1);
                let (_, sequence, timestamp_ms) = run.starts[piece.min(run.starts.len() - 1)];
                let at = At {
                    sequence,
                    timestamp_ms,
                    kind: SessionEvent::KINDS[run.kind_index],
                    role: None,
                };
                let field = "text";
                let hit = self.hit(&at, run.turn, field, &run.text, found.range());
                self.hand(hit);
            }
        }
        // Keep the buffers' memory for the next run: a session streams thousands of them.
        run.text.clear();
        run.starts.clear();
        self.run = run;
    }

    fn hit(&self, at: &At, turn: u64, field: &'static str, text: &str, found: Range<usize>) -> Hit {
        let (snippet, matched) = snippet::clip(text, found);
        Hit {
            session_id: self.session_id.to_owned(),
            sequence: at.sequence,
            timestamp_ms: at.timestamp_ms,
            turn,
            kind: at.kind,
            field,
            role: at.role,
            snippet,
            matched,
            also_in_forks: self.copies.forks_holding(at.sequence),
        }
    }

    fn hand(&mut self, hit: Hit) {
        if self.copies.is_copied(hit.sequence) {
            self.outcome.folded += 1;
            return;
        }
        if self.outcome.skipped < self.search.offset {
            self.outcome.skipped += 1;
            return;
        }
        self.outcome.hits += 1;
        if (self.visit)(hit).is_break() {
            self.outcome.stopped = true;
            self.over = true;
        } else if self
            .search
            .limit
            .is_some_and(|limit| self.outcome.hits >= limit)
        {
            self.outcome.limited = true;
            self.over = true;
        }
    }
}

/// Where a text is: its record, and the record's kind and role.
#[derive(Debug, Clone, Copy)]
struct At {
    sequence: u64,
    timestamp_ms: u64,
    kind: &'static str,
    role: Option<&'static str>,
}

/// Which sessions among those searched are forks of which, by [`cuca_events::fork_parent`]:
/// a fork holds its parent's records through its fork point, relabelled.
#[derive(Debug, Default)]
struct Forks {
    /// For a fork whose parent is searched: the last sequence it copied.
    copied_through: std::collections::HashMap<String, u64>,
    /// For a session forked from (directly or through forks of forks): for each fork below
    /// it, the last of its sequences that fork holds a copy of.
    held_by: std::collections::HashMap<String, Vec<u64>>,
}

impl Forks {
    fn among(ids: &[String]) -> Forks {
        let searched: std::collections::HashSet<&str> = ids.iter().map(String::as_str).collect();
        let mut forks = Forks::default();
        for id in ids {
            // Up the chain: a fork of a fork holds the root's records through the lower of the
            // two fork points.
            let mut shared = u64::MAX;
            let mut current = id.as_str();
            while let Some((parent, point)) = cuca_events::fork_parent(current) {
                let Ok((_, sequence)) = cuca_events::parse_point_id(point) else {
                    break;
                };
                if !searched.contains(parent) {
                    break;
                }
                if current == id {
                    forks.copied_through.insert(id.clone(), sequence);
                }
                shared = shared.min(sequence);
                forks
                    .held_by
                    .entry(parent.to_owned())
                    .or_default()
                    .push(shared);
                current = parent;
            }
        }
        forks
    }

    /// What the search needs of them while it reads `id`.
    fn of(&self, id: &str) -> Copies {
        Copies {
            copied_through: self.copied_through.get(id).copied(),
            held_by: self.held_by.get(id).cloned().unwrap_or_default(),
        }
    }
}

/// One session's part in its fork relations.
#[derive(Debug, Default)]
struct Copies {
    /// When it is a fork of a searched session: the last sequence it copied from it.
    copied_through: Option<u64>,
    /// For each fork of it that is searched: the last of its sequences that fork holds.
    held_by: Vec<u64>,
}

impl Copies {
    /// Whether the record at `sequence` is a copy of the parent's, whose hit stands for it.
    fn is_copied(&self, sequence: u64) -> bool {
        self.copied_through.is_some_and(|last| sequence <= last)
    }

    /// How many forks hold a copy of the record at `sequence`.
    fn forks_holding(&self, sequence: u64) -> usize {
        self.held_by
            .iter()
            .filter(|last| sequence <= **last)
            .count()
    }
}

/// A search's pattern for texts outside sessions ([`Search::matcher`]).
#[derive(Debug, Clone)]
pub struct Matcher {
    regex: Regex,
}

impl Matcher {
    /// The first match in `text`: its snippet (cut as a hit's is) and the match's byte range
    /// in the snippet; `None` when the pattern does not match.
    pub fn find(&self, text: &str) -> Option<(String, Range<usize>)> {
        self.regex
            .find(text)
            .map(|found| snippet::clip(text, found.range()))
    }
}
