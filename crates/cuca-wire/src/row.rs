//! The call-log row's fields a model call's request and answer give, written once for the
//! client and the proxy, so both doors write the same row for the same call.

use cuca_calllog::Record;
use cuca_events::{TokenDetail, TokenUsage, UnifiedRequest};

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
            row.cache_write_tokens = usage.detail.cache_write.unwrap_or(0);
            match usage.cost {
                Some(cost) => {
                    row.cost = cost;
                    row.cost_source = "provider".to_owned();
                }
                None => price_row(row, &usage.detail),
            }
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

/// Prices a row whose server sent no cost from the call's token kinds, by the configured
/// table (`CUCA_PRICES`, else the bundled snapshot), and says which table priced it or why
/// nothing did. A usage report with no detail (a server that sent only the two totals) is
/// priced from them, the prompt as uncached input.
fn price_row(row: &mut Record, detail: &TokenDetail) {
    let usage = if detail.is_empty() {
        cuca_cost::Usage::from_folded(row.prompt_tokens, row.completion_tokens)
    } else {
        cuca_cost::Usage::from_detail(detail)
    };
    let model = if row.served.is_empty() {
        &row.model
    } else {
        &row.served
    };
    let table = match cuca_cost::configured() {
        Ok(table) => table,
        Err(error) => {
            row.cost_source = format!("unknown: {error}");
            return;
        }
    };
    match table.price(model) {
        Some(price) => {
            row.cost = price.cost(&usage).total();
            row.cost_source = table.source().to_string();
        }
        None => {
            row.cost_source = format!(
                "unknown: no price for model {model:?} in {}",
                table.source()
            );
        }
    }
}
