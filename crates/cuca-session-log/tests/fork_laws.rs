//! The fork laws as properties, over both backends, through `SessionLogPlugin::fork_session`.
//!
//! Seed 000, "Forking": "fork_session(session_id, point_id) branches from any historical
//! point. The new session holds the original's prefix up to and including that point,
//! relabelled with the new session id. The original gains one SessionEvent::Fork record, and
//! the plugin then realigns that session's next sequence number to its replayed length. The
//! new id is {session_id}:fork:{point_id}:{n}, where n counts forks on that backend instance."

// Helpers outside #[test] fns unwrap too: a failed append is a failed case.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use cuca_events::{fork_session_id, SessionBackend, SessionEvent, SessionRecord};
use cuca_session_log::SessionLogPlugin;
use cuca_store_file::FileBackend;
use cuca_store_mem::InMemoryBackend;
use proptest::prelude::*;

/// Records `n` events through the plugin and returns the session as stored.
fn record_n(log: &SessionLogPlugin, n: usize) -> Vec<SessionRecord> {
    for i in 0..n {
        log.append_log(SessionEvent::Output {
            text: format!("o{i}"),
        })
        .unwrap();
    }
    log.backend().replay(log.session_id()).unwrap()
}

/// Checks every law for forks at `points` (indices into the session, taken modulo its
/// length) on one backend, each followed by a fork of the new branch.
fn check_laws(backend: Arc<dyn SessionBackend>, n_records: usize, points: &[usize]) {
    let log = SessionLogPlugin::new(Arc::clone(&backend)).with_session_id("demo");
    record_n(&log, n_records);
    // "n counts forks on that backend instance": every fork below, the branch forks
    // included, takes the next n.
    let mut n_forks = 0u64;
    for &point in points {
        let before = backend.replay("demo").unwrap();
        let point = point % before.len();
        let point_id = before[point].point_id();
        let new_id = log.fork_session("demo", &point_id).unwrap();
        assert_eq!(new_id, fork_session_id("demo", &point_id, n_forks));
        n_forks += 1;

        // The branch is the relabelled prefix up to and including the point.
        let branch = backend.replay(&new_id).unwrap();
        let prefix: Vec<SessionRecord> = before[..=point]
            .iter()
            .map(|record| SessionRecord {
                session_id: new_id.clone(),
                ..record.clone()
            })
            .collect();
        assert_eq!(branch, prefix);

        // The original gains exactly one Fork record, at its tail.
        let after = backend.replay("demo").unwrap();
        assert_eq!(after.len(), before.len() + 1);
        assert_eq!(&after[..before.len()], before.as_slice());
        let audit = &after[before.len()];
        assert_eq!(audit.sequence, before.len() as u64);
        assert_eq!(
            audit.event,
            SessionEvent::Fork {
                from_point: point_id.clone(),
                to_session: new_id.clone(),
            }
        );

        // The plugin realigned: its next record follows the audit record.
        let next = log
            .append_log(SessionEvent::Output {
                text: "next".into(),
            })
            .unwrap();
        assert_eq!(next.sequence, after.len() as u64);

        // A branch forks like any session, its point id split at the last ':'.
        let branch_point = format!("{new_id}:{point}");
        let grandchild = backend.fork(&new_id, &branch_point).unwrap();
        assert_eq!(grandchild, fork_session_id(&new_id, &branch_point, n_forks));
        n_forks += 1;
        assert_eq!(backend.replay(&grandchild).unwrap().len(), point + 1);
        assert_eq!(backend.replay(&new_id).unwrap().len(), point + 2);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn fork_laws_hold_on_the_in_memory_backend(n_records in 1usize..30, points in prop::collection::vec(any::<usize>(), 1..4)) {
        check_laws(Arc::new(InMemoryBackend::new()), n_records, &points);
    }

    #[test]
    fn fork_laws_hold_on_the_file_backend(n_records in 1usize..30, points in prop::collection::vec(any::<usize>(), 1..4)) {
        let dir = tempfile::tempdir().unwrap();
        check_laws(Arc::new(FileBackend::new(dir.path()).unwrap()), n_records, &points);
    }
}
