//! `InMemoryBackend`: a [`SessionBackend`] that holds sessions in memory, bounded by a record cap.
//!
//! ```
//! use cuca_events::{SessionBackend, SessionEvent, SessionRecord};
//! use cuca_store_mem::InMemoryBackend;
//!
//! let backend = InMemoryBackend::new();
//! for (sequence, text) in ["system", "hello"].into_iter().enumerate() {
//!     backend.append(SessionRecord {
//!         session_id: "demo".into(),
//!         sequence: sequence as u64,
//!         timestamp_ms: 0,
//!         event: SessionEvent::Output { text: text.into() },
//!     })?;
//! }
//! let branch = backend.fork("demo", "demo:0")?;
//! assert_eq!(branch, "demo:fork:demo:0:0");
//! assert_eq!(backend.replay(&branch)?.len(), 1);
//! assert_eq!(backend.replay("demo")?.len(), 3); // two records and the Fork audit record
//! assert_eq!(backend.gauge().records, Some(4));
//! # Ok::<(), cuca_events::PluginError>(())
//! ```
//!
//! # What it does not do
//!
//! It does not persist anything and it never evicts: at its cap an append is refused with
//! [`PluginError::CapacityExceeded`], because a log that silently drops its oldest records
//! is a wrong log (the "memory discipline" rule).
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use cuca_events::{
    fork_session_id, point_in_session, validate_session_id, BackendGauge, PluginError,
    ReplayedRecord, SessionBackend, SessionEvent, SessionRecord, SessionStamp,
};

#[cfg(test)]
mod tests;

/// Sessions held in memory, bounded by a total record cap.
#[derive(Debug)]
pub struct InMemoryBackend {
    state: Mutex<State>,
    max_records: usize,
    /// Counts forks made by this instance: the `n` of `{session_id}:fork:{point_id}:{n}`.
    forks: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    sessions: HashMap<String, Vec<SessionRecord>>,
    n_records: usize,
}

impl Default for InMemoryBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryBackend {
    /// The most records one backend instance holds, across all its sessions.
    ///
    /// 65,536 records is a few hundred turns of a reasoning model that streams one record
    /// per token-sized block (the seed's demo turn is 78 records), which is a long
    /// interactive session, while keeping the worst case to tens of megabytes.
    pub const DEFAULT_MAX_RECORDS: usize = 65_536;

    /// A backend with [`InMemoryBackend::DEFAULT_MAX_RECORDS`].
    pub fn new() -> Self {
        InMemoryBackend {
            state: Mutex::new(State::default()),
            max_records: Self::DEFAULT_MAX_RECORDS,
            forks: AtomicU64::new(0),
        }
    }

    /// A backend holding at most `max_records` records; zero is refused.
    pub fn with_max_records(max_records: usize) -> Result<Self, PluginError> {
        if max_records == 0 {
            return Err(PluginError::validation(
                "InMemoryBackend::max_records",
                "the cap must be at least 1 record",
            ));
        }
        Ok(InMemoryBackend {
            max_records,
            ..Self::new()
        })
    }

    /// The record cap.
    pub fn max_records(&self) -> usize {
        self.max_records
    }

