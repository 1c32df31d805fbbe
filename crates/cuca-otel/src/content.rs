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

use cuca_events::{Message, MessageContentBlock, Role, ToolDefinition};
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

/// `input.value` and its MIME type: what this call was sent that the call before it was not
/// (the messages after the conversation's last assistant message: the new question, or the
/// tools' results), so each span of a tool loop shows its own step. Only user text is
/// joined as plain text; new input that holds anything else (a tool result) is its messages
/// as the conventions' JSON. A conversation that ends with an assistant message (tool results
/// not recorded) has no new input to show, so the whole conversation sent is shown.
pub(crate) fn new_input(messages: &[&Message]) -> (String, &'static str) {
    let messages: Vec<&Message> = messages
        .iter()
        .copied()
        .filter(|m| m.role != Role::System)
        .collect();
    let since = messages
        .iter()
        .rposition(|m| m.role == Role::Assistant)
        .map_or(0, |at| at + 1);
    let new = &messages[since..];
    if new.is_empty() {
        return (
            input_messages(messages.iter().copied()),
            crate::conventions::MIME_JSON,
        );
    }
    let text_only = new.iter().all(|m| {
        m.role == Role::User
            && m.content
                .iter()
                .all(|b| matches!(b, MessageContentBlock::Text { .. }))
    });
    let text: Vec<String> = new.iter().map(|m| m.text()).collect();
    if text_only && text.iter().all(|t| !t.is_empty()) {
        (text.join("\n\n"), crate::conventions::MIME_TEXT)
    } else {
        (
            input_messages(new.iter().copied()),
            crate::conventions::MIME_JSON,
        )
    }
}

/// The most tools a span names (`llm.tools.{i}.tool.json_schema`): the OpenTelemetry SDKs'
/// default attribute-count limit, which collectors and backends are built around. A request
/// that offered more is rare (a model's context holds few), and its first tools are sent.
pub(crate) const MAX_TOOLS: usize = 128;

/// OpenInference's `llm.tools.{i}.tool.json_schema` values for the tools a `CallRequest`
/// recorded (the JSON text of an array of `{name, description, parameters}`): each in the
/// OpenAI function shape a native instrumentor sends, at most [`MAX_TOOLS`]. None when the
/// record holds no tools or is not such an array.
pub(crate) fn tool_schemas(tools: &str) -> Vec<String> {
    let Ok(Value::Array(tools)) = serde_json::from_str::<Value>(tools) else {
        return Vec::new();
    };
    tools
        .iter()
        .filter_map(Value::as_object)
        .take(MAX_TOOLS)
        .map(|tool| {
            let mut function = serde_json::Map::new();
            for key in ["name", "description", "parameters"] {
                if let Some(value) = tool.get(key).filter(|v| !v.is_null()) {
                    function.insert(key.to_owned(), value.clone());
                }
            }
            json!({"type": "function", "function": function}).to_string()
        })
        .collect()
}

/// [`tool_schemas`] for the tools a live request offers.
pub(crate) fn tool_definition_schemas(tools: &[ToolDefinition]) -> Vec<String> {
    tools
        .iter()
        .take(MAX_TOOLS)
        .map(|tool| {
            json!({
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            })
            .to_string()
        })
        .collect()
}

/// `output.value` and its MIME type: the answer's text; the reasoning's text for an answer
/// that is reasoning alone (a reasoning model cut at its ceiling), which reads as what the
/// model said; else the output messages (JSON), for an answer that holds no text (a tool
/// call alone).
pub(crate) fn output_value(
    blocks: &[MessageContentBlock],
    output_messages: &str,
) -> (String, &'static str) {
    let answer = answer_text(blocks);
    if !answer.is_empty() {
        return (answer, crate::conventions::MIME_TEXT);
    }
    let reasoning = reasoning_text(blocks);
    let calls_a_tool = blocks
        .iter()
        .any(|b| matches!(b, MessageContentBlock::ToolCall { .. }));
    if !reasoning.is_empty() && !calls_a_tool {
        return (reasoning, crate::conventions::MIME_TEXT);
    }
    (output_messages.to_owned(), crate::conventions::MIME_JSON)
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

/// The text of an answer's reasoning blocks, joined.
fn reasoning_text(blocks: &[MessageContentBlock]) -> String {
    let mut out = String::new();
    for block in blocks {
        if let MessageContentBlock::Thinking { thinking } = block {
            out.push_str(thinking);
        }
    }
    out
}

#[cfg(test)]
mod tests;
