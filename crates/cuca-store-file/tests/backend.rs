//! FileBackend behaviour beyond the shared suite: locking, durability, forks across restarts,
//! the seal, sizes on disk.

use cuca_events::{PluginError, SessionBackend, SessionEvent};
use cuca_store_file::{Durability, FileBackend, Verdict, HEADER};
use cuca_testkit::{append_all, demo_turn, record};

/// "a second process gets a clear error, not interleaved sequences" — two backends on one
/// dir appending to one session: the second gets Locked naming the file.
#[test]
fn a_second_backend_appending_to_a_locked_session_gets_locked() {
    let dir = tempfile::tempdir().unwrap();
    let first = FileBackend::new(dir.path()).unwrap();
    let second = FileBackend::new(dir.path()).unwrap();
    let turn = demo_turn("demo", 0);
    append_all(&first, &turn[..3]);
    let before = std::fs::read(dir.path().join("demo.cslog")).unwrap();

    match second.append(turn[3].clone()) {
        Err(PluginError::Locked { path, message }) => {
            assert_eq!(path, dir.path().join("demo.cslog"));
            assert!(message.contains("open for append"), "{message}");
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    assert!(matches!(
        second.fork("demo", "demo:1"),
        Err(PluginError::Locked { .. })
    ));
    assert_eq!(
        std::fs::read(dir.path().join("demo.cslog")).unwrap(),
        before
    );
    assert_eq!(
        second.sessions().unwrap(),
        vec!["demo".to_owned()],
        "the failed fork made no branch"
    );

    // Replay is allowed while another holds the lock.
    assert_eq!(second.replay("demo").unwrap(), turn[..3].to_vec());
    // Other sessions are not locked.
    second
        .append(record("other", 0, SessionEvent::Latency { duration_ms: 1 }))
        .unwrap();

    // Closing the first handle releases the lock.
    assert!(first.close("demo"));
    append_all(&second, &turn[3..]);
    assert_eq!(first.replay("demo").unwrap(), turn);
    assert!(matches!(
        first.append(record("demo", 7, SessionEvent::Latency { duration_ms: 1 })),
        Err(PluginError::Locked { .. })
    ));
}

/// "Durability is a knob … Durability::Sync adds fdatasync per append".
#[test]
fn sync_durability_appends_and_replays_the_same_bytes_as_buffered() {
    let dir = tempfile::tempdir().unwrap();
    let synced = FileBackend::new(dir.path().join("sync"))
        .unwrap()
        .with_durability(Durability::Sync);
    let buffered = FileBackend::new(dir.path().join("buffered")).unwrap();
    assert_eq!(synced.durability(), Durability::Sync);
    assert_eq!(buffered.durability(), Durability::Buffered);
    let turn = demo_turn("demo", 0);
    append_all(&synced, &turn);
    append_all(&buffered, &turn);
    assert_eq!(synced.replay("demo").unwrap(), turn);
    assert_eq!(
        std::fs::read(dir.path().join("sync/demo.cslog")).unwrap(),
        std::fs::read(dir.path().join("buffered/demo.cslog")).unwrap()
    );
}

/// "a FileBackend reopened after a restart starts n at 0 again: n advances until the id is free"
#[test]
fn a_fork_after_a_restart_never_writes_into_an_earlier_branch() {
    let dir = tempfile::tempdir().unwrap();
    let turn = demo_turn("demo", 0);
    let first_branch = {
        let backend = FileBackend::new(dir.path()).unwrap();
        append_all(&backend, &turn);
        backend.fork("demo", "demo:1").unwrap()
    };
    assert_eq!(first_branch, "demo:fork:demo:1:0");
    let branch_bytes = std::fs::read(dir.path().join("demo:fork:demo:1:0.cslog")).unwrap();

    let backend = FileBackend::new(dir.path()).unwrap();
    let second_branch = backend.fork("demo", "demo:1").unwrap();
    assert_eq!(second_branch, "demo:fork:demo:1:1");
    assert_eq!(
        std::fs::read(dir.path().join("demo:fork:demo:1:0.cslog")).unwrap(),
        branch_bytes
    );
    let original = backend.replay("demo").unwrap();
    assert_eq!(original.len(), turn.len() + 2);
    assert_eq!(original[turn.len() + 1].sequence, turn.len() as u64 + 1);
    assert_eq!(
        original[turn.len() + 1].event,
        SessionEvent::Fork {
            from_point: "demo:1".into(),
            to_session: second_branch.clone(),
        }
    );
    assert_eq!(
        backend.sessions().unwrap(),
        vec!["demo", "demo:fork:demo:1:0", "demo:fork:demo:1:1"]
    );
}

/// "A missing file replays as an empty session", and "Each .cslog file starts with the 8-byte
/// magic CUCASLOG and a one-byte format version, 1, written once when the file is created."
#[test]
fn a_file_starts_with_the_header_once_and_grows_only_at_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path().join("nested/dir")).unwrap();
    assert!(backend.replay("demo").unwrap().is_empty());
    assert_eq!(backend.bytes_on_disk("demo").unwrap(), 0);
    let turn = demo_turn("demo", 0);
    let mut previous = Vec::new();
    for record in &turn {
        backend.append(record.clone()).unwrap();
        let bytes = std::fs::read(backend.session_path("demo").unwrap()).unwrap();
        assert_eq!(&bytes[..9], &HEADER);
        assert!(bytes.starts_with(&previous) || previous.is_empty());
        assert_eq!(bytes.last(), Some(&0));
        previous = bytes;
    }
    assert_eq!(
        &previous[9..].iter().filter(|&&b| b == 0).count(),
        &turn.len()
    );
    assert_eq!(previous.windows(8).filter(|w| w == b"CUCASLOG").count(), 1);
}

