//! Session events and records: the append-only vocabulary of the session log, owned
//! ([`SessionRecord`]) and as a replay hands it over ([`ReplayedRecord`]).

use serde::{Deserialize, Serialize};

use crate::message::{Message, TokenDetail};

/// One thing that happened in a session.
///
/// # Format stability
///
/// The postcard encoding of [`SessionRecord`] is the `.cslog` payload, and postcard encodes
/// a variant by its index. **Variant order is part of the on-disk format**: new variants go at
/// the end only, and a change to an existing variant's fields bumps the `.cslog` version byte.
/// The indices are: `SystemPrompt` 0, `Message` 1, `Reasoning` 2, `Output` 3, `ToolCall` 4,
/// `ToolResult` 5, `Latency` 6, `TokenUsage` 7, `ModelSwap` 8, `Fork` 9, `CallRequest` 10,
/// `CallFinish` 11, `CallIncomplete` 12, `CallWire` 13, `RequestDigest` 14, `TokenDetail` 15,
/// `Scrubbed` 16, `WorkspaceSnapshot` 17, `ShellCommand` 18.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum SessionEvent {
    /// A system message, recorded on every request that carries it.
    SystemPrompt {
        /// The system text.
        text: String,
    },
    /// A user or assistant message, recorded the first time its position appears.
    Message(Message),
    /// A streamed [`crate::MessageContentBlock::Thinking`] block.
    Reasoning {
        /// The reasoning text, verbatim.
        text: String,
    },
    /// A streamed [`crate::MessageContentBlock::Text`] block.
    Output {
        /// The text, verbatim.
        text: String,
    },
    /// A streamed [`crate::MessageContentBlock::ToolCall`] block.
    ToolCall {
        /// The provider's call id.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments as the model wrote them.
        arguments: String,
    },
    /// A tool's result, with the process detail a content block has no field for.
    ToolResult {
        /// The id of the call this answers.
        tool_call_id: String,
        /// The output the model is shown.
        content: String,
        /// Whether the tool reported failure.
        is_error: bool,
        /// The process's standard output, where the recorder had it.
        stdout: Option<String>,
        /// The process's standard error, where the recorder had it.
        stderr: Option<String>,
        /// The process's exit code, where the recorder had it.
        exit_code: Option<i32>,
    },
    /// How long a call took; always followed by [`SessionEvent::TokenUsage`].
    Latency {
        /// Wall time of the call in milliseconds.
        duration_ms: u64,
    },
    /// What a call cost in tokens; closes a turn.
    TokenUsage {
        /// Tokens the prompt took.
        prompt_tokens: u64,
        /// Tokens the answer took.
        completion_tokens: u64,
    },
    /// The session switched models.
    ModelSwap {
        /// The model before.
        from: String,
        /// The model after.
        to: String,
        /// Why, in words.
        reason: String,
    },
    /// The audit record a backend appends to a session it forked.
    Fork {
        /// The point the branch was taken at (`"{session_id}:{sequence}"`).
        from_point: String,
        /// The new session's id.
        to_session: String,
    },
    /// What one model call was sent besides its messages: written by a session log that was
    /// asked to record call metadata, after the request's messages and before its blocks.
    ///
    /// Added after v1's first ten variants, at the end, so older records keep their indices.
    /// The parameters and tools are JSON text rather than structured values because the
    /// `.cslog` payload is postcard, which cannot carry a self-describing JSON value, and
    /// because sampling parameters are floats, which this `Eq + Hash` type cannot hold.
    CallRequest {
        /// The model asked for (empty: the server's choice).
        model: String,
        /// The sampling parameters that travelled, as one JSON object
        /// (`{"max_tokens":12,"temperature":0.0}`); `{}` when none did.
        parameters: String,
        /// The tools offered, as a JSON array of `{name, description, parameters}`
        /// objects; `[]` when none were.
        tools: String,
        /// How many messages the request carried, every role counted: the conversation
        /// position the call was made at, which the `Message` records alone cannot give
        /// (they are written once per position, so a call that repeats an earlier prefix
        /// adds none).
        messages: u64,
    },
    /// How one model call ended: written by a session log that was asked to record call
    /// metadata, just before the call's Latency-then-TokenUsage pair.
    CallFinish {
        /// Why generation stopped (`"stop"`, `"length"`, `"tool_calls"`); `None` when the
        /// server never said (a stream cut short).
        finish_reason: Option<String>,
        /// The model that answered, in the server's word.
        model: String,
    },
    /// The records of the call before it do not hold its whole answer, and why: the caller
    /// hung up or the upstream broke mid-answer, the recorder stopped (a shutdown, or a turn
    /// found open when its session was next used after a crash), a record could not be
    /// written, or part of the answer could not be decoded. Written by a recorder that knows
    /// (the proxy) just before the call's closing records; a reader shows the turn as
    /// incomplete instead of as a short answer.
    ///
    /// Added at the end, after `CallFinish`, so older records keep their indices.
    CallIncomplete {
        /// What is missing and why, in words (`"the caller hung up after 12 events"`).
        reason: String,
    },
    /// What a call's wire format said that the records above have no field for, and an exact
    /// replay in that format needs: Anthropic's thinking signatures, message id and cache-usage
    /// fields, Responses' item ids, block types cuca does not know (verbatim). Written by a
    /// recorder that knows the format (the proxy), after the call's blocks and before its
    /// `CallFinish`; a reader that does not know the format ignores it. `docs/wire-formats.md`
    /// lists each format's fields.
    ///
    /// Added at the end, after `CallIncomplete`, so older records keep their indices.
    CallWire {
        /// The wire format (`"messages"`, `"responses"`), as `cuca_wire::Format::name`.
        format: String,
        /// The format's extra fields, as the JSON text of one object.
        wire: String,
    },
    /// A fingerprint of one model call's conversation: the SHA-256 of its user, assistant and
    /// tool messages, all of them, in order. Written by a session log that was asked to record
    /// call metadata, right after the call's `CallRequest`.
    ///
    /// The `Message` records are written once per position, so two calls that carried
    /// different messages at positions already recorded leave the same records; their digests
    /// differ. That is how a reader tells a client's retry of one request (the same digest:
    /// replay serves the recorded answers in order) from two different requests that the
    /// session cannot tell apart (`cuca verify --replayable`).
    ///
    /// Added at the end, after `CallWire`, so older records keep their indices.
    RequestDigest {
        /// The digest as 64 lower-case hex digits.
        sha256: String,
    },
    /// Every token count a call's answer reported, kind by kind, exactly as the provider sent
    /// it: what [`SessionEvent::TokenUsage`]'s two folded numbers cannot say (cache reads,
    /// 5-minute and 1-hour cache writes, reasoning), which a price needs. Written by the
    /// recorder that writes the call's `TokenUsage`, just before its `Latency`-then-`TokenUsage`
    /// pair, when the answer carried a usage report.
    ///
    /// Added at the end, after `RequestDigest`, so older records keep their indices; a session
    /// recorded before it has only `TokenUsage`, and is priced from prompt and completion.
    TokenDetail(TokenDetail),
    /// The session's records were rewritten under redaction rules after they were stored
    /// (`cuca scrub`): which rules replaced how many values, never the values. Appended at
    /// the session's tail by the rewrite it describes; the records before it hold the
    /// markers (`[REDACTED:rule]`) in place of what the rules found.
    ///
    /// Added at the end, after `TokenDetail`, so older records keep their indices.
    Scrubbed {
        /// Each rule that replaced something, and how many values, in rule-name order.
        replaced: Vec<(String, u64)>,
    },
    /// The agent's workspace as it stood when a model call was made: written by a recorder
    /// that watches a workspace (`cuca run`, `cuca proxy --workspace`) as the first of the
    /// call's request records, so the state the request reflects comes before it.
    ///
    /// The files themselves are not in the session: `snapshot` names a tree in the
    /// workspace object store kept beside the session store, which `cuca checkout` restores.
    /// A replay of the model's half skips this record; it belongs to no turn's answer.
    ///
    /// Added at the end, after `RequestDigest`, so older records keep their indices.
    WorkspaceSnapshot {
        /// The tree's content address: `sha256:` and 64 lower-case hex digits.
        snapshot: String,
        /// What changed since the previous snapshot the recorder took, sorted by path; none
        /// for a run's first, which is its base (`docs/cslog-format.md`). The record does not
        /// name the tree it was counted against: a session's first snapshot may have been
        /// counted against another session's (one proxy recording several conversations).
        changes: Vec<FileChange>,
        /// Files left out of the snapshot, each with the reason (`"big.bin: 52428800 bytes,
        /// over the 10485760-byte cap"`).
        skipped: Vec<String>,
    },
    /// One command the agent ran through a shell, as the shell shim `cuca run` puts on
    /// `PATH` saw it, written when the command ended.
    ///
    /// Added at the end, after `WorkspaceSnapshot`, so older records keep their indices.
    ShellCommand {
        /// The command line as the shell was given it (`bash -c`'s argument).
        command: String,
        /// Where it ran: relative to the workspace when inside it (`"."`, `"src"`), else the
        /// absolute path.
        cwd: String,
        /// Who ran it, where known (`"bash -c"`, `"sh -c"`, `"bash script.sh"`).
        origin: String,
        /// The exit code; 128+N when signal N ended the shell; `None` when it never ran.
        exit_status: Option<i32>,
        /// Wall time in milliseconds.
        duration_ms: u64,
        /// What it wrote on standard output.
        stdout: CapturedStream,
        /// What it wrote on standard error.
        stderr: CapturedStream,
    },
}

