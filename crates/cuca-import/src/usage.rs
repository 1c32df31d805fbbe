//! Every token kind a transcript gives, and the session records that carry them.

use cuca_events::SessionEvent;
use serde::{Deserialize, Serialize};

/// The token counts of one model call as a transcript gives them, every kind apart.
///
/// The kinds are disjoint where the provider's are: `input + cache_read + cache_write_5m +
/// cache_write_1h` is the whole prompt; `reasoning` is the part of `output` that was
/// reasoning (informational, already in `output`). Claude Code's `message.usage` maps one to
/// one; Codex's `input_tokens` includes its `cached_input_tokens`, so `input` is the
/// difference there (docs/import.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TranscriptUsage {
    /// Prompt tokens read neither from nor into a cache.
    pub input: u64,
    /// Generated tokens, reasoning included.
    pub output: u64,
    /// Prompt tokens read from the provider's cache.
    pub cache_read: u64,
    /// Prompt tokens written to a 5-minute cache (all cache writes when the transcript gives
    /// no split).
    pub cache_write_5m: u64,
    /// Prompt tokens written to a 1-hour cache.
    pub cache_write_1h: u64,
    /// The part of `output` that was reasoning, when the transcript says.
    pub reasoning: u64,
}

impl TranscriptUsage {
    /// The prompt, every kind of input counted: what `TokenUsage::prompt_tokens` holds.
    pub fn prompt(&self) -> u64 {
        self.input
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write_5m)
            .saturating_add(self.cache_write_1h)
    }

    /// Every token, as ccusage's `totalTokens` counts them (reasoning is inside `output`).
    pub fn total(&self) -> u64 {
        self.prompt().saturating_add(self.output)
    }

    /// What `self` has beyond `earlier`, kind by kind (never below zero): the usage still to
    /// record when a later line of the same message reports a larger count.
    pub fn beyond(&self, earlier: &TranscriptUsage) -> TranscriptUsage {
        TranscriptUsage {
            input: self.input.saturating_sub(earlier.input),
            output: self.output.saturating_sub(earlier.output),
            cache_read: self.cache_read.saturating_sub(earlier.cache_read),
            cache_write_5m: self.cache_write_5m.saturating_sub(earlier.cache_write_5m),
            cache_write_1h: self.cache_write_1h.saturating_sub(earlier.cache_write_1h),
            reasoning: self.reasoning.saturating_sub(earlier.reasoning),
        }
    }
}

/// The usage records of one imported model call, written last in its turn.
///
/// Today that is one `TokenUsage` holding the prompt (every input kind summed, as the proxy
/// records it) and the output. The kinds apart travel beside it, in the call's
/// `CallWire` record. The lead will add the structured token-kinds record here when it
/// lands: every importer writes usage through this one function, so that is one edit.
pub fn usage_records(usage: &TranscriptUsage) -> Vec<SessionEvent> {
    vec![SessionEvent::TokenUsage {
        prompt_tokens: usage.prompt(),
        completion_tokens: usage.output,
    }]
}
