//! Unit tests of InMemoryBackend: the cap, fork atomicity and gauges.

use cuca_events::{PluginError, SessionBackend, SessionEvent};
use cuca_testkit::{append_all, demo_turn, record};

use super::InMemoryBackend;

/// "at the cap an append is refused with a clear PluginError, never evicted"
#[test]
fn at_the_cap_an_append_is_refused_and_nothing_is_evicted() {
    let backend = InMemoryBackend::with_max_records(3).unwrap();
    let turn = demo_turn("demo", 0);
    append_all(&backend, &turn[..3]);
    let refused = backend.append(turn[3].clone());
    match refused {
        Err(PluginError::CapacityExceeded { cap, resource, .. }) => {
            assert_eq!(cap, 3);
            assert_eq!(resource, "InMemoryBackend");
        }
        other => panic!("expected CapacityExceeded, got {other:?}"),
    }
    assert_eq!(backend.replay("demo").unwrap(), turn[..3].to_vec());
}

/// "fork on InMemoryBackend checks the cap before it changes anything. It needs room for the
/// branch prefix plus the Fork audit record, and fails whole when that does not fit."
#[test]
fn fork_that_does_not_fit_fails_whole() {
    let backend = InMemoryBackend::with_max_records(9).unwrap();
    let turn = demo_turn("demo", 0); // 7 records
    append_all(&backend, &turn);
    // Prefix of 2 + audit 1 = 3 > 2 free.
    let refused = backend.fork("demo", "demo:1");
    assert!(
        matches!(refused, Err(PluginError::CapacityExceeded { cap: 9, .. })),
        "{refused:?}"
    );
    assert_eq!(backend.replay("demo").unwrap(), turn);
    assert_eq!(backend.sessions().unwrap(), vec!["demo".to_owned()]);
    assert_eq!(backend.n_records(), 7);
    // Prefix of 1 + audit 1 = 2 fits exactly.
    let branch = backend.fork("demo", "demo:0").unwrap();
    assert_eq!(backend.replay(&branch).unwrap().len(), 1);
    assert_eq!(backend.n_records(), 9);
}

#[test]
fn gauge_counts_records_against_the_default_cap() {
    let backend = InMemoryBackend::new();
    append_all(&backend, &demo_turn("demo", 0));
    let gauge = backend.gauge();
    assert_eq!(gauge.records, Some(7));
    assert_eq!(gauge.max_records, Some(65_536));
    assert_eq!(gauge.bytes_on_disk, None);
}

#[test]
fn a_zero_cap_is_refused() {
    assert!(matches!(
        InMemoryBackend::with_max_records(0),
        Err(PluginError::Validation { .. })
    ));
}

#[test]
fn the_audit_record_follows_the_last_sequence_even_with_gaps() {
    let backend = InMemoryBackend::new();
    append_all(
        &backend,
        &[
            record("s", 0, SessionEvent::Output { text: "a".into() }),
            record("s", 5, SessionEvent::Output { text: "b".into() }),
        ],
    );
    backend.fork("s", "s:0").unwrap();
    let records = backend.replay("s").unwrap();
    assert_eq!(records.last().map(|r| r.sequence), Some(6));
}

/// "Every failure a user can cause gets a typed error that names the thing (session …)": the
/// cap refusal says which session's append, or which fork, did not fit.
#[test]
fn the_cap_refusal_names_the_session_and_the_fork_it_refused() {
    let backend = InMemoryBackend::with_max_records(2).unwrap();
    append_all(&backend, &demo_turn("demo", 0)[..2]);
    let refused = backend.append(record(
        "other",
        0,
        SessionEvent::Output { text: "x".into() },
    ));
    let message = refused.unwrap_err().to_string();
    assert!(message.contains("append to session \"other\""), "{message}");
    assert!(message.contains("at its cap of 2"), "{message}");
    let refused = backend.fork("demo", "demo:0");
    let message = refused.unwrap_err().to_string();
    assert!(
        message.contains("fork of session \"demo\" at \"demo:0\""),
        "{message}"
    );
}

