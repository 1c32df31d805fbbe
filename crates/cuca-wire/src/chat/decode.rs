//! The chat-completions stream decoder (bytes in, content blocks and a summary out) and the
//! reader of a whole `chat.completion` answer.
//!
//! It is pure (no I/O, no clock), so a test can feed it a real transcript split at any
//! byte and compare. What it maps:
//!
//! * `delta.reasoning_content` (llama.cpp, DeepSeek) or else `delta.reasoning` → one
//!   [`MessageContentBlock::Thinking`] per delta;
//! * `delta.content` → one [`MessageContentBlock::Text`] per delta;
//! * `delta.tool_calls[i]` pieces, assembled by `index` → one complete
//!   [`MessageContentBlock::ToolCall`] each, emitted at `finish_reason` or at the end;
//! * `finish_reason`, the server's `model`, the final usage chunk (`choices: []` with
//!   `usage`, `prompt_tokens_details.cached_tokens`, `completion_tokens_details.reasoning_tokens`
//!   and `cost` where present), llama.cpp's `timings`, and `data: [DONE]`.
//!
//! Empty and role-only deltas yield nothing. Only choice `0` is read: the client never asks
//! for `n > 1`.

use std::borrow::Cow;

use cuca_events::{Message, MessageContentBlock, PromptCacheUsage, ProviderUsage, TokenDetail};
use serde::Deserialize;

use serde_json::Value;

use super::request::message_of;
use crate::error::WireError;
use crate::stream::{bounded, stream_decoder, Common, Events};
use crate::summary::{LlamaTimings, StreamSummary};
use crate::text::{clip_server_words, error_value_text, for_clip_error};

stream_decoder!(
    /// Decodes one chat-completions event stream.
    ///
    /// A stream is complete when `[DONE]` arrived or, failing that, a `finish_reason` did: a
    /// server that closes the body right after its last chunk lost nothing. Tool calls still
    /// open at the end are pushed by [`ChatStreamDecoder::finish`].
    ///
    /// ```
    /// use cuca_wire::chat::ChatStreamDecoder;
    /// use cuca_events::MessageContentBlock;
    ///
    /// let mut decoder = ChatStreamDecoder::new();
    /// let mut blocks = Vec::new();
    /// decoder.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"no", &mut blocks).unwrap();
    /// decoder.feed(b"ted\"},\"finish_reason\":\"stop\"}]}\r\n\r\ndata: [DONE]\n\n", &mut blocks).unwrap();
    /// let summary = decoder.finish(&mut blocks).unwrap();
    /// assert_eq!(blocks, vec![MessageContentBlock::text("noted")]);
    /// assert_eq!(summary.finish_reason.as_deref(), Some("stop"));
    /// assert!(summary.saw_done);
    /// ```
    ChatStreamDecoder,
    ChatEvents
);

/// What the chat decoder keeps beside the shared state: the tool calls being assembled.
#[derive(Debug, Default)]
pub(crate) struct ChatEvents {
    common: Common,
    tools: Vec<PartialToolCall>,
}

#[derive(Debug, Default)]
struct PartialToolCall {
    index: usize,
    id: String,
    name: String,
    arguments: String,
}

impl Events for ChatEvents {
    fn common(&self) -> &Common {
        &self.common
    }

    fn common_mut(&mut self) -> &mut Common {
        &mut self.common
    }

    fn on_data(
        &mut self,
        _event: &str,
        data: &str,
        out: &mut Vec<MessageContentBlock>,
    ) -> Result<(), WireError> {
        self.on_chunk(data, out)
    }

    fn end(
        &mut self,
        tail: Result<(), WireError>,
        out: &mut Vec<MessageContentBlock>,
    ) -> Result<(), WireError> {
        tail?;
        self.flush_tools(out)?;
        let summary = &self.common.summary;
        if !summary.saw_done && summary.finish_reason.is_none() {
            return Err(self.common.truncated());
        }
        Ok(())
    }
}

