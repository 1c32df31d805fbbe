//! `FileBackend::repair` is the deliberate way for a person who accepts the loss: it writes a
//! new file, keeps the damaged one aside, never edits in place, and says what was dropped.

// Test helpers unwrap: a failure there should stop the test.
#![allow(clippy::unwrap_used)]

use cuca_events::{PluginError, SessionBackend, SessionEvent, SessionRecord};
use cuca_store_file::{encode_frame, FileBackend, Verdict, HEADER, HEADER_LEN};

fn record(sequence: u64) -> SessionRecord {
    SessionRecord {
        session_id: "s".into(),
        sequence,
        timestamp_ms: 1_700_000_000_000,
        event: SessionEvent::Output {
            text: format!("record {sequence}"),
        },
    }
}

fn file_of(sequences: &[u64]) -> (Vec<u8>, Vec<usize>) {
    let mut bytes = HEADER.to_vec();
    let mut starts = Vec::new();
    for &sequence in sequences {
        starts.push(bytes.len());
        encode_frame(&record(sequence), &mut bytes).unwrap();
    }
    (bytes, starts)
}

#[test]
fn a_refused_file_is_rewritten_with_its_good_records_and_the_damaged_one_kept_aside() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.cslog");
    let (mut bytes, starts) = file_of(&[0, 1, 2, 3]);
    // One bit of the last record: a load refuses.
    bytes[starts[3] + 3] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    assert!(matches!(
        backend.replay("s"),
        Err(PluginError::Corrupt { .. })
    ));

    let repair = backend.repair("s").unwrap().unwrap();
    assert_eq!(repair.path, path);
    assert_eq!(repair.kept_aside, dir.path().join("s.cslog.damaged"));
    assert!(
        matches!(repair.verdict_before, Verdict::Refused { offset, .. } if offset == starts[3] as u64)
    );
    assert_eq!(repair.records_kept, 3);
    assert_eq!(repair.skipped_frames, 1);
    assert_eq!(repair.skipped[0].offset, starts[3] as u64);
    assert!(repair.dropped_records.is_empty());
    // Never edited in place: the damaged bytes are whole, aside; the new file is clean.
    assert_eq!(std::fs::read(&repair.kept_aside).unwrap(), bytes);
    assert_eq!(
        backend.replay("s").unwrap(),
        (0..3).map(record).collect::<Vec<_>>()
    );
    assert_eq!(backend.verify("s").unwrap().verdict, Verdict::Clean);
    // The aside file is no session, and the session appends on from its last record.
    assert_eq!(backend.sessions().unwrap(), vec!["s"]);
    backend.append(record(3)).unwrap();
    assert_eq!(backend.replay("s").unwrap().len(), 4);
}

#[test]
fn a_clean_file_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, _) = file_of(&[0, 1]);
    std::fs::write(dir.path().join("s.cslog"), &bytes).unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    assert_eq!(backend.repair("s").unwrap(), None);
    assert_eq!(std::fs::read(dir.path().join("s.cslog")).unwrap(), bytes);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

/// Sequences that do not increase (a v1 file of two interleaved writers): the repeated and
/// backward records are dropped and named, a second repair keeps a second aside file.
#[test]
fn records_whose_sequence_does_not_increase_are_dropped_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.cslog");
    let (mut bytes, _) = file_of(&[0, 1, 1, 2, 0, 3]);
    bytes[HEADER_LEN - 1] = cuca_store_file::VERSION_1;
    std::fs::write(&path, &bytes).unwrap();
    std::fs::write(dir.path().join("s.cslog.damaged"), b"an earlier repair's").unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let repair = backend.repair("s").unwrap().unwrap();
    assert_eq!(repair.kept_aside, dir.path().join("s.cslog.damaged.1"));
    assert_eq!(repair.records_kept, 4);
    let dropped: Vec<(u64, u64)> = repair
        .dropped_records
        .iter()
        .map(|dropped| (dropped.sequence, dropped.after))
        .collect();
    assert_eq!(dropped, [(1, 1), (0, 2)]);
    let sequences: Vec<u64> = backend
        .replay("s")
        .unwrap()
        .iter()
        .map(|record| record.sequence)
        .collect();
    assert_eq!(sequences, [0, 1, 2, 3]);
    assert_eq!(
        std::fs::read(dir.path().join("s.cslog.damaged")).unwrap(),
        b"an earlier repair's"
    );
    // The new file is v2.
    assert_eq!(std::fs::read(&path).unwrap()[HEADER_LEN - 1], 2);
}

#[test]
fn a_file_held_by_a_writer_or_not_a_cslog_is_not_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let writer = FileBackend::new(dir.path()).unwrap();
    writer.append(record(0)).unwrap();
    let other = FileBackend::new(dir.path()).unwrap();
    let before = std::fs::read(dir.path().join("s.cslog")).unwrap();
    assert!(matches!(other.repair("s"), Err(PluginError::Locked { .. })));
    assert_eq!(std::fs::read(dir.path().join("s.cslog")).unwrap(), before);

    std::fs::write(dir.path().join("alien.cslog"), b"{\"json\": true}").unwrap();
    assert!(matches!(
        other.repair("alien"),
        Err(PluginError::Corrupt { offset: 0, .. })
    ));
    assert!(matches!(
        other.repair("nobody"),
        Err(PluginError::NotFound { .. })
    ));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}
