//! A recorded answer as the Messages API sends it: an SSE stream (`message_start`,
//! `content_block_start` / `content_block_delta`… / `content_block_stop` per content block,
//! `message_delta`, `message_stop`) or one `message` object, the same bytes every time.
//!
//! With the recording's `wire` (format `messages`), the content blocks are laid out as
//! recorded: each entry takes its `records` session blocks, thinking blocks get their
//! signature back, and redacted thinking and unknown blocks are sent again from their kept
//! JSON. Without it (an answer recorded in another format), consecutive Text blocks make one
//! text block, consecutive Thinking one thinking block (no signature), and each ToolCall a
//! tool_use block of its own.

use bytes::Bytes;
use cuca_events::MessageContentBlock;
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::WIRE_FORMAT;
use crate::encode::piece;
use crate::{RecordedAnswer, WireRequest};

/// Anthropic's stop reason for a recorded one: its own words as they are, another format's
/// mapped (`stop` → `end_turn`, `length` → `max_tokens`, `tool_calls` → `tool_use`,
/// `content_filter` → `refusal`), and a turn that never said one (or said a word Anthropic
/// has no counterpart for) `tool_use` when it called a tool, else `end_turn`.
pub fn stop_reason(recorded: Option<&str>, has_tool_calls: bool) -> String {
    match recorded {
        Some(
            word @ ("end_turn"
            | "max_tokens"
            | "stop_sequence"
            | "tool_use"
            | "pause_turn"
            | "refusal"
            | "model_context_window_exceeded"),
        ) => word.to_owned(),
        Some("stop" | "completed") => "end_turn".to_owned(),
        Some("length" | "max_output_tokens") => "max_tokens".to_owned(),
        Some("tool_calls") => "tool_use".to_owned(),
        Some("content_filter") => "refusal".to_owned(),
        _ if has_tool_calls => "tool_use".to_owned(),
        _ => "end_turn".to_owned(),
    }
}

/// One content block of the answer, over a range of the recorded blocks.
#[derive(Debug, Clone)]
enum Group {
    /// Text blocks `from..to` (other kinds in the range are skipped).
    Text {
        from: usize,
        to: usize,
        extra: Extra,
    },
    /// Thinking blocks `from..to`, and the signature that closes them.
    Thinking {
        from: usize,
        to: usize,
        signature: Option<String>,
        extra: Extra,
    },
    /// The ToolCall block `at`.
    ToolUse { at: usize, extra: Extra },
    /// A block sent again as recorded: its start object and its deltas.
    Kept { start: Value, deltas: Vec<Value> },
}

/// What a known block's `wire` entry kept beyond the session blocks.
#[derive(Debug, Clone, Default)]
struct Extra {
    /// Keys of the start object cuca does not map.
    fields: Map<String, Value>,
    /// Deltas of a type cuca does not map, sent after the block's own.
    deltas: Vec<Value>,
}

impl Extra {
    fn of(entry: &Map<String, Value>) -> Extra {
        Extra {
            fields: entry
                .get("fields")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            deltas: deltas_of(entry),
        }
    }
}

