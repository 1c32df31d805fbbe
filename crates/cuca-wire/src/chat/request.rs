//! Reading a Chat Completions request (the caller's body as a [`WireRequest`]).

use cuca_events::{Message, MessageContentBlock, Role, ToolChoice, ToolDefinition, UnifiedRequest};
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::BTreeMap;

use crate::body::{image_of, shallow_str, str_field};
use crate::WireRequest;

/// The fields recorded elsewhere (the messages, the model and the tools have records or
/// fields of their own) or that only shape the transport, not the answer.
const NOT_PARAMETERS: [&str; 5] = ["messages", "model", "tools", "stream", "stream_options"];

/// Reads a Chat Completions request body. `Err` says, in words, why it is not one; the
/// record path still forwards such a body unchanged (the upstream's own 400 is the answer the
/// caller should see), it only records nothing.
///
/// The top level is read as raw values, which have no nesting limit, so a parameter nested
/// deeper than serde_json builds a `Value` for (128 levels: a deep `response_format` schema)
/// is still recorded, byte for byte; only the fields cuca reads are built as values.
pub fn parse_request(body: &[u8]) -> Result<WireRequest, String> {
    parse_request_with(body, &crate::ReadEach)
}

/// Reads a Chat Completions request body as [`parse_request`] does, each element of
/// `messages` through `reader` (see [`crate::Format::parse_request_with`]).
pub fn parse_request_with(
    body: &[u8],
    reader: &dyn crate::MessageReader,
) -> Result<WireRequest, String> {
    let (object, messages) = crate::body::top_level_split(body, "messages")?;
    let value_of = |key: &str| -> Result<Option<Value>, String> {
        object
            .get(key)
            .map(|raw| serde_json::from_str::<Value>(raw.get()))
            .transpose()
            .map_err(|e| format!("'{key}' cannot be read: {e}"))
    };
    let Some(crate::body::List::Elements(messages)) = messages else {
        return Err("'messages' is required and must be an array".to_owned());
    };
    let mut unified = UnifiedRequest::default();
    unified.messages.reserve(messages.len());
    for (index, message) in messages.iter().enumerate() {
        reader
            .read(message, &mut unified.messages, &read_element)
            .map_err(|e| format!("messages[{index}]: {e}"))?;
    }
    let scalar = |key: &str| value_of(key).ok().flatten();
    unified.model = scalar("model")
        .as_ref()
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    unified.max_tokens = ["max_completion_tokens", "max_tokens"]
        .iter()
        .find_map(|key| scalar(key).as_ref().and_then(Value::as_u64))
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    // The unified request holds an f32; a temperature is a small number, so nothing is lost
    // that a sampler would notice.
    unified.temperature = scalar("temperature")
        .as_ref()
        .and_then(Value::as_f64)
        .map(|t| t as f32);
    unified.reasoning_effort = scalar("reasoning_effort")
        .as_ref()
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut unrecorded = Vec::new();
    if let Some(tools) = object.get("tools") {
        read_tools(tools, &mut unified, &mut unrecorded);
    }
    unified.tool_choice = scalar("tool_choice").and_then(|choice| match &choice {
        Value::String(word) => match word.as_str() {
            "auto" => Some(ToolChoice::Auto),
            "none" => Some(ToolChoice::None),
            "required" => Some(ToolChoice::Required),
            _ => None,
        },
        Value::Object(_) => choice
            .pointer("/function/name")
            .and_then(Value::as_str)
            .map(|name| ToolChoice::Named(name.to_owned())),
        _ => None,
    });
    let stream = scalar("stream").as_ref().and_then(Value::as_bool) == Some(true);
    let include_usage = object.get("stream_options").is_some_and(|raw| {
        serde_json::from_str::<BTreeMap<String, Box<RawValue>>>(raw.get())
            .ok()
            .and_then(|options| options.get("include_usage").map(|v| v.get() == "true"))
            == Some(true)
    });
    let parameters = crate::body::parameters(&object, &NOT_PARAMETERS);
    Ok(WireRequest {
        unified,
        stream,
        include_usage,
        parameters,
        unrecorded,
        previous_response_id: None,
        wire: None,
    })
}

