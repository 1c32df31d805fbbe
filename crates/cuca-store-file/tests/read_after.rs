//! `FileBackend::replay_after`: a read from a mark costs what was appended since, and a mark
//! into a file replaced, cut short or compacted since is stale.

// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

use cuca_events::{ReadAfter, ReadMark, SessionBackend};
use cuca_store_file::FileBackend;
use cuca_testkit::{append_all, demo_turn};

fn read(backend: &FileBackend, mark: &ReadMark) -> (Vec<u64>, ReadAfter) {
    let mut seen = Vec::new();
    let outcome = backend
        .replay_after("demo", mark, &mut |record, _| {
            seen.push(record.sequence);
            Ok(())
        })
        .unwrap();
    (seen, outcome)
}

fn mark_of(outcome: ReadAfter) -> ReadMark {
    match outcome {
        ReadAfter::Read(mark) => mark,
        other => panic!("not read: {other:?}"),
    }
}

#[test]
fn a_mark_is_the_byte_offset_of_the_next_frame_and_another_writer_s_records_are_read_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    append_all(&backend, &demo_turn("demo", 0));
    let (seen, outcome) = read(&backend, &ReadMark::START);
    assert_eq!(seen.len(), 7);
    let mark = mark_of(outcome);
    let len = std::fs::metadata(dir.path().join("demo.cslog"))
        .unwrap()
        .len();
    assert_eq!(mark.position, len, "the mark stands at the end of the file");
    // Another process's writer (another FileBackend on the directory) appends a turn.
    backend.close("demo");
    let other = FileBackend::new(dir.path()).unwrap();
    append_all(&other, &demo_turn("demo", 7));
    let (seen, outcome) = read(&backend, &mark);
    assert_eq!(seen, (7..14).collect::<Vec<u64>>());
    assert_eq!(mark_of(outcome).sequence, Some(13));
}

#[test]
fn a_file_replaced_cut_short_or_compacted_since_the_mark_is_stale() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let mut records = demo_turn("demo", 0);
    records.extend(demo_turn("demo", 7));
    append_all(&backend, &records);
    let end = mark_of(read(&backend, &ReadMark::START).1);
    backend.close("demo");
    let path = dir.path().join("demo.cslog");

    // Replaced by another recording of the same session, as `cuca repair` renames over it.
    let elsewhere = tempfile::tempdir().unwrap();
    let other = FileBackend::new(elsewhere.path()).unwrap();
    append_all(&other, &records);
    append_all(&other, &demo_turn("demo", 14));
    other.close("demo");
    std::fs::rename(elsewhere.path().join("demo.cslog"), &path).unwrap();
    assert_eq!(read(&backend, &end), (vec![], ReadAfter::Stale));
    let (seen, outcome) = read(&backend, &ReadMark::START);
    assert_eq!(
        seen.len(),
        21,
        "a read from the start sees the new file whole"
    );
    let end = mark_of(outcome);

    // Cut short in place: shorter than the mark.
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(end.position - 3).unwrap();
    drop(file);
    assert_eq!(read(&backend, &end), (vec![], ReadAfter::Stale));

    // Compacted: a live file's mark is stale; marks of the compacted file count records.
    let fresh = tempfile::tempdir().unwrap();
    let packed = FileBackend::new(fresh.path()).unwrap();
    append_all(&packed, &records);
    let live_end = {
        let mut last = ReadMark::START;
        packed
            .replay_after("demo", &ReadMark::START, &mut |_, mark| {
                last = *mark;
                Ok(())
            })
            .unwrap();
        last
    };
    packed.compact("demo").unwrap();
    let stale = packed
        .replay_after("demo", &live_end, &mut |_, _| Ok(()))
        .unwrap();
    assert_eq!(stale, ReadAfter::Stale);
    let mut n = 0;
    let counted = packed
        .replay_after("demo", &ReadMark::START, &mut |_, _| {
            n += 1;
            Ok(())
        })
        .unwrap();
    assert_eq!(n, 14);
    let counted = mark_of(counted);
    assert_eq!(counted.position, 14);
    let again = packed
        .replay_after("demo", &counted, &mut |_, _| panic!("nothing is new"))
        .unwrap();
    assert_eq!(again, ReadAfter::Read(counted));
}

