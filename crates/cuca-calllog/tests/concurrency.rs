//! Many writers, one file: every line whole.

// The helpers below are test code: unwrapping is how they fail the test.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use cuca_calllog::{read_rows, CallLog, Record};

const WRITERS: usize = 64;
const ROWS_EACH: usize = 100;

fn row(writer: usize, n: usize) -> Record {
    Record {
        id: format!("{writer:04}{n:04}"),
        run: format!("run-{writer}"),
        model: "m".repeat(64 + writer),
        note: "x".repeat(n * 7),
        ..Record::default()
    }
}

fn assert_all_rows_whole(path: &std::path::Path) {
    let text = std::fs::read_to_string(path).unwrap();
    // A handle that opens the file while another's row is half on disk (a reader can see a
    // multi-page write's first pages) takes it for a torn row and ends it with a `\n`: the row
    // stays whole and a blank line follows it, which readers skip. Rows are what must be whole.
    assert_eq!(
        text.lines().filter(|line| !line.trim().is_empty()).count(),
        WRITERS * ROWS_EACH
    );
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        assert!(
            line.starts_with('{') && line.ends_with('}'),
            "torn line: {line:.80}"
        );
    }
    let report = read_rows(path).unwrap();
    assert_eq!(report.torn_tail, None);
    assert!(report.skipped.is_empty(), "{:?}", report.skipped.first());
    assert_eq!(report.rows.len(), WRITERS * ROWS_EACH);
    let ids: HashSet<&str> = report.rows.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids.len(), WRITERS * ROWS_EACH);
    for r in &report.rows {
        let writer: usize = r.id[..4].parse().unwrap();
        let n: usize = r.id[4..].parse().unwrap();
        assert_eq!(
            r,
            &Record {
                ts: r.ts.clone(),
                ..row(writer, n)
            }
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_tasks_times_a_hundred_rows_are_6400_parseable_lines() {
    // "ONE LINE PER CALL, JSON Lines, appended under a mutex."
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    let (log, warnings) = common::log_at(&path);
    let mut tasks = Vec::new();
    for writer in 0..WRITERS {
        let log = log.clone();
        tasks.push(tokio::spawn(async move {
            for n in 0..ROWS_EACH {
                log.append(row(writer, n));
                tokio::task::yield_now().await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_all_rows_whole(&path);
    assert!(warnings.lines().is_empty());
}

#[test]
fn sixty_four_threads_times_a_hundred_rows_are_6400_parseable_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    let (log, _) = common::log_at(&path);
    let barrier = Arc::new(std::sync::Barrier::new(WRITERS));
    std::thread::scope(|scope| {
        for writer in 0..WRITERS {
            let log = log.clone();
            let barrier = Arc::clone(&barrier);
            scope.spawn(move || {
                barrier.wait();
                for n in 0..ROWS_EACH {
                    log.append(row(writer, n));
                }
            });
        }
    });
    assert_all_rows_whole(&path);
}

#[test]
fn two_handles_on_one_file_never_interleave_either() {
    // Two processes share one file; two handles stand in for them: each line is one write to
    // a file opened for appending.
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    let a = CallLog::builder().path(Some(path.clone())).build();
    let b = CallLog::builder().path(Some(path.clone())).build();
    std::thread::scope(|scope| {
        for (half, log) in [(0, &a), (1, &b)] {
            scope.spawn(move || {
                for writer in (half..WRITERS).step_by(2) {
                    for n in 0..ROWS_EACH {
                        log.append(row(writer, n));
                    }
                }
            });
        }
    });
    assert_all_rows_whole(&path);
}
