//! Stopping capture: the byte ceiling, a full queue, a failing or panicking writer — each a
//! recorded fact, none of them felt by the run.
// Test-crate helpers outside #[test] functions unwrap too, as tests do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod capture_support;

use std::fs::File;
use std::io::{self, Write};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use capture_support::*;
use cuca_journal::format::{JournalLine, StopReason};
use cuca_journal::{Recorder, RecorderConfig, SinkHook, ToolOutcome};

fn tool(recorder: &Recorder, output: &str) {
    recorder.tool_result(
        "root",
        &ToolOutcome {
            call_id: "c",
            name: "shell",
            arguments: "{}",
            output,
            is_error: false,
        },
    );
}

#[test]
fn the_byte_ceiling_stops_capture_and_the_terminator_says_so() {
    // "Any failure stops capture for the whole run, permanently, whether it is the byte
    // ceiling, ..." and "Every stop is a recorded fact".
    let dir = tempfile::tempdir().unwrap();
    let config = RecorderConfig::new(dir.path(), "ceiling")
        .unwrap()
        .with_max_bytes(4096);
    let recorder = Recorder::start(config).unwrap();
    let mut recorded = 0;
    for n in 0..100 {
        tool(&recorder, &format!("{n:0>200}"));
        if recorder.status().stopped.is_none() {
            recorded += 1;
        }
    }
    let status = recorder.status();
    assert_eq!(status.stopped, Some(StopReason::ByteCeiling));
    assert!(status.bytes <= 4096);
    assert!(recorded > 3 && recorded < 100, "{recorded}");
    // Permanent: a tiny entry that would fit is not recorded either.
    recorder.clock("root", Duration::from_secs(1), None);
    assert_eq!(recorder.status().entries, recorded);

    let status = recorder.finish();
    assert_eq!(status.stopped, Some(StopReason::ByteCeiling));
    let lines = read_journal(recorder.path());
    check_laws(&lines);
    let end = end(&lines).unwrap();
    assert_eq!(end.entries, recorded);
    assert_eq!(end.stop_reason, Some(StopReason::ByteCeiling));
    let size = std::fs::metadata(recorder.path()).unwrap().len();
    let end_len = serde_json::to_string(&JournalLine::End(end)).unwrap().len() as u64 + 1;
    assert!(
        size - end_len <= 4096,
        "the ceiling bounds every line before the end"
    );
}

#[test]
fn a_ceiling_smaller_than_the_header_still_writes_the_header() {
    let dir = tempfile::tempdir().unwrap();
    let config = RecorderConfig::new(dir.path(), "tiny")
        .unwrap()
        .with_max_bytes(10);
    let recorder = Recorder::start(config).unwrap();
    assert_eq!(recorder.status().stopped, Some(StopReason::ByteCeiling));
    tool(&recorder, "never");
    recorder.finish();
    let lines = read_journal(recorder.path());
    check_laws(&lines);
    assert_eq!(lines.len(), 2);
    let end = end(&lines).unwrap();
    assert_eq!(
        (end.entries, end.stop_reason),
        (0, Some(StopReason::ByteCeiling))
    );
}

/// A sink that passes the first `good` writes through to the file, then fails or panics.
struct Breaking {
    file: File,
    good: usize,
    panic: bool,
    wrote: mpsc::Sender<usize>,
}

