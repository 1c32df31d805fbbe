//! Reading a Messages request (the caller's body as a [`WireRequest`]), and estimating its
//! size in tokens for `count_tokens`.

use std::collections::BTreeMap;

use cuca_events::{Message, MessageContentBlock, Role, ToolChoice, ToolDefinition, UnifiedRequest};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::WireRequest;

/// The fields recorded elsewhere (the messages, the system prompt, the model and the tools
/// have records or fields of their own) or that only shape the transport, not the answer.
const NOT_PARAMETERS: [&str; 5] = ["messages", "system", "model", "tools", "stream"];

/// Reads a Messages request body. `Err` says, in words and naming the field
/// (`messages[2].content[0]: …`), why it is not one; the record path still forwards such a
/// body unchanged (the upstream's own 400 is the answer the caller should see).
///
/// * `system` (a string, or text blocks) → one [`Role::System`] message per block, first;
/// * `messages[]` → user and assistant messages, their content a string or blocks: `text` →
///   Text, `image` → ImageBase64 (a `url` source as media type `text/uri-list` and the URL),
///   `tool_use` → ToolCall (its `input` as JSON text), `thinking` → Thinking, and
///   `redacted_thinking` or any block type cuca does not know → a Text block holding the
///   block's JSON text (keys sorted, see `kept_text`), so a replay still compares it;
/// * a user message's `tool_result` blocks → one [`Role::Tool`] message each, before a user
///   message holding the rest of it (if any);
/// * `tools` (`input_schema` as the parameters; a server tool without one keeps its whole
///   JSON there), `tool_choice`, `max_tokens`, `temperature`, `stream`;
/// * every other top-level field, byte for byte, in [`WireRequest::parameters`];
/// * where the request marked prompt-cache breakpoints (`cache_control` on a system block, a
///   tool, a message's block or a tool result's block, or at the top level), in
///   [`WireRequest::wire`] as `{"cache_control": [{"at": "system[0]", "cache_control":
///   {"type": "ephemeral"}}, …]}`: the blocks' records have no field for them, and they
///   decide which prompt tokens are written to the cache, so what the answer costs.
///
/// The top level, the messages and their blocks are read as raw values, which have no
/// nesting limit, so a parameter or block nested deeper than serde_json builds a `Value` for
/// is still recorded byte for byte.
///
/// ```
/// let request = cuca_wire::messages::parse_request(
///     br#"{"model":"claude","max_tokens":64,"system":"Be terse.","messages":[{"role":"user","content":"hi"}]}"#,
/// ).unwrap();
/// assert_eq!(request.unified.messages.len(), 2);
/// assert_eq!(request.unified.max_tokens, Some(64));
/// assert_eq!(request.parameters, r#"{"max_tokens":64}"#);
/// ```
pub fn parse_request(body: &[u8]) -> Result<WireRequest, String> {
    parse_request_with(body, &crate::ReadEach)
}

/// Reads a Messages request body as [`parse_request`] does, each element of `messages`
/// through `reader` (see [`crate::Format::parse_request_with`]); `system` is read as it is.
pub fn parse_request_with(
    body: &[u8],
    reader: &dyn crate::MessageReader,
) -> Result<WireRequest, String> {
    let (object, messages) = crate::body::top_level_split(body, "messages")?;
    let scalar = |key: &str| -> Option<Value> {
        object
            .get(key)
            .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
    };
    let mut unified = UnifiedRequest::default();
    if let Some(system) = object.get("system") {
        read_system(system, &mut unified.messages).map_err(|e| format!("system{e}"))?;
    }
    let Some(crate::body::List::Elements(messages)) = messages else {
        return Err("'messages' is required and must be an array".to_owned());
    };
    unified.messages.reserve(messages.len());
    for (index, message) in messages.iter().enumerate() {
        reader
            .read(message, &mut unified.messages, &read_message)
            .map_err(|e| format!("messages[{index}]{e}"))?;
    }
    unified.model = scalar("model")
        .as_ref()
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    unified.max_tokens = scalar("max_tokens")
        .as_ref()
        .and_then(Value::as_u64)
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    // The unified request holds an f32; a temperature is a small number, so nothing is lost
    // that a sampler would notice.
    unified.temperature = scalar("temperature")
        .as_ref()
        .and_then(Value::as_f64)
        .map(|t| t as f32);
    let mut unrecorded = Vec::new();
    if let Some(tools) = object.get("tools") {
        read_tools(tools, &mut unified, &mut unrecorded);
    }
    unified.tool_choice = scalar("tool_choice").and_then(|choice| {
        match choice.get("type").and_then(Value::as_str)? {
            "auto" => Some(ToolChoice::Auto),
            "any" => Some(ToolChoice::Required),
            "none" => Some(ToolChoice::None),
            "tool" => Some(ToolChoice::Named(str_field(&choice, "name"))),
            _ => None,
        }
    });
    let stream = object.get("stream").is_some_and(|raw| raw.get() == "true");
    let parameters = crate::body::parameters(&object, &NOT_PARAMETERS);
    let breakpoints = super::breakpoints::cache_breakpoints(&object, &messages);
    Ok(WireRequest {
        unified,
        stream,
        include_usage: false,
        parameters,
        unrecorded,
        previous_response_id: None,
        wire: (!breakpoints.is_empty()).then(|| json!({ "cache_control": breakpoints })),
    })
}

