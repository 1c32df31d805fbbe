//! A session's calls in time: one lane per conversation of the session (the base session and
//! its `{base}:conv:{n}` conversations), each call a bar from its start to
//! its end.

use std::sync::Arc;

use cuca_events::SessionBackend;
use cuca_store_file::FileBackend;

use crate::error::ViewError;
use crate::index::{self, SessionIndex, TurnStat};
use crate::{sessions, ViewConfig};

/// One conversation's calls.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Lane {
    /// The session id the conversation is recorded under.
    pub session: String,
    /// Its index: every call, in order (shared with the session pages' cache, never copied).
    pub index: Arc<SessionIndex>,
}

impl Lane {
    /// Its calls, in order: all of them (the page aggregates what it cannot draw one by one).
    pub fn calls(&self) -> &[TurnStat] {
        &self.index.turns
    }
}

/// The base session `id` belongs to: the base of a conversation id, or `id` itself.
pub fn base_of(id: &str) -> &str {
    cuca_events::conversation_parent(id).map_or(id, |(base, _)| base)
}

/// The lanes of `id`'s session: its base first, then each conversation by number.
pub fn lanes(config: &ViewConfig, id: &str) -> Result<Vec<Lane>, ViewError> {
    let base = base_of(id).to_owned();
    let mut members: Vec<(u64, String)> = Vec::new();
    for dir in &config.session_dirs {
        for other in FileBackend::new(dir.clone())?.sessions()? {
            if other == base {
                members.push((0, other));
            } else if let Some((of, n)) = cuca_events::conversation_parent(&other) {
                if of == base {
                    members.push((n, other));
                }
            }
        }
    }
    members.sort();
    members.dedup();
    if members.is_empty() {
        return Err(ViewError::UnknownSession {
            session: id.to_owned(),
        });
    }
    let mut lanes = Vec::new();
    for (_, session) in members {
        let backend = sessions::locate(config, &session)?;
        let index = index::of(&backend, &session)?;
        lanes.push(Lane { session, index });
    }
    Ok(lanes)
}
