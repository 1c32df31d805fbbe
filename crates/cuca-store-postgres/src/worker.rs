//! The connection thread: owns the one `postgres::Client` and serves the backend's requests in
//! order, except that what someone waits for goes ahead of other sessions' queued blocks.
//!
//! The `postgres` crate is synchronous on the outside but drives its connection with a private
//! tokio runtime, so calling it on a thread that is already inside a tokio runtime panics
//! ("Cannot start a runtime from within a runtime"). Keeping the client on a plain thread of its
//! own makes the backend callable from sync code, from `current_thread` runtimes and from
//! `multi_thread` workers alike: the caller only sends a job and waits on a std channel.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use cuca_events::{fork_session_id, validate_session_id, PluginError, SessionEvent, SessionRecord};
use postgres::error::SqlState;
use postgres::{Client, Row, Statement};

use crate::config::PostgresConfig;
use crate::error::Error;
use crate::schema::{connect, quote_ident, SESSION_LOCK};

/// A request for the connection thread; it answers on a channel it captured.
pub(crate) type Job = Box<dyn FnOnce(&mut Worker) + Send>;

/// What the connection thread is sent, served in the order sent.
pub(crate) enum Msg {
    /// Any operation: served after every record sent before it is written.
    Job(Job),
    /// A replay of one session: served after every record of that session sent before it
    /// is written, ahead of other sessions' blocks still held, and read in one statement
    /// with every other replay waiting then.
    Replay(String, Replied),
    /// A record of a pipelined backend; appends queued together are written in one batch.
    Append(Pending),
}

/// Where a replay's answer goes.
pub(crate) type Replied = SyncSender<Result<Vec<SessionRecord>, PluginError>>;

/// A record on its way to the server, encoded by the caller.
pub(crate) struct Pending {
    pub(crate) session_id: String,
    pub(crate) sequence: u64,
    kind: &'static str,
    timestamp_ms: i64,
    bytes: Vec<u8>,
    /// Where the answer goes; `None` for a block the caller does not wait for.
    pub(crate) reply: Option<SyncSender<Result<(), PluginError>>>,
}

impl Pending {
    pub(crate) fn new(record: &SessionRecord) -> Result<Self, PluginError> {
        let session_id = record.session_id.as_str();
        validate_session_id(session_id)?;
        to_i64("sequence", record.sequence, session_id)?;
        Ok(Pending {
            session_id: session_id.to_owned(),
            sequence: record.sequence,
            kind: record.event.kind(),
            timestamp_ms: to_i64("timestamp_ms", record.timestamp_ms, session_id)?,
            bytes: encode(record)?,
            reply: None,
        })
    }
}

/// The most records one batch statement carries; more queued go in the next batch.
const MAX_BATCH: usize = 4096;

/// The most rows, and bytes, the connection thread keeps for re-sending (rows committed
/// without waiting for the disk since the last commit that waited); a batch that would pass
/// either waits for its commit, which makes them all durable and frees them.
const MAX_UNSYNCED: usize = 4096;
const MAX_UNSYNCED_BYTES: usize = 16 << 20;

/// Pipelined records accepted but not stored, per session, until the session's next append
/// reports them.
#[derive(Debug)]
pub(crate) struct Lost {
    first: u64,
    last: u64,
    count: u64,
    reason: String,
}

impl Lost {
    pub(crate) fn into_error(self, session_id: &str, host: &str) -> PluginError {
        Error::NotStored {
            session_id: session_id.to_owned(),
            first: self.first,
            last: self.last,
            count: self.count,
            host: host.to_owned(),
            reason: self.reason,
        }
        .into()
    }
}

/// What the callers of a pipelined backend and its connection thread share.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    lost: Mutex<HashMap<String, Lost>>,
    /// Pipelined records sent and not yet written (or given up).
    pub(crate) queued: AtomicUsize,
}

impl Shared {
    fn lost(&self) -> MutexGuard<'_, HashMap<String, Lost>> {
        // The map is only ever left whole: a panic cannot stop an insert halfway.
        self.lost
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The session's lost records, taken: they are reported once.
    pub(crate) fn take_lost(&self, session_id: &str) -> Option<Lost> {
        self.lost().remove(session_id)
    }

    fn lose(&self, session_id: &str, sequence: u64, reason: impl FnOnce() -> String) {
        let mut lost = self.lost();
        match lost.get_mut(session_id) {
            Some(entry) => {
                entry.first = entry.first.min(sequence);
                entry.last = entry.last.max(sequence);
                entry.count += 1;
            }
            None => {
                lost.insert(
                    session_id.to_owned(),
                    Lost {
                        first: sequence,
                        last: sequence,
                        count: 1,
                        reason: reason(),
                    },
                );
            }
        }
    }
}

const INSERT: &str = "INSERT INTO cuca_session_records (session_id, sequence, kind, timestamp_ms, record) VALUES ($1, $2, $3, $4, $5)";

/// An append under the sequence rule (migration 2): NULL when stored, else the session's
/// highest sequence, which the refused one was not above.
const APPEND: &str = "SELECT cuca_append($1, $2, $3, $4, $5)";

/// The records of the sessions in `$1`, each session's in append order: one statement for
/// every replay waiting, so replays of many sessions cost one round trip.
const REPLAY: &str = "SELECT sequence, record, session_id FROM cuca_session_records \
     WHERE session_id = ANY($1) ORDER BY position";

