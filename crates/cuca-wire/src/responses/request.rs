//! Reading a Responses request (the caller's body as a [`WireRequest`]).

use cuca_events::{Message, MessageContentBlock, Role, ToolChoice, ToolDefinition, UnifiedRequest};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::body::{image_of, shallow_str, str_field};
use crate::WireRequest;

/// The fields recorded elsewhere (the conversation, the model and the tools have records of
/// their own) or that only shape the transport.
const NOT_PARAMETERS: [&str; 5] = ["input", "instructions", "model", "tools", "stream"];

/// Reads a Responses request body. `Err` says, in words, why it is not one, naming the field
/// (`input[3]: …`); the record path still forwards such a body unchanged.
///
/// `instructions` is the first system prompt; `input` (a string: one user message; or items)
/// is read item by item, the assistant-side items of one turn (reasoning, assistant messages,
/// `function_call`s and other `*_call`s) merged into one assistant message so positions count
/// as Chat's do (user, assistant, tool…). An item type cuca does not know is kept verbatim as
/// a Text block of its JSON. The top level is read as raw values, so a parameter nested past
/// serde_json's value limit (a deep `text.format` schema) is still recorded byte for byte.
///
/// ```
/// let request = cuca_wire::responses::parse_request(
///     br#"{"model":"m","instructions":"Be terse.","input":"hi","store":false}"#,
/// ).unwrap();
/// assert_eq!(request.unified.messages.len(), 2);
/// assert_eq!(request.parameters, r#"{"store":false}"#);
/// ```
pub fn parse_request(body: &[u8]) -> Result<WireRequest, String> {
    parse_request_with(body, &crate::ReadEach)
}

