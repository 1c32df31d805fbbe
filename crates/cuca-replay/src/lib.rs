//! `SessionReplay`: a recorded session trajectory re-materialized as the same
//! [`AgentResponseStream`](cuca_events::AgentResponseStream) a live provider turn produces, with no network call.
//!
//! Replay reads a recording through the [`SessionBackend`] seam, cuts it into turns at each
//! Latency-then-TokenUsage pair, and streams a turn's blocks back. It is for regression
//! fixtures, offline evals and fork-point comparisons.
//!
//! ```
//! use std::sync::Arc;
//! use cuca_events::{MessageContentBlock, SessionBackend};
//! use cuca_replay::SessionReplay;
//! use cuca_store_mem::InMemoryBackend;
//! use futures::StreamExt;
//!
//! // One recorded turn (system prompt, user message, two Reasoning records, one Output,
//! // then Latency and TokenUsage) and the start of a second one that never finished.
//! let backend = Arc::new(InMemoryBackend::new());
//! let mut records = cuca_testkit::demo_turn("demo", 0);
//! records.extend(cuca_testkit::demo_turn("demo", 7).into_iter().take(3));
//! cuca_testkit::append_all(backend.as_ref(), &records);
//!
//! let replay = SessionReplay::new(backend);
//! let trajectory = replay.load("demo")?;
//! assert_eq!(trajectory.len(), 2);
//! assert!(!trajectory.turn(1).unwrap().is_complete());
//!
//! let blocks: Vec<_> = futures::executor::block_on(trajectory.stream_turn(0)?.collect());
//! let blocks: Vec<MessageContentBlock> = blocks.into_iter().collect::<Result<_, _>>()?;
//! assert_eq!(blocks.last(), Some(&MessageContentBlock::text("noted")));
//!
//! let response = trajectory.turn(0).unwrap().response("gemma", "llamacpp");
//! assert_eq!(response.token_usage.prompt_tokens, 31);
//! assert_eq!(response.duration.as_millis(), 412);
//!
//! // A prefix up to and including the first Message record, as a fork at demo:1 holds.
//! let prefix = replay.load_at_point("demo:1")?;
//! assert_eq!(prefix.usage().records, 2);
//! # Ok::<(), cuca_events::PluginError>(())
//! ```
//!
//! # Memory
//!
//! `SessionBackend::replay` has no ranged read, so every load reads the whole session into
//! one `Vec<SessionRecord>`; the pre-read bound belongs to the backend. `load*` then consumes
//! that `Vec`: each record's event is *moved* into the one turn it belongs to (its text
//! becomes a block, a message, a system prompt or a note without being copied), and the
//! record shells are freed when the load returns. The steady state is one trajectory, not a
//! trajectory plus its source records. A prefix load truncates the `Vec` before it segments.
//!
//! # What it does not do
//!
//! It never writes: recording stays with the session log, and nothing here names it.
//! [`SessionReplay`] never implements [`cuca_events::CucaPlugin`], so it cannot be
//! registered on a client, and replayed blocks go straight to the caller: no plugin's
//! `on_stream_chunk` or `on_response_complete` runs on them. It synthesizes nothing the
//! recording never held: no model, provider or finish reason, no image blocks (the log does
//! not record them), and no tool stdout, stderr or exit code on a replayed ToolResult block.
//! It does not sleep to reproduce recorded latency: the stream is order-deterministic, not
//! time-deterministic.
#![forbid(unsafe_code)]

use std::sync::Arc;

use cuca_events::{parse_point_id, PluginError, SessionBackend};

mod config;
mod stream;
mod trajectory;

pub use config::ReplayConfig;
pub use trajectory::{ReplayCompletion, ReplayNote, ReplayTrajectory, ReplayTurn, ReplayUsage};

#[cfg(test)]
mod tests;

/// Loads recorded sessions from one backend as [`ReplayTrajectory`] values.
///
/// An explicit-call service: every method is a synchronous call, and it holds exactly one
/// `Arc` and one `Copy` config, so it does not grow with traffic. Cloning it shares the
/// backend.
#[derive(Debug, Clone)]
pub struct SessionReplay {
    backend: Arc<dyn SessionBackend>,
    config: ReplayConfig,
}

impl SessionReplay {
    /// Binds `backend` with [`ReplayConfig::default`].
    ///
    /// The backend is `SessionLogPlugin::backend()` for a registered log, or
    /// `FileBackend::new(dir)` for a directory of `.cslog` files.
    pub fn new(backend: Arc<dyn SessionBackend>) -> SessionReplay {
        SessionReplay {
            backend,
            config: ReplayConfig::default(),
        }
    }

    /// Binds `backend` with `config`, refusing a config that does not validate.
    pub fn with_config(
        backend: Arc<dyn SessionBackend>,
        config: ReplayConfig,
    ) -> Result<SessionReplay, PluginError> {
        config.validate()?;
        Ok(SessionReplay { backend, config })
    }

    /// The config loads run under.
    pub fn config(&self) -> ReplayConfig {
        self.config
    }

    /// The whole of `session_id` as a trajectory.
    ///
    /// A session the backend does not know loads as an empty trajectory with
    /// `InMemoryBackend` and `FileBackend`, because both replay it as empty. Backend errors
    /// pass through unchanged; a session over a cap is refused with
    /// [`PluginError::Validation`].
    pub fn load(&self, session_id: &str) -> Result<ReplayTrajectory, PluginError> {
        let records = self.backend.replay(session_id)?;
        trajectory::segment(session_id.to_owned(), records, &self.config)
    }

    /// The records of `session_id` up to and including the one whose sequence is
    /// `through_sequence`, as a trajectory: what a fork at `"{session_id}:{through_sequence}"`
    /// holds.
    ///
    /// The whole session is read first, since the backend has no ranged read. Refuses with
    /// [`PluginError::Validation`] when no record has that sequence, which includes every
    /// sequence of a session the backend does not know. The caps apply to the prefix.
    pub fn load_prefix(
        &self,
        session_id: &str,
        through_sequence: u64,
    ) -> Result<ReplayTrajectory, PluginError> {
        let mut records = self.backend.replay(session_id)?;
        let Some(position) = records
            .iter()
            .position(|record| record.sequence == through_sequence)
        else {
            return Err(PluginError::validation(
                "point_id",
                format!(
                    "no record of session {session_id:?} ({} records) has sequence {through_sequence}, so there is no prefix to load",
                    records.len()
                ),
            ));
        };
        // Truncation drops the tail in place: the prefix is never copied.
        records.truncate(position + 1);
        trajectory::segment(session_id.to_owned(), records, &self.config)
    }

    /// The prefix of a session up to and including `point_id` (`"{session_id}:{sequence}"`,
    /// as `SessionRecord::point_id` and the Fork audit record's `from_point` write it).
    ///
    /// The id is split at its last `:`, since a fork session id itself contains `:`.
    /// Refuses a malformed id, and a point no record matches, with
    /// [`PluginError::Validation`].
    pub fn load_at_point(&self, point_id: &str) -> Result<ReplayTrajectory, PluginError> {
        let (session_id, sequence) = parse_point_id(point_id)?;
        self.load_prefix(session_id, sequence)
    }
}
