//! Opening the journal: never blocking on a special file, never destroying an earlier journal.
// Test-crate helpers outside #[test] functions unwrap too, as tests do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod capture_support;

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use capture_support::*;
use cuca_journal::format::StopReason;
use cuca_journal::{Recorder, RecorderConfig, RecorderStatus};

/// Starts a recorder on a thread and records one clock read, failing (not hanging) the test if
/// `start` blocks.
fn start_and_finish(ws: &Path) -> (Recorder, RecorderStatus) {
    let ws = ws.to_path_buf();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let recorder = Recorder::start(RecorderConfig::new(&ws, "s").unwrap()).unwrap();
        recorder.clock("root", Duration::from_secs(1), None);
        let status = recorder.finish();
        let _ = tx.send((recorder, status));
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("Recorder::start returned instead of blocking")
}

#[test]
fn a_fifo_at_the_journal_path_stops_capture_at_once_instead_of_hanging_the_run() {
    // `Recorder::start` never blocks on a special file, so a FIFO at `.cuca/replay.ndjson`
    // cannot hang it.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".cuca")).unwrap();
    let fifo = dir.path().join(".cuca/replay.ndjson");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let (_recorder, status) = start_and_finish(dir.path());
    assert_eq!(status.stopped, Some(StopReason::WriteFailed));
    let error = status.error.unwrap();
    assert!(
        error.contains("FIFO") && error.contains("not a regular file"),
        "{error}"
    );
    // The FIFO is left as it was.
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
}

#[test]
fn the_unsalvaged_journal_of_a_killed_run_is_kept_aside_not_truncated() {
    // An unsalvaged journal of a killed run is never destroyed (opening with O_TRUNC once
    // emptied it silently): it is salvaged or kept aside, and the recorder says so.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".cuca")).unwrap();
    // What a killed run leaves: a header and an entry, no terminating line.
    let before = concat!(
        r#"{"line":"header","formatVersion":1,"sessionId":"killed","routingKey":null,"capabilities":{},"recorder":{"ggVersion":"0.1.0","commit":null}}"#,
        "\n",
        r#"{"line":"entry","seq":0,"agent":"root","kind":"clock","elapsedMs":7000,"remainingMs":null}"#,
        "\n"
    );
    std::fs::write(dir.path().join(".cuca/replay.ndjson"), before).unwrap();

    let (recorder, status) = start_and_finish(dir.path());
    assert_eq!(status.stopped, None);
    let aside = dir.path().join(".cuca/replay.ndjson.1");
    assert_eq!(status.set_aside.as_deref(), Some(aside.as_path()));
    assert_eq!(std::fs::read_to_string(&aside).unwrap(), before);
    let lines = read_journal(recorder.path());
    check_laws(&lines);
    assert_eq!(end(&lines).map(|e| e.entries), Some(1));
    // A third run keeps the second's journal aside too, under the next free name.
    let (_, status) = start_and_finish(dir.path());
    assert_eq!(
        status.set_aside.as_deref(),
        Some(dir.path().join(".cuca/replay.ndjson.2").as_path())
    );
    assert_eq!(std::fs::read_to_string(&aside).unwrap(), before);
}

#[test]
fn an_empty_file_at_the_journal_path_is_simply_replaced() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".cuca")).unwrap();
    std::fs::write(dir.path().join(".cuca/replay.ndjson"), "").unwrap();
    let (_, status) = start_and_finish(dir.path());
    assert_eq!((status.stopped, status.set_aside), (None, None));
}