/// Many appends in one statement (migration 3): per row NULL (stored), the session's highest
/// (refused) or -1 (not tried, after a refused row of the same session).
///
/// `$7` says whether the commit waits for the disk. When it does, `txid_current()` gives the
/// transaction an id even when it stores nothing (a batch that only finds rows already
/// stored, or none at all), so it writes a commit record and PostgreSQL flushes the log up to
/// it: every transaction committed before it on the server, the ones committed without
/// waiting included, is then durable. When it does not, `synchronous_commit` is off for this
/// transaction only (`set_config(…, true)`), and the server's own setting is left alone for
/// the ones that wait. It comes first so the setting is in force inside the batch function.
const APPEND_BATCH: &str = "SELECT CASE WHEN $7 THEN txid_current() \
     ELSE length(set_config('synchronous_commit', 'off', true)) END, \
     cuca_append_batch($1, $2, $3, $4, $5, $6)";

/// The state of the connection thread.
pub(crate) struct Worker {
    config: PostgresConfig,
    host: String,
    conn: Option<Conn>,
    /// How many connections were opened: the live one's [`Conn::number`].
    opened: u64,
    /// Pipelined blocks whose batch committed without waiting for the disk, since the last
    /// commit that waited: a server crash may still lose them, so they are kept to be sent
    /// again, with the next batch, on a new connection (see [`Worker::write_rows`]).
    unsynced: Vec<Pending>,
    /// Their bytes, for [`MAX_UNSYNCED_BYTES`].
    unsynced_bytes: usize,
    /// The connection they were committed on.
    unsynced_on: u64,
}

/// One live connection with its search path set, migrations applied and statements prepared.
struct Conn {
    client: Client,
    insert: Statement,
    append: Statement,
    batch: Statement,
    replay: Statement,
    /// Which connection of the worker this is (1 for the first).
    number: u64,
}

/// How an operation failed, so the runner knows whether a retry on a new connection is safe.
enum OpError {
    /// The driver failed; `retry` says whether running the operation again cannot duplicate
    /// work (false once a commit was sent, because it may have landed).
    Pg { error: postgres::Error, retry: bool },
    /// A final answer that is not a connection problem.
    Done(PluginError),
}

impl From<Error> for OpError {
    fn from(error: Error) -> Self {
        OpError::Done(error.into())
    }
}

impl From<PluginError> for OpError {
    fn from(error: PluginError) -> Self {
        OpError::Done(error)
    }
}

fn retryable(error: postgres::Error) -> OpError {
    OpError::Pg { error, retry: true }
}

/// Starts the connection thread, connects once (so a wrong URL fails here, not on the first
/// append) and returns the job channel.
pub(crate) fn spawn(
    config: PostgresConfig,
    shared: Arc<Shared>,
) -> Result<(Sender<Msg>, JoinHandle<()>), PluginError> {
    let host = config.describe();
    let (jobs_tx, jobs_rx) = mpsc::channel::<Msg>();
    let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), PluginError>>(1);
    let handle = std::thread::Builder::new()
        .name("cuca-postgres".into())
        .spawn(move || serve(config, &shared, &ready_tx, &jobs_rx))
        .map_err(|source| PluginError::Backend {
            backend: "postgres".into(),
            message: format!("cannot start the connection thread for {host}: {source}"),
            source: Some(Box::new(source)),
        })?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok((jobs_tx, handle)),
        Ok(Err(error)) => {
            // The thread returns right after reporting a failed first connection.
            let _ = handle.join();
            Err(error)
        }
        Err(_) => Err(Error::WorkerGone { host }.into()),
    }
}

