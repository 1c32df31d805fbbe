//! What each mode does with a call it took in: replay answers from the recording, record
//! forwards and records, auto replays what is recorded and records what is not, and fork
//! replays what matches and records a diverging call and those after it in a branch.

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use cuca_wire::{Format, WireRequest};

use crate::config::Mode;
use crate::headers::FORKED_FROM_HEADER;
use crate::placement::{self, take_writer};
use crate::record;
use crate::refusal::{bad_request, ApiError};
use crate::replay::{self, Lookup};
use crate::state::Shared;

/// One model call as the router took it in, for its mode to answer.
pub(crate) struct Call {
    pub(crate) format: Format,
    /// The base session the call came in on.
    pub(crate) session: String,
    /// The query string the caller sent, forwarded as it was.
    pub(crate) query: Option<String>,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    /// What the proxy understood of the body: `Err` says why it is not a request of the
    /// format (forwarded all the same when recording, refused when replaying).
    pub(crate) request: Result<WireRequest, String>,
    /// The conversation the call continues when that is known without placing it: the one
    /// its `previous_response_id` was recorded in, or the one its caller named.
    pub(crate) continued: Option<String>,
    /// The conversation its caller named (`X-Cuca-Conversation`), matched alone in replay.
    pub(crate) named: Option<String>,
}

/// The answer to `call` under the proxy's mode.
pub(crate) async fn answer(shared: Arc<Shared>, call: Call) -> Result<Response, ApiError> {
    match shared.config.mode {
        Mode::Replay => {
            let request = call
                .request
                .map_err(|message| bad_request(&call.session, message))?;
            match load_and_lookup(&shared, &call.session, call.named.as_deref(), &request).await? {
                (Lookup::Found(turn, turn_idx), conversation) => Ok(replay::render(
                    &turn,
                    turn_idx,
                    &conversation,
                    &request,
                    call.format,
                )),
                (Lookup::Diverged(error) | Lookup::NotRecorded(error), _) => Err(error),
            }
        }
        Mode::Record => {
            let (conversation, recording) = take_writer(
                &shared,
                &call.session,
                call.continued,
                call.request.as_ref().ok(),
            )
            .await?;
            Ok(record::forward(
                shared,
                call.format,
                call.query,
                conversation,
                call.headers,
                call.body,
                call.request,
                recording,
            )
            .await)
        }
        Mode::Fork => fork_mode(shared, call).await,
        Mode::Auto => {
            // The writer is taken before the lookup, so a call recorded meanwhile on the same
            // conversation cannot slip between the two.
            let (conversation, recording) = take_writer(
                &shared,
                &call.session,
                call.continued,
                call.request.as_ref().ok(),
            )
            .await?;
            if let Ok(parsed) = &call.request {
                match load_and_lookup(&shared, &call.session, call.named.as_deref(), parsed).await?
                {
                    (Lookup::Found(turn, turn_idx), replayed_from) => {
                        return Ok(replay::render(
                            &turn,
                            turn_idx,
                            &replayed_from,
                            parsed,
                            call.format,
                        ));
                    }
                    (Lookup::Diverged(error), _) => return Err(error),
                    (Lookup::NotRecorded(_), _) => {}
                }
            }
            Ok(record::forward(
                shared,
                call.format,
                call.query,
                conversation,
                call.headers,
                call.body,
                call.request,
                recording,
            )
            .await)
        }
    }
}

