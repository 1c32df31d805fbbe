//! A recorded answer as the Responses API sends it: OpenAI's event stream or one `response`
//! object, in OpenAI's exact shapes, the same bytes every time (no clock, no random id).
//!
//! With a Responses `wire` the answer is laid out as recorded: its response id, `created_at`,
//! usage, and items (ids, the blocks of each, parts, `encrypted_content`, annotations, items
//! cuca does not know verbatim). Without one (an answer recorded in another format, or a
//! `wire` whose counts do not fit the blocks), consecutive Text blocks make one message item,
//! consecutive Thinking blocks one reasoning item (as `reasoning_text` content, which is what
//! a recorded reasoning stream is), each ToolCall a `function_call` item, with ids made from
//! the answer's id: `resp_{id}`, `msg_{id}_{n}`, `rs_{id}_{n}`, `fc_{id}_{n}` (`n`: the
//! output index).

use bytes::Bytes;
use cuca_events::{MessageContentBlock, ToolChoice};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

use super::WIRE_FORMAT;
use crate::encode::piece;
use crate::{RecordedAnswer, WireRequest};

/// The answer as a Responses event stream, built one event at a time as it is polled:
/// `response.created`, `response.in_progress`, each item's `response.output_item.added`,
/// its parts and deltas and their `…done` events, `response.output_item.done`, then
/// `response.completed` (or `response.incomplete`) with the whole response object.
pub fn encode_stream<B>(answer: RecordedAnswer<B>, request: &WireRequest) -> ResponsesEvents<B>
where
    B: AsRef<[MessageContentBlock]>,
{
    let plan = Plan::new(&answer, request);
    ResponsesEvents {
        blocks: answer.blocks,
        plan,
        sequence: 0,
        stage: Stage::Created,
    }
}

/// The answer as one `response` object, as a non-streamed `POST /v1/responses` returns it.
pub fn encode_object<B>(answer: &RecordedAnswer<B>, request: &WireRequest) -> Value
where
    B: AsRef<[MessageContentBlock]>,
{
    let plan = Plan::new(answer, request);
    plan.response(answer.blocks.as_ref(), Lifecycle::Final)
}

/// What one part of an item holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PartKind {
    OutputText,
    Refusal,
    Summary,
    ReasoningText,
}

impl PartKind {
    fn takes(self, block: &MessageContentBlock) -> Option<&str> {
        match (self, block) {
            (PartKind::OutputText | PartKind::Refusal, MessageContentBlock::Text { text }) => {
                Some(text)
            }
            (
                PartKind::Summary | PartKind::ReasoningText,
                MessageContentBlock::Thinking { thinking },
            ) => Some(thinking),
            _ => None,
        }
    }
}

/// One part: its blocks are those of its kind in `start..end`.
#[derive(Debug, Clone)]
struct Part {
    kind: PartKind,
    /// Its `content_index` or `summary_index`.
    index: usize,
    start: usize,
    end: usize,
    annotations: Option<Value>,
    logprobs: Option<Value>,
}

impl Part {
    /// A part with no blocks placed yet.
    fn new(kind: PartKind, index: usize) -> Part {
        Part {
            kind,
            index,
            start: 0,
            end: 0,
            annotations: None,
            logprobs: None,
        }
    }
}

#[derive(Debug, Clone)]
enum ItemKind {
    Message {
        parts: Vec<Part>,
        phase: Option<Value>,
    },
    Reasoning {
        parts: Vec<Part>,
        encrypted_content: Option<Value>,
    },
    Call {
        block: usize,
    },
    Raw(Value),
}

#[derive(Debug, Clone)]
struct Item {
    id: String,
    /// The item's status when done (`"completed"` unless recorded otherwise).
    status: Option<String>,
    kind: ItemKind,
}

impl Item {
    fn parts(&self) -> &[Part] {
        match &self.kind {
            ItemKind::Message { parts, .. } | ItemKind::Reasoning { parts, .. } => parts,
            _ => &[],
        }
    }
}

/// Which `response` object an event carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lifecycle {
    InProgress,
    Final,
}

/// Everything the encoder decided before the first event: the response's fields and its
/// items as ranges of the recorded blocks.
#[derive(Debug, Clone)]
struct Plan {
    id: String,
    created_at: Value,
    completed_at: Option<Value>,
    model: String,
    status: &'static str,
    incomplete_reason: Option<Value>,
    usage: Value,
    /// The request's fields a response echoes (`tools`, `tool_choice`, `temperature`, …).
    echo: Map<String, Value>,
    items: Vec<Item>,
}

