//! Rotation: the live file turns over at its size and exactly one predecessor is kept.

mod common;

use cuca_calllog::{read_rows, CallLog, Record, PREVIOUS_FILE_NAME};

#[test]
fn rotation_at_a_small_size_keeps_exactly_one_predecessor() {
    // "PreviousFileName is the one predecessor kept across a rotation."
    let tmp = tempfile::tempdir().unwrap();
    let logs = tmp.path().join("logs");
    let path = logs.join("calls.jsonl");
    let log = CallLog::builder()
        .path(Some(path.clone()))
        .max_bytes(1000)
        .build();
    let row = |n: usize| Record {
        ts: "2026-01-01T00:00:00.000Z".into(),
        id: format!("{n:08}"),
        ..Record::default()
    };
    let line_len = serde_json::to_string(&row(0)).unwrap().len() as u64 + 1;
    for n in 0..100 {
        log.append(row(n));
        let live = std::fs::metadata(&path).unwrap().len();
        assert!(live <= 1000, "live file is {live} bytes after row {n}");
    }
    let mut names: Vec<String> = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, [PREVIOUS_FILE_NAME, "calls.jsonl"]);

    let per_file = 1000 / line_len;
    let previous = read_rows(logs.join(PREVIOUS_FILE_NAME)).unwrap().rows;
    let live = read_rows(&path).unwrap().rows;
    assert_eq!(
        previous.len() as u64,
        per_file,
        "the predecessor is one full file"
    );
    // The newest rows survive, in order, across the pair.
    let ids: Vec<String> = previous.iter().chain(&live).map(|r| r.id.clone()).collect();
    let first = 100 - ids.len();
    let expected: Vec<String> = (first..100).map(|n| format!("{n:08}")).collect();
    assert_eq!(ids, expected);
    assert!(
        first > 0,
        "older rows were dropped with the older predecessor"
    );
}

#[test]
fn a_row_larger_than_the_size_still_lands_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    let log = CallLog::builder()
        .path(Some(path.clone()))
        .max_bytes(10)
        .build();
    for n in 0..3 {
        log.append(Record {
            note: format!("a note longer than the rotation size, number {n}"),
            ..Record::default()
        });
    }
    let live = read_rows(&path).unwrap().rows;
    let previous = read_rows(tmp.path().join("calls.1.jsonl")).unwrap().rows;
    assert_eq!(live.len(), 1);
    assert_eq!(previous.len(), 1);
    assert!(live[0].note.ends_with("number 2"));
    assert!(previous[0].note.ends_with("number 1"));
}

#[test]
fn a_reopened_log_counts_the_bytes_already_there() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    std::fs::write(&path, "{\"id\":\"old\"}\n".repeat(70)).unwrap(); // 910 bytes
    let log = CallLog::builder()
        .path(Some(path.clone()))
        .max_bytes(1000)
        .build();
    log.append(Record {
        id: "new".into(),
        note: "x".repeat(100),
        ..Record::default()
    });
    assert_eq!(
        read_rows(tmp.path().join("calls.1.jsonl"))
            .unwrap()
            .rows
            .len(),
        70
    );
    let live = read_rows(&path).unwrap().rows;
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].id, "new");
}

#[test]
fn concurrent_writers_rotate_without_tearing_or_overfilling_a_file() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    let log = CallLog::builder()
        .path(Some(path.clone()))
        .max_bytes(4096)
        .build();
    std::thread::scope(|scope| {
        for writer in 0..8 {
            let log = log.clone();
            scope.spawn(move || {
                for n in 0..200 {
                    log.append(Record {
                        id: format!("{writer}-{n}"),
                        note: "y".repeat(n % 50),
                        ..Record::default()
                    });
                }
            });
        }
    });
    let mut names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, [PREVIOUS_FILE_NAME, "calls.jsonl"]);
    for file in [path.clone(), tmp.path().join(PREVIOUS_FILE_NAME)] {
        assert!(std::fs::metadata(&file).unwrap().len() <= 4096);
        let report = read_rows(&file).unwrap();
        assert_eq!(report.torn_tail, None);
        assert!(report.skipped.is_empty());
        assert!(!report.rows.is_empty());
    }
    // Every row in the pair is a distinct row that was written, and no row was written twice.
    let live = read_rows(&path).unwrap().rows;
    let previous = read_rows(tmp.path().join(PREVIOUS_FILE_NAME)).unwrap().rows;
    let n_rows = live.len() + previous.len();
    let ids: std::collections::HashSet<String> =
        previous.into_iter().chain(live).map(|r| r.id).collect();
    assert_eq!(ids.len(), n_rows);
    assert!(n_rows < 1600, "older rows went with the older predecessor");
}
