//! Reading back: torn last lines are skipped and reported, and a writer seals them.

mod common;

use std::io::Write;

use cuca_calllog::{calls_per_run, read_rows, Error, Record, TornTail};

#[test]
fn a_torn_last_line_is_skipped_and_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    let whole = "{\"id\":\"a\",\"phase\":\"start\"}\n";
    std::fs::write(&path, format!("{whole}{{\"id\":\"b\",\"pha")).unwrap();
    let report = read_rows(&path).unwrap();
    assert_eq!(report.rows.len(), 1);
    assert_eq!(report.rows[0].id, "a");
    assert_eq!(
        report.torn_tail,
        Some(TornTail {
            offset: whole.len() as u64,
            len: 14
        })
    );
    assert!(report.skipped.is_empty());
}

#[test]
fn a_prefix_that_happens_to_parse_is_still_torn() {
    // `{"id":"b"}` could be the first bytes of a longer row: without its newline it is not a row.
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    std::fs::write(&path, "{\"id\":\"b\"}").unwrap();
    let report = read_rows(&path).unwrap();
    assert!(report.rows.is_empty());
    assert_eq!(report.torn_tail, Some(TornTail { offset: 0, len: 10 }));
}

#[test]
fn a_writer_reopening_a_torn_file_writes_a_newline_first() {
    // "a writer that reopens a file not ending in \n writes one first"
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    std::fs::write(&path, "{\"id\":\"a\"}\n{\"id\":\"torn").unwrap();
    let (log, warnings) = common::log_at(&path);
    log.append(Record {
        id: "c".into(),
        ..Record::default()
    });
    log.append(Record {
        id: "d".into(),
        ..Record::default()
    });
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with("{\"id\":\"a\"}\n{\"id\":\"torn\n{\"ts\":"),
        "{text}"
    );
    let report = read_rows(&path).unwrap();
    let ids: Vec<&str> = report.rows.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["a", "c", "d"]);
    assert_eq!(report.torn_tail, None);
    assert_eq!(report.skipped.len(), 1);
    assert_eq!((report.skipped[0].line, report.skipped[0].offset), (2, 11));
    assert!(warnings.lines().is_empty());
}

#[test]
fn blank_lines_and_unknown_fields_are_tolerated() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    let mut file = std::fs::File::create(&path).unwrap();
    writeln!(file, "{{\"id\":\"a\",\"from_the_future\":[1,2]}}").unwrap();
    writeln!(file).unwrap();
    writeln!(file, "not json").unwrap();
    let report = read_rows(&path).unwrap();
    assert_eq!(report.rows.len(), 1);
    assert_eq!(report.rows[0].id, "a");
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].line, 3);
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("nope.jsonl");
    let error = read_rows(&path).unwrap_err();
    let Error::Read {
        path: named,
        source,
    } = &error
    else {
        panic!("unexpected error {error:?}");
    };
    assert_eq!(named, &path);
    assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
    assert!(error.to_string().starts_with("cannot read call log "));
}

#[test]
fn calls_per_run_counts_start_rows() {
    // "CallsFor is how many model calls one run has made."
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    let (log, _) = common::log_at(&path);
    for run in ["a", "b", "a", "a"] {
        log.start(Record {
            run: run.into(),
            ..Record::default()
        })
        .finish(Record::default());
    }
    let rows = read_rows(&path).unwrap().rows;
    let counts = calls_per_run(&rows);
    assert_eq!(counts.get("a"), Some(&3));
    assert_eq!(counts.get("b"), Some(&1));
    assert_eq!(counts.len(), 2);
    assert_eq!((log.calls_for("a"), log.calls_for("b")), (3, 1));
}
