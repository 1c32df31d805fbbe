//! `PostgresBackend`: a [`SessionBackend`] over PostgreSQL, so a fleet of processes on many
//! machines records into, replays from and forks in one store.
//!
//! ```no_run
//! // Needs a PostgreSQL server; `bash .ci/postgres.sh start` runs one on 127.0.0.1:54329.
//! use cuca_events::{SessionBackend, SessionEvent, SessionRecord};
//! use cuca_store_postgres::PostgresBackend;
//!
//! let backend = PostgresBackend::connect("postgres://postgres@127.0.0.1:54329/cuca")?;
//! for (sequence, text) in ["system", "hello"].into_iter().enumerate() {
//!     backend.append(SessionRecord {
//!         session_id: "demo".into(),
//!         sequence: sequence as u64,
//!         timestamp_ms: 0,
//!         event: SessionEvent::Output { text: text.into() },
//!     })?;
//! }
//! let branch = backend.fork("demo", "demo:0")?;
//! assert!(branch.starts_with("demo:fork:demo:0:"));
//! assert_eq!(backend.replay(&branch)?.len(), 1);
//! assert_eq!(backend.replay("demo")?.len(), 3); // two records and the Fork audit record
//! # Ok::<(), cuca_events::PluginError>(())
//! ```
//!
//! # How it works
//!
//! * **Schema.** The backend creates its schema (default `cuca`) and applies versioned
//!   migrations itself, in one transaction under an advisory lock, recording the version in
//!   `cuca_migrations`; processes starting together take turns.
//! * **Rows.** One row per record in `cuca_session_records`: the postcard bytes of the
//!   `SessionRecord` (the `.cslog` payload), plus `kind` and `timestamp_ms` columns to query by.
//!   `(session_id, sequence)` is the primary key.
//! * **Sequences.** An append goes through the `cuca_append` function (migration 2), which
//!   takes the session's advisory lock for its transaction, then refuses a sequence at or
//!   below the session's highest with [`PluginError::SequenceTaken`] naming it (the first
//!   record stays as it was), or inserts: one round trip, and two writers on any machines can
//!   neither both store one sequence nor store a lower one after a higher one. Session ids
//!   pass [`cuca_events::validate_session_id`] (no empty id, no control character).
//! * **Fork.** One transaction, holding the session's lock (and the new id's), copies the
//!   relabelled prefix and appends the Fork audit record at the tail (highest sequence + 1),
//!   or does nothing. The `n` of the new id comes from a
//!   database sequence, so two machines never mint the same one, and advances past ids that
//!   are already in use.
//! * **Threads.** The trait is synchronous and hooks run inside async tasks. The sync `postgres`
//!   client lives on a dedicated connection thread; a call sends a job over a channel and waits
//!   on a std channel for the answer. That works from plain threads and from inside
//!   `current_thread` and `multi_thread` tokio runtimes (no nested-runtime panic). The cost: the
//!   calling thread, which may be a tokio worker, is blocked for one round trip to the server
//!   (≈0.1–1 ms on loopback with a commit), and calls from all threads are served one at a
//!   time over the one connection.
//! * **Durability.** [`Durability::Commit`] (the default): an append returns after its own
//!   commit. [`Durability::Pipelined`] (what `cuca proxy` uses): a session's streamed blocks
//!   return once queued and the connection thread writes everything queued in one statement
//!   and one commit (`cuca_append_batch`, migration 3), so a 1,000-block answer costs a few
//!   commits, not a thousand, and fifty streams share them; every other record returns after
//!   it and everything of its session queued before it committed, so a call whose closing
//!   record is acknowledged is stored whole. Such a record, and a replay, go ahead of other
//!   sessions' queued blocks, so a session beginning among fifty streams does not wait for
//!   theirs. A batch of blocks alone commits without waiting for the
//!   disk (nobody waits on it); the next batch that holds a waiting record waits for its
//!   flush, which covers every commit before it, and the blocks committed without waiting are
//!   kept until then and sent again on a new connection should the old one break. [`Durability`]
//!   says exactly when each record is durable.
//! * **Password.** From the URL, else `PGPASSWORD`, else `~/.pgpass` (`PGPASSFILE`), as libpq
//!   does; never printed ([`PostgresConfig::describe`]).
//! * **Failures.** A broken connection is dropped and reopened on the next call; a read or an
//!   append that hit it is retried once (an append that finds its own bytes already stored
//!   counts as done). When no connection can be made the call fails with
//!   [`PluginError::Backend`] (`backend: "postgres"`), [`Error::Unreachable`] naming the host.
//!   An append is acknowledged only after PostgreSQL committed it, so nothing acknowledged is
//!   lost.
//!
//! # What it does not do
//!
//! It does not pool connections (one per backend instance), does not speak TLS (it is meant for
//! a database on a trusted network or a Unix socket), does not cap the number of records (the
//! database's disk is the cap) and does not cache: every replay reads the database, so replays
//! from other machines see every committed append.
#![forbid(unsafe_code)]