fn deltas_of(entry: &Map<String, Value>) -> Vec<Value> {
    entry
        .get("deltas")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The blocks a provider answers with (a tool result or an image is never in an answer, and
/// is skipped wherever it is found).
fn is_answer(block: &MessageContentBlock) -> bool {
    matches!(
        block,
        MessageContentBlock::Text { .. }
            | MessageContentBlock::Thinking { .. }
            | MessageContentBlock::ToolCall { .. }
    )
}

fn same_kind(a: &MessageContentBlock, b: &MessageContentBlock) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

/// The wire object, when it is this format's.
fn messages_wire(wire: Option<&Value>) -> Option<&Map<String, Value>> {
    wire.and_then(Value::as_object)
        .filter(|w| w.get("format").and_then(Value::as_str) == Some(WIRE_FORMAT))
}

/// The recorded layout, when `wire` lays out exactly these blocks (each entry's `records`
/// blocks of its kind, all of them used); `None` when it does not, so the grouping rule
/// applies instead of a layout that would send other blocks than recorded.
fn recorded_layout(
    wire: &Map<String, Value>,
    blocks: &[MessageContentBlock],
) -> Option<Vec<Group>> {
    let entries = wire.get("blocks")?.as_array()?;
    let mut groups = Vec::with_capacity(entries.len());
    let mut at = 0;
    // Takes `n` answer blocks of the kind `want` from `at`, returning the range they span.
    let mut take = |n: u64, want: Option<&MessageContentBlock>| -> Option<(usize, usize)> {
        let from = at;
        let mut taken = 0;
        while taken < n {
            let block = blocks.get(at)?;
            at += 1;
            if !is_answer(block) {
                continue;
            }
            if !want.is_some_and(|w| same_kind(w, block)) {
                return None;
            }
            taken += 1;
        }
        Some((from, at))
    };
    let text = MessageContentBlock::text("");
    let thinking = MessageContentBlock::thinking("");
    let call = MessageContentBlock::ToolCall {
        id: String::new(),
        name: String::new(),
        arguments: String::new(),
    };
    for entry in entries {
        let entry = entry.as_object()?;
        let records = entry.get("records").and_then(Value::as_u64).unwrap_or(0);
        let group = match entry.get("type").and_then(Value::as_str)? {
            "text" => {
                let (from, to) = take(records, Some(&text))?;
                Group::Text {
                    from,
                    to,
                    extra: Extra::of(entry),
                }
            }
            "thinking" => {
                let (from, to) = take(records, Some(&thinking))?;
                Group::Thinking {
                    from,
                    to,
                    signature: entry
                        .get("signature")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    extra: Extra::of(entry),
                }
            }
            "tool_use" if records == 1 => {
                let (_, to) = take(1, Some(&call))?;
                Group::ToolUse {
                    at: to - 1,
                    extra: Extra::of(entry),
                }
            }
            "redacted_thinking" => {
                let mut start = Map::new();
                start.insert("type".into(), Value::String("redacted_thinking".into()));
                start.insert(
                    "data".into(),
                    entry.get("data").cloned().unwrap_or(Value::Null),
                );
                start.extend(Extra::of(entry).fields);
                Group::Kept {
                    start: Value::Object(start),
                    deltas: deltas_of(entry),
                }
            }
            _ => Group::Kept {
                start: entry.get("raw")?.clone(),
                deltas: deltas_of(entry),
            },
        };
        groups.push(group);
    }
    // Every answer block must have found its place.
    if blocks[at.min(blocks.len())..].iter().any(is_answer) {
        return None;
    }
    Some(groups)
}

/// The layout made up for blocks recorded without this format's `wire`.
fn grouped_layout(blocks: &[MessageContentBlock]) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for (at, block) in blocks.iter().enumerate() {
        match (block, groups.last_mut()) {
            (MessageContentBlock::Text { .. }, Some(Group::Text { to, .. }))
            | (MessageContentBlock::Thinking { .. }, Some(Group::Thinking { to, .. }))
                if *to == at =>
            {
                *to = at + 1;
            }
            (MessageContentBlock::Text { .. }, _) => groups.push(Group::Text {
                from: at,
                to: at + 1,
                extra: Extra::default(),
            }),
            (MessageContentBlock::Thinking { .. }, _) => groups.push(Group::Thinking {
                from: at,
                to: at + 1,
                signature: None,
                extra: Extra::default(),
            }),
            (MessageContentBlock::ToolCall { .. }, _) => groups.push(Group::ToolUse {
                at,
                extra: Extra::default(),
            }),
            // Not part of an answer; it neither makes a block nor ends the current one.
            (_, Some(Group::Text { to, .. } | Group::Thinking { to, .. })) if *to == at => {
                *to = at + 1;
            }
            _ => {}
        }
    }
    groups
}

/// What both encodings say about the answer besides its blocks.
struct Head {
    id: String,
    stop_reason: String,
    stop_sequence: Value,
    /// The usage of the whole answer.
    usage: Map<String, Value>,
    /// The recorded message's keys cuca does not map.
    fields: Map<String, Value>,
    groups: Vec<Group>,
}

fn head<B: AsRef<[MessageContentBlock]>>(answer: &RecordedAnswer<B>) -> Head {
    let blocks = answer.blocks.as_ref();
    let wire = messages_wire(answer.wire.as_ref());
    let has_tool_calls = blocks
        .iter()
        .any(|b| matches!(b, MessageContentBlock::ToolCall { .. }));
    let usage = wire
        .and_then(|w| w.get("usage"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_else(|| {
            let mut usage = Map::new();
            usage.insert("input_tokens".into(), Value::from(answer.prompt_tokens));
            // Zero rather than absent: a client that adds the three input counts must not
            // meet an undefined one.
            usage.insert("cache_creation_input_tokens".into(), Value::from(0u64));
            usage.insert("cache_read_input_tokens".into(), Value::from(0u64));
            usage.insert(
                "output_tokens".into(),
                Value::from(answer.completion_tokens),
            );
            usage
        });
    Head {
        id: wire
            .and_then(|w| w.get("id"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| format!("msg_{}", answer.id)),
        stop_reason: stop_reason(answer.finish_reason.as_deref(), has_tool_calls),
        stop_sequence: wire
            .and_then(|w| w.get("stop_sequence"))
            .cloned()
            .unwrap_or(Value::Null),
        usage,
        fields: wire
            .and_then(|w| w.get("fields"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
        groups: wire
            .and_then(|w| recorded_layout(w, blocks))
            .unwrap_or_else(|| grouped_layout(blocks)),
    }
}

/// The answer as a Messages SSE stream, built one event at a time as it is polled (see
/// [`MessagesEvents`]).
///
/// ```
/// use cuca_events::MessageContentBlock;
/// use cuca_wire::{RecordedAnswer, WireRequest};
///
/// let answer = RecordedAnswer {
///     blocks: vec![MessageContentBlock::text("no"), MessageContentBlock::text("ted")],
///     model: "claude".into(),
///     finish_reason: Some("stop".into()),
///     prompt_tokens: 9,
///     completion_tokens: 2,
///     wire: None,
///     id: "cuca-demo-0".into(),
/// };
/// let events: Vec<_> = cuca_wire::messages::encode_stream(answer, &WireRequest::default()).collect();
/// let names: Vec<_> = events.iter().map(|e| std::str::from_utf8(e).unwrap().lines().next().unwrap().to_owned()).collect();
/// assert_eq!(names, [
///     "event: message_start", "event: content_block_start", "event: content_block_delta",
///     "event: content_block_delta", "event: content_block_stop", "event: message_delta",
///     "event: message_stop",
/// ]);
/// ```
pub fn encode_stream<B>(answer: RecordedAnswer<B>, _request: &WireRequest) -> MessagesEvents<B>
where
    B: AsRef<[MessageContentBlock]>,
{
    let head = head(&answer);
    MessagesEvents {
        head,
        model: answer.model,
        blocks: answer.blocks,
        stage: Stage::MessageStart,
        group: 0,
        cursor: 0,
        offset: 0,
    }
}

/// Where a [`MessagesEvents`] is in the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    MessageStart,
    BlockStart,
    BlockBody,
    /// The kept delta with this position.
    KeptDelta(usize),
    Signature,
    BlockStop,
    MessageDelta,
    MessageStop,
    End,
}

/// The replayed Messages stream, one event per `next()`: lazily, so a stream holds its turn
/// (whose blocks every caller of the session shares), its layout (one small entry per
/// content block) and one event, never the whole answer rendered. A recorded block longer
/// than [`MAX_EVENT_TEXT`](crate::MAX_EVENT_TEXT) goes out in several deltas of at most that much.
pub struct MessagesEvents<B> {
    head: Head,
    model: String,
    blocks: B,
    stage: Stage,
    /// The content block being sent (its `index` in the stream).
    group: usize,
    /// The recorded block being sent, within the group's range.
    cursor: usize,
    /// Bytes of the current block's text already sent.
    offset: usize,
}

#[derive(Serialize)]
#[serde(tag = "type")]
enum Delta<'a> {
    #[serde(rename = "text_delta")]
    Text { text: &'a str },
    #[serde(rename = "thinking_delta")]
    Thinking { thinking: &'a str },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: &'a str },
    #[serde(rename = "signature_delta")]
    Signature { signature: &'a str },
}

#[derive(Serialize)]
struct IndexedEvent<'a, T: Serialize> {
    #[serde(rename = "type")]
    kind: &'a str,
    index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    content_block: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delta: Option<T>,
}

/// Fields in the order Anthropic sends them (a `Value` would sort them).
#[derive(Serialize)]
struct MessageStart<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    message: MessageObject<'a>,
}

#[derive(Serialize)]
struct MessageObject<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    role: &'a str,
    content: Value,
    model: &'a str,
    stop_reason: Option<&'a str>,
    stop_sequence: &'a Value,
    usage: Value,
    #[serde(flatten)]
    fields: &'a Map<String, Value>,
}

fn sse<T: Serialize>(name: &str, data: &T) -> Bytes {
    let data = serde_json::to_string(data).unwrap_or_default();
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

impl<B: AsRef<[MessageContentBlock]>> MessagesEvents<B> {
    fn block_event<T: Serialize>(
        &self,
        kind: &str,
        start: Option<&Value>,
        delta: Option<T>,
    ) -> Bytes {
        sse(
            kind,
            &IndexedEvent {
                kind,
                index: self.group,
                content_block: start,
                delta,
            },
        )
    }

    fn message_start(&self) -> Bytes {
        // The start carries the input counts; `message_delta` carries the final output count
        // (the SDKs lay it over the start's), so the accumulated usage is the recorded one.
        let mut usage = self.head.usage.clone();
        usage.insert("output_tokens".into(), Value::from(1u64));
        sse(
            "message_start",
            &MessageStart {
                kind: "message_start",
                message: MessageObject {
                    id: &self.head.id,
                    kind: "message",
                    role: "assistant",
                    content: Value::Array(Vec::new()),
                    model: &self.model,
                    stop_reason: None,
                    stop_sequence: &Value::Null,
                    usage: Value::Object(usage),
                    fields: &self.head.fields,
                },
            },
        )
    }

    fn message_delta(&self) -> Bytes {
        let output = self
            .head
            .usage
            .get("output_tokens")
            .cloned()
            .unwrap_or(Value::from(0u64));
        #[derive(Serialize)]
        struct StopDelta<'a> {
            stop_reason: &'a str,
            stop_sequence: &'a Value,
        }
        #[derive(Serialize)]
        struct OutputUsage {
            output_tokens: Value,
        }
        #[derive(Serialize)]
        struct MessageDelta<'a> {
            #[serde(rename = "type")]
            kind: &'a str,
            delta: StopDelta<'a>,
            usage: OutputUsage,
        }
        sse(
            "message_delta",
            &MessageDelta {
                kind: "message_delta",
                delta: StopDelta {
                    stop_reason: &self.head.stop_reason,
                    stop_sequence: &self.head.stop_sequence,
                },
                usage: OutputUsage {
                    output_tokens: output,
                },
            },
        )
    }

    fn start_object(&self, group: &Group) -> Value {
        let blocks = self.blocks.as_ref();
        let mut start = Map::new();
        let fields = match group {
            Group::Text { extra, .. } => {
                start.insert("type".into(), "text".into());
                start.insert("text".into(), "".into());
                &extra.fields
            }
            Group::Thinking { extra, .. } => {
                start.insert("type".into(), "thinking".into());
                start.insert("thinking".into(), "".into());
                &extra.fields
            }
            Group::ToolUse { at, extra } => {
                start.insert("type".into(), "tool_use".into());
                if let Some(MessageContentBlock::ToolCall { id, name, .. }) = blocks.get(*at) {
                    start.insert("id".into(), id.as_str().into());
                    start.insert("name".into(), name.as_str().into());
                }
                start.insert("input".into(), Value::Object(Map::new()));
                &extra.fields
            }
            Group::Kept { start, .. } => return start.clone(),
        };
        for (key, value) in fields {
            start.insert(key.clone(), value.clone());
        }
        Value::Object(start)
    }

    /// The next delta of the current group's own blocks, or `None` when they are all sent.
    fn body_event(&mut self) -> Option<Bytes> {
        let blocks = self.blocks.as_ref();
        let group = self.head.groups.get(self.group)?;
        let (from, to) = match group {
            Group::Text { from, to, .. } | Group::Thinking { from, to, .. } => (*from, *to),
            Group::ToolUse { at, .. } => (*at, *at + 1),
            Group::Kept { .. } => return None,
        };
        self.cursor = self.cursor.max(from);
        while self.cursor < to {
            let text = match (group, blocks.get(self.cursor)) {
                (Group::Text { .. }, Some(MessageContentBlock::Text { text })) => text,
                (Group::Thinking { .. }, Some(MessageContentBlock::Thinking { thinking })) => {
                    thinking
                }
                (Group::ToolUse { .. }, Some(MessageContentBlock::ToolCall { arguments, .. })) => {
                    arguments
                }
                _ => {
                    self.cursor += 1;
                    continue;
                }
            };
            if text.is_empty() {
                // An empty delta says nothing a decoder would record.
                self.cursor += 1;
                continue;
            }
            let (piece, last) = piece(text, self.offset);
            let delta = match group {
                Group::Text { .. } => Delta::Text { text: piece },
                Group::Thinking { .. } => Delta::Thinking { thinking: piece },
                _ => Delta::InputJson {
                    partial_json: piece,
                },
            };
            let event = self.block_event("content_block_delta", None, Some(delta));
            if last {
                self.cursor += 1;
                self.offset = 0;
            } else {
                self.offset += piece.len();
            }
            return Some(event);
        }
        None
    }
}

impl<B: AsRef<[MessageContentBlock]>> Iterator for MessagesEvents<B> {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        loop {
            match self.stage {
                Stage::MessageStart => {
                    self.stage = Stage::BlockStart;
                    return Some(self.message_start());
                }
                Stage::BlockStart => {
                    let Some(group) = self.head.groups.get(self.group) else {
                        self.stage = Stage::MessageDelta;
                        continue;
                    };
                    let start = self.start_object(group);
                    self.stage = Stage::BlockBody;
                    self.cursor = 0;
                    self.offset = 0;
                    return Some(self.block_event::<Delta<'_>>(
                        "content_block_start",
                        Some(&start),
                        None,
                    ));
                }
                Stage::BlockBody => match self.body_event() {
                    Some(event) => return Some(event),
                    None => self.stage = Stage::KeptDelta(0),
                },
                Stage::KeptDelta(n) => {
                    let deltas = match self.head.groups.get(self.group) {
                        Some(
                            Group::Text { extra, .. }
                            | Group::Thinking { extra, .. }
                            | Group::ToolUse { extra, .. },
                        ) => &extra.deltas,
                        Some(Group::Kept { deltas, .. }) => deltas,
                        None => {
                            self.stage = Stage::BlockStop;
                            continue;
                        }
                    };
                    match deltas.get(n) {
                        Some(delta) => {
                            let event = self.block_event("content_block_delta", None, Some(delta));
                            self.stage = Stage::KeptDelta(n + 1);
                            return Some(event);
                        }
                        None => self.stage = Stage::Signature,
                    }
                }
                Stage::Signature => {
                    self.stage = Stage::BlockStop;
                    if let Some(Group::Thinking {
                        signature: Some(signature),
                        ..
                    }) = self.head.groups.get(self.group)
                    {
                        return Some(self.block_event(
                            "content_block_delta",
                            None,
                            Some(Delta::Signature { signature }),
                        ));
                    }
                }
                Stage::BlockStop => {
                    let event = self.block_event::<Delta<'_>>("content_block_stop", None, None);
                    self.group += 1;
                    self.stage = Stage::BlockStart;
                    return Some(event);
                }
                Stage::MessageDelta => {
                    self.stage = Stage::MessageStop;
                    return Some(self.message_delta());
                }
                Stage::MessageStop => {
                    self.stage = Stage::End;
                    return Some(sse("message_stop", &json!({"type": "message_stop"})));
                }
                Stage::End => return None,
            }
        }
    }
}