/// "Nothing panics on bad input": backends store records as given, so a caller may append
/// sequence u64::MAX; a fork then has no sequence for its audit record and is refused whole.
#[test]
fn a_fork_of_a_session_ending_at_the_last_sequence_is_refused_and_changes_nothing() {
    let backend = InMemoryBackend::new();
    let records = [
        record("s", 0, SessionEvent::Output { text: "a".into() }),
        // Built by hand: the testkit's `record` stamps a time derived from the sequence.
        cuca_events::SessionRecord {
            session_id: "s".into(),
            sequence: u64::MAX,
            timestamp_ms: 0,
            event: SessionEvent::Output { text: "b".into() },
        },
    ];
    append_all(&backend, &records);
    match backend.fork("s", "s:0") {
        Err(PluginError::CapacityExceeded { resource, cap, .. }) => {
            assert_eq!(resource, "session \"s\"");
            assert_eq!(cap, u64::MAX);
        }
        other => panic!("expected CapacityExceeded, got {other:?}"),
    }
    assert_eq!(backend.replay("s").unwrap(), records.to_vec());
    assert_eq!(backend.sessions().unwrap(), vec!["s".to_owned()]);
    assert_eq!(backend.n_records(), 2);
}

/// "The new id is {session_id}:fork:{point_id}:{n}, where n counts forks on that backend
/// instance": one counter for every session of the instance, starting at 0.
#[test]
fn n_counts_forks_across_the_whole_instance() {
    let backend = InMemoryBackend::new();
    append_all(&backend, &demo_turn("demo", 0));
    append_all(&backend, &demo_turn("other", 0));
    assert_eq!(
        backend.fork("demo", "demo:1").unwrap(),
        "demo:fork:demo:1:0"
    );
    assert_eq!(
        backend.fork("other", "other:0").unwrap(),
        "other:fork:other:0:1"
    );
    assert_eq!(
        backend.fork("demo", "demo:1").unwrap(),
        "demo:fork:demo:1:2"
    );
    // A second instance counts its own forks.
    let fresh = InMemoryBackend::new();
    append_all(&fresh, &demo_turn("demo", 0));
    assert_eq!(fresh.fork("demo", "demo:1").unwrap(), "demo:fork:demo:1:0");
}

/// `replay_each` visits exactly what `replay` returns, for plain, forked, audited and unknown
/// sessions, and a visitor's error stops the visit and comes back unchanged.
#[test]
fn replay_each_visits_what_replay_returns() {
    let backend = InMemoryBackend::new();
    let mut records = demo_turn("demo", 0);
    records.extend(demo_turn("other", 0));
    records.extend(demo_turn("demo", 7));
    append_all(&backend, &records);
    let branch = backend.fork("demo", "demo:3").unwrap();
    for session_id in ["demo", "other", branch.as_str(), "nobody"] {
        let mut visited = Vec::new();
        backend
            .replay_each(session_id, &mut |record| {
                visited.push(record.into_owned());
                Ok(())
            })
            .unwrap();
        assert_eq!(visited, backend.replay(session_id).unwrap(), "{session_id}");
    }
    let mut seen = 0;
    let stopped = backend.replay_each("demo", &mut |record| {
        seen += 1;
        match record.sequence {
            2 => Err(PluginError::validation("test", "stop at 2")),
            _ => Ok(()),
        }
    });
    assert!(
        matches!(&stopped, Err(PluginError::Validation { message, .. }) if message == "stop at 2"),
        "{stopped:?}"
    );
    assert_eq!(seen, 3);
    // The visitor runs without the lock: it may use the backend.
    backend
        .replay_each("other", &mut |_| backend.replay("demo").map(|_| ()))
        .unwrap();
}
