//! Responses' `previous_response_id`: a request that names an earlier answer carries only
//! its new input, and the conversation before it is the one recorded up to that answer. The
//! request is completed from the recording before it is recorded or matched, so it lands at
//! its place in the conversation like a request that sent everything again.

use axum::http::StatusCode;
use cuca_events::{Message, MessageContentBlock, Role};
use cuca_replay::ReplayTrajectory;
use cuca_wire::{Format, WireRequest};

use crate::config::Mode;
use crate::refusal::ApiError;
use crate::state::Shared;

/// Puts the recorded conversation up to `request.previous_response_id` before the request's
/// own input (after its system prompts, which a Responses request does not inherit). An id
/// the session does not hold is a 404 in replay mode; when recording, the call is forwarded
/// and marked as not holding the conversation before it. Returns the conversation (the
/// session id) the answer was recorded in: the call continues it.
pub(crate) async fn continue_previous(
    shared: &Shared,
    session: &str,
    request: &mut WireRequest,
) -> Result<Option<String>, ApiError> {
    let Some(previous) = request.previous_response_id.clone() else {
        return Ok(None);
    };
    // The answer may be in any of the session's conversations.
    let before = match shared.replay.load_conversations(session).await {
        Ok(conversations) => conversations.iter().find_map(|(id, trajectory)| {
            conversation_until(trajectory, &previous).map(|before| (id.clone(), before))
        }),
        Err(_) => None,
    };
    let Some((conversation, before)) = before else {
        let message = format!(
            "previous_response_id {previous:?} is not an answer recorded in session {session:?}"
        );
        if shared.config.mode == Mode::Replay {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found_error",
                "cuca_previous_response_not_found",
                message,
            )
            .with_param("previous_response_id".to_owned())
            .in_session(session));
        }
        request.unrecorded.push(format!(
            "{message}; the conversation before this call is not in its records"
        ));
        return Ok(None);
    };
    let messages = std::mem::take(&mut request.unified.messages);
    let (systems, rest): (Vec<Message>, Vec<Message>) =
        messages.into_iter().partition(|m| m.role == Role::System);
    request.unified.messages = systems.into_iter().chain(before).chain(rest).collect();
    Ok(Some(conversation))
}

/// The conversation the recorded answer `id` ended: the messages recorded up to its turn and
/// the answer itself as the assistant message a caller would send back.
fn conversation_until(trajectory: &ReplayTrajectory, id: &str) -> Option<Vec<Message>> {
    let turns = trajectory.turns();
    let at = turns.iter().position(|turn| {
        turn.call().wire().is_some_and(|(format, wire)| {
            format == Format::Responses.name()
                && serde_json::from_str::<serde_json::Value>(wire)
                    .ok()
                    .and_then(|v| v.get("id").and_then(|id| id.as_str()).map(|s| s == id))
                    == Some(true)
        })
    })?;
    let mut messages: Vec<Message> = turns[..=at]
        .iter()
        .flat_map(|turn| turn.messages().iter().cloned())
        .collect();
    messages.push(Message {
        role: Role::Assistant,
        content: joined(turns[at].blocks()),
    });
    Some(messages)
}

/// Streamed blocks as one message holds them: consecutive text joined, consecutive reasoning
/// joined, each tool call as it is.
fn joined(blocks: &[MessageContentBlock]) -> Vec<MessageContentBlock> {
    let mut out: Vec<MessageContentBlock> = Vec::new();
    for block in blocks {
        match (out.last_mut(), block) {
            (
                Some(MessageContentBlock::Text { text }),
                MessageContentBlock::Text { text: more },
            ) => {
                text.push_str(more);
            }
            (
                Some(MessageContentBlock::Thinking { thinking }),
                MessageContentBlock::Thinking { thinking: more },
            ) => thinking.push_str(more),
            _ => out.push(block.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_blocks_join_into_the_message_a_caller_sends_back() {
        let blocks = [
            MessageContentBlock::thinking("a"),
            MessageContentBlock::thinking("b"),
            MessageContentBlock::text("c"),
            MessageContentBlock::text("d"),
            MessageContentBlock::ToolCall {
                id: "call_1".into(),
                name: "f".into(),
                arguments: "{}".into(),
            },
            MessageContentBlock::text("e"),
        ];
        let joined = joined(&blocks);
        assert_eq!(
            joined,
            vec![
                MessageContentBlock::thinking("ab"),
                MessageContentBlock::text("cd"),
                blocks[4].clone(),
                MessageContentBlock::text("e"),
            ]
        );
    }
}
