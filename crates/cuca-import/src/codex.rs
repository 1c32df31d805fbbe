//! Codex's rollout files (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`).

use cuca_events::{Message, MessageContentBlock, Role, SessionEvent};
use serde_json::{json, Value};

use crate::report::ImportReport;
use crate::translate::{parse_ts, str_at, u64_at, Emit, Out, Side, Translate};
use crate::usage::{Sent, TranscriptUsage};
use crate::writer::{Call, IMPORT_WIRE};

/// Reads Codex rollout lines.
#[derive(Default)]
pub(crate) struct Codex {
    /// The model of the turn under way (from the last `turn_context`).
    model: String,
    /// The session's running total at the last `token_count`: a repeat of it is the same
    /// count written twice, not a new call.
    previous_total: Option<Value>,
    last_ts: u64,
}

/// The Responses-style text of a message item's content parts.
fn texts(content: Option<&Value>) -> Vec<String> {
    let Some(Value::Array(parts)) = content else {
        return Vec::new();
    };
    parts
        .iter()
        .filter_map(|part| str_at(part, "text").map(str::to_string))
        .collect()
}

/// The usage kinds of one token-usage object. Codex's `input_tokens` counts the cached
/// ones too, and its `output_tokens` the reasoning ones.
fn usage_of(usage: &Value) -> TranscriptUsage {
    let cached = u64_at(usage, "cached_input_tokens");
    TranscriptUsage {
        input: u64_at(usage, "input_tokens").saturating_sub(cached),
        output: u64_at(usage, "output_tokens"),
        cache_read: cached,
        cache_write_5m: 0,
        cache_write_1h: 0,
        reasoning: u64_at(usage, "reasoning_output_tokens"),
    }
}

/// Which kinds one token-usage object wrote: `input_tokens` counts the cached prompt too
/// (OpenAI's sense), so it is the detail's `prompt`.
fn sent_of(usage: &Value) -> Sent {
    let has = |key: &str| usage.get(key).is_some_and(Value::is_u64);
    Sent {
        input_includes_cache_read: true,
        input: has("input_tokens"),
        output: has("output_tokens"),
        cache_read: has("cached_input_tokens"),
        cache_write: false,
        cache_split: false,
        reasoning: has("reasoning_output_tokens"),
    }
}

/// The difference of two running totals, kind by kind.
fn minus(total: &Value, previous: Option<&Value>) -> Value {
    let mut out = serde_json::Map::new();
    if let Some(object) = total.as_object() {
        for (key, value) in object {
            let before = previous.map_or(0, |p| u64_at(p, key));
            out.insert(
                key.clone(),
                json!(value.as_u64().unwrap_or(0).saturating_sub(before)),
            );
        }
    }
    Value::Object(out)
}

