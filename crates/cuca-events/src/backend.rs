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

/// Where a read of a session left off: just after the record whose sequence is `sequence`,
/// so that [`SessionBackend::replay_after`] reads on from there instead of from the start.
///
/// `position` and `check` are the backend's own: a file store keeps the byte offset of the
/// next frame and the identity of the file it read, the trait's default the number of records
/// read. A caller keeps marks as a backend handed them out and never makes one up, except
/// [`ReadMark::START`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadMark {
    /// The sequence of the last record read; `None` before the first.
    pub sequence: Option<u64>,
    /// Where the backend finds the record after it (opaque to callers; 0 at the start).
    pub position: u64,
    /// What the backend knew the stored session by when it read it (opaque to callers), so
    /// that a mark into a session since replaced is not trusted.
    pub check: u64,
}

impl ReadMark {
    /// Before the first record: a read from here reads the whole session.
    pub const START: ReadMark = ReadMark {
        sequence: None,
        position: 0,
        check: 0,
    };
}

/// What [`SessionBackend::replay_after`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadAfter {
    /// It visited every record after the mark (none when the session did not grow), and this
    /// is the mark after the last of them: the one to read on from next time.
    Read(ReadMark),
    /// The mark does not describe the stored session any more (it was replaced, cut short or
    /// repaired since the mark was handed out): nothing was visited, and whatever the caller
    /// built from the records before the mark is to be rebuilt, with a read from
    /// [`ReadMark::START`].
    Stale,
}

/// What [`SessionBackend::append_all`] returns when it could not store every record: how
/// many were stored, from the first, and why the next one was not.
#[derive(Debug, thiserror::Error)]
#[error("{stored} of the records were stored; the next was refused: {error}")]
pub struct AppendRefused {
    /// The records stored before the refusal, from the first.
    pub stored: usize,
    /// Why the record after them was not stored, as [`SessionBackend::append`] says it.
    #[source]
    pub error: PluginError,
}