/// Fork mode: what matches the recording is replayed; a call that diverges
/// from its conversation is forwarded live and recorded in a branch of it — a fork at the last
/// call that matched (`SessionBackend::fork`, so the audit record and the id follow seed 000),
/// or a new conversation when none did — and the calls after it continue that branch.
async fn fork_mode(shared: Arc<Shared>, call: Call) -> Result<Response, ApiError> {
    let Call {
        format,
        session,
        query,
        headers,
        body,
        request,
        ..
    } = call;
    let Ok(parsed) = &request else {
        let recording = placement::recording(&shared, &session).await?;
        return Ok(record::forward(
            shared, format, query, session, headers, body, request, recording,
        )
        .await);
    };
    let diverged_in = match load_and_lookup(&shared, &session, None, parsed).await? {
        (Lookup::Found(turn, turn_idx), replayed_from) => {
            return Ok(replay::render(
                &turn,
                turn_idx,
                &replayed_from,
                parsed,
                format,
            ));
        }
        (Lookup::NotRecorded(_), _) => None,
        (Lookup::Diverged(_), conversation) => Some(conversation),
    };
    let Some(original) = diverged_in else {
        let placed = placement::place(&shared, &session, Some(parsed)).await?;
        let recording = placement::placed_recording(&shared, &session, &placed).await?;
        return Ok(record::forward(
            shared, format, query, placed.id, headers, body, request, recording,
        )
        .await);
    };
    // The branch this proxy already made of the conversation, followed to its newest.
    let mut target = original.clone();
    loop {
        let next = shared
            .branches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&target)
            .cloned();
        match next {
            Some(next) if next != target => target = next,
            _ => break,
        }
    }
    let mut forked_from = None;
    let mut diverged = None;
    let trajectory = shared.replay.index(&target).await.map_err(|message| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "cuca_replay_failed",
            message,
        )
        .in_session(&target)
    })?;
    // The recorded conversation diverged already; a branch of it may answer, be continued,
    // or diverge in turn.
    let branch_needed = target == original
        || match replay::lookup(
            &trajectory,
            &target,
            parsed,
            &shared.served.of(&target),
            &shared.matching,
        )
        .await?
        {
            Lookup::Found(turn, turn_idx) => {
                shared.served.mark(&target, turn_idx);
                return Ok(replay::render(&turn, turn_idx, &target, parsed, format));
            }
            Lookup::NotRecorded(_) => false,
            Lookup::Diverged(_) => true,
        };
    if branch_needed {
        let matched = replay::matched_turns(&trajectory, parsed, &shared.matching);
        let branch = match matched.checked_sub(1).map(|t| &trajectory.turns()[t]) {
            Some(last) => {
                let point = format!("{target}:{}", last.sequence_range().end());
                let backend = Arc::clone(&shared.backend);
                let (from, at) = (target.clone(), point.clone());
                let forked = tokio::task::spawn_blocking(move || backend.fork(&from, &at))
                    .await
                    .map_err(|join| join.to_string())
                    .and_then(|forked| forked.map_err(|e| e.to_string()));
                let fork = forked.map_err(|message| {
                    ApiError::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "server_error",
                        "cuca_fork_failed",
                        format!("cannot fork session {target:?} at {point}: {message}"),
                    )
                    .in_session(&target)
                })?;
                forked_from = Some(point);
                fork
            }
            None => {
                shared
                    .conversations
                    .begin(&session, &parsed.unified)
                    .await?
            }
        };
        tracing::info!(from = %target, to = %branch, "the call diverges from the recording; recording it live in a branch");
        diverged = Some(match &forked_from {
            Some(point) => format!(
                "diverged from the recording of {target} after {point}: forwarded live and recorded in its fork {branch}"
            ),
            None => format!(
                "diverged from the recording of {target} at its first call: forwarded live and recorded in the new conversation {branch}"
            ),
        });
        shared
            .branches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(target.clone(), branch.clone());
        target = branch;
    }
    let mut recording = placement::recording(&shared, &target).await?;
    recording.note = diverged;
    let mut response = record::forward(
        shared, format, query, target, headers, body, request, recording,
    )
    .await;
    if let Some(value) = forked_from.and_then(|point| HeaderValue::from_str(&point).ok()) {
        response
            .headers_mut()
            .insert(HeaderName::from_static(FORKED_FROM_HEADER), value);
    }
    Ok(response)
}

/// Loads the session (one load shared by every caller of it meanwhile, see
/// [`replay::Loads`]) and places the request in it.
async fn load_and_lookup(
    shared: &Arc<Shared>,
    session: &str,
    named: Option<&str>,
    request: &WireRequest,
) -> Result<(Lookup, String), ApiError> {
    let loaded = match named {
        Some(conversation) => shared
            .replay
            .index(conversation)
            .await
            .map(|trajectory| vec![(conversation.to_owned(), trajectory)]),
        None => shared.replay.index_conversations(session).await,
    };
    let trajectory = loaded.map_err(|message| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "cuca_replay_failed",
            message,
        )
        .in_session(session)
    })?;
    let (lookup, conversation) =
        replay::lookup_conversations(&trajectory, request, &shared.served, &shared.matching)
            .await?;
    Ok((lookup, conversation))
}
