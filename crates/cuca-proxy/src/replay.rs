//! Replay mode: match a request to its session's recorded turn, and answer as the upstream
//! did — an SSE stream of OpenAI chunks or one JSON object — with no network at all.
//!
//! A request is placed by conversation position: the number of user and assistant messages
//! it carries. The session log records each such message once, the first time its position
//! appears, so the turn asked with `n` of them is the one whose recorded messages, counted
//! from the session's start, reach `n`. The request's messages must equal the recorded ones
//! position by position, and its system messages those of that turn; the first difference is
//! a 409 that names the message index and quotes both sides, clipped.

use axum::body::Body;
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use cuca_events::{Message, MessageContentBlock, Role, UnifiedRequest};
use cuca_replay::{ReplayTrajectory, ReplayTurn};
use serde_json::{json, Value};

use crate::flush::OneAtATime;
use crate::session::{POINT_HEADER, SESSION_HEADER};
use crate::wire::{clip, ApiError, CallerRequest};

/// The response header with the index of the recorded turn a replayed answer came from.
pub const TURN_HEADER: &str = "x-cuca-turn";

/// Where a request falls in its session's recording.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// The turn it matches, and that turn's index.
    Found(Box<ReplayTurn>, usize),
    /// The recording has a turn at this position, or disagrees before it: a 409.
    Diverged(ApiError),
    /// The recording ends before this position, or there is none: a 404 in replay mode,
    /// forwarded and recorded in auto mode.
    NotRecorded(ApiError),
}

/// Places `request` in `trajectory` (session `session`).
pub(crate) fn lookup(
    trajectory: &ReplayTrajectory,
    session: &str,
    request: &UnifiedRequest,
) -> Lookup {
    if trajectory.is_empty() {
        return Lookup::NotRecorded(
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found_error",
                "cuca_session_not_found",
                format!("session {session:?} has no recording"),
            )
            .in_session(session),
        );
    }
    let conversation: Vec<(usize, &Message)> = request
        .messages
        .iter()
        .enumerate()
        .filter(|(_, m)| matches!(m.role, Role::User | Role::Assistant))
        .collect();
    let recorded: Vec<&Message> = trajectory
        .turns()
        .iter()
        .flat_map(|turn| turn.messages())
        .collect();
    let n = conversation.len();
    for (i, (index, got)) in conversation.iter().enumerate().take(recorded.len()) {
        if recorded[i] != *got {
            return Lookup::Diverged(diverged(
                session,
                *index,
                &describe(recorded[i]),
                &describe(got),
            ));
        }
    }
    let systems: Vec<(usize, String)> = request
        .messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::System)
        .map(|(i, m)| (i, m.text()))
        .collect();
    // A turn's position: the messages its request carried, from its CallRequest record. A
    // recording without call metadata falls back on counting Message records from the start,
    // which is exact as long as every call extended the conversation.
    let by_metadata = trajectory
        .turns()
        .iter()
        .any(|turn| turn.call().request().is_some());
    let mut positions = Vec::with_capacity(trajectory.len());
    let mut count = 0;
    for turn in trajectory.turns() {
        count += turn.messages().len();
        positions.push(if by_metadata {
            turn.call().request().map(|r| r.messages as usize)
        } else {
            Some(count)
        });
    }
    let target = if by_metadata {
        request.messages.len()
    } else {
        n
    };
    let at_position: Vec<usize> = (0..trajectory.len())
        .filter(|&t| positions[t] == Some(target))
        .collect();
    let complete: Vec<usize> = at_position
        .iter()
        .copied()
        .filter(|&t| trajectory.turns()[t].is_complete())
        .collect();
    // Of several turns asked at one position, those with the request's system prompts (a side
    // call with its own prompt is another conversation), and of those the last that ended with
    // a finish reason: a call retried after it was cut short is the one the agent went on from.
    let same_system: Vec<usize> = complete
        .iter()
        .copied()
        .filter(|&t| {
            let prompts = trajectory.turns()[t].system_prompts();
            prompts.len() == systems.len()
                && prompts
                    .iter()
                    .zip(&systems)
                    .all(|(want, (_, got))| want == got)
        })
        .collect();
    let pool = if same_system.is_empty() {
        &complete
    } else {
        &same_system
    };
    let chosen = pool
        .iter()
        .rev()
        .find(|&&t| {
            // Not a call the recorder marked incomplete: its answer was cut or lost.
            let call = trajectory.turns()[t].call();
            call.incomplete().is_none() && (!call.has_finish() || call.finish_reason().is_some())
        })
        .or(pool.last())
        .copied();
    let Some(turn_idx) = chosen else {
        let furthest = positions.iter().flatten().max().copied().unwrap_or(0);
        if target > furthest || !at_position.is_empty() {
            let message = if at_position.is_empty() {
                format!(
                    "session {session:?} has {} recorded turns, the furthest asked with {furthest} messages; this request, with {target}, comes after it",
                    trajectory.len()
                )
            } else {
                format!(
                    "turn {} of session {session:?} was never completed in the recording",
                    at_position[0]
                )
            };
            return Lookup::NotRecorded(
                ApiError::new(
                    StatusCode::NOT_FOUND,
                    "not_found_error",
                    "cuca_turn_not_found",
                    message,
                )
                .in_session(session),
            );
        }
        // The request agrees with the recording as far as it goes, but no turn was asked
        // with as many messages as it carries.
        let index = request.messages.len();
        let expected = match recorded.get(n) {
            Some(next) => describe(next),
            None => "a turn asked with as many messages".to_owned(),
        };
        return Lookup::Diverged(diverged(
            session,
            index,
            &expected,
            "no message (the request ends here)",
        ));
    };
    let turn = &trajectory.turns()[turn_idx];
    let expected = turn.system_prompts();
    for i in 0..systems.len().max(expected.len()) {
        match (expected.get(i), systems.get(i)) {
            (Some(want), Some((index, got))) if want != got => {
                return Lookup::Diverged(diverged(
                    session,
                    *index,
                    &format!("system {:?}", clip(want)),
                    &format!("system {:?}", clip(got)),
                ));
            }
            (Some(want), None) => {
                return Lookup::Diverged(diverged(
                    session,
                    request.messages.len(),
                    &format!("system {:?}", clip(want)),
                    "no system message",
                ));
            }
            (None, Some((index, got))) => {
                return Lookup::Diverged(diverged(
                    session,
                    *index,
                    "no system message",
                    &format!("system {:?}", clip(got)),
                ));
            }
            _ => {}
        }
    }
    Lookup::Found(Box::new(turn.clone()), turn_idx)
}

