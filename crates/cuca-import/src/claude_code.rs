//! Claude Code's session transcripts (`~/.claude/projects/<dir>/<session>.jsonl`).

use cuca_events::{Message, MessageContentBlock, Role, SessionEvent};
use serde_json::{json, Value};

use crate::report::ImportReport;
use crate::translate::{parse_ts, str_at, u64_at, Emit, Out, Side, Translate};
use crate::usage::{Sent, TranscriptUsage};
use crate::writer::{Call, MESSAGES_WIRE};

/// Reads Claude Code lines.
pub(crate) struct ClaudeCode {
    /// True for a sub-agent's own file: every line is its session's, sidechain or not.
    pub(crate) subagent_file: bool,
    /// The file's session id (its name), for calls without a request id.
    pub(crate) file_session: String,
    last_ts: u64,
}

impl ClaudeCode {
    pub(crate) fn new(subagent_file: bool, file_session: String) -> Self {
        ClaudeCode {
            subagent_file,
            file_session,
            last_ts: 0,
        }
    }
}

/// The usage kinds of one `message.usage` object.
pub(crate) fn usage_of(usage: &Value) -> TranscriptUsage {
    let written = usage
        .get("cache_creation_input_tokens")
        .and_then(Value::as_u64);
    let split = usage.get("cache_creation");
    let w1h = split.map_or(0, |s| u64_at(s, "ephemeral_1h_input_tokens"));
    let w5m_said = split.map_or(0, |s| u64_at(s, "ephemeral_5m_input_tokens"));
    // The total is what is billed and what ccusage counts; the split says how much of it
    // was 1-hour. Without a total, the split's sum is the total; without a split, every
    // write was a 5-minute one (the API's default TTL).
    let total = written.unwrap_or(w5m_said + w1h);
    TranscriptUsage {
        input: u64_at(usage, "input_tokens"),
        output: u64_at(usage, "output_tokens"),
        cache_read: u64_at(usage, "cache_read_input_tokens"),
        cache_write_5m: total.saturating_sub(w1h),
        cache_write_1h: w1h.min(total),
        // Claude Code 2.1 writes the thinking part of the output beside it.
        reasoning: usage
            .get("output_tokens_details")
            .map_or(0, |d| u64_at(d, "thinking_tokens")),
    }
}

/// Which kinds one `message.usage` object wrote: every count is Anthropic's, `input_tokens`
/// excluding the cached prompt.
pub(crate) fn sent_of(usage: &Value) -> Sent {
    let has = |value: &Value, key: &str| value.get(key).is_some_and(Value::is_u64);
    let split = usage.get("cache_creation").is_some_and(|s| {
        has(s, "ephemeral_5m_input_tokens") || has(s, "ephemeral_1h_input_tokens")
    });
    Sent {
        input_includes_cache_read: false,
        input: has(usage, "input_tokens"),
        output: has(usage, "output_tokens"),
        cache_read: has(usage, "cache_read_input_tokens"),
        cache_write: has(usage, "cache_creation_input_tokens"),
        cache_split: split,
        reasoning: usage
            .get("output_tokens_details")
            .is_some_and(|d| has(d, "thinking_tokens")),
    }
}

