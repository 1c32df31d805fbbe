//! Bad input: refused session ids, foreign files, a directory in the file's place — each a
//! clear error value, and nothing on disk changed.

// The helpers below are test code outside `#[test]` fns, where clippy's test allowance ends.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use cuca_events::{PluginError, SessionBackend, SessionEvent};
use cuca_store_file::FileBackend;
use cuca_testkit::record;

use cuca_testkit::snapshot_dir as snapshot;

/// "FileBackend rejects a session id containing / or \ rather than mapping it into a
/// subdirectory" — and refuses before any file is touched.
#[test]
fn each_refused_session_id_is_a_validation_error_and_touches_nothing() {
    let root = tempfile::tempdir().unwrap();
    let store = root.path().join("store");
    let backend = FileBackend::new(&store).unwrap();
    std::fs::write(root.path().join("outside.cslog"), b"keep").unwrap();
    let before = snapshot(root.path());
    let long = "x".repeat(cuca_store_file::MAX_SESSION_ID_LEN + 1);
    for id in [
        "",
        "../outside",
        "a/b",
        "a\\b",
        "a\0b",
        ".",
        "..",
        "...",
        long.as_str(),
    ] {
        let output = SessionEvent::Output { text: "x".into() };
        let results = [
            backend.append(record(id, 0, output)).err(),
            backend.replay(id).err(),
            backend.fork(id, &format!("{id}:0")).err(),
            backend.verify(id).err(),
            backend.bytes_on_disk(id).err(),
        ];
        for result in results {
            assert!(
                matches!(&result, Some(PluginError::Validation { schema, .. }) if schema == "session_id"),
                "{id:?}: {result:?}"
            );
        }
    }
    assert_eq!(snapshot(root.path()), before);
}

fn assert_corrupt(result: Result<impl std::fmt::Debug, PluginError>, path: &Path, offset: u64) {
    match result {
        Err(PluginError::Corrupt {
            path: got,
            offset: at,
            message,
        }) => {
            assert_eq!(got, path);
            assert_eq!(at, offset, "{message}");
        }
        other => panic!("expected Corrupt at {offset}, got {other:?}"),
    }
}

#[test]
fn a_file_with_the_wrong_magic_is_refused_and_left_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.cslog");
    std::fs::write(&path, b"NOTCSLOG\x01hello\x00").unwrap();
    let before = snapshot(dir.path());
    let backend = FileBackend::new(dir.path()).unwrap();
    assert_corrupt(backend.replay("s"), &path, 0);
    assert_corrupt(
        backend.append(record("s", 0, SessionEvent::Latency { duration_ms: 1 })),
        &path,
        0,
    );
    assert_corrupt(backend.fork("s", "s:0"), &path, 0);
    let message = backend.replay("s").unwrap_err().to_string();
    assert!(
        message.contains("s.cslog is damaged at byte 0"),
        "{message}"
    );
    assert!(message.contains("CUCASLOG"), "{message}");
    assert_eq!(snapshot(dir.path()), before);
}

