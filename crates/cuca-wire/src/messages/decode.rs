//! The Messages stream decoder (bytes in, content blocks, a summary and its `wire` object out)
//! and the reader of a whole `message` object.
//!
//! It is pure (no I/O, no clock), so a test can feed it a real transcript split at any
//! byte and compare. What it maps:
//!
//! * `text_delta` → one [`MessageContentBlock::Text`] per delta, `thinking_delta` → one
//!   [`MessageContentBlock::Thinking`] per delta (empty deltas yield nothing);
//! * a `tool_use` block's `input_json_delta`s → one [`MessageContentBlock::ToolCall`] at its
//!   `content_block_stop`, its arguments exactly the concatenated `partial_json` (the start
//!   block's `input` as JSON when nothing was streamed);
//! * `message_start` (id, model, input usage), `message_delta` (stop reason, stop sequence,
//!   output usage), `message_stop` (the end), `ping` (nothing), `error` (the server's
//!   message, refusing the stream);
//! * what the blocks have no field for, into [`StreamSummary::wire`] (see
//!   [`crate::messages`]), kept up to date event by event so a cut stream still has it.

use std::borrow::Cow;

use cuca_events::{MessageContentBlock, PromptCacheUsage, ProviderUsage, TokenDetail};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::WIRE_FORMAT;
use crate::error::WireError;
use crate::stream::{bounded, stream_decoder, Common, Events};
use crate::summary::StreamSummary;
use crate::text::{clip_server_words, error_value_text, server_text};

stream_decoder!(
    /// Decodes one Messages event stream.
    ///
    /// ```
    /// use cuca_wire::messages::MessagesStreamDecoder;
    /// use cuca_events::MessageContentBlock;
    ///
    /// let mut decoder = MessagesStreamDecoder::new();
    /// let mut blocks = Vec::new();
    /// decoder.feed(b"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
    /// event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"no", &mut blocks).unwrap();
    /// decoder.feed(b"ted\"}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n", &mut blocks).unwrap();
    /// let summary = decoder.finish(&mut blocks).unwrap();
    /// assert_eq!(blocks, vec![MessageContentBlock::text("noted")]);
    /// assert_eq!(summary.finish_reason.as_deref(), Some("end_turn"));
    /// assert_eq!(summary.wire.unwrap()["blocks"][0]["records"], 1);
    /// ```
    ///
    /// A stream is complete when `message_stop` arrived or, failing that, a `stop_reason`
    /// did; a block still open at the end (a tool call half assembled) is pushed as far as it
    /// got, whatever the verdict.
    MessagesStreamDecoder,
    MessagesEvents
);

/// What the Messages decoder keeps beside the shared state.
#[derive(Debug, Default)]
pub(crate) struct MessagesEvents {
    common: Common,
    /// The content blocks started and not yet stopped (Anthropic streams one at a time; a
    /// list costs nothing and keeps a server that interleaves them readable).
    open: Vec<Open>,
    /// The usage so far: `message_start`'s, with `message_delta`'s fields laid over it.
    usage: Map<String, Value>,
}

#[derive(Debug)]
struct Open {
    /// The stream's `index` of the block.
    index: u64,
    /// Its entry in `wire.blocks`.
    entry: usize,
    /// Session blocks it pushed.
    records: u64,
    kind: OpenKind,
}

#[derive(Debug)]
enum OpenKind {
    Text,
    Thinking,
    ToolUse {
        id: String,
        name: String,
        /// The start block's `input`, as JSON text.
        input: String,
        arguments: String,
    },
    /// `redacted_thinking` or a type cuca does not know: kept in `wire`, no session block.
    Kept,
}

