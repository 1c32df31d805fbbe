//! `Recorder`: appends the capture journal from the run, through a bounded queue to a writer thread.
//!
//! Every recording method hashes its bodies outside the lock, then — under one `Mutex` around
//! the intern tables, the seq counter and the queue's sender — mints indices, serializes the
//! new pool lines and the entry into one batch, and `try_send`s it. A batch that cannot be
//! queued whole (the byte ceiling, a full queue, a dead writer) stops capture for the rest of
//! the run, so what reaches the file is always a contiguous prefix.

mod open;
mod queue;
mod writer;

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use cuca_events::{Message, Role, ToolChoice, UnifiedRequest, UnifiedResponse};

use crate::clip::{clip_tail, DETAIL_CLIP_BYTES, STREAM_CLIP_BYTES, TOOL_CLIP_BYTES};
use crate::error::JournalError;
use crate::format::{
    AgentRow, CancelProbe, Clock, ContentId, End, Entry, ErrorClass, FrameItem, Git, Header, Input,
    JournalLine, ModelError, ModelIo, PooledRequest, PooledResponse, PromptFrame, RecorderBuild,
    Region, RequestRole, RequestShape, Retention, Seed, Shell, ShellOrigin, Slot, StopReason,
    ToolResult, DEFAULT_JOURNAL_DIR, FORMAT_VERSION, JOURNAL_FILE_NAME,
};
use crate::pool::{message_id, parts_id, push_line, text_id, toolset_id, Interner, Pools};
use queue::{PushError, Queue};
use writer::{Batch, WriterShared};

/// Wraps the journal file before the writer thread gets it. A test hook: it lets a test inject
/// a sink that fails, panics or stalls; a run never sets it.
pub type SinkHook = Arc<dyn Fn(File) -> Box<dyn Write + Send> + Send + Sync>;

/// Where the journal goes and what bounds it. Validated by [`RecorderConfig::new`] and again by
/// [`RecorderConfig::validate`] (which [`Recorder::start`] calls).
#[derive(Clone)]
pub struct RecorderConfig {
    workspace: PathBuf,
    journal_dir: PathBuf,
    session_id: String,
    routing_key: Option<String>,
    capabilities: serde_json::Value,
    max_bytes: u64,
    queue_capacity: usize,
    queue_bytes: u64,
    finish_timeout: Duration,
    build_version: String,
    build_commit: Option<String>,
    sink_hook: Option<SinkHook>,
}

impl std::fmt::Debug for RecorderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecorderConfig")
            .field("workspace", &self.workspace)
            .field("journal_dir", &self.journal_dir)
            .field("session_id", &self.session_id)
            .field("routing_key", &self.routing_key)
            .field("max_bytes", &self.max_bytes)
            .field("queue_capacity", &self.queue_capacity)
            .field("queue_bytes", &self.queue_bytes)
            .field("finish_timeout", &self.finish_timeout)
            .field("build_version", &self.build_version)
            .field("build_commit", &self.build_commit)
            .field("sink_hook", &self.sink_hook.is_some())
            .finish_non_exhaustive()
    }
}

impl RecorderConfig {
    /// The journal byte ceiling when none is configured (`replayMaxBytes`).
    ///
    /// 256 MiB: the unique bytes of a long multi-agent run (every distinct message, tool output
    /// and stream, clipped) fit with room to spare, while a runaway loop cannot fill the
    /// container's disk.
    pub const DEFAULT_MAX_BYTES: u64 = 256 * 1024 * 1024;

    /// How many batches may wait for the writer when none is configured.
    ///
    /// 1024 batches absorb a disk stall of a few seconds at a busy run's rate; bounded because
    /// an unbounded queue turns a stalled disk into unbounded memory growth inside the run.
    pub const DEFAULT_QUEUE_CAPACITY: usize = 1024;

    /// How many bytes of batches may wait for the writer when none is configured.
    ///
    /// 32 MiB: seconds of a busy run's unique bytes, and an eighth of the default journal
    /// ceiling, so a stalled disk costs the run container at most this much memory rather than
    /// up to the whole ceiling (1024 batches of 256 KiB tool outputs would be 256 MiB).
    pub const DEFAULT_QUEUE_BYTES: u64 = 32 * 1024 * 1024;