/// "a format change bumps the version byte and keeps a reader for v1": a v3 file is refused
/// by this v1/v2 reader, not misread.
#[test]
fn an_unknown_version_is_refused_and_left_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.cslog");
    std::fs::write(&path, b"CUCASLOG\x03\x05\x01\x01\x01\x01\x00").unwrap();
    let before = snapshot(dir.path());
    let backend = FileBackend::new(dir.path()).unwrap();
    assert_corrupt(backend.replay("s"), &path, 8);
    assert_corrupt(
        backend.append(record("s", 0, SessionEvent::Latency { duration_ms: 1 })),
        &path,
        8,
    );
    let message = backend
        .verify("s")
        .unwrap()
        .into_records()
        .unwrap_err()
        .to_string();
    assert!(message.contains("unknown .cslog version 3"), "{message}");
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn a_directory_where_the_file_should_be_is_an_io_error_and_left_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.cslog");
    std::fs::create_dir(&path).unwrap();
    let before = snapshot(dir.path());
    let backend = FileBackend::new(dir.path()).unwrap();
    for result in [
        backend
            .append(record("s", 0, SessionEvent::Latency { duration_ms: 1 }))
            .err(),
        backend.replay("s").err(),
        backend.verify("s").err(),
    ] {
        match result {
            Some(PluginError::Io { path: got, .. }) => assert_eq!(got, path),
            other => panic!("expected Io naming {}, got {other:?}", path.display()),
        }
    }
    assert_eq!(backend.sessions().unwrap(), Vec::<String>::new());
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn a_refused_load_names_the_file_and_the_offset_of_the_gap() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gap.cslog");
    let path = dir.path().join("golden.cslog");
    std::fs::copy(&fixture, &path).unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let report = backend.verify("golden").unwrap();
    let cuca_store_file::Verdict::Refused { offset, .. } = report.verdict.clone() else {
        panic!("{:?}", report.verdict)
    };
    assert_eq!(offset, report.skipped[0].offset);
    assert_corrupt(backend.replay("golden"), &path, offset);
    // The records that did decode are in the report for inspection.
    assert_eq!(report.records.len(), 9);
}

#[test]
fn a_fork_at_a_point_of_a_missing_session_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let result = backend.fork("ghost", "ghost:0");
    assert!(
        matches!(&result, Err(PluginError::NotFound { what, id }) if what == "session" && id == "ghost"),
        "{result:?}"
    );
    assert!(snapshot(dir.path()).is_empty());
    assert!(matches!(
        backend.verify("ghost"),
        Err(PluginError::NotFound { .. })
    ));
}

/// "Nothing panics on bad input": records are stored as given, so a file may end at sequence
/// u64::MAX. A fork then has no sequence for its audit record: it is refused naming the
/// session and the file, and no byte changes.
#[test]
fn a_fork_of_a_session_ending_at_the_last_sequence_is_refused_and_touches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    backend
        .append(record("s", 0, SessionEvent::Output { text: "a".into() }))
        .unwrap();
    backend
        .append(cuca_events::SessionRecord {
            session_id: "s".into(),
            sequence: u64::MAX,
            timestamp_ms: 0,
            event: SessionEvent::Output { text: "b".into() },
        })
        .unwrap();
    let before = snapshot(dir.path());
    let result = backend.fork("s", "s:0");
    match &result {
        Err(PluginError::CapacityExceeded {
            resource,
            cap,
            message,
        }) => {
            assert_eq!(resource, "session \"s\"");
            assert_eq!(*cap, u64::MAX);
            assert!(message.contains("s.cslog"), "{message}");
        }
        other => panic!("expected CapacityExceeded, got {other:?}"),
    }
    assert_eq!(snapshot(dir.path()), before);
    assert_eq!(backend.sessions().unwrap(), vec!["s".to_owned()]);
}

/// The fork id `{session_id}:fork:{point_id}:{n}` repeats the session id, so a long id can
/// fork into an id over the store's limit on ids (`MAX_SESSION_ID_LEN`; ids too long for a
/// file name are stored under an overflow name): a Validation error naming the id, nothing
/// created.
#[test]
fn a_fork_whose_id_is_too_long_for_the_store_is_refused_and_touches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let long = "x".repeat(cuca_store_file::MAX_SESSION_ID_LEN / 2);
    backend
        .append(record(&long, 0, SessionEvent::Output { text: "a".into() }))
        .unwrap();
    let before = snapshot(dir.path());
    let result = backend.fork(&long, &format!("{long}:0"));
    match &result {
        Err(PluginError::Validation { schema, message }) => {
            assert_eq!(schema, "session_id");
            assert!(
                message.contains(&format!("{long}:fork:{long}:0:"))
                    && message.contains("limit on session ids"),
                "{}",
                &message[message.len() - 80..]
            );
        }
        other => panic!("expected Validation, got {other:?}"),
    }
    assert_eq!(snapshot(dir.path()), before);
    assert_eq!(backend.replay(&long).unwrap().len(), 1);
}