/// `system`: a string, or an array of text blocks, each its own system message. The error
/// is the rest of the field's path (`[1]: …`, or `: …`).
fn read_system(system: &RawValue, out: &mut Vec<Message>) -> Result<(), String> {
    match system.get().trim_start().as_bytes().first() {
        Some(b'"') => {
            let text: String = serde_json::from_str(system.get()).map_err(|e| format!(": {e}"))?;
            out.push(Message::new(Role::System, text));
        }
        Some(b'[') => {
            let blocks: Vec<&RawValue> =
                serde_json::from_str(system.get()).map_err(|e| format!(": {e}"))?;
            for (index, block) in blocks.iter().enumerate() {
                let kind = block_kind(block).map_err(|e| format!("[{index}]: {e}"))?;
                let text = if kind == "text" {
                    serde_json::from_str::<TextBlock>(block.get())
                        .map_err(|e| format!("[{index}]: {e}"))?
                        .text
                } else {
                    kept_text(block)
                };
                out.push(Message::new(Role::System, text));
            }
        }
        Some(b'n') => {}
        _ => return Err(": is neither a string nor an array of blocks".into()),
    }
    Ok(())
}

#[derive(Deserialize)]
struct WireMessage<'a> {
    #[serde(default)]
    role: Option<String>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Kind {
    #[serde(rename = "type", default)]
    kind: Option<String>,
}

#[derive(Deserialize)]
struct TextBlock {
    #[serde(default)]
    text: String,
}

#[derive(Deserialize)]
struct ThinkingBlock {
    #[serde(default)]
    thinking: String,
}

#[derive(Deserialize)]
struct ToolUseBlock<'a> {
    #[serde(default)]
    id: String,
    #[serde(default)]
    name: String,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ToolResultBlock<'a> {
    #[serde(default)]
    tool_use_id: String,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(default)]
    is_error: Option<bool>,
}

#[derive(Deserialize)]
struct ImageBlock {
    #[serde(default)]
    source: Option<ImageSource>,
}

#[derive(Deserialize)]
struct ImageSource {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    media_type: String,
    #[serde(default)]
    data: String,
    #[serde(default)]
    url: String,
}

fn block_kind(block: &RawValue) -> Result<String, String> {
    serde_json::from_str::<Kind>(block.get())
        .map_err(|e| format!("a content block must be an object ({e})"))?
        .kind
        .ok_or_else(|| "a content block has no 'type'".to_owned())
}

/// One wire message as one or more [`Message`]s (a user message's tool results split off
/// before it). The error is the rest of the field's path (`.content[0]: …`).
fn read_message(raw: &RawValue, out: &mut Vec<Message>) -> Result<(), String> {
    let message: WireMessage<'_> =
        serde_json::from_str(raw.get()).map_err(|e| format!(": not a message object ({e})"))?;
    let role = match message.role.as_deref() {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        // Claude Code sends its environment as a system message among the others.
        Some("system" | "developer") => Role::System,
        Some(other) => return Err(format!(".role: {other:?} is not a messages role")),
        None => return Err(": 'role' is required".into()),
    };
    let mut content = Vec::new();
    let content_raw = message.content.map(RawValue::get).unwrap_or("null");
    match content_raw.trim_start().as_bytes().first() {
        Some(b'"') => {
            let text: String =
                serde_json::from_str(content_raw).map_err(|e| format!(".content: {e}"))?;
            content.push(MessageContentBlock::text(text));
        }
        Some(b'[') => {
            let blocks: Vec<&RawValue> =
                serde_json::from_str(content_raw).map_err(|e| format!(".content: {e}"))?;
            let mut n_results = 0;
            for (index, block) in blocks.iter().enumerate() {
                let block =
                    read_block(block, role).map_err(|e| format!(".content[{index}]: {e}"))?;
                if let MessageContentBlock::ToolResult { .. } = block {
                    n_results += 1;
                    out.push(Message {
                        role: Role::Tool,
                        content: vec![block],
                    });
                } else {
                    content.push(block);
                }
            }
            // Tool results answered the previous turn, so they come first; the user's own
            // words (if any) follow them. (A message of no blocks at all stays a message.)
            if content.is_empty() && n_results > 0 {
                return Ok(());
            }
        }
        Some(b'n') => {}
        _ => return Err(".content: is neither a string nor an array of blocks".into()),
    }
    out.push(Message { role, content });
    Ok(())
}

