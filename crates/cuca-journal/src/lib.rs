//! The capture journal of a multi-agent run and its host assembly into replay.json.gz
//!
//! # Capture
//!
//! A [`Recorder`] appends one JSON object per line to `<workspace>/.cuca/replay.ndjson`
//! ([`mod@format`], `docs/journal-format.md`): a header, seed lines, agent rows, one line per
//! newly interned pool entry (messages, toolsets, texts, each under a 128-bit SHA-256 content
//! address), one line per input entry (`model_io`, `model_error`, `tool_result`,
//! `prompt_frame`, `shell`, `git`, `cancel_probe`, `clock`) with a global `seq`, and a
//! terminating line. Lines are written by a dedicated writer thread through a bounded queue;
//! the recording side never waits for the disk. [`JournalPlugin`] records every model call of
//! a client automatically; [`exclude_from_git`] keeps the journal out of every commit.
//!
//! ```
//! use cuca_events::{Message, UnifiedRequest, UnifiedResponse};
//! use cuca_journal::format::{JournalLine, RequestRole};
//! use cuca_journal::{Recorder, RecorderConfig};
//! use std::time::Duration;
//!
//! let workspace = tempfile::tempdir().unwrap();
//! let recorder = Recorder::start(RecorderConfig::new(workspace.path(), "demo").unwrap()).unwrap();
//! let request = UnifiedRequest::new(vec![Message::user("hello")]);
//! let response = UnifiedResponse { content: vec![cuca_events::MessageContentBlock::text("hi")], ..Default::default() };
//! // The same request twice: its message is pooled once.
//! recorder.model_io("root", &request, RequestRole::AgentTurn, &response, Duration::from_millis(5));
//! recorder.model_io("root", &request, RequestRole::AgentTurn, &response, Duration::from_millis(7));
//! let status = recorder.finish();
//! assert_eq!((status.entries, status.messages, status.stopped), (2, 2, None));
//!
//! let text = std::fs::read_to_string(recorder.path()).unwrap();
//! let lines: Vec<JournalLine> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
//! assert!(matches!(lines.first(), Some(JournalLine::Header(h)) if h.format_version == 1));
//! assert!(matches!(lines.last(), Some(JournalLine::End(e)) if e.entries == 2));
//! ```
//!
//! What capture does not do: it never returns an error to, blocks on the disk in, or panics
//! in the run it records — a ceiling, a full queue or a failed writer stops capture for good
//! and says so in the terminating line and in [`Recorder::status`]. It never holds a message
//! body after queueing it, never assembles anything (that is the host's job, below), and does
//! not record filesystem reads of prompts, memories or skills (they reach the journal as the
//! messages and tool outcomes they become). Serving assembled records over HTTP is `cuca-serve`'s
//! job, so a program that only captures compiles no web server.
//!
#![forbid(unsafe_code)]

// Capture side.
pub mod clip;
mod error;
pub mod format;
mod git;
mod plugin;
pub mod pool;
mod recorder;

pub use error::JournalError;
pub use git::{exclude_dir_from_git, exclude_from_git};
pub use plugin::{classify, role_of, JournalPlugin, COMPACTION_TAG, DEFAULT_AGENT};
pub use recorder::{
    FrameEntry, GitRun, ModelFailure, Recorder, RecorderConfig, RecorderStatus, ShellRun, SinkHook,
    ToolOutcome,
};

// Host side.
pub mod assemble;
pub mod record;
pub mod salvage;

pub use assemble::{assemble, AssembleError, AssembleReport, Outcome};
pub use record::{read_record, RecordSummary, TimelineEntry};
pub use salvage::salvage;