    /// How long [`Recorder::finish`] waits for the writer when none is configured.
    ///
    /// A healthy disk drains a full queue in well under a second; 5 s keeps a stalled one from
    /// holding the run's exit for longer than a person would notice as a hang.
    pub const DEFAULT_FINISH_TIMEOUT: Duration = Duration::from_secs(5);

    /// A config journaling `session_id` into `<workspace>/.cuca/replay.ndjson`.
    pub fn new(
        workspace: impl Into<PathBuf>,
        session_id: impl Into<String>,
    ) -> Result<Self, JournalError> {
        let config = RecorderConfig {
            workspace: workspace.into(),
            journal_dir: PathBuf::from(DEFAULT_JOURNAL_DIR),
            session_id: session_id.into(),
            routing_key: None,
            capabilities: serde_json::Value::Object(serde_json::Map::new()),
            max_bytes: Self::DEFAULT_MAX_BYTES,
            queue_capacity: Self::DEFAULT_QUEUE_CAPACITY,
            queue_bytes: Self::DEFAULT_QUEUE_BYTES,
            finish_timeout: Self::DEFAULT_FINISH_TIMEOUT,
            build_version: env!("CARGO_PKG_VERSION").to_owned(),
            build_commit: option_env!("CUCA_BUILD_COMMIT").map(str::to_owned),
            sink_hook: None,
        };
        config.validate()?;
        Ok(config)
    }

    /// The journal directory: relative to the workspace (no `..`), or absolute.
    pub fn with_journal_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.journal_dir = dir.into();
        self
    }

    /// The run's routing key, written into the header.
    pub fn with_routing_key(mut self, key: impl Into<String>) -> Self {
        self.routing_key = Some(key.into());
        self
    }

    /// The run's capability set, written into the header as given.
    pub fn with_capabilities(mut self, capabilities: serde_json::Value) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// The journal byte ceiling (`replayMaxBytes`); must be at least 1.
    pub fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// How many batches may wait for the writer; must be at least 1.
    pub fn with_queue_capacity(mut self, capacity: usize) -> Self {
        self.queue_capacity = capacity;
        self
    }

    /// How many bytes of batches may wait for the writer; must be at least 1. A batch larger
    /// than this on its own still goes when nothing else waits.
    pub fn with_queue_bytes(mut self, bytes: u64) -> Self {
        self.queue_bytes = bytes;
        self
    }

    /// How long [`Recorder::finish`] waits for the writer before it gives up on a stalled disk;
    /// must not be zero.
    pub fn with_finish_timeout(mut self, timeout: Duration) -> Self {
        self.finish_timeout = timeout;
        self
    }

    /// The recording build's version and commit, overriding the crate version and the
    /// `CUCA_BUILD_COMMIT` environment variable read at build time.
    pub fn with_build(mut self, version: impl Into<String>, commit: Option<String>) -> Self {
        self.build_version = version.into();
        self.build_commit = commit;
        self
    }

    /// A test hook wrapping the journal file (see [`SinkHook`]).
    #[doc(hidden)]
    pub fn with_sink_hook(mut self, hook: SinkHook) -> Self {
        self.sink_hook = Some(hook);
        self
    }

    /// The workspace.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The journal's path: `<workspace>/<journal dir>/replay.ndjson`.
    pub fn journal_path(&self) -> PathBuf {
        self.workspace
            .join(&self.journal_dir)
            .join(JOURNAL_FILE_NAME)
    }

    /// Checks every rule; the error names the field.
    pub fn validate(&self) -> Result<(), JournalError> {
        let invalid = |field, message: &str| {
            Err(JournalError::InvalidConfig {
                field,
                message: message.to_owned(),
            })
        };
        if self.workspace.as_os_str().is_empty() {
            return invalid(
                "workspace",
                "the workspace path is empty; name the run's workspace directory",
            );
        }
        if self.session_id.is_empty() {
            return invalid(
                "session_id",
                "the session id is empty; every journal names its session",
            );
        }
        if self.journal_dir.as_os_str().is_empty() {
            return invalid(
                "journal_dir",
                "the journal directory is empty; leave the default `.cuca` or name one",
            );
        }
        if self.journal_dir.is_relative()
            && self
                .journal_dir
                .components()
                .any(|c| matches!(c, Component::ParentDir))
        {
            return invalid(
                "journal_dir",
                "a relative journal directory must stay inside the workspace (no `..`)",
            );
        }
        if self.max_bytes == 0 {
            return invalid("max_bytes", "the byte ceiling is 0; it must be at least 1");
        }
        if self.queue_capacity == 0 {
            return invalid(
                "queue_capacity",
                "the queue capacity is 0; it must hold at least one batch",
            );
        }
        if self.queue_bytes == 0 {
            return invalid(
                "queue_bytes",
                "the queue's byte bound is 0; it must be at least 1",
            );
        }
        if self.finish_timeout.is_zero() {
            return invalid(
                "finish_timeout",
                "the finish timeout is 0; finish must be able to wait for the writer a little",
            );
        }
        if self.build_version.is_empty() {
            return invalid("build_version", "the recording build's version is empty");
        }
        Ok(())
    }
}