/// One content block. A block type cuca does not know (and `redacted_thinking`, whose data
/// only Anthropic can read) becomes a Text block of its own JSON text.
fn read_block(block: &RawValue, role: Role) -> Result<MessageContentBlock, String> {
    let kind = block_kind(block)?;
    let json = block.get();
    Ok(match kind.as_str() {
        "text" => {
            let text: TextBlock = serde_json::from_str(json).map_err(|e| e.to_string())?;
            MessageContentBlock::text(text.text)
        }
        "thinking" => {
            let thinking: ThinkingBlock = serde_json::from_str(json).map_err(|e| e.to_string())?;
            MessageContentBlock::thinking(thinking.thinking)
        }
        "tool_use" => {
            let call: ToolUseBlock<'_> = serde_json::from_str(json).map_err(|e| e.to_string())?;
            MessageContentBlock::ToolCall {
                id: call.id,
                name: call.name,
                arguments: call.input.map(input_text).unwrap_or_else(|| "{}".into()),
            }
        }
        "tool_result" if role == Role::User => {
            let result: ToolResultBlock<'_> =
                serde_json::from_str(json).map_err(|e| e.to_string())?;
            MessageContentBlock::ToolResult {
                tool_call_id: result.tool_use_id,
                content: result
                    .content
                    .map(tool_result_text)
                    .transpose()?
                    .unwrap_or_default(),
                is_error: result.is_error.unwrap_or(false),
            }
        }
        "image" => {
            let image: ImageBlock = serde_json::from_str(json).map_err(|e| e.to_string())?;
            match image.source {
                Some(source) if source.kind == "base64" => MessageContentBlock::ImageBase64 {
                    media_type: source.media_type,
                    data: source.data,
                },
                Some(source) if source.kind == "url" => MessageContentBlock::ImageBase64 {
                    media_type: "text/uri-list".into(),
                    data: source.url,
                },
                // A file id or another source cuca has no field for: kept whole.
                _ => MessageContentBlock::text(kept_text(block)),
            }
        }
        _ => MessageContentBlock::text(kept_text(block)),
    })
}

/// A block cuca has no session block for, as the text of a Text block: its JSON with the keys
/// sorted and no whitespace. Canonical rather than the caller's bytes because an SDK sends a
/// block back in the key order it received it in (the TypeScript SDK keeps the server's; a
/// replayed stream's order may differ), and the replay compares this text: the same block
/// must give the same text however its keys were ordered. A block nested too deep to build as
/// a value is kept as the caller's own text.
fn kept_text(block: &RawValue) -> String {
    input_text(block)
}

/// A tool's `input` as the arguments text: compact JSON, as serde_json writes the value (a
/// value nested too deep to build is kept as the caller's own text).
fn input_text(input: &RawValue) -> String {
    match serde_json::from_str::<Value>(input.get()) {
        Ok(value) => value.to_string(),
        Err(_) => input.get().to_owned(),
    }
}

/// A tool result's content: a string, or its blocks (text as its text, any other block as
/// its JSON text) joined by newlines.
fn tool_result_text(content: &RawValue) -> Result<String, String> {
    let json = content.get();
    match json.trim_start().as_bytes().first() {
        Some(b'"') => serde_json::from_str(json).map_err(|e| format!(".content: {e}")),
        Some(b'[') => {
            let blocks: Vec<&RawValue> =
                serde_json::from_str(json).map_err(|e| format!(".content: {e}"))?;
            let mut parts = Vec::with_capacity(blocks.len());
            for (index, block) in blocks.iter().enumerate() {
                let kind = block_kind(block).map_err(|e| format!(".content[{index}]: {e}"))?;
                if kind == "text" {
                    let text: TextBlock = serde_json::from_str(block.get())
                        .map_err(|e| format!(".content[{index}]: {e}"))?;
                    parts.push(text.text);
                } else {
                    parts.push(kept_text(block));
                }
            }
            Ok(parts.join("\n"))
        }
        Some(b'n') => Ok(String::new()),
        _ => Err(".content: is neither a string nor an array of blocks".into()),
    }
}