/// Reads a Responses request body as [`parse_request`] does. `input` is read whole (a
/// `function_call` item joins the assistant message before it, so an item is not a message
/// of its own), so `reader` is not asked: it is here so that every format reads alike.
pub fn parse_request_with(
    body: &[u8],
    _reader: &dyn crate::MessageReader,
) -> Result<WireRequest, String> {
    let object = crate::body::top_level(body)?;
    let value_of = |key: &str| -> Result<Option<Value>, String> {
        object
            .get(key)
            .map(|raw| serde_json::from_str::<Value>(raw.get()))
            .transpose()
            .map_err(|e| format!("'{key}' cannot be read: {e}"))
    };
    let mut unified = UnifiedRequest::default();
    match value_of("instructions")? {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => unified.messages.push(Message::system(text)),
        Some(_) => return Err("'instructions' must be a string".into()),
    }
    if let Some(input) = object.get("input") {
        read_input(input, &mut unified.messages)?;
    }
    let scalar = |key: &str| value_of(key).ok().flatten();
    unified.model = scalar("model")
        .as_ref()
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    unified.max_tokens = scalar("max_output_tokens")
        .as_ref()
        .and_then(Value::as_u64)
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    // The unified request holds an f32; a temperature is a small number.
    unified.temperature = scalar("temperature")
        .as_ref()
        .and_then(Value::as_f64)
        .map(|t| t as f32);
    unified.reasoning_effort = scalar("reasoning")
        .as_ref()
        .and_then(|r| r.get("effort"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut unrecorded = Vec::new();
    if let Some(tools) = object.get("tools") {
        read_tools(tools, &mut unified, &mut unrecorded);
    }
    unified.tool_choice = scalar("tool_choice").and_then(|choice| tool_choice_of(&choice));
    let stream = scalar("stream").as_ref().and_then(Value::as_bool) == Some(true);
    let previous_response_id = scalar("previous_response_id")
        .as_ref()
        .and_then(Value::as_str)
        .map(str::to_owned);
    let parameters = crate::body::parameters(&object, &NOT_PARAMETERS);
    Ok(WireRequest {
        unified,
        stream,
        include_usage: false,
        parameters,
        unrecorded,
        previous_response_id,
        wire: None,
    })
}

fn tool_choice_of(choice: &Value) -> Option<ToolChoice> {
    let word = |word: &str| match word {
        "auto" => Some(ToolChoice::Auto),
        "none" => Some(ToolChoice::None),
        "required" => Some(ToolChoice::Required),
        _ => None,
    };
    match choice {
        Value::String(w) => word(w),
        Value::Object(_) => match choice.get("type").and_then(Value::as_str) {
            // `{"type":"allowed_tools","mode":"auto"|"required","tools":[…]}`.
            Some("allowed_tools") => choice.get("mode").and_then(Value::as_str).and_then(word),
            // `{"type":"function","name":…}`, `{"type":"custom","name":…}`, or a hosted
            // tool by its type (`{"type":"web_search_preview"}`), which is its name here.
            Some(kind) => Some(ToolChoice::Named(
                choice
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or(kind)
                    .to_owned(),
            )),
            None => None,
        },
        _ => None,
    }
}

/// Which side of the conversation an input item is on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    System,
    User,
    /// The model's own output, fed back: merged into one assistant message per turn.
    Assistant,
    Tool,
}

fn read_input(input: &RawValue, messages: &mut Vec<Message>) -> Result<(), String> {
    if let Ok(text) = serde_json::from_str::<String>(input.get()) {
        messages.push(Message::user(text));
        return Ok(());
    }
    let items: Vec<Box<RawValue>> = serde_json::from_str(input.get())
        .map_err(|_| "'input' must be a string or an array".to_owned())?;
    for (index, raw) in items.iter().enumerate() {
        let (side, blocks) = item_of(raw).map_err(|e| format!("input[{index}]: {e}"))?;
        let role = match side {
            Side::System => Role::System,
            Side::User => Role::User,
            Side::Assistant => Role::Assistant,
            Side::Tool => Role::Tool,
        };
        match messages.last_mut() {
            // One turn of the model's output may arrive as several items (reasoning, then a
            // message, then calls): they are one assistant message, as Chat sends them.
            Some(last) if side == Side::Assistant && last.role == Role::Assistant => {
                last.content.extend(blocks)
            }
            _ => messages.push(Message {
                role,
                content: blocks,
            }),
        }
    }
    Ok(())
}

/// The item types the model produces besides `*_call`s, which come back as the assistant's.
const ASSISTANT_ITEMS: [&str; 4] = [
    "reasoning",
    "compaction",
    "mcp_list_tools",
    "mcp_approval_request",
];

/// One input item's side and blocks.
fn item_of(raw: &RawValue) -> Result<(Side, Vec<MessageContentBlock>), String> {
    let item: Value =
        serde_json::from_str(raw.get()).map_err(|e| format!("the item cannot be read: {e}"))?;
    if !item.is_object() {
        return Err("an input item must be an object".into());
    }
    let verbatim = || MessageContentBlock::text(raw.get());
    let kind = item.get("type").and_then(Value::as_str);
    match kind {
        None | Some("message") => message_of(&item),
        Some("function_call") => {
            let name = item
                .get("name")
                .and_then(Value::as_str)
                .ok_or("a function_call has no 'name'")?;
            Ok((
                Side::Assistant,
                vec![MessageContentBlock::ToolCall {
                    id: str_field(&item, "call_id"),
                    name: name.to_owned(),
                    arguments: str_field(&item, "arguments"),
                }],
            ))
        }
        // A freeform tool's result (Codex's `apply_patch`) is read as a function's: its item
        // `id` is new on every run, and kept whole it would make every replay diverge.
        Some(kind @ ("function_call_output" | "custom_tool_call_output")) => {
            let call_id = item
                .get("call_id")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("a {kind} has no 'call_id'"))?;
            let content = match item.get("output") {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Array(parts)) => parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect(),
                _ => return Err(format!("a {kind}'s 'output' is neither a string nor parts")),
            };
            Ok((
                Side::Tool,
                vec![MessageContentBlock::ToolResult {
                    tool_call_id: call_id.to_owned(),
                    content,
                    is_error: false,
                }],
            ))
        }
        Some("reasoning") => {
            let texts = ["summary", "content"].into_iter().flat_map(|key| {
                item.get(key)
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|part| part.get("text").and_then(Value::as_str))
            });
            Ok((
                Side::Assistant,
                texts.map(MessageContentBlock::thinking).collect(),
            ))
        }
        Some(kind) if kind.ends_with("_output") || kind == "mcp_approval_response" => {
            let id = ["call_id", "approval_request_id", "id"]
                .iter()
                .find_map(|key| item.get(*key).and_then(Value::as_str))
                .unwrap_or_default();
            Ok((
                Side::Tool,
                vec![MessageContentBlock::ToolResult {
                    tool_call_id: id.to_owned(),
                    content: raw.get().to_owned(),
                    is_error: false,
                }],
            ))
        }
        Some(kind) if kind.ends_with("_call") || ASSISTANT_ITEMS.contains(&kind) => {
            Ok((Side::Assistant, vec![verbatim()]))
        }
        // `item_reference` and types cuca does not know: what the caller sent, kept whole.
        Some(_) => Ok((Side::User, vec![verbatim()])),
    }
}