/// A snapshot of what capture has done, for inspection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecorderStatus {
    /// Why capture stopped, once it has; permanent.
    pub stopped: Option<StopReason>,
    /// Whether [`Recorder::finish`] ran.
    pub finished: bool,
    /// Entries queued; after a `finish` that found the writer failed, entries in the file.
    pub entries: u64,
    /// Bytes queued, every line but the terminating one.
    pub bytes: u64,
    /// Message-pool entries queued.
    pub messages: u64,
    /// Toolset-pool entries queued.
    pub toolsets: u64,
    /// Text-pool entries queued.
    pub texts: u64,
    /// What went wrong, in words, when the writer failed or could not start.
    pub error: Option<String>,
    /// Where an earlier run's journal, found at the journal's path, was kept aside instead of
    /// being overwritten (it was never assembled; salvage it from there).
    pub set_aside: Option<PathBuf>,
}

struct State {
    stopped: Option<StopReason>,
    finished: bool,
    /// `finish` has seen the writer end and settled the status; later calls only report.
    settled: bool,
    seq: u64,
    bytes: u64,
    pools: Pools,
    queued: (u64, u64, u64),
    error: Option<String>,
}

impl State {
    fn stop(&mut self, reason: StopReason, error: Option<String>) {
        if self.stopped.is_none() {
            self.stopped = Some(reason);
        }
        if self.error.is_none() {
            self.error = error;
        }
    }
}

struct Inner {
    state: Mutex<State>,
    queue: Arc<Queue>,
    writer: Arc<WriterShared>,
    /// Whether a writer thread was started (else the recorder started stopped).
    has_writer: bool,
    handle: Mutex<Option<JoinHandle<()>>>,
    path: PathBuf,
    workspace: PathBuf,
    max_bytes: u64,
    finish_timeout: Duration,
    set_aside: Option<PathBuf>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last handle is gone without `finish`: the writer drains and stops, and the
        // journal ends without its terminating line, which is what says so.
        self.queue.close_senders();
    }
}

/// The capture side of the journal. Cheap to clone; every clone records into the same journal.
///
/// No method returns an error or panics: capture degrades, it never fails the run it observes.
/// Once capture stops (see [`RecorderStatus::stopped`]) every recording call is a no-op.
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("path", &self.inner.path)
            .field("status", &self.status())
            .finish()
    }
}

/// A model call that failed, as [`Recorder::model_error`] records it.
#[derive(Debug, Clone, Copy)]
pub struct ModelFailure<'a> {
    /// The class the loop branches on.
    pub class: ErrorClass,
    /// The HTTP status, for a status failure.
    pub status: Option<u16>,
    /// The error's message (clipped to 4 KiB, tail kept).
    pub detail: &'a str,
}

/// A tool call and the outcome the dispatch returned, as [`Recorder::tool_result`] records it.
#[derive(Debug, Clone, Copy)]
pub struct ToolOutcome<'a> {
    /// The provider's call id.
    pub call_id: &'a str,
    /// The tool's name.
    pub name: &'a str,
    /// The arguments as the model wrote them.
    pub arguments: &'a str,
    /// The exact output the dispatch returned.
    pub output: &'a str,
    /// Whether the tool reported failure.
    pub is_error: bool,
}