mod config;
mod error;
mod objects;
mod schema;
mod worker;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use cuca_events::{
    point_in_session, BackendGauge, PluginError, SessionBackend, SessionEvent, SessionRecord,
};

pub use config::{
    Durability, IntoPostgresConfig, PostgresConfig, DEFAULT_CONNECT_TIMEOUT, DEFAULT_SCHEMA,
};
pub use error::Error;
pub use objects::{PostgresObjects, MAX_OBJECT_BYTES};

use worker::{Job, Msg, Pending, Shared, Worker};

/// The most pipelined records a backend holds for the server before it refuses more
/// ([`Error::Behind`]): about 100 MB at a kilobyte each, far past what a healthy server lets
/// pile up, so it only bounds memory when the server stalls without failing.
pub const MAX_QUEUED: usize = 100_000;

/// How many sessions' last sequences a pipelined backend remembers; past it the memory is
/// cleared and each session's next append waits for the server once.
const MAX_TAILS: usize = 10_000;

/// Sessions stored in a PostgreSQL database, shared by every process that connects to it.
#[derive(Debug)]
pub struct PostgresBackend {
    jobs: Option<Sender<Msg>>,
    thread: Option<JoinHandle<()>>,
    host: String,
    schema: String,
    durability: Durability,
    shared: Arc<Shared>,
    /// Pipelined mode: the highest sequence this backend sent per session, so a sequence at
    /// or below it is refused at once, and a session's first append waits for the server.
    tails: Mutex<HashMap<String, u64>>,
}

impl PostgresBackend {
    /// Connects, creates the schema if needed and applies pending migrations.
    ///
    /// Takes a URL (`"postgres://user@host:port/dbname"`, `&str` or `String`) or a
    /// [`PostgresConfig`]. Fails with [`PluginError::Validation`] for a URL that does not parse
    /// and with [`PluginError::Backend`] ([`Error::Unreachable`]) when the server cannot be
    /// reached.
    pub fn connect(config: impl IntoPostgresConfig) -> Result<Self, PluginError> {
        let config = config.into_config()?;
        let host = config.describe();
        let schema = config.schema().to_owned();
        let durability = config.durability();
        let shared = Arc::new(Shared::default());
        let (jobs, thread) = worker::spawn(config, Arc::clone(&shared))?;
        Ok(PostgresBackend {
            jobs: Some(jobs),
            thread: Some(thread),
            host,
            schema,
            durability,
            shared,
            tails: Mutex::new(HashMap::new()),
        })
    }

    /// When appends return.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// How many pipelined records are queued for the server now.
    pub fn queued(&self) -> usize {
        self.shared.queued.load(Ordering::Relaxed)
    }

    fn gone(&self) -> PluginError {
        Error::WorkerGone {
            host: self.host.clone(),
        }
        .into()
    }

    /// [`Durability::Pipelined`]'s append (see there for what its answer means).
    fn append_pipelined(&self, record: SessionRecord) -> Result<(), PluginError> {
        let mut pending = Pending::new(&record)?;
        let session_id = record.session_id;
        let mut tails = self
            .tails
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(lost) = self.shared.take_lost(&session_id) {
            tails.remove(&session_id);
            return Err(lost.into_error(&session_id, &self.host));
        }
        let block = pipelines(&record.event);
        let jobs = self.jobs.as_ref().ok_or_else(|| self.gone())?;
        if let (true, Some(&tail)) = (block, tails.get(&session_id)) {
            if record.sequence <= tail {
                return Err(PluginError::SequenceTaken {
                    session_id,
                    sequence: record.sequence,
                    last: tail,
                });
            }
            let queued = self.shared.queued.load(Ordering::Relaxed);
            if queued >= MAX_QUEUED {
                return Err(Error::Behind {
                    host: self.host.clone(),
                    queued,
                }
                .into());
            }
            self.shared.queued.fetch_add(1, Ordering::Relaxed);
            // Sent under the lock, so blocks reach the thread in the order their tails were
            // checked.
            if jobs.send(Msg::Append(pending)).is_err() {
                self.shared.queued.fetch_sub(1, Ordering::Relaxed);
                return Err(self.gone());
            }
            tails.insert(session_id, record.sequence);
            return Ok(());
        }
        drop(tails);
        let (reply_tx, reply_rx) = mpsc::sync_channel(1);
        pending.reply = Some(reply_tx);
        jobs.send(Msg::Append(pending)).map_err(|_| self.gone())?;
        let answer = reply_rx.recv().map_err(|_| self.gone())?;
        let mut tails = self
            .tails
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if tails.len() >= MAX_TAILS {
            tails.clear();
        }
        let known = match &answer {
            Ok(()) => Some(record.sequence),
            Err(PluginError::SequenceTaken { last, .. }) => Some(*last),
            Err(_) => None,
        };
        match known {
            Some(tail) => {
                let entry = tails.entry(session_id).or_insert(tail);
                *entry = (*entry).max(tail);
            }
            None => {
                tails.remove(&session_id);
            }
        }
        answer
    }

