//! Strict replay: what a replaying proxy served and refused, laid over the recordings of the
//! sessions replayed, so that a run can fail when its agent left recorded calls unasked or
//! diverged from the recording, even if the agent swallowed the 409 and exited 0.
//!
//! The proxy keeps a ledger as it answers ([`crate::ledger`]: the recorded calls each
//! conversation served, the first refusals of each session); [`report`], behind
//! [`crate::Proxy::replay_report`], says call by call what was consumed.

use std::collections::BTreeSet;

use crate::ledger::Divergence;
use crate::state::Shared;

/// One recorded call of a replayed session, and whether a request consumed it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordedCall {
    /// Its conversation: the session, or `{session}:conv:{n}`.
    pub conversation: String,
    /// Its turn in the conversation, counted from 1 as `cuca replay --turn` counts.
    pub turn: usize,
    /// Its point id: `{conversation}:{sequence}` of its first record.
    pub point: String,
    /// Whether a request was answered with it.
    pub consumed: bool,
}

/// What a strict replay found in one session.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionOutcome {
    /// The session replayed.
    pub session: String,
    /// Its recorded calls in order, conversation by conversation. Only calls that came back
    /// whole count: a call the recorder marked incomplete (cut short, then retried) is never
    /// served, so it is not one the agent owes.
    pub calls: Vec<RecordedCall>,
    /// The first [`crate::MAX_DIVERGENCES_KEPT`] refusals.
    pub divergences: Vec<Divergence>,
    /// How many refusals there were in all.
    pub n_divergences: u64,
    /// Why the recording could not be read for the report, when it could not.
    pub unreadable: Option<String>,
}

impl SessionOutcome {
    /// The recorded calls no request consumed.
    pub fn unconsumed(&self) -> impl Iterator<Item = &RecordedCall> {
        self.calls.iter().filter(|call| !call.consumed)
    }

    /// Whether the session replayed whole: every call consumed, none refused, its
    /// recording read.
    pub fn passed(&self) -> bool {
        self.n_divergences == 0 && self.unreadable.is_none() && self.unconsumed().count() == 0
    }
}

/// What a strict replay found, session by session. See [`crate::Proxy::replay_report`].
/// The default is the report of a replay that served nothing and was asked about nothing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ReplayReport {
    /// Each session, in name order.
    pub sessions: Vec<SessionOutcome>,
    /// Calls on sessions past the ledger's bound, whose outcome was not kept.
    pub n_untracked: u64,
}

impl ReplayReport {
    /// Whether every session replayed whole.
    pub fn passed(&self) -> bool {
        self.n_untracked == 0 && self.sessions.iter().all(SessionOutcome::passed)
    }
}

/// The sessions of the store under `{session}:conv:`, read on a blocking thread (a
/// directory's listing); none when the store cannot list them.
async fn named_conversations(shared: &Shared, session: &str) -> Vec<String> {
    let backend = std::sync::Arc::clone(&shared.backend);
    let prefix = format!("{session}:conv:");
    tokio::task::spawn_blocking(move || {
        backend
            .sessions()
            .map(|all| {
                all.into_iter()
                    .filter(|id| id.starts_with(&prefix))
                    .collect()
            })
            .unwrap_or_default()
    })
    .await
    .unwrap_or_default()
}

/// What replay served and refused in each session a call came in on, and in each of
/// `sessions` (a session no call asked for has every recorded call unconsumed): for every
/// recorded call, whether a request consumed it, and the calls refused. `cuca run
/// --strict` and `cuca proxy --strict` fail on it.
pub(crate) async fn report(shared: &Shared, sessions: &[String]) -> ReplayReport {
    let ledger = &shared.ledger;
    let names: BTreeSet<String> = ledger
        .sessions()
        .into_iter()
        .chain(sessions.iter().cloned())
        .collect();
    let mut outcomes = Vec::with_capacity(names.len());
    for session in names {
        let (consumed, divergences, n_divergences) = ledger.of(&session);
        let mut outcome = SessionOutcome {
            session: session.clone(),
            calls: Vec::new(),
            divergences,
            n_divergences,
            unreadable: None,
        };
        match shared.replay.every_conversation(&session).await {
            Ok(conversations) => {
                // Conversations a caller named (`X-Cuca-Conversation`) are reported too,
                // after the numbered ones: those the store holds, asked for or not, and
                // those a call was served from.
                let stored = named_conversations(shared, &session).await;
                let named: BTreeSet<String> = consumed
                    .keys()
                    .cloned()
                    .chain(stored)
                    .filter(|id| !conversations.iter().any(|(c, _)| c == id))
                    .collect();
                let mut indexes = conversations;
                for id in &named {
                    match shared.replay.index(id).await {
                        Ok(index) => indexes.push((id.clone(), index)),
                        Err(message) => outcome.unreadable = Some(message),
                    }
                }
                for (id, index) in indexes {
                    let served = consumed.get(&id);
                    for (turn_idx, turn) in index.turns().iter().enumerate() {
                        if !(turn.complete && turn.is_whole()) {
                            continue;
                        }
                        outcome.calls.push(RecordedCall {
                            point: format!("{id}:{}", turn.sequence_range().start()),
                            conversation: id.clone(),
                            turn: turn_idx + 1,
                            consumed: served.is_some_and(|s| s.contains(&turn_idx)),
                        });
                    }
                }
            }
            Err(message) => outcome.unreadable = Some(message),
        }
        if outcome.calls.is_empty() && outcome.unreadable.is_none() {
            // Nothing to replay is no pass: a misspelt session or an empty store.
            outcome.unreadable = Some(format!("session {session:?} has no recorded call"));
        }
        outcomes.push(outcome);
    }
    ReplayReport {
        sessions: outcomes,
        n_untracked: ledger.n_untracked(),
    }
}
