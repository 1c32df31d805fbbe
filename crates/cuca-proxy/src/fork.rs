//! Fork mode: what matches the recording is replayed; a call that diverges from its
//! conversation is forwarded live and recorded in a branch of it — a fork at the last call
//! that matched (`SessionBackend::fork`, so the audit record and the id follow seed 000), or
//! a new conversation when none did — and the calls after it continue that branch.
//!
//! The branches made of a conversation form a tree. A call is matched against the
//! conversation and every branch made of it: a branch that answers it replays, a branch whose
//! whole recording the call continues is continued (with that branch's writer held, and only
//! if it still is one once held, so concurrent re-runs never share a branch unless their
//! calls match it), and otherwise the node it matched longest is forked at the call's own
//! divergence point — so an id grows with how deeply a divergence is nested, never with how
//! many variants were tried. The tree holds the forks the store holds as well as those this
//! process made, so a changed run another process (or this one before a restart) recorded
//! replays from its branch, free.

use std::collections::VecDeque;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use cuca_events::{fork_parent, PluginError};

use crate::call::{load_and_lookup, Call};
use crate::headers::FORKED_FROM_HEADER;
use crate::index::TurnIndex;
use crate::placement;
use crate::record;
use crate::refusal::ApiError;
use crate::replay::{self, Lookup};
use crate::state::Shared;

/// How many times a call looks for a branch to continue when each one it tries is taken by a
/// concurrent call first; then it forks a branch of its own.
const MAX_TRIES: usize = 8;

/// A node of a conversation's tree as one call sees it.
struct Node {
    id: String,
    index: Arc<TurnIndex>,
    /// How many of the node's turns, from the first, the call agrees with.
    matched: usize,
    /// How many forks deep the node is (the recorded conversation: 0).
    depth: usize,
}

