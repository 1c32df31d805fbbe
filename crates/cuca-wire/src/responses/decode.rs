//! The Responses stream decoder (and the whole `response` object's): bytes in, content blocks
//! and a summary out, with [`StreamSummary::wire`] kept up to date as events arrive.
//!
//! It reads OpenAI's event shapes and llama-server's (which leaves out `output_index`,
//! `content_index` and `sequence_number`, and sends the `response` object of
//! `response.created` without `created_at` or `output`): an event finds its item by
//! `output_index`, else by `item_id`, else it is the last item opened.
//!
//! * `response.output_text.delta` and `response.refusal.delta` → one Text block each;
//! * `response.reasoning_text.delta`, `response.reasoning_summary_text.delta` → Thinking;
//! * a `function_call` item's `response.function_call_arguments.delta`s, made authoritative by
//!   its `response.output_item.done` → one ToolCall (`id` = its `call_id`) at that event;
//! * an item that arrives whole in `response.output_item.done` (or only in the final
//!   response's `output`) with no deltas → one block per content part, as [`decode_whole`];
//! * `response.completed` / `response.incomplete` end the stream (`finish_reason`: the
//!   status, or `incomplete_details.reason`); `response.failed` and `error` fail it.

use std::borrow::Cow;

use cuca_events::{MessageContentBlock, PromptCacheUsage, ProviderUsage, TokenDetail};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::WIRE_FORMAT;
use crate::error::WireError;
use crate::stream::{bounded, stream_decoder, Common, Events};
use crate::summary::{LlamaTimings, StreamSummary};
use crate::text::{clip_server_words, error_value_text, for_clip_error, server_text};

stream_decoder!(
    /// Decodes one Responses event stream.
    ///
    /// ```
    /// use cuca_wire::responses::ResponsesStreamDecoder;
    /// use cuca_events::MessageContentBlock;
    ///
    /// let mut decoder = ResponsesStreamDecoder::new();
    /// let mut blocks = Vec::new();
    /// decoder.feed(b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"no", &mut blocks).unwrap();
    /// decoder.feed(b"ted\"}\n\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\"}}\n\n", &mut blocks).unwrap();
    /// let summary = decoder.finish(&mut blocks).unwrap();
    /// assert_eq!(blocks, vec![MessageContentBlock::text("noted")]);
    /// assert_eq!(summary.finish_reason.as_deref(), Some("completed"));
    /// assert_eq!(summary.wire.unwrap()["id"], "resp_1");
    /// ```
    ///
    /// A stream is complete when `response.completed` or `response.incomplete` arrived; a
    /// function call whose `output_item.done` never came is pushed at the end with the
    /// arguments streamed so far, whatever the verdict.
    ResponsesStreamDecoder,
    ResponsesEvents
);

/// What the Responses decoder keeps beside the shared state.
#[derive(Debug, Default)]
pub(crate) struct ResponsesEvents {
    common: Common,
    /// The output items, in the order they were opened; `summary.wire.items[i]` is item `i`.
    items: Vec<Item>,
}

/// What the decoder tracks of one output item besides its `wire` entry.
#[derive(Debug, Default)]
struct Item {
    output_index: Option<u64>,
    id: String,
    kind: String,
    /// A function call's, from `output_item.added` and the argument deltas.
    call_id: String,
    name: String,
    arguments: String,
    /// Blocks pushed for the item.
    records: u64,
    /// Whether any of them came from deltas (then `output_item.done` adds none).
    streamed: bool,
    /// Blocks per message content part (`content_index`), with the part's type.
    parts: Vec<(String, u64)>,
    /// Blocks per reasoning summary part (`summary_index`).
    summary_records: Vec<u64>,
    /// Blocks per reasoning `reasoning_text` part (`content_index`).
    content_records: Vec<u64>,
    done: bool,
}

impl Events for ResponsesEvents {
    // Responses names its error events `error` and gives them a `type`: they are read as
    // events, so the message is the one in the event.
    const READS_ERROR_EVENTS: bool = true;

    fn common(&self) -> &Common {
        &self.common
    }

    fn common_mut(&mut self) -> &mut Common {
        &mut self.common
    }