/// The answer blocks a format streams (a tool result or an image is never an answer's).
fn is_answer(block: &MessageContentBlock) -> bool {
    matches!(
        block,
        MessageContentBlock::Text { .. }
            | MessageContentBlock::Thinking { .. }
            | MessageContentBlock::ToolCall { .. }
    )
}

/// Where the answer stands for Responses: `status` and, when incomplete, the reason.
fn outcome(recorded: Option<&str>) -> (&'static str, Option<Value>) {
    match recorded {
        Some("length" | "max_output_tokens" | "max_tokens") => {
            ("incomplete", Some("max_output_tokens".into()))
        }
        Some("content_filter" | "refusal") => ("incomplete", Some("content_filter".into())),
        Some("incomplete") => ("incomplete", Some(Value::Null)),
        _ => ("completed", None),
    }
}

/// The request fields a `response` object echoes, with OpenAI's defaults for the ones the
/// request did not send.
fn echo(request: &WireRequest) -> Map<String, Value> {
    let sent: BTreeMap<String, Box<RawValue>> =
        serde_json::from_str(&request.parameters).unwrap_or_default();
    let sent = |key: &str| {
        sent.get(key)
            .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
    };
    let mut echo = Map::new();
    for (key, default) in [
        ("background", json!(false)),
        ("max_output_tokens", Value::Null),
        ("max_tool_calls", Value::Null),
        ("metadata", json!({})),
        ("parallel_tool_calls", json!(true)),
        ("prompt_cache_key", Value::Null),
        ("reasoning", json!({"effort": null, "summary": null})),
        ("safety_identifier", Value::Null),
        ("service_tier", json!("default")),
        ("store", json!(true)),
        ("temperature", json!(1.0)),
        (
            "text",
            json!({"format": {"type": "text"}, "verbosity": "medium"}),
        ),
        ("top_logprobs", json!(0)),
        ("top_p", json!(1.0)),
        ("truncation", json!("disabled")),
        ("user", Value::Null),
    ] {
        echo.insert(key.into(), sent(key).unwrap_or(default));
    }
    let choice = sent("tool_choice").unwrap_or_else(|| match &request.unified.tool_choice {
        None | Some(ToolChoice::Auto) => json!("auto"),
        Some(ToolChoice::None) => json!("none"),
        Some(ToolChoice::Required) => json!("required"),
        Some(ToolChoice::Named(name)) => json!({"type": "function", "name": name}),
    });
    echo.insert("tool_choice".into(), choice);
    let tools = request
        .unified
        .tools
        .iter()
        .map(|tool| {
            // A hosted tool was read with the whole tool as its parameters (its `type` names
            // it); a function tool's parameters are a JSON Schema.
            let hosted = tool
                .parameters
                .get("type")
                .and_then(Value::as_str)
                .is_some_and(|kind| kind != "object" && kind != "function")
                && tool.parameters.get("properties").is_none();
            if hosted {
                tool.parameters.clone()
            } else {
                json!({
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                    "strict": false,
                })
            }
        })
        .collect();
    echo.insert("tools".into(), Value::Array(tools));
    echo.insert(
        "previous_response_id".into(),
        request
            .previous_response_id
            .as_ref()
            .map_or(Value::Null, |id| id.as_str().into()),
    );
    echo
}

/// The usage object: the recorded one verbatim (what the recorded server sent, which its
/// client took), else OpenAI's full shape made from the recorded counts.
fn usage(recorded: Option<&Value>, prompt_tokens: u64, completion_tokens: u64) -> Value {
    match recorded {
        Some(usage @ Value::Object(_)) => usage.clone(),
        _ => json!({
            "input_tokens": prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt_tokens + completion_tokens,
        }),
    }
}

