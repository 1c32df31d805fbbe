//! A write failure is never a failed call: the log goes silent once, naming the path.

mod common;

use cuca_calllog::Record;

fn assert_silenced_once(
    path: &std::path::Path,
    log: &cuca_calllog::CallLog,
    warnings: &common::Warnings,
) {
    for n in 0..20 {
        // Append has no error to return; it must keep returning, row after row.
        log.append(Record {
            id: format!("{n}"),
            ..Record::default()
        });
    }
    let lines = warnings.lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains(&path.display().to_string()),
        "{}",
        lines[0]
    );
    assert!(lines[0].starts_with("cuca: call log off for this process: cannot write "));
    assert!(log.is_silenced());
    assert_eq!(log.path(), None, "records are going nowhere now");
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_silences_the_log_once_and_append_keeps_returning() {
    // "A WRITE FAILURE IS NEVER A FAILED CALL ... silences the log for the rest of the
    // process and prints one line naming the path it could not write."
    let path = std::path::Path::new("/dev/full");
    let (log, warnings) = common::log_at(path);
    assert_silenced_once(path, &log, &warnings);
    assert!(
        warnings.lines()[0].contains("No space left on device"),
        "{:?}",
        warnings.lines()
    );
}

#[test]
fn a_directory_where_the_file_should_be_silences_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    std::fs::create_dir(&path).unwrap();
    let (log, warnings) = common::log_at(&path);
    assert_silenced_once(&path, &log, &warnings);
    assert!(path.is_dir());
}

#[test]
fn an_unwritable_home_silences_the_log() {
    // The read-only-home case, made so that it fails even for root: the logs directory
    // cannot be created because a file sits where a directory must go.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("home"), b"not a directory").unwrap();
    let path = tmp.path().join("home/logs/calls.jsonl");
    let (log, warnings) = common::log_at(&path);
    assert_silenced_once(&path, &log, &warnings);
}

#[test]
fn silencing_one_handle_leaves_the_counters_and_other_handles_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("dir");
    std::fs::create_dir(&bad).unwrap();
    let (broken, warnings) = common::log_at(&bad);
    let good_path = tmp.path().join("calls.jsonl");
    let (good, _) = common::log_at(&good_path);
    broken
        .start(Record {
            run: "r".into(),
            model: "m".into(),
            ..Record::default()
        })
        .finish(Record {
            status: 200,
            ..Record::default()
        });
    good.append(Record::default());
    assert_eq!(warnings.lines().len(), 1);
    assert_eq!(broken.calls_for("r"), 1);
    assert_eq!(broken.last_call().unwrap().model, "m");
    assert_eq!(cuca_calllog::read_rows(&good_path).unwrap().rows.len(), 1);
}

#[cfg(target_os = "linux")]
#[test]
fn concurrent_writers_on_a_full_disk_still_warn_once() {
    let path = std::path::Path::new("/dev/full");
    let (log, warnings) = common::log_at(path);
    std::thread::scope(|scope| {
        for _ in 0..8 {
            let log = log.clone();
            scope.spawn(move || {
                for _ in 0..50 {
                    log.append(Record::default());
                }
            });
        }
    });
    assert_eq!(warnings.lines().len(), 1);
}
