//! `SessionLogPlugin`: records every request, streamed block and completion of a model call as
//! an append-only [`SessionEvent`](cuca_events::SessionEvent), and forks a session at any point.
//!
//! Register the plugin on a client (it implements [`CucaPlugin`](cuca_events::CucaPlugin)) over
//! any [`SessionBackend`](cuca_events::SessionBackend). Every hook writes to the plugin's
//! session id ([`DEFAULT_SESSION_ID`], `"default"`, unless
//! [`SessionLogPlugin::with_session_id`] names another):
//!
//! * `on_request` appends a `SystemPrompt` for every system message on every request, and a
//!   `Message` for a user or assistant message only the first time that position (its index
//!   in `request.messages`) appears in the session. Tool messages are not recorded. The
//!   request is recorded as earlier `on_request` hooks left it, and is not changed.
//! * `on_stream_chunk` appends one record per block, verbatim: Thinking → `Reasoning`, Text →
//!   `Output`, ToolCall → `ToolCall`, ToolResult → `ToolResult` with `stdout`, `stderr` and
//!   `exit_code` set to `None`. ImageBase64 blocks are not recorded.
//! * `on_response_complete` appends `Latency { duration_ms }` then `TokenUsage`.
//! * Asked with [`SessionLogPlugin::with_call_metadata`] (off by default), `on_request` also
//!   appends a `CallRequest` (model, sampling parameters, tools offered) after the request's
//!   messages, and `on_response_complete` a `CallFinish` (finish reason, served model) just
//!   before `Latency`.
//! * `execute_local_tool` is the trait default. `ModelSwap` and other records no hook sees
//!   arrive through [`SessionLogPlugin::append_log`].
//!
//! The plugin assigns every sequence number (0-based, dense) and stamps records with the system
//! clock. The first time it touches a session that already has records (a `FileBackend`
//! reopened after a restart) it continues at last sequence + 1, and takes as already recorded
//! as many user and assistant positions as the session holds `Message` records. A backend
//! error is returned unchanged and a failed append does not use up its sequence number.
//!
//! Every store refuses a sequence at or below the session's last one
//! ([`PluginError::SequenceTaken`](cuca_events::PluginError::SequenceTaken), naming that last
//! sequence). The plugin takes such a refusal as news that another writer appended to its
//! session — a fork made through another handle (a second plugin, or `backend().fork`),
//! whose audit record took the tail; a second plugin or process recording the same id — so it
//! re-reads the tail from the refusal and retries once at last + 1. Its records then follow
//! the other writer's densely (`[0, 1, 2, 3]` around a fork, never `[0, 1, 2, 2]`); a second
//! refusal in a row is returned, with the cursor moved past the tail for the next record.
//!
//! ```
//! use std::sync::Arc;
//! use cuca_events::{CucaPlugin, Message, MessageContentBlock, SessionBackend, SessionEvent, UnifiedRequest};
//! use cuca_session_log::SessionLogPlugin;
//! use cuca_store_mem::InMemoryBackend;
//!
//! let log = SessionLogPlugin::new(Arc::new(InMemoryBackend::new())).with_session_id("demo");
//! futures::executor::block_on(async {
//!     let mut request = UnifiedRequest::new(vec![
//!         Message::system("You are terse."),
//!         Message::user("The vault is in Lisbon. Reply with: noted"),
//!     ]);
//!     log.on_request(&mut request).await?;
//!     log.on_stream_chunk(&MessageContentBlock::text("noted")).await
//! })?;
//! let records = log.backend().replay("demo")?;
//! let kinds: Vec<_> = records.iter().map(|record| record.event.kind()).collect();
//! assert_eq!(kinds, ["SystemPrompt", "Message", "Output"]);
//! assert_eq!(records[1].point_id(), "demo:1");
//!
//! let branch = log.fork_session("demo", "demo:1")?;
//! assert_eq!(branch, "demo:fork:demo:1:0");
//! assert_eq!(log.backend().replay(&branch)?.len(), 2);
//! // The original gained the Fork audit record; the plugin's next record follows it.
//! let next = log.append_log(SessionEvent::Output { text: "after".into() })?;
//! assert_eq!(next.sequence, 4);
//! # Ok::<(), cuca_events::PluginError>(())
//! ```
//!
//! # What it does not do
//!
//! It knows no concrete store: persistence, caps and the fork itself belong to the backend.
//! It does not replay a session into a stream (that is `cuca-replay`), redacts only when
//! asked ([`SessionLogPlugin::with_redaction`], rules from [`redact`]), and does not write `ModelSwap` records on its own.
//! It is meant to be the only writer of its session: other writers cannot make it store a
//! duplicate sequence (the store refuses, the plugin moves on), but their records interleave
//! with its own, and a message position it already recorded is not re-read from them. Hooks
//! call the synchronous backend on the calling task; a backend with slow I/O blocks that task
//! for one append.
#![forbid(unsafe_code)]

mod call;
mod plugin;

pub use plugin::{SessionLogPlugin, DEFAULT_SESSION_ID};

/// The redaction rules [`SessionLogPlugin::with_redaction`] takes (`cuca-redact`).
pub use cuca_redact as redact;