fn serve(
    config: PostgresConfig,
    shared: &Shared,
    ready: &mpsc::SyncSender<Result<(), PluginError>>,
    jobs_rx: &Receiver<Msg>,
) {
    let mut worker = Worker {
        host: config.describe(),
        config,
        conn: None,
        opened: 0,
        unsynced: Vec::new(),
        unsynced_bytes: 0,
        unsynced_on: 0,
    };
    let first = worker.connection().map(|_| ()).map_err(PluginError::from);
    let connected = first.is_ok();
    if ready.send(first).is_err() || !connected {
        return;
    }
    // Records received and not written yet, in the order received.
    let mut held: VecDeque<Pending> = VecDeque::new();
    let mut open = true;
    // Ends when the backend drops its sender, after everything it sent: queued records are
    // written before a dropped backend's thread ends.
    while open || !held.is_empty() {
        // Everything sent so far; waiting for something only when nothing is held.
        let mut jobs: Vec<Job> = Vec::new();
        let mut replays: Vec<(String, Replied)> = Vec::new();
        let mut next = None;
        if held.is_empty() {
            match jobs_rx.recv() {
                Ok(msg) => next = Some(msg),
                Err(_) => open = false,
            }
        }
        loop {
            match next.take() {
                Some(Msg::Append(pending)) => held.push_back(pending),
                Some(Msg::Replay(session, reply)) => replays.push((session, reply)),
                Some(Msg::Job(job)) => jobs.push(job),
                None => {}
            }
            if !open {
                break;
            }
            match jobs_rx.try_recv() {
                Ok(msg) => next = Some(msg),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    open = false;
                    break;
                }
            }
        }
        // A record someone waits for goes first, with the records of its session received
        // before it: its answer does not wait for other sessions' blocks, which nobody waits
        // for yet. Those that bring few records along (a session's first message) go ahead
        // of those that bring many (a streamed answer's closing record).
        let (light, heavy) = take_waited(&mut held);
        let first =
            !light.is_empty() || !heavy.is_empty() || !jobs.is_empty() || !replays.is_empty();
        worker.append_all(light, shared);
        // Replays of sessions with nothing left to write go before the heavier batches.
        if jobs.is_empty() && !replays.is_empty() {
            let unwritten: HashSet<&str> = heavy
                .iter()
                .chain(&held)
                .map(|p| p.session_id.as_str())
                .collect();
            if !replays
                .iter()
                .any(|(session, _)| unwritten.contains(session.as_str()))
            {
                worker.sync_for(&replays, shared);
                worker.replay_each(std::mem::take(&mut replays));
            }
        }
        worker.append_all(heavy, shared);
        if !jobs.is_empty() || !replays.is_empty() {
            // A replay sees every record of its session received before it; any other
            // operation (a fork, a listing, an append of `Durability::Commit`) everything.
            let all = !jobs.is_empty() || {
                let sessions: HashSet<&str> = held.iter().map(|p| p.session_id.as_str()).collect();
                replays
                    .iter()
                    .any(|(session, _)| sessions.contains(session.as_str()))
            };
            if all {
                worker.append_all(std::mem::take(&mut held), shared);
            }
            // What they read is durable, as `Durability::Pipelined` promises.
            if jobs.is_empty() {
                worker.sync_for(&replays, shared);
            } else {
                worker.sync(shared);
            }
            if !replays.is_empty() {
                worker.replay_each(replays);
            }
            for job in jobs {
                job(&mut worker);
            }
        }
        if !first && !held.is_empty() {
            // Blocks alone: one batch; whatever arrived meanwhile is served before the next.
            let n = held.len().min(MAX_BATCH);
            worker.append_batch(held.drain(..n).collect(), shared);
        }
    }
    worker.sync(shared);
    worker.shutdown();
}

/// How many records a waiting record may bring along (its own session's, received before
/// it) and still go in the first statement: a session's first message brings none, a
/// streamed answer's closing record its blocks.
const LIGHT: usize = 64;

/// Takes from `held` every record someone waits for, with the records of its session
/// received before it, in the order received: those of sessions that bring at most
/// [`LIGHT`] records, then the others. The rest stays, in order.
fn take_waited(held: &mut VecDeque<Pending>) -> (VecDeque<Pending>, VecDeque<Pending>) {
    // Per session with a waiting record: the index of its last one, and how many records
    // of the session come up to it.
    let mut taken: HashMap<String, (usize, usize)> = HashMap::new();
    for (index, pending) in held.iter().enumerate() {
        if pending.reply.is_some() {
            taken.entry(pending.session_id.clone()).or_insert((0, 0)).0 = index;
        }
    }
    if taken.is_empty() {
        return (VecDeque::new(), VecDeque::new());
    }
    for (index, pending) in held.iter().enumerate() {
        if let Some((until, n)) = taken.get_mut(&pending.session_id) {
            if index <= *until {
                *n += 1;
            }
        }
    }
    let (mut light, mut heavy) = (VecDeque::new(), VecDeque::new());
    let mut rest = VecDeque::with_capacity(held.len());
    for (index, pending) in std::mem::take(held).into_iter().enumerate() {
        match taken.get(&pending.session_id) {
            Some(&(until, n)) if index <= until && n <= LIGHT => light.push_back(pending),
            Some(&(until, _)) if index <= until => heavy.push_back(pending),
            _ => rest.push_back(pending),
        }
    }
    *held = rest;
    (light, heavy)
}

/// A batch the server did not take: each block is lost, and each waiting record gets the
/// error, naming with it its session's blocks lost before it. Those blocks belong to the
/// waiting record's own call (its writer sent them, then waits on this record), so they are
/// reported to it here and to no later call: a loss left over for the session's next append
/// would refuse a record of the next call for the previous call's hole.
fn fail_rows(rows: Vec<Pending>, host: &str, reason: &str, shared: &Shared) {
    for row in rows {
        match row.reply {
            Some(reply) => {
                let error = match shared.take_lost(&row.session_id) {
                    Some(lost) => Lost {
                        first: lost.first.min(row.sequence),
                        last: lost.last.max(row.sequence),
                        count: lost.count + 1,
                        reason: lost.reason,
                    }
                    .into_error(&row.session_id, host),
                    None => Error::BatchFailed {
                        host: host.to_owned(),
                        reason: reason.to_owned(),
                    }
                    .into(),
                };
                let _ = reply.send(Err(error));
            }
            None => shared.lose(&row.session_id, row.sequence, || reason.to_owned()),
        }
    }
}

/// A batch's rows as the statement's arrays: ids, sequences, kinds, timestamps, records.
type Columns<'a> = (
    Vec<&'a str>,
    Vec<i64>,
    Vec<&'a str>,
    Vec<i64>,
    Vec<&'a [u8]>,
);

