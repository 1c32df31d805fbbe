//! `StreamSummary`: everything a stream said besides its content blocks, in any format.

use cuca_events::{PromptCacheUsage, ProviderUsage};
use serde::Deserialize;

/// llama.cpp's per-call `timings` object, as far as cuca reads it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct LlamaTimings {
    /// Prompt tokens served from the KV cache.
    pub cache_n: Option<u64>,
    /// Prompt tokens evaluated.
    pub prompt_n: Option<u64>,
    /// Milliseconds spent on the prompt.
    pub prompt_ms: Option<f64>,
    /// Tokens generated.
    pub predicted_n: Option<u64>,
    /// Milliseconds spent generating.
    pub predicted_ms: Option<f64>,
}

/// Everything a stream said besides its content blocks.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct StreamSummary {
    /// The server's `model` field, from the first chunk that had one.
    pub model: Option<String>,
    /// Why generation stopped, where the server said.
    pub finish_reason: Option<String>,
    /// The usage chunk, where one arrived.
    pub usage: Option<ProviderUsage>,
    /// `prompt_tokens_details.cached_tokens`, where reported.
    pub prompt_cache: Option<PromptCacheUsage>,
    /// llama.cpp's `timings`, from the last chunk that had them.
    pub timings: Option<LlamaTimings>,
    /// Whether `data: [DONE]` arrived.
    pub saw_done: bool,
    /// Events decoded, `[DONE]` included.
    pub n_events: u64,
    /// Events that were not the format's and were passed over, counted only by a decoder
    /// made to skip them ([`crate::Format::decoder`] with `true`; a plain decoder refuses
    /// the stream at the first one).
    pub n_skipped: u64,
    /// The first passed-over event's error, clipped.
    pub first_skipped: Option<String>,
    /// What the format said that the blocks have no field for and an exact replay needs
    /// (Anthropic's thinking signatures and message id, Responses' item ids, cache-usage
    /// fields, block types cuca does not know, verbatim), as one JSON object; `None` for a
    /// format that needs nothing more (Chat Completions). A recorder stores it in the call's
    /// `CallWire` record; each format documents its fields.
    pub wire: Option<serde_json::Value>,
}
