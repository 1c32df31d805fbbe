//! `ReplayStream`: a turn's recorded blocks as a `Stream` that is always ready.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use cuca_events::{MessageContentBlock, PluginError};
use futures_core::Stream;

/// Yields a turn's blocks in recorded order, then ends.
///
/// Hand-written rather than built from a combinator so the three promises are visible in
/// one function: `poll_next` never sleeps, never returns `Poll::Pending` and never yields
/// `Err`. Every failure is raised at load time, and the recorded latency is data in
/// `ReplayCompletion::duration_ms`, not a delay. The blocks are shared with the turn
/// through an `Arc`, so opening a stream copies no text until a block is yielded.
#[derive(Debug)]
pub(crate) struct ReplayStream {
    blocks: Arc<Vec<MessageContentBlock>>,
    next: usize,
}

impl ReplayStream {
    pub(crate) fn new(blocks: Arc<Vec<MessageContentBlock>>) -> Self {
        ReplayStream { blocks, next: 0 }
    }
}

impl Stream for ReplayStream {
    type Item = Result<MessageContentBlock, PluginError>;

    fn poll_next(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        // The stream owns its block because `AgentResponseStream` yields owned blocks, as a
        // live provider does; the clone is the one copy a consumer asked for.
        let block = self.blocks.get(self.next).cloned();
        if block.is_some() {
            self.next += 1;
        }
        Poll::Ready(block.map(Ok))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.blocks.len().saturating_sub(self.next);
        (left, Some(left))
    }
}