fn columns<'a>(rows: impl Iterator<Item = &'a Pending>) -> Columns<'a> {
    let mut out: Columns<'a> = Default::default();
    for row in rows {
        out.0.push(row.session_id.as_str());
        // `Pending::new` checked that the sequence fits.
        out.1.push(i64::try_from(row.sequence).unwrap_or(i64::MAX));
        out.2.push(row.kind);
        out.3.push(row.timestamp_ms);
        out.4.push(row.bytes.as_slice());
    }
    out
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as u64)
        .unwrap_or(0)
}

fn to_i64(field: &'static str, value: u64, session_id: &str) -> Result<i64, Error> {
    i64::try_from(value).map_err(|_| Error::OutOfRange {
        field,
        value,
        session_id: session_id.to_owned(),
    })
}

fn encode(record: &SessionRecord) -> Result<Vec<u8>, PluginError> {
    postcard::to_stdvec(record).map_err(|source| PluginError::Backend {
        backend: "postgres".into(),
        message: format!("cannot encode {} as postcard: {source}", record.point_id()),
        source: Some(Box::new(source)),
    })
}

/// Decodes one stored row strictly: exactly one record, nothing left over, and the record must
/// be the one the row's columns say it is.
fn decode(session_id: &str, row: &Row, host: &str) -> Result<SessionRecord, OpError> {
    let sequence: i64 = row.try_get(0).map_err(retryable)?;
    let bytes: &[u8] = row.try_get(1).map_err(retryable)?;
    let corrupt = |message: String| Error::Corrupt {
        session_id: session_id.to_owned(),
        sequence,
        host: host.to_owned(),
        message,
    };
    let (record, rest) = postcard::take_from_bytes::<SessionRecord>(bytes)
        .map_err(|error| corrupt(format!("the record bytes do not decode: {error}")))?;
    if !rest.is_empty() {
        return Err(corrupt(format!("{} bytes follow the record", rest.len())).into());
    }
    if record.session_id != session_id || i64::try_from(record.sequence) != Ok(sequence) {
        return Err(corrupt(format!(
            "the row holds the record of {}, not of {session_id}:{sequence}",
            record.point_id()
        ))
        .into());
    }
    Ok(record)
}

/// Whether an error means the connection is gone (server restart, network, terminated backend),
/// as opposed to a statement the server refused.
pub(crate) fn broken(error: &postgres::Error, client: &Client) -> bool {
    error.is_closed()
        || client.is_closed()
        || error.code() == Some(&SqlState::ADMIN_SHUTDOWN)
        || error.code() == Some(&SqlState::CRASH_SHUTDOWN)
        || std::error::Error::source(error).is_some_and(|source| source.is::<std::io::Error>())
}

impl Worker {
    /// The live connection, opening (and migrating) a new one if there is none or it closed.
    fn connection(&mut self) -> Result<&mut Conn, Error> {
        let conn = match self.conn.take() {
            Some(conn) if !conn.client.is_closed() => conn,
            _ => {
                let mut conn = self.open()?;
                self.opened += 1;
                conn.number = self.opened;
                conn
            }
        };
        Ok(self.conn.insert(conn))
    }

    fn open(&self) -> Result<Conn, Error> {
        let host = &self.host;
        let mut client = connect(&self.config, host)?;
        let query = |source| Error::Query {
            operation: "connect",
            host: host.clone(),
            source,
        };
        let insert = client.prepare(INSERT).map_err(query)?;
        let append = client.prepare(APPEND).map_err(query)?;
        let batch = client.prepare(APPEND_BATCH).map_err(query)?;
        let replay = client.prepare(REPLAY).map_err(query)?;
        Ok(Conn {
            client,
            insert,
            append,
            batch,
            replay,
            number: 0,
        })
    }

    /// Runs `op` on the live connection. When the connection turns out to be broken, it is
    /// dropped and, if the operation is safe to repeat, run once more on a fresh connection;
    /// if no connection can be made the answer is [`Error::Unreachable`] naming the host.
    fn run<T>(
        &mut self,
        operation: &'static str,
        mut op: impl FnMut(&mut Conn, &str, bool) -> Result<T, OpError>,
    ) -> Result<T, PluginError> {
        let mut retried = false;
        loop {
            let host = self.host.clone();
            let conn = self.connection()?;
            let error = match op(conn, &host, retried) {
                Ok(value) => return Ok(value),
                Err(OpError::Done(error)) => return Err(error),
                Err(OpError::Pg { error, retry }) => {
                    let broken = broken(&error, &conn.client);
                    if broken {
                        self.conn = None;
                        if retry && !retried {
                            retried = true;
                            continue;
                        }
                    }
                    error
                }
            };
            return Err(Error::Query {
                operation,
                host,
                source: error,
            }
            .into());
        }
    }

    /// Drops a throwaway schema. Best effort: a backend dropped while the server is down
    /// leaves its schema behind, which costs disk space and nothing else.
    fn shutdown(&mut self) {
        if !self.config.drop_schema_on_drop {
            return;
        }
        let schema = quote_ident(&self.config.schema);
        if let Ok(conn) = self.connection() {
            let _ = conn
                .client
                .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
        }
    }

