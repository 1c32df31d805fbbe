//! `FileBackend::replay_each` hands over exactly what `replay` returns: the same records for
//! clean and recovered files, the same error for refused and unreadable ones, across read
//! chunks and under damage anywhere.

// The helpers below are test code outside `#[test]` fns, where clippy's test allowance ends.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use cuca_events::{PluginError, ReplayedRecord, SessionBackend, SessionEvent, SessionRecord};
use cuca_store_file::golden::golden_files;
use cuca_store_file::{encode_frame, FileBackend, HEADER};
use proptest::prelude::*;

/// What a visit saw (every record, owned, in order) and how it ended.
fn visited(
    backend: &dyn SessionBackend,
    session_id: &str,
) -> (Vec<SessionRecord>, Result<(), PluginError>) {
    let mut records = Vec::new();
    let result = backend.replay_each(session_id, &mut |record: ReplayedRecord<'_>| {
        records.push(record.into_owned());
        Ok(())
    });
    (records, result)
}

/// `PluginError` has no `PartialEq` (it carries sources); its variant and fields print.
fn same_error(left: &PluginError, right: &PluginError) -> bool {
    format!("{left:?}") == format!("{right:?}")
}

/// `replay_each` agrees with `replay` on `session_id`: equal records when `replay` loads,
/// the same error otherwise (after which the visited records are the caller's to discard).
fn assert_agrees(backend: &dyn SessionBackend, session_id: &str) -> Option<PluginError> {
    let (records, result) = visited(backend, session_id);
    match (backend.replay(session_id), result) {
        (Ok(expected), Ok(())) => {
            assert_eq!(records, expected);
            None
        }
        (Err(expected), Err(got)) => {
            assert!(same_error(&expected, &got), "{expected:?} != {got:?}");
            Some(got)
        }
        (expected, got) => panic!("replay gave {expected:?}, replay_each gave {got:?}"),
    }
}

fn write_session(dir: &Path, session_id: &str, bytes: &[u8]) {
    std::fs::write(dir.join(format!("{session_id}.cslog")), bytes).unwrap();
}

fn text_record(sequence: u64, len: usize) -> SessionRecord {
    SessionRecord {
        session_id: "long".into(),
        sequence,
        timestamp_ms: 1_700_000_000_000 + sequence,
        event: SessionEvent::Reasoning {
            text: "the vault is in lisbon ".repeat(len / 23 + 1)[..len].to_owned(),
        },
    }
}

/// A session file spanning several 64 KiB read chunks, so frames straddle chunk ends.
fn long_file(n_records: u64) -> (Vec<SessionRecord>, Vec<u8>) {
    let records: Vec<_> = (0..n_records)
        .map(|sequence| text_record(sequence, 40 + (sequence as usize * 37) % 900))
        .collect();
    let mut bytes = HEADER.to_vec();
    for record in &records {
        encode_frame(record, &mut bytes).unwrap();
    }
    (records, bytes)
}

#[test]
fn every_golden_file_replays_each_as_replay_does() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    for golden in golden_files().unwrap() {
        let session_id = golden.name.trim_end_matches(".cslog");
        write_session(dir.path(), session_id, &golden.bytes);
        let (records, result) = visited(&backend, session_id);
        match golden.name {
            // Clean; recovered past a torn tail; recovered past a sealed (skipped) frame whose
            // neighbours continue the sequence.
            "empty.cslog"
            | "all_variants.cslog"
            | "torn_tail.cslog"
            | "sealed.cslog"
            | "v1_sealed.cslog"
            | "v1_damaged_last.cslog" => {
                result.unwrap();
                assert_eq!(
                    records,
                    backend.replay(session_id).unwrap(),
                    "{}",
                    golden.name
                );
            }
            // Refused: frame 3 is damaged and the next good record is sequence 4. Records 0..=2
            // were visited before the refusal could be known; the error is replay's own.
            // Refused when the last good record is read: the damaged frame after it is not
            // a sealed torn frame. Every record was visited; the error is replay's own.
            "damaged_last.cslog" => {
                let error = result.unwrap_err();
                let expected = backend.replay(session_id).unwrap_err();
                assert!(same_error(&error, &expected), "{error:?} != {expected:?}");
                assert!(matches!(error, PluginError::Corrupt { .. }), "{error:?}");
                assert_eq!(records.len(), 9);
            }
            "gap.cslog" => {
                let error = result.unwrap_err();
                let expected = backend.replay(session_id).unwrap_err();
                assert!(same_error(&error, &expected), "{error:?} != {expected:?}");
                assert!(matches!(error, PluginError::Corrupt { .. }), "{error:?}");
                let sequences: Vec<u64> = records.iter().map(|record| record.sequence).collect();
                assert_eq!(sequences, [0, 1, 2]);
            }
            other => panic!("a golden file this test does not know: {other}"),
        }
        // The golden records belong to session "golden", whatever the file is called: the
        // id is the stored one, borrowed, not the one asked for.
        assert!(records.iter().all(|record| record.session_id == "golden"));
    }
    let sealed: Vec<u64> = visited(&backend, "sealed")
        .0
        .iter()
        .map(|record| record.sequence)
        .collect();
    assert_eq!(sealed, (0..=10).collect::<Vec<_>>());
}

