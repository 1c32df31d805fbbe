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
