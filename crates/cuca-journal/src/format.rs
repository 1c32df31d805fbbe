//! Format 1 of the capture journal: the serde type of every line of `replay.ndjson`.
//!
//! One JSON object per line, each carrying a `"line"` tag that names its kind. The byte-level
//! description, with an example of every line, is `docs/journal-format.md`; this module is the
//! one place the shapes are defined, shared by the recorder (which writes them) and host
//! assembly (which reads them).
//!
//! Field names are camelCase, as the seed names them (`formatVersion`, `routingKey`); enum
//! values are snake_case. Pool references are plain indices into the pool named by the field.

use std::fmt;

use cuca_events::{Role, ToolChoice, ToolDefinition};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The one journal format this build writes and reads.
///
/// A reader refuses every other value: a journal stating another format may carry line kinds
/// this build has never heard of, and reading it as format 1 would hand a reader entries it
/// cannot mean.
pub const FORMAT_VERSION: u32 = 1;

/// The journal's file name inside the journal directory.
pub const JOURNAL_FILE_NAME: &str = "replay.ndjson";

/// The journal directory, relative to the workspace, when the config names no other.
///
/// A dot directory at the workspace root so one anchored exclude pattern (`/.cuca/`) keeps it
/// out of git.
pub const DEFAULT_JOURNAL_DIR: &str = ".cuca";

/// The file an assembled record is stored under, at the root of the run directory (and served
/// from by `cuca-serve`).
pub const RECORD_FILE_NAME: &str = "replay.json.gz";

/// A 128-bit content address: the first 16 bytes of a SHA-256, written as 32 lowercase hex
/// digits.
///
/// 128 bits keeps an accidental collision out of reach for any run's pool (the birthday bound is
/// 2^64 entries) at half the width of the full digest on every pool line.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentId(pub [u8; 16]);

impl ContentId {
    /// The 32-digit lowercase hex form written to the journal.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Parses the 32-digit hex form; `None` when it is not exactly 16 bytes of hex.
    pub fn from_hex(text: &str) -> Option<Self> {
        let mut out = [0u8; 16];
        hex::decode_to_slice(text, &mut out).ok()?;
        Some(ContentId(out))
    }
}

impl fmt::Debug for ContentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContentId({})", self.to_hex())
    }
}

impl fmt::Display for ContentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl Serialize for ContentId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for ContentId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        ContentId::from_hex(&text).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "content id {text:?} is not 32 hex digits (16 bytes)"
            ))
        })
    }
}

/// One line of the journal.
///
/// The `"line"` field names the kind. Lines appear in this order: one [`Header`] first; then any
/// mix of [`Seed`], [`AgentRow`], pool lines ([`MessageLine`], [`ToolsetLine`], [`TextLine`],
/// each possibly followed by a [`ClipRow`]) and [`Entry`] lines; and, on the normal exit path,
/// one [`End`] last. A pool line always precedes every line that references it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "line", rename_all = "snake_case")]
pub enum JournalLine {
    /// The first line: format version, session identity, recording build.
    Header(Header),
    /// The session's seed; may appear again, and the last one wins.
    Seed(Seed),
    /// One agent's provenance row; written at launch and again at the end, upserted by id.
    Agent(AgentRow),
    /// A newly interned message-pool entry.
    Message(MessageLine),
    /// A newly interned toolset-pool entry.
    Toolset(ToolsetLine),
    /// A newly interned text-pool entry.
    Text(TextLine),
    /// A clip-table row for the pool entry written just before it.
    Clip(ClipRow),
    /// One input the session consumed.
    Entry(Entry),
    /// The terminating line, written on the normal exit path.
    End(End),
}

/// The header: the first line of every journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    /// The journal format; [`FORMAT_VERSION`] for every journal this build writes. Required: a
    /// header without it does not parse.
    pub format_version: u32,
    /// The session the journal belongs to.
    pub session_id: String,
    /// The run's routing key, kept beside the session id as `routingKey` in the record.
    #[serde(default)]
    pub routing_key: Option<String>,
    /// The run's capability set, as the run describes it (opaque to the journal; `{}` when the
    /// run names none). Agent ids join an agent row to it.
    #[serde(default)]
    pub capabilities: serde_json::Value,
    /// The build that wrote the journal.
    pub recorder: RecorderBuild,
}

/// The recording build: the seed's `recorder.ggVersion` and `recorder.commit`.
///
/// Written as `ggVersion`, the seed's name, which DESIGN keeps; `version`, which earlier
/// builds wrote, is still read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecorderBuild {
    /// The recording crate's version (`ggVersion`). Explanatory only: a reader must not branch
    /// on it.
    #[serde(rename = "ggVersion", alias = "version")]
    pub version: String,
    /// The exact commit of the recording build, when known. Only for verifying a resolved
    /// binary.
    #[serde(default)]
    pub commit: Option<String>,
}

