//! Reads the transcripts agents already keep (Claude Code's JSONL sessions, Codex's rollout
//! files) into cuca session records, so runs made without cuca can be viewed, searched,
//! replayed, priced and exported like recorded ones.
//!
//! Each transcript becomes one session (`claude-code-{uuid}`, `codex-{uuid}`): its messages,
//! tool calls and results, thinking, model, usage and timestamps; a Claude Code sub-agent
//! becomes a session of its own, linked both ways to its parent. An import appends only
//! what a transcript gained since the last one: a marker record at the end of each session
//! says how many bytes and lines were read, with a SHA-256 of them. A call that several
//! lines or transcripts repeat (Claude Code writes a line per content block, and copies
//! messages into resumed sessions) has its usage counted once, keyed as ccusage keys it.
//! `docs/import.md` documents both formats as read, with their versions.
//!
//! ```
//! use cuca_events::{SessionBackend, SessionEvent};
//! use cuca_import::{import, Source, DEFAULT_MAX_LINE_BYTES};
//! use cuca_store_mem::InMemoryBackend;
//!
//! let dir = tempfile::tempdir()?;
//! let project = dir.path().join("-home-me-demo");
//! std::fs::create_dir(&project)?;
//! std::fs::write(project.join("5f1c.jsonl"), concat!(
//!     r#"{"type":"user","timestamp":"2026-01-05T10:00:00Z","message":{"role":"user","content":"hi"}}"#, "\n",
//!     r#"{"type":"assistant","timestamp":"2026-01-05T10:00:02Z","requestId":"req_1","#,
//!     r#""message":{"id":"msg_1","model":"claude-sonnet-4-5","role":"assistant","#,
//!     r#""content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","#,
//!     r#""usage":{"input_tokens":3,"output_tokens":2,"cache_read_input_tokens":100}}}"#, "\n",
//!     "not json\n",
//! ))?;
//!
//! let store = InMemoryBackend::new();
//! let report = import(&store, Source::ClaudeCode, dir.path(), DEFAULT_MAX_LINE_BYTES)?;
//! assert!(report.failed()); // line 3 is not JSON: reported, never dropped silently
//! assert_eq!(report.findings[0].line, Some(3));
//! let records = store.replay("claude-code-5f1c")?;
//! assert!(records.iter().any(|r| r.event == SessionEvent::Output { text: "hello".into() }));
//! assert!(records.iter().any(|r| r.event
//!     == SessionEvent::TokenUsage { prompt_tokens: 103, completion_tokens: 2 }));
//!
//! // A second import appends nothing.
//! let again = import(&store, Source::ClaudeCode, dir.path(), DEFAULT_MAX_LINE_BYTES)?;
//! assert_eq!((again.records(), again.failed()), (0, false));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! It deliberately does not price anything (that is `cuca-cost`), know where the store
//! lives, or watch transcripts as they grow: an import reads what is on disk when it runs.
//! It never changes a transcript.
#![forbid(unsafe_code)]

mod claude_code;
mod codex;
mod error;
mod import;
mod lines;
mod report;
mod translate;
mod usage;
mod writer;

#[cfg(test)]
mod tests;

pub use error::ImportError;
pub use import::{import, transcripts, Source, Transcript, DEFAULT_MAX_LINE_BYTES};
pub use report::{Finding, FindingKind, ImportReport, SessionOutcome};
pub use usage::{usage_records, Sent, TranscriptUsage};
pub use writer::IMPORT_WIRE;
