//! `FileBackend::compact`: a finished session gzipped into `{id}.cslog.gz`, read back the same,
//! expanded into a live `.cslog` when written to, and never at the cost of a record.

// The helpers below are test code outside `#[test]` fns, where clippy's test allowance ends.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::Path;

use cuca_events::{PluginError, ReplayedRecord, SessionBackend, SessionEvent, SessionRecord};
use cuca_store_file::{encode_frame, FileBackend, Verdict, HEADER};

fn record(session: &str, sequence: u64) -> SessionRecord {
    SessionRecord {
        session_id: session.into(),
        sequence,
        timestamp_ms: 1_700_000_000_000 + sequence,
        event: SessionEvent::Reasoning {
            text: format!("step {sequence}: the vault is in Lisbon, and the reply is noted. "),
        },
    }
}

fn filled(dir: &Path, n: u64) -> FileBackend {
    let backend = FileBackend::new(dir).unwrap();
    for sequence in 0..n {
        backend.append(record("demo", sequence)).unwrap();
    }
    backend
}

fn visited(backend: &FileBackend, session: &str) -> Vec<SessionRecord> {
    let mut records = Vec::new();
    backend
        .replay_each(session, &mut |record: ReplayedRecord<'_>| {
            records.push(record.into_owned());
            Ok(())
        })
        .unwrap();
    records
}

#[test]
fn a_compacted_session_reads_back_the_same_and_takes_less_room() {
    let dir = tempfile::tempdir().unwrap();
    let backend = filled(dir.path(), 500);
    let before = backend.replay("demo").unwrap();
    let report_before = backend.verify("demo").unwrap();

    let compaction = backend.compact("demo").unwrap();
    assert_eq!(compaction.records, 500);
    assert!(!compaction.already_compacted);
    assert_eq!(compaction.bytes_before, report_before.file_len);
    assert!(
        compaction.bytes_after * 4 < compaction.bytes_before,
        "{} -> {} bytes",
        compaction.bytes_before,
        compaction.bytes_after
    );
    assert_eq!(compaction.path, dir.path().join("demo.cslog.gz"));
    assert!(!dir.path().join("demo.cslog").exists());

    assert_eq!(backend.replay("demo").unwrap(), before);
    assert_eq!(visited(&backend, "demo"), before);
    let report = backend.verify("demo").unwrap();
    assert_eq!(report.records, report_before.records);
    assert_eq!(report.file_len, report_before.file_len);
    assert_eq!(report.verdict, Verdict::Clean);
    assert_eq!(report.path, dir.path().join("demo.cslog.gz"));
    assert_eq!(backend.sessions().unwrap(), ["demo"]);
    assert!(backend.is_compacted("demo").unwrap());
    assert_eq!(
        backend.bytes_on_disk("demo").unwrap(),
        compaction.bytes_after
    );
    // A second backend over the directory (a later process) reads it too.
    let later = FileBackend::new(dir.path()).unwrap();
    assert_eq!(later.replay("demo").unwrap(), before);
}

#[test]
fn compacting_twice_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let backend = filled(dir.path(), 20);
    let first = backend.compact("demo").unwrap();
    let bytes = std::fs::read(&first.path).unwrap();
    let second = backend.compact("demo").unwrap();
    assert!(second.already_compacted);
    assert_eq!(second.records, 20);
    assert_eq!(second.bytes_after, first.bytes_after);
    assert_eq!(std::fs::read(&second.path).unwrap(), bytes);
}

#[test]
fn an_append_expands_a_compacted_session_and_continues_it() {
    let dir = tempfile::tempdir().unwrap();
    let backend = filled(dir.path(), 30);
    backend.compact("demo").unwrap();
    backend.append(record("demo", 30)).unwrap();
    assert!(dir.path().join("demo.cslog").is_file());
    assert!(!dir.path().join("demo.cslog.gz").exists());
    assert!(!backend.is_compacted("demo").unwrap());
    let records = backend.replay("demo").unwrap();
    assert_eq!(records.len(), 31);
    assert!(records.iter().zip(0u64..).all(|(r, n)| r.sequence == n));
    assert_eq!(backend.verify("demo").unwrap().verdict, Verdict::Clean);
}

