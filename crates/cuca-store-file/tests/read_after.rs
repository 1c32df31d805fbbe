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
/// (another recording of the same session, of the same shape and length), its terminators:
/// a mark into the old file is still stale, and a read from the start sees the new answer.
#[test]
fn a_mark_into_a_file_another_recording_was_copied_over_in_place_is_stale() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let mut records = demo_turn("demo", 0);
    records.extend(demo_turn("demo", 7));
    append_all(&backend, &records);
    let end = mark_of(read(&backend, &ReadMark::START).1);
    let first_turn_end = {
        let mut at = ReadMark::START;
        backend
            .replay_after("demo", &ReadMark::START, &mut |record, mark| {
                if record.sequence == 6 {
                    at = *mark;
                }
                Ok(())
            })
            .unwrap();
        at
    };
    backend.close("demo");
    let path = dir.path().join("demo.cslog");

    // The same records, but the second answer says another word of the same length.
    let elsewhere = tempfile::tempdir().unwrap();
    let other = FileBackend::new(elsewhere.path()).unwrap();
    let mut copied = records.clone();
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

    assert_eq!(read(&backend, &end), (vec![], ReadAfter::Stale));
    // The mark after the first turn, whose bytes the two files share, reads the new answer.
    let mut answers = Vec::new();
    let outcome = backend
        .replay_after("demo", &first_turn_end, &mut |record, _| {
            if let cuca_events::SessionEvent::Output { text } = record.event {
                answers.push(text);
            }
            Ok(())
        })
        .unwrap();
    assert!(matches!(outcome, ReadAfter::Read(_)), "{outcome:?}");
    assert_eq!(answers, ["moved"]);
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
