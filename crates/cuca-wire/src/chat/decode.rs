//! The chat-completions stream decoder: bytes in, content blocks and a summary out.
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

use cuca_events::{MessageContentBlock, PromptCacheUsage, ProviderUsage};
use serde::Deserialize;

use crate::error::WireError;
use crate::sse::{SseDecoder, SseEvent};
use crate::summary::{LlamaTimings, StreamSummary};
use crate::text::{clip, error_value_text, for_clip_error, server_text};
use crate::StreamDecoder;

/// Decodes one chat-completions event stream.
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
#[derive(Debug, Default)]
pub struct ChatStreamDecoder {
    sse: SseDecoder,
    state: ChatState,
}

#[derive(Debug, Default)]
struct ChatState {
    summary: StreamSummary,
    /// Pass over an event that is not a chat chunk instead of failing the stream.
    skip_malformed: bool,
    tools: Vec<PartialToolCall>,
    /// The last error's text with the server's bytes unclipped (see
    /// [`ChatStreamDecoder::error_detail`]).
    detail: Option<String>,
}

#[derive(Debug, Default)]
struct PartialToolCall {
    index: usize,
    id: String,
    name: String,
    arguments: String,
}

impl ChatStreamDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        ChatStreamDecoder::default()
    }

    /// A decoder that passes over an event that does not parse as a chat chunk, counting it
    /// in [`StreamSummary::n_skipped`], instead of refusing the rest of the stream: for a
    /// recorder that forwards every byte whatever it holds and must record all it can (the
    /// proxy). An error the server sends in the stream still fails it.
    pub fn skipping_malformed() -> Self {
        let mut decoder = ChatStreamDecoder::default();
        decoder.state.skip_malformed = true;
        decoder
    }

    /// Feeds the next bytes; the blocks they complete are pushed onto `out` in order.
    ///
    /// Bytes after `data: [DONE]` are ignored.
    pub fn feed(
        &mut self,
        bytes: &[u8],
        out: &mut Vec<MessageContentBlock>,
    ) -> Result<(), WireError> {
        if self.state.summary.saw_done {
            return Ok(());
        }
        let state = &mut self.state;
        let fed = self
            .sse
            .feed(bytes, &mut |event| state.on_event(event, out));
        match fed {
            // Bytes after `[DONE]` are ignored also when they arrive in the same read as it:
            // the SSE layer decodes the whole read before this decoder can stop it, so an
            // error met once `[DONE]` was seen came from those bytes. (Found by fuzzing: the
            // same stream was accepted or refused depending on where the network split it.)
            Err(_) if self.state.summary.saw_done => Ok(()),
            other => other,
        }
    }

    /// The last error's text with the server's own bytes in it unclipped (up to what the call
    /// log's `clip_error` needs), when the error quoted them: the in-stream error's message,
    /// the chunk that did not parse, a nameless tool call's arguments. `None` for errors made
    /// of the decoder's own words alone (offsets, counts).
    pub fn error_detail(&self) -> Option<&str> {
        self.state.detail.as_deref()
    }

    /// Whether `data: [DONE]` has arrived: the caller may stop reading.
    pub fn is_done(&self) -> bool {
        self.state.summary.saw_done
    }

    /// The summary so far.
    pub fn summary(&self) -> &StreamSummary {
        &self.state.summary
    }

    /// Ends the stream (the body ended), pushing any tool calls still open.
    ///
    /// A stream is complete when `[DONE]` arrived or, failing that, a `finish_reason` did:
    /// a server that closes the body right after its last chunk lost nothing. A body that
    /// ends before either is refused with [`WireError::Truncated`], because the answer
    /// may have been cut anywhere.
    pub fn finish(
        &mut self,
        out: &mut Vec<MessageContentBlock>,
    ) -> Result<StreamSummary, WireError> {
        if !self.state.summary.saw_done {
            let state = &mut self.state;
            self.sse.finish(&mut |event| state.on_event(event, out))?;
        }
        self.state.flush_tools(out)?;
        let summary = &self.state.summary;
        if !summary.saw_done && summary.finish_reason.is_none() {
            return Err(WireError::Truncated {
                n_events: summary.n_events,
            });
        }
        Ok(summary.clone())
    }
}