/// The seed's "gauge: … 1647 bytes on disk": bytes on disk per session and in total.
#[test]
fn bytes_on_disk_are_the_session_files_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    append_all(&backend, &demo_turn("a", 0));
    append_all(&backend, &demo_turn("b", 0));
    std::fs::write(dir.path().join("notes.txt"), b"not a session").unwrap();
    let a = std::fs::metadata(dir.path().join("a.cslog")).unwrap().len();
    let b = std::fs::metadata(dir.path().join("b.cslog")).unwrap().len();
    assert_eq!(backend.bytes_on_disk("a").unwrap(), a);
    let gauge = backend.gauge();
    assert_eq!(gauge.bytes_on_disk, Some(a + b));
    assert_eq!(gauge.records, None);
    assert_eq!(backend.sessions().unwrap(), vec!["a", "b"]);
}

/// "the next append first writes a lone 0x00 to seal the torn bytes into their own frame,
/// then its own frame" — since v2 the seal is recognisable: `SEAL_MARK` then the `0x00`.
#[test]
fn the_next_append_seals_a_torn_tail_with_the_recognisable_seal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.cslog");
    let turn = demo_turn("s", 0);
    {
        let backend = FileBackend::new(dir.path()).unwrap();
        append_all(&backend, &turn[..2]);
    }
    let mut bytes = std::fs::read(&path).unwrap();
    let clean_len = bytes.len();
    bytes.extend_from_slice(&[0x05, 0x73, 0x02]); // half a frame
    std::fs::write(&path, &bytes).unwrap();

    let backend = FileBackend::new(dir.path()).unwrap();
    let report = backend.verify("s").unwrap();
    assert_eq!(report.verdict, Verdict::Recovered);
    assert_eq!(report.torn_tail_bytes, 3);
    assert_eq!(backend.replay("s").unwrap(), turn[..2].to_vec());

    append_all(&backend, &turn[2..4]);
    let after = std::fs::read(&path).unwrap();
    assert_eq!(&after[..clean_len + 3], bytes.as_slice());
    let seal = clean_len + 3 + cuca_store_file::SEAL_MARK.len();
    assert_eq!(&after[clean_len + 3..seal], &cuca_store_file::SEAL_MARK);
    assert_eq!(after[seal], 0, "the seal's terminator");
    let mut frame = Vec::new();
    cuca_store_file::encode_frame(&turn[2], &mut frame).unwrap();
    assert_eq!(&after[seal + 1..seal + 1 + frame.len()], frame.as_slice());
    let report = backend.verify("s").unwrap();
    assert_eq!(report.records, turn[..4].to_vec());
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].offset, clean_len as u64);
    assert_eq!(report.skipped[0].sealed, 1);
    assert_eq!(report.torn_tail_bytes, 0);
}

/// A header cut short at creation holds nothing recorded: it replays empty, and the next
/// append finishes it.
#[test]
fn a_header_cut_short_at_creation_is_finished_by_the_next_append() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.cslog");
    std::fs::write(&path, b"CUCA").unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    assert!(backend.replay("s").unwrap().is_empty());
    assert_eq!(backend.verify("s").unwrap().verdict, Verdict::Recovered);
    let first = record("s", 0, SessionEvent::Output { text: "x".into() });
    backend.append(first.clone()).unwrap();
    assert_eq!(backend.replay("s").unwrap(), vec![first]);
    assert_eq!(backend.verify("s").unwrap().verdict, Verdict::Clean);
}

/// A fork creates the branch file under this instance's lock and keeps it open, so the same
/// instance appends to the branch at once, and another backend gets Locked until `close`.
#[test]
fn a_fork_holds_the_branch_open_for_append_until_close() {
    let dir = tempfile::tempdir().unwrap();
    let first = FileBackend::new(dir.path()).unwrap();
    let second = FileBackend::new(dir.path()).unwrap();
    append_all(&first, &demo_turn("demo", 0));
    let branch = first.fork("demo", "demo:1").unwrap();
    let next = record(&branch, 2, SessionEvent::Output { text: "b".into() });
    assert!(matches!(
        second.append(next.clone()),
        Err(PluginError::Locked { path, .. }) if path == dir.path().join(format!("{branch}.cslog"))
    ));
    assert!(first.close(&branch));
    second.append(next.clone()).unwrap();
    let records = first.replay(&branch).unwrap();
    assert_eq!(records.len(), 3);
    assert_eq!(records.last(), Some(&next));
}

/// An append waits on nothing but the kernel's page cache unless every append is flushed:
/// what a caller on an async runtime reads to decide whether to append in place.
#[test]
fn appends_may_wait_only_when_every_append_is_flushed() {
    let dir = tempfile::tempdir().unwrap();
    let buffered = FileBackend::new(dir.path()).unwrap();
    assert!(!buffered.appends_may_wait());
    let synced = FileBackend::new(dir.path())
        .unwrap()
        .with_durability(Durability::Sync);
    assert!(synced.appends_may_wait());
}