impl Plan {
    fn new<B: AsRef<[MessageContentBlock]>>(
        answer: &RecordedAnswer<B>,
        request: &WireRequest,
    ) -> Plan {
        let blocks = answer.blocks.as_ref();
        let wire = answer
            .wire
            .as_ref()
            .filter(|w| w.get("format").and_then(Value::as_str) == Some(WIRE_FORMAT));
        let field = |key: &str| wire.and_then(|w| w.get(key)).filter(|v| !v.is_null());
        let (status, incomplete_reason) = outcome(answer.finish_reason.as_deref());
        let items = wire
            .and_then(|w| w.get("items"))
            .and_then(Value::as_array)
            .and_then(|items| recorded_items(items, blocks, &answer.id))
            .unwrap_or_else(|| grouped_items(blocks, &answer.id));
        Plan {
            id: field("id")
                .and_then(Value::as_str)
                .map_or_else(|| format!("resp_{}", answer.id), str::to_owned),
            created_at: field("created_at").cloned().unwrap_or(json!(0)),
            completed_at: field("completed_at").cloned(),
            model: answer.model.clone(),
            status,
            incomplete_reason,
            usage: usage(
                field("usage"),
                answer.prompt_tokens,
                answer.completion_tokens,
            ),
            echo: echo(request),
            items,
        }
    }

    /// The text of a part: its blocks, joined.
    fn text(blocks: &[MessageContentBlock], part: &Part) -> String {
        blocks
            .get(part.start..part.end)
            .unwrap_or_default()
            .iter()
            .filter_map(|b| part.kind.takes(b))
            .collect()
    }

    fn part_object(blocks: &[MessageContentBlock], part: &Part, done: bool) -> Value {
        // A part as added is empty: its text, annotations and logprobs arrive after it.
        let (text, annotations, logprobs) = if done {
            (
                Self::text(blocks, part),
                part.annotations.clone(),
                part.logprobs.clone(),
            )
        } else {
            (String::new(), None, None)
        };
        match part.kind {
            PartKind::OutputText => json!({
                "type": "output_text",
                "annotations": annotations.unwrap_or(json!([])),
                "logprobs": logprobs.unwrap_or(json!([])),
                "text": text,
            }),
            PartKind::Refusal => json!({"type": "refusal", "refusal": text}),
            PartKind::Summary => json!({"type": "summary_text", "text": text}),
            PartKind::ReasoningText => json!({"type": "reasoning_text", "text": text}),
        }
    }

    /// Item `at` as `output_item.added` (not done: empty) or `.done` and the final output
    /// show it.
    fn item_object(&self, blocks: &[MessageContentBlock], at: usize, done: bool) -> Value {
        let item = &self.items[at];
        let status = if done {
            item.status.as_deref().unwrap_or("completed")
        } else {
            "in_progress"
        };
        match &item.kind {
            ItemKind::Message { parts, phase } => {
                let content: Vec<Value> = if done {
                    parts
                        .iter()
                        .map(|p| Self::part_object(blocks, p, true))
                        .collect()
                } else {
                    Vec::new()
                };
                let mut object = json!({
                    "id": item.id,
                    "type": "message",
                    "status": status,
                    "content": content,
                    "role": "assistant",
                });
                if let Some(phase) = phase {
                    object["phase"] = phase.clone();
                }
                object
            }
            ItemKind::Reasoning {
                parts,
                encrypted_content,
            } => {
                let of = |kind: PartKind| -> Vec<Value> {
                    if !done {
                        return Vec::new();
                    }
                    parts
                        .iter()
                        .filter(|p| p.kind == kind)
                        .map(|p| Self::part_object(blocks, p, true))
                        .collect()
                };
                let mut object = json!({
                    "id": item.id,
                    "type": "reasoning",
                    "summary": of(PartKind::Summary),
                });
                if parts.iter().any(|p| p.kind == PartKind::ReasoningText) {
                    object["content"] = Value::Array(of(PartKind::ReasoningText));
                }
                if let (true, Some(encrypted)) = (done, encrypted_content) {
                    object["encrypted_content"] = encrypted.clone();
                }
                if let (true, Some(status)) = (done, &item.status) {
                    object["status"] = status.as_str().into();
                }
                object
            }
            ItemKind::Call { block } => {
                let (call_id, name, arguments) = match blocks.get(*block) {
                    Some(MessageContentBlock::ToolCall {
                        id,
                        name,
                        arguments,
                    }) => (id.as_str(), name.as_str(), arguments.as_str()),
                    _ => ("", "", ""),
                };
                json!({
                    "id": item.id,
                    "type": "function_call",
                    "status": status,
                    "arguments": if done { arguments } else { "" },
                    "call_id": call_id,
                    "name": name,
                })
            }
            ItemKind::Raw(raw) => {
                let mut raw = raw.clone();
                if let (false, Some(s)) = (done, raw.get_mut("status")) {
                    *s = status.into();
                }
                raw
            }
        }
    }