/// One file's change between two workspace snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FileChange {
    /// The path relative to the workspace, `/`-separated.
    pub path: String,
    /// What happened to it.
    pub kind: FileChangeKind,
    /// Lines added (0 for a binary file).
    pub added_lines: u64,
    /// Lines removed (0 for a binary file).
    pub removed_lines: u64,
    /// Whether either side is binary (a NUL in its first 8 KiB, or not UTF-8): no line
    /// counts then.
    pub binary: bool,
}

/// What happened to a file between two snapshots. Postcard encodes it by index: new kinds
/// go at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FileChangeKind {
    /// New since the previous snapshot.
    Added,
    /// Its content or mode changed.
    Modified,
    /// Gone since the previous snapshot.
    Deleted,
}

impl FileChangeKind {
    /// The kind in a word (`"added"`, `"modified"`, `"deleted"`).
    pub fn word(self) -> &'static str {
        match self {
            FileChangeKind::Added => "added",
            FileChangeKind::Modified => "modified",
            FileChangeKind::Deleted => "deleted",
        }
    }
}

/// A process's output stream as recorded: its address and length whole, and its tail.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CapturedStream {
    /// The whole stream's content address (`sha256:` and 64 hex digits), under which the
    /// workspace object store keeps it (up to its own cap; see `docs/workspace.md`).
    pub sha256: String,
    /// How many bytes the whole stream had.
    pub bytes: u64,
    /// The stream's last bytes as text (invalid UTF-8 replaced), at most the recorder's
    /// inline cap: a shell tool shows a model the end of a command's output, and the end is
    /// where an error says what went wrong.
    pub tail: String,
    /// How many bytes of the stream `tail` leaves out (`bytes` less the tail's bytes).
    pub cut: u64,
}