    /// Every session the schema holds, sorted by id, with the bytes of its stored records:
    /// the sum of each row's `record` (the postcard encoding of the `SessionRecord`, the
    /// payload a `.cslog` frame holds, without the frame's length and checksum), so about
    /// what the session takes as a file. Not what the database spends on it on disk (row
    /// headers, indexes, TOAST compression), which PostgreSQL does not tell per session. One
    /// grouped query for every session: O(records) on the server, one round trip.
    pub fn session_sizes(&self) -> Result<Vec<(String, u64)>, PluginError> {
        self.call(Worker::session_sizes)
    }

    /// Rewrites a session in one transaction: each record of `updated` replaces the stored
    /// record of its sequence (same session), and `appended` is added after them, when the
    /// session's last sequence is still `expected_last` — the one the caller read it with.
    /// Otherwise nothing changes and the answer is [`PluginError::SequenceTaken`] naming the
    /// last sequence now stored. Appends and forks of the session wait for it (the session's
    /// advisory lock), so a reader sees the session before or after, never between. What
    /// `cuca scrub` writes with.
    pub fn rewrite(
        &self,
        session_id: &str,
        expected_last: u64,
        updated: Vec<SessionRecord>,
        appended: Vec<SessionRecord>,
    ) -> Result<(), PluginError> {
        let session = session_id.to_owned();
        // The appended records move the tail: the session's next append asks the server.
        if let Ok(mut tails) = self.tails.lock() {
            tails.remove(&session);
        }
        self.call(move |worker| worker.rewrite(&session, expected_last, &updated, &appended))
    }

    /// Where the database is: `host:port/dbname`.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The schema holding the sessions.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Runs `op` on the connection thread, after everything sent before it, and waits for
    /// its answer.
    fn call<T: Send + 'static>(
        &self,
        op: impl FnOnce(&mut Worker) -> Result<T, PluginError> + Send + 'static,
    ) -> Result<T, PluginError> {
        let (reply_tx, reply_rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |worker| {
            // The caller may have stopped waiting only if its thread died; nothing to do then.
            let _ = reply_tx.send(op(worker));
        });
        let jobs = self.jobs.as_ref().ok_or_else(|| self.gone())?;
        jobs.send(Msg::Job(job)).map_err(|_| self.gone())?;
        reply_rx.recv().map_err(|_| self.gone())?
    }
}

impl Drop for PostgresBackend {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop; joining waits for a throwaway schema to
        // be dropped, so a test's schema is gone when its backend is.
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Whether [`Durability::Pipelined`] queues a record of this kind without waiting: the
/// records of a call between its messages and its `TokenUsage` (the streamed blocks and the
/// call's own bookkeeping). A session's prompts, messages and tool results (what a writer
/// counts to know what is recorded), its `TokenUsage` (the record that closes a turn), forks
/// and any kind added later wait for their commit.
fn pipelines(event: &SessionEvent) -> bool {
    matches!(
        event,
        SessionEvent::Reasoning { .. }
            | SessionEvent::Output { .. }
            | SessionEvent::ToolCall { .. }
            | SessionEvent::CallRequest { .. }
            | SessionEvent::CallFinish { .. }
            | SessionEvent::CallIncomplete { .. }
            | SessionEvent::CallWire { .. }
            | SessionEvent::Latency { .. }
    )
}

impl SessionBackend for PostgresBackend {
    fn name(&self) -> &str {
        "postgres"
    }

    fn append(&self, record: SessionRecord) -> Result<(), PluginError> {
        match self.durability {
            Durability::Pipelined => self.append_pipelined(record),
            _ => self.call(move |worker| worker.append(&record)),
        }
    }

    fn replay(&self, session_id: &str) -> Result<Vec<SessionRecord>, PluginError> {
        let (reply_tx, reply_rx) = mpsc::sync_channel(1);
        let jobs = self.jobs.as_ref().ok_or_else(|| self.gone())?;
        jobs.send(Msg::Replay(session_id.to_owned(), reply_tx))
            .map_err(|_| self.gone())?;
        reply_rx.recv().map_err(|_| self.gone())?
    }

    fn fork(&self, session_id: &str, point_id: &str) -> Result<String, PluginError> {
        let point = point_in_session(session_id, point_id)?;
        let session_id = session_id.to_owned();
        let point_id = point_id.to_owned();
        // The audit record takes the tail: the session's next append asks the server again.
        if let Ok(mut tails) = self.tails.lock() {
            tails.remove(&session_id);
        }
        self.call(move |worker| worker.fork(&session_id, &point_id, point))
    }

    fn sessions(&self) -> Result<Vec<String>, PluginError> {
        self.call(Worker::sessions)
    }

    /// Counts every record in the schema (a full count: O(records) on the server) and reports
    /// the table's size on disk, indexes included; both `None` when the database is
    /// unreachable. There is no cap.
    fn gauge(&self) -> BackendGauge {
        match self.call(Worker::gauge) {
            Ok((records, bytes)) => BackendGauge {
                records: u64::try_from(records).ok(),
                max_records: None,
                bytes_on_disk: u64::try_from(bytes).ok(),
            },
            Err(_) => BackendGauge::default(),
        }
    }
}