    /// The `response` object: in progress (no output, no usage) or final.
    fn response(&self, blocks: &[MessageContentBlock], lifecycle: Lifecycle) -> Value {
        let last = lifecycle == Lifecycle::Final;
        let mut object = Map::new();
        object.insert("id".into(), self.id.as_str().into());
        object.insert("object".into(), "response".into());
        object.insert("created_at".into(), self.created_at.clone());
        object.insert(
            "status".into(),
            if last { self.status } else { "in_progress" }.into(),
        );
        object.insert("error".into(), Value::Null);
        object.insert(
            "incomplete_details".into(),
            match (&self.incomplete_reason, last) {
                (Some(reason), true) => json!({"reason": reason}),
                _ => Value::Null,
            },
        );
        object.insert("instructions".into(), Value::Null);
        object.insert("model".into(), self.model.as_str().into());
        let output = if last {
            (0..self.items.len())
                .map(|at| self.item_object(blocks, at, true))
                .collect()
        } else {
            Vec::new()
        };
        object.insert("output".into(), Value::Array(output));
        object.insert(
            "usage".into(),
            if last {
                self.usage.clone()
            } else {
                Value::Null
            },
        );
        if let (true, Some(completed_at)) = (last, &self.completed_at) {
            object.insert("completed_at".into(), completed_at.clone());
        }
        object.extend(self.echo.iter().map(|(k, v)| (k.clone(), v.clone())));
        Value::Object(object)
    }
}

/// The items as the recording laid them out, or `None` when the layout does not fit the
/// blocks (then the encoder groups them itself).
fn recorded_items(
    wire: &[Value],
    blocks: &[MessageContentBlock],
    answer_id: &str,
) -> Option<Vec<Item>> {
    // The answer blocks' indices, in order: `records` counts only those.
    let answer: Vec<usize> = (0..blocks.len())
        .filter(|&i| is_answer(&blocks[i]))
        .collect();
    let mut next: usize = 0;
    let mut items = Vec::with_capacity(wire.len());
    for (at, entry) in wire.iter().enumerate() {
        let kind = entry.get("type").and_then(Value::as_str)?;
        let records =
            usize::try_from(entry.get("records").and_then(Value::as_u64).unwrap_or(0)).ok()?;
        let taken = answer.get(next..next.checked_add(records)?)?;
        next += records;
        // The block range of `n` answer blocks from `from` in `taken`.
        let range = |from: usize, n: usize| -> Option<(usize, usize)> {
            let run = taken.get(from..from.checked_add(n)?)?;
            let start = run
                .first()
                .copied()
                .or_else(|| taken.get(from).copied())
                .unwrap_or(taken.last().map_or(0, |l| l + 1));
            Some((start, run.last().map_or(start, |l| l + 1)))
        };
        let all = |pred: fn(&MessageContentBlock) -> bool| taken.iter().all(|&i| pred(&blocks[i]));
        let counts = |key: &str| -> Option<Vec<usize>> {
            entry
                .get(key)
                .and_then(Value::as_array)?
                .iter()
                .map(|n| n.as_u64().and_then(|n| usize::try_from(n).ok()))
                .collect()
        };
        // Parts of `n` blocks each, placed over the item's blocks in order; all of them.
        let placed = |layout: Vec<(Part, usize)>| -> Option<Vec<Part>> {
            let mut from = 0;
            let mut parts = Vec::with_capacity(layout.len());
            for (mut part, n) in layout {
                (part.start, part.end) = range(from, n)?;
                from += n;
                parts.push(part);
            }
            (from == records).then_some(parts)
        };
        let id = entry.get("id").and_then(Value::as_str).map(str::to_owned);
        let status = entry
            .get("status")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let (item_kind, prefix) = match kind {
            "message" => {
                if !all(|b| matches!(b, MessageContentBlock::Text { .. })) {
                    return None;
                }
                let layout: Vec<(Part, usize)> = match entry.get("parts").and_then(Value::as_array)
                {
                    Some(parts) => parts
                        .iter()
                        .enumerate()
                        .map(|(index, p)| {
                            let kind = match p.get("type").and_then(Value::as_str) {
                                Some("refusal") => PartKind::Refusal,
                                _ => PartKind::OutputText,
                            };
                            let n = usize::try_from(p.get("records")?.as_u64()?).ok()?;
                            let mut part = Part::new(kind, index);
                            part.annotations = p.get("annotations").cloned();
                            part.logprobs = p.get("logprobs").cloned();
                            Some((part, n))
                        })
                        .collect::<Option<_>>()?,
                    None => vec![(Part::new(PartKind::OutputText, 0), records)],
                };
                let parts = placed(layout)?;
                (
                    ItemKind::Message {
                        parts,
                        phase: entry.get("phase").cloned(),
                    },
                    "msg",
                )
            }
            "reasoning" => {
                if !all(|b| matches!(b, MessageContentBlock::Thinking { .. })) {
                    return None;
                }
                let summary = counts("summary_records");
                let content = counts("content_records");
                // A reasoning stream cut before its parts were told is raw reasoning text.
                let content = match (&summary, content) {
                    (None, None) if records > 0 => Some(vec![records]),
                    (_, content) => content,
                };
                let layout = [
                    (PartKind::Summary, summary),
                    (PartKind::ReasoningText, content),
                ]
                .into_iter()
                .flat_map(|(kind, list)| {
                    let list = list.unwrap_or_default().into_iter().enumerate();
                    list.map(move |(index, n)| (Part::new(kind, index), n))
                })
                .collect();
                let parts = placed(layout)?;
                (
                    ItemKind::Reasoning {
                        parts,
                        encrypted_content: entry.get("encrypted_content").cloned(),
                    },
                    "rs",
                )
            }
            "function_call" => {
                if records != 1 || !all(|b| matches!(b, MessageContentBlock::ToolCall { .. })) {
                    return None;
                }
                (ItemKind::Call { block: taken[0] }, "fc")
            }
            _ => {
                if records != 0 {
                    return None;
                }
                (ItemKind::Raw(entry.get("raw")?.clone()), "item")
            }
        };
        items.push(Item {
            id: id.unwrap_or_else(|| format!("{prefix}_{answer_id}_{at}")),
            status,
            kind: item_kind,
        });
    }
    (next == answer.len()).then_some(items)
}

