//! The model calls of a session's records, each with its model and token counts, read one
//! record at a time.

use cuca_events::{SessionEvent, TokenDetail};

use crate::price::Usage;

/// How a call's token counts were recorded, which decides how far its cost can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Counted {
    /// A `TokenDetail` record: every kind as the provider sent it.
    Detail,
    /// Only the `TokenUsage` pair (a session recorded before `TokenDetail` existed, or by a
    /// recorder that had no usage report): the prompt is priced as uncached input, so a call
    /// that read or wrote the cache is priced as if it had not.
    Folded,
}

/// One model call as its records tell it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The model that answered (`CallFinish`), else the one asked for (`CallRequest`); empty
    /// when the session recorded neither.
    pub model: String,
    /// When the call closed: the timestamp of its `TokenUsage` record.
    pub timestamp_ms: u64,
    /// The record's sequence.
    pub sequence: u64,
    /// The counts, kind by kind.
    pub usage: Usage,
    /// Whether the counts are every kind or only the folded pair.
    pub counted: Counted,
}

impl Usage {
    /// The counts of a `TokenDetail` record, in this crate's kinds: the uncached prompt
    /// ([`TokenDetail::uncached_input`]), the 5-minute and 1-hour writes apart where the
    /// provider split them (an unsplit write is a 5-minute write, Anthropic's default
    /// lifetime; with only one part of the split given, the rest of the writes are the other
    /// part), and reasoning.
    pub fn from_detail(detail: &TokenDetail) -> Usage {
        let written = detail.cache_write.unwrap_or(0);
        let (cache_write_5m, cache_write_1h) = match (detail.cache_write_5m, detail.cache_write_1h)
        {
            (None, None) => (written, 0),
            (Some(five), Some(hour)) => (five, hour),
            (Some(five), None) => (five, written.saturating_sub(five)),
            (None, Some(hour)) => (written.saturating_sub(hour), hour),
        };
        Usage {
            input: detail.uncached_input().unwrap_or(0),
            output: detail.output.unwrap_or(0),
            cache_read: detail.cache_read.unwrap_or(0),
            cache_write_5m,
            cache_write_1h,
            reasoning: detail.reasoning.unwrap_or(0),
        }
    }

    /// The counts of a `TokenUsage` record alone: the prompt as uncached input.
    pub fn from_folded(prompt_tokens: u64, completion_tokens: u64) -> Usage {
        Usage {
            input: prompt_tokens,
            output: completion_tokens,
            ..Usage::default()
        }
    }

    /// Every token of the call: input, output and both cache kinds (reasoning is part of
    /// output), as ccusage's `totalTokens` counts them.
    pub fn total(&self) -> u64 {
        self.prompt().saturating_add(self.output)
    }

    /// Adds another call's counts kind by kind.
    pub fn add(&mut self, other: &Usage) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
        self.cache_write_5m = self.cache_write_5m.saturating_add(other.cache_write_5m);
        self.cache_write_1h = self.cache_write_1h.saturating_add(other.cache_write_1h);
        self.reasoning = self.reasoning.saturating_add(other.reasoning);
    }
}

/// Reads a session's records one at a time and hands back each model call when its
/// `TokenUsage` closes it. It keeps only the current call's model and detail, so a session of
/// any length is read in constant memory.
///
/// ```
/// use cuca_cost::{CallReader, Counted};
/// use cuca_events::{SessionEvent, TokenDetail};
///
/// let mut reader = CallReader::default();
/// let events = [
///     SessionEvent::CallFinish { finish_reason: Some("end_turn".into()), model: "claude-sonnet-4-5".into() },
///     SessionEvent::TokenDetail(TokenDetail { input: Some(26), cache_read: Some(3_401), output: Some(57), ..TokenDetail::default() }),
///     SessionEvent::Latency { duration_ms: 900 },
///     SessionEvent::TokenUsage { prompt_tokens: 3_427, completion_tokens: 57 },
/// ];
/// let calls: Vec<_> = events.iter().enumerate().filter_map(|(i, e)| reader.see(i as u64, 0, e)).collect();
/// assert_eq!(calls.len(), 1);
/// assert_eq!(calls[0].usage.cache_read, 3_401);
/// assert_eq!(calls[0].counted, Counted::Detail);
/// ```
#[derive(Debug, Default)]
pub struct CallReader {
    asked: String,
    served: String,
    detail: Option<TokenDetail>,
}

impl CallReader {
    /// Reads one record; `Some` when it closes a call.
    pub fn see(&mut self, sequence: u64, timestamp_ms: u64, event: &SessionEvent) -> Option<Call> {
        match event {
            SessionEvent::CallRequest { model, .. } => {
                // A new call: what the last one said is not this one's.
                self.asked.clone_from(model);
                self.served.clear();
                self.detail = None;
                None
            }
            SessionEvent::CallFinish { model, .. } => {
                self.served.clone_from(model);
                None
            }
            SessionEvent::TokenDetail(detail) => {
                self.detail = Some(*detail);
                None
            }
            SessionEvent::TokenUsage {
                prompt_tokens,
                completion_tokens,
            } => {
                let (usage, counted) = match self.detail.take() {
                    Some(detail) => (Usage::from_detail(&detail), Counted::Detail),
                    None => (
                        Usage::from_folded(*prompt_tokens, *completion_tokens),
                        Counted::Folded,
                    ),
                };
                let model = if self.served.is_empty() {
                    self.asked.clone()
                } else {
                    std::mem::take(&mut self.served)
                };
                Some(Call {
                    model,
                    timestamp_ms,
                    sequence,
                    usage,
                    counted,
                })
            }
            _ => None,
        }
    }
}