pub(crate) async fn fork_mode(shared: Arc<Shared>, call: Call) -> Result<Response, ApiError> {
    let (format, session) = (call.format, call.session.clone());
    let Ok(parsed) = &call.request else {
        let recording = placement::recording(&shared, &session).await?;
        return Ok(record::forward(shared, call, session, recording).await);
    };
    let (why, original) = match load_and_lookup(&shared, &session, None, parsed, &call.read).await?
    {
        (Lookup::Found(turn, turn_idx), replayed_from) => {
            return Ok(replay::render(
                &turn,
                turn_idx,
                &replayed_from,
                parsed,
                format,
                shared.answer_aliases.get(),
            ));
        }
        (Lookup::NotRecorded(_), _) => {
            let placed = placement::place(&shared, &session, Some(parsed)).await?;
            let recording = placement::placed_recording(&shared, &session, &placed).await?;
            return Ok(record::forward(shared, call, placed.id, recording).await);
        }
        (Lookup::Diverged(error), conversation) => (error.message, conversation),
    };
    // The forks in the store (another process's, or this one's before a restart) belong to
    // the tree as much as the branches this process made: a changed run already recorded
    // replays from its branch whichever process asks.
    let stored = stored_forks(&shared).await?;
    let mut best: Option<Node> = None;
    for _ in 0..MAX_TRIES {
        let mut open = None;
        best = None;
        for (id, depth) in tree(&shared, &original, &stored) {
            let index = index(&shared, &id).await?;
            let matched = replay::matched_turns(&index, parsed, &shared.matching);
            if id != original {
                match replay::lookup(
                    &index,
                    &id,
                    parsed,
                    &shared.served.of(&id),
                    &shared.matching,
                )
                .await?
                {
                    Lookup::Found(turn, turn_idx) => {
                        shared.served.mark(&id, turn_idx);
                        return Ok(replay::render(
                            &turn,
                            turn_idx,
                            &id,
                            parsed,
                            format,
                            shared.answer_aliases.get(),
                        ));
                    }
                    Lookup::NotRecorded(_) if matched == index.len() && open.is_none() => {
                        open = Some(id.clone());
                    }
                    _ => {}
                }
            }
            // The longest match; of equals, the shallowest node (the shortest id).
            if best.as_ref().is_none_or(|b| {
                (matched, std::cmp::Reverse(depth)) > (b.matched, std::cmp::Reverse(b.depth))
            }) {
                best = Some(Node {
                    id,
                    index,
                    matched,
                    depth,
                });
            }
        }
        let Some(branch) = open else {
            break;
        };
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
    }
    // A branch of its own, from the node the call matched longest.
    let Some(node) = best else {
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "cuca_replay_failed",
            format!("session {original:?} has no recording to fork"),
        )
        .in_session(&original));
    };
    let mut forked_from = None;
    let branch = match node
        .matched
        .checked_sub(1)
        .and_then(|t| node.index.turns().get(t))
    {
        Some(last) => {
            let point = format!("{}:{}", node.id, last.sequence_range().end());
            // The recorded conversation is only read here, so it is let go once forked; a
            // branch may be one this proxy goes on recording into.
            let forked = fork_at(&shared, &node.id, &point, node.depth == 0).await;
            let fork = forked.map_err(|message| {
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "server_error",
                    "cuca_fork_failed",
                    format!("cannot fork session {:?} at {point}: {message}", node.id),
                )
                .in_session(&node.id)
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
    tracing::info!(from = %node.id, to = %branch, "the call diverges from the recording; recording it live in a branch");
    let note = match &forked_from {
        Some(point) => format!(
            "diverged from the recording of {} after {point}: forwarded live and recorded in its fork {branch} ({why})",
            node.id
        ),
        None => format!(
            "diverged from the recording of {} at its first call: forwarded live and recorded in the new conversation {branch} ({why})",
            node.id
        ),
    };
    shared
        .branches
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(node.id.clone())
        .or_default()
        .push(branch.clone());
    let mut recording = placement::recording(&shared, &branch).await?;
    recording.note = Some(note);
    let mut response = record::forward(shared, call, branch, recording).await;
    if let Some(value) = forked_from.and_then(|point| HeaderValue::from_str(&point).ok()) {
        response
            .headers_mut()
            .insert(HeaderName::from_static(FORKED_FROM_HEADER), value);
    }
    Ok(response)
}

/// The recorded conversation `root` and every branch of it, breadth first (each with its
/// depth): those this proxy made, in the order it made them, then the forks `stored` holds
/// that it did not make.
fn tree(shared: &Shared, root: &str, stored: &[String]) -> Vec<(String, usize)> {
    let branches = shared
        .branches
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let mut out: Vec<(String, usize)> = Vec::new();
    let mut queue = VecDeque::from([(root.to_owned(), 0)]);
    while let Some((id, depth)) = queue.pop_front() {
        let made = branches.get(&id).into_iter().flatten();
        let found = stored
            .iter()
            .filter(|fork| fork_parent(fork).is_some_and(|(parent, _)| parent == id));
        for child in made.chain(found) {
            let known = out
                .iter()
                .chain(queue.iter())
                .any(|(seen, _)| seen == child);
            if !known {
                queue.push_back((child.clone(), depth + 1));
            }
        }
        out.push((id, depth));
    }
    out
}

/// How long a fork waits for another process that holds the session it forks open (a file
/// store's lock: it is forking the same recording, and lets go as soon as it has).
const FORK_LOCK_WAIT: Duration = Duration::from_secs(10);

/// Forks `from` at `at` on a blocking thread, waiting up to [`FORK_LOCK_WAIT`] while another
/// process holds `from`; `release`: let go of `from` once forked (see
/// `SessionBackend::release`), when this proxy does not record into it, so another proxy can
/// fork it too.
pub(crate) async fn fork_at(
    shared: &Shared,
    from: &str,
    at: &str,
    release: bool,
) -> Result<String, String> {
    let backend = Arc::clone(&shared.backend);
    let (from, at) = (from.to_owned(), at.to_owned());
    tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + FORK_LOCK_WAIT;
        loop {
            match backend.fork(&from, &at) {
                Ok(branch) => {
                    if release {
                        backend.release(&from);
                    }
                    return Ok(branch);
                }
                Err(PluginError::Locked { .. }) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(error) => return Err(error.to_string()),
            }
        }
    })
    .await
    .map_err(|join| join.to_string())
    .and_then(|forked| forked)
}

/// Every fork the store holds (`{parent}:fork:{point}:{n}`), sorted; on a blocking thread,
/// as listing may read a directory or a database.
pub(crate) async fn stored_forks(shared: &Shared) -> Result<Vec<String>, ApiError> {
    let backend = Arc::clone(&shared.backend);
    let listed = tokio::task::spawn_blocking(move || backend.sessions())
        .await
        .map_err(|join| join.to_string())
        .and_then(|listed| listed.map_err(|error| error.to_string()));
    let mut forks: Vec<String> = listed
        .map_err(|message| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "cuca_replay_failed",
                format!("cannot list the store's sessions to find the recorded forks: {message}"),
            )
        })?
        .into_iter()
        .filter(|id| fork_parent(id).is_some())
        .collect();
    forks.sort();
    Ok(forks)
}

/// A session's replay index, refreshed, or the 500 of a store that cannot be read.
pub(crate) async fn index(shared: &Shared, session: &str) -> Result<Arc<TurnIndex>, ApiError> {
    shared.replay.index(session).await.map_err(|message| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "cuca_replay_failed",
            message,
        )
        .in_session(session)
    })
}