impl Events for MessagesEvents {
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
        let parsed: WireEvent<'_> = match serde_json::from_str(data) {
            Ok(parsed) => parsed,
            Err(e) => {
                return self
                    .common
                    .malformed(&format!("not a Messages stream event ({e})"), data)
            }
        };
        match self.apply(&parsed, data, out) {
            Ok(()) => Ok(()),
            Err(Applied::Malformed(why)) => self.common.malformed(&why, data),
            Err(Applied::Fatal(error)) => Err(error),
        }
    }

    fn end(
        &mut self,
        tail: Result<(), WireError>,
        out: &mut Vec<MessageContentBlock>,
    ) -> Result<(), WireError> {
        // What was assembled is pushed whatever the verdict, so a recorder keeps it.
        self.close_all(out);
        tail?;
        let summary = &self.common.summary;
        if !summary.saw_done && summary.finish_reason.is_none() {
            return Err(self.common.truncated());
        }
        Ok(())
    }
}

#[derive(Deserialize)]
struct WireEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
    #[serde(borrow, default)]
    content_block: Option<&'a RawValue>,
    #[serde(borrow, default)]
    delta: Option<&'a RawValue>,
    #[serde(borrow, default)]
    usage: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct StartMessage {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<Map<String, Value>>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// The keys of a message object cuca maps (the rest are kept as `wire.fields`).
const MESSAGE_KEYS: [&str; 8] = [
    "id",
    "type",
    "role",
    "content",
    "model",
    "stop_reason",
    "stop_sequence",
    "usage",
];

/// A message object's keys cuca does not map (`container`, keys Anthropic adds), verbatim.
fn message_fields(message: &Map<String, Value>) -> Option<Value> {
    let fields: Map<String, Value> = message
        .iter()
        .filter(|(key, _)| !MESSAGE_KEYS.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    (!fields.is_empty()).then_some(Value::Object(fields))
}

#[derive(Deserialize)]
struct BlockDelta<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Cow<'a, str>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    partial_json: Option<String>,
}

impl MessagesEvents {
    fn apply(
        &mut self,
        event: &WireEvent<'_>,
        data: &str,
        out: &mut Vec<MessageContentBlock>,
    ) -> Result<(), Applied> {
        if let Some(index) = event.index {
            // The open blocks are looked up by index: bounded, so an upstream cannot make
            // the list of open blocks as long as it likes.
            bounded("index", index)?;
        }
        match event.kind.as_ref() {
            "message_start" => {
                let message: StartMessage = parse(event.message, "message")?;
                let fields = message_fields(&message.rest);
                if let Some(wire) = self.wire() {
                    if let Some(id) = message.id {
                        wire.insert("id".into(), Value::String(id));
                    }
                    if let Some(fields) = fields {
                        wire.insert("fields".into(), fields);
                    }
                }
                if let Some(model) = message.model.filter(|m| !m.is_empty()) {
                    self.common.summary.model.get_or_insert(model);
                }
                if let Some(usage) = message.usage {
                    self.usage = usage;
                    self.usage_changed();
                }
            }
            "content_block_start" => {
                let index = event.index.ok_or("content_block_start without an index")?;
                if self.open.iter().any(|o| o.index == index) {
                    return Err(format!("content block {index} started twice").into());
                }
                // Every block started has an entry in `wire` for the whole call: bounded, so a
                // stream that starts blocks without end cannot grow it without end.
                let n_started = self.wire_blocks().map_or(0, |blocks| blocks.len());
                bounded("content block", n_started as u64).map_err(|why| {
                    Applied::Fatal(WireError::Decode {
                        message: format!("event {} is {why}", self.common.summary.n_events),
                    })
                })?;
                let block: Map<String, Value> = parse(event.content_block, "content_block")?;
                let (entry, kind, first) = start_entry(block);
                let entry = match self.wire_blocks() {
                    Some(blocks) => {
                        blocks.push(Value::Object(entry));
                        blocks.len() - 1
                    }
                    None => usize::MAX,
                };
                let mut open = Open {
                    index,
                    entry,
                    records: 0,
                    kind,
                };
                if let Some(first) = first {
                    self.push(&mut open, first, out);
                }
                self.open.push(open);
            }
            "content_block_delta" => {
                let index = event.index.ok_or("content_block_delta without an index")?;
                let slot = self
                    .open
                    .iter()
                    .position(|o| o.index == index)
                    .ok_or_else(|| format!("a delta for content block {index}, never started"))?;
                let raw = event.delta.ok_or("content_block_delta without a delta")?;
                let delta: BlockDelta<'_> = serde_json::from_str(raw.get()).map_err(|e| {
                    Applied::Malformed(format!("an event whose 'delta' cannot be read ({e})"))
                })?;
                let mut open = self.open.swap_remove(slot);
                self.delta(&mut open, delta, raw, out);
                self.open.push(open);
            }
            "content_block_stop" => {
                let index = event.index.ok_or("content_block_stop without an index")?;
                let slot = self
                    .open
                    .iter()
                    .position(|o| o.index == index)
                    .ok_or_else(|| format!("content block {index} stopped, never started"))?;
                let open = self.open.remove(slot);
                self.close(open, out);
            }
            "message_delta" => {
                let delta: Map<String, Value> = parse(event.delta, "delta")?;
                if let Some(reason) = delta.get("stop_reason").and_then(Value::as_str) {
                    self.common.summary.finish_reason = Some(reason.to_owned());
                }
                if let (Some(sequence), Some(wire)) = (delta.get("stop_sequence"), self.wire()) {
                    wire.insert("stop_sequence".into(), sequence.clone());
                }
                if event.usage.is_some() {
                    let usage: Map<String, Value> = parse(event.usage, "usage")?;
                    self.usage.extend(usage);
                    self.usage_changed();
                }
            }
            "message_stop" => {
                self.close_all(out);
                self.common.summary.saw_done = true;
            }
            "error" => return Err(Applied::Fatal(self.stream_error(data, event.error))),
            // `ping`, and event types Anthropic may add: its docs ask clients to ignore them.
            _ => {}
        }
        Ok(())
    }

    fn delta(
        &mut self,
        open: &mut Open,
        delta: BlockDelta<'_>,
        raw: &RawValue,
        out: &mut Vec<MessageContentBlock>,
    ) {
        match (&mut open.kind, delta.kind.as_ref()) {
            (OpenKind::Text, "text_delta") => {
                if let Some(text) = delta.text.filter(|t| !t.is_empty()) {
                    self.push(open, MessageContentBlock::Text { text }, out);
                }
            }
            (OpenKind::Thinking, "thinking_delta") => {
                if let Some(thinking) = delta.thinking.filter(|t| !t.is_empty()) {
                    self.push(open, MessageContentBlock::Thinking { thinking }, out);
                }
            }
            (OpenKind::Thinking, "signature_delta") => {
                // The SDKs set the signature from the delta (they do not append to it).
                let signature = Value::String(delta.signature.unwrap_or_default());
                if let Some(entry) = self.entry(open.entry) {
                    entry.insert("signature".into(), signature);
                }
            }
            (OpenKind::ToolUse { arguments, .. }, "input_json_delta") => {
                arguments.push_str(delta.partial_json.as_deref().unwrap_or_default());
            }
            // A delta cuca does not map (`citations_delta`, a server tool's input, a type
            // Anthropic adds): kept verbatim, in order, for the encoder to send again.
            _ => {
                let delta = serde_json::from_str::<Value>(raw.get())
                    .unwrap_or_else(|_| Value::String(raw.get().to_owned()));
                if let Some(entry) = self.entry(open.entry) {
                    match entry.get_mut("deltas") {
                        Some(Value::Array(deltas)) => deltas.push(delta),
                        _ => {
                            entry.insert("deltas".into(), Value::Array(vec![delta]));
                        }
                    }
                }
            }
        }
    }

    fn push(
        &mut self,
        open: &mut Open,
        block: MessageContentBlock,
        out: &mut Vec<MessageContentBlock>,
    ) {
        out.push(block);
        open.records += 1;
        let records = open.records;
        if let Some(entry) = self.entry(open.entry) {
            if let Some(slot) = entry.get_mut("records") {
                *slot = Value::from(records);
            }
        }
    }

    fn close(&mut self, mut open: Open, out: &mut Vec<MessageContentBlock>) {
        if let OpenKind::ToolUse {
            id,
            name,
            input,
            arguments,
        } = &mut open.kind
        {
            // Nothing streamed (or only empty pieces): the start block's input is the whole.
            let arguments = if arguments.is_empty() {
                std::mem::take(input)
            } else {
                std::mem::take(arguments)
            };
            let call = MessageContentBlock::ToolCall {
                id: std::mem::take(id),
                name: std::mem::take(name),
                arguments,
            };
            self.push(&mut open, call, out);
        }
    }

    /// Closes every block still open, in the order they were started: at `message_stop`, or
    /// at the end of a cut stream (a half-assembled tool call is pushed as far as it got).
    fn close_all(&mut self, out: &mut Vec<MessageContentBlock>) {
        let mut open = std::mem::take(&mut self.open);
        open.sort_by_key(|o| o.entry);
        for block in open {
            self.close(block, out);
        }
    }

    /// The `wire` object, made at the first event that needs it (`None` never happens: it
    /// is made an object right here, but the type cannot say so).
    fn wire(&mut self) -> Option<&mut Map<String, Value>> {
        let wire = self
            .common
            .summary
            .wire
            .get_or_insert_with(|| new_wire(Vec::new()));
        if !wire.is_object() {
            *wire = new_wire(Vec::new());
        }
        wire.as_object_mut()
    }

    fn wire_blocks(&mut self) -> Option<&mut Vec<Value>> {
        let wire = self.wire()?;
        if !matches!(wire.get("blocks"), Some(Value::Array(_))) {
            wire.insert("blocks".into(), Value::Array(Vec::new()));
        }
        wire.get_mut("blocks").and_then(Value::as_array_mut)
    }

    fn entry(&mut self, entry: usize) -> Option<&mut Map<String, Value>> {
        self.wire_blocks()?
            .get_mut(entry)
            .and_then(Value::as_object_mut)
    }

    fn usage_changed(&mut self) {
        let usage = Value::Object(self.usage.clone());
        if let Some(wire) = self.wire() {
            wire.insert("usage".into(), usage);
        }
        let (usage, cache) = usage_of(&self.usage);
        self.common.summary.usage = Some(usage);
        if cache.is_some() {
            self.common.summary.prompt_cache = cache;
        }
    }

    fn stream_error(&mut self, data: &str, error: Option<&RawValue>) -> WireError {
        let text = error
            .and_then(|e| serde_json::from_str::<Value>(e.get()).ok())
            .and_then(|e| error_value_text(&e))
            .unwrap_or_else(|| server_text(data));
        self.common.stream_error(text)
    }
}