/// The answer as one `message` object (id, type, role, model, content, stop reason, stop
/// sequence, usage), its content blocks laid out as [`encode_stream`] lays them out.
pub fn encode_object<B>(answer: &RecordedAnswer<B>, _request: &WireRequest) -> Value
where
    B: AsRef<[MessageContentBlock]>,
{
    let head = head(answer);
    let blocks = answer.blocks.as_ref();
    let joined = |from: usize, to: usize| -> String {
        blocks[from.min(blocks.len())..to.min(blocks.len())]
            .iter()
            .filter_map(|b| match b {
                MessageContentBlock::Text { text } => Some(text.as_str()),
                MessageContentBlock::Thinking { thinking } => Some(thinking.as_str()),
                _ => None,
            })
            .collect()
    };
    let mut content = Vec::with_capacity(head.groups.len());
    for group in &head.groups {
        let mut block = Map::new();
        let extra = match group {
            Group::Text { from, to, extra } => {
                block.insert("type".into(), "text".into());
                block.insert("text".into(), joined(*from, *to).into());
                extra
            }
            Group::Thinking {
                from,
                to,
                signature,
                extra,
            } => {
                block.insert("type".into(), "thinking".into());
                block.insert("thinking".into(), joined(*from, *to).into());
                // The SDKs' ThinkingBlock requires a signature; an answer recorded elsewhere
                // has none to give.
                block.insert(
                    "signature".into(),
                    signature.as_deref().unwrap_or_default().into(),
                );
                extra
            }
            Group::ToolUse { at, extra } => {
                block.insert("type".into(), "tool_use".into());
                if let Some(MessageContentBlock::ToolCall {
                    id,
                    name,
                    arguments,
                }) = blocks.get(*at)
                {
                    block.insert("id".into(), id.as_str().into());
                    block.insert("name".into(), name.as_str().into());
                    block.insert("input".into(), input_value(arguments));
                }
                extra
            }
            Group::Kept { start, deltas } => {
                content.push(kept_object(start, deltas));
                continue;
            }
        };
        for (key, value) in &extra.fields {
            if key != "input" {
                block.insert(key.clone(), value.clone());
            }
        }
        fold_citations(&mut block, &extra.deltas);
        content.push(Value::Object(block));
    }
    serde_json::to_value(MessageObject {
        id: &head.id,
        kind: "message",
        role: "assistant",
        content: Value::Array(content),
        model: &answer.model,
        stop_reason: Some(&head.stop_reason),
        stop_sequence: &head.stop_sequence,
        usage: Value::Object(head.usage.clone()),
        fields: &head.fields,
    })
    .unwrap_or(Value::Null)
}

