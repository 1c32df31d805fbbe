//! Every token kind a transcript gives, and the session records that carry them.

use cuca_events::{SessionEvent, TokenDetail};
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

/// Which of a call's kinds its transcript wrote, and in which sense its input count is meant:
/// what decides which fields of the call's `TokenDetail` are `Some`. A kind the transcript
/// did not write is `None` there, never a 0 it did not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sent {
    /// The transcript's input count includes the cache reads (Codex's `input_tokens`, in
    /// OpenAI's sense): it is the detail's `prompt`. Otherwise it excludes every cached token
    /// (Anthropic's `input_tokens`) and is the detail's `input`.
    pub input_includes_cache_read: bool,
    /// The input count was written.
    pub input: bool,
    /// The output count was written.
    pub output: bool,
    /// The cache-read count was written.
    pub cache_read: bool,
    /// The cache-write total was written (`cache_creation_input_tokens`).
    pub cache_write: bool,
    /// The 5-minute / 1-hour split of the cache writes was written (`cache_creation`).
    pub cache_split: bool,
    /// The reasoning part of the output was written.
    pub reasoning: bool,
}

impl Sent {
    /// The call's `TokenDetail`: each kind the transcript wrote, from `usage` (which may be
    /// the part of a call's usage not recorded by an earlier import, or all zeros for a call
    /// counted elsewhere).
    pub fn detail(&self, usage: &TranscriptUsage) -> TokenDetail {
        let when = |sent: bool, count: u64| sent.then_some(count);
        let (prompt, input) = if self.input_includes_cache_read {
            (
                when(self.input, usage.input.saturating_add(usage.cache_read)),
                None,
            )
        } else {
            (None, when(self.input, usage.input))
        };
        TokenDetail {
            prompt,
            input,
            output: when(self.output, usage.output),
            cache_read: when(self.cache_read, usage.cache_read),
            cache_write: when(
                self.cache_write,
                usage.cache_write_5m.saturating_add(usage.cache_write_1h),
            ),
            cache_write_5m: when(self.cache_split, usage.cache_write_5m),
            cache_write_1h: when(self.cache_split, usage.cache_write_1h),
            reasoning: when(self.reasoning, usage.reasoning),
        }
    }
}

/// The records that close one imported model call, as a recorder writes them: the call's
/// `TokenDetail` (every kind the transcript wrote, `sent`), then `Latency` and the
/// `TokenUsage` holding the prompt (every input kind summed, as the proxy folds it) and the
/// output — the pair that closes a turn, adjacent (`docs/cslog-format.md`). A usage object
/// that wrote no kind at all has no detail: there is nothing the provider said to keep.
///
/// A call whose usage another line already counted passes zeros: its detail says 0 for each
/// kind the transcript wrote, as its folded record does (`docs/import.md`, "Counting each
/// call once"), so the call is still read as one with every kind apart.
pub fn usage_records(usage: &TranscriptUsage, sent: &Sent, duration_ms: u64) -> Vec<SessionEvent> {
    let detail = sent.detail(usage);
    let mut records = Vec::with_capacity(3);
    if !detail.is_empty() {
        records.push(SessionEvent::TokenDetail(detail));
    }
    records.push(SessionEvent::Latency { duration_ms });
    records.push(SessionEvent::TokenUsage {
        prompt_tokens: usage.prompt(),
        completion_tokens: usage.output,
    });
    records
}
