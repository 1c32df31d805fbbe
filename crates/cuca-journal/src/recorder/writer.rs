//! The writer thread: drains the bounded queue into the journal file.
//!
//! It runs on its own OS thread because the run's agents share one current-thread runtime, where
//! a synchronous write would stall every agent and skew the turn timings being measured. It
//! tracks how far the file is known to be whole (after each explicit flush), so a failure can be
//! cut back to a line boundary before the terminating line is appended.

use std::any::Any;
use std::io::{self, BufWriter, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::queue::Queue;

use crate::format::{End, JournalLine, StopReason};
use crate::pool::push_line;

/// The writer's buffer. 64 KiB turns the many small lines of a busy run into few write calls.
const BUF_BYTES: usize = 64 * 1024;

/// How many bytes the writer buffers across queued batches before it flushes anyway, so under
/// sustained load the known-whole length still advances.
const FLUSH_EVERY_BYTES: u64 = 1024 * 1024;

/// One message on the queue: an indivisible run of whole lines, or the request to terminate.
#[derive(Debug)]
pub(crate) enum Batch {
    /// Whole lines, written together.
    Lines {
        /// The lines' bytes, each ending in `\n`.
        bytes: Vec<u8>,
        /// How many of them are entry lines.
        entries: u64,
    },
    /// Write the terminating line (with the writer's own entry count) and stop.
    Finish {
        /// The stop reason the recorder knows of.
        reason: Option<StopReason>,
    },
}

impl Batch {
    /// The bytes this batch holds in memory while it waits (the terminating request: none).
    pub(crate) fn byte_len(&self) -> u64 {
        match self {
            Batch::Lines { bytes, .. } => bytes.len() as u64,
            Batch::Finish { .. } => 0,
        }
    }
}

/// What the writer shares with the recording side.
#[derive(Debug, Default)]
pub(crate) struct WriterShared {
    failed: AtomicBool,
    /// `finish` stopped waiting for a writer stuck on the disk: if the disk ever lets go, the
    /// writer drops whatever is still queued and terminates the journal as `write_failed`.
    abandoned: AtomicBool,
    /// Set when the writer thread has ended, whatever the way.
    done: Mutex<bool>,
    done_changed: Condvar,
    /// Bytes of the file known to be whole lines (flushed completely).
    durable_len: AtomicU64,
    /// Entry lines within `durable_len`.
    durable_entries: AtomicU64,
    error: Mutex<Option<String>>,
}

impl WriterShared {
    pub(crate) fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Marks the writer failed; the first message wins.
    pub(crate) fn fail(&self, message: String) {
        if let Ok(mut slot) = self.error.lock() {
            if slot.is_none() {
                *slot = Some(message);
            }
        }
        self.failed.store(true, Ordering::Release);
    }

    pub(crate) fn error(&self) -> Option<String> {
        self.error.lock().ok().and_then(|slot| slot.clone())
    }

    /// (bytes, entries) known to be whole in the file.
    pub(crate) fn durable(&self) -> (u64, u64) {
        (
            self.durable_len.load(Ordering::Acquire),
            self.durable_entries.load(Ordering::Acquire),
        )
    }

    pub(crate) fn abandon(&self) {
        self.abandoned.store(true, Ordering::Release);
    }

    pub(crate) fn abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Acquire)
    }

    fn mark_done(&self) {
        let mut done = match self.done.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        *done = true;
        self.done_changed.notify_all();
    }

    /// Waits at most `timeout` for the writer thread to end; whether it has.
    pub(crate) fn wait_done(&self, timeout: Duration) -> bool {
        let deadline = Instant::now().checked_add(timeout);
        let mut done = match self.done.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        while !*done {
            let left = match deadline {
                Some(deadline) => deadline.saturating_duration_since(Instant::now()),
                // A timeout too long to represent is no bound at all.
                None => Duration::from_secs(u64::from(u32::MAX)),
            };
            if left.is_zero() {
                return false;
            }
            done = match self.done_changed.wait_timeout(done, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        true
    }

    fn publish(&self, len: u64, entries: u64) {
        self.durable_entries.store(entries, Ordering::Release);
        self.durable_len.store(len, Ordering::Release);
    }
}

/// Starts the writer thread over `sink`.
pub(crate) fn spawn(
    sink: Box<dyn Write + Send>,
    queue: Arc<Queue>,
    shared: Arc<WriterShared>,
) -> io::Result<JoinHandle<()>> {
    thread::Builder::new()
        .name("cuca-journal-writer".into())
        .spawn(move || {
            let loop_shared = Arc::clone(&shared);
            // The writer is the one piece of capture that may hit a bug of its own; catching the
            // panic here is what lets it be reported as a write failure rather than as silence.
            let outcome = catch_unwind(AssertUnwindSafe(|| write_loop(sink, &queue, &loop_shared)));
            match outcome {
                Ok(Ok(())) => {}
                Ok(Err(error)) => shared.fail(format!("writing the journal failed: {error}")),
                Err(payload) => shared.fail(format!(
                    "the journal writer panicked: {}",
                    panic_message(payload.as_ref())
                )),
            }
            // The queue closes only now, after the failure is on record, so a sender that
            // finds it closed also finds why.
            queue.close_writer();
            shared.mark_done();
        })
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a non-string panic payload".to_owned()
    }
}

fn write_loop(sink: Box<dyn Write + Send>, queue: &Queue, shared: &WriterShared) -> io::Result<()> {
    let mut out = BufWriter::with_capacity(BUF_BYTES, sink);
    let (mut len, mut entries) = (0u64, 0u64);
    loop {
        // Every sender gone without a Finish: the run dropped its recorder without finishing,
        // so the journal ends without a terminating line, which is what says so.
        let Some(mut batch) = queue.pop() else {
            return Ok(());
        };
        let (mut pending_len, mut pending_entries) = (0u64, 0u64);
        loop {
            if shared.abandoned() {
                // `finish` gave up on this writer while it was stuck; the disk let go. What is
                // still queued is dropped and the journal ends here, saying lines were lost.
                batch = Batch::Finish {
                    reason: Some(StopReason::WriteFailed),
                };
            }
            match batch {
                Batch::Lines {
                    bytes,
                    entries: batch_entries,
                } => {
                    out.write_all(&bytes)?;
                    pending_len += bytes.len() as u64;
                    pending_entries += batch_entries;
                }
                Batch::Finish { reason } => {
                    let mut line = Vec::new();
                    push_line(
                        &mut line,
                        &JournalLine::End(End {
                            entries: entries + pending_entries,
                            stop_reason: reason,
                        }),
                    )
                    .map_err(io::Error::other)?;
                    out.write_all(&line)?;
                    out.flush()?;
                    shared.publish(
                        len + pending_len + line.len() as u64,
                        entries + pending_entries,
                    );
                    return Ok(());
                }
            }
            if pending_len >= FLUSH_EVERY_BYTES {
                break;
            }
            match queue.try_pop() {
                Some(next) => batch = next,
                None => break,
            }
        }
        out.flush()?;
        len += pending_len;
        entries += pending_entries;
        shared.publish(len, entries);
    }
}