/// What a store knows a session's stored state by at one moment, cheaply
/// ([`SessionBackend::stamp`]): two equal stamps of one session, taken at two moments, mean
/// that nothing was appended to it, and it was not replaced or cut short, in between.
///
/// The value is the backend's own and is compared only with stamps the same backend handed
/// out for the same session in the same process (a file store's is built from the file's
/// identity, length and change times).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionStamp(pub u128);

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

    /// Appends `records`, in order, each under [`Self::append`]'s contract: records of one
    /// session, each sequence above the one before it. A store may write them together (the
    /// file store writes them in one `write`); the default appends them one by one.
    ///
    /// For a writer that has several records ready at once (an answer's streamed blocks held
    /// back for redaction and released together), so that it pays one write for them, not
    /// one each. It changes nothing a reader sees: an `Ok` means every record is stored, as
    /// after as many `append`s.
    ///
    /// A refusal says how many of the records, from the first, were stored before it
    /// ([`AppendRefused::stored`]); the rest were not. Its error is the one `append` would
    /// have returned for the first record not stored.
    ///
    /// ```
    /// use cuca_events::{SessionBackend, SessionEvent, SessionRecord};
    /// # fn demo(backend: &dyn SessionBackend) -> Result<(), cuca_events::AppendRefused> {
    /// let records = (0..3)
    ///     .map(|sequence| SessionRecord {
    ///         session_id: "demo".into(),
    ///         sequence,
    ///         timestamp_ms: 0,
    ///         event: SessionEvent::Output { text: format!("block {sequence}") },
    ///     })
    ///     .collect();
    /// backend.append_all(records)?;
    /// # Ok(()) }
    /// ```
    fn append_all(&self, records: Vec<SessionRecord>) -> Result<(), AppendRefused> {
        for (stored, record) in records.into_iter().enumerate() {
            self.append(record)
                .map_err(|error| AppendRefused { stored, error })?;
        }
        Ok(())
    }

    /// Whether an append to a session already open for appending may wait on more than the
    /// kernel taking the bytes: a network round trip, a commit, a disk flush. A caller on an
    /// async runtime makes such appends from a blocking thread; appends to a store that says
    /// `false` (a file written without `fsync`, memory) cost microseconds and may be made in
    /// place. Opening a session, reading it and forking it are outside the promise. The
    /// default says appends may wait.
    fn appends_may_wait(&self) -> bool {
        true
    }

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

    /// Hands `visit` the records of a session after `after`, in append order, each with the
    /// mark just after it: what [`SessionBackend::replay_each`] would visit after the record
    /// the mark names. A reader that keeps something built from a session (an index of its
    /// turns) keeps the last mark and reads only what was appended since, by this process or
    /// another.
    ///
    /// The contract:
    ///
    /// * From [`ReadMark::START`] it visits every record `replay_each` visits, and returns
    ///   [`ReadAfter::Read`] with the mark after the last one (`START` for an unknown
    ///   session).
    /// * From a mark it handed out, with the session only appended to since, it visits the
    ///   records appended after that mark, each once, and nothing before it.
    /// * When the session was replaced, cut short or repaired since, so that the mark no
    ///   longer stands after the record it names, it returns [`ReadAfter::Stale`] without
    ///   visiting anything, wherever it can tell (a store that cannot tell a replaced session
    ///   whose sequences line up with the mark says so in its docs).
    /// * Errors are `replay_each`'s, for the records it reads; records visited before an
    ///   error are to be discarded, as there. An error from `visit` stops the read and comes
    ///   back unchanged.
    ///
    /// The default reads the whole session through `replay_each` and skips what comes before
    /// the mark: its `position` is the number of records read, and a session with fewer
    /// records than that, or whose record there has another sequence, is stale. A backend
    /// overrides it when it can start where the mark points (a file store seeks to it).
    ///
    /// ```
    /// use cuca_events::{PluginError, ReadAfter, ReadMark, SessionBackend, SessionEvent};
    /// # use cuca_events::{BackendGauge, SessionRecord};
    /// # use std::sync::Mutex;
    /// # #[derive(Debug, Default)]
    /// # struct Growing(Mutex<Vec<SessionRecord>>);
    /// # impl SessionBackend for Growing {
    /// #     fn name(&self) -> &str { "growing" }
    /// #     fn append(&self, r: SessionRecord) -> Result<(), PluginError> {
    /// #         self.0.lock().unwrap().push(r); Ok(())
    /// #     }
    /// #     fn replay(&self, id: &str) -> Result<Vec<SessionRecord>, PluginError> {
    /// #         Ok(self.0.lock().unwrap().iter().filter(|r| r.session_id == id).cloned().collect())
    /// #     }
    /// #     fn fork(&self, _: &str, _: &str) -> Result<String, PluginError> {
    /// #         Err(PluginError::validation("growing", "no forks in this example"))
    /// #     }
    /// #     fn sessions(&self) -> Result<Vec<String>, PluginError> { Ok(vec!["demo".into()]) }
    /// #     fn gauge(&self) -> BackendGauge { BackendGauge::default() }
    /// # }
    /// # let record = |sequence, text: &str| SessionRecord {
    /// #     session_id: "demo".into(), sequence, timestamp_ms: 0,
    /// #     event: SessionEvent::Output { text: text.into() },
    /// # };
    /// let backend = Growing::default();
    /// backend.append(record(0, "the vault"))?;
    /// let mut seen = Vec::new();
    /// let first = backend.replay_after("demo", &ReadMark::START, &mut |r, _| {
    ///     seen.push(r.sequence);
    ///     Ok(())
    /// })?;
    /// let ReadAfter::Read(mark) = first else {
    ///     return Err(PluginError::validation("demo", "a first read is never stale"));
    /// };
    /// backend.append(record(1, "is in Lisbon"))?;
    /// // Only what was appended since the mark.
    /// backend.replay_after("demo", &mark, &mut |r, _| {
    ///     seen.push(r.sequence);
    ///     Ok(())
    /// })?;
    /// assert_eq!(seen, [0, 1]);
    /// # Ok::<(), PluginError>(())
    /// ```
    fn replay_after(
        &self,
        session_id: &str,
        after: &ReadMark,
        visit: &mut dyn FnMut(ReplayedRecord<'_>, &ReadMark) -> Result<(), PluginError>,
    ) -> Result<ReadAfter, PluginError> {
        replay_after_counting(self, session_id, after, 0, visit)
    }

    /// A stamp of the session's stored state as it is now, where the store can take one
    /// cheaply; `None` where it cannot (the default). A reader that keeps something built
    /// from a session (an index read on with [`SessionBackend::replay_after`]) takes a stamp
    /// **before** each read, and skips its next read when the stamp then is still the same:
    /// whatever was appended after the stamp, by this process or another, changes the next
    /// one, so nothing is missed.
    ///
    /// The contract:
    ///
    /// * Two equal stamps of a session mean it was not appended to, replaced, cut short or
    ///   repaired between them, as far as the store can tell (a store that cannot tell some
    ///   change says which in its docs; a file store cannot tell a file rewritten in place
    ///   to the same length within one tick of the file system's clock).
    /// * A stamp that differs says only that the session may have changed.
    /// * It must be cheap and must not wait: callers take it on an async runtime's thread,
    ///   on every request. One `stat` of a local file is the most a store may do; a store
    ///   that needs a round trip to a server returns `None`, and its readers read on from
    ///   their marks as before.
    /// * An unknown session has a stamp too, where the store can take one: a session created
    ///   later changes it.
    fn stamp(&self, session_id: &str) -> Option<SessionStamp> {
        let _ = session_id;
        None
    }

    /// Branches `session_id` at `point_id` (`"{session_id}:{sequence}"`).
    ///
    /// The new session holds the original's records up to and including the point,
    /// relabelled with the new id `"{session_id}:fork:{point_id}:{n}"`; the original gains one
    /// [`crate::SessionEvent::Fork`] record at its tail. Returns the new session id. A point
    /// that does not exist fails and changes nothing.
    fn fork(&self, session_id: &str, point_id: &str) -> Result<String, PluginError>;

    /// Lets go of what this instance holds open to append to `session_id` (a file store's
    /// handle and the lock on it), so that another process sharing the store may append to
    /// it or fork it; the next append here takes it again. A fork leaves its parent held (its
    /// audit record was appended there), and a proxy that forked a recording it does not
    /// otherwise write calls this so that another proxy can fork the same recording. The
    /// default holds nothing, so does nothing.
    fn release(&self, session_id: &str) {
        let _ = session_id;
    }

    /// The ids of the sessions the backend holds, sorted.
    fn sessions(&self) -> Result<Vec<String>, PluginError>;

    /// How full the backend is.
    fn gauge(&self) -> BackendGauge;
}