/// The identity the session started from. Written at least once; assembly keeps the last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Seed {
    /// The baseline commit observed in the workspace, when there is one.
    #[serde(default)]
    pub baseline_commit: Option<String>,
    /// The build prompt the root agent was given.
    pub build_prompt: String,
    /// One entry per bound model slot.
    #[serde(default)]
    pub slots: Vec<SlotSeed>,
}

/// One bound model slot of the seed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlotSeed {
    /// The slot's name (`"main"`, `"compaction"`, …).
    pub slot: String,
    /// The model bound to it.
    pub model: String,
    /// The context window resolved for it, in tokens.
    pub context_window: u64,
    /// The slot's final resolved modalities (a refused image denies `image` for the rest of the
    /// run, which is why the seed is rewritten at the end).
    pub modalities: Vec<Modality>,
}

/// An input modality a model slot accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Modality {
    /// Text.
    Text,
    /// Inline images.
    Image,
}

/// One agent's provenance row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentRow {
    /// The agent's id (the id entries carry in their `agent` field).
    pub id: String,
    /// The id of the profile it ran under.
    pub profile_id: String,
    /// The name that profile carried at launch.
    pub profile_name: String,
    /// Where the agent came from, keyed by the run's own structure.
    pub origin: AgentOrigin,
    /// The status: `started` on the opening row, the loop's end status on the terminal row.
    pub status: AgentStatus,
    /// Which ceiling stopped it (`"max_turns"`, `"deadline"`, …), when one did.
    #[serde(default)]
    pub ceiling: Option<String>,
}

/// How an agent came into existence. Every variant is keyed by the run's structure, never by a
/// live counter, so the same agent has the same origin across runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AgentOrigin {
    /// The root agent.
    Root,
    /// Spawned by `parent` at `position` in that parent's turn loop.
    Spawn {
        /// The parent agent's id.
        parent: String,
        /// The position in the parent's turn loop.
        position: u64,
    },
    /// Succeeded `predecessor` at `position`.
    Succession {
        /// The predecessor agent's id.
        predecessor: String,
        /// The position in the succession chain.
        position: u64,
    },
    /// The `dispatch`-th dispatch of `issue` (every dispatch counts, not every retry).
    IssueAttempt {
        /// The issue.
        issue: String,
        /// Which dispatch of the issue, from 1.
        dispatch: u64,
    },
    /// A reviewer of `issue` in `round`, at `position` within the round.
    Reviewer {
        /// The issue.
        issue: String,
        /// The review round, from 1.
        round: u64,
        /// The position within the round, from 0.
        position: u64,
    },
    /// The `merge`-th merge of `issue`.
    Merge {
        /// The issue.
        issue: String,
        /// Which merge of the issue, from 1.
        merge: u64,
    },
}

/// The status an agent row records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    /// The opening row: the agent exists and its loop has not ended.
    Started,
    /// The loop ended with the agent's answer.
    Completed,
    /// The loop ended in an error.
    Failed,
    /// The loop was cancelled.
    Cancelled,
    /// A ceiling stopped the loop; [`AgentRow::ceiling`] names it.
    Stopped,
}

/// Which pool a line or a clip row is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pool {
    /// The message pool.
    Message,
    /// The toolset pool.
    Toolset,
    /// The text pool.
    Text,
}

/// A newly interned message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageLine {
    /// The index it occupies: always the next one (the gap detector).
    pub index: u64,
    /// The content address of the whole message, exact image payloads included.
    pub id: ContentId,
    /// The stored body: images as descriptors, tool payloads as text-pool references.
    pub body: StoredMessage,
}

/// A message as the journal stores it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredMessage {
    /// Who wrote it.
    pub role: Role,
    /// Its blocks, in order.
    pub content: Vec<StoredBlock>,
}

/// One block of a stored message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum StoredBlock {
    /// Visible text, verbatim.
    Text {
        /// The text.
        text: String,
    },
    /// Reasoning text, verbatim.
    Thinking {
        /// The reasoning.
        thinking: String,
    },
    /// A tool call; the arguments are a tool payload, so they live in the text pool.
    ToolCall {
        /// The provider's call id.
        id: String,
        /// The tool's name.
        name: String,
        /// Text-pool index of the arguments.
        arguments: u64,
    },
    /// A tool's result as quoted into the window; the output lives in the text pool, so the
    /// `tool_result` entry and this block share one text entry.
    ToolResult {
        /// The call this answers.
        tool_call_id: String,
        /// Text-pool index of the output.
        content: u64,
        /// Whether the tool reported failure.
        is_error: bool,
    },
    /// An inline image, reduced to its descriptor.
    Image {
        /// The media type, e.g. `image/png`.
        media_type: String,
        /// The decoded size in bytes.
        size: u64,
    },
}