/// One item of a prompt frame, as [`Recorder::prompt_frame`] records it.
#[derive(Debug, Clone, Copy)]
pub struct FrameEntry<'a> {
    /// The item's message.
    pub message: &'a Message,
    /// Whether it survives compaction verbatim.
    pub retention: Retention,
    /// The paged file view's region, when it is one.
    pub region: Option<Region>,
    /// The turn it was pushed on.
    pub turn: u64,
    /// Which slot it came from.
    pub slot: Slot,
}

/// One shell command, as [`Recorder::shell`] records it.
#[derive(Debug, Clone, Copy)]
pub struct ShellRun<'a> {
    /// Who asked for it.
    pub origin: ShellOrigin,
    /// The command line.
    pub command: &'a str,
    /// Where it ran (recorded relative to the workspace when inside it).
    pub cwd: &'a Path,
    /// The exit status; `None` when a signal ended it.
    pub exit_status: Option<i32>,
    /// Everything it printed on stdout (clipped to the last 32 KiB).
    pub stdout: &'a str,
    /// Everything it printed on stderr (clipped to the last 32 KiB).
    pub stderr: &'a str,
}

/// One git subprocess, as [`Recorder::git`] records it.
#[derive(Debug, Clone, Copy)]
pub struct GitRun<'a> {
    /// The arguments after `git`.
    pub args: &'a [&'a str],
    /// Where it ran (recorded relative to the workspace when inside it).
    pub cwd: &'a Path,
    /// The exit status; `None` when a signal ended it.
    pub exit_status: Option<i32>,
    /// Its stdout (clipped to the last 32 KiB).
    pub stdout: &'a str,
    /// Its stderr (clipped to the last 32 KiB).
    pub stderr: &'a str,
}

/// The addresses of a request's bodies, computed before the lock is taken.
struct RequestIds {
    messages: Vec<ContentId>,
    toolset: Option<ContentId>,
}

impl RequestIds {
    fn of(request: &UnifiedRequest) -> Self {
        RequestIds {
            messages: request.messages.iter().map(message_id).collect(),
            toolset: (!request.tools.is_empty()).then(|| toolset_id(&request.tools)),
        }
    }
}

fn pool_request(
    interner: &mut Interner<'_>,
    request: &UnifiedRequest,
    ids: &RequestIds,
    role: RequestRole,
) -> Result<PooledRequest, serde_json::Error> {
    let mut messages = Vec::with_capacity(request.messages.len());
    for (message, id) in request.messages.iter().zip(&ids.messages) {
        messages.push(interner.message(message.role, &message.content, *id)?);
    }
    let toolset = match ids.toolset {
        Some(id) => Some(interner.toolset(&request.tools, id)?),
        None => None,
    };
    let shape = match request.tool_choice {
        Some(ToolChoice::Required) | Some(ToolChoice::Named(_)) => RequestShape::ToolRequired,
        _ => RequestShape::Free,
    };
    Ok(PooledRequest {
        model: request.model.clone(),
        messages,
        toolset,
        tool_choice: request.tool_choice.clone(),
        max_tokens: request.max_tokens,
        temperature: request.temperature,
        reasoning_effort: request.reasoning_effort.clone(),
        role,
        shape,
    })
}