/// [`SessionBackend::replay_after`] by counting, the trait's default: the whole session is
/// read through `replay_each` and what comes before the mark skipped. Marks carry the number
/// of records read as their `position` and `check` as their check, which is what the caller
/// knows the stored session by (0 for nothing); a mark with another check, a session with
/// fewer records than its position, or one whose record there has another sequence, is
/// [`ReadAfter::Stale`]. For a backend that overrides `replay_after` where it can seek, and
/// reads some sessions the slow way.
pub fn replay_after_counting<B: SessionBackend + ?Sized>(
    backend: &B,
    session_id: &str,
    after: &ReadMark,
    check: u64,
    visit: &mut dyn FnMut(ReplayedRecord<'_>, &ReadMark) -> Result<(), PluginError>,
) -> Result<ReadAfter, PluginError> {
    if after.check != check && *after != ReadMark::START {
        // A mark of another reading of the session: its position means nothing here.
        return Ok(ReadAfter::Stale);
    }
    let mut n_read = 0u64;
    let mut mark = *after;
    // The visit stops at the first sign the mark is stale; this flag tells that stop from a
    // real failure.
    let mut stale = false;
    let read = backend.replay_each(session_id, &mut |record| {
        n_read += 1;
        if n_read < after.position {
            return Ok(());
        }
        if n_read == after.position {
            if Some(record.sequence) != after.sequence {
                stale = true;
                return Err(PluginError::validation("ReadMark", "the mark is stale"));
            }
            return Ok(());
        }
        mark = ReadMark {
            sequence: Some(record.sequence),
            position: n_read,
            check,
        };
        visit(record, &mark)
    });
    match read {
        Err(_) if stale => return Ok(ReadAfter::Stale),
        Err(error) => return Err(error),
        Ok(()) => {}
    }
    if n_read < after.position {
        return Ok(ReadAfter::Stale);
    }
    Ok(ReadAfter::Read(mark))
}