impl Write for Breaking {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.good == 0 {
            if self.panic {
                panic!("injected writer panic");
            }
            return Err(io::Error::other("injected disk failure"));
        }
        self.good -= 1;
        self.file.write_all(buf)?;
        let _ = self.wrote.send(buf.len());
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

fn breaking_writer(panic: bool) {
    let dir = tempfile::tempdir().unwrap();
    let (wrote, header_written) = mpsc::channel();
    let wrote = Mutex::new(Some(wrote));
    let hook: SinkHook = Arc::new(move |file| {
        Box::new(Breaking {
            file,
            good: 1,
            panic,
            wrote: wrote.lock().unwrap().take().unwrap(),
        })
    });
    let config = RecorderConfig::new(dir.path(), "broken")
        .unwrap()
        .with_sink_hook(hook);
    let recorder = Recorder::start(config).unwrap();
    // The header is the one write that succeeds; wait for it (a channel, not a sleep).
    header_written.recv().unwrap();
    for n in 0..20 {
        // Every call returns normally: "Capture degrades; it never fails the run it observes."
        tool(&recorder, &format!("output {n}"));
    }
    let status = recorder.finish();
    assert_eq!(status.stopped, Some(StopReason::WriteFailed));
    let error = status.error.unwrap();
    if panic {
        assert!(error.contains("injected writer panic"), "{error}");
    } else {
        assert!(error.contains("injected disk failure"), "{error}");
    }
    // "a journal writer that panics is reported as a write failure — never as no failure"
    let lines = read_journal(recorder.path());
    check_laws(&lines);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let end = end(&lines).unwrap();
    assert_eq!(
        (end.entries, end.stop_reason),
        (0, Some(StopReason::WriteFailed))
    );
    assert_eq!(status.entries, 0);
    // After the stop nothing more is recorded, and finishing again changes nothing.
    tool(&recorder, "late");
    assert_eq!(recorder.finish(), recorder.status());
    assert_eq!(read_journal(recorder.path()).len(), 2);
}

#[test]
fn a_writer_that_panics_is_reported_as_write_failed_and_the_caller_is_unaffected() {
    breaking_writer(true);
}

#[test]
fn a_writer_whose_disk_fails_is_reported_as_write_failed() {
    breaking_writer(false);
}

/// A sink whose first write announces itself and then waits for the test to open the gate.
struct Gated {
    file: File,
    entered: Option<mpsc::Sender<()>>,
    gate: mpsc::Receiver<()>,
}

impl Write for Gated {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(entered) = self.entered.take() {
            let _ = entered.send(());
            // Blocks until the test sends or drops the gate's sender.
            let _ = self.gate.recv();
        }
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[test]
fn a_full_queue_stops_capture_without_blocking_the_caller() {
    // "The queue to that thread is bounded, because an unbounded queue turns a stalled disk
    // into unbounded memory growth inside the run container."
    let dir = tempfile::tempdir().unwrap();
    let (entered_tx, entered) = mpsc::channel();
    let (open_gate, gate) = mpsc::channel::<()>();
    let parts = Mutex::new(Some((entered_tx, gate)));
    let hook: SinkHook = Arc::new(move |file| {
        let (entered, gate) = parts.lock().unwrap().take().unwrap();
        Box::new(Gated {
            file,
            entered: Some(entered),
            gate,
        })
    });
    let config = RecorderConfig::new(dir.path(), "stalled")
        .unwrap()
        .with_queue_capacity(1)
        .with_sink_hook(hook);
    let recorder = Recorder::start(config).unwrap();
    // The writer has taken the header and is stuck in its first write: a stalled disk.
    entered.recv().unwrap();
    tool(&recorder, "fits in the queue");
    assert_eq!(recorder.status().stopped, None);
    // The queue holds one batch; this one does not fit, and the call returns at once.
    for n in 0..10 {
        tool(&recorder, &format!("dropped {n}"));
    }
    let status = recorder.status();
    assert_eq!(status.stopped, Some(StopReason::QueueFull));
    assert_eq!(status.entries, 1);
    // The disk recovers; capture stays stopped for the rest of the run.
    drop(open_gate);
    tool(&recorder, "after the stall");
    let status = recorder.finish();
    assert_eq!(status.stopped, Some(StopReason::QueueFull));
    let lines = read_journal(recorder.path());
    check_laws(&lines);
    let end = end(&lines).unwrap();
    assert_eq!(
        (end.entries, end.stop_reason),
        (1, Some(StopReason::QueueFull))
    );
    assert_eq!(text_at(&lines, 1), "fits in the queue");
}

#[test]
fn a_journal_that_cannot_be_created_is_a_stop_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    // A file where the journal directory should be.
    std::fs::write(dir.path().join(".cuca"), "in the way").unwrap();
    let recorder = Recorder::start(RecorderConfig::new(dir.path(), "s").unwrap()).unwrap();
    tool(&recorder, "lost");
    let status = recorder.finish();
    assert_eq!(status.stopped, Some(StopReason::WriteFailed));
    assert!(status.error.unwrap().contains(".cuca"));
    assert_eq!(status.entries, 0);
}

/// Passes everything through and says when the writer lets go of it.
struct Announcing {
    file: File,
    dropped: mpsc::Sender<()>,
}

impl Write for Announcing {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for Announcing {
    fn drop(&mut self) {
        let _ = self.dropped.send(());
    }
}

#[test]
fn a_recorder_dropped_without_finish_leaves_no_terminator() {
    // "Its absence is the only reliable signal that a session died mid-capture"
    let dir = tempfile::tempdir().unwrap();
    let (dropped_tx, dropped) = mpsc::channel();
    let dropped_tx = Mutex::new(Some(dropped_tx));
    let hook: SinkHook = Arc::new(move |file| {
        Box::new(Announcing {
            file,
            dropped: dropped_tx.lock().unwrap().take().unwrap(),
        })
    });
    let config = RecorderConfig::new(dir.path(), "killed")
        .unwrap()
        .with_sink_hook(hook);
    let recorder = Recorder::start(config).unwrap();
    let path = recorder.path().to_path_buf();
    tool(&recorder, "last words");
    drop(recorder);
    // The writer drains what was queued, then drops its sink and exits.
    dropped.recv().unwrap();
    let lines = read_journal(&path);
    check_laws(&lines);
    assert!(end(&lines).is_none());
    assert_eq!(entries(&lines).len(), 1);
    assert_eq!(text_at(&lines, 1), "last words");
}

#[test]
fn a_clean_finish_has_no_stop_reason() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::start(RecorderConfig::new(dir.path(), "clean").unwrap()).unwrap();
    tool(&recorder, "a");
    recorder.clock(
        "root",
        Duration::from_millis(1500),
        Some(Duration::from_secs(60)),
    );
    recorder.cancel_probe("root", false, None);
    let status = recorder.finish();
    assert_eq!(
        (status.stopped, status.entries, status.finished),
        (None, 3, true)
    );
    let raw = std::fs::read_to_string(recorder.path()).unwrap();
    assert!(raw.ends_with("{\"line\":\"end\",\"entries\":3}\n"), "{raw}");
}

/// A sink the test stalls: every write blocks until the test opens the gate, announcing on
/// `entered` that it is stuck.
struct Stallable {
    file: File,
    entered: mpsc::Sender<()>,
    gate: mpsc::Receiver<()>,
}

impl Write for Stallable {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        {
            let _ = self.entered.send(());
            // Blocks until the test sends or drops the gate's sender: a disk that stalls.
            let _ = self.gate.recv();
        }
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// A recorder whose writer stalls on its first write (the header) until the gate opens.
fn stallable(
    dir: &std::path::Path,
    config: impl FnOnce(RecorderConfig) -> RecorderConfig,
) -> (Recorder, mpsc::Receiver<()>, mpsc::Sender<()>) {
    let (entered_tx, entered) = mpsc::channel();
    let (open_gate, gate) = mpsc::channel::<()>();
    let parts = Mutex::new(Some((entered_tx, gate)));
    let hook: SinkHook = Arc::new(move |file| {
        let (entered, gate) = parts.lock().unwrap().take().unwrap();
        Box::new(Stallable {
            file,
            entered,
            gate,
        })
    });
    let config = config(
        RecorderConfig::new(dir, "stall")
            .unwrap()
            .with_sink_hook(hook),
    );
    (Recorder::start(config).unwrap(), entered, open_gate)
}

#[test]
fn finish_on_a_stalled_disk_returns_within_its_bound_and_stops_capture_as_write_failed() {
    // Capture never blocks the run, so `finish()` cannot hang the run's exit on a stalled
    // disk: it bounds the wait, then stops capture permanently with a reason the record will
    // show.
    let dir = tempfile::tempdir().unwrap();
    let (recorder, entered, open_gate) = stallable(dir.path(), |c| {
        c.with_queue_capacity(2)
            .with_finish_timeout(Duration::from_millis(300))
    });
    // The writer is stuck writing the header; one batch waits behind it.
    entered.recv().unwrap();
    tool(&recorder, "queued behind the stall");
    // The old finish blocked sending into the full queue, then joined a stuck writer: run it
    // on a thread so a hang is a failed assertion rather than a hung test.
    let finisher = recorder.clone();
    let (done_tx, done) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done_tx.send(finisher.finish());
    });
    let status = done
        .recv_timeout(Duration::from_secs(20))
        .expect("finish() returned within its bound");
    assert_eq!(status.stopped, Some(StopReason::WriteFailed));
    assert!(status.finished);
    let error = status.error.unwrap();
    assert!(error.contains("did not finish within 300 ms"), "{error}");
    // Permanent: nothing more is recorded.
    tool(&recorder, "after finish");
    // The disk lets go: the writer drops what is queued and ends the journal with the reason.
    drop(open_gate);
    let status = recorder.finish();
    assert_eq!(status.stopped, Some(StopReason::WriteFailed));
    let lines = read_journal(recorder.path());
    check_laws(&lines);
    let end = end(&lines).unwrap();
    assert_eq!(end.stop_reason, Some(StopReason::WriteFailed));
    assert_eq!(end.entries, entries(&lines).len() as u64);
    assert_eq!(status.entries, end.entries);
    assert_eq!(
        end.entries, 0,
        "the queued batch was dropped, not written after the stop"
    );
    assert!(matches!(lines.first(), Some(JournalLine::Header(_))));
    let raw = std::fs::read_to_string(recorder.path()).unwrap();
    assert!(!raw.contains("after finish") && !raw.contains("queued behind"));
}

