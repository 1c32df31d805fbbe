//! What each mode does with a call it took in: replay answers from the recording, record
//! forwards and records, auto replays what is recorded and records what is not, and fork
//! replays what matches and records a diverging call and those after it in a branch
//! (`fork.rs`).

use std::sync::Arc;

use axum::response::Response;

use crate::call::{load_and_lookup, Call};
use crate::config::Mode;
use crate::fork;
use crate::placement::take_writer;
use crate::record;
use crate::refusal::{bad_request, ApiError};
use crate::replay::{self, Lookup};
use crate::state::Shared;

/// The answer to `call` under the proxy's mode.
pub(crate) async fn answer(shared: Arc<Shared>, call: Call) -> Result<Response, ApiError> {
    match shared.config.mode {
        Mode::Replay => {
            let session = call.session.clone();
            let answered = replay_mode(&shared, call).await;
            // Every refusal is kept for a strict replay's report: the agent may swallow it.
            if let Err(error) = &answered {
                shared.ledger.refused(&session, error);
            }
            answered
        }
        Mode::Record => {
            let (conversation, recording) = take_writer(
                &shared,
                &call.session,
                call.continued.clone(),
                call.request.as_ref().ok(),
            )
            .await?;
            Ok(record::forward(shared, call, conversation, recording).await)
        }
        Mode::Fork => match shared.config.model_swap.clone() {
            Some(swap) => crate::swap::swap_mode(shared, call, &swap).await,
            None => fork::fork_mode(shared, call).await,
        },
        Mode::Auto => {
            // The writer is taken before the lookup, so a call recorded meanwhile on the same
            // conversation cannot slip between the two.
            let (conversation, recording) = take_writer(
                &shared,
                &call.session,
                call.continued.clone(),
                call.request.as_ref().ok(),
            )
            .await?;
            if let Ok(parsed) = &call.request {
                match load_and_lookup(
                    &shared,
                    &call.session,
                    call.named.as_deref(),
                    parsed,
                    &call.read,
                )
                .await?
                {
                    (Lookup::Found(turn, turn_idx), replayed_from) => {
                        return Ok(replay::render(
                            &turn,
                            turn_idx,
                            &replayed_from,
                            parsed,
                            call.format,
                            shared.answer_aliases.get(),
                        ));
                    }
                    (Lookup::Diverged(error), _) => return Err(error),
                    (Lookup::NotRecorded(_), _) => {}
                }
            }
            Ok(record::forward(shared, call, conversation, recording).await)
        }
    }
}

/// Replay mode: the recorded answer, or the refusal; a recorded call that answers is marked
/// consumed in the ledger. The request's messages lent by the memo are given back once it
/// is answered: replay only reads a request.
async fn replay_mode(shared: &Arc<Shared>, call: Call) -> Result<Response, ApiError> {
    let request = call
        .request
        .map_err(|message| bad_request(&call.session, message))?;
    let answered = match load_and_lookup(
        shared,
        &call.session,
        call.named.as_deref(),
        &request,
        &call.read,
    )
    .await
    {
        Ok((Lookup::Found(turn, turn_idx), conversation)) => {
            shared
                .ledger
                .consumed(&call.session, &conversation, turn_idx);
            Ok(replay::render(
                &turn,
                turn_idx,
                &conversation,
                &request,
                call.format,
                shared.answer_aliases.get(),
            ))
        }
        Ok((Lookup::Diverged(error) | Lookup::NotRecorded(error), _)) | Err(error) => Err(error),
    };
    shared.memo.give_back(&call.read, request.unified.messages);
    answered
}
