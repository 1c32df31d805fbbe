//! One model call as the router took it in, and where the recording places it: what every
//! mode starts from.

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use bytes::Bytes;
use cuca_wire::{Format, WireRequest};

use crate::refusal::ApiError;
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
    /// How many values redaction replaced in the request as it was taken in.
    pub(crate) redacted: cuca_redact::Counts,
    /// Which of the request's messages were read through the proxy's memo, with their keys.
    pub(crate) read: crate::memo::RequestRead,
}

/// Loads the session (one load shared by every caller of it meanwhile, see
/// [`replay::Loads`]) and places the request in it.
pub(crate) async fn load_and_lookup(
    shared: &Arc<Shared>,
    session: &str,
    named: Option<&str>,
    request: &WireRequest,
    read: &crate::memo::RequestRead,
) -> Result<(Lookup, String), ApiError> {
    // Every index of the proxy shares its keys: the request is keyed once (its messages read
    // before, not again), and its first message decides which conversations are read on.
    let asked = replay::Asked::with_read(shared.replay.keys(), request, read, &shared.memo.keys);
    let loaded = match named {
        Some(conversation) => shared
            .replay
            .index(conversation)
            .await
            .map(|trajectory| vec![(conversation.to_owned(), trajectory)]),
        None => shared.replay.index_conversations(session, &asked).await,
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
    let (lookup, conversation) = replay::lookup_conversations(
        &trajectory,
        request,
        &asked,
        &shared.served,
        &shared.matching,
    )
    .await?;
    Ok((lookup, conversation))
}