/// A file copied over the session in place keeps its inode and, when its frames line up
/// (another recording of the same session, of the same shape and length, made later), its
/// terminators: every mark into the old file is still stale, and a read from the start sees
/// the new answer.
#[test]
fn a_mark_into_a_file_another_recording_was_copied_over_in_place_is_stale() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let mut records = demo_turn("demo", 0);
    records.extend(demo_turn("demo", 7));
    append_all(&backend, &records);
    let mut marks = Vec::new();
    backend
        .replay_after("demo", &ReadMark::START, &mut |_, mark| {
            marks.push(*mark);
            Ok(())
        })
        .unwrap();
    backend.close("demo");
    let path = dir.path().join("demo.cslog");

    // Another recording a second later, whose second answer says another word of the same
    // length.
    let elsewhere = tempfile::tempdir().unwrap();
    let other = FileBackend::new(elsewhere.path()).unwrap();
    let mut copied = records.clone();
    for record in &mut copied {
        record.timestamp_ms += 1_000;
    }
    copied[11].event = cuca_events::SessionEvent::Output {
        text: "moved".into(),
    };
    append_all(&other, &copied);
    other.close("demo");
    let other_path = elsewhere.path().join("demo.cslog");
    let len = std::fs::metadata(&path).unwrap().len();
    assert_eq!(std::fs::metadata(&other_path).unwrap().len(), len);
    #[cfg(unix)]
    let inode = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&path).unwrap().ino()
    };
    std::fs::copy(&other_path, &path).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().ino(),
            inode,
            "copied in place"
        );
    }

    for mark in &marks {
        assert_eq!(read(&backend, mark), (vec![], ReadAfter::Stale), "{mark:?}");
    }
    let mut answers = Vec::new();
    backend
        .replay_after("demo", &ReadMark::START, &mut |record, _| {
            if let cuca_events::SessionEvent::Output { text } = record.event {
                answers.push(text);
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(answers, ["noted", "moved"]);
}

/// A file copied over in place whose first turn is byte for byte the old one's and whose
/// second was recorded later: a mark inside the first turn reads on into the new second turn
/// (every byte before it is the same), a mark after a record of the second turn is stale.
#[test]
fn a_mark_after_a_record_the_copied_file_does_not_hold_is_stale() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let mut records = demo_turn("demo", 0);
    records.extend(demo_turn("demo", 7));
    append_all(&backend, &records);
    let mut marks = Vec::new();
    backend
        .replay_after("demo", &ReadMark::START, &mut |_, mark| {
            marks.push(*mark);
            Ok(())
        })
        .unwrap();
    backend.close("demo");

    let elsewhere = tempfile::tempdir().unwrap();
    let other = FileBackend::new(elsewhere.path()).unwrap();
    let mut copied = records.clone();
    for record in &mut copied[7..] {
        record.timestamp_ms += 1_000;
    }
    append_all(&other, &copied);
    other.close("demo");
    std::fs::copy(
        elsewhere.path().join("demo.cslog"),
        dir.path().join("demo.cslog"),
    )
    .unwrap();

    let (seen, outcome) = read(&backend, &marks[6]);
    assert_eq!(seen, (7..14).collect::<Vec<u64>>());
    assert!(matches!(outcome, ReadAfter::Read(_)));
    for mark in &marks[7..] {
        assert_eq!(read(&backend, mark), (vec![], ReadAfter::Stale), "{mark:?}");
    }
}

/// A session's stamp is one `lstat`: it stays while the file does, and changes with an
/// append by another writer, a file of the same length renamed over it, a compaction and a
/// file copied over it in place (its times), but not with another session's append.
#[test]
fn a_stamp_changes_with_the_file_and_only_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let absent = backend.stamp("demo").unwrap();
    append_all(&backend, &demo_turn("demo", 0));
    let first = backend.stamp("demo").unwrap();
    assert_ne!(first, absent);
    assert_eq!(backend.stamp("demo"), Some(first));
    append_all(&backend, &demo_turn("other", 0));
    assert_eq!(
        backend.stamp("demo"),
        Some(first),
        "another session's append"
    );

    // Another writer (another handle, as another process has) appends.
    backend.close("demo");
    let writer = FileBackend::new(dir.path()).unwrap();
    append_all(&writer, &demo_turn("demo", 7));
    writer.close("demo");
    let grown = backend.stamp("demo").unwrap();
    assert_ne!(grown, first);

    // A file of the same length, renamed over the session's.
    let elsewhere = tempfile::tempdir().unwrap();
    let other = FileBackend::new(elsewhere.path()).unwrap();
    append_all(&other, &demo_turn("demo", 0));
    append_all(&other, &demo_turn("demo", 7));
    other.close("demo");
    let path = dir.path().join("demo.cslog");
    let replacement = elsewhere.path().join("demo.cslog");
    assert_eq!(
        std::fs::metadata(&replacement).unwrap().len(),
        std::fs::metadata(&path).unwrap().len()
    );
    std::fs::rename(&replacement, &path).unwrap();
    let renamed = backend.stamp("demo").unwrap();
    assert_ne!(renamed, grown, "a file renamed over the session's");

    // Another recording of the same length copied over it in place: the same inode, and
    // another modification time (set here, where a clock tick would pass between the two).
    let copied = FileBackend::new(elsewhere.path()).unwrap();
    append_all(&copied, &demo_turn("demo", 0));
    append_all(&copied, &demo_turn("demo", 7));
    copied.close("demo");
    std::fs::copy(&replacement, &path).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(86_400))
        .unwrap();
    assert_ne!(
        backend.stamp("demo"),
        Some(renamed),
        "a file copied over in place"
    );

    // Compacted: the compacted file's stamp, kept while it stands.
    let stamp = backend.stamp("demo");
    backend.compact("demo").unwrap();
    let compacted = backend.stamp("demo").unwrap();
    assert_ne!(Some(compacted), stamp);
    assert_eq!(backend.stamp("demo"), Some(compacted));
}