/// Why [`MessagesEvents::apply`] did not apply an event.
enum Applied {
    /// The event is not what a Messages server sends (skippable), in words.
    Malformed(String),
    /// The server said it failed.
    Fatal(WireError),
}

impl From<String> for Applied {
    fn from(why: String) -> Self {
        Applied::Malformed(why)
    }
}

impl From<&str> for Applied {
    fn from(why: &str) -> Self {
        Applied::Malformed(why.to_owned())
    }
}

fn parse<T: serde::de::DeserializeOwned>(raw: Option<&RawValue>, what: &str) -> Result<T, Applied> {
    let raw = raw.ok_or_else(|| format!("an event without its '{what}'"))?;
    serde_json::from_str(raw.get())
        .map_err(|e| Applied::Malformed(format!("an event whose '{what}' cannot be read ({e})")))
}

fn new_wire(blocks: Vec<Value>) -> Value {
    let mut wire = Map::new();
    wire.insert("format".into(), Value::String(WIRE_FORMAT.into()));
    wire.insert("blocks".into(), Value::Array(blocks));
    Value::Object(wire)
}

/// A usage object in cuca's terms: every input count (uncached, written to the cache, read
/// from it) is prompt; `output_tokens` is completion; the cache reads are the cached prompt;
/// and every count as sent, kind by kind, in the detail.
fn usage_of(usage: &Map<String, Value>) -> (ProviderUsage, Option<PromptCacheUsage>) {
    let count = |key: &str| usage.get(key).and_then(Value::as_u64);
    // The 5-minute / 1-hour split of the cache writes, where the answer gives it.
    let split = |key: &str| {
        usage
            .get("cache_creation")
            .and_then(|c| c.get(key))
            .and_then(Value::as_u64)
    };
    let prompt_tokens = count("input_tokens").unwrap_or(0)
        + count("cache_creation_input_tokens").unwrap_or(0)
        + count("cache_read_input_tokens").unwrap_or(0);
    (
        ProviderUsage {
            prompt_tokens,
            completion_tokens: count("output_tokens").unwrap_or(0),
            reasoning_tokens: None,
            cost: None,
            detail: TokenDetail {
                input: count("input_tokens"),
                output: count("output_tokens"),
                cache_read: count("cache_read_input_tokens"),
                cache_write: count("cache_creation_input_tokens"),
                cache_write_5m: split("ephemeral_5m_input_tokens"),
                cache_write_1h: split("ephemeral_1h_input_tokens"),
                ..TokenDetail::default()
            },
        },
        count("cache_read_input_tokens").map(|cached_tokens| PromptCacheUsage { cached_tokens }),
    )
}