#[test]
fn a_fork_of_a_compacted_session_expands_the_original_for_its_audit_record() {
    let dir = tempfile::tempdir().unwrap();
    let backend = filled(dir.path(), 10);
    backend.compact("demo").unwrap();
    let branch = backend.fork("demo", "demo:4").unwrap();
    assert_eq!(backend.replay(&branch).unwrap().len(), 5);
    let original = backend.replay("demo").unwrap();
    assert_eq!(original.len(), 11);
    assert!(matches!(
        original.last().map(|r| &r.event),
        Some(SessionEvent::Fork { .. })
    ));
}

#[test]
fn a_torn_tail_is_kept_and_reported_the_same_after_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let backend = filled(dir.path(), 5);
    backend.close("demo");
    let mut frame = Vec::new();
    encode_frame(&record("demo", 5), &mut frame).unwrap();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join("demo.cslog"))
        .unwrap();
    file.write_all(&frame[..frame.len() / 2]).unwrap();
    drop(file);
    let before = backend.verify("demo").unwrap();
    assert_eq!(before.verdict, Verdict::Recovered);

    backend.compact("demo").unwrap();
    let after = backend.verify("demo").unwrap();
    assert_eq!(after.verdict, Verdict::Recovered);
    assert_eq!(after.torn_tail_bytes, before.torn_tail_bytes);
    assert_eq!(after.records.len(), 5);
    // Written to again, the torn tail is sealed as in any live file.
    backend.append(record("demo", 5)).unwrap();
    assert_eq!(backend.replay("demo").unwrap().len(), 6);
}

#[test]
fn a_file_a_load_refuses_is_not_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("demo.cslog");
    let mut bytes = HEADER.to_vec();
    encode_frame(&record("demo", 0), &mut bytes).unwrap();
    bytes.extend_from_slice(&[0x07, 0x01, 0x02, 0x00]); // a damaged frame…
    encode_frame(&record("demo", 2), &mut bytes).unwrap(); // …and sequence 1 missing
    std::fs::write(&path, &bytes).unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();

    let error = backend.compact("demo").unwrap_err();
    assert!(
        matches!(&error, PluginError::Corrupt { path: p, .. } if *p == path),
        "{error}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    assert!(!dir.path().join("demo.cslog.gz").exists());
    assert!(!dir.path().join("demo.cslog.gz.tmp").exists());
}

#[test]
fn a_session_another_writer_holds_is_not_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let writer = filled(dir.path(), 3); // keeps its handle, and the file's lock, open
    let other = FileBackend::new(dir.path()).unwrap();
    let error = other.compact("demo").unwrap_err();
    assert!(error.to_string().contains("demo.cslog"), "{error}");
    assert!(dir.path().join("demo.cslog").is_file());
    assert!(!dir.path().join("demo.cslog.gz").exists());
    writer.append(record("demo", 3)).unwrap();
    assert_eq!(writer.replay("demo").unwrap().len(), 4);
}

#[test]
fn an_unknown_session_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    assert!(matches!(
        backend.compact("nobody"),
        Err(PluginError::NotFound { .. })
    ));
}

/// A crash after the rename and before the live file's removal leaves both, with the same
/// bytes: the live file is read and written, and the session is listed once. A crash before
/// the rename leaves a `.tmp` file that nothing reads.
#[test]
fn what_an_interrupted_compaction_leaves_reads_as_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let backend = filled(dir.path(), 8);
    let live = std::fs::read(dir.path().join("demo.cslog")).unwrap();
    backend.compact("demo").unwrap();
    std::fs::write(dir.path().join("demo.cslog"), &live).unwrap();
    std::fs::write(dir.path().join("demo.cslog.gz.tmp"), b"half a gzip").unwrap();

    let later = FileBackend::new(dir.path()).unwrap();
    assert_eq!(later.sessions().unwrap(), ["demo"]);
    assert!(!later.is_compacted("demo").unwrap());
    assert_eq!(later.replay("demo").unwrap().len(), 8);
    later.append(record("demo", 8)).unwrap();
    assert_eq!(later.replay("demo").unwrap().len(), 9);
    // Compacting again replaces the stale compacted file with the grown session.
    let compaction = later.compact("demo").unwrap();
    assert_eq!(compaction.records, 9);
    assert_eq!(later.replay("demo").unwrap().len(), 9);
}