/// The blocks grouped as a provider would stream them: a run of Text one message, a run of
/// Thinking one reasoning item, each ToolCall its own `function_call`.
fn grouped_items(blocks: &[MessageContentBlock], answer_id: &str) -> Vec<Item> {
    let mut items: Vec<Item> = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        let kind = match block {
            MessageContentBlock::Text { .. } => PartKind::OutputText,
            MessageContentBlock::Thinking { .. } => PartKind::ReasoningText,
            MessageContentBlock::ToolCall { .. } => {
                let at = items.len();
                items.push(Item {
                    id: format!("fc_{answer_id}_{at}"),
                    status: None,
                    kind: ItemKind::Call { block: i },
                });
                continue;
            }
            _ => continue,
        };
        if let Some(last) = items.last_mut() {
            if let ItemKind::Message { parts, .. } | ItemKind::Reasoning { parts, .. } =
                &mut last.kind
            {
                if let Some(part) = parts.last_mut().filter(|p| p.kind == kind) {
                    part.end = i + 1;
                    continue;
                }
            }
        }
        let at = items.len();
        let mut part = Part::new(kind, 0);
        (part.start, part.end) = (i, i + 1);
        items.push(if kind == PartKind::OutputText {
            Item {
                id: format!("msg_{answer_id}_{at}"),
                status: None,
                kind: ItemKind::Message {
                    parts: vec![part],
                    phase: None,
                },
            }
        } else {
            Item {
                id: format!("rs_{answer_id}_{at}"),
                status: None,
                kind: ItemKind::Reasoning {
                    parts: vec![part],
                    encrypted_content: None,
                },
            }
        });
    }
    items
}

/// Where a [`ResponsesEvents`] is within an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Added,
    PartAdded(usize),
    /// Part `part`'s deltas, at block `block`, `offset` bytes into its text.
    Delta {
        part: usize,
        block: usize,
        offset: usize,
    },
    PartTextDone(usize),
    PartDone(usize),
    ArgsDelta(usize),
    ArgsDone,
    ItemDone,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Created,
    InProgress,
    Item(usize, Step),
    Final,
    End,
}