/// The keys of a content block cuca maps, per type (the rest are kept as `fields`).
fn mapped_keys(kind: &str) -> &'static [&'static str] {
    match kind {
        "text" => &["type", "text"],
        "thinking" => &["type", "thinking", "signature"],
        "tool_use" => &["type", "id", "name", "input"],
        "redacted_thinking" => &["type", "data"],
        _ => &["type"],
    }
}

/// A content block's `wire.blocks` entry, with `records` 0: its type, the fields cuca does not
/// map, and what replaces a session block for the types that have none.
fn entry_of(block: &Map<String, Value>) -> Map<String, Value> {
    let kind = block
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut entry = Map::new();
    entry.insert("type".into(), Value::String(kind.to_owned()));
    entry.insert("records".into(), Value::from(0u64));
    match kind {
        "text" | "thinking" | "tool_use" | "redacted_thinking" => {
            if kind == "thinking" {
                if let Some(signature) = block
                    .get("signature")
                    .filter(|s| s.as_str().is_some_and(|s| !s.is_empty()))
                {
                    entry.insert("signature".into(), signature.clone());
                }
            }
            if kind == "redacted_thinking" {
                let data = block.get("data").cloned().unwrap_or(Value::Null);
                entry.insert("data".into(), data);
            }
            let mapped = mapped_keys(kind);
            let fields: Map<String, Value> = block
                .iter()
                .filter(|(key, _)| !mapped.contains(&key.as_str()))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            if !fields.is_empty() {
                entry.insert("fields".into(), Value::Object(fields));
            }
        }
        _ => {
            entry.insert("raw".into(), Value::Object(block.clone()));
        }
    }
    entry
}