#[test]
fn a_damaged_compacted_file_is_an_error_naming_it_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let backend = filled(dir.path(), 200);
    let packed = backend.compact("demo").unwrap().path;
    let mut bytes = std::fs::read(&packed).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x55;
    std::fs::write(&packed, &bytes).unwrap();

    let fresh = FileBackend::new(dir.path()).unwrap();
    let replay = fresh.replay("demo");
    let verify = fresh.verify("demo");
    for outcome in [replay.err(), verify.err()] {
        let error = outcome.expect("a damaged gzip stream does not read as a session");
        assert!(error.to_string().contains("demo.cslog.gz"), "{error}");
    }
    // An append cannot expand it either, and leaves the damaged file as it was.
    assert!(fresh.append(record("demo", 200)).is_err());
    assert_eq!(std::fs::read(&packed).unwrap(), bytes);
    assert!(!dir.path().join("demo.cslog").exists());
}

/// The longest id a `.cslog` name allows leaves no room for `.cslog.gz`: its live file keeps
/// the seed's name and its compacted file takes the overflow name; it compacts, reads back,
/// lists once under its true id and expands like any other.
#[test]
fn an_id_too_long_for_a_compacted_name_compacts_under_an_overflow_name() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let id = "s".repeat(cuca_store_file::MAX_FILE_NAME_LEN - ".cslog".len());
    assert_eq!(backend.replay(&id).unwrap(), Vec::new());
    for sequence in 0..3 {
        backend.append(record(&id, sequence)).unwrap();
    }
    assert!(dir.path().join(format!("{id}.cslog")).is_file());
    let compaction = backend.compact(&id).unwrap();
    let name = compaction
        .path
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        name.starts_with(&"s".repeat(64)) && name.ends_with(".cslog.gz"),
        "{name}"
    );
    assert!(name.len() <= cuca_store_file::MAX_FILE_NAME_LEN);
    assert!(backend.is_compacted(&id).unwrap());
    assert_eq!(backend.replay(&id).unwrap().len(), 3);
    assert_eq!(visited(&backend, &id).len(), 3);
    assert_eq!(backend.sessions().unwrap(), vec![id.clone()]);
    backend.append(record(&id, 3)).unwrap();
    assert!(!backend.is_compacted(&id).unwrap());
    assert!(!compaction.path.exists());
    assert_eq!(backend.replay(&id).unwrap().len(), 4);
}

/// "A second compaction then overwrites the `.gz` and the 5 older records are gone for good":
/// what the old race left (a live file of 1 record next to a `.gz` of 5 others) is never
/// compacted over; both files are kept and the error names them.
#[test]
fn a_compacted_file_holding_records_the_live_file_lacks_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let backend = filled(dir.path(), 5);
    backend.compact("demo").unwrap();
    let packed = dir.path().join("demo.cslog.gz");
    let older = std::fs::read(&packed).unwrap();
    // A live file started afresh beside it, as a writer racing the old compaction made.
    let mut other = record("demo", 0);
    other.event = SessionEvent::Output { text: "new".into() };
    let mut live = HEADER.to_vec();
    encode_frame(&other, &mut live).unwrap();
    std::fs::write(dir.path().join("demo.cslog"), &live).unwrap();

    let fresh = FileBackend::new(dir.path()).unwrap();
    match fresh.compact("demo") {
        Err(PluginError::Backend { message, .. }) => {
            assert!(message.contains("demo.cslog.gz"), "{message}");
            assert!(message.contains("holds records that"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(std::fs::read(&packed).unwrap(), older);
    assert_eq!(std::fs::read(dir.path().join("demo.cslog")).unwrap(), live);
}