fn diverged(session: &str, index: usize, expected: &str, got: &str) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "invalid_request_error",
        "cuca_replay_diverged",
        format!(
            "the request diverges from the recording of session {session:?} at messages[{index}]: expected {expected}, got {got}"
        ),
    )
    .with_param(format!("messages[{index}]"))
    .in_session(session)
}

/// A message in a few words: its role and clipped text, and any tool calls or images.
fn describe(message: &Message) -> String {
    let mut out = format!("{} {:?}", message.role.as_str(), clip(&message.text()));
    for block in &message.content {
        match block {
            MessageContentBlock::ToolCall {
                name, arguments, ..
            } => out.push_str(&format!(" + tool call {name}({})", clip(arguments))),
            MessageContentBlock::ImageBase64 { media_type, data } => {
                out.push_str(&format!(" + image {media_type} ({} bytes)", data.len()));
            }
            MessageContentBlock::Thinking { thinking } => {
                out.push_str(&format!(" + reasoning {:?}", clip(thinking)));
            }
            _ => {}
        }
    }
    out
}

/// The answer the upstream gave for `turn`, rebuilt: an SSE stream when the request asked
/// for one, else one `chat.completion` object. The same turn and request give the same
/// bytes every time: no clock, no random id.
pub(crate) fn render(
    turn: &ReplayTurn,
    turn_idx: usize,
    session: &str,
    request: &CallerRequest,
) -> Response {
    let call = turn.call();
    let model = call
        .served_model()
        .map(str::to_owned)
        .or_else(|| call.request().map(|r| r.model.clone()))
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| {
            if request.unified.model.is_empty() {
                "cuca-replay".to_owned()
            } else {
                request.unified.model.clone()
            }
        });
    let has_tools = turn
        .blocks()
        .iter()
        .any(|b| matches!(b, MessageContentBlock::ToolCall { .. }));
    let finish = call
        .finish_reason()
        .unwrap_or(if has_tools { "tool_calls" } else { "stop" })
        .to_owned();
    let completion = turn.completion().unwrap_or_default();
    let usage = json!({
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "total_tokens": completion.prompt_tokens + completion.completion_tokens,
    });
    let id = format!("chatcmpl-cuca-{turn_idx}");
    let (content_type, body) = if request.stream {
        let chunks = sse(
            turn,
            &id,
            &model,
            &finish,
            request.include_usage.then_some(usage),
        );
        (
            "text/event-stream",
            Body::from_stream(OneAtATime::new(futures::stream::iter(
                chunks.into_iter().map(Ok::<Bytes, std::io::Error>),
            ))),
        )
    } else {
        let body = completion_object(turn, &id, &model, &finish, usage);
        ("application/json", Body::from(body.to_string()))
    };
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    for (name, value) in [
        (SESSION_HEADER, session.to_owned()),
        (
            POINT_HEADER,
            format!("{session}:{}", turn.sequence_range().start()),
        ),
        (TURN_HEADER, turn_idx.to_string()),
    ] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    response
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

/// One event per recorded block — reasoning as `reasoning_content`, text as `content`, each
/// tool call whole in one `tool_calls` delta — then the finish reason, the usage chunk when
/// asked for, and `[DONE]`.
fn sse(turn: &ReplayTurn, id: &str, model: &str, finish: &str, usage: Option<Value>) -> Vec<Bytes> {
    let mut out = Vec::with_capacity(turn.blocks().len() + 4);
    out.push(event(&chunk(
        id,
        model,
        json!({"role": "assistant", "content": null}),
        None,
    )));
    let mut n_tool_calls = 0;
    for block in turn.blocks() {
        let delta = match block {
            MessageContentBlock::Thinking { thinking } => json!({"reasoning_content": thinking}),
            MessageContentBlock::Text { text } => json!({"content": text}),
            MessageContentBlock::ToolCall {
                id,
                name,
                arguments,
            } => {
                n_tool_calls += 1;
                json!({"tool_calls": [{
                    "index": n_tool_calls - 1,
                    "id": id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }]})
            }
            // A provider never streams a tool result or an image.
            _ => continue,
        };
        out.push(event(&chunk(id, model, delta, None)));
    }
    out.push(event(&chunk(id, model, json!({}), Some(finish))));
    if let Some(usage) = usage {
        out.push(event(&json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [],
            "usage": usage,
        })));
    }
    out.push(Bytes::from_static(b"data: [DONE]\n\n"));
    out
}

fn completion_object(
    turn: &ReplayTurn,
    id: &str,
    model: &str,
    finish: &str,
    usage: Value,
) -> Value {
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut tool_calls = Vec::new();
    for block in turn.blocks() {
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
