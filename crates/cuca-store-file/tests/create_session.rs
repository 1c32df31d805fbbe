//! `FileBackend::create_session`: create-if-absent, atomic, so two imports of one id cannot
//! interleave.

use cuca_events::{PluginError, SessionBackend, SessionEvent};
use cuca_store_file::FileBackend;
use cuca_testkit::{append_all, demo_turn, record};

/// Create-if-absent is atomic, so two imports of the same id cannot interleave. Two importers, each
/// with its own backend: the one that created the session holds it, the other is told it
/// exists — also in the window after the creation and before the first record, where a
/// check of the file alone would already see it but the creator has not written yet — and
/// writes nothing, ever, into it.
#[test]
fn of_two_importers_of_one_id_exactly_one_creates_and_only_its_records_land() {
    let dir = tempfile::tempdir().unwrap();
    let a = FileBackend::new(dir.path()).unwrap();
    let b = FileBackend::new(dir.path()).unwrap();
    assert!(a.create_session("imported").unwrap());
    // The window: created, nothing appended yet.
    assert!(!b.create_session("imported").unwrap());
    assert!(matches!(
        b.append(record(
            "imported",
            0,
            SessionEvent::Latency { duration_ms: 1 }
        )),
        Err(PluginError::Locked { .. })
    ));
    let turn = demo_turn("imported", 0);
    append_all(&a, &turn);
    assert!(!b.create_session("imported").unwrap());
    drop(a);
    // Released, and still not absent.
    assert!(!b.create_session("imported").unwrap());
    assert_eq!(b.replay("imported").unwrap(), turn);
    // The instance that created it says the same the second time.
    let c = FileBackend::new(dir.path()).unwrap();
    assert!(c.create_session("fresh").unwrap());
    assert!(!c.create_session("fresh").unwrap());
}

/// Many threads, each with its own backend, race to create one id: exactly one wins.
#[test]
fn racing_creators_get_exactly_one_true() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..20 {
        let id = format!("race-{round}");
        let barrier = std::sync::Barrier::new(4);
        let won: Vec<bool> = std::thread::scope(|scope| {
            // Every thread is spawned before any is joined: they meet at the barrier.
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    let (barrier, id, dir) = (&barrier, &id, dir.path());
                    scope.spawn(move || {
                        let backend = FileBackend::new(dir).unwrap();
                        barrier.wait();
                        let created = backend.create_session(id);
                        // Keep the winner's lock until every thread has answered.
                        barrier.wait();
                        created
                    })
                })
                .collect();
            threads
                .into_iter()
                .map(|thread| match thread.join().unwrap() {
                    Ok(created) => created,
                    // A loser may meet the winner between its create and its lock.
                    Err(PluginError::Locked { .. }) => false,
                    Err(error) => panic!("{error}"),
                })
                .collect()
        });
        assert_eq!(
            won.iter().filter(|&&won| won).count(),
            1,
            "round {round}: {won:?}"
        );
    }
}

/// A compacted session exists: it is not created again over its `.cslog.gz`.
#[test]
fn a_compacted_session_is_not_absent() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    append_all(&backend, &demo_turn("old", 0));
    backend.compact("old").unwrap();
    let other = FileBackend::new(dir.path()).unwrap();
    assert!(!other.create_session("old").unwrap());
    assert!(!dir.path().join("old.cslog").exists());
    assert_eq!(other.replay("old").unwrap(), demo_turn("old", 0));
}

/// The id rule applies before anything is touched.
#[test]
fn a_refused_id_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    for id in ["", "a/b", "esc\u{1b}", "line\nbreak"] {
        assert!(matches!(
            backend.create_session(id),
            Err(PluginError::Validation { .. })
        ));
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