/// An append over the frame limit is refused before anything is created, so it leaves no
/// empty session file.
#[test]
fn an_append_over_the_frame_limit_is_refused_before_any_file_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let before = snapshot(dir.path());
    let huge = SessionEvent::Output {
        text: "x".repeat(cuca_store_file::MAX_FRAME_LEN),
    };
    match backend.append(record("big", 0, huge)) {
        Err(PluginError::Validation { schema, message }) => {
            assert_eq!(schema, "SessionRecord");
            assert!(message.contains("longer than"), "{message}");
        }
        other => panic!("expected a validation error, got {other:?}"),
    }
    assert_eq!(snapshot(dir.path()), before);
    assert_eq!(backend.sessions().unwrap(), Vec::<String>::new());
}

/// The same refusal on a session whose file is already open for append (where the length is
/// checked as the record is encoded, not in a pass of its own): nothing is written, the
/// sequence is not used up, and the next append goes on from the last good record.
#[test]
fn an_append_over_the_frame_limit_to_an_open_session_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let small = |text: &str| SessionEvent::Output { text: text.into() };
    backend.append(record("big", 0, small("a"))).unwrap();
    let before = snapshot(dir.path());
    let huge = SessionEvent::Output {
        text: "x".repeat(cuca_store_file::MAX_FRAME_LEN),
    };
    match backend.append(record("big", 1, huge)) {
        Err(PluginError::Validation { schema, message }) => {
            assert_eq!(schema, "SessionRecord");
            assert!(message.contains("longer than"), "{message}");
            assert!(message.contains("big"), "{message}");
        }
        other => panic!("expected a validation error, got {other:?}"),
    }
    assert_eq!(snapshot(dir.path()), before);
    backend.append(record("big", 1, small("b"))).unwrap();
    let texts: Vec<u64> = backend
        .replay("big")
        .unwrap()
        .iter()
        .map(|r| r.sequence)
        .collect();
    assert_eq!(texts, [0, 1]);
}

/// A run of records with one over the frame limit in the middle: the records before it are
/// written (in the one write), it and those after it are not, the refusal counts the stored
/// ones and names the record, and the session goes on from the last stored record. A run
/// whose first record is over the limit on a new session leaves no file.
#[test]
fn a_run_with_a_record_over_the_frame_limit_stores_the_records_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let small = |text: &str| SessionEvent::Output { text: text.into() };
    let huge = || SessionEvent::Output {
        text: "x".repeat(cuca_store_file::MAX_FRAME_LEN),
    };
    let before = snapshot(dir.path());
    let refused = backend
        .append_all(vec![record("new", 0, huge()), record("new", 1, small("a"))])
        .unwrap_err();
    assert_eq!(refused.stored, 0);
    assert_eq!(snapshot(dir.path()), before, "no empty session is left");

    let run = vec![
        record("big", 0, small("a")),
        record("big", 1, small("b")),
        record("big", 2, huge()),
        record("big", 3, small("d")),
    ];
    let refused = backend.append_all(run).unwrap_err();
    assert_eq!(refused.stored, 2);
    match refused.error {
        PluginError::Validation { schema, message } => {
            assert_eq!(schema, "SessionRecord");
            assert!(message.contains("big:2"), "{message}");
            assert!(message.contains("longer than"), "{message}");
        }
        other => panic!("expected a validation error, got {other:?}"),
    }
    backend.append(record("big", 2, small("c"))).unwrap();
    let texts: Vec<String> = backend
        .replay("big")
        .unwrap()
        .into_iter()
        .map(|r| match r.event {
            SessionEvent::Output { text } => text,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(texts, ["a", "b", "c"]);
}