impl ChatState {
    fn on_event(
        &mut self,
        event: SseEvent<'_>,
        out: &mut Vec<MessageContentBlock>,
    ) -> Result<(), WireError> {
        if self.summary.saw_done {
            return Ok(());
        }
        let data = event.data.trim();
        if event.event == "error" {
            let text = server_text(data);
            let message = clip(&text);
            self.detail = Some(for_clip_error(text));
            return Err(WireError::StreamError { message });
        }
        if data.is_empty() {
            return Ok(());
        }
        self.summary.n_events += 1;
        if data == "[DONE]" {
            self.flush_tools(out)?;
            self.summary.saw_done = true;
            return Ok(());
        }
        let chunk: WireChunk<'_> = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(e) if self.skip_malformed => {
                self.summary.n_skipped += 1;
                if self.summary.first_skipped.is_none() {
                    self.summary.first_skipped = Some(format!(
                        "event {} is not a chat.completion.chunk ({e}): {}",
                        self.summary.n_events,
                        clip(data)
                    ));
                }
                return Ok(());
            }
            Err(e) => {
                let what = format!(
                    "event {} is not a chat.completion.chunk ({e})",
                    self.summary.n_events
                );
                self.detail = Some(for_clip_error(format!("{what}: {data}")));
                return Err(WireError::Decode {
                    message: format!("{what}: {}", clip(data)),
                });
            }
        };
        if let Some(error) = chunk.error {
            let text = error_value_text(&error).unwrap_or_else(|| data.to_owned());
            let message = clip(&text);
            self.detail = Some(for_clip_error(text));
            return Err(WireError::StreamError { message });
        }
        if self.summary.model.is_none() {
            if let Some(model) = chunk.model.filter(|m| !m.is_empty()) {
                self.summary.model = Some(model.into_owned());
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
                    self.tool_piece(piece.index.unwrap_or(position), piece);
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.flush_tools(out)?;
                self.summary.finish_reason = Some(reason);
            }
        }
        if let Some(usage) = chunk.usage {
            let prompt_tokens = usage.prompt_tokens.unwrap_or(0);
            let completion_tokens = usage.completion_tokens.unwrap_or(0);
            self.summary.usage = Some(ProviderUsage {
                prompt_tokens,
                completion_tokens,
                reasoning_tokens: usage
                    .completion_tokens_details
                    .and_then(|d| d.reasoning_tokens),
                cost: usage.cost,
            });
            if let Some(cached_tokens) = usage.prompt_tokens_details.and_then(|d| d.cached_tokens) {
                self.summary.prompt_cache = Some(PromptCacheUsage { cached_tokens });
            }
        }
        if let Some(timings) = chunk.timings {
            self.summary.timings = Some(timings);
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
                self.detail = Some(for_clip_error(format!(
                    "{what} (arguments: {})",
                    call.arguments
                )));
                return Err(WireError::Decode {
                    message: format!("{what} (arguments: {})", clip(&call.arguments)),
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

#[derive(Deserialize)]
struct WireChoice {
    #[serde(default)]
    index: Option<u32>,
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
    index: Option<usize>,
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
}

#[derive(Deserialize)]
struct WireCompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

#[cfg(test)]
mod tests;

impl StreamDecoder for ChatStreamDecoder {
    fn feed(&mut self, bytes: &[u8], out: &mut Vec<MessageContentBlock>) -> Result<(), WireError> {
        ChatStreamDecoder::feed(self, bytes, out)
    }

    fn finish(&mut self, out: &mut Vec<MessageContentBlock>) -> Result<StreamSummary, WireError> {
        ChatStreamDecoder::finish(self, out)
    }

    fn summary(&self) -> &StreamSummary {
        ChatStreamDecoder::summary(self)
    }

    fn is_done(&self) -> bool {
        ChatStreamDecoder::is_done(self)
    }

    fn error_detail(&self) -> Option<&str> {
        ChatStreamDecoder::error_detail(self)
    }
}
