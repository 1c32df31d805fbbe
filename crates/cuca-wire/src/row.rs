//! The call-log row's fields a model call's request and answer give, written once for the
//! client and the proxy, so both doors write the same row for the same call.

use cuca_calllog::Record;
use cuca_events::{TokenUsage, UnifiedRequest};

use crate::StreamSummary;

/// A row with the request's shape in counts and knobs, never its content: the model, the
/// reasoning effort, the answer ceiling, the number of messages and of tools.
pub fn request_row(request: &UnifiedRequest) -> Record {
    Record {
        model: request.model.clone(),
        effort: request.reasoning_effort.clone().unwrap_or_default(),
        max_tokens: request.max_tokens.map_or(0, u64::from),
        messages: request.messages.len() as u64,
        tools: request.tools.len() as u64,
        ..Record::default()
    }
}

impl StreamSummary {
    /// The call's token counts: the usage the server reported, else llama.cpp's `timings`
    /// (a server that ignores `stream_options` still counts: prompt = evaluated + cached,
    /// completion = predicted), else zeros.
    pub fn token_usage(&self) -> TokenUsage {
        match (&self.usage, &self.timings) {
            (Some(usage), _) => TokenUsage {
                prompt_tokens: usage.prompt_tokens,
                completion_tokens: usage.completion_tokens,
            },
            (None, Some(timings)) => TokenUsage {
                prompt_tokens: timings.prompt_n.unwrap_or(0) + timings.cache_n.unwrap_or(0),
                completion_tokens: timings.predicted_n.unwrap_or(0),
            },
            (None, None) => TokenUsage::default(),
        }
    }

    /// What a finished call adds to its end row: who served it, how it stopped, the server's
    /// counts ([`StreamSummary::token_usage`], the reasoning tokens and cost where reported,
    /// the cached prompt tokens or llama.cpp's `cache_n`), and whether the thinking ate the
    /// answer. `answered`: a text or a tool call came back. `row.max_tokens` is the ceiling
    /// that travelled ([`request_row`]).
    pub fn fill_end_row(&self, row: &mut Record, answered: bool) {
        row.served = self.model.clone().unwrap_or_default();
        row.finish = self.finish_reason.clone().unwrap_or_default();
        let tokens = self.token_usage();
        row.prompt_tokens = tokens.prompt_tokens;
        row.completion_tokens = tokens.completion_tokens;
        if let Some(usage) = &self.usage {
            row.reasoning_tokens = usage.reasoning_tokens.unwrap_or(0);
            row.cost = usage.cost.unwrap_or(0.0);
        }
        row.cached_tokens = match (&self.prompt_cache, &self.timings) {
            (Some(cache), _) => cache.cached_tokens,
            (None, Some(timings)) => timings.cache_n.unwrap_or(0),
            (None, None) => 0,
        };
        // The thinking-ate-the-answer signature: no text (nor tool call), a `length` finish,
        // and the whole ceiling that travelled spent.
        row.empty_at_ceiling = !answered
            && row.finish == "length"
            && row.completion_tokens > 0
            && row.max_tokens > 0
            && row.completion_tokens >= row.max_tokens;
    }
}