    pub(crate) fn append(&mut self, record: &SessionRecord) -> Result<(), PluginError> {
        let session_id = record.session_id.as_str();
        validate_session_id(session_id)?;
        let sequence = to_i64("sequence", record.sequence, session_id)?;
        let timestamp_ms = to_i64("timestamp_ms", record.timestamp_ms, session_id)?;
        let kind = record.event.kind();
        let bytes = encode(record)?;
        self.run("append", |conn, _, retried| {
            let row = conn
                .client
                .query_one(
                    &conn.append,
                    &[&session_id, &sequence, &kind, &timestamp_ms, &bytes],
                )
                .map_err(retryable)?;
            let Some(stored) = row.try_get::<_, Option<i64>>(0).map_err(retryable)? else {
                return Ok(());
            };
            if retried {
                // The first attempt may have committed just before the connection broke;
                // finding our own bytes there means this append did land.
                let mine = conn
                    .client
                    .query_opt(
                        "SELECT record FROM cuca_session_records WHERE session_id = $1 AND sequence = $2",
                        &[&session_id, &sequence],
                    )
                    .map_err(retryable)?;
                if let Some(row) = mine {
                    let mine: &[u8] = row.try_get(0).map_err(retryable)?;
                    if mine == bytes.as_slice() {
                        return Ok(());
                    }
                }
            }
            Err(PluginError::SequenceTaken {
                session_id: session_id.to_owned(),
                sequence: record.sequence,
                last: stored.unsigned_abs(),
            }
            .into())
        })
    }

    /// [`Worker::sync`] when a record of a session about to be replayed was committed without
    /// waiting for the disk: a replay returns only what is durable, and a session with no
    /// such record (one beginning now) costs no flush.
    fn sync_for(&mut self, replays: &[(String, Replied)], shared: &Shared) {
        let sessions: HashSet<&str> = replays
            .iter()
            .map(|(session, _)| session.as_str())
            .collect();
        if self
            .unsynced
            .iter()
            .any(|p| sessions.contains(p.session_id.as_str()))
        {
            self.sync(shared);
        }
    }

    /// Writes `records` in statements of at most [`MAX_BATCH`], in order.
    fn append_all(&mut self, mut records: VecDeque<Pending>, shared: &Shared) {
        while !records.is_empty() {
            let n = records.len().min(MAX_BATCH);
            self.append_batch(records.drain(..n).collect(), shared);
        }
    }

    /// Writes `batch` in one statement and answers each record that waits; a block that is
    /// not stored is remembered in `shared` for its session's next append to report.
    fn append_batch(&mut self, batch: Vec<Pending>, shared: &Shared) {
        let pipelined = batch.iter().filter(|p| p.reply.is_none()).count();
        let host = self.host.clone();
        let mut rows = Vec::with_capacity(batch.len());
        for pending in batch {
            // A session with a hole gains nothing after it until its writer was told.
            if pending.reply.is_none() && shared.lost().contains_key(&pending.session_id) {
                shared.lose(&pending.session_id, pending.sequence, String::new);
                continue;
            }
            if let Some(reply) = &pending.reply {
                if let Some(lost) = shared.take_lost(&pending.session_id) {
                    let _ = reply.send(Err(lost.into_error(&pending.session_id, &host)));
                    continue;
                }
            }
            rows.push(pending);
        }
        if !rows.is_empty() {
            self.write_rows(rows, false, shared);
        }
        shared.queued.fetch_sub(pipelined, Ordering::Relaxed);
    }

    /// Makes every block committed without waiting durable (see [`Worker::write_rows`]): a
    /// batch of no new rows that waits for its commit.
    pub(crate) fn sync(&mut self, shared: &Shared) {
        if !self.unsynced.is_empty() {
            self.write_rows(Vec::new(), true, shared);
        }
    }

