//! The opt-in content attributes: messages and answers as the GenAI conventions' JSON parts.
//!
//! Nothing here runs unless the caller asked for content (`--with-content`,
//! [`crate::ExportOptions::with_content`], [`crate::LiveConfig::with_content`]): prompts are
//! the person's own data, and the conventions mark these attributes opt-in for that reason.
//!
//! The shapes are the conventions' input- and output-messages schemas: a message is
//! `{"role", "parts"}` (an output message adds the required `finish_reason`), and a part is
//! `text`, `reasoning`, `tool_call` (`id`, `name`, `arguments`), `tool_call_response` (`id`,
//! `response`) or `blob`. A streamed answer is recorded one block per delta; consecutive text
//! (and reasoning) blocks are joined into one part, as the message the model sent holds them,
//! rather than one part per token.

use cuca_events::{Message, MessageContentBlock, Role};
use serde_json::{json, Value};

/// The finish reason an output message carries when the recording has none: a session
/// recorded without call metadata (`SessionLogPlugin` not asked for it) has no `CallFinish`
/// record, yet the conventions' output-messages schema requires the field, and a backend that
/// validates it (Phoenix) drops an answer without one. A turn closed by its
/// Latency-then-TokenUsage pair ended normally, so `stop`; one whose answer holds a tool call
/// ended to call it, so `tool_call` (see [`default_finish_reason`]).
pub(crate) const DEFAULT_FINISH_REASON: &str = "stop";

/// The finish reason of an answer whose recording names none: `tool_call` when it holds a
/// tool call, else [`DEFAULT_FINISH_REASON`].
pub(crate) fn default_finish_reason(blocks: &[MessageContentBlock]) -> &'static str {
    if blocks
        .iter()
        .any(|b| matches!(b, MessageContentBlock::ToolCall { .. }))
    {
        "tool_call"
    } else {
        DEFAULT_FINISH_REASON
    }
}

/// A provider's finish word as the conventions' `FinishReason` spells it (`stop`, `length`,
/// `content_filter`, `tool_call`, `error`); a word it has no name for is kept as it was, as
/// the schema allows. `gen_ai.response.finish_reasons` keeps the provider's own word.
pub(crate) fn conventions_finish_reason(reason: &str) -> &str {
    match reason {
        "tool_calls" | "function_call" | "tool_use" => "tool_call",
        "end_turn" | "stop_sequence" | "completed" => "stop",
        "max_tokens" | "max_output_tokens" => "length",
        other => other,
    }
}

/// The blocks as conventions parts, consecutive text and reasoning blocks joined.
fn parts(blocks: &[MessageContentBlock]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(blocks.len().min(8));
    // The kind and text of the part being joined, pushed when a block of another kind comes.
    let mut open: Option<(&'static str, String)> = None;
    for block in blocks {
        let joinable = match block {
            MessageContentBlock::Text { text } => Some(("text", text)),
            MessageContentBlock::Thinking { thinking } => Some(("reasoning", thinking)),
            _ => None,
        };
        match (joinable, open.as_mut()) {
            (Some((kind, text)), Some((open_kind, joined))) if *open_kind == kind => {
                joined.push_str(text);
                continue;
            }
            _ => {}
        }
        if let Some((kind, joined)) = open.take() {
            out.push(json!({"type": kind, "content": joined}));
        }
        match joinable {
            Some((kind, text)) => open = Some((kind, text.clone())),
            None => out.push(other_part(block)),
        }
    }
    if let Some((kind, joined)) = open {
        out.push(json!({"type": kind, "content": joined}));
    }
    out
}

/// A block that is neither text nor reasoning as its conventions part.
fn other_part(block: &MessageContentBlock) -> Value {
    match block {
        MessageContentBlock::Text { text } => json!({"type": "text", "content": text}),
        MessageContentBlock::Thinking { thinking } => {
            json!({"type": "reasoning", "content": thinking})
        }
        MessageContentBlock::ToolCall {
            id,
            name,
            arguments,
        } => {
            // The schema's `arguments` is any JSON value; a model's arguments are JSON text,
            // sent as the value they spell, or as the text when they do not parse (a stream
            // cut mid-call).
            let arguments = serde_json::from_str::<Value>(arguments)
                .unwrap_or_else(|_| Value::String(arguments.clone()));
            json!({"type": "tool_call", "id": id, "name": name, "arguments": arguments})
        }
        MessageContentBlock::ToolResult {
            tool_call_id,
            content,
            ..
        } => json!({
            "type": "tool_call_response",
            "id": tool_call_id,
            "response": content,
        }),
        MessageContentBlock::ImageBase64 { media_type, data } => json!({
            "type": "blob",
            "modality": "image",
            "mime_type": media_type,
            "content": data,
        }),
    }
}

/// `gen_ai.system_instructions`: the system prompts as text parts.
pub(crate) fn system_instructions(prompts: &[String]) -> String {
    let parts: Vec<Value> = prompts
        .iter()
        .map(|text| json!({"type": "text", "content": text}))
        .collect();
    Value::Array(parts).to_string()
}

/// `gen_ai.input.messages`: the conversation sent, one object per message.
pub(crate) fn input_messages<'a>(messages: impl IntoIterator<Item = &'a Message>) -> String {
    let messages: Vec<Value> = messages
        .into_iter()
        .map(|message| {
            json!({
                "role": message.role.as_str(),
                "parts": parts(&message.content),
            })
        })
        .collect();
    Value::Array(messages).to_string()
}

/// `gen_ai.output.messages`: the answer as one assistant message, with the finish reason the
/// schema requires (the recorded one in the conventions' spelling, else
/// [`default_finish_reason`]).
pub(crate) fn output_messages(
    blocks: &[MessageContentBlock],
    finish_reason: Option<&str>,
) -> String {
    let reason =
        finish_reason.map_or_else(|| default_finish_reason(blocks), conventions_finish_reason);
    Value::Array(vec![json!({
        "role": "assistant",
        "parts": parts(blocks),
        "finish_reason": reason,
    })])
    .to_string()
}

/// The text of the last user message: what a trace's root shows as its input
/// (`input.value`), as a natively traced call's does in a backend's session view.
pub(crate) fn last_user_text<'a>(
    messages: impl DoubleEndedIterator<Item = &'a Message>,
) -> Option<String> {
    messages
        .rev()
        .find(|m| m.role == Role::User)
        .map(Message::text)
        .filter(|t| !t.is_empty())
}

/// `output.value` and its MIME type: the answer's text, or the output messages (JSON) when
/// the answer holds no text (a tool call alone).
pub(crate) fn output_value(
    blocks: &[MessageContentBlock],
    output_messages: &str,
) -> (String, &'static str) {
    let answer = answer_text(blocks);
    if answer.is_empty() {
        (output_messages.to_owned(), crate::conventions::MIME_JSON)
    } else {
        (answer, crate::conventions::MIME_TEXT)
    }
}

/// The text of an answer's text blocks, joined: what a trace's root shows as its output.
pub(crate) fn answer_text(blocks: &[MessageContentBlock]) -> String {
    let mut out = String::new();
    for block in blocks {
        if let MessageContentBlock::Text { text } = block {
            out.push_str(text);
        }
    }
    out
}

#[cfg(test)]
mod tests;