/// A streamed block's start: its `wire` entry, how to assemble it, and the session block its
/// start already holds (a server that puts text in the start block).
fn start_entry(
    block: Map<String, Value>,
) -> (Map<String, Value>, OpenKind, Option<MessageContentBlock>) {
    let mut entry = entry_of(&block);
    let text = |key: &str| {
        block
            .get(key)
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
    };
    match block
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
    {
        "text" => (
            entry,
            OpenKind::Text,
            text("text").map(MessageContentBlock::text),
        ),
        "thinking" => (
            entry,
            OpenKind::Thinking,
            text("thinking").map(MessageContentBlock::thinking),
        ),
        "tool_use" => {
            let input = block
                .get("input")
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new()));
            // A start input other than the documented `{}` is kept, so an encoder starts the
            // block with it again.
            if input.as_object().is_none_or(|o| !o.is_empty()) {
                let fields = entry
                    .entry("fields")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(fields) = fields.as_object_mut() {
                    fields.insert("input".into(), input.clone());
                }
            }
            let kind = OpenKind::ToolUse {
                id: text("id").unwrap_or_default(),
                name: text("name").unwrap_or_default(),
                input: input.to_string(),
                arguments: String::new(),
            };
            (entry, kind, None)
        }
        _ => (entry, OpenKind::Kept, None),
    }
}

