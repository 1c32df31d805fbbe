//! A session's calls in time: one lane per conversation of the session (the base session and
//! its `{base}:conv:{n}` conversations), each call a bar from its start to
//! its end.

use cuca_events::SessionBackend;
use cuca_store_file::FileBackend;

use crate::error::ViewError;
use crate::index::{self, TurnStat};
use crate::{sessions, ViewConfig};

/// Most calls one lane draws: a 12,392-turn session stays one page; the lane says how many
/// it left out.
pub const MAX_BARS: usize = 5_000;

/// One conversation's calls.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Lane {
    /// The session id the conversation is recorded under.
    pub session: String,
    /// Its calls, in order (at most [`MAX_BARS`]).
    pub calls: Vec<TurnStat>,
    /// Calls left out past [`MAX_BARS`].
    pub n_left_out: usize,
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
        let n_left_out = index.turns.len().saturating_sub(MAX_BARS);
        lanes.push(Lane {
            calls: index.turns.iter().take(MAX_BARS).cloned().collect(),
            session,
            n_left_out,
        });
    }
    Ok(lanes)
}
