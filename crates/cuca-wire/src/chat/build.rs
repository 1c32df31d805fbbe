//! The request body a client sends: a [`UnifiedRequest`] in the Chat Completions shape (the
//! other direction of [`super::parse_request`]).

use cuca_events::{Message, MessageContentBlock, Role, ToolChoice, UnifiedRequest};
use serde::Serialize;
use serde_json::{json, Value};

/// Which field carries a request's output ceiling: OpenAI's newer models refuse `max_tokens`
/// and want `max_completion_tokens`; llama.cpp and most compatible servers read `max_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_tokens` (llama.cpp, vLLM, most OpenAI-compatible servers).
    MaxTokens,
    /// `max_completion_tokens` (OpenAI's API).
    MaxCompletionTokens,
}

/// The body of `POST /v1/chat/completions` for `request` and `model`, always streaming with
/// usage.
///
/// Thinking blocks of earlier assistant messages are not sent back (the API has no field
/// for them); tool results become `role: "tool"` messages, one per result; images become
/// `image_url` parts with a `data:` URL.
///
/// ```
/// use cuca_events::{Message, UnifiedRequest};
/// use cuca_wire::chat::{request_body, MaxTokensField};
///
/// let mut request = UnifiedRequest::new(vec![Message::user("hi")]);
/// request.max_tokens = Some(8);
/// let body: serde_json::Value =
///     serde_json::from_slice(&request_body(&request, "tiny", MaxTokensField::MaxTokens)?)?;
/// assert_eq!(body["max_tokens"], 8);
/// assert_eq!(body["stream_options"]["include_usage"], true);
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn request_body(
    request: &UnifiedRequest,
    model: &str,
    ceiling: MaxTokensField,
) -> Result<Vec<u8>, serde_json::Error> {
    let mut messages = Vec::with_capacity(request.messages.len());
    for message in &request.messages {
        push_message(&mut messages, message);
    }
    let tools: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| {
            json!({
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                }
            })
        })
        .collect();
    let tool_choice = request.tool_choice.as_ref().map(|choice| match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Named(name) => json!({"type": "function", "function": {"name": name}}),
    });
    let (max_tokens, max_completion_tokens) = match ceiling {
        MaxTokensField::MaxCompletionTokens => (None, request.max_tokens),
        MaxTokensField::MaxTokens => (request.max_tokens, None),
    };
    let body = WireRequest {
        model: (!model.is_empty()).then_some(model),
        messages,
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        max_tokens,
        max_completion_tokens,
        temperature: request.temperature,
        reasoning_effort: request.reasoning_effort.as_deref(),
        tools: (!tools.is_empty()).then_some(tools),
        tool_choice,
    };
    serde_json::to_vec(&body)
}

fn push_message(out: &mut Vec<Value>, message: &Message) {
    let mut text = String::new();
    let mut images = Vec::new();
    let mut tool_calls = Vec::new();
    for block in &message.content {
        match block {
            MessageContentBlock::Text { text: t } => text.push_str(t),
            MessageContentBlock::Thinking { .. } => {}
            MessageContentBlock::ToolCall {
                id,
                name,
                arguments,
            } => tool_calls.push(json!({
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            })),
            MessageContentBlock::ToolResult {
                tool_call_id,
                content,
                ..
            } => out.push(json!({
                "role": "tool",
                "tool_call_id": tool_call_id,
                "content": content,
            })),
            MessageContentBlock::ImageBase64 { media_type, data } => images.push(json!({
                "type": "image_url",
                "image_url": {"url": format!("data:{media_type};base64,{data}")},
            })),
        }
    }
    if message.role == Role::Tool {
        // A tool message carries its results as ToolResult blocks, pushed above; plain
        // text in one has no call id to answer and is dropped with it.
        return;
    }
    let only_results = text.is_empty()
        && images.is_empty()
        && tool_calls.is_empty()
        && message
            .content
            .iter()
            .any(|b| matches!(b, MessageContentBlock::ToolResult { .. }));
    if only_results {
        // A user message that only carries tool results (the Anthropic habit) was fully
        // sent as tool messages above; an empty user message after them would confuse.
        return;
    }
    let content = if images.is_empty() {
        json!(text)
    } else {
        let mut parts = Vec::with_capacity(images.len() + 1);
        if !text.is_empty() {
            parts.push(json!({"type": "text", "text": text}));
        }
        parts.extend(images);
        Value::Array(parts)
    };
    let mut wire = json!({"role": message.role.as_str(), "content": content});
    if !tool_calls.is_empty() {
        wire["tool_calls"] = Value::Array(tool_calls);
        if text.is_empty() {
            wire["content"] = Value::Null;
        }
    }
    out.push(wire);
}

#[derive(Serialize)]
struct WireRequest<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a str>,
    messages: Vec<Value>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[cfg(test)]
mod tests;