    /// Writes `rows` in one statement and answers each that waits; with `flush` the commit
    /// waits for the disk even when no record does.
    ///
    /// A batch of blocks only, which nobody waits on, commits without waiting for the disk
    /// (`synchronous_commit = off` for its transaction): its rows are kept in
    /// [`Worker::unsynced`]. A batch with a waiting record (or past [`MAX_UNSYNCED`]) commits
    /// waiting for the disk, which flushes the log up to its commit and so makes every row
    /// committed before it durable too: only then is a waiting record acknowledged, and the
    /// kept rows are dropped. Should the connection break in between (the server may have
    /// crashed and lost them), the kept rows go first in the next statement, on the new
    /// connection, with `p_retry` (a row whose exact bytes are there counts as stored, a
    /// missing one is stored again), and that statement waits for its commit.
    fn write_rows(&mut self, rows: Vec<Pending>, flush: bool, shared: &Shared) {
        let host = self.host.clone();
        let unsynced = std::mem::take(&mut self.unsynced);
        let bytes: usize = rows.iter().map(|row| row.bytes.len()).sum();
        let wait = flush
            || rows.iter().any(|row| row.reply.is_some())
            || unsynced.len() + rows.len() > MAX_UNSYNCED
            || self.unsynced_bytes + bytes > MAX_UNSYNCED_BYTES;
        let unsynced_on = self.unsynced_on;
        let fresh = columns(rows.iter());
        let again = columns(unsynced.iter().chain(&rows));
        let answers = self.run("append", |conn, _, retried| {
            // Kept rows committed on another connection may be gone: they go first.
            let resend = !unsynced.is_empty() && conn.number != unsynced_on;
            let (ids, sequences, kinds, stamps, records) = if resend { &again } else { &fresh };
            let retry = retried || resend;
            let wait = wait || resend;
            let answers = conn
                .client
                .query_one(
                    &conn.batch,
                    &[ids, sequences, kinds, stamps, records, &retry, &wait],
                )
                .map_err(retryable)?
                .try_get::<_, Vec<Option<i64>>>(1)
                .map_err(retryable)?;
            Ok((answers, resend, wait, conn.number))
        });
        drop((fresh, again));
        let (mut answers, resent, waited, number) = match answers {
            Ok(answers) => answers,
            Err(error) => {
                // Still not known durable: kept for the next connection.
                self.unsynced = unsynced;
                return fail_rows(rows, &host, &error.to_string(), shared);
            }
        };
        let offset = if resent { unsynced.len() } else { 0 };
        if answers.len() != offset + rows.len() {
            let reason = format!(
                "the server answered {} rows for a batch of {}",
                answers.len(),
                offset + rows.len()
            );
            self.unsynced = unsynced;
            return fail_rows(rows, &host, &reason, shared);
        }
        let answers_now = answers.split_off(offset);
        for (row, answer) in unsynced.iter().zip(answers) {
            // Sent again after a broken connection and neither there nor storable: lost
            // (another writer took the sequence meanwhile); the session's later rows in this
            // statement were not tried (-1) and learn it below.
            if let Some(last) = answer {
                shared.lose(&row.session_id, row.sequence, || {
                    format!("the server lost it with its connection, and when sent again the sequence was taken (the session's highest is {last})")
                });
            }
        }
        let mut keep = if waited {
            self.unsynced_bytes = 0;
            Vec::new()
        } else {
            self.unsynced_on = number;
            unsynced
        };
        let answers = answers_now;
        for (mut row, answer) in rows.into_iter().zip(answers) {
            let taken = |last: i64| {
                format!("another writer took the sequence (the session's highest is {last})")
            };
            match (answer, row.reply.take()) {
                (None, Some(reply)) => {
                    let _ = reply.send(Ok(()));
                }
                (None, None) => {
                    if !waited {
                        self.unsynced_bytes += row.bytes.len();
                        keep.push(row);
                    }
                }
                (Some(-1), Some(reply)) => {
                    let error = match shared.take_lost(&row.session_id) {
                        Some(lost) => lost.into_error(&row.session_id, &host),
                        None => Error::NotStored {
                            session_id: row.session_id.clone(),
                            first: row.sequence,
                            last: row.sequence,
                            count: 1,
                            host: host.clone(),
                            reason:
                                "an earlier record of the session in the same batch was refused"
                                    .into(),
                        }
                        .into(),
                    };
                    let _ = reply.send(Err(error));
                }
                (Some(-1), None) => shared.lose(&row.session_id, row.sequence, || {
                    "an earlier record of the session was refused".into()
                }),
                (Some(last), Some(reply)) => {
                    let _ = reply.send(Err(PluginError::SequenceTaken {
                        session_id: row.session_id,
                        sequence: row.sequence,
                        last: last.unsigned_abs(),
                    }));
                }
                (Some(last), None) => shared.lose(&row.session_id, row.sequence, || taken(last)),
            }
        }
        self.unsynced = keep;
    }

    /// Answers every replay of `replays` from one statement. A record that does not decode
    /// fails its own session's replay only.
    fn replay_each(&mut self, replays: Vec<(String, Replied)>) {
        // Each session once in the statement; a second replay of one is read on its own.
        let (mut once, mut alone) = (Vec::new(), Vec::new());
        let mut seen = HashSet::new();
        for (session, reply) in replays {
            if seen.insert(session.clone()) {
                once.push((session, reply));
            } else {
                alone.push((session, reply));
            }
        }
        let sessions: Vec<&str> = once.iter().map(|(session, _)| session.as_str()).collect();
        match self.read_sessions(&sessions) {
            Ok(mut read) => {
                for (session, reply) in once {
                    let answer = read.remove(&session).unwrap_or_else(|| Ok(Vec::new()));
                    // The caller may have stopped waiting only if its thread died.
                    let _ = reply.send(answer);
                }
            }
            // Read again one by one, so that each caller gets an error of its own.
            Err(_) => alone.extend(once),
        }
        for (session, reply) in alone {
            let answer = self
                .read_sessions(&[session.as_str()])
                .and_then(|mut read| read.remove(&session).unwrap_or_else(|| Ok(Vec::new())));
            let _ = reply.send(answer);
        }
    }

    /// The records of each of `sessions` that has any, in one statement.
    fn read_sessions(
        &mut self,
        sessions: &[&str],
    ) -> Result<HashMap<String, Result<Vec<SessionRecord>, PluginError>>, PluginError> {
        self.run("replay", |conn, host, _| {
            let rows = conn
                .client
                .query(&conn.replay, &[&sessions])
                .map_err(retryable)?;
            let mut read: HashMap<String, Result<Vec<SessionRecord>, PluginError>> = HashMap::new();
            for row in &rows {
                let session: &str = row.try_get(2).map_err(retryable)?;
                let entry = read
                    .entry(session.to_owned())
                    .or_insert_with(|| Ok(Vec::new()));
                if entry.is_err() {
                    continue;
                }
                match decode(session, row, host) {
                    Ok(record) => {
                        if let Ok(records) = entry {
                            records.push(record);
                        }
                    }
                    Err(OpError::Done(error)) => *entry = Err(error),
                    Err(error) => return Err(error),
                }
            }
            Ok(read)
        })
    }

