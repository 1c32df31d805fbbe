//! What every handler shares: the config, the store, the replay indexes, the writers and
//! conversations of the sessions in use, the upstream, and the shutdown's two signals.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};

use cuca_calllog::CallLog;
use cuca_events::SessionBackend;
use cuca_replay::SessionReplay;
use tokio::sync::watch;

use crate::config::ProxyConfig;
use crate::conversations::Conversations;
use crate::error::ProxyError;
use crate::matching::Matching;
use crate::replay;
use crate::session::Slots;
use crate::upstream::Upstream;

/// What every handler shares.
pub(crate) struct Shared {
    pub(crate) config: ProxyConfig,
    pub(crate) replay: replay::Loads,
    pub(crate) slots: Slots,
    /// The conversations of each session in use.
    pub(crate) conversations: Arc<Conversations>,
    /// The recorded turns replay has served, per conversation.
    pub(crate) served: replay::Served,
    /// What replay compares, and what it ignores.
    pub(crate) matching: Matching,
    /// What replay served and refused, per session, for a strict replay's report.
    pub(crate) ledger: crate::ledger::Ledger,
    /// Fork mode's tree: the branches made of each recorded conversation or branch, in the
    /// order they were made, so the calls after a divergence continue their branch.
    pub(crate) branches: Mutex<HashMap<String, Vec<String>>>,
    /// Fork mode onto another model: the model each known branch's live calls went to.
    pub(crate) swapped: KnownBranches,
    /// The store, for fork mode's forks.
    pub(crate) backend: Arc<dyn SessionBackend>,
    pub(crate) upstream: Upstream,
    pub(crate) call_log: CallLog,
    /// The redaction rules, compiled once; `None` when none is in force.
    pub(crate) redaction: Option<Arc<cuca_redact::Rules>>,
    /// The request messages read before, by their bytes: read, redacted and keyed once.
    pub(crate) memo: crate::memo::Memo,
    /// The call log's `run` for every call this proxy forwards.
    pub(crate) run_id: String,
    /// Set when a shutdown begins: new calls are refused with a 503 from then on.
    pub(crate) closing: AtomicBool,
    /// Set to `true` when the shutdown's grace is over: every call still in flight ends now
    /// and closes its turn ([`cut`]).
    pub(crate) cut: watch::Sender<bool>,
    /// The workspace snapshotted before each recorded call, when one is watched.
    pub(crate) workspace: std::sync::OnceLock<crate::workspace::WorkspaceWatch>,
    /// Paths requests are read with as other paths (a restored copy of the workspace as the
    /// recorded one), when set.
    pub(crate) aliases: std::sync::OnceLock<crate::aliases::Aliases>,
    /// The same the other way round, for the answers replayed from the recording.
    pub(crate) answer_aliases: std::sync::OnceLock<crate::aliases::Aliases>,
}

impl Shared {
    /// The state of a proxy on `backend` under a validated `config`.
    pub(crate) fn new(
        config: ProxyConfig,
        backend: Arc<dyn SessionBackend>,
        call_log: CallLog,
    ) -> Result<Self, ProxyError> {
        let upstream = Upstream::new(&config)?;
        let redaction = cuca_redact::Rules::new(&config.redaction).map_err(|error| {
            ProxyError::InvalidConfig {
                field: "redaction",
                message: error.to_string(),
            }
        })?;
        let redaction = (!redaction.is_empty()).then(|| Arc::new(redaction));
        let matching = Matching::new(&config.ignore, config.compare_parameters)?
            .ignoring_json_paths(&config.ignore_json_paths)?;
        let replay = replay::Loads::new(SessionReplay::new(Arc::clone(&backend)), matching.clone());
        Ok(Shared {
            memo: crate::memo::Memo::new(
                redaction.clone(),
                replay.shared_keys(),
                config.mode != crate::config::Mode::Record,
                // Replay hands every request back once it is answered (`modes::replay_mode`),
                // and recording once its request is recorded (`record::forward`); auto and
                // fork copy.
                matches!(
                    config.mode,
                    crate::config::Mode::Replay | crate::config::Mode::Record
                ),
            ),
            replay,
            slots: Slots::new(Arc::clone(&backend), config.max_sessions, redaction.clone()),
            conversations: Arc::new(Conversations::new(Arc::clone(&backend))),
            served: replay::Served::default(),
            matching,
            ledger: crate::ledger::Ledger::default(),
            branches: Mutex::default(),
            swapped: KnownBranches::default(),
            backend,
            upstream,
            call_log,
            redaction,
            run_id: format!("{:08x}", rand::random::<u32>()),
            closing: AtomicBool::new(false),
            cut: watch::Sender::new(false),
            workspace: std::sync::OnceLock::new(),
            aliases: std::sync::OnceLock::new(),
            answer_aliases: std::sync::OnceLock::new(),
            config,
        })
    }
}

/// The most branches whose model this proxy remembers; past it the memory is emptied and
/// each branch's model is read again from its recording when next needed.
const MAX_KNOWN_BRANCHES: usize = 4096;

/// The branches whose first live call this proxy knows the model of: made by it, or read.
#[derive(Default)]
pub(crate) struct KnownBranches(std::sync::Mutex<HashMap<String, String>>);

impl KnownBranches {
    pub(crate) fn get(&self, branch: &str) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(branch)
            .cloned()
    }

    pub(crate) fn note(&self, branch: &str, model: &str) {
        let mut known = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if known.len() >= MAX_KNOWN_BRANCHES {
            known.clear();
        }
        known.insert(branch.to_owned(), model.to_owned());
    }
}

/// The call-log sentence of a call the proxy ended because it was shutting down.
pub(crate) const SHUT_DOWN: &str = "the proxy shut down";

/// Resolves once the shutdown's grace is over (never, while the proxy runs).
pub(crate) async fn cut(shutdown: &mut watch::Receiver<bool>) {
    if shutdown.wait_for(|cut| *cut).await.is_err() {
        // The proxy itself is gone: nothing will ever say "cut".
        std::future::pending::<()>().await;
    }
}