#[test]
fn the_queue_is_bounded_by_bytes_so_a_stalled_disk_holds_little_memory() {
    // The queue is bounded by bytes as well as by count (1024 batches), so a stalled disk
    // cannot hold up to the byte ceiling in memory.
    let dir = tempfile::tempdir().unwrap();
    let (recorder, entered, open_gate) = stallable(dir.path(), |c| {
        c.with_queue_bytes(100 * 1024)
            .with_finish_timeout(Duration::from_secs(30))
    });
    // The writer is stuck on the header. 30 KiB tool outputs, all distinct: three fit in
    // 100 KiB, the fourth does not, although the count bound (1024 batches) is far away.
    entered.recv().unwrap();
    for n in 0..10 {
        tool(&recorder, &format!("{n}{}", "x".repeat(30 * 1024)));
    }
    let status = recorder.status();
    assert_eq!(status.stopped, Some(StopReason::QueueFull));
    assert_eq!(status.entries, 3);
    drop(open_gate);
    let status = recorder.finish();
    assert_eq!(status.stopped, Some(StopReason::QueueFull));
    let lines = read_journal(recorder.path());
    check_laws(&lines);
    assert_eq!(
        end(&lines).map(|e| (e.entries, e.stop_reason)),
        Some((3, Some(StopReason::QueueFull)))
    );
}