/// A newly interned offered toolset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsetLine {
    /// The index it occupies.
    pub index: u64,
    /// The content address of the tool array.
    pub id: ContentId,
    /// The tools, in the order offered.
    pub tools: Vec<ToolDefinition>,
}

/// A newly interned text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextLine {
    /// The index it occupies.
    pub index: u64,
    /// The content address of the whole payload (for a clipped entry, of the original, which
    /// is the interning key).
    pub id: ContentId,
    /// The text; for a clipped entry, the kept tail.
    pub text: String,
}

/// A clip-table row: the pool entry at `index` holds only the tail of a longer payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClipRow {
    /// The pool the clipped entry is in (only `text` in format 1).
    pub pool: Pool,
    /// The clipped entry's index.
    pub index: u64,
    /// How many bytes the whole payload had.
    pub original_bytes: u64,
    /// The whole payload's content address.
    pub original_id: ContentId,
}

/// One input the session consumed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// The global sequence number, minted across all agents from one counter, from 0.
    pub seq: u64,
    /// The id of the agent that consumed the input.
    pub agent: String,
    /// What was consumed; its `"kind"` field is flattened into the entry line.
    #[serde(flatten)]
    pub input: Input,
}

/// The eight input kinds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Input {
    /// A model call that answered.
    ModelIo(ModelIo),
    /// A model call that failed.
    ModelError(ModelError),
    /// A tool call and the exact outcome the dispatch returned.
    ToolResult(ToolResult),
    /// One agent's context window as it stood for the turn just recorded.
    PromptFrame(PromptFrame),
    /// One shell command the run executed.
    Shell(Shell),
    /// One git subprocess the run's own orchestration executed.
    Git(Git),
    /// One read of the cancel file.
    CancelProbe(CancelProbe),
    /// One read of the wall-clock deadline.
    Clock(Clock),
}

impl Input {
    /// The `"kind"` value this input is written with.
    pub fn kind(&self) -> &'static str {
        match self {
            Input::ModelIo(_) => "model_io",
            Input::ModelError(_) => "model_error",
            Input::ToolResult(_) => "tool_result",
            Input::PromptFrame(_) => "prompt_frame",
            Input::Shell(_) => "shell",
            Input::Git(_) => "git",
            Input::CancelProbe(_) => "cancel_probe",
            Input::Clock(_) => "clock",
        }
    }
}

/// A request with its bodies replaced by pool indices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PooledRequest {
    /// The model asked for (empty: the client's default).
    pub model: String,
    /// Message-pool indices of the conversation, in order.
    pub messages: Vec<u64>,
    /// Toolset-pool index of the offered tools; absent when none were offered.
    #[serde(default)]
    pub toolset: Option<u64>,
    /// The tool choice as sent, when one was.
    #[serde(default)]
    pub tool_choice: Option<ToolChoice>,
    /// The answer ceiling in tokens, when one travelled.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// The sampling temperature, when one travelled.
    #[serde(default)]
    pub temperature: Option<f32>,
    /// The reasoning effort word, when one travelled.
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    /// Whose loop made the call.
    pub role: RequestRole,
    /// Whether a tool call was required.
    pub shape: RequestShape,
}

/// The role discriminator of a recorded request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestRole {
    /// The agent's own turn loop.
    AgentTurn,
    /// The compaction summarizer, which rewrites the whole window.
    CompactionSummarizer,
}

/// The shape discriminator of a recorded request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestShape {
    /// A tool call was forced (`required` or a named tool).
    ToolRequired,
    /// The model chose freely.
    Free,
}

/// A response with its answer pooled as an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PooledResponse {
    /// The model that answered.
    pub model: String,
    /// The provider that served it.
    pub provider: String,
    /// Message-pool index of the answer, as an assistant message of the response's blocks
    /// (the same entry the next request's copy of it references).
    pub message: u64,
    /// Why generation stopped, where reported.
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Reasoning tokens, where reported.
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
    /// The provider's reported cost, where reported.
    #[serde(default)]
    pub cost: Option<f64>,
    /// Prompt tokens served from cache, where reported.
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

/// `model_io`: the pooled request, the response, and the call's latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelIo {
    /// The request.
    pub request: PooledRequest,
    /// The response.
    pub response: PooledResponse,
    /// Wall time from sending to the end of the stream, in milliseconds.
    pub latency_ms: u64,
}

/// `model_error`: the pooled request and why the call failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelError {
    /// The request.
    pub request: PooledRequest,
    /// The failure class the loop branches on.
    pub class: ErrorClass,
    /// The HTTP status, for a status failure.
    #[serde(default)]
    pub status: Option<u16>,
    /// The error's message, clipped to 4 KiB (tail kept).
    #[serde(default)]
    pub detail: Option<String>,
}