#[test]
fn a_session_across_read_chunks_replays_each_whole() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let (records, bytes) = long_file(400);
    assert!(bytes.len() > 3 * 64 * 1024, "{} bytes", bytes.len());
    write_session(dir.path(), "long", &bytes);
    let (visited, result) = visited(&backend, "long");
    result.unwrap();
    assert_eq!(visited, records);
    assert_agrees(&backend, "long");
}

#[test]
fn unknown_invalid_and_unreadable_sessions_fail_or_succeed_as_replay_does() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    // Unknown: visits nothing, like the empty Vec of replay.
    let (records, result) = visited(&backend, "nobody");
    result.unwrap();
    assert!(records.is_empty());
    // An id that cannot name a file.
    let error = assert_agrees(&backend, "../etc").unwrap();
    assert!(matches!(error, PluginError::Validation { .. }), "{error:?}");
    // Not a .cslog file, and a version this build does not read.
    write_session(dir.path(), "alien", b"NOTACSLOG and more");
    let error = assert_agrees(&backend, "alien").unwrap();
    assert!(
        matches!(error, PluginError::Corrupt { offset: 0, .. }),
        "{error:?}"
    );
    let mut future = HEADER.to_vec();
    future[HEADER.len() - 1] = 3;
    write_session(dir.path(), "future", &future);
    let error = assert_agrees(&backend, "future").unwrap();
    assert!(
        matches!(error, PluginError::Corrupt { offset: 8, .. }),
        "{error:?}"
    );
    // A header cut short by a crash at creation: recovered, nothing recorded.
    write_session(dir.path(), "cut", b"CUCA");
    assert_agrees(&backend, "cut");
    // A directory where the file should be.
    std::fs::create_dir(dir.path().join("folder.cslog")).unwrap();
    let error = assert_agrees(&backend, "folder").unwrap();
    assert!(matches!(error, PluginError::Io { .. }), "{error:?}");
}

#[test]
fn an_error_from_the_visitor_stops_the_visit_and_comes_back_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let (_, bytes) = long_file(400);
    write_session(dir.path(), "long", &bytes);
    let mut seen = Vec::new();
    let result = backend.replay_each("long", &mut |record| {
        seen.push(record.sequence);
        if record.sequence == 250 {
            return Err(PluginError::validation("test", "stop at 250"));
        }
        Ok(())
    });
    match result {
        Err(PluginError::Validation { schema, message }) => {
            assert_eq!((schema.as_str(), message.as_str()), ("test", "stop at 250"));
        }
        other => panic!("expected the visitor's error, got {other:?}"),
    }
    assert_eq!(seen, (0..=250).collect::<Vec<_>>());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Under any damage a crash or a bad disk leaves (the file cut at any byte, a byte
    /// flipped anywhere, a run of bytes zeroed), across read chunks, `replay_each` visits
    /// what `replay` returns or fails with `replay`'s error.
    #[test]
    fn replay_each_agrees_with_replay_under_damage(
        cut in 0.0f64..=1.0,
        flip in proptest::option::of((0.0f64..1.0, 1u8..=255)),
        zeroed in proptest::option::of((0.0f64..1.0, 1usize..40)),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let backend = FileBackend::new(dir.path()).unwrap();
        let (_, mut bytes) = long_file(160);
        if let Some((at, mask)) = flip {
            let at = (at * bytes.len() as f64) as usize;
            bytes[at] ^= mask;
        }
        if let Some((at, len)) = zeroed {
            let at = (at * bytes.len() as f64) as usize;
            let end = (at + len).min(bytes.len());
            bytes[at..end].fill(0);
        }
        bytes.truncate((cut * bytes.len() as f64) as usize);
        write_session(dir.path(), "long", &bytes);
        assert_agrees(&backend, "long");
    }
}
