//! The sequence rule on a `FileBackend` beyond the shared suite: what a handle learns when it
//! opens a file another backend (or process) wrote, under the file's lock.

use cuca_events::{PluginError, SessionBackend, SessionEvent, SessionRecord};
use cuca_store_file::FileBackend;
use cuca_testkit::{append_all, demo_turn, record};

fn output(session: &str, sequence: u64) -> SessionRecord {
    record(
        session,
        sequence,
        SessionEvent::Output {
            text: format!("record {sequence}"),
        },
    )
}

fn assert_taken(result: Result<(), PluginError>, sequence: u64, last: u64) {
    match result {
        Err(PluginError::SequenceTaken {
            session_id,
            sequence: refused,
            last: stored,
        }) => {
            assert_eq!(
                (session_id.as_str(), refused, stored),
                ("demo", sequence, last)
            );
        }
        other => panic!("expected SequenceTaken after {last}, got {other:?}"),
    }
}

/// The FileBackend learns the last stored sequence when it opens a session file for append,
/// under the file lock: a backend opened after another wrote the session
/// (a restart, another process) refuses a sequence the file already holds.
#[test]
fn a_backend_opening_a_written_session_refuses_its_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let turn = demo_turn("demo", 0);
    {
        let first = FileBackend::new(dir.path()).unwrap();
        append_all(&first, &turn);
    }
    let path = dir.path().join("demo.cslog");
    let before = std::fs::read(&path).unwrap();
    let second = FileBackend::new(dir.path()).unwrap();
    for stale in [0, 3, 6] {
        assert_taken(second.append(output("demo", stale)), stale, 6);
    }
    assert_eq!(std::fs::read(&path).unwrap(), before, "nothing written");
    second.append(output("demo", 7)).unwrap();
    assert_eq!(second.replay("demo").unwrap().len(), 8);
}

/// Two backends take turns on one session (the lock passes by `close`): the one that waited
/// cannot store the sequence it had in mind before the other wrote — the case that left
/// 99 duplicate sequences in one file.
#[test]
fn a_backend_that_waited_for_the_lock_cannot_reuse_a_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let first = FileBackend::new(dir.path()).unwrap();
    let second = FileBackend::new(dir.path()).unwrap();
    first.append(output("demo", 0)).unwrap();
    // The second read the tail (0) and planned sequence 1, but the lock is held.
    assert!(matches!(
        second.append(output("demo", 1)),
        Err(PluginError::Locked { .. })
    ));
    append_all(&first, &[output("demo", 1), output("demo", 2)]);
    assert!(first.close("demo"));
    assert_taken(second.append(output("demo", 1)), 1, 2);
    second.append(output("demo", 3)).unwrap();
    // And back: the first reopens and learns 3.
    assert!(second.close("demo"));
    assert_taken(first.append(output("demo", 3)), 3, 3);
    let sequences: Vec<u64> = first
        .replay("demo")
        .unwrap()
        .iter()
        .map(|record| record.sequence)
        .collect();
    assert_eq!(sequences, [0, 1, 2, 3]);
}

/// A torn tail is not a record: the resumed writer may reuse the sequence of the append that
/// was cut (it was never acknowledged), and nothing below it.
#[test]
fn a_torn_tail_does_not_count_as_the_last_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("demo.cslog");
    {
        let backend = FileBackend::new(dir.path()).unwrap();
        append_all(&backend, &[output("demo", 0), output("demo", 1)]);
    }
    let mut frame = Vec::new();
    cuca_store_file::encode_frame(&output("demo", 2), &mut frame).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&frame[..frame.len() - 1]); // all but its terminator
    std::fs::write(&path, &bytes).unwrap();

    let backend = FileBackend::new(dir.path()).unwrap();
    assert_taken(backend.append(output("demo", 1)), 1, 1);
    backend.append(output("demo", 2)).unwrap();
    let records = backend.replay("demo").unwrap();
    assert_eq!(
        records,
        [output("demo", 0), output("demo", 1), output("demo", 2)]
    );
}

/// Compaction and expansion keep the rule: the handle that opens the expanded file reads its
/// last sequence like any other.
#[test]
fn a_compacted_session_refuses_its_sequences_after_expansion() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    append_all(&backend, &demo_turn("demo", 0));
    backend.compact("demo").unwrap();
    assert_taken(backend.append(output("demo", 6)), 6, 6);
    assert!(
        dir.path().join("demo.cslog").is_file(),
        "expanded to be written"
    );
    backend.append(output("demo", 7)).unwrap();
    assert_eq!(backend.replay("demo").unwrap().len(), 8);
}

/// The branch a fork creates starts at the fork point: the handle it keeps knows that.
#[test]
fn a_branch_refuses_sequences_of_its_prefix_in_this_backend_and_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    append_all(&backend, &demo_turn("demo", 0));
    let branch = backend.fork("demo", "demo:3").unwrap();
    let stale = output(&branch, 3);
    assert!(matches!(
        backend.append(stale.clone()),
        Err(PluginError::SequenceTaken { last: 3, .. })
    ));
    drop(backend);
    let reopened = FileBackend::new(dir.path()).unwrap();
    assert!(matches!(
        reopened.append(stale),
        Err(PluginError::SequenceTaken { last: 3, .. })
    ));
    assert_taken(reopened.append(output("demo", 7)), 7, 7);
    reopened.append(output(&branch, 4)).unwrap();
}
