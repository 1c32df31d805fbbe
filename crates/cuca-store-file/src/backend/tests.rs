//! Unit tests of an append handle's failure states.

use cuca_events::{PluginError, SessionEvent};
use cuca_testkit::record;

use super::{Durability, Handle};

fn handle_in(dir: &std::path::Path) -> (Handle, std::path::PathBuf) {
    let path = dir.join("s.cslog");
    let file = crate::files::open_regular(&path, crate::files::Mode::CreateNew).unwrap();
    crate::files::try_lock(&file, &path).unwrap();
    let handle = Handle::start(file, &path, dir, Durability::Buffered, &[]).unwrap();
    (handle, path)
}

/// "An fsync error makes the handle refuse further appends (it never retries and reports
/// success)."
#[test]
fn a_handle_whose_sync_failed_refuses_every_later_append_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut handle, path) = handle_in(dir.path());
    let first = record("s", 0, SessionEvent::Output { text: "a".into() });
    handle.append(&first, Durability::Sync).unwrap();
    let before = std::fs::read(&path).unwrap();
    // What `append` records when `sync_data` fails.
    handle.failed = Some("Input/output error (os error 5)".into());
    for durability in [Durability::Sync, Durability::Buffered] {
        let refused = handle.append(
            &record("s", 1, SessionEvent::Output { text: "b".into() }),
            durability,
        );
        match refused {
            Err(PluginError::Backend {
                backend, message, ..
            }) => {
                assert_eq!(backend, "file");
                assert!(message.contains("an earlier fsync failed"), "{message}");
                assert!(message.contains("s.cslog"), "{message}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

/// "A short write is an error: the handle never 'finishes' a partial frame … and the file
/// stays readable to the last acknowledged record": after a failed write the next append
/// reads the tail and seals whatever part of the frame reached the file.
#[test]
fn after_a_failed_write_the_next_append_probes_the_tail_and_seals_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut handle, path) = handle_in(dir.path());
    let first = record("s", 0, SessionEvent::Output { text: "a".into() });
    handle.append(&first, Durability::Buffered).unwrap();
    // What a short write leaves: the start of the next frame, and the handle told to look.
    let mut partial = Vec::new();
    crate::encode_frame(
        &record(
            "s",
            1,
            SessionEvent::Output {
                text: "lost".into(),
            },
        ),
        &mut partial,
    )
    .unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let clean_len = bytes.len();
    bytes.extend_from_slice(&partial[..4]);
    std::fs::write(&path, &bytes).unwrap();
    handle.probe_tail = true;

    let second = record("s", 1, SessionEvent::Output { text: "b".into() });
    handle.append(&second, Durability::Buffered).unwrap();
    let after = std::fs::read(&path).unwrap();
    assert_eq!(&after[..clean_len + 4], bytes.as_slice());
    assert_eq!(
        &after[clean_len + 4..clean_len + 4 + crate::codec::SEAL.len()],
        &crate::codec::SEAL,
        "the recognisable seal"
    );
    let report = crate::scan(&path).unwrap();
    assert_eq!(report.records, vec![first, second]);
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].offset, clean_len as u64);
    assert_eq!(report.skipped[0].sealed, 1);
}

/// A torn tail that is a whole frame short only of its terminator is sealed like any other:
/// the seal's first byte is a COBS code that runs past the frame, so it never reads as a
/// record nobody acknowledged.
#[test]
fn a_whole_frame_missing_its_terminator_never_reads_as_a_record_once_sealed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut handle, path) = handle_in(dir.path());
    let mut frame = Vec::new();
    // A long text, so the frame holds a full 254-byte COBS group too.
    let unacknowledged = record(
        "s",
        0,
        SessionEvent::Output {
            text: "x".repeat(300),
        },
    );
    crate::encode_frame(&unacknowledged, &mut frame).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&frame[..frame.len() - 1]);
    std::fs::write(&path, &bytes).unwrap();
    handle.probe_tail = true;

    let resumed = record("s", 0, SessionEvent::Output { text: "y".into() });
    handle.append(&resumed, Durability::Buffered).unwrap();
    let after = std::fs::read(&path).unwrap();
    assert_eq!(
        &after[bytes.len()..bytes.len() + crate::codec::SEAL.len()],
        &crate::codec::SEAL
    );
    let report = crate::scan(&path).unwrap();
    assert_eq!(report.records, vec![resumed]);
    assert_eq!(report.skipped[0].reason, crate::FrameError::Cobs);
}

/// "After `fork(2)` without exec, a child shares the parent's lock and can append between its
/// records": the handle remembers the process that locked it and refuses appends from any
/// other. (A child made by `fork(2)` sees the handle unchanged, with its parent's pid and
/// fork generation; `fork::tests` shows a real child is in another generation.)
#[test]
fn a_handle_refuses_appends_in_a_process_other_than_the_one_that_locked_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut handle, path) = handle_in(dir.path());
    handle
        .append(
            &record("s", 0, SessionEvent::Output { text: "a".into() }),
            Durability::Buffered,
        )
        .unwrap();
    let before = std::fs::read(&path).unwrap();
    // What a forked child's copy of the handle looks like from inside the child.
    handle.generation = crate::fork::generation().wrapping_add(1);
    let refused = handle.append(
        &record("s", 1, SessionEvent::Output { text: "b".into() }),
        Durability::Buffered,
    );
    match refused {
        Err(PluginError::Locked { path: at, message }) => {
            assert_eq!(at, path);
            assert!(message.contains("fork(2)"), "{message}");
            assert!(
                message.contains(&std::process::id().to_string()),
                "{message}"
            );
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    assert_eq!(std::fs::read(&path).unwrap(), before);
}
