//! Strict replay: what a replaying proxy served and refused, per replayed session, so that a
//! run can fail when its agent left recorded calls unasked or diverged from the recording,
//! even if the agent swallowed the 409 and exited 0.
//!
//! The proxy keeps a [`Ledger`] as it answers (the recorded calls each conversation served,
//! the first refusals of each session); [`crate::Proxy::replay_report`] lays it over the
//! sessions' recordings and says, call by call, what was consumed.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};

use crate::divergence::FirstDifference;
use crate::refusal::ApiError;
use crate::server::Proxy;

/// How many sessions the ledger follows. The proxy holds writers and indexes for 4,096
/// sessions (`ProxyConfig::max_sessions`); a strict replay is one session, a replay fleet a
/// few hundred, and past the bound only a count is kept, which the report gives.
const MAX_SESSIONS: usize = 4096;

/// How many refusals of one session the ledger keeps whole. The first says what went wrong;
/// an agent that loops on a 409 would otherwise grow the ledger with every retry. Past the
/// bound only their number is counted.
pub const MAX_DIVERGENCES_KEPT: usize = 64;

/// What the ledger knows of one session.
#[derive(Debug, Default)]
struct SessionLedger {
    /// The recorded turns served, by conversation (the session or `{session}:conv:{n}`). A
    /// set of turn numbers each, bounded by the recording's own turns.
    consumed: HashMap<String, BTreeSet<usize>>,
    /// The first [`MAX_DIVERGENCES_KEPT`] refusals.
    divergences: Vec<Divergence>,
    /// Every refusal, kept or not.
    n_divergences: u64,
}

/// What replay served and refused, per session. See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Ledger(Mutex<LedgerInner>);

#[derive(Debug, Default)]
struct LedgerInner {
    sessions: HashMap<String, SessionLedger>,
    n_untracked: u64,
}

impl Ledger {
    fn lock(&self) -> std::sync::MutexGuard<'_, LedgerInner> {
        // Sets and counters: no invariant a panic could break halfway.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session's ledger, made when there is room; `None` (and counted) past the bound.
    fn with<T>(&self, session: &str, f: impl FnOnce(&mut SessionLedger) -> T) -> Option<T> {
        let mut inner = self.lock();
        if !inner.sessions.contains_key(session) && inner.sessions.len() >= MAX_SESSIONS {
            inner.n_untracked += 1;
            return None;
        }
        Some(f(inner.sessions.entry(session.to_owned()).or_default()))
    }

    /// Turn `turn_idx` of `conversation` answered a call on `session`.
    pub(crate) fn consumed(&self, session: &str, conversation: &str, turn_idx: usize) {
        self.with(session, |ledger| {
            ledger
                .consumed
                .entry(conversation.to_owned())
                .or_default()
                .insert(turn_idx);
        });
    }

    /// A call on `session` was refused with `error` (a divergence, a turn not recorded, a
    /// request that could not be read or a recording that could not be).
    pub(crate) fn refused(&self, session: &str, error: &ApiError) {
        let divergence = Divergence::of(error);
        self.with(session, |ledger| {
            ledger.n_divergences += 1;
            if ledger.divergences.len() < MAX_DIVERGENCES_KEPT {
                ledger.divergences.push(divergence);
            }
        });
    }

    /// The sessions seen, in order.
    fn sessions(&self) -> Vec<String> {
        let mut sessions: Vec<String> = self.lock().sessions.keys().cloned().collect();
        sessions.sort();
        sessions
    }
}

/// A call replay refused: the session and recorded call it was about, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Divergence {
    /// The conversation the request was compared with (`demo` or `demo:conv:1`), where the
    /// refusal names one.
    pub conversation: Option<String>,
    /// The recorded call it diverged from, as a point id (`demo:12`), where one was found.
    pub point: Option<String>,
    /// The HTTP status the agent got: 409 for a divergence, 404 for a call past the
    /// recording, 400 for a request that could not be read, 500 for a recording that could
    /// not be.
    pub status: u16,
    /// The error code in the body (`cuca_replay_diverged`, `cuca_turn_not_found`).
    pub code: String,
    /// The request field it is about (`messages[2]`, `temperature`), where there is one.
    pub param: Option<String>,
    /// The refusal's message, as the agent got it.
    pub message: String,
    /// The first difference in context, where one was found.
    pub difference: Option<FirstDifference>,
}

impl Divergence {
    fn of(error: &ApiError) -> Divergence {
        let difference = error.divergence.as_deref().and_then(|value| {
            Some(FirstDifference {
                path: value.get("path")?.as_str()?.to_owned(),
                offset: usize::try_from(value.get("offset")?.as_u64()?).ok()?,
                expected: value.get("expected")?.as_str()?.to_owned(),
                got: value.get("got")?.as_str()?.to_owned(),
            })
        });
        Divergence {
            conversation: error.session.clone(),
            point: error.point.clone(),
            status: error.status.as_u16(),
            code: error.code.to_owned(),
            param: error.param.clone(),
            message: error.message.clone(),
            difference,
        }
    }

    /// The divergence in one sentence: the first difference where one was found, else the
    /// refusal's message.
    pub fn sentence(&self) -> String {
        self.difference
            .as_ref()
            .map_or_else(|| self.message.clone(), FirstDifference::sentence)
    }
}

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
    /// The first [`MAX_DIVERGENCES_KEPT`] refusals.
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

impl Proxy {
    /// The sessions of the store under `{session}:conv:`, read on a blocking thread (a
    /// directory's listing); none when the store cannot list them.
    async fn named_conversations(&self, session: &str) -> Vec<String> {
        let backend = std::sync::Arc::clone(&self.shared.backend);
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
    pub async fn replay_report(&self, sessions: &[String]) -> ReplayReport {
        let ledger = &self.shared.ledger;
        let names: BTreeSet<String> = ledger
            .sessions()
            .into_iter()
            .chain(sessions.iter().cloned())
            .collect();
        let mut outcomes = Vec::with_capacity(names.len());
        for session in names {
            let (consumed, divergences, n_divergences) = ledger
                .with(&session, |l| {
                    (
                        l.consumed.clone(),
                        l.divergences.clone(),
                        l.n_divergences,
                    )
                })
                .unwrap_or_default();
            let mut outcome = SessionOutcome {
                session: session.clone(),
                calls: Vec::new(),
                divergences,
                n_divergences,
                unreadable: None,
            };
            match self.shared.replay.index_conversations(&session).await {
                Ok(conversations) => {
                    // Conversations a caller named (`X-Cuca-Conversation`) are reported too,
                    // after the numbered ones: those the store holds, asked for or not, and
                    // those a call was served from.
                    let stored = self.named_conversations(&session).await;
                    let named: BTreeSet<String> = consumed
                        .keys()
                        .cloned()
                        .chain(stored)
                        .filter(|id| !conversations.iter().any(|(c, _)| c == id))
                        .collect();
                    let mut indexes = conversations;
                    for id in &named {
                        match self.shared.replay.index(id).await {
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
            n_untracked: ledger.lock().n_untracked,
        }
    }
}
