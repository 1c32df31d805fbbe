//! `SessionBackend`: the synchronous, object-safe seam every session store implements.

use crate::error::PluginError;
use crate::event::{ReplayedRecord, SessionRecord};

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
/// during [`SessionBackend::fork`], sequenced at the original session's tail (last sequence
/// + 1, so it keeps the rule below).
///
/// **Sequences are strictly increasing per session**, in every store: an append whose
/// sequence is not above the session's last stored one is refused with
/// [`PluginError::SequenceTaken`] (see [`SessionBackend::append`]). Gaps are kept as given;
/// duplicates and steps backwards never reach storage. **Session ids** pass
/// [`crate::validate_session_id`] in every store (no empty id, no control character).
///
/// The trait is synchronous so that it is object-safe and cheap to call from any context;
/// a backend whose I/O is slow documents how it keeps async runtimes unblocked.
pub trait SessionBackend: Send + Sync + std::fmt::Debug {
    /// A short name for messages and gauges (`"memory"`, `"file"`).
    fn name(&self) -> &str;

    /// Appends one record to its session. An error means the record was not stored.
    ///
    /// The contract every store keeps, checked atomically with the write (two writers cannot
    /// both pass the check and then both store):
    ///
    /// * **`record.sequence` must be greater than the sequence of the session's last stored
    ///   record** (any sequence for a session with no record). Otherwise the append is refused
    ///   with [`PluginError::SequenceTaken`] naming the session, the refused sequence and the
    ///   `last` one stored, and nothing changes. A writer that got it re-reads the session's
    ///   tail and continues after `last`; this is how a writer learns that another one (a
    ///   second plugin, another process, a fork's audit record) appended in between.
    /// * **`record.session_id` must pass [`crate::validate_session_id`]**, or the append is
    ///   refused with [`PluginError::Validation`] (a store may refuse more ids, and says which).
    fn append(&self, record: SessionRecord) -> Result<(), PluginError>;

    /// Checks, before a caller does work it could not record, that `session_id` can be
    /// appended to now: the id is one this store takes, and no other writer holds the
    /// session. Nothing is written, and a session that does not exist yet is not created. A
    /// store may open (and lock) the session for its next append while checking.
    ///
    /// The default checks the id rule every store shares ([`crate::validate_session_id`]).
    fn check_writable(&self, session_id: &str) -> Result<(), PluginError> {
        crate::validate_session_id(session_id)
    }

    /// Every record of a session, in append order. An unknown session replays as empty.
    fn replay(&self, session_id: &str) -> Result<Vec<SessionRecord>, PluginError>;

    /// Hands every record of a session to `visit`, one by one in append order, instead of
    /// collecting them: the records [`SessionBackend::replay`] returns, as
    /// [`ReplayedRecord`]s (the session id borrowed, the event owned).
    ///
    /// The contract:
    ///
    /// * **`Ok(())`**: `visit` saw every record `replay` would have returned, each once, in
    ///   the same order and equal field by field; an unknown session visits nothing.
    /// * **`Err` from the backend**: the session does not load, and the error is the one
    ///   `replay` would have returned (a backend may stop reading at the first damage that
    ///   refuses the session, so an I/O error further on, which `replay` would have met
    ///   first, goes unreported). `visit` may already have seen some records first:
    ///   damage to a stored session may only be found after the records before it were
    ///   handed over (a file store learns that a damaged frame lost a record only at the next
    ///   good one). **The caller must then discard everything it built from the visited
    ///   records**, exactly as it would never have seen them from `replay`.
    /// * **`Err` from `visit`**: the backend stops visiting at once and returns that error
    ///   unchanged. A visitor that wants the backend's verdict on the rest of the session
    ///   (to report damage before its own refusal) keeps returning `Ok` and remembers its
    ///   own error instead.
    ///
    /// The visitor must not call back into the same backend: an implementation may hold a
    /// lock or a file while it visits.
    ///
    /// The default calls `replay` and visits its records, so it costs what `replay` costs.
    /// A backend overrides it when it can do better, for example by decoding each stored
    /// record straight into a [`ReplayedRecord`] that borrows its session id from the read
    /// buffer, so that no `Vec` of every record and no per-record id copy is made.
    ///
    /// ```
    /// use cuca_events::{PluginError, ReplayedRecord, SessionBackend, SessionEvent};
    /// # use cuca_events::{BackendGauge, SessionRecord};
    /// # /// A backend that holds one fixed session, for this example.
    /// # #[derive(Debug)]
    /// # struct Fixed(Vec<SessionRecord>);
    /// # impl SessionBackend for Fixed {
    /// #     fn name(&self) -> &str { "fixed" }
    /// #     fn append(&self, _: SessionRecord) -> Result<(), PluginError> {
    /// #         Err(PluginError::validation("fixed", "this example's backend is read-only"))
    /// #     }
    /// #     fn replay(&self, id: &str) -> Result<Vec<SessionRecord>, PluginError> {
    /// #         Ok(self.0.iter().filter(|r| r.session_id == id).cloned().collect())
    /// #     }
    /// #     fn fork(&self, _: &str, _: &str) -> Result<String, PluginError> {
    /// #         Err(PluginError::validation("fixed", "this example's backend is read-only"))
    /// #     }
    /// #     fn sessions(&self) -> Result<Vec<String>, PluginError> { Ok(vec!["demo".into()]) }
    /// #     fn gauge(&self) -> BackendGauge { BackendGauge::default() }
    /// # }
    /// # let record = |sequence, text: &str| SessionRecord {
    /// #     session_id: "demo".into(), sequence, timestamp_ms: 0,
    /// #     event: SessionEvent::Output { text: text.into() },
    /// # };
    /// # let backend = Fixed(vec![record(0, "the vault"), record(1, "is in Lisbon")]);
    /// // Keep every Output text of a session, nothing else, without collecting the records.
    /// let backend: &dyn SessionBackend = &backend;
    /// let mut texts = Vec::new();
    /// backend.replay_each("demo", &mut |record: ReplayedRecord<'_>| {
    ///     if let SessionEvent::Output { text } = record.event {
    ///         texts.push(text); // moved out of the record, not copied
    ///     }
    ///     Ok(())
    /// })?;
    /// assert_eq!(texts, ["the vault", "is in Lisbon"]);
    ///
    /// // An error from the visitor stops the visit and comes back unchanged.
    /// let mut seen = 0;
    /// let stopped = backend.replay_each("demo", &mut |_| {
    ///     seen += 1;
    ///     Err(PluginError::validation("demo", "enough"))
    /// });
    /// assert!(matches!(stopped, Err(PluginError::Validation { .. })));
    /// assert_eq!(seen, 1);
    /// # Ok::<(), PluginError>(())
    /// ```
    fn replay_each(
        &self,
        session_id: &str,
        visit: &mut dyn FnMut(ReplayedRecord<'_>) -> Result<(), PluginError>,
    ) -> Result<(), PluginError> {
        for record in self.replay(session_id)? {
            let SessionRecord {
                session_id,
                sequence,
                timestamp_ms,
                event,
            } = record;
            visit(ReplayedRecord {
                session_id: &session_id,
                sequence,
                timestamp_ms,
                event,
            })?;
        }
        Ok(())
    }

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
