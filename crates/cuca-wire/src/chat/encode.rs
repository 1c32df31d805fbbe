//! A recorded answer as Chat Completions sends it: an SSE stream of `chat.completion.chunk`s
//! or one `chat.completion` object, the same bytes every time (no clock, no random id).

use bytes::Bytes;
use cuca_events::MessageContentBlock;
use serde_json::{json, Value};

use crate::encode::piece;
use crate::{RecordedAnswer, WireRequest};

/// Chat's finish reason for a recorded one: Chat's own words as they are, another format's
/// mapped (`end_turn` → `stop`, `max_tokens` → `length`, `tool_use` → `tool_calls`), and a
/// turn that never said one `tool_calls` when it called a tool, else `stop`.
pub fn finish_reason(recorded: Option<&str>, has_tool_calls: bool) -> String {
    match recorded {
        Some("end_turn" | "stop_sequence" | "completed") => "stop".to_owned(),
        Some("max_tokens" | "max_output_tokens") => "length".to_owned(),
        Some("tool_use") => "tool_calls".to_owned(),
        Some("refusal") => "content_filter".to_owned(),
        Some(reason) => reason.to_owned(),
        None if has_tool_calls => "tool_calls".to_owned(),
        None => "stop".to_owned(),
    }
}

fn has_tool_calls(blocks: &[MessageContentBlock]) -> bool {
    blocks
        .iter()
        .any(|b| matches!(b, MessageContentBlock::ToolCall { .. }))
}

fn usage<B>(answer: &RecordedAnswer<B>) -> Value {
    json!({
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens,
        "total_tokens": answer.prompt_tokens + answer.completion_tokens,
    })
}

/// The answer as an SSE stream, built one event at a time as it is polled: a role chunk, one
/// chunk per block, the finish chunk, the usage chunk when the request asked for one
/// (`stream_options.include_usage`), and `[DONE]`.
pub fn encode_stream<B>(answer: RecordedAnswer<B>, request: &WireRequest) -> SseEvents<B>
where
    B: AsRef<[MessageContentBlock]>,
{
    let finish = finish_reason(
        answer.finish_reason.as_deref(),
        has_tool_calls(answer.blocks.as_ref()),
    );
    let usage = request.include_usage.then(|| usage(&answer));
    SseEvents {
        id: format!("chatcmpl-{}", answer.id),
        model: answer.model,
        finish,
        usage,
        stage: Stage::Role,
        next_block: 0,
        offset: 0,
        n_tool_calls: 0,
        blocks: answer.blocks,
    }
}

/// The answer as one `chat.completion` object, usage included.
pub fn encode_object<B>(answer: &RecordedAnswer<B>, _request: &WireRequest) -> Value
where
    B: AsRef<[MessageContentBlock]>,
{
    let blocks = answer.blocks.as_ref();
    let finish = finish_reason(answer.finish_reason.as_deref(), has_tool_calls(blocks));
    completion_object(
        blocks,
        &format!("chatcmpl-{}", answer.id),
        &answer.model,
        &finish,
        usage(answer),
    )
}

fn chunk(id: &str, model: &str, delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": id,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    })
}

fn event(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

/// Where an [`SseEvents`] is in the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Role,
    Blocks,
    Finish,
    Usage,
    Done,
    End,
}

/// The replayed stream, built one event at a time as the body is polled: one event per
/// recorded block (a long text in pieces of [`MAX_EVENT_TEXT`](crate::MAX_EVENT_TEXT)) — reasoning as
/// `reasoning_content`, text as `content`, each tool call whole in one `tool_calls` delta —
/// then the finish reason, the usage chunk when asked for, and `[DONE]`. Lazily, so a stream
/// holds its turn (whose blocks every caller of the session shares) and one event, never the
/// whole answer rendered.
pub struct SseEvents<B> {
    blocks: B,
    id: String,
    model: String,
    finish: String,
    usage: Option<Value>,
    stage: Stage,
    next_block: usize,
    /// Bytes of the current block's text already sent.
    offset: usize,
    n_tool_calls: usize,
}

impl<B: AsRef<[MessageContentBlock]>> SseEvents<B> {
    fn event(&self, delta: Value, finish: Option<&str>) -> Bytes {
        event(&chunk(&self.id, &self.model, delta, finish))
    }

    fn next_block_event(&mut self) -> Option<Bytes> {
        while let Some(block) = self.blocks.as_ref().get(self.next_block) {
            let (delta, done) = match block {
                MessageContentBlock::Thinking { thinking } => {
                    let (piece, last) = piece(thinking, self.offset);
                    let n = piece.len();
                    let delta = json!({"reasoning_content": piece});
                    self.offset += n;
                    (delta, last)
                }
                MessageContentBlock::Text { text } => {
                    let (piece, last) = piece(text, self.offset);
                    let n = piece.len();
                    let delta = json!({"content": piece});
                    self.offset += n;
                    (delta, last)
                }
                MessageContentBlock::ToolCall {
                    id,
                    name,
                    arguments,
                } => {
                    self.n_tool_calls += 1;
                    let delta = json!({"tool_calls": [{
                        "index": self.n_tool_calls - 1,
                        "id": id,
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }]});
                    (delta, true)
                }
                // A provider never streams a tool result or an image.
                _ => {
                    self.next_block += 1;
                    continue;
                }
            };
            if done {
                self.next_block += 1;
                self.offset = 0;
            }
            return Some(self.event(delta, None));
        }
        None
    }
}

impl<B: AsRef<[MessageContentBlock]>> Iterator for SseEvents<B> {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        loop {
            match self.stage {
                Stage::Role => {
                    self.stage = Stage::Blocks;
                    return Some(self.event(json!({"role": "assistant", "content": null}), None));
                }
                Stage::Blocks => match self.next_block_event() {
                    Some(event) => return Some(event),
                    None => self.stage = Stage::Finish,
                },
                Stage::Finish => {
                    self.stage = Stage::Usage;
                    return Some(self.event(json!({}), Some(&self.finish.clone())));
                }
                Stage::Usage => {
                    self.stage = Stage::Done;
                    if let Some(usage) = self.usage.take() {
                        return Some(event(&json!({
                            "id": self.id,
                            "object": "chat.completion.chunk",
                            "created": 0,
                            "model": self.model,
                            "choices": [],
                            "usage": usage,
                        })));
                    }
                }
                Stage::Done => {
                    self.stage = Stage::End;
                    return Some(Bytes::from_static(b"data: [DONE]\n\n"));
                }
                Stage::End => return None,
            }
        }
    }
}

fn completion_object(
    blocks: &[MessageContentBlock],
    id: &str,
    model: &str,
    finish: &str,
    usage: Value,
) -> Value {
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut tool_calls = Vec::new();
    for block in blocks {
        match block {
            MessageContentBlock::Text { text: t } => text.push_str(t),
            MessageContentBlock::Thinking { thinking } => reasoning.push_str(thinking),
            MessageContentBlock::ToolCall {
                id,
                name,
                arguments,
            } => tool_calls.push(json!({
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            })),
            _ => {}
        }
    }
    let mut message = json!({"role": "assistant", "content": text});
    if text.is_empty() && !tool_calls.is_empty() {
        message["content"] = Value::Null;
    }
    if !reasoning.is_empty() {
        message["reasoning_content"] = Value::String(reasoning);
    }
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls);
    }
    json!({
        "id": id,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    })
}