    /// Records held across all sessions.
    pub fn n_records(&self) -> usize {
        self.lock().n_records
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave `State` half-updated: every mutation
        // below checks first and then changes, so the data is still consistent.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The refusal at the cap. `what` names the refused change and its session, because a
    /// backend holds many sessions and the error must say which one was refused.
    fn full(&self, what: &str, wanted: usize, held: usize) -> PluginError {
        PluginError::CapacityExceeded {
            resource: "InMemoryBackend".into(),
            cap: self.max_records as u64,
            message: format!(
                "{what} refused: {held} records held, {wanted} more do not fit; nothing is evicted — raise the cap with InMemoryBackend::with_max_records or record to a FileBackend"
            ),
        }
    }
}

fn now_ms() -> u64 {
    // A clock before 1970 stamps 0 and one past u64 milliseconds saturates: neither is a
    // reason to refuse a fork.
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The refusal of a fork whose original ends at sequence `u64::MAX`: the Fork audit record,
/// sequenced at the tail, would need the number after it.
fn no_sequence_left(session_id: &str) -> PluginError {
    PluginError::CapacityExceeded {
        resource: format!("session {session_id:?}"),
        cap: u64::MAX,
        message: "its last record has sequence u64::MAX, so the Fork audit record has no sequence left; nothing was changed".into(),
    }
}

impl SessionBackend for InMemoryBackend {
    fn name(&self) -> &str {
        "memory"
    }

    /// Checks the id and the sequence rule under the one lock that guards the sessions, so
    /// the check and the push are one step for every thread.
    fn append(&self, record: SessionRecord) -> Result<(), PluginError> {
        validate_session_id(&record.session_id)?;
        let mut state = self.lock();
        if let Some(last) = state
            .sessions
            .get(&record.session_id)
            .and_then(|records| records.last())
        {
            if record.sequence <= last.sequence {
                return Err(PluginError::SequenceTaken {
                    session_id: record.session_id,
                    sequence: record.sequence,
                    last: last.sequence,
                });
            }
        }
        if state.n_records >= self.max_records {
            let what = format!("append to session {:?}", record.session_id);
            return Err(self.full(&what, 1, state.n_records));
        }
        state.n_records += 1;
        state
            .sessions
            .entry(record.session_id.clone())
            .or_default()
            .push(record);
        Ok(())
    }

    fn replay(&self, session_id: &str) -> Result<Vec<SessionRecord>, PluginError> {
        Ok(self
            .lock()
            .sessions
            .get(session_id)
            .cloned()
            .unwrap_or_default())
    }

    /// Clones the session's events under the lock, then visits them after releasing it, so
    /// a visitor never runs while appends wait and cannot deadlock the backend. Every record
    /// of a session is stored under its own id (`append` files a record under
    /// `record.session_id`, `fork` relabels the branch's copies), so the visited records
    /// borrow `session_id` instead of each cloning an equal `String`.
    fn replay_each(
        &self,
        session_id: &str,
        visit: &mut dyn FnMut(ReplayedRecord<'_>) -> Result<(), PluginError>,
    ) -> Result<(), PluginError> {
        let events: Vec<(u64, u64, SessionEvent)> = match self.lock().sessions.get(session_id) {
            Some(records) => records
                .iter()
                .map(|record| (record.sequence, record.timestamp_ms, record.event.clone()))
                .collect(),
            None => return Ok(()),
        };
        for (sequence, timestamp_ms, event) in events {
            visit(ReplayedRecord {
                session_id,
                sequence,
                timestamp_ms,
                event,
            })?;
        }
        Ok(())
    }

    /// How many records the session holds: a session here is only ever appended to (a fork
    /// makes a new one and appends its audit record to the original), never replaced or
    /// cut short, so its length alone tells whether it changed.
    fn stamp(&self, session_id: &str) -> Option<SessionStamp> {
        let n_records = self.lock().sessions.get(session_id).map_or(0, Vec::len);
        Some(SessionStamp(n_records as u128))
    }

    fn fork(&self, session_id: &str, point_id: &str) -> Result<String, PluginError> {
        validate_session_id(session_id)?;
        let point = point_in_session(session_id, point_id)?;
        let mut state = self.lock();
        let original = state
            .sessions
            .get(session_id)
            .ok_or_else(|| PluginError::NotFound {
                what: "session".into(),
                id: session_id.into(),
            })?;
        let Some(cut) = original.iter().position(|record| record.sequence == point) else {
            return Err(PluginError::NotFound {
                what: "point".into(),
                id: point_id.into(),
            });
        };
        // Room for the branch prefix plus the Fork audit record, checked before anything changes.
        let wanted = cut + 2;
        if state.n_records + wanted > self.max_records {
            let what = format!("fork of session {session_id:?} at {point_id:?}");
            return Err(self.full(&what, wanted, state.n_records));
        }
        // Sequences only increase, so a caller may have used the last sequence number; the
        // audit record then has none left, and the fork is refused before it changes
        // anything rather than overflowing.
        let tail = match original.last() {
            Some(last) => last
                .sequence
                .checked_add(1)
                .ok_or_else(|| no_sequence_left(session_id))?,
            None => 0,
        };
        let new_id = loop {
            let n = self.forks.fetch_add(1, Ordering::Relaxed);
            let candidate = fork_session_id(session_id, point_id, n);
            if !state.sessions.contains_key(&candidate) {
                break candidate;
            }
        };
        let timestamp_ms = now_ms();
        let branch: Vec<SessionRecord> = original[..=cut]
            .iter()
            .map(|record| SessionRecord {
                session_id: new_id.clone(),
                ..record.clone()
            })
            .collect();
        let audit = SessionRecord {
            session_id: session_id.to_owned(),
            sequence: tail,
            timestamp_ms,
            event: SessionEvent::Fork {
                from_point: point_id.to_owned(),
                to_session: new_id.clone(),
            },
        };
        state.n_records += wanted;
        state.sessions.insert(new_id.clone(), branch);
        if let Some(original) = state.sessions.get_mut(session_id) {
            original.push(audit);
        }
        Ok(new_id)
    }

    fn sessions(&self) -> Result<Vec<String>, PluginError> {
        let mut ids: Vec<String> = self.lock().sessions.keys().cloned().collect();
        ids.sort();
        Ok(ids)
    }

    /// An append is a push onto a vector under a lock.
    fn appends_may_wait(&self) -> bool {
        false
    }

    fn gauge(&self) -> BackendGauge {
        BackendGauge {
            records: Some(self.n_records() as u64),
            max_records: Some(self.max_records as u64),
            bytes_on_disk: None,
        }
    }
}