/// Why a model call failed, by the class the loop branches on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// No credential for the provider.
    MissingCredential,
    /// The provider answered a status the client does not retry.
    FatalStatus,
    /// The client retried over its whole schedule; ends the run on first occurrence.
    RetryExhaustion,
    /// The model refused an image; the loop strips images and re-runs the turn.
    UnsupportedImage,
    /// The response could not be parsed.
    UnparseableResponse,
    /// Loop detection abandoned the response on every attempt.
    LoopAbandoned,
}

/// `tool_result`: the call and the exact outcome the dispatch returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    /// The provider's call id.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// Text-pool index of the arguments.
    pub arguments: u64,
    /// Text-pool index of the output.
    pub output: u64,
    /// Whether the tool reported failure.
    pub is_error: bool,
}

/// `prompt_frame`: one agent's window for the turn just recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptFrame {
    /// The turn the frame was built for.
    pub turn: u64,
    /// The window's items, in prompt order.
    pub items: Vec<FrameItem>,
}

/// One item of a prompt frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FrameItem {
    /// Message-pool index of the item.
    pub message: u64,
    /// Whether it survives compaction verbatim.
    pub retention: Retention,
    /// The offset/limit window of a paged file view, when the item is one.
    #[serde(default)]
    pub region: Option<Region>,
    /// The turn the item was pushed on.
    pub turn: u64,
    /// Which of the window model's three slots it came from.
    pub slot: Slot,
}

/// Whether a frame item survives compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Retention {
    /// Kept verbatim through compaction.
    Verbatim,
    /// Summarised away by compaction.
    Compactable,
}

/// The region a paged file view covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Region {
    /// The first line (or byte) shown.
    pub offset: u64,
    /// How many were shown.
    pub limit: u64,
}

/// The window model's three slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Slot {
    /// The system prompt.
    System,
    /// Pinned items rebuilt every turn (the run-global state, the context-usage signal).
    Pinned,
    /// The conversation history.
    Conversation,
}

/// `shell`: one shell command the run executed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Shell {
    /// Who asked for it.
    pub origin: ShellOrigin,
    /// The command line.
    pub command: String,
    /// Where it ran: relative to the workspace (`.` for the root) wherever possible, else
    /// absolute.
    pub cwd: String,
    /// The exit status; absent when a signal ended the process.
    #[serde(default)]
    pub exit_status: Option<i32>,
    /// Text-pool index of stdout (clipped at 32 KiB, tail kept).
    pub stdout: u64,
    /// Text-pool index of stderr (clipped at 32 KiB, tail kept).
    pub stderr: u64,
}

/// Who asked for a shell command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShellOrigin {
    /// The model, through the shell tool.
    ShellTool,
    /// A responses-as-code program.
    Program,
    /// A hook the run ran without the model asking.
    Hook,
}

/// `git`: one git subprocess of the run's own orchestration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Git {
    /// The arguments after `git`.
    pub args: Vec<String>,
    /// Where it ran, as for [`Shell::cwd`].
    pub cwd: String,
    /// The exit status; absent when a signal ended the process.
    #[serde(default)]
    pub exit_status: Option<i32>,
    /// Text-pool index of stdout (clipped at 32 KiB, tail kept).
    pub stdout: u64,
    /// Text-pool index of stderr (clipped at 32 KiB, tail kept).
    pub stderr: u64,
}

/// `cancel_probe`: one read of the cancel file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelProbe {
    /// Whether the cancel file existed.
    pub present: bool,
    /// What it said, when it existed and was readable (clipped to 4 KiB, tail kept).
    #[serde(default)]
    pub content: Option<String>,
}

/// `clock`: one read of the wall-clock deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Clock {
    /// Milliseconds since the run started.
    pub elapsed_ms: u64,
    /// Milliseconds left before the deadline; absent when the run has none.
    #[serde(default)]
    pub remaining_ms: Option<u64>,
}

/// The terminating line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct End {
    /// How many entry lines the journal holds.
    pub entries: u64,
    /// Why capture stopped early; absent when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
}

/// Why capture stopped early. Every stop is permanent for the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The next batch would have crossed the journal byte ceiling.
    ByteCeiling,
    /// The writer could not keep up: the bounded queue was full.
    QueueFull,
    /// The writer failed (an I/O error, or it panicked) or could not be started.
    WriteFailed,
}

impl StopReason {
    /// The snake_case word the journal writes.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::ByteCeiling => "byte_ceiling",
            StopReason::QueueFull => "queue_full",
            StopReason::WriteFailed => "write_failed",
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests;
