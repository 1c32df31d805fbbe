//! The opt-in content attributes: messages and answers as the GenAI conventions' JSON parts.
//!
//! Nothing here runs unless the caller asked for content (`--with-content`,
//! [`crate::ExportOptions::with_content`], [`crate::LiveConfig::with_content`]): prompts are
//! the person's own data, and the conventions mark these attributes opt-in for that reason.

use cuca_events::{Message, MessageContentBlock};
use serde_json::{json, Value};

/// One block as a conventions part (`text`, `reasoning`, `tool_call`, `tool_call_response`,
/// `blob`).
fn part(block: &MessageContentBlock) -> Value {
    match block {
        MessageContentBlock::Text { text } => json!({"type": "text", "content": text}),
        MessageContentBlock::Thinking { thinking } => {
            json!({"type": "reasoning", "content": thinking})
        }
        MessageContentBlock::ToolCall {
            id,
            name,
            arguments,
        } => json!({"type": "tool_call", "id": id, "name": name, "arguments": arguments}),
        MessageContentBlock::ToolResult {
            tool_call_id,
            content,
            is_error,
        } => json!({
            "type": "tool_call_response",
            "id": tool_call_id,
            "response": content,
            "is_error": is_error,
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
                "parts": message.content.iter().map(part).collect::<Vec<_>>(),
            })
        })
        .collect();
    Value::Array(messages).to_string()
}

/// `gen_ai.output.messages`: the answer as one assistant message; `finish_reason` only where
/// the record has one.
pub(crate) fn output_messages(
    blocks: &[MessageContentBlock],
    finish_reason: Option<&str>,
) -> String {
    let mut message = json!({
        "role": "assistant",
        "parts": blocks.iter().map(part).collect::<Vec<_>>(),
    });
    if let (Some(reason), Some(object)) = (finish_reason, message.as_object_mut()) {
        object.insert("finish_reason".to_owned(), Value::String(reason.to_owned()));
    }
    Value::Array(vec![message]).to_string()
}

#[cfg(test)]
mod tests;