/// The text of a `tool_result` block's content (a string, or text blocks).
fn result_text(content: &Value, report: &mut ImportReport) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => {
            let mut parts = Vec::new();
            for block in blocks {
                match str_at(block, "type") {
                    Some("text") => parts.push(str_at(block, "text").unwrap_or("").to_string()),
                    Some(other) => {
                        report.skip(format!("tool_result block:{other}"));
                        parts.push(format!("[{other}]"));
                    }
                    None => report.skip("tool_result block without a type"),
                }
            }
            parts.join("\n")
        }
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl Translate for ClaudeCode {
    fn line(
        &mut self,
        value: Value,
        report: &mut ImportReport,
        out: &mut Vec<Emit>,
    ) -> Result<(), String> {
        let Some(kind) = str_at(&value, "type") else {
            return Err("the line has no \"type\"".into());
        };
        let ts = match str_at(&value, "timestamp") {
            Some(text) => {
                parse_ts(text).ok_or_else(|| format!("timestamp {text:?} is not RFC 3339"))?
            }
            None if matches!(kind, "user" | "assistant") => {
                return Err(format!("a {kind} line without a \"timestamp\""))
            }
            None => self.last_ts,
        };
        self.last_ts = self.last_ts.max(ts);
        let side = if !self.subagent_file && value.get("isSidechain") == Some(&Value::Bool(true)) {
            Side::Sidechain
        } else {
            Side::Main
        };
        let mut emit = |out_: Out| {
            out.push(Emit {
                side,
                ts,
                out: out_,
            })
        };
        match kind {
            "user" => {
                let message = value
                    .get("message")
                    .ok_or("a user line without a \"message\"")?;
                let mut blocks = Vec::new();
                let mut results = Vec::new();
                match message.get("content") {
                    Some(Value::String(text)) => {
                        blocks.push(MessageContentBlock::text(text.clone()))
                    }
                    Some(Value::Array(items)) => {
                        for block in items {
                            match str_at(block, "type") {
                                Some("text") => blocks.push(MessageContentBlock::text(
                                    str_at(block, "text").unwrap_or(""),
                                )),
                                Some("image") => {
                                    let source = block.get("source").unwrap_or(&Value::Null);
                                    blocks.push(MessageContentBlock::ImageBase64 {
                                        media_type: str_at(source, "media_type")
                                            .unwrap_or("")
                                            .into(),
                                        data: str_at(source, "data").unwrap_or("").into(),
                                    });
                                }
                                Some("tool_result") => results.push(block),
                                Some(other) => report.skip(format!("block:{other}")),
                                None => return Err("a content block without a \"type\"".into()),
                            }
                        }
                    }
                    _ => {
                        return Err("a user message whose content is neither text nor blocks".into())
                    }
                }
                if !blocks.is_empty() {
                    emit(Out::Input(SessionEvent::Message(Message {
                        role: Role::User,
                        content: blocks,
                    })));
                }
                // Claude Code keeps what a tool printed beside the result it sent: the
                // standard streams of a shell command.
                let extra = value.get("toolUseResult");
                let streams = (results.len() == 1).then_some(extra).flatten();
                for block in results {
                    let stream = |name: &str| {
                        streams
                            .and_then(|s| s.get(name))
                            .and_then(Value::as_str)
                            .map(str::to_string)
                    };
                    emit(Out::Input(SessionEvent::ToolResult {
                        tool_call_id: str_at(block, "tool_use_id").unwrap_or("").into(),
                        content: result_text(block.get("content").unwrap_or(&Value::Null), report),
                        is_error: block
                            .get("is_error")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                        stdout: stream("stdout"),
                        stderr: stream("stderr"),
                        exit_code: None,
                    }));
                }
            }
            "assistant" => {
                let message = value
                    .get("message")
                    .ok_or("an assistant line without a \"message\"")?;
                let model = str_at(message, "model").unwrap_or("").to_string();
                if let Some(usage) = message.get("usage").filter(|u| u.is_object()) {
                    let id = str_at(message, "id");
                    let request = str_at(&value, "requestId");
                    let session = str_at(&value, "sessionId").unwrap_or(&self.file_session);
                    // ccusage's key: the message id with the request id; a call without a
                    // request id is matched within its session only.
                    let key = id.map(|id| match request {
                        Some(request) => format!("{id}\u{1f}{request}"),
                        None => format!("{id}\u{1f}\u{1f}{session}"),
                    });
                    emit(Out::CallLine(Call {
                        key,
                        usage: usage_of(usage),
                        sent: sent_of(usage),
                        model: model.clone(),
                        finish_reason: str_at(message, "stop_reason").map(str::to_string),
                        wire_format: MESSAGES_WIRE,
                        wire: json!({
                            "id": id,
                            "request_id": request,
                            "usage": usage,
                            "uuid": str_at(&value, "uuid"),
                        }),
                    }));
                } else {
                    report.skip("assistant line without usage");
                }
                let Some(Value::Array(items)) = message.get("content") else {
                    return match message.get("content") {
                        Some(Value::String(text)) => {
                            emit(Out::Answer(SessionEvent::Output { text: text.clone() }));
                            Ok(())
                        }
                        _ => Err("an assistant message without content blocks".into()),
                    };
                };
                for block in items {
                    match str_at(block, "type") {
                        Some("text") => emit(Out::Answer(SessionEvent::Output {
                            text: str_at(block, "text").unwrap_or("").into(),
                        })),
                        Some("thinking") => emit(Out::Answer(SessionEvent::Reasoning {
                            text: str_at(block, "thinking").unwrap_or("").into(),
                        })),
                        Some("tool_use" | "server_tool_use") => {
                            emit(Out::Answer(SessionEvent::ToolCall {
                                id: str_at(block, "id").unwrap_or("").into(),
                                name: str_at(block, "name").unwrap_or("").into(),
                                arguments: block
                                    .get("input")
                                    .map_or_else(|| "{}".into(), Value::to_string),
                            }))
                        }
                        Some(other) => report.skip(format!("block:{other}")),
                        None => return Err("a content block without a \"type\"".into()),
                    }
                }
            }
            "system" => match str_at(&value, "content") {
                Some(text) => emit(Out::Other(SessionEvent::Message(Message::new(
                    Role::System,
                    text,
                )))),
                None => report.skip("system line without content"),
            },
            other => report.skip(other.to_string()),
        }
        Ok(())
    }

    fn state(&self) -> Value {
        json!({ "last_ts": self.last_ts })
    }

    fn restore(&mut self, state: &Value) {
        self.last_ts = u64_at(state, "last_ts");
    }
}