impl ChatEvents {
    fn on_chunk(
        &mut self,
        data: &str,
        out: &mut Vec<MessageContentBlock>,
    ) -> Result<(), WireError> {
        if data == "[DONE]" {
            self.flush_tools(out)?;
            self.common.summary.saw_done = true;
            return Ok(());
        }
        let chunk: WireChunk<'_> = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(e) => {
                return self
                    .common
                    .malformed(&format!("not a chat.completion.chunk ({e})"), data)
            }
        };
        if let Some(error) = chunk.error {
            let text = error_value_text(&error).unwrap_or_else(|| data.to_owned());
            return Err(self.common.stream_error(text));
        }
        if let Err(why) = chunk.check_indices() {
            return self.common.malformed(&why, data);
        }
        if self.common.summary.model.is_none() {
            if let Some(model) = chunk.model.filter(|m| !m.is_empty()) {
                self.common.summary.model = Some(model.into_owned());
            }
        }
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                let reasoning = delta
                    .reasoning_content
                    .filter(|r| !r.is_empty())
                    .or(delta.reasoning.filter(|r| !r.is_empty()));
                if let Some(thinking) = reasoning {
                    out.push(MessageContentBlock::Thinking { thinking });
                }
                if let Some(text) = delta.content.filter(|c| !c.is_empty()) {
                    out.push(MessageContentBlock::Text { text });
                }
                for (position, piece) in
                    delta.tool_calls.unwrap_or_default().into_iter().enumerate()
                {
                    let index = piece
                        .index
                        .and_then(|i| usize::try_from(i).ok())
                        .unwrap_or(position);
                    self.tool_piece(index, piece);
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.flush_tools(out)?;
                self.common.summary.finish_reason = Some(reason);
            }
        }
        if let Some(usage) = chunk.usage {
            let prompt_tokens = usage.prompt_tokens.unwrap_or(0);
            let completion_tokens = usage.completion_tokens.unwrap_or(0);
            let reasoning_tokens = usage
                .completion_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens);
            let prompt_details = usage.prompt_tokens_details.as_ref();
            self.common.summary.usage = Some(ProviderUsage {
                prompt_tokens,
                completion_tokens,
                reasoning_tokens,
                cost: usage.cost,
                detail: TokenDetail {
                    prompt: usage.prompt_tokens,
                    output: usage.completion_tokens,
                    cache_read: prompt_details.and_then(|d| d.cached_tokens),
                    cache_write: prompt_details.and_then(|d| d.cache_write_tokens),
                    reasoning: reasoning_tokens,
                    ..TokenDetail::default()
                },
            });
            if let Some(cached_tokens) = prompt_details.and_then(|d| d.cached_tokens) {
                self.common.summary.prompt_cache = Some(PromptCacheUsage { cached_tokens });
            }
        }
        if let Some(timings) = chunk.timings {
            self.common.summary.timings = Some(timings);
        }
        Ok(())
    }

    fn tool_piece(&mut self, index: usize, piece: WireToolCall) {
        let slot = match self.tools.iter().position(|t| t.index == index) {
            Some(slot) => slot,
            None => {
                self.tools.push(PartialToolCall {
                    index,
                    ..PartialToolCall::default()
                });
                self.tools.len() - 1
            }
        };
        let call = &mut self.tools[slot];
        if let Some(id) = piece.id.filter(|id| !id.is_empty()) {
            // OpenAI sends the id once; some servers repeat it on every piece.
            if call.id.is_empty() {
                call.id = id;
            }
        }
        if let Some(function) = piece.function {
            if let Some(name) = function.name.filter(|n| !n.is_empty()) {
                // The documented shape sends the whole name in the first piece; a server
                // that repeats it must not double it.
                if call.name.is_empty() {
                    call.name = name;
                } else if call.name != name {
                    call.name.push_str(&name);
                }
            }
            if let Some(arguments) = function.arguments {
                call.arguments.push_str(&arguments);
            }
        }
    }

    fn flush_tools(&mut self, out: &mut Vec<MessageContentBlock>) -> Result<(), WireError> {
        if self.tools.is_empty() {
            return Ok(());
        }
        let mut tools = std::mem::take(&mut self.tools);
        tools.sort_by_key(|t| t.index);
        for call in tools {
            if call.name.is_empty() {
                let what = format!("tool call {} ended without a function name", call.index);
                self.common.detail = Some(for_clip_error(format!(
                    "{what} (arguments: {})",
                    call.arguments
                )));
                return Err(WireError::Decode {
                    message: format!("{what} (arguments: {})", clip_server_words(&call.arguments)),
                });
            }
            let id = if call.id.is_empty() {
                format!("call_{}", call.index)
            } else {
                call.id
            };
            out.push(MessageContentBlock::ToolCall {
                id,
                name: call.name,
                arguments: call.arguments,
            });
        }
        Ok(())
    }
}

