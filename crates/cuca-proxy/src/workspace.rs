//! The workspace a recording proxy watches: a snapshot taken before each recorded call is
//! forwarded and written first among its request records, and the shell commands the shim of
//! `cuca run` reports (`POST /cuca/shell`, [`crate::shell_route`]), written into the session
//! of the latest recorded call — or, before any, ahead of the first call's records.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use cuca_events::SessionEvent;
use cuca_workspace::{ObjectId, Snapshotter};

/// The most shell commands held for a first call that has not come: a shim reporting in a
/// loop before any model call must not grow the proxy without bound.
const MAX_PENDING: usize = 1024;

/// A workspace watched by a recording proxy ([`crate::Proxy::watch_workspace`]).
pub struct WorkspaceWatch {
    snapshotter: Arc<Mutex<Snapshotter>>,
    state: Mutex<WatchState>,
}

impl std::fmt::Debug for WorkspaceWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkspaceWatch").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct WatchState {
    /// Each session's latest recorded snapshot: the next one's changes are against it.
    last: HashMap<String, ObjectId>,
    /// The latest recorded snapshot of any session: a new conversation's first snapshot is
    /// compared with it (a subagent's conversation starts from the files as they were).
    latest: Option<ObjectId>,
    /// The session of the latest recorded call: where a shell command is written.
    session: Option<String>,
    /// Shell commands reported before any call was recorded.
    pending: Vec<SessionEvent>,
}

/// What is written before one call's request records, and what it changes once written.
pub(crate) struct Prelude {
    pub(crate) events: Vec<SessionEvent>,
    snapshot: Option<ObjectId>,
    n_pending: usize,
}

impl WorkspaceWatch {
    /// Watches the workspace `snapshotter` walks. `start`: the snapshot the workspace was
    /// restored from, if it was (a replay or fork run), so the first call's change list is
    /// against it.
    pub fn new(snapshotter: Snapshotter, start: Option<ObjectId>) -> Self {
        WorkspaceWatch {
            snapshotter: Arc::new(Mutex::new(snapshotter)),
            state: Mutex::new(WatchState {
                latest: start,
                ..WatchState::default()
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, WatchState> {
        // Every change to the state is a single assignment or push: a panic elsewhere while
        // it was held leaves it whole.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The prelude of a call about to be forwarded in `session`: the shell commands held
    /// for it and the workspace's snapshot now. A failed snapshot is logged and left out;
    /// the call goes on (the model's half is still worth recording).
    pub(crate) async fn before_call(&self, session: &str) -> Prelude {
        let (previous, pending) = {
            let mut state = self.state();
            let previous = state.last.get(session).copied().or(state.latest);
            (previous, std::mem::take(&mut state.pending))
        };
        let snapshotter = Arc::clone(&self.snapshotter);
        let taken = tokio::task::spawn_blocking(move || {
            let mut snapshotter = snapshotter
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            snapshotter.snapshot(previous.as_ref())
        })
        .await;
        let n_pending = pending.len();
        let mut events = pending;
        let mut snapshot = None;
        match taken {
            Ok(Ok(taken)) => {
                tracing::debug!(session, snapshot = %taken.id, n_read = taken.n_read, n_changes = taken.changes.len(), "workspace snapshot");
                snapshot = Some(taken.id);
                events.push(taken.event());
            }
            Ok(Err(error)) => {
                tracing::error!(
                    session,
                    "the workspace snapshot failed; the call is recorded without it: {error}"
                );
            }
            Err(error) => {
                tracing::error!(session, "the workspace snapshot stopped: {error}");
            }
        }
        Prelude {
            events,
            snapshot,
            n_pending,
        }
    }

    /// The prelude was written in `session`.
    /// The session a shell command reported now is recorded in (that of the latest recorded
    /// call); `None` when no call was recorded yet, and the command is held for the first
    /// call's records (up to [`MAX_PENDING`]; past it, dropped with a warning).
    pub(crate) fn session_for(&self, event: SessionEvent) -> Option<String> {
        let mut state = self.state();
        match state.session.clone() {
            Some(session) => Some(session),
            None => {
                if state.pending.len() < MAX_PENDING {
                    state.pending.push(event);
                } else {
                    tracing::warn!("{MAX_PENDING} shell commands are held for a first model call already; this one is not recorded");
                }
                None
            }
        }
    }

    pub(crate) fn recorded(&self, session: &str, prelude: Prelude) {
        let mut state = self.state();
        if let Some(id) = prelude.snapshot {
            state.last.insert(session.to_owned(), id);
            state.latest = Some(id);
        }
        state.session = Some(session.to_owned());
    }

    /// The prelude was not written (the call was refused, or not recorded): its shell
    /// commands wait for the next call.
    pub(crate) fn unrecorded(&self, prelude: Prelude) {
        let mut state = self.state();
        let mut held: Vec<SessionEvent> =
            prelude.events.into_iter().take(prelude.n_pending).collect();
        held.append(&mut state.pending);
        held.truncate(MAX_PENDING);
        state.pending = held;
    }
}
