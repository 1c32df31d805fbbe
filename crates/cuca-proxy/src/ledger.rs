//! What a replaying proxy served and refused, per session: the ledger a strict replay's
//! report ([`crate::strict`]) is made from.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};

use crate::divergence::FirstDifference;
use crate::refusal::ApiError;

/// How many sessions the ledger follows. The proxy holds writers and indexes for 4,096
/// sessions (`ProxyConfig::max_sessions`); a strict replay is one session, a replay fleet a
/// few hundred, and past the bound only a count is kept, which the report gives.
const MAX_SESSIONS: usize = 4096;

/// How many refusals of one session the ledger keeps whole. The first says what went wrong;
/// an agent that loops on a 409 would otherwise grow the ledger with every retry. Past the
/// bound only their number is counted.
pub const MAX_DIVERGENCES_KEPT: usize = 64;

/// How many refusals the ledger keeps whole over all its sessions. Each is at most a few
/// kilobytes (its message is cut at [`MAX_MESSAGE_CHARS`], its quotes are already clipped), so
/// a proxy replaying for a fleet for weeks keeps a few megabytes of them at most, not
/// [`MAX_SESSIONS`] × [`MAX_DIVERGENCES_KEPT`]; past it only their number is counted.
const MAX_DIVERGENCES_KEPT_IN_ALL: usize = 1024;

/// The longest refusal message the ledger keeps. Divergence messages quote at most 160
/// characters of each side; a message longer than this is a request error quoting the body,
/// and its start says what it is.
const MAX_MESSAGE_CHARS: usize = 2048;

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

/// What [`Ledger::of`] gives: the turns served by conversation, the refusals kept, and how
/// many there were.
pub(crate) type SessionRecordOf = (HashMap<String, BTreeSet<usize>>, Vec<Divergence>, u64);

/// What replay served and refused, per session. See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Ledger(Mutex<LedgerInner>);

#[derive(Debug, Default)]
struct LedgerInner {
    sessions: HashMap<String, SessionLedger>,
    n_untracked: u64,
    /// Refusals kept whole, over every session.
    n_kept: usize,
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
        let mut inner = self.lock();
        if !inner.sessions.contains_key(session) && inner.sessions.len() >= MAX_SESSIONS {
            inner.n_untracked += 1;
            return;
        }
        let room = inner.n_kept < MAX_DIVERGENCES_KEPT_IN_ALL;
        let ledger = inner.sessions.entry(session.to_owned()).or_default();
        ledger.n_divergences += 1;
        if room && ledger.divergences.len() < MAX_DIVERGENCES_KEPT {
            ledger.divergences.push(divergence);
            inner.n_kept += 1;
        }
    }

    /// What the ledger holds of `session`: the turns served by conversation, the refusals
    /// kept, and how many there were (nothing, for a session it never saw).
    pub(crate) fn of(&self, session: &str) -> SessionRecordOf {
        let inner = self.lock();
        inner
            .sessions
            .get(session)
            .map_or_else(Default::default, |l| {
                (l.consumed.clone(), l.divergences.clone(), l.n_divergences)
            })
    }

    /// Calls on sessions past the bound, whose outcome was not kept.
    pub(crate) fn n_untracked(&self) -> u64 {
        self.lock().n_untracked
    }

    /// The sessions seen, in order.
    pub(crate) fn sessions(&self) -> Vec<String> {
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
        let difference = error.divergence().and_then(|value| {
            Some(FirstDifference {
                path: value.get("path")?.as_str()?.to_owned(),
                offset: usize::try_from(value.get("offset")?.as_u64()?).ok()?,
                expected: value.get("expected")?.as_str()?.to_owned(),
                got: value.get("got")?.as_str()?.to_owned(),
            })
        });
        Divergence {
            conversation: error.session.clone(),
            point: error.point().map(str::to_owned),
            status: error.status.as_u16(),
            code: error.code.to_owned(),
            param: error.param.clone(),
            message: match error.message.char_indices().nth(MAX_MESSAGE_CHARS) {
                Some((cut, _)) => format!("{}…", &error.message[..cut]),
                None => error.message.clone(),
            },
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

#[cfg(test)]
mod tests;