impl SessionEvent {
    /// Every variant name, in format (index) order.
    pub const KINDS: [&'static str; 19] = [
        "SystemPrompt",
        "Message",
        "Reasoning",
        "Output",
        "ToolCall",
        "ToolResult",
        "Latency",
        "TokenUsage",
        "ModelSwap",
        "Fork",
        "CallRequest",
        "CallFinish",
        "CallIncomplete",
        "CallWire",
        "RequestDigest",
        "TokenDetail",
        "Scrubbed",
        "WorkspaceSnapshot",
        "ShellCommand",
    ];

    /// The variant's name, as the seed's reports print it (`"Reasoning"`, `"Fork"`, …).
    pub fn kind(&self) -> &'static str {
        Self::KINDS[self.kind_index()]
    }

    /// The variant's index in [`SessionEvent::KINDS`] (its postcard discriminant).
    pub fn kind_index(&self) -> usize {
        match self {
            SessionEvent::SystemPrompt { .. } => 0,
            SessionEvent::Message(_) => 1,
            SessionEvent::Reasoning { .. } => 2,
            SessionEvent::Output { .. } => 3,
            SessionEvent::ToolCall { .. } => 4,
            SessionEvent::ToolResult { .. } => 5,
            SessionEvent::Latency { .. } => 6,
            SessionEvent::TokenUsage { .. } => 7,
            SessionEvent::ModelSwap { .. } => 8,
            SessionEvent::Fork { .. } => 9,
            SessionEvent::CallRequest { .. } => 10,
            SessionEvent::CallFinish { .. } => 11,
            SessionEvent::CallIncomplete { .. } => 12,
            SessionEvent::CallWire { .. } => 13,
            SessionEvent::RequestDigest { .. } => 14,
            SessionEvent::TokenDetail(_) => 15,
            SessionEvent::Scrubbed { .. } => 16,
            SessionEvent::WorkspaceSnapshot { .. } => 17,
            SessionEvent::ShellCommand { .. } => 18,
        }
    }
}