    fn on_data(
        &mut self,
        event: &str,
        data: &str,
        out: &mut Vec<MessageContentBlock>,
    ) -> Result<(), WireError> {
        self.on_event(event, data, out)
    }

    fn end(
        &mut self,
        tail: Result<(), WireError>,
        out: &mut Vec<MessageContentBlock>,
    ) -> Result<(), WireError> {
        tail?;
        let flushed = self.flush_calls(out);
        if !self.common.summary.saw_done {
            return Err(self.common.truncated());
        }
        flushed
    }
}

/// A non-streamed `response` object's blocks (one per content part, reasoning part and
/// function call, in output order: the order its stream delivers them) and summary, with the
/// same `wire` layout as the stream's.
pub fn decode_whole(body: &[u8]) -> Result<(Vec<MessageContentBlock>, StreamSummary), String> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| format!("the upstream's answer is not JSON: {e}"))?;
    if !value.is_object() {
        return Err("the upstream's answer is not a response object".into());
    }
    let mut state = ResponsesEvents::default();
    let mut blocks = Vec::new();
    state.common.summary.n_events = 1;
    state
        .on_response(&value, true, &mut blocks)
        .and_then(|()| state.flush_calls(&mut blocks))
        .map_err(|e| e.to_string())?;
    state.end(&value);
    Ok((blocks, state.common.summary))
}

/// One event's fields, as far as the decoder reads them.
#[derive(Deserialize)]
struct WireEvent<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(default)]
    delta: Option<Value>,
    #[serde(borrow, default)]
    item_id: Option<Cow<'a, str>>,
    #[serde(default)]
    output_index: Option<u64>,
    #[serde(default)]
    content_index: Option<u64>,
    #[serde(default)]
    summary_index: Option<u64>,
    #[serde(default)]
    arguments: Option<String>,
    #[serde(default)]
    item: Option<Value>,
    #[serde(default)]
    part: Option<Value>,
    #[serde(default)]
    response: Option<Value>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    timings: Option<LlamaTimings>,
}

impl WireEvent<'_> {
    /// Refuses an output, content or summary index past [`crate::MAX_INDEX`]: the decoder
    /// keeps a count per part, so an index is memory the upstream would choose.
    fn check_indices(&self) -> Result<(), String> {
        for (field, index) in [
            ("output_index", self.output_index),
            ("content_index", self.content_index),
            ("summary_index", self.summary_index),
        ] {
            if let Some(index) = index {
                bounded(field, index)?;
            }
        }
        Ok(())
    }
}

/// An index of the event, within [`crate::MAX_INDEX`] (checked when the event was read).
fn index(i: Option<u64>) -> usize {
    i.and_then(|i| usize::try_from(i).ok()).unwrap_or(0)
}

/// Adds one to `list[at]`, growing it with zeros.
fn bump(list: &mut Vec<u64>, at: usize) {
    if list.len() <= at {
        list.resize(at + 1, 0);
    }
    list[at] += 1;
}

fn grow<T: Default + Clone>(list: &mut Vec<T>, at: usize) {
    if list.len() <= at {
        list.resize(at + 1, T::default());
    }
}

