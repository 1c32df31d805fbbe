//! Fork mode onto another model (`ProxyConfig::model_swap`): the calls before a point are
//! replayed from the recording, and from the point on every call is sent live to another
//! model, recorded in a fork of the recorded conversation at the point that says so first
//! (a `ModelSwap` record).
//!
//! A call's place is read from the recording: a call the recording answers at a turn before
//! the point is replayed; a call that agrees with the recording's turns up to the point (it
//! is the point's call, or comes after it) goes live with its body's `model` replaced; any
//! other call diverged before the point and is refused as replay refuses it. The live calls
//! go into a branch forked at the point whose first live call was sent to the same model: one
//! that answers the call replays it (a second run of the same swap, in this process or
//! another, costs nothing), one whose whole recording the call continues is continued (its
//! writer held, and only if it still is one once held), and otherwise a new branch is forked.

use std::sync::{Arc, PoisonError};

use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use cuca_events::{fork_parent, SessionEvent};

use crate::call::{load_and_lookup, Call};
use crate::fork::{fork_at, index, stored_forks};
use crate::headers::FORKED_FROM_HEADER;
use crate::model_swap::ModelSwap;
use crate::placement;
use crate::record;
use crate::refusal::{bad_request, ApiError};
use crate::replay::{self, Lookup};
use crate::state::Shared;

/// How many times a call looks for a branch to continue when each one it tries is taken by a
/// concurrent call first; then it forks a branch of its own.
const MAX_TRIES: usize = 8;

/// The answer to `call` in fork mode with the model swapped from the point on.
pub(crate) async fn swap_mode(
    shared: Arc<Shared>,
    mut call: Call,
    swap: &ModelSwap,
) -> Result<Response, ApiError> {
    let session = call.session.clone();
    let format = call.format;
    let parsed = match &mut call.request {
        Ok(parsed) => parsed,
        Err(message) => {
            return Err(bad_request(
                &session,
                format!(
                    "the call cannot be placed before or after the point {}: {message}",
                    swap.from
                ),
            ))
        }
    };
    let (lookup, original) = load_and_lookup(&shared, &session, None, parsed, &call.read).await?;
    let recorded = index(&shared, &original).await?;
    let replayed = swap
        .replayed_turns(&original, &recorded)
        .unwrap_or(usize::MAX);
    let goes_live = match &lookup {
        Lookup::Found(_, turn_idx) => *turn_idx >= replayed,
        Lookup::Diverged(_) | Lookup::NotRecorded(_) => {
            replay::matched_turns(&recorded, parsed, &shared.matching) >= replayed
        }
    };
    if !goes_live {
        return match lookup {
            Lookup::Found(turn, turn_idx) => Ok(replay::render(
                &turn,
                turn_idx,
                &original,
                parsed,
                format,
                shared.answer_aliases.get(),
            )),
            Lookup::Diverged(error) | Lookup::NotRecorded(error) => Err(error),
        };
    }
    let Some(last) = replayed
        .checked_sub(1)
        .and_then(|t| recorded.turns().get(t))
    else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "invalid_request_error",
            "cuca_replay_diverged",
            format!(
                "the point {} leaves no recorded call of session {original:?} to replay before the calls go live to {} (it has {} turns)",
                swap.from,
                swap.model,
                recorded.len()
            ),
        )
        .in_session(&original));
    };
    let point = format!("{original}:{}", last.sequence_range().end());
    // What the caller asked for is replaced where the format names it, so the upstream and
    // the recording both see the model actually sent.
    let asked = std::mem::replace(&mut parsed.unified.model, swap.model.clone());
    call.body = format
        .with_model(&call.body, &swap.model)
        .map_err(|message| bad_request(&session, message))?;
    let parsed = match &call.request {
        Ok(parsed) => parsed,
        Err(message) => return Err(bad_request(&session, message.clone())),
    };
    let mut tried = 0;
    loop {
        let mut open = None;
        for branch in branches(&shared, &original, &point, replayed, swap).await? {
            let index = index(&shared, &branch).await?;
            match replay::lookup(
                &index,
                &branch,
                parsed,
                &shared.served.of(&branch),
                &shared.matching,
            )
            .await?
            {
                Lookup::Found(turn, turn_idx) => {
                    shared.served.mark(&branch, turn_idx);
                    return Ok(replay::render(
                        &turn,
                        turn_idx,
                        &branch,
                        parsed,
                        format,
                        shared.answer_aliases.get(),
                    ));
                }
                Lookup::NotRecorded(_)
                    if open.is_none()
                        && replay::matched_turns(&index, parsed, &shared.matching)
                            == index.len() =>
                {
                    open = Some(branch);
                }
                _ => {}
            }
        }
        let Some(branch) = open else { break };
        tried += 1;
        // The call continues this branch's whole recording: it is recorded there, unless a
        // concurrent call recorded something else there while this one waited for the writer.
        let recording = placement::recording(&shared, &branch).await?;
        let index = index(&shared, &branch).await?;
        match replay::lookup(
            &index,
            &branch,
            parsed,
            &shared.served.of(&branch),
            &shared.matching,
        )
        .await?
        {
            Lookup::Found(turn, turn_idx) => {
                shared.served.mark(&branch, turn_idx);
                return Ok(replay::render(
                    &turn,
                    turn_idx,
                    &branch,
                    parsed,
                    format,
                    shared.answer_aliases.get(),
                ));
            }
            Lookup::NotRecorded(_)
                if replay::matched_turns(&index, parsed, &shared.matching) == index.len() =>
            {
                return Ok(record::forward(shared, call, branch, recording).await);
            }
            _ => drop(recording),
        }
        if tried >= MAX_TRIES {
            break;
        }
    }
    // A branch of its own, forked at the point, that says first which model it goes on with.
    // The recording is only read in this mode: let go once forked, so that a proxy running
    // another model from the same point can fork it too.
    let branch = fork_at(&shared, &original, &point, true)
        .await
        .map_err(|message| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "cuca_fork_failed",
                format!("cannot fork session {original:?} at {point}: {message}"),
            )
            .in_session(&original)
        })?;
    shared
        .branches
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(original.clone())
        .or_default()
        .push(branch.clone());
    shared.swapped.note(&branch, &swap.model);
    let mut recording = placement::recording(&shared, &branch).await?;
    let plugin = Arc::clone(&recording.slot.plugin);
    let event = SessionEvent::ModelSwap {
        from: asked.clone(),
        to: swap.model.clone(),
        reason: format!(
            "fork mode: calls from {} on are sent to {} (the recording asked for {})",
            swap.from,
            swap.model,
            if asked.is_empty() {
                "the server's choice"
            } else {
                asked.as_str()
            }
        ),
    };
    let written = tokio::task::spawn_blocking(move || plugin.append_log(event))
        .await
        .map_err(|join| join.to_string())
        .and_then(|written| written.map(|_| ()).map_err(|e| e.to_string()));
    if let Err(message) = written {
        recording.slot.needs_close();
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "cuca_record_failed",
            format!("cannot record the model swap in the fork {branch:?}: {message}"),
        )
        .in_session(&branch));
    }
    tracing::info!(from = %original, to = %branch, model = %swap.model, "the calls from the point on go live to another model, recorded in a fork");
    recording.note = Some(format!(
        "sent to {} instead of {asked:?} from {} on: forwarded live and recorded in the fork {branch} of {original} at {point}",
        swap.model, swap.from
    ));
    let mut response = record::forward(shared, call, branch, recording).await;
    if let Ok(value) = HeaderValue::from_str(&point) {
        response
            .headers_mut()
            .insert(HeaderName::from_static(FORKED_FROM_HEADER), value);
    }
    Ok(response)
}