/// A non-streamed `chat.completion` object's blocks (reasoning, then text, then tool calls,
/// the order a stream of it delivers them) and summary.
pub fn decode_whole(body: &[u8]) -> Result<(Vec<MessageContentBlock>, StreamSummary), String> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| format!("the upstream's answer is not JSON: {e}"))?;
    let mut blocks = Vec::new();
    let mut summary = StreamSummary {
        model: value
            .get("model")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
            .map(str::to_owned),
        ..StreamSummary::default()
    };
    let choice = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| choices.first());
    if let Some(choice) = choice {
        summary.finish_reason = choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(message) = choice.get("message") {
            if let Ok(Message { content, .. }) = message_of(message) {
                // A stream yields nothing for an empty delta; neither does its whole form.
                blocks = content
                    .into_iter()
                    .filter(|block| match block {
                        MessageContentBlock::Text { text } => !text.is_empty(),
                        MessageContentBlock::Thinking { thinking } => !thinking.is_empty(),
                        _ => true,
                    })
                    .collect();
            }
        }
    }
    if let Some(usage) = value.get("usage") {
        let count = |pointer: &str| usage.pointer(pointer).and_then(Value::as_u64);
        summary.usage = Some(ProviderUsage {
            prompt_tokens: count("/prompt_tokens").unwrap_or(0),
            completion_tokens: count("/completion_tokens").unwrap_or(0),
            reasoning_tokens: count("/completion_tokens_details/reasoning_tokens"),
            cost: usage.get("cost").and_then(Value::as_f64),
            detail: TokenDetail {
                prompt: count("/prompt_tokens"),
                output: count("/completion_tokens"),
                cache_read: count("/prompt_tokens_details/cached_tokens"),
                cache_write: count("/prompt_tokens_details/cache_write_tokens"),
                reasoning: count("/completion_tokens_details/reasoning_tokens"),
                ..TokenDetail::default()
            },
        });
        if let Some(cached_tokens) = count("/prompt_tokens_details/cached_tokens") {
            summary.prompt_cache = Some(PromptCacheUsage { cached_tokens });
        }
    }
    summary.n_events = 1;
    Ok((blocks, summary))
}

#[derive(Deserialize)]
struct WireChunk<'a> {
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    choices: Option<Vec<WireChoice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    timings: Option<LlamaTimings>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

impl WireChunk<'_> {
    /// Refuses a choice or tool call index past [`crate::MAX_INDEX`]: the decoder keeps one
    /// tool call per index, so an index is memory the upstream would choose.
    fn check_indices(&self) -> Result<(), String> {
        for choice in self.choices.iter().flatten() {
            bounded("choices[].index", choice.index.unwrap_or(0))?;
            let pieces = choice.delta.as_ref().and_then(|d| d.tool_calls.as_ref());
            for piece in pieces.into_iter().flatten() {
                bounded("tool_calls[].index", piece.index.unwrap_or(0))?;
            }
        }
        Ok(())
    }
}

#[derive(Deserialize)]
struct WireChoice {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    delta: Option<WireDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunction>,
}

#[derive(Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<WirePromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<WireCompletionDetails>,
    #[serde(default)]
    cost: Option<f64>,
}

#[derive(Deserialize)]
struct WirePromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
    /// Prompt tokens written to the cache, as gateways that pass on Anthropic's cache
    /// writes (OpenRouter) report them.
    #[serde(default)]
    cache_write_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct WireCompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}
