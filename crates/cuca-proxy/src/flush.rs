//! A response body that hands the server one event at a time, so each is written as it comes.
//!
//! hyper writes a streamed body into its own buffer for as long as the body has the next
//! piece ready, and only goes to the socket when the body has to wait (or its buffer is
//! full, hundreds of kilobytes on). When the upstream is faster than the caller's socket —
//! a local server, a burst after a tool call, a replay, which has every event at once — the
//! first event would sit in that buffer until the burst was read and recorded, and time to
//! first token would be the whole burst's. The promise is "every byte the upstream
//! streams reaches the caller unchanged and as it arrives": after each piece this body says
//! "not yet" once (and wakes itself at once), which is hyper's cue to write what it holds.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;

/// `inner`, with a pause after each item in which the server flushes it.
pub(crate) struct OneAtATime<S> {
    inner: S,
    /// An item was just handed over and not yet flushed.
    handed: bool,
}

impl<S> OneAtATime<S> {
    pub(crate) fn new(inner: S) -> Self {
        OneAtATime {
            inner,
            handed: false,
        }
    }
}

impl<S: Stream + Unpin> Stream for OneAtATime<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        if self.handed {
            self.handed = false;
            // Pending with an immediate wake: the task is polled again right after the
            // server has written out what it buffered.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let next = std::task::ready!(Pin::new(&mut self.inner).poll_next(cx));
        self.handed = next.is_some();
        Poll::Ready(next)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    use super::*;

    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// "every byte the upstream streams reaches the caller unchanged and as it arrives":
    /// with every event ready at once, the body still pauses after each one (so the server
    /// writes it out), wakes itself so the pause costs no waiting, and loses or reorders
    /// nothing.
    #[test]
    fn a_ready_burst_is_handed_over_one_event_at_a_time_in_order() {
        let waker = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let std_waker = std::task::Waker::from(Arc::clone(&waker));
        let mut cx = Context::from_waker(&std_waker);
        let mut body = OneAtATime::new(futures::stream::iter(["a", "b", "c"]));
        let mut seen = Vec::new();
        let mut pauses = 0;
        loop {
            match Pin::new(&mut body).poll_next(&mut cx) {
                Poll::Ready(Some(item)) => seen.push(item),
                Poll::Ready(None) => break,
                Poll::Pending => {
                    pauses += 1;
                    // Never two items without a pause between them.
                    assert_eq!(pauses, seen.len(), "a pause after each item, not more");
                }
            }
        }
        assert_eq!(seen, ["a", "b", "c"]);
        assert_eq!(pauses, 3);
        assert_eq!(
            waker.0.load(Ordering::Relaxed),
            3,
            "each pause wakes the task"
        );
    }

    /// An inner stream that has nothing yet is waited for as it is: no extra pause and no
    /// spurious wake of our own.
    #[test]
    fn a_stream_that_has_nothing_yet_is_waited_for_without_a_wake_of_its_own() {
        let waker = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let std_waker = std::task::Waker::from(Arc::clone(&waker));
        let mut cx = Context::from_waker(&std_waker);
        let mut body = OneAtATime::new(futures::stream::pending::<u8>());
        assert!(Pin::new(&mut body).poll_next(&mut cx).is_pending());
        assert_eq!(waker.0.load(Ordering::Relaxed), 0);
    }
}
