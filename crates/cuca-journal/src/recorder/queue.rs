//! The bounded queue between the recording side and the writer thread, bounded by batches and bytes.
//!
//! A count alone does not bound memory: 1024 batches of 256 KiB tool outputs are 256 MiB held
//! in the run while the disk stalls. So a batch is refused when either bound would be crossed,
//! and the recorder turns the refusal into a `queue_full` stop. The terminating request is the
//! one message that is never refused: it is tiny, there is only ever one, and refusing it would
//! leave `finish` nothing to do but block.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

use super::writer::Batch;

/// Why a batch was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PushError {
    /// Queueing it would cross the batch or the byte bound.
    Full,
    /// The writer is gone (it failed or finished); nothing will ever drain the queue.
    Closed,
}

#[derive(Debug, Default)]
struct Slots {
    items: VecDeque<Batch>,
    /// Bytes of the `Lines` batches waiting.
    bytes: u64,
    /// The recording side let go without finishing: the writer drains and stops, leaving no
    /// terminating line (what a killed session looks like).
    senders_gone: bool,
    /// The writer stopped taking batches.
    writer_gone: bool,
}

/// A multi-producer, single-consumer queue bounded by batch count and by bytes.
#[derive(Debug)]
pub(crate) struct Queue {
    slots: Mutex<Slots>,
    not_empty: Condvar,
    max_batches: usize,
    max_bytes: u64,
}

impl Queue {
    pub(crate) fn new(max_batches: usize, max_bytes: u64) -> Self {
        Queue {
            slots: Mutex::new(Slots::default()),
            not_empty: Condvar::new(),
            max_batches,
            max_bytes,
        }
    }

    fn slots(&self) -> MutexGuard<'_, Slots> {
        // Nothing panics while holding this lock; a poisoned one still holds consistent slots.
        match self.slots.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Queues a batch of lines if both bounds allow it; never waits.
    ///
    /// A batch larger than the byte bound on its own is still taken when the queue is empty, so
    /// one large message cannot stop capture while the disk keeps up; memory then stays within
    /// the larger of the bound and that one batch.
    pub(crate) fn try_push(&self, batch: Batch) -> Result<(), PushError> {
        let mut slots = self.slots();
        if slots.writer_gone {
            return Err(PushError::Closed);
        }
        let len = batch.byte_len();
        let fits = slots.items.is_empty()
            || (slots.items.len() < self.max_batches
                && slots.bytes.saturating_add(len) <= self.max_bytes);
        if !fits {
            return Err(PushError::Full);
        }
        slots.bytes = slots.bytes.saturating_add(len);
        slots.items.push_back(batch);
        drop(slots);
        self.not_empty.notify_one();
        Ok(())
    }

    /// Queues the terminating request whatever the bounds say; never waits.
    pub(crate) fn push_finish(&self, batch: Batch) -> Result<(), PushError> {
        let mut slots = self.slots();
        if slots.writer_gone {
            return Err(PushError::Closed);
        }
        slots.items.push_back(batch);
        drop(slots);
        self.not_empty.notify_one();
        Ok(())
    }

    /// The next batch, waiting for one; `None` once the recording side is gone and the queue
    /// is drained.
    pub(crate) fn pop(&self) -> Option<Batch> {
        let mut slots = self.slots();
        loop {
            if let Some(batch) = slots.items.pop_front() {
                slots.bytes = slots.bytes.saturating_sub(batch.byte_len());
                return Some(batch);
            }
            if slots.senders_gone {
                return None;
            }
            slots = match self.not_empty.wait(slots) {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            };
        }
    }

    /// The next batch if one is waiting.
    pub(crate) fn try_pop(&self) -> Option<Batch> {
        let mut slots = self.slots();
        let batch = slots.items.pop_front()?;
        slots.bytes = slots.bytes.saturating_sub(batch.byte_len());
        Some(batch)
    }

    /// The recording side let go: the writer drains what is queued and stops.
    pub(crate) fn close_senders(&self) {
        self.slots().senders_gone = true;
        self.not_empty.notify_all();
    }

    /// The writer stopped: refuse everything from now on and free what waits.
    pub(crate) fn close_writer(&self) {
        let mut slots = self.slots();
        slots.writer_gone = true;
        slots.items.clear();
        slots.bytes = 0;
    }

    /// (batches, bytes) waiting, for tests and the status.
    #[cfg(test)]
    pub(crate) fn len(&self) -> (usize, u64) {
        let slots = self.slots();
        (slots.items.len(), slots.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(n: usize) -> Batch {
        Batch::Lines {
            bytes: vec![b'x'; n],
            entries: 1,
        }
    }

    #[test]
    fn the_queue_is_bounded_by_bytes_as_well_as_by_batches() {
        // A count bound alone would let a stalled disk hold up to the byte ceiling.
        let queue = Queue::new(1024, 100);
        assert_eq!(queue.try_push(lines(60)), Ok(()));
        assert_eq!(queue.try_push(lines(40)), Ok(()));
        assert_eq!(queue.try_push(lines(1)), Err(PushError::Full));
        assert_eq!(queue.len(), (2, 100));
        assert!(queue.try_pop().is_some());
        assert_eq!(queue.len(), (1, 40));
        assert_eq!(queue.try_push(lines(60)), Ok(()));
        let queue = Queue::new(2, u64::MAX);
        assert_eq!(queue.try_push(lines(1)), Ok(()));
        assert_eq!(queue.try_push(lines(1)), Ok(()));
        assert_eq!(queue.try_push(lines(1)), Err(PushError::Full));
    }

    #[test]
    fn one_batch_over_the_byte_bound_goes_when_the_queue_is_empty() {
        let queue = Queue::new(8, 10);
        assert_eq!(queue.try_push(lines(50)), Ok(()));
        assert_eq!(queue.try_push(lines(1)), Err(PushError::Full));
    }

    #[test]
    fn the_terminating_request_is_never_refused_for_room_and_a_gone_writer_refuses_all() {
        let queue = Queue::new(1, 1);
        assert_eq!(queue.try_push(lines(1)), Ok(()));
        assert_eq!(queue.push_finish(Batch::Finish { reason: None }), Ok(()));
        queue.close_writer();
        assert_eq!(queue.len(), (0, 0));
        assert_eq!(queue.try_push(lines(1)), Err(PushError::Closed));
        assert_eq!(
            queue.push_finish(Batch::Finish { reason: None }),
            Err(PushError::Closed)
        );
    }

    #[test]
    fn pop_drains_then_ends_once_the_senders_are_gone() {
        let queue = Queue::new(4, 1000);
        assert_eq!(queue.try_push(lines(3)), Ok(()));
        queue.close_senders();
        assert!(matches!(queue.pop(), Some(Batch::Lines { .. })));
        assert!(queue.pop().is_none());
    }
}