/// The tools offered, each read on its own: a client tool's `input_schema` is its
/// parameters; a server tool (`web_search_…`, `bash_…`, which have no schema) keeps its whole
/// JSON there. A tool that cannot be built as a value (nested past serde_json's limit) is
/// kept by name with its JSON text, and noted as not recorded in full.
fn read_tools(tools: &RawValue, unified: &mut UnifiedRequest, unrecorded: &mut Vec<String>) {
    let Ok(tools) = serde_json::from_str::<Vec<&RawValue>>(tools.get()) else {
        unrecorded.push("'tools' is not an array; the tools offered are not recorded".into());
        return;
    };
    for (index, raw) in tools.iter().enumerate() {
        match serde_json::from_str::<Value>(raw.get()) {
            Ok(tool) => unified.tools.push(ToolDefinition {
                name: str_field(&tool, "name"),
                description: str_field(&tool, "description"),
                parameters: tool.get("input_schema").cloned().unwrap_or(tool),
            }),
            Err(error) => {
                unrecorded.push(format!(
                    "tools[{index}] cannot be read as a value ({error}); its schema is recorded as its JSON text"
                ));
                #[derive(Deserialize)]
                struct Named {
                    #[serde(default)]
                    name: Option<String>,
                    #[serde(default)]
                    description: Option<String>,
                }
                // Read the name and description as raw values, which have no depth limit.
                let named = serde_json::from_str::<BTreeMap<String, Box<RawValue>>>(raw.get())
                    .ok()
                    .map(|fields| Named {
                        name: fields
                            .get("name")
                            .and_then(|v| serde_json::from_str(v.get()).ok()),
                        description: fields
                            .get("description")
                            .and_then(|v| serde_json::from_str(v.get()).ok()),
                    });
                let (name, description) =
                    named.map(|n| (n.name, n.description)).unwrap_or_default();
                unified.tools.push(ToolDefinition {
                    name: name.unwrap_or_else(|| format!("tools[{index}]")),
                    description: description.unwrap_or_default(),
                    parameters: Value::String(raw.get().to_owned()),
                });
            }
        }
    }
}

fn str_field(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Characters per token in the estimate: the rule of thumb for English text under the BPE
/// tokenizers Claude and GPT models use (code and non-Latin scripts take more tokens).
const CHARS_PER_TOKEN: u64 = 4;

/// Tokens counted for an image: Anthropic's documented ceiling for one image at its largest
/// size (about 1.15 megapixels, `width × height / 750`), since cuca does not decode it.
const IMAGE_TOKENS: u64 = 1600;

/// An estimate of a request's input tokens, for `POST /v1/messages/count_tokens` when no
/// upstream is there to count (replay): the characters of the system prompt, the messages
/// (text, thinking, tool calls' names and arguments, tool results) and the tools (names,
/// descriptions, schemas as JSON) divided by [`CHARS_PER_TOKEN`], rounded up, plus
/// [`IMAGE_TOKENS`] per image; at least 1. Deterministic: the same request, the same count.
///
/// ```
/// let request = cuca_wire::messages::parse_request(
///     br#"{"model":"m","messages":[{"role":"user","content":"abcdefgh!"}]}"#,
/// ).unwrap();
/// assert_eq!(cuca_wire::messages::estimate_input_tokens(&request), 3);
/// ```
pub fn estimate_input_tokens(request: &WireRequest) -> u64 {
    let count = |text: &str| text.chars().count() as u64;
    let mut chars = 0u64;
    let mut images = 0u64;
    for message in &request.unified.messages {
        for block in &message.content {
            chars += match block {
                MessageContentBlock::Text { text } => count(text),
                MessageContentBlock::Thinking { thinking } => count(thinking),
                MessageContentBlock::ToolCall {
                    name, arguments, ..
                } => count(name) + count(arguments),
                MessageContentBlock::ToolResult { content, .. } => count(content),
                MessageContentBlock::ImageBase64 { .. } => {
                    images += 1;
                    0
                }
            };
        }
    }
    for tool in &request.unified.tools {
        chars += count(&tool.name) + count(&tool.description);
        chars += count(&tool.parameters.to_string());
    }
    (chars.div_ceil(CHARS_PER_TOKEN) + images * IMAGE_TOKENS).max(1)
}