/// The replayed stream, built one event at a time as the body is polled, holding the
/// answer's blocks (shared by every caller of the session) and one event, never the whole
/// answer rendered; a text longer than [`MAX_EVENT_TEXT`](crate::MAX_EVENT_TEXT) goes out in several deltas.
pub struct ResponsesEvents<B> {
    blocks: B,
    plan: Plan,
    sequence: u64,
    stage: Stage,
}

/// One event, `type` and the next `sequence_number` set: `event: TYPE\ndata: JSON\n\n`.
fn emit(sequence: &mut u64, kind: &str, mut data: Value) -> Bytes {
    data["type"] = kind.into();
    data["sequence_number"] = (*sequence).into();
    *sequence += 1;
    Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))
}

impl<B: AsRef<[MessageContentBlock]>> ResponsesEvents<B> {
    /// The fields every event about part `p` of item `at` carries.
    fn part_fields(&self, at: usize, p: &Part) -> Value {
        let mut fields = json!({"item_id": self.plan.items[at].id, "output_index": at});
        if p.kind == PartKind::Summary {
            fields["summary_index"] = p.index.into();
        } else {
            fields["content_index"] = p.index.into();
        }
        fields
    }

    /// The next event of item `at` at `step`, and the step after it; `None`: the item is over.
    fn item_event(&mut self, at: usize, step: Step) -> (Option<Bytes>, Option<Step>) {
        let blocks = self.blocks.as_ref();
        let item = &self.plan.items[at];
        let parts = item.parts();
        let first_part = || {
            if parts.is_empty() {
                Step::ItemDone
            } else {
                Step::PartAdded(0)
            }
        };
        match step {
            Step::Added => {
                let object = self.plan.item_object(blocks, at, false);
                let next = match item.kind {
                    ItemKind::Call { .. } => Step::ArgsDelta(0),
                    ItemKind::Raw(_) => Step::ItemDone,
                    _ => first_part(),
                };
                let event = emit(
                    &mut self.sequence,
                    "response.output_item.added",
                    json!({"output_index": at, "item": object}),
                );
                (Some(event), Some(next))
            }
            Step::PartAdded(p) => {
                let part = parts[p].clone();
                let mut data = self.part_fields(at, &part);
                data["part"] = Plan::part_object(blocks, &part, false);
                let kind = if part.kind == PartKind::Summary {
                    "response.reasoning_summary_part.added"
                } else {
                    "response.content_part.added"
                };
                let next = Step::Delta {
                    part: p,
                    block: part.start,
                    offset: 0,
                };
                (Some(emit(&mut self.sequence, kind, data)), Some(next))
            }
            Step::Delta {
                part: p,
                block,
                offset,
            } => {
                let part = parts[p].clone();
                let found = (block..part.end).find_map(|i| {
                    let text = part.kind.takes(blocks.get(i)?)?;
                    (!text.is_empty() && (i > block || offset < text.len())).then_some((i, text))
                });
                let Some((i, text)) = found else {
                    return (None, Some(Step::PartTextDone(p)));
                };
                let from = if i == block { offset } else { 0 };
                let (delta, last) = piece(text, from);
                let next = if last {
                    Step::Delta {
                        part: p,
                        block: i + 1,
                        offset: 0,
                    }
                } else {
                    Step::Delta {
                        part: p,
                        block: i,
                        offset: from + delta.len(),
                    }
                };
                let mut data = self.part_fields(at, &part);
                data["delta"] = delta.into();
                let kind = match part.kind {
                    PartKind::OutputText => {
                        data["logprobs"] = json!([]);
                        "response.output_text.delta"
                    }
                    PartKind::Refusal => "response.refusal.delta",
                    PartKind::Summary => "response.reasoning_summary_text.delta",
                    PartKind::ReasoningText => "response.reasoning_text.delta",
                };
                (Some(emit(&mut self.sequence, kind, data)), Some(next))
            }
            Step::PartTextDone(p) => {
                let part = parts[p].clone();
                let text = Plan::text(blocks, &part);
                let mut data = self.part_fields(at, &part);
                let kind = match part.kind {
                    PartKind::OutputText => {
                        data["logprobs"] = part.logprobs.clone().unwrap_or(json!([]));
                        data["text"] = text.into();
                        "response.output_text.done"
                    }
                    PartKind::Refusal => {
                        data["refusal"] = text.into();
                        "response.refusal.done"
                    }
                    PartKind::Summary => {
                        data["text"] = text.into();
                        "response.reasoning_summary_text.done"
                    }
                    PartKind::ReasoningText => {
                        data["text"] = text.into();
                        "response.reasoning_text.done"
                    }
                };
                (
                    Some(emit(&mut self.sequence, kind, data)),
                    Some(Step::PartDone(p)),
                )
            }
            Step::PartDone(p) => {
                let part = parts[p].clone();
                let next = if p + 1 < parts.len() {
                    Step::PartAdded(p + 1)
                } else {
                    Step::ItemDone
                };
                let mut data = self.part_fields(at, &part);
                data["part"] = Plan::part_object(blocks, &part, true);
                let kind = if part.kind == PartKind::Summary {
                    "response.reasoning_summary_part.done"
                } else {
                    "response.content_part.done"
                };
                (Some(emit(&mut self.sequence, kind, data)), Some(next))
            }
            Step::ArgsDelta(offset) => {
                let arguments = match item.kind {
                    ItemKind::Call { block } => match blocks.get(block) {
                        Some(MessageContentBlock::ToolCall { arguments, .. }) => arguments.as_str(),
                        _ => "",
                    },
                    _ => "",
                };
                if offset >= arguments.len() {
                    return (None, Some(Step::ArgsDone));
                }
                let (delta, last) = piece(arguments, offset);
                let next = if last {
                    Step::ArgsDone
                } else {
                    Step::ArgsDelta(offset + delta.len())
                };
                let data = json!({"item_id": item.id, "output_index": at, "delta": delta});
                (
                    Some(emit(
                        &mut self.sequence,
                        "response.function_call_arguments.delta",
                        data,
                    )),
                    Some(next),
                )
            }
            Step::ArgsDone => {
                let object = self.plan.item_object(blocks, at, true);
                let data = json!({
                    "item_id": item.id,
                    "output_index": at,
                    "name": object.get("name").cloned().unwrap_or(Value::Null),
                    "arguments": object.get("arguments").cloned().unwrap_or(json!("")),
                });
                (
                    Some(emit(
                        &mut self.sequence,
                        "response.function_call_arguments.done",
                        data,
                    )),
                    Some(Step::ItemDone),
                )
            }
            Step::ItemDone => {
                let object = self.plan.item_object(blocks, at, true);
                let data = json!({"output_index": at, "item": object});
                (
                    Some(emit(&mut self.sequence, "response.output_item.done", data)),
                    None,
                )
            }
        }
    }
}