/// One stored event: the unit every backend appends and replays.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SessionRecord {
    /// The session the record belongs to.
    pub session_id: String,
    /// The 0-based position in the session, assigned by the session log plugin.
    pub sequence: u64,
    /// Milliseconds since the Unix epoch when the record was made.
    pub timestamp_ms: u64,
    /// What happened.
    pub event: SessionEvent,
}

impl SessionRecord {
    /// The record's point id, `"{session_id}:{sequence}"`: the string `fork_session` takes.
    ///
    /// ```
    /// use cuca_events::{SessionEvent, SessionRecord};
    /// let record = SessionRecord {
    ///     session_id: "demo".into(),
    ///     sequence: 1,
    ///     timestamp_ms: 0,
    ///     event: SessionEvent::Output { text: "noted".into() },
    /// };
    /// assert_eq!(record.point_id(), "demo:1");
    /// ```
    pub fn point_id(&self) -> String {
        format!("{}:{}", self.session_id, self.sequence)
    }
}

/// A [`SessionRecord`] as [`crate::SessionBackend::replay_each`] hands it to its visitor: the
/// session id is borrowed from the backend, the event is owned.
///
/// It has the same wire layout as [`SessionRecord`] (the same fields in the same order), so
/// the postcard bytes of a stored record decode as either type. Decoded from a buffer, it
/// borrows the session id from the buffer (`#[serde(borrow)]`) and allocates only the
/// event's strings: a replay reads one session, so the id is the same in every record, and a
/// consumer that keeps the events (replay's segmentation) would drop an owned copy anyway.
///
/// ```
/// use cuca_events::{ReplayedRecord, SessionEvent, SessionRecord};
/// let record = SessionRecord {
///     session_id: "demo".into(),
///     sequence: 3,
///     timestamp_ms: 7,
///     event: SessionEvent::Output { text: "noted".into() },
/// };
/// let bytes = postcard::to_allocvec(&record).unwrap();
/// let replayed: ReplayedRecord<'_> = postcard::from_bytes(&bytes).unwrap();
/// assert_eq!(replayed.session_id, "demo");
/// assert_eq!(replayed.point_id(), "demo:3");
/// assert_eq!(replayed.into_owned(), record);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ReplayedRecord<'a> {
    /// The session the record belongs to, borrowed from the backend's buffer or record.
    #[serde(borrow)]
    pub session_id: &'a str,
    /// The 0-based position in the session, assigned by the session log plugin.
    pub sequence: u64,
    /// Milliseconds since the Unix epoch when the record was made.
    pub timestamp_ms: u64,
    /// What happened, owned: a visitor may keep it.
    pub event: SessionEvent,
}

impl ReplayedRecord<'_> {
    /// The record's point id, `"{session_id}:{sequence}"`, as [`SessionRecord::point_id`].
    pub fn point_id(&self) -> String {
        format!("{}:{}", self.session_id, self.sequence)
    }

    /// The owned record, copying the session id.
    pub fn into_owned(self) -> SessionRecord {
        SessionRecord {
            session_id: self.session_id.to_owned(),
            sequence: self.sequence,
            timestamp_ms: self.timestamp_ms,
            event: self.event,
        }
    }
}