/// A non-streamed `message` object's blocks (one per content block, in order; an empty text
/// or thinking gives none, as its stream would) and summary, its `wire` laid out as a
/// stream's would be with `records` 1 (0 for the empty ones and the kept types).
///
/// ```
/// let (blocks, summary) = cuca_wire::messages::decode_whole(
///     br#"{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}"#,
/// ).unwrap();
/// assert_eq!(blocks, vec![cuca_events::MessageContentBlock::text("hi")]);
/// assert_eq!(summary.finish_reason.as_deref(), Some("end_turn"));
/// assert_eq!(summary.wire.unwrap()["id"], "msg_1");
/// ```
pub fn decode_whole(body: &[u8]) -> Result<(Vec<MessageContentBlock>, StreamSummary), String> {
    let value: Map<String, Value> = serde_json::from_slice(body)
        .map_err(|e| format!("the upstream's answer is not a JSON object: {e}"))?;
    if value.get("type").and_then(Value::as_str) == Some("error") || value.contains_key("error") {
        let text = value
            .get("error")
            .and_then(error_value_text)
            .unwrap_or_else(|| "an error without a message".to_owned());
        return Err(format!(
            "the upstream answered an error: {}",
            clip_server_words(&text)
        ));
    }
    let mut summary = StreamSummary {
        n_events: 1,
        ..StreamSummary::default()
    };
    summary.model = value
        .get("model")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .map(str::to_owned);
    summary.finish_reason = value
        .get("stop_reason")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut blocks = Vec::new();
    let mut entries = Vec::new();
    for block in value
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(block) = block.as_object() else {
            continue;
        };
        let mut entry = entry_of(block);
        let text = |key: &str| {
            block
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let session = match block.get("type").and_then(Value::as_str) {
            Some("text") => Some(MessageContentBlock::text(text("text"))),
            Some("thinking") => {
                if let Some(signature) = block.get("signature") {
                    entry.insert("signature".into(), signature.clone());
                }
                Some(MessageContentBlock::thinking(text("thinking")))
            }
            Some("tool_use") => Some(MessageContentBlock::ToolCall {
                id: text("id"),
                name: text("name"),
                arguments: block
                    .get("input")
                    .map(Value::to_string)
                    .unwrap_or_else(|| "{}".into()),
            }),
            _ => None,
        };
        let session = session.filter(|b| match b {
            MessageContentBlock::Text { text } => !text.is_empty(),
            MessageContentBlock::Thinking { thinking } => !thinking.is_empty(),
            _ => true,
        });
        if let Some(session) = session {
            entry.insert("records".into(), Value::from(1u64));
            blocks.push(session);
        }
        entries.push(Value::Object(entry));
    }
    let mut wire = new_wire(entries);
    if let Some(wire) = wire.as_object_mut() {
        if let Some(id) = value.get("id") {
            wire.insert("id".into(), id.clone());
        }
        if let Some(fields) = message_fields(&value) {
            wire.insert("fields".into(), fields);
        }
        if let Some(sequence) = value.get("stop_sequence") {
            wire.insert("stop_sequence".into(), sequence.clone());
        }
        if let Some(usage) = value.get("usage").and_then(Value::as_object) {
            wire.insert("usage".into(), Value::Object(usage.clone()));
            let (usage, cache) = usage_of(usage);
            summary.usage = Some(usage);
            summary.prompt_cache = cache;
        }
    }
    summary.wire = Some(wire);
    Ok((blocks, summary))
}