    pub(crate) fn sessions(&mut self) -> Result<Vec<String>, PluginError> {
        let mut ids = self.run("list sessions", |conn, _, _| {
            let rows = conn
                .client
                .query(
                    "SELECT DISTINCT session_id FROM cuca_session_records ORDER BY session_id",
                    &[],
                )
                .map_err(retryable)?;
            rows.iter()
                .map(|row| row.try_get::<_, String>(0).map_err(retryable))
                .collect::<Result<Vec<String>, OpError>>()
        })?;
        // The column's "C" collation already sorts bytewise; sorting again pins the order to
        // Rust's even on a table created by hand with another collation.
        ids.sort();
        Ok(ids)
    }

    /// Every session's id and the bytes of its stored records (`octet_length` of each row's
    /// `record`), in one grouped query: O(records) on the server, one round trip.
    pub(crate) fn session_sizes(&mut self) -> Result<Vec<(String, u64)>, PluginError> {
        self.run("size sessions", |conn, _, _| {
            let rows = conn
                .client
                .query(
                    "SELECT session_id, sum(octet_length(record))::bigint FROM cuca_session_records GROUP BY session_id ORDER BY session_id",
                    &[],
                )
                .map_err(retryable)?;
            rows.iter()
                .map(|row| {
                    let id: String = row.try_get(0).map_err(retryable)?;
                    let bytes: i64 = row.try_get(1).map_err(retryable)?;
                    Ok((id, bytes.unsigned_abs()))
                })
                .collect::<Result<Vec<(String, u64)>, OpError>>()
        })
    }

    /// `(records, bytes)`: a full count, so O(records) on the server.
    pub(crate) fn gauge(&mut self) -> Result<(i64, i64), PluginError> {
        self.run("gauge", |conn, _, _| {
            let row = conn
                .client
                .query_one(
                    "SELECT count(*), pg_total_relation_size('cuca_session_records') FROM cuca_session_records",
                    &[],
                )
                .map_err(retryable)?;
            Ok((
                row.try_get(0).map_err(retryable)?,
                row.try_get(1).map_err(retryable)?,
            ))
        })
    }