/// The tools offered, each read on its own: a tool whose schema cannot be built as a value
/// (nested past serde_json's limit) is kept by name with its schema as the raw JSON text, and
/// noted as not recorded in full.
fn read_tools(tools: &RawValue, unified: &mut UnifiedRequest, unrecorded: &mut Vec<String>) {
    let Ok(tools) = serde_json::from_str::<Vec<Box<RawValue>>>(tools.get()) else {
        unrecorded.push("'tools' is not an array; the tools offered are not recorded".into());
        return;
    };
    for (index, raw) in tools.iter().enumerate() {
        match serde_json::from_str::<Value>(raw.get()) {
            Ok(tool) => {
                let function = tool.get("function").unwrap_or(&tool);
                unified.tools.push(ToolDefinition {
                    name: str_field(function, "name"),
                    description: str_field(function, "description"),
                    parameters: function.get("parameters").cloned().unwrap_or(Value::Null),
                });
            }
            Err(error) => {
                unrecorded.push(format!(
                    "tools[{index}] cannot be read as a value ({error}); its schema is recorded as its JSON text"
                ));
                // The name and description sit near the top: read as raw values, which have no
                // depth limit, they are kept even when the schema cannot be built.
                let field = |key: &str| {
                    shallow_str(raw, &["function", key]).or_else(|| shallow_str(raw, &[key]))
                };
                unified.tools.push(ToolDefinition {
                    name: field("name").unwrap_or_else(|| format!("tools[{index}]")),
                    description: field("description").unwrap_or_default(),
                    parameters: Value::String(raw.get().to_owned()),
                });
            }
        }
    }
}

/// One element of `messages`, read as [`message_of`] reads it.
fn read_element(raw: &RawValue, out: &mut Vec<Message>) -> Result<(), String> {
    let wire: Value = serde_json::from_str(raw.get()).map_err(|e| e.to_string())?;
    out.push(message_of(&wire)?);
    Ok(())
}

/// One wire message as a [`Message`]: text parts in order, images as
/// [`MessageContentBlock::ImageBase64`] (a `data:` URL split into type and bytes; any other
/// URL kept whole with the media type `text/uri-list`), an assistant's `reasoning_content`
/// as Thinking and its `tool_calls` as ToolCall blocks, a tool message as one ToolResult.
pub(crate) fn message_of(wire: &Value) -> Result<Message, String> {
    let role = match wire.get("role").and_then(Value::as_str) {
        Some("system" | "developer") => Role::System,
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("tool" | "function") => Role::Tool,
        Some(other) => return Err(format!("role {other:?} is not a chat role")),
        None => return Err("'role' is required".into()),
    };
    let mut content = Vec::new();
    if role == Role::Tool {
        content.push(MessageContentBlock::ToolResult {
            tool_call_id: str_field(wire, "tool_call_id"),
            content: text_of(wire.get("content")),
            is_error: false,
        });
        return Ok(Message { role, content });
    }
    if let Some(reasoning) = wire.get("reasoning_content").and_then(Value::as_str) {
        if !reasoning.is_empty() {
            content.push(MessageContentBlock::thinking(reasoning));
        }
    }
    match wire.get("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => content.push(MessageContentBlock::text(text.as_str())),
        Some(Value::Array(parts)) => {
            for part in parts {
                match part.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        content.push(MessageContentBlock::text(str_field(part, "text")))
                    }
                    Some("image_url") => {
                        let url = part
                            .pointer("/image_url/url")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        content.push(image_of(url));
                    }
                    Some(other) => return Err(format!("content part type {other:?} is not read")),
                    None => return Err("a content part has no 'type'".into()),
                }
            }
        }
        Some(_) => return Err("'content' is neither a string, an array nor null".into()),
    }
    if let Some(calls) = wire.get("tool_calls").and_then(Value::as_array) {
        for call in calls {
            content.push(MessageContentBlock::ToolCall {
                id: str_field(call, "id"),
                name: call
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                arguments: call
                    .pointer("/function/arguments")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            });
        }
    }
    Ok(Message { role, content })
}

/// A message's text: a string, or the `text` of its text parts, joined.
fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}