fn pool_response(
    interner: &mut Interner<'_>,
    response: &UnifiedResponse,
    id: ContentId,
) -> Result<PooledResponse, serde_json::Error> {
    Ok(PooledResponse {
        model: response.model.clone(),
        provider: response.provider.clone(),
        message: interner.message(Role::Assistant, &response.content, id)?,
        finish_reason: response.finish_reason.clone(),
        prompt_tokens: response.token_usage.prompt_tokens,
        completion_tokens: response.token_usage.completion_tokens,
        reasoning_tokens: response.usage.as_ref().and_then(|u| u.reasoning_tokens),
        cost: response.usage.as_ref().and_then(|u| u.cost),
        cached_tokens: response.prompt_cache_usage.map(|u| u.cached_tokens),
    })
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// `cwd` relative to `workspace` (`.` for the workspace itself) when it lies inside it,
/// else as given: an absolute path is a property of the container, not of the run.
pub(crate) fn relative_cwd(workspace: &Path, cwd: &Path) -> String {
    match cwd.strip_prefix(workspace) {
        Ok(rest) if rest.as_os_str().is_empty() => ".".to_owned(),
        Ok(rest) => rest.to_string_lossy().into_owned(),
        Err(_) => cwd.to_string_lossy().into_owned(),
    }
}

impl Recorder {
    /// Creates the journal directory and file, starts the writer thread and queues the header.
    ///
    /// The only error is an invalid config. A journal that cannot be created or a writer
    /// thread that cannot start is not an error: the recorder starts stopped with
    /// `write_failed`, and the run goes on without capture.
    pub fn start(config: RecorderConfig) -> Result<Recorder, JournalError> {
        config.validate()?;
        let path = config.journal_path();
        let writer = Arc::new(WriterShared::default());
        let queue = Arc::new(Queue::new(config.queue_capacity, config.queue_bytes));
        let mut state = State {
            stopped: None,
            finished: false,
            settled: false,
            seq: 0,
            bytes: 0,
            pools: Pools::default(),
            queued: (0, 0, 0),
            error: None,
        };
        let mut handle = None;
        let mut set_aside = None;
        match open::open_journal(&path) {
            Err(error) => state.stop(StopReason::WriteFailed, Some(error)),
            Ok(opened) => {
                set_aside = opened.set_aside;
                let file = opened.file;
                let sink: Box<dyn Write + Send> = match &config.sink_hook {
                    Some(hook) => hook(file),
                    None => Box::new(file),
                };
                match writer::spawn(sink, Arc::clone(&queue), Arc::clone(&writer)) {
                    Ok(joined) => handle = Some(joined),
                    Err(error) => state.stop(
                        StopReason::WriteFailed,
                        Some(format!("cannot start the journal writer thread: {error}")),
                    ),
                }
            }
        }
        let recorder = Recorder {
            inner: Arc::new(Inner {
                state: Mutex::new(state),
                queue,
                writer,
                has_writer: handle.is_some(),
                handle: Mutex::new(handle),
                path,
                workspace: config.workspace.clone(),
                max_bytes: config.max_bytes,
                finish_timeout: config.finish_timeout,
                set_aside,
            }),
        };
        let header = JournalLine::Header(Header {
            format_version: FORMAT_VERSION,
            session_id: config.session_id,
            routing_key: config.routing_key,
            capabilities: config.capabilities,
            recorder: RecorderBuild {
                version: config.build_version,
                commit: config.build_commit,
            },
        });
        recorder.batch_with(false, |interner, _| {
            push_line(interner.buf, &header).map(|()| ((), 0))
        });
        Ok(recorder)
    }

    /// The journal's path.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        match self.inner.state.lock() {
            Ok(guard) => guard,
            Err(poisoned) => {
                // Only a bug can poison the lock; the tables may then disagree with the queue,
                // so capture stops rather than risk a wrong index.
                let mut guard = poisoned.into_inner();
                guard.stop(
                    StopReason::WriteFailed,
                    Some("the recorder's lock was poisoned".to_owned()),
                );
                guard
            }
        }
    }

    /// Builds one batch under the lock and queues it, or stops capture.
    ///
    /// `build` gets the interner and the next seq, and returns its value and how many entry
    /// lines it appended.
    fn batch<T>(
        &self,
        build: impl FnOnce(&mut Interner<'_>, u64) -> Result<(T, u64), serde_json::Error>,
    ) -> Option<T> {
        self.batch_with(true, build)
    }

    /// [`Recorder::batch`], with the byte ceiling enforced before queueing or not. The header
    /// alone is queued regardless, so even a journal stopped by a tiny ceiling says which
    /// format and session it is; its bytes still count, and crossing stops capture at once.
    fn batch_with<T>(
        &self,
        enforce_ceiling: bool,
        build: impl FnOnce(&mut Interner<'_>, u64) -> Result<(T, u64), serde_json::Error>,
    ) -> Option<T> {
        let mut guard = self.lock();
        let state = &mut *guard;
        if state.finished || state.stopped.is_some() {
            return None;
        }
        if self.inner.writer.failed() {
            state.stop(StopReason::WriteFailed, self.inner.writer.error());
            return None;
        }
        if !self.inner.has_writer {
            state.stop(StopReason::WriteFailed, None);
            return None;
        }
        let mut buf = Vec::new();
        let built = {
            let mut interner = Interner {
                pools: &mut state.pools,
                buf: &mut buf,
            };
            build(&mut interner, state.seq)
        };
        let (value, entries) = match built {
            Ok(built) => built,
            Err(error) => {
                state.stop(
                    StopReason::WriteFailed,
                    Some(format!("cannot encode a journal line: {error}")),
                );
                return None;
            }
        };
        let len = buf.len() as u64;
        let crosses = state.bytes.saturating_add(len) > self.inner.max_bytes;
        if crosses && enforce_ceiling {
            state.stop(StopReason::ByteCeiling, None);
            return None;
        }
        match self.inner.queue.try_push(Batch::Lines {
            bytes: buf,
            entries,
        }) {
            Ok(()) => {
                state.seq += entries;
                state.bytes = state.bytes.saturating_add(len);
                state.queued = state.pools.counts();
                if crosses {
                    state.stop(StopReason::ByteCeiling, None);
                }
                Some(value)
            }
            Err(PushError::Full) => {
                state.stop(StopReason::QueueFull, None);
                None
            }
            Err(PushError::Closed) => {
                let error = self.inner.writer.error();
                state.stop(
                    StopReason::WriteFailed,
                    error.or_else(|| Some("the journal writer is gone".to_owned())),
                );
                None
            }
        }
    }

    fn line(&self, line: &JournalLine) {
        self.batch(|interner, _| push_line(interner.buf, line).map(|()| ((), 0)));
    }

    fn entry(
        &self,
        agent: &str,
        build: impl FnOnce(&mut Interner<'_>) -> Result<Input, serde_json::Error>,
    ) {
        self.batch(|interner, seq| {
            let input = build(interner)?;
            push_line(
                interner.buf,
                &JournalLine::Entry(Entry {
                    seq,
                    agent: agent.to_owned(),
                    input,
                }),
            )?;
            Ok(((), 1))
        });
    }

    /// Writes a seed line. Call it again when a value resolves later (a slot's final
    /// modalities); assembly keeps the last.
    pub fn seed(&self, seed: &Seed) {
        self.line(&JournalLine::Seed(seed.clone()));
    }

    /// Writes an agent row: once when the agent comes into existence (`status: started`) and
    /// again when its loop ends. Assembly upserts by id.
    pub fn agent(&self, row: &AgentRow) {
        self.line(&JournalLine::Agent(row.clone()));
    }

    /// Interns a request's bodies now and returns its pooled form, for a caller that records
    /// the entry later (the plugin, which sees the response in another hook) without holding
    /// the bodies meanwhile. `None` once capture has stopped.
    pub fn intern_request(
        &self,
        request: &UnifiedRequest,
        role: RequestRole,
    ) -> Option<PooledRequest> {
        let ids = RequestIds::of(request);
        self.batch(|interner, _| Ok((pool_request(interner, request, &ids, role)?, 0)))
    }

    /// Records `model_io`: the request, the response and the latency.
    pub fn model_io(
        &self,
        agent: &str,
        request: &UnifiedRequest,
        role: RequestRole,
        response: &UnifiedResponse,
        latency: Duration,
    ) {
        let ids = RequestIds::of(request);
        let response_id = parts_id(Role::Assistant, &response.content);
        self.entry(agent, |interner| {
            Ok(Input::ModelIo(ModelIo {
                request: pool_request(interner, request, &ids, role)?,
                response: pool_response(interner, response, response_id)?,
                latency_ms: millis(latency),
            }))
        });
    }

    /// Records `model_io` for a request pooled earlier by [`Recorder::intern_request`].
    pub fn model_io_pooled(
        &self,
        agent: &str,
        request: PooledRequest,
        response: &UnifiedResponse,
        latency: Duration,
    ) {
        let response_id = parts_id(Role::Assistant, &response.content);
        self.entry(agent, |interner| {
            Ok(Input::ModelIo(ModelIo {
                request,
                response: pool_response(interner, response, response_id)?,
                latency_ms: millis(latency),
            }))
        });
    }

    /// Records `model_error`: the request and why the call failed.
    pub fn model_error(
        &self,
        agent: &str,
        request: &UnifiedRequest,
        role: RequestRole,
        failure: &ModelFailure<'_>,
    ) {
        let ids = RequestIds::of(request);
        self.entry(agent, |interner| {
            Ok(Input::ModelError(ModelError {
                request: pool_request(interner, request, &ids, role)?,
                class: failure.class,
                status: failure.status,
                detail: (!failure.detail.is_empty())
                    .then(|| clip_tail(failure.detail, DETAIL_CLIP_BYTES).to_owned()),
            }))
        });
    }

    /// Records `tool_result`: the call and the exact outcome (tool payloads clip at 256 KiB).
    pub fn tool_result(&self, agent: &str, outcome: &ToolOutcome<'_>) {
        let arguments_id = text_id(outcome.arguments);
        let output_id = text_id(outcome.output);
        self.entry(agent, |interner| {
            Ok(Input::ToolResult(ToolResult {
                call_id: outcome.call_id.to_owned(),
                name: outcome.name.to_owned(),
                arguments: interner.text(outcome.arguments, arguments_id, TOOL_CLIP_BYTES)?,
                output: interner.text(outcome.output, output_id, TOOL_CLIP_BYTES)?,
                is_error: outcome.is_error,
            }))
        });
    }

    /// Records `prompt_frame`: one agent's window as it stood for `turn`. Call it after the
    /// model call it describes and before that agent's next one.
    pub fn prompt_frame(&self, agent: &str, turn: u64, items: &[FrameEntry<'_>]) {
        let ids: Vec<ContentId> = items.iter().map(|item| message_id(item.message)).collect();
        self.entry(agent, |interner| {
            let mut pooled = Vec::with_capacity(items.len());
            for (item, id) in items.iter().zip(ids) {
                pooled.push(FrameItem {
                    message: interner.message(item.message.role, &item.message.content, id)?,
                    retention: item.retention,
                    region: item.region,
                    turn: item.turn,
                    slot: item.slot,
                });
            }
            Ok(Input::PromptFrame(PromptFrame {
                turn,
                items: pooled,
            }))
        });
    }

    /// Records `shell`: one command, its origin, where it ran, its exit status and streams.
    pub fn shell(&self, agent: &str, run: &ShellRun<'_>) {
        let (stdout_id, stderr_id) = (text_id(run.stdout), text_id(run.stderr));
        let cwd = relative_cwd(&self.inner.workspace, run.cwd);
        self.entry(agent, |interner| {
            Ok(Input::Shell(Shell {
                origin: run.origin,
                command: run.command.to_owned(),
                cwd,
                exit_status: run.exit_status,
                stdout: interner.text(run.stdout, stdout_id, STREAM_CLIP_BYTES)?,
                stderr: interner.text(run.stderr, stderr_id, STREAM_CLIP_BYTES)?,
            }))
        });
    }

    /// Records `git`: one git subprocess of the run's own orchestration.
    pub fn git(&self, agent: &str, run: &GitRun<'_>) {
        let (stdout_id, stderr_id) = (text_id(run.stdout), text_id(run.stderr));
        let cwd = relative_cwd(&self.inner.workspace, run.cwd);
        self.entry(agent, |interner| {
            Ok(Input::Git(Git {
                args: run.args.iter().map(|arg| (*arg).to_owned()).collect(),
                cwd,
                exit_status: run.exit_status,
                stdout: interner.text(run.stdout, stdout_id, STREAM_CLIP_BYTES)?,
                stderr: interner.text(run.stderr, stderr_id, STREAM_CLIP_BYTES)?,
            }))
        });
    }

    /// Records `cancel_probe`: one read of the cancel file and what it found.
    pub fn cancel_probe(&self, agent: &str, present: bool, content: Option<&str>) {
        let content = content.map(|text| clip_tail(text, DETAIL_CLIP_BYTES).to_owned());
        self.entry(agent, |_| {
            Ok(Input::CancelProbe(CancelProbe { present, content }))
        });
    }

    /// Records `clock`: one read of the wall-clock deadline.
    pub fn clock(&self, agent: &str, elapsed: Duration, remaining: Option<Duration>) {
        self.entry(agent, |_| {
            Ok(Input::Clock(Clock {
                elapsed_ms: millis(elapsed),
                remaining_ms: remaining.map(millis),
            }))
        });
    }

    /// What capture has done so far.
    pub fn status(&self) -> RecorderStatus {
        let mut guard = self.lock();
        if self.inner.writer.failed() {
            guard.stop(StopReason::WriteFailed, self.inner.writer.error());
        }
        let (messages, toolsets, texts) = guard.queued;
        RecorderStatus {
            stopped: guard.stopped,
            finished: guard.finished,
            entries: guard.seq,
            bytes: guard.bytes,
            messages,
            toolsets,
            texts,
            error: guard.error.clone(),
            set_aside: self.inner.set_aside.clone(),
        }
    }

    /// Writes the terminating line and waits for the writer to finish; call it on the normal
    /// exit path. Idempotent; every recording call after it is a no-op.
    ///
    /// The wait is bounded by the configured finish timeout
    /// ([`RecorderConfig::with_finish_timeout`], 5 s by default): a writer stuck on a stalled
    /// disk does not hold the run's exit. When the bound passes, capture stops for good as
    /// `write_failed` with the reason in [`RecorderStatus::error`], and the writer, if the disk
    /// ever lets go, drops what is still queued and ends the journal with `write_failed` itself.
    /// A later `finish` waits again, up to the same bound, for that to happen.
    ///
    /// If the writer failed, the file is cut back to the last batch it wrote whole and the
    /// terminating line (`write_failed`, with the count of entries actually in the file) is
    /// appended from this thread.
    pub fn finish(&self) -> RecorderStatus {
        let first = {
            let mut guard = self.lock();
            if guard.settled {
                drop(guard);
                return self.status();
            }
            let first = !guard.finished;
            guard.finished = true;
            first.then_some(guard.stopped)
        };
        let mut delivered = true;
        if let Some(reason) = first {
            delivered = self.inner.has_writer
                && !self.inner.writer.failed()
                && self
                    .inner
                    .queue
                    .push_finish(Batch::Finish { reason })
                    .is_ok();
        }
        if self.inner.has_writer && !self.inner.writer.wait_done(self.inner.finish_timeout) {
            self.inner.writer.abandon();
            let mut guard = self.lock();
            guard.stopped = Some(StopReason::WriteFailed);
            if guard.error.is_none() {
                guard.error = Some(format!(
                    "the journal writer did not finish within {} ms (a stalled disk); capture \
                     stopped, and the journal ends with write_failed if the disk recovers",
                    millis(self.inner.finish_timeout)
                ));
            }
            drop(guard);
            return self.status();
        }
        let handle = match self.inner.handle.lock() {
            Ok(mut slot) => slot.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        // The writer has ended, so the join returns at once.
        let joined = handle.map(|h| h.join().is_ok()).unwrap_or(false);
        if !delivered || !joined || self.inner.writer.failed() {
            let rescue_error = self.rescue().err();
            let mut guard = self.lock();
            // A writer that never started has no file to speak of; any other case is a write
            // failure whatever stopped capture first, because lines were lost.
            guard.stopped = Some(StopReason::WriteFailed);
            // The count the terminating line carries is what the file holds, not what was queued.
            guard.seq = self.inner.writer.durable().1;
            // The writer's own account outranks what a sender inferred from a closed queue.
            if let Some(error) = self.inner.writer.error().or(rescue_error) {
                guard.error = Some(error);
            }
            guard.settled = true;
        } else {
            let mut guard = self.lock();
            if self.inner.writer.abandoned() {
                // The writer ended the journal itself after the disk let go, dropping the rest.
                guard.seq = self.inner.writer.durable().1;
            }
            guard.settled = true;
        }
        self.status()
    }

    /// Cuts the file back to what the writer wrote whole, then appends the terminating line.
    fn rescue(&self) -> Result<(), String> {
        let (len, entries) = self.inner.writer.durable();
        if len == 0 {
            // Not even the header was written: there is no journal to terminate.
            return Ok(());
        }
        let path = &self.inner.path;
        let mut line = Vec::new();
        push_line(
            &mut line,
            &JournalLine::End(End {
                entries,
                stop_reason: Some(StopReason::WriteFailed),
            }),
        )
        .map_err(|error| error.to_string())?;
        let result = (|| {
            let mut file = OpenOptions::new().write(true).open(path)?;
            file.set_len(len)?;
            file.seek(SeekFrom::End(0))?;
            file.write_all(&line)?;
            file.flush()
        })();
        result.map_err(|error| format!("cannot terminate {}: {error}", path.display()))
    }
}

#[cfg(test)]
mod tests;