/// A tool call's arguments as its `input`: the JSON they are, `{}` for none, and the text
/// itself for arguments that are not JSON (recorded in a format that allowed them).
fn input_value(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return Value::Object(Map::new());
    }
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_owned()))
}

/// `citations_delta`s as the `citations` list the SDKs accumulate them into.
fn fold_citations(block: &mut Map<String, Value>, deltas: &[Value]) {
    let citations: Vec<Value> = deltas
        .iter()
        .filter(|d| d.get("type").and_then(Value::as_str) == Some("citations_delta"))
        .filter_map(|d| d.get("citation").cloned())
        .collect();
    if citations.is_empty() {
        return;
    }
    match block.get_mut("citations") {
        Some(Value::Array(list)) => list.extend(citations),
        _ => {
            block.insert("citations".into(), Value::Array(citations));
        }
    }
}

/// A kept block as a whole object: its start, with a streamed input (a server tool's
/// `input_json_delta`s) assembled into `input` as the SDKs do.
fn kept_object(start: &Value, deltas: &[Value]) -> Value {
    let mut object = start.clone();
    let json: String = deltas
        .iter()
        .filter(|d| d.get("type").and_then(Value::as_str) == Some("input_json_delta"))
        .filter_map(|d| d.get("partial_json").and_then(Value::as_str))
        .collect();
    if let (Some(map), false) = (object.as_object_mut(), json.is_empty()) {
        map.insert("input".into(), input_value(&json));
    }
    if let Some(map) = object.as_object_mut() {
        fold_citations(map, deltas);
    }
    object
}
