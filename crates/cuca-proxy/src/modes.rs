//! What each mode does with a call it took in: replay answers from the recording, record
//! forwards and records, auto replays what is recorded and records what is not, and fork
//! replays what matches and records a diverging call and those after it in a branch
//! (`fork.rs`).

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use cuca_wire::{Format, WireRequest};

use crate::config::Mode;
use crate::fork;
use crate::placement::take_writer;
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
        Mode::Fork => fork::fork_mode(shared, call).await,
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

/// Loads the session (one load shared by every caller of it meanwhile, see
/// [`replay::Loads`]) and places the request in it.
pub(crate) async fn load_and_lookup(
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
