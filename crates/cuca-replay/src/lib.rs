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
//! Loads read through [`SessionBackend::replay_each`], which hands the records over one by
//! one, and segment them as they arrive: each record's event is *moved* into the one turn it
//! belongs to (its text becomes a block, a message, a system prompt or a note without being
//! copied), and no `Vec` of the session's records is ever built. The steady state is one
//! trajectory, not a trajectory plus its source records. How much a backend holds while it
//! reads is the backend's: `FileBackend` holds one read chunk, and backends that only
//! implement `replay` still build their `Vec` first (the trait's default `replay_each`).
//! A prefix load reads the whole session too, and drops every record after the prefix as it
//! arrives; [`SessionReplay::load_after`] reads from a [`cuca_events::ReadMark`] the backend
//! handed out, so a reader that keeps marks (the proxy's replay index) reads one turn where it
//! lies.
//!
//! Records stop being kept as soon as a load is bound to be refused (over a cap), but the
//! backend still reads to the end, so that a damaged session reports its damage, and a
//! session over [`ReplayConfig::max_records`] reports its exact length.
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

use cuca_events::{parse_point_id, PluginError, SessionBackend, SessionEvent};
use trajectory::Segmenter;

mod ambiguity;
mod call;
mod config;
mod partial;
mod stream;
mod trajectory;
mod turns;

pub use ambiguity::{Ambiguity, AmbiguityCheck, AmbiguityKind};
pub use call::{CallMetadata, CallParameters};
pub use config::ReplayConfig;
pub use partial::{PartialRequest, PartialRequestCheck, PartialRequestKind};
pub use trajectory::{ReplayCompletion, ReplayNote, ReplayTrajectory, ReplayTurn, ReplayUsage};
pub use turns::{SessionOutline, TurnOutline, TurnPart, TurnSplitter};

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
        let mut segmenter = Segmenter::new(session_id.to_owned(), &self.config);
        self.backend.replay_each(session_id, &mut |record| {
            segmenter.push(record.sequence, record.event);
            Ok(())
        })?;
        // Only now is the backend's verdict known: a refused session never gets this far, so
        // the turns built from its first records are dropped with the segmenter.
        segmenter.finish()
    }

    /// The records of `session_id` up to and including the one whose sequence is
    /// `through_sequence`, as a trajectory: what a fork at `"{session_id}:{through_sequence}"`
    /// holds.
    ///
    /// The whole session is read, since the backend has no ranged read. Refuses with
    /// [`PluginError::Validation`] when no record has that sequence, which includes every
    /// sequence of a session the backend does not know. The caps apply to the prefix.
    pub fn load_prefix(
        &self,
        session_id: &str,
        through_sequence: u64,
    ) -> Result<ReplayTrajectory, PluginError> {
        let mut segmenter = Segmenter::new(session_id.to_owned(), &self.config);
        let mut n_records = 0usize;
        let mut found = false;
        self.backend.replay_each(session_id, &mut |record| {
            n_records += 1;
            // The prefix ends at the first record with the sequence; later records are
            // dropped as they arrive (the backend still reads on, for its verdict).
            if !found {
                found = record.sequence == through_sequence;
                segmenter.push(record.sequence, record.event);
            }
            Ok(())
        })?;
        if !found {
            return Err(PluginError::validation(
                "point_id",
                format!(
                    "no record of session {session_id:?} ({n_records} records) has sequence {through_sequence}, so there is no prefix to load"
                ),
            ));
        }
        segmenter.finish()
    }

    /// The store loads read from: for a reader that keeps its own view of a session and
    /// reads on from a [`cuca_events::ReadMark`] (the proxy's replay index).
    pub fn backend(&self) -> &Arc<dyn SessionBackend> {
        &self.backend
    }

    /// The records of `session_id` after `after` (a mark its backend handed out) through the
    /// one whose sequence is `through_sequence`, segmented as [`SessionReplay::load`] segments
    /// them: with `after` a mark at a turn's start and `through_sequence` that turn's last
    /// record, a trajectory of that one turn, read from where it lies and no further. `None`
    /// when the mark is stale (the session was replaced or cut short since it was handed out,
    /// see [`cuca_events::SessionBackend::replay_after`]). The caps apply to what was read.
    pub fn load_after(
        &self,
        session_id: &str,
        after: &cuca_events::ReadMark,
        through_sequence: u64,
    ) -> Result<Option<ReplayTrajectory>, PluginError> {
        self.load_after_while(session_id, after, through_sequence, &mut |_, _| true)
    }

    /// [`SessionReplay::load_after`], with `more` asked before each record is taken (its
    /// sequence and event): the read stops at the first record it refuses, which is not
    /// taken, nor is anything after it. A turn the stop cuts short is handed back as far as
    /// it was read. For a reader that reads on past the turn it needs while that is cheap
    /// (the turns after it, up to a budget of bytes) and stops before it is not.
    pub fn load_after_while(
        &self,
        session_id: &str,
        after: &cuca_events::ReadMark,
        through_sequence: u64,
        more: &mut dyn FnMut(u64, &SessionEvent) -> bool,
    ) -> Result<Option<ReplayTrajectory>, PluginError> {
        let mut segmenter = Segmenter::new(session_id.to_owned(), &self.config);
        // The read stops past the last record wanted, or where `more` says; this flag tells
        // that stop from a failure.
        let mut done = false;
        let read = self
            .backend
            .replay_after(session_id, after, &mut |record, _| {
                if record.sequence > through_sequence || !more(record.sequence, &record.event) {
                    done = true;
                    return Err(PluginError::validation("load_after", "read through"));
                }
                segmenter.push(record.sequence, record.event);
                Ok(())
            });
        match read {
            Ok(cuca_events::ReadAfter::Stale) => return Ok(None),
            Ok(_) => {}
            Err(_) if done => {}
            Err(error) => return Err(error),
        }
        segmenter.finish().map(Some)
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