/// The branches forked from `original` at `point` whose first live call (turn `replayed`)
/// was sent to the swap's model: those this proxy made, then those the store holds, each in
/// the order of its id.
async fn branches(
    shared: &Shared,
    original: &str,
    point: &str,
    replayed: usize,
    swap: &ModelSwap,
) -> Result<Vec<String>, ApiError> {
    let made: Vec<String> = shared
        .branches
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(original)
        .cloned()
        .unwrap_or_default();
    let mut candidates: Vec<String> = made
        .into_iter()
        .chain(stored_forks(shared).await?)
        .filter(|id| fork_parent(id) == Some((original, point)))
        .collect();
    candidates.dedup();
    let mut out = Vec::new();
    for branch in candidates {
        if out.contains(&branch) {
            continue;
        }
        let model = match shared.swapped.get(&branch) {
            Some(model) => Some(model),
            None => {
                let index = index(shared, &branch).await?;
                // A branch whose first live call is not recorded yet (a concurrent call is
                // still sending it) is not known to be the swap's: it is looked at again on
                // the next call.
                if index.len() <= replayed {
                    None
                } else {
                    let turn = index.read_turn(replayed).await.map_err(|message| {
                        ApiError::new(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "server_error",
                            "cuca_replay_failed",
                            message,
                        )
                        .in_session(&branch)
                    })?;
                    let model = turn.call().request().map(|r| r.model.clone());
                    if let Some(model) = &model {
                        shared.swapped.note(&branch, model);
                    }
                    model
                }
            }
        };
        if model.as_deref() == Some(swap.model.as_str()) {
            out.push(branch);
        }
    }
    Ok(out)
}