impl<B: AsRef<[MessageContentBlock]>> Iterator for ResponsesEvents<B> {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        loop {
            match self.stage {
                Stage::Created => {
                    self.stage = Stage::InProgress;
                    let response = self
                        .plan
                        .response(self.blocks.as_ref(), Lifecycle::InProgress);
                    return Some(emit(
                        &mut self.sequence,
                        "response.created",
                        json!({"response": response}),
                    ));
                }
                Stage::InProgress => {
                    self.stage = if self.plan.items.is_empty() {
                        Stage::Final
                    } else {
                        Stage::Item(0, Step::Added)
                    };
                    let response = self
                        .plan
                        .response(self.blocks.as_ref(), Lifecycle::InProgress);
                    return Some(emit(
                        &mut self.sequence,
                        "response.in_progress",
                        json!({"response": response}),
                    ));
                }
                Stage::Item(at, step) => {
                    let (event, next) = self.item_event(at, step);
                    self.stage = match next {
                        Some(step) => Stage::Item(at, step),
                        None if at + 1 < self.plan.items.len() => Stage::Item(at + 1, Step::Added),
                        None => Stage::Final,
                    };
                    if let Some(event) = event {
                        return Some(event);
                    }
                }
                Stage::Final => {
                    self.stage = Stage::End;
                    let response = self.plan.response(self.blocks.as_ref(), Lifecycle::Final);
                    let kind = if self.plan.status == "incomplete" {
                        "response.incomplete"
                    } else {
                        "response.completed"
                    };
                    return Some(emit(
                        &mut self.sequence,
                        kind,
                        json!({"response": response}),
                    ));
                }
                Stage::End => return None,
            }
        }
    }
}