fn message_of(item: &Value) -> Result<(Side, Vec<MessageContentBlock>), String> {
    let side = match item.get("role").and_then(Value::as_str) {
        Some("system" | "developer") => Side::System,
        Some("user") => Side::User,
        Some("assistant") => Side::Assistant,
        Some(other) => return Err(format!("role {other:?} is not a Responses role")),
        None => return Err("'role' is required".into()),
    };
    let mut blocks = Vec::new();
    match item.get("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => blocks.push(MessageContentBlock::text(text.as_str())),
        Some(Value::Array(parts)) => {
            for part in parts {
                let block = match part.get("type").and_then(Value::as_str) {
                    Some("input_text" | "output_text" | "text") => {
                        MessageContentBlock::text(str_field(part, "text"))
                    }
                    Some("input_image") => match part.get("image_url").and_then(Value::as_str) {
                        Some(url) => image_of(url),
                        // An image by `file_id` has no bytes here: kept as it was sent.
                        None => MessageContentBlock::text(part.to_string()),
                    },
                    Some(_) => MessageContentBlock::text(part.to_string()),
                    None => return Err("a content part has no 'type'".into()),
                };
                blocks.push(block);
            }
        }
        Some(_) => return Err("'content' is neither a string, an array nor null".into()),
    }
    Ok((side, blocks))
}

/// The tools offered: a function tool by its name, description and schema; any other (a
/// hosted tool: `web_search`, `file_search`, `local_shell`, `custom`, `mcp`…) by its name or
/// type, with the whole tool as its parameters. A tool that cannot be built as a value
/// (nested past serde_json's limit) is kept by name with its JSON text, and noted.
fn read_tools(tools: &RawValue, unified: &mut UnifiedRequest, unrecorded: &mut Vec<String>) {
    let Ok(tools) = serde_json::from_str::<Vec<Box<RawValue>>>(tools.get()) else {
        unrecorded.push("'tools' is not an array; the tools offered are not recorded".into());
        return;
    };
    for (index, raw) in tools.iter().enumerate() {
        match serde_json::from_str::<Value>(raw.get()) {
            Ok(tool) => {
                let kind = tool.get("type").and_then(Value::as_str).unwrap_or_default();
                unified.tools.push(if kind == "function" {
                    ToolDefinition {
                        name: str_field(&tool, "name"),
                        description: str_field(&tool, "description"),
                        parameters: tool.get("parameters").cloned().unwrap_or(Value::Null),
                    }
                } else {
                    ToolDefinition {
                        name: tool
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or(kind)
                            .to_owned(),
                        description: str_field(&tool, "description"),
                        parameters: tool,
                    }
                });
            }
            Err(error) => {
                unrecorded.push(format!(
                    "tools[{index}] cannot be read as a value ({error}); its schema is recorded as its JSON text"
                ));
                unified.tools.push(ToolDefinition {
                    name: shallow_str(raw, &["name"])
                        .or_else(|| shallow_str(raw, &["type"]))
                        .unwrap_or_else(|| format!("tools[{index}]")),
                    description: shallow_str(raw, &["description"]).unwrap_or_default(),
                    parameters: Value::String(raw.get().to_owned()),
                });
            }
        }
    }
}