impl ResponsesEvents {
    fn on_event(
        &mut self,
        event: &str,
        data: &str,
        out: &mut Vec<MessageContentBlock>,
    ) -> Result<(), WireError> {
        let wire: WireEvent<'_> = match serde_json::from_str(data) {
            Ok(wire) => wire,
            Err(e) => {
                return self
                    .common
                    .malformed(&format!("not a Responses event ({e})"), data)
            }
        };
        if let Err(why) = wire.check_indices() {
            return self.common.malformed(&why, data);
        }
        let kind = wire.kind.as_deref().unwrap_or(event);
        if let Some(timings) = wire.timings {
            self.common.summary.timings = Some(timings);
        }
        match kind {
            "error" => {
                let text = wire
                    .message
                    .clone()
                    .or_else(|| wire.error.as_ref().and_then(error_value_text))
                    .unwrap_or_else(|| server_text(data));
                return Err(self.common.stream_error(text));
            }
            "response.failed" => {
                let text = wire
                    .response
                    .as_ref()
                    .and_then(|r| r.get("error"))
                    .and_then(error_value_text)
                    .unwrap_or_else(|| format!("the response failed: {}", data));
                if let Some(response) = &wire.response {
                    self.on_response(response, false, out)?;
                }
                return Err(self.common.stream_error(text));
            }
            _ => {}
        }
        if let Some(error) = wire.error.as_ref().filter(|e| !e.is_null()) {
            let text = error_value_text(error).unwrap_or_else(|| data.to_owned());
            return Err(self.common.stream_error(text));
        }
        match kind {
            "response.created" | "response.in_progress" | "response.queued" => {
                if let Some(response) = &wire.response {
                    self.on_response(response, false, out)?;
                }
            }
            "response.completed" | "response.incomplete" => {
                let response = wire.response.unwrap_or(Value::Null);
                self.on_response(&response, true, out)?;
                self.flush_calls(out)?;
                self.end(&response);
            }
            "response.output_item.added" => {
                if let Some(item) = &wire.item {
                    self.add_item(wire.output_index, item, out)?;
                }
            }
            "response.output_item.done" => {
                if let Some(item) = &wire.item {
                    self.done_item(wire.output_index, item, out)?;
                }
            }
            "response.content_part.added" => {
                let at = self.item_for(&wire, &["message", "reasoning"], out)?;
                let part_kind = wire
                    .part
                    .as_ref()
                    .and_then(|p| p.get("type"))
                    .and_then(Value::as_str)
                    .unwrap_or("output_text");
                let item = &mut self.items[at];
                let content = index(wire.content_index);
                if item.kind == "reasoning" {
                    grow(&mut item.content_records, content);
                    self.sync_part(at, false, content);
                } else {
                    grow(&mut item.parts, content);
                    item.parts[content].0 = part_kind.to_owned();
                    self.sync_records(at);
                }
            }
            "response.reasoning_summary_part.added" => {
                let at = self.item_for(&wire, &["reasoning"], out)?;
                let summary = index(wire.summary_index);
                grow(&mut self.items[at].summary_records, summary);
                self.sync_part(at, true, summary);
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(text) = delta_text(&wire) {
                    let at = self.item_for(&wire, &["message"], out)?;
                    let item = &mut self.items[at];
                    let content = index(wire.content_index);
                    grow(&mut item.parts, content);
                    let part = &mut item.parts[content];
                    if part.0.is_empty() {
                        part.0 = if kind == "response.refusal.delta" {
                            "refusal"
                        } else {
                            "output_text"
                        }
                        .to_owned();
                    }
                    part.1 += 1;
                    item.records += 1;
                    item.streamed = true;
                    out.push(MessageContentBlock::Text { text });
                    self.sync_records(at);
                }
            }
            "response.reasoning_text.delta" | "response.reasoning_summary_text.delta" => {
                if let Some(thinking) = delta_text(&wire) {
                    let at = self.item_for(&wire, &["reasoning"], out)?;
                    let item = &mut self.items[at];
                    let summary = kind == "response.reasoning_summary_text.delta";
                    let part = if summary {
                        index(wire.summary_index)
                    } else {
                        index(wire.content_index)
                    };
                    bump(
                        if summary {
                            &mut item.summary_records
                        } else {
                            &mut item.content_records
                        },
                        part,
                    );
                    item.records += 1;
                    item.streamed = true;
                    out.push(MessageContentBlock::Thinking { thinking });
                    self.sync_part(at, summary, part);
                }
            }
            "response.function_call_arguments.delta" => {
                if let Some(piece) = delta_text(&wire) {
                    let at = self.item_for(&wire, &["function_call"], out)?;
                    self.items[at].arguments.push_str(&piece);
                }
            }
            "response.function_call_arguments.done" => {
                if let Some(arguments) = &wire.arguments {
                    let at = self.item_for(&wire, &["function_call"], out)?;
                    self.items[at].arguments = arguments.clone();
                }
            }
            // Annotations arrive again in the item's `output_item.done`; hosted tools' progress
            // events carry nothing the item as done does not.
            _ => {}
        }
        Ok(())
    }

    /// The wire object, made on first use.
    fn wire(&mut self) -> Option<&mut Map<String, Value>> {
        if !matches!(self.common.summary.wire, Some(Value::Object(_))) {
            self.common.summary.wire = Some(json!({"format": WIRE_FORMAT, "items": []}));
        }
        self.common
            .summary
            .wire
            .as_mut()
            .and_then(Value::as_object_mut)
    }

    fn wire_item(&mut self, at: usize) -> Option<&mut Map<String, Value>> {
        self.wire();
        wire_entry(&mut self.common.summary.wire, at)
    }

    /// Writes item `at`'s counts into its wire entry: the block count, and a reasoning item's
    /// part counts, each list brought up to date in place (at an item's end; a delta writes
    /// only what it changed, with [`ResponsesEvents::sync_part`]).
    fn sync(&mut self, at: usize) {
        self.sync_records(at);
        let Some(item) = self.items.get(at) else {
            return;
        };
        if item.kind != "reasoning" {
            return;
        }
        if let Some(entry) = wire_entry(&mut self.common.summary.wire, at) {
            for (key, counts) in [
                ("summary_records", &item.summary_records),
                ("content_records", &item.content_records),
            ] {
                if let Some(list) = counts_list(entry, key, counts) {
                    list.truncate(counts.len());
                    for (slot, &n) in list.iter_mut().zip(counts) {
                        *slot = n.into();
                    }
                }
            }
        }
    }

    /// Writes item `at`'s block count into its wire entry.
    fn sync_records(&mut self, at: usize) {
        let records = self.items.get(at).map_or(0, |item| item.records);
        if let Some(entry) = self.wire_item(at) {
            entry.insert("records".into(), records.into());
        }
    }

    /// Writes item `at`'s block count and its reasoning part `part`'s count (in
    /// `summary_records` or `content_records`) into its wire entry, changing nothing else: a
    /// delta costs the same however many parts came before it (cloning the list on every
    /// delta made a stream of many parts quadratic).
    fn sync_part(&mut self, at: usize, summary: bool, part: usize) {
        self.sync_records(at);
        self.wire();
        let Some(item) = self.items.get(at) else {
            return;
        };
        let (key, counts) = if summary {
            ("summary_records", &item.summary_records)
        } else {
            ("content_records", &item.content_records)
        };
        if let Some(list) = wire_entry(&mut self.common.summary.wire, at)
            .and_then(|entry| counts_list(entry, key, counts))
        {
            if let Some(&n) = counts.get(part) {
                if let Some(slot) = list.get_mut(part) {
                    *slot = n.into();
                }
            }
        }
    }

    /// The item an event is about: by `output_index`, else `item_id`, else the last one; an
    /// event for an item never opened, or for one of another kind or already done, opens one
    /// of `kinds[0]`.
    fn item_for(
        &mut self,
        wire: &WireEvent<'_>,
        kinds: &[&str],
        out: &mut Vec<MessageContentBlock>,
    ) -> Result<usize, WireError> {
        let found = wire
            .output_index
            .and_then(|i| self.items.iter().position(|it| it.output_index == Some(i)))
            .or_else(|| {
                let id = wire.item_id.as_deref()?;
                self.items.iter().rposition(|it| it.id == id)
            })
            .or_else(|| {
                (wire.output_index.is_none() && wire.item_id.is_none())
                    .then(|| self.items.len().checked_sub(1))
                    .flatten()
            })
            .filter(|&at| {
                let item = &self.items[at];
                !item.done && kinds.contains(&item.kind.as_str())
            });
        match found {
            Some(at) => Ok(at),
            None => {
                let mut item = json!({"type": kinds.first().copied().unwrap_or("message")});
                if let Some(id) = wire.item_id.as_deref() {
                    item["id"] = Value::String(id.to_owned());
                }
                self.add_item(wire.output_index, &item, out)
            }
        }
    }

    /// Opens an item. Items stream one after another, so a function call still open is over:
    /// its ToolCall goes before the new item's blocks. An item past [`crate::MAX_INDEX`]
    /// refuses the stream: every event looks its item up among those opened, so an upstream
    /// that opens items without end would make each event cost more than the last.
    fn add_item(
        &mut self,
        output_index: Option<u64>,
        item: &Value,
        out: &mut Vec<MessageContentBlock>,
    ) -> Result<usize, WireError> {
        let n_items = self.items.len() as u64;
        if let Err(why) = bounded("output item", n_items) {
            return Err(WireError::Decode {
                message: format!("event {} is {why}", self.common.summary.n_events),
            });
        }
        for at in 0..self.items.len() {
            let open = &self.items[at];
            if open.kind == "function_call" && !open.done && !open.name.is_empty() {
                // Named, so this cannot refuse.
                let _ = self.push_call(at, out);
                self.sync(at);
            }
        }
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message")
            .to_owned();
        let text = |key: &str| {
            item.get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let entry = Item {
            output_index,
            id: text("id"),
            call_id: text("call_id"),
            name: text("name"),
            arguments: text("arguments"),
            kind: kind.clone(),
            ..Item::default()
        };
        let mut wire = Map::new();
        wire.insert("type".into(), kind.into());
        if !entry.id.is_empty() {
            wire.insert("id".into(), entry.id.clone().into());
        }
        if entry.kind == "function_call" {
            wire.insert("call_id".into(), entry.call_id.clone().into());
        }
        wire.insert("records".into(), 0.into());
        if !["message", "reasoning", "function_call"].contains(&entry.kind.as_str()) {
            // The item as added, until its `output_item.done` replaces it.
            wire.insert("raw".into(), item.clone());
        }
        self.items.push(entry);
        if let Some(items) = self
            .wire()
            .and_then(|w| w.get_mut("items"))
            .and_then(Value::as_array_mut)
        {
            items.push(Value::Object(wire));
        }
        Ok(self.items.len() - 1)
    }

    /// An item as done: a function call's one ToolCall; the blocks of a message or reasoning
    /// item that arrived whole (no deltas); its wire entry completed.
    fn done_item(
        &mut self,
        output_index: Option<u64>,
        item: &Value,
        out: &mut Vec<MessageContentBlock>,
    ) -> Result<(), WireError> {
        let id = item.get("id").and_then(Value::as_str);
        let found = output_index
            .and_then(|i| self.items.iter().position(|it| it.output_index == Some(i)))
            .or_else(|| id.and_then(|id| self.items.iter().rposition(|it| it.id == id)))
            .filter(|&at| !self.items[at].done);
        let at = match found {
            Some(at) => at,
            None => self.add_item(output_index, item, out)?,
        };
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(&self.items[at].kind)
            .to_owned();
        self.items[at].kind = kind.clone();
        if let Some(id) = id.filter(|id| !id.is_empty()) {
            self.items[at].id = id.to_owned();
        }
        let mut extra = Map::new();
        match kind.as_str() {
            "function_call" => {
                let entry = &mut self.items[at];
                for (key, slot) in [
                    ("call_id", &mut entry.call_id),
                    ("name", &mut entry.name),
                    ("arguments", &mut entry.arguments),
                ] {
                    if let Some(text) = item.get(key).and_then(Value::as_str) {
                        *slot = text.to_owned();
                    }
                }
                extra.insert("call_id".into(), entry.call_id.clone().into());
                self.push_call(at, out)?;
            }
            "message" => {
                let parts = item
                    .get("content")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let entry = &mut self.items[at];
                if !entry.streamed {
                    entry.parts.clear();
                    for part in &parts {
                        let part_kind = str_of(part, "type").unwrap_or("output_text");
                        let text = str_of(part, "text")
                            .or_else(|| str_of(part, "refusal"))
                            .unwrap_or_default();
                        let n = u64::from(!text.is_empty());
                        if n == 1 {
                            out.push(MessageContentBlock::text(text));
                        }
                        entry.parts.push((part_kind.to_owned(), n));
                        entry.records += n;
                    }
                }
                let mut layout = Vec::new();
                for position in 0..entry.parts.len().max(parts.len()) {
                    let part = parts.get(position);
                    let part_kind = part
                        .and_then(|p| str_of(p, "type"))
                        .map(str::to_owned)
                        .or_else(|| entry.parts.get(position).map(|p| p.0.clone()))
                        .filter(|k| !k.is_empty())
                        .unwrap_or_else(|| "output_text".to_owned());
                    let records = entry.parts.get(position).map_or(0, |p| p.1);
                    let mut record = Map::new();
                    record.insert("type".into(), part_kind.into());
                    record.insert("records".into(), records.into());
                    for key in ["annotations", "logprobs"] {
                        if let Some(list) = part
                            .and_then(|p| p.get(key))
                            .filter(|l| l.as_array().is_some_and(|l| !l.is_empty()))
                        {
                            record.insert(key.into(), list.clone());
                        }
                    }
                    layout.push(Value::Object(record));
                }
                let plain = layout.len() == 1
                    && layout[0].as_object().is_some_and(|p| {
                        p.len() == 2 && p.get("type").and_then(Value::as_str) == Some("output_text")
                    });
                if !plain {
                    extra.insert("parts".into(), Value::Array(layout));
                }
                if let Some(phase) = item.get("phase").filter(|p| !p.is_null()) {
                    extra.insert("phase".into(), phase.clone());
                }
            }
            "reasoning" => {
                let entry = &mut self.items[at];
                if !entry.streamed {
                    for (key, counts) in [
                        ("summary", &mut entry.summary_records),
                        ("content", &mut entry.content_records),
                    ] {
                        counts.clear();
                        for part in item
                            .get(key)
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                        {
                            let text = str_of(part, "text").unwrap_or_default();
                            let n = u64::from(!text.is_empty());
                            if n == 1 {
                                out.push(MessageContentBlock::thinking(text));
                            }
                            counts.push(n);
                            entry.records += n;
                        }
                    }
                }
                if let Some(encrypted) = item.get("encrypted_content").filter(|e| e.is_string()) {
                    extra.insert("encrypted_content".into(), encrypted.clone());
                }
            }
            _ => {
                extra.insert("raw".into(), item.clone());
            }
        }
        if let Some(status) = item
            .get("status")
            .and_then(Value::as_str)
            .filter(|s| *s != "completed")
        {
            extra.insert("status".into(), status.into());
        }
        self.items[at].done = true;
        self.sync(at);
        if let Some(entry) = self.wire_item(at) {
            entry.extend(extra);
        }
        Ok(())
    }

    fn push_call(
        &mut self,
        at: usize,
        out: &mut Vec<MessageContentBlock>,
    ) -> Result<(), WireError> {
        let entry = &mut self.items[at];
        if entry.name.is_empty() {
            let what = format!(
                "function call {} ended without a name",
                if entry.call_id.is_empty() {
                    &entry.id
                } else {
                    &entry.call_id
                }
            );
            self.common.detail = Some(for_clip_error(format!(
                "{what} (arguments: {})",
                entry.arguments
            )));
            return Err(WireError::Decode {
                message: format!(
                    "{what} (arguments: {})",
                    clip_server_words(&entry.arguments)
                ),
            });
        }
        out.push(MessageContentBlock::ToolCall {
            id: if entry.call_id.is_empty() {
                entry.id.clone()
            } else {
                entry.call_id.clone()
            },
            name: entry.name.clone(),
            arguments: std::mem::take(&mut entry.arguments),
        });
        entry.records = 1;
        entry.done = true;
        Ok(())
    }

    /// The function calls still open at the end (no `output_item.done` came), pushed with
    /// what they have; one that never got a name refuses the stream, as in Chat.
    fn flush_calls(&mut self, out: &mut Vec<MessageContentBlock>) -> Result<(), WireError> {
        for at in 0..self.items.len() {
            let item = &self.items[at];
            if item.kind == "function_call" && !item.done {
                self.push_call(at, out)?;
                self.sync(at);
            }
        }
        Ok(())
    }

    /// A `response` object: its id, times, status, model and usage into the summary and
    /// `wire`; with `last`, the output items no `output_item.done` delivered.
    fn on_response(
        &mut self,
        response: &Value,
        last: bool,
        out: &mut Vec<MessageContentBlock>,
    ) -> Result<(), WireError> {
        if let Some(model) = str_of(response, "model").filter(|m| !m.is_empty()) {
            if self.common.summary.model.is_none() || last {
                self.common.summary.model = Some(model.to_owned());
            }
        }
        let mut fields: Vec<(&str, Value)> = ["id", "created_at", "completed_at", "status"]
            .into_iter()
            .filter_map(|key| Some((key, response.get(key).filter(|v| !v.is_null())?.clone())))
            .collect();
        if let Some(usage) = response.get("usage").filter(|u| u.is_object()) {
            fields.push(("usage", usage.clone()));
            let count = |pointer: &str| usage.pointer(pointer).and_then(Value::as_u64);
            self.common.summary.usage = Some(ProviderUsage {
                prompt_tokens: count("/input_tokens").unwrap_or(0),
                completion_tokens: count("/output_tokens").unwrap_or(0),
                reasoning_tokens: count("/output_tokens_details/reasoning_tokens"),
                cost: usage.get("cost").and_then(Value::as_f64),
                detail: TokenDetail {
                    prompt: count("/input_tokens"),
                    output: count("/output_tokens"),
                    cache_read: count("/input_tokens_details/cached_tokens"),
                    cache_write: count("/input_tokens_details/cache_write_tokens"),
                    reasoning: count("/output_tokens_details/reasoning_tokens"),
                    ..TokenDetail::default()
                },
            });
            if let Some(cached_tokens) = count("/input_tokens_details/cached_tokens") {
                self.common.summary.prompt_cache = Some(PromptCacheUsage { cached_tokens });
            }
        }
        if let Some(wire) = self.wire() {
            for (key, value) in fields {
                wire.insert(key.into(), value);
            }
        }
        if last {
            let output = response.get("output").and_then(Value::as_array);
            for (position, item) in output.into_iter().flatten().enumerate() {
                let seen = self.items.get(position).is_some_and(|it| it.done)
                    || str_of(item, "id")
                        .is_some_and(|id| self.items.iter().any(|it| it.done && it.id == id));
                if !seen {
                    self.done_item(Some(position as u64), item, out)?;
                }
            }
        }
        Ok(())
    }

    /// The stream's end: the finish reason is the status, or the reason it is incomplete.
    fn end(&mut self, response: &Value) {
        let status = str_of(response, "status").unwrap_or("completed");
        let reason = if status == "incomplete" {
            response
                .pointer("/incomplete_details/reason")
                .and_then(Value::as_str)
                .unwrap_or("incomplete")
        } else {
            status
        };
        self.common.summary.finish_reason = Some(reason.to_owned());
        self.common.summary.saw_done = true;
    }
}