    pub(crate) fn fork(
        &mut self,
        session_id: &str,
        point_id: &str,
        point: u64,
    ) -> Result<String, PluginError> {
        validate_session_id(session_id)?;
        let point = to_i64("sequence", point, session_id)?;
        self.run("fork", |conn, host, _| {
            let Conn { client, insert, .. } = conn;
            let conflict = |source: postgres::Error| -> OpError {
                if source.code() == Some(&SqlState::UNIQUE_VIOLATION) {
                    Error::ForkConflict {
                        session_id: session_id.to_owned(),
                        point_id: point_id.to_owned(),
                        host: host.to_owned(),
                        source,
                    }
                    .into()
                } else {
                    retryable(source)
                }
            };
            let mut tx = client.transaction().map_err(retryable)?;
            // Forks and appends of one session take turns (the lock `cuca_append` takes), so
            // the audit record is sequenced at the tail no other writer can pass meanwhile.
            tx.execute(SESSION_LOCK, &[&session_id])
                .map_err(retryable)?;
            let cut = tx
                .query_opt(
                    "SELECT position FROM cuca_session_records WHERE session_id = $1 AND sequence = $2",
                    &[&session_id, &point],
                )
                .map_err(retryable)?;
            let Some(cut) = cut else {
                let exists = tx
                    .query_opt(
                        "SELECT 1 FROM cuca_session_records WHERE session_id = $1 LIMIT 1",
                        &[&session_id],
                    )
                    .map_err(retryable)?
                    .is_some();
                let (what, id) = if exists {
                    ("point", point_id)
                } else {
                    ("session", session_id)
                };
                return Err(PluginError::NotFound {
                    what: what.into(),
                    id: id.into(),
                }
                .into());
            };
            let cut: i64 = cut.try_get(0).map_err(retryable)?;
            let tail: Option<i64> = tx
                .query_one(
                    "SELECT max(sequence) FROM cuca_session_records WHERE session_id = $1",
                    &[&session_id],
                )
                .map_err(retryable)?
                .try_get(0)
                .map_err(retryable)?;
            let prefix = tx
                .query(
                    "SELECT sequence, record FROM cuca_session_records WHERE session_id = $1 AND position <= $2 ORDER BY position",
                    &[&session_id, &cut],
                )
                .map_err(retryable)?;
            // The database sequence makes n unique across every process on this database; n
            // still advances past ids a writer already used by hand.
            let new_id = loop {
                let n: i64 = tx
                    .query_one("SELECT nextval('cuca_fork_counter')", &[])
                    .map_err(retryable)?
                    .try_get(0)
                    .map_err(retryable)?;
                let candidate = fork_session_id(session_id, point_id, n.unsigned_abs());
                // Held to the commit: no append lands in the branch before its prefix.
                tx.execute(SESSION_LOCK, &[&candidate])
                    .map_err(retryable)?;
                let taken = tx
                    .query_opt(
                        "SELECT 1 FROM cuca_session_records WHERE session_id = $1 LIMIT 1",
                        &[&candidate],
                    )
                    .map_err(retryable)?
                    .is_some();
                if !taken {
                    break candidate;
                }
            };
            let mut sequences = Vec::with_capacity(prefix.len());
            let mut kinds = Vec::with_capacity(prefix.len());
            let mut stamps = Vec::with_capacity(prefix.len());
            let mut records = Vec::with_capacity(prefix.len());
            for row in &prefix {
                let record = decode(session_id, row, host)?;
                let relabelled = SessionRecord {
                    session_id: new_id.clone(),
                    ..record
                };
                sequences.push(to_i64("sequence", relabelled.sequence, &new_id)?);
                kinds.push(relabelled.event.kind());
                stamps.push(to_i64("timestamp_ms", relabelled.timestamp_ms, &new_id)?);
                records.push(encode(&relabelled)?);
            }
            // One statement for the whole prefix; ORDER BY keeps the append order, which the
            // identity column records.
            tx.execute(
                "INSERT INTO cuca_session_records (session_id, sequence, kind, timestamp_ms, record)
                 SELECT $1, s, k, t, r
                 FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::bytea[]) WITH ORDINALITY AS u(s, k, t, r, idx)
                 ORDER BY idx",
                &[&new_id, &sequences, &kinds, &stamps, &records],
            )
            .map_err(conflict)?;
            let audit = SessionRecord {
                session_id: session_id.to_owned(),
                sequence: tail.map_or(0, |tail| tail.unsigned_abs() + 1),
                timestamp_ms: now_ms(),
                event: SessionEvent::Fork {
                    from_point: point_id.to_owned(),
                    to_session: new_id.clone(),
                },
            };
            let bytes = encode(&audit)?;
            let audit_sequence = to_i64("sequence", audit.sequence, session_id)?;
            let audit_stamp = to_i64("timestamp_ms", audit.timestamp_ms, session_id)?;
            tx.execute(
                &*insert,
                &[
                    &session_id,
                    &audit_sequence,
                    &audit.event.kind(),
                    &audit_stamp,
                    &bytes,
                ],
            )
            .map_err(conflict)?;
            // Once the commit is sent it may land even if the answer is lost, so a broken
            // connection here is reported, not retried (a retry could fork twice).
            tx.commit()
                .map_err(|error| OpError::Pg { error, retry: false })?;
            Ok(new_id)
        })
    }

    /// Replaces the stored records `updated` (same session and sequences, new events) and
    /// appends `appended`, in one transaction under the session's lock, when the session's
    /// last sequence is still `expected_last`; otherwise nothing changes and the answer is
    /// [`PluginError::SequenceTaken`].
    pub(crate) fn rewrite(
        &mut self,
        session_id: &str,
        expected_last: u64,
        updated: &[SessionRecord],
        appended: &[SessionRecord],
    ) -> Result<(), PluginError> {
        validate_session_id(session_id)?;
        let expected = to_i64("sequence", expected_last, session_id)?;
        let mut rows = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for record in updated {
            if record.session_id != session_id {
                return Err(PluginError::validation(
                    "SessionRecord",
                    format!(
                        "{} is not a record of session {session_id:?}",
                        record.point_id()
                    ),
                ));
            }
            rows.0
                .push(to_i64("sequence", record.sequence, session_id)?);
            rows.1.push(record.event.kind());
            rows.2
                .push(to_i64("timestamp_ms", record.timestamp_ms, session_id)?);
            rows.3.push(encode(record)?);
        }
        let mut tail = Vec::with_capacity(appended.len());
        for record in appended {
            tail.push((
                to_i64("sequence", record.sequence, session_id)?,
                record.event.kind(),
                to_i64("timestamp_ms", record.timestamp_ms, session_id)?,
                encode(record)?,
            ));
        }
        self.run("rewrite", |conn, _, _| {
            let Conn { client, insert, .. } = conn;
            let mut tx = client.transaction().map_err(retryable)?;
            tx.execute(SESSION_LOCK, &[&session_id])
                .map_err(retryable)?;
            let stored: Option<i64> = tx
                .query_one(
                    "SELECT max(sequence) FROM cuca_session_records WHERE session_id = $1",
                    &[&session_id],
                )
                .map_err(retryable)?
                .try_get(0)
                .map_err(retryable)?;
            if stored != Some(expected) {
                return Err(PluginError::SequenceTaken {
                    session_id: session_id.to_owned(),
                    sequence: expected_last,
                    last: stored.map_or(0, i64::unsigned_abs),
                }
                .into());
            }
            let changed = tx
                .execute(
                    "UPDATE cuca_session_records AS stored SET kind = u.k, timestamp_ms = u.t, record = u.r
                     FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::bytea[]) AS u(s, k, t, r)
                     WHERE stored.session_id = $1 AND stored.sequence = u.s",
                    &[&session_id, &rows.0, &rows.1, &rows.2, &rows.3],
                )
                .map_err(retryable)?;
            if changed != rows.0.len() as u64 {
                return Err(PluginError::validation(
                    "SessionRecord",
                    format!(
                        "{} of the {} records to rewrite in session {session_id:?} are stored; a rewrite replaces stored records only",
                        changed,
                        rows.0.len()
                    ),
                )
                .into());
            }
            for (sequence, kind, stamp, bytes) in &tail {
                tx.execute(&*insert, &[&session_id, sequence, kind, stamp, bytes])
                    .map_err(retryable)?;
            }
            // Once the commit is sent it may land even if the answer is lost: not retried.
            tx.commit()
                .map_err(|error| OpError::Pg { error, retry: false })?;
            Ok(())
        })
    }
}