impl Translate for Codex {
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
            None => return Err("the line has no \"timestamp\"".into()),
        };
        self.last_ts = self.last_ts.max(ts);
        let payload = value
            .get("payload")
            .filter(|p| p.is_object())
            .ok_or_else(|| format!("a {kind} line without a \"payload\" object"))?;
        let mut emit = |o: Out| {
            out.push(Emit {
                side: Side::Main,
                ts,
                out: o,
            })
        };
        let item = str_at(payload, "type").unwrap_or("");
        match kind {
            "session_meta" => {
                if let Some(text) = str_at(payload, "instructions").filter(|t| !t.is_empty()) {
                    emit(Out::Other(SessionEvent::SystemPrompt { text: text.into() }));
                }
                let mut meta = serde_json::Map::new();
                meta.insert("kind".into(), json!("meta"));
                meta.insert("source".into(), json!("codex"));
                for field in ["id", "cwd", "originator", "cli_version", "model_provider"] {
                    if let Some(v) = payload.get(field) {
                        meta.insert(field.into(), v.clone());
                    }
                }
                emit(Out::Other(SessionEvent::CallWire {
                    format: IMPORT_WIRE.into(),
                    wire: Value::Object(meta).to_string(),
                }));
            }
            "turn_context" => {
                if let Some(model) = str_at(payload, "model").filter(|m| !m.is_empty()) {
                    if !self.model.is_empty() && self.model != model {
                        emit(Out::Other(SessionEvent::ModelSwap {
                            from: self.model.clone(),
                            to: model.into(),
                            reason: "turn_context".into(),
                        }));
                    }
                    self.model = model.into();
                }
            }
            "response_item" => match item {
                "message" => {
                    let text = texts(payload.get("content"));
                    let role = str_at(payload, "role").unwrap_or("");
                    match role {
                        "assistant" => {
                            for text in text {
                                emit(Out::Answer(SessionEvent::Output { text }));
                            }
                        }
                        "user" | "developer" | "system" => {
                            let role = if role == "user" {
                                Role::User
                            } else {
                                Role::System
                            };
                            emit(Out::Input(SessionEvent::Message(Message {
                                role,
                                content: text.into_iter().map(MessageContentBlock::text).collect(),
                            })));
                        }
                        other => return Err(format!("a message with role {other:?}")),
                    }
                }
                "reasoning" => {
                    let mut text = texts(payload.get("content"));
                    if text.is_empty() {
                        text = texts(payload.get("summary"));
                    }
                    if text.is_empty() {
                        report.skip("response_item:reasoning (encrypted only)");
                    } else {
                        emit(Out::Answer(SessionEvent::Reasoning {
                            text: text.join("\n"),
                        }));
                    }
                }
                "function_call" | "custom_tool_call" | "local_shell_call" | "web_search_call" => {
                    let arguments = match item {
                        "function_call" => str_at(payload, "arguments").unwrap_or("{}").to_string(),
                        "custom_tool_call" => str_at(payload, "input").unwrap_or("").to_string(),
                        _ => payload
                            .get("action")
                            .map_or_else(|| "{}".into(), Value::to_string),
                    };
                    let name = match item {
                        "local_shell_call" => "local_shell",
                        "web_search_call" => "web_search",
                        _ => str_at(payload, "name").unwrap_or(""),
                    };
                    let id = str_at(payload, "call_id")
                        .or_else(|| str_at(payload, "id"))
                        .unwrap_or("");
                    emit(Out::Answer(SessionEvent::ToolCall {
                        id: id.into(),
                        name: name.into(),
                        arguments,
                    }));
                }
                "function_call_output" | "custom_tool_call_output" => {
                    let output = payload.get("output").unwrap_or(&Value::Null);
                    let content = match output {
                        Value::String(text) => text.clone(),
                        Value::Object(_) => str_at(output, "content")
                            .map_or_else(|| output.to_string(), str::to_string),
                        other => other.to_string(),
                    };
                    // A shell call's output is itself JSON with the exit code beside it.
                    let exit_code = serde_json::from_str::<Value>(&content)
                        .ok()
                        .and_then(|v| v.get("metadata")?.get("exit_code")?.as_i64())
                        .and_then(|code| i32::try_from(code).ok());
                    emit(Out::Input(SessionEvent::ToolResult {
                        tool_call_id: str_at(payload, "call_id").unwrap_or("").into(),
                        content,
                        is_error: output.get("success") == Some(&Value::Bool(false)),
                        stdout: None,
                        stderr: None,
                        exit_code,
                    }));
                }
                other => report.skip(format!("response_item:{other}")),
            },
            "event_msg" if item == "token_count" => {
                let Some(info) = payload.get("info").filter(|i| i.is_object()) else {
                    report.skip("event_msg:token_count without info");
                    return Ok(());
                };
                let total = info.get("total_token_usage").filter(|t| t.is_object());
                if total.is_some() && total == self.previous_total.as_ref() {
                    report.skip("event_msg:token_count (repeated total)");
                    return Ok(());
                }
                let last = match info.get("last_token_usage").filter(|l| l.is_object()) {
                    Some(last) => last.clone(),
                    None => match total {
                        Some(total) => minus(total, self.previous_total.as_ref()),
                        None => return Err("a token_count without total or last usage".into()),
                    },
                };
                if let Some(total) = total {
                    self.previous_total = Some(total.clone());
                }
                emit(Out::CallDone(Call {
                    key: None,
                    usage: usage_of(&last),
                    sent: sent_of(&last),
                    model: self.model.clone(),
                    finish_reason: None,
                    wire_format: "responses",
                    wire: json!({ "token_count": info }),
                }));
            }
            "event_msg" => report.skip(format!("event_msg:{item}")),
            other => report.skip(other.to_string()),
        }
        Ok(())
    }

    fn state(&self) -> Value {
        json!({ "model": self.model, "previous_total": self.previous_total, "last_ts": self.last_ts })
    }

    fn restore(&mut self, state: &Value) {
        self.model = str_at(state, "model").unwrap_or("").to_string();
        self.previous_total = state
            .get("previous_total")
            .filter(|t| t.is_object())
            .cloned();
        self.last_ts = u64_at(state, "last_ts");
    }
}