/// Item `at`'s entry in a `wire` object.
fn wire_entry(wire: &mut Option<Value>, at: usize) -> Option<&mut Map<String, Value>> {
    wire.as_mut()?
        .get_mut("items")
        .and_then(Value::as_array_mut)
        .and_then(|items| items.get_mut(at))
        .and_then(Value::as_object_mut)
}

/// `entry[key]`, the JSON list of `counts`, made (for a list not empty) and grown to its
/// length with the new counts: a list only ever grows by the parts an event adds, so this
/// pushes what is new and copies nothing already there. `None` for empty `counts` (an empty
/// list is left out of `wire`, and a list written before is left as it is).
fn counts_list<'e>(
    entry: &'e mut Map<String, Value>,
    key: &str,
    counts: &[u64],
) -> Option<&'e mut Vec<Value>> {
    if counts.is_empty() {
        return None;
    }
    let slot = entry.entry(key).or_insert_with(|| Value::Array(Vec::new()));
    if !slot.is_array() {
        *slot = Value::Array(Vec::new());
    }
    let list = slot.as_array_mut()?;
    for &n in counts.iter().skip(list.len()) {
        list.push(n.into());
    }
    Some(list)
}

fn str_of<'v>(value: &'v Value, key: &str) -> Option<&'v str> {
    value.get(key).and_then(Value::as_str)
}

/// A delta's text, `None` for an empty or absent one (an empty delta yields no block).
fn delta_text(wire: &WireEvent<'_>) -> Option<String> {
    match &wire.delta {
        Some(Value::String(text)) if !text.is_empty() => Some(text.clone()),
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod tests;
