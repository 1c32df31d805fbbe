//! `SessionBackend`: the synchronous, object-safe seam every session store implements.

use crate::error::PluginError;
use crate::event::SessionRecord;

/// How full a backend is, for the gauges a report prints (`78/65536 records in memory`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackendGauge {
    /// Records the backend holds across all sessions, where it counts them.
    pub records: Option<u64>,
    /// The most records the backend will hold, where it has a cap.
    pub max_records: Option<u64>,
    /// Bytes on disk across all sessions, where the backend has a disk.
    pub bytes_on_disk: Option<u64>,
}

/// A store of sessions: append-only per session, replayable whole, forkable at any point.
///
/// Backends store records as given: the session log plugin assigns every sequence number.
/// The one exception is the [`crate::SessionEvent::Fork`] audit record a backend appends
/// during [`SessionBackend::fork`], sequenced at the original session's tail.
///
/// The trait is synchronous so that it is object-safe and cheap to call from any context;
/// a backend whose I/O is slow documents how it keeps async runtimes unblocked.
pub trait SessionBackend: Send + Sync + std::fmt::Debug {
    /// A short name for messages and gauges (`"memory"`, `"file"`).
    fn name(&self) -> &str;

    /// Appends one record to its session. An error means the record was not stored.
    fn append(&self, record: SessionRecord) -> Result<(), PluginError>;

    /// Every record of a session, in append order. An unknown session replays as empty.
    fn replay(&self, session_id: &str) -> Result<Vec<SessionRecord>, PluginError>;

    /// Branches `session_id` at `point_id` (`"{session_id}:{sequence}"`).
    ///
    /// The new session holds the original's records up to and including the point,
    /// relabelled with the new id `"{session_id}:fork:{point_id}:{n}"`; the original gains one
    /// [`crate::SessionEvent::Fork`] record at its tail. Returns the new session id. A point
    /// that does not exist fails and changes nothing.
    fn fork(&self, session_id: &str, point_id: &str) -> Result<String, PluginError>;

    /// The ids of the sessions the backend holds, sorted.
    fn sessions(&self) -> Result<Vec<String>, PluginError>;

    /// How full the backend is.
    fn gauge(&self) -> BackendGauge;
}
