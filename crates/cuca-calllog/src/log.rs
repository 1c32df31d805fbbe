//! `CallLog`: the handle that appends rows, rotates the file, and goes silent on a write
//! failure.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Instant, SystemTime};

use crate::env::{previous_path, Env, BODIES_MAX_BYTES, MAX_BYTES};
use crate::finite::take_non_finite;
use crate::record::{clip_error, new_id, Record, MAX_ERROR_CHARS, PHASE_START};
use crate::time::format_rfc3339_millis;
use crate::{Attempt, ResponseBody};

/// Where the one line a silenced log prints goes. The default writes it to stderr; tests
/// inject one that collects the lines.
pub type WarnSink = Arc<dyn Fn(&str) + Send + Sync>;

/// Who goes quiet together after a write failure, and hears the one line about it.
///
/// The seed: a write failure "silences the log for the rest of the process and prints one
/// line". Every handle is in [`SilenceScope::process`] unless its builder names another (or
/// names its own [`Builder::warn_sink`]), so a second [`CallLog`], a later [`crate::open`]
/// and the global log all stay quiet once any of them failed, and stderr gets one line in
/// all. A test that breaks a log on purpose gives its handles a [`SilenceScope::new`] of
/// their own, so it does not silence the other tests of its binary.
///
/// ```
/// use cuca_calllog::{CallLog, Record, SilenceScope};
/// let scope = SilenceScope::new();
/// let broken = CallLog::builder()
///     .path(Some("/proc/version/calls.jsonl".into())) // cannot be created
///     .silence_scope(scope.clone())
///     .warn_sink(std::sync::Arc::new(|_: &str| {}))
///     .build();
/// let other = CallLog::builder()
///     .path(Some(std::env::temp_dir().join("never-written.jsonl")))
///     .silence_scope(scope.clone())
///     .build();
/// broken.append(Record::default());
/// assert!(scope.is_silenced());
/// assert!(other.is_silenced());
/// ```
#[derive(Clone)]
pub struct SilenceScope {
    silenced: Arc<AtomicBool>,
}

impl std::fmt::Debug for SilenceScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SilenceScope")
            .field("process", &self.is_process())
            .field("silenced", &self.is_silenced())
            .finish()
    }
}

/// The process's scope, shared by every handle that does not name its own.
static PROCESS_SILENCED: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();

impl SilenceScope {
    /// The one scope of this process: the default of every handle.
    pub fn process() -> SilenceScope {
        SilenceScope {
            silenced: Arc::clone(PROCESS_SILENCED.get_or_init(Arc::default)),
        }
    }

    /// A scope of its own, for handles that must not silence (or be silenced by) the rest of
    /// the process: tests that break a log on purpose.
    #[allow(clippy::new_without_default)]
    pub fn new() -> SilenceScope {
        SilenceScope {
            silenced: Arc::default(),
        }
    }

    /// Whether a write failure has silenced the handles in this scope.
    pub fn is_silenced(&self) -> bool {
        self.silenced.load(Ordering::Relaxed)
    }

    fn is_process(&self) -> bool {
        PROCESS_SILENCED
            .get()
            .is_some_and(|process| Arc::ptr_eq(process, &self.silenced))
    }

    /// Silences the scope; true for the one caller that did it (and so prints the line).
    fn silence(&self) -> bool {
        !self.silenced.swap(true, Ordering::AcqRel)
    }
}

/// The newest call this process has heard back from: the model that answered and the moment
/// it did. The in-memory half of the log, kept whether or not the file is being written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastCall {
    /// [`Record::served`] when the server named who answered, else [`Record::model`].
    pub model: String,
    /// When the end row was appended.
    pub at: SystemTime,
}

/// A handle on one call log. Cheap to clone (an `Arc` inside); every clone writes to the same
/// file under the same lock and shares the same counters.
///
/// Built from the process environment with [`CallLog::open`], from an injected [`Env`] with
/// [`CallLog::from_env`], or field by field with [`CallLog::builder`]. Nothing is created on
/// disk until the first row: a process that makes no call leaves no file and no `logs/`.
#[derive(Clone)]
pub struct CallLog {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for CallLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallLog")
            .field("path", &self.inner.path)
            .field("bodies", &self.inner.bodies)
            .field("max_bytes", &self.inner.max_bytes)
            .field("silenced", &self.is_silenced())
            .finish()
    }
}

struct Inner {
    path: Option<PathBuf>,
    bodies: bool,
    max_bytes: u64,
    warn: WarnSink,
    /// Set by the first write failure of any handle in the scope; every later append
    /// returns before the lock.
    silence: SilenceScope,
    /// The open file. Appends take the shared side and write concurrently: the file is opened
    /// for appending, and the kernel writes each `write` to a local file whole at its end
    /// (the guarantee that already keeps the rows of two processes apart). Opening, rotating
    /// and closing take the exclusive side. A mutex around every write was measured first:
    /// it put the p99 at 8 writers on 2 cores at 134 µs against 6 µs for the bare write,
    /// because a writer descheduled while holding it stalls all the others.
    file: RwLock<Option<File>>,
    /// Bytes this handle believes the live file holds; rows reserve their length here before
    /// writing, which is how an append decides, without the exclusive lock, that it fits.
    size: AtomicU64,
    memory: Arc<Memory>,
}

/// The counters that survive re-pointing the global log with [`crate::open`].
#[derive(Default)]
pub(crate) struct Memory {
    calls_per_run: Mutex<HashMap<String, u64>>,
    last_call: Mutex<Option<LastCall>>,
}

/// Builds a [`CallLog`] field by field.
pub struct Builder {
    path: Option<PathBuf>,
    bodies: bool,
    max_bytes: Option<u64>,
    warn: WarnSink,
    /// Whether [`Builder::warn_sink`] replaced stderr.
    own_sink: bool,
    memory: Option<Arc<Memory>>,
    silence: Option<SilenceScope>,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("path", &self.path)
            .field("bodies", &self.bodies)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl Builder {
    /// The live file, or `None` for a log that writes nothing (counters still count).
    pub fn path(mut self, path: Option<PathBuf>) -> Self {
        self.path = path;
        self
    }

    /// Whether rows keep [`Record::request_body`] and [`Record::response_body`].
    pub fn bodies(mut self, bodies: bool) -> Self {
        self.bodies = bodies;
        self
    }

    /// Where the live file rotates. Defaults to [`MAX_BYTES`], or [`BODIES_MAX_BYTES`] with
    /// bodies on; tests set a small figure to watch a rotation happen.
    pub fn max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = Some(max_bytes);
        self
    }

    /// Where the one line a write failure prints goes (stderr by default).
    ///
    /// A handle that names its own sink and no [`SilenceScope`] gets a scope of its own: the
    /// "one line per process" is a promise about stderr, and a handle reporting elsewhere (a
    /// test collecting the line) must neither silence nor be silenced by the process's log.
    pub fn warn_sink(mut self, warn: WarnSink) -> Self {
        self.warn = warn;
        self.own_sink = true;
        self
    }

    /// Which handles go quiet together after a write failure ([`SilenceScope::process`] by
    /// default).
    pub fn silence_scope(mut self, scope: SilenceScope) -> Self {
        self.silence = Some(scope);
        self
    }

    pub(crate) fn memory(mut self, memory: Arc<Memory>) -> Self {
        self.memory = Some(memory);
        self
    }

    /// The handle.
    pub fn build(self) -> CallLog {
        let max_bytes = self.max_bytes.unwrap_or(if self.bodies {
            BODIES_MAX_BYTES
        } else {
            MAX_BYTES
        });
        CallLog {
            inner: Arc::new(Inner {
                path: self.path,
                bodies: self.bodies,
                max_bytes,
                warn: self.warn,
                silence: self.silence.unwrap_or_else(|| {
                    if self.own_sink {
                        SilenceScope::new()
                    } else {
                        SilenceScope::process()
                    }
                }),
                file: RwLock::new(None),
                size: AtomicU64::new(0),
                memory: self.memory.unwrap_or_default(),
            }),
        }
    }
}

impl CallLog {
    /// A builder with no path, bodies off, the default rotation size and stderr warnings.
    pub fn builder() -> Builder {
        Builder {
            path: None,
            bodies: false,
            max_bytes: None,
            warn: Arc::new(|line: &str| eprintln!("{line}")),
            own_sink: false,
            memory: None,
            silence: None,
        }
    }

    /// A builder resolved from `env` for the profile directory `dir` (the state root when
    /// `None`): the path of [`Env::path_for`] and the bodies pin of [`Env::bodies`].
    pub fn builder_from_env(env: &Env, dir: Option<&Path>) -> Builder {
        CallLog::builder()
            .path(env.path_for(dir))
            .bodies(env.bodies())
    }

    /// The log for profile directory `dir` under the injected `env`.
    pub fn from_env(env: &Env, dir: Option<&Path>) -> CallLog {
        CallLog::builder_from_env(env, dir).build()
    }

    /// The log for profile directory `dir` under this process's environment. Opens nothing.
    pub fn open(dir: Option<&Path>) -> CallLog {
        CallLog::from_env(&Env::from_process(), dir)
    }

    /// A log that writes nothing; its counters ([`CallLog::calls_for`],
    /// [`CallLog::last_call`]) still count.
    pub fn off() -> CallLog {
        CallLog::builder().build()
    }

    pub(crate) fn memory(&self) -> Arc<Memory> {
        Arc::clone(&self.inner.memory)
    }

    /// Where rows are going, or `None` when the log is off or a write failure silenced it.
    pub fn path(&self) -> Option<&Path> {
        if self.is_silenced() {
            return None;
        }
        self.inner.path.as_deref()
    }

    /// Whether a write failure (of this handle, or of any other in its [`SilenceScope`]) has
    /// silenced this log for the rest of the process.
    pub fn is_silenced(&self) -> bool {
        self.inner.silence.is_silenced()
    }

    /// Whether this log records the request and response bodies as well as the shape.
    pub fn bodies(&self) -> bool {
        self.inner.bodies
    }

    /// How many calls (start rows) carrying run id `run` went through this handle (and its
    /// predecessors under [`crate::open`]). Zero for a run that made none and for a run this
    /// process never saw — the same answer; the caller publishing it knows whether the run
    /// is its own. Counted whether or not the file is written.
    pub fn calls_for(&self, run: &str) -> u64 {
        lock(&self.inner.memory.calls_per_run)
            .get(run)
            .copied()
            .unwrap_or(0)
    }

    /// The newest answered call, kept whether or not the file is written.
    pub fn last_call(&self) -> Option<LastCall> {
        lock(&self.inner.memory.last_call).clone()
    }

    /// Writes one row. Never returns an error and never blocks on anything but the lock and
    /// the write itself: its callers are model calls, and nothing about a model call may
    /// depend on a disk.
    ///
    /// Before writing it fills an empty [`Record::ts`] with now, drops the bodies unless the
    /// bodies pin is on, takes any non-finite float off the row, naming it in
    /// [`Record::note`], and clips an [`Record::error`] longer than [`MAX_ERROR_CHARS`] with
    /// [`clip_error`]. The line is serialized before the lock is taken and written with one
    /// `write`, so rows from concurrent threads and tasks never interleave.
    pub fn append(&self, record: Record) {
        self.append_with_response(record, None);
    }

    /// [`CallLog::append`], with the response body held in a [`ResponseBody`] rather than in
    /// [`Record::response_body`]: the body is written as the row's `response_body` (under the
    /// bodies pin; dropped otherwise) in the same single `write`, without another copy of it.
    pub(crate) fn append_with_response(&self, mut record: Record, body: Option<ResponseBody>) {
        let now = SystemTime::now();
        if record.ts.is_empty() {
            record.ts = format_rfc3339_millis(now);
        }
        if !self.inner.bodies {
            record.request_body = String::new();
            record.response_body = String::new();
        }
        take_non_finite(&mut record);
        // "MaxErrorChars bounds Record.Error": a writer that skipped `clip_error` still does
        // not get to put a page into a line. A message already within the bound is untouched.
        if record.error.chars().nth(MAX_ERROR_CHARS).is_some() {
            record.error = clip_error(&record.error);
        }
        self.remember(&record, now);
        if self.inner.path.is_none() || self.is_silenced() {
            return;
        }
        let body = body.filter(|body| self.inner.bodies && !body.is_empty());
        if body.is_some() {
            // The held body replaces whatever the field had.
            record.response_body = String::new();
        }
        let mut line = match serde_json::to_vec(&record) {
            Ok(line) => line,
            // Unreachable for this struct once the floats are finite; if it ever happens the
            // log says so once rather than failing the call.
            Err(error) => return self.silence(&error.to_string()),
        };
        let Some(body) = body else {
            line.push(b'\n');
            return self.write_line(&[&line]);
        };
        // `response_body` is the last field of a row, so splicing it in before the closing
        // brace gives the very line serde would have written.
        line.pop();
        if line.len() > 1 {
            line.push(b',');
        }
        line.extend_from_slice(br#""response_body":""#);
        let escaped = body.into_escaped();
        self.write_line(&[&line, &escaped, b"\"}\n"]);
    }

    /// Writes a start row for `record` and returns the [`Attempt`] that will write its end
    /// row: on [`Attempt::finish`], on [`Attempt::end`], or with [`Record::ended`] set when
    /// dropped unfinished. Sets [`Record::phase`] to [`PHASE_START`] and mints
    /// [`Record::id`] when it is empty.
    pub fn start(&self, mut record: Record) -> Attempt {
        record.phase = PHASE_START.to_owned();
        if record.id.is_empty() {
            record.id = new_id();
        }
        let started = Instant::now();
        // The identity and the request's shape: what an end row nobody on the path wrote
        // still carries (`Attempt::known`).
        let template = Record {
            id: record.id.clone(),
            run: record.run.clone(),
            tag: record.tag.clone(),
            node: record.node.clone(),
            model: record.model.clone(),
            effort: record.effort.clone(),
            effort_pin: record.effort_pin.clone(),
            max_tokens: record.max_tokens,
            messages: record.messages,
            tools: record.tools,
            stream: record.stream,
            attempt: record.attempt,
            relaxed: record.relaxed.clone(),
            lane: record.lane.clone(),
            ..Record::default()
        };
        self.append(record);
        Attempt::new(self.clone(), template, started)
    }

    /// Releases the file. Called on the way out of a process; one that forgets loses
    /// nothing, because every row is written as it happens. A later append opens it again.
    pub fn close(&self) {
        *self
            .inner
            .file
            .write()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }

    fn remember(&self, record: &Record, at: SystemTime) {
        let memory = &self.inner.memory;
        if record.is_start() {
            if !record.run.is_empty() {
                let mut runs = lock(&memory.calls_per_run);
                match runs.get_mut(record.run.as_str()) {
                    Some(calls) => *calls += 1,
                    None => {
                        runs.insert(record.run.clone(), 1);
                    }
                }
            }
        } else if answered(record) {
            let model = if record.served.is_empty() {
                &record.model
            } else {
                &record.served
            };
            if model.is_empty() {
                return;
            }
            // Built before the lock, so the lock guards a swap and nothing else.
            let newest = Some(LastCall {
                model: model.clone(),
                at,
            });
            let replaced = std::mem::replace(&mut *lock(&memory.last_call), newest);
            // The value it replaced is freed here, outside the lock.
            drop(replaced);
        }
    }

    fn write_line(&self, line: &[&[u8]]) {
        let Some(path) = self.inner.path.as_deref() else {
            return;
        };
        let len: u64 = line.iter().map(|part| part.len() as u64).sum();
        // The fast path: the file is open and the row fits, so write under the shared lock.
        {
            let guard = self
                .inner
                .file
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            if self.is_silenced() {
                return;
            }
            if let Some(file) = guard.as_ref() {
                let before = self.inner.size.fetch_add(len, Ordering::AcqRel);
                if before == 0 || before + len <= self.inner.max_bytes {
                    let result = write_once(file, line);
                    drop(guard);
                    if let Err(error) = result {
                        self.silence(&error.to_string());
                    }
                    return;
                }
                self.inner.size.fetch_sub(len, Ordering::AcqRel);
            }
        }
        // The slow path: open or rotate under the exclusive lock, and write there too, so
        // the row that found the file full is the first row of the new one.
        let mut file = self
            .inner
            .file
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        // Re-checked under the lock: another thread may have silenced, opened or rotated
        // while this one waited.
        if self.is_silenced() {
            return;
        }
        if file.is_none() {
            match open_live(path) {
                Ok((opened, size)) => {
                    *file = Some(opened);
                    self.inner.size.store(size, Ordering::Release);
                }
                Err(error) => {
                    drop(file);
                    return self.silence(&error.to_string());
                }
            }
        }
        let size = self.inner.size.load(Ordering::Acquire);
        if size > 0 && size + len > self.inner.max_bytes {
            let held = file.take().map(|held| held.metadata()).transpose();
            match held.and_then(|held| rotate(path, held)) {
                Ok((opened, size)) => {
                    *file = Some(opened);
                    self.inner.size.store(size, Ordering::Release);
                }
                Err(error) => {
                    drop(file);
                    return self.silence(&error.to_string());
                }
            }
        }
        let Some(open) = file.as_ref() else {
            return;
        };
        // A row longer than the rotation size still lands whole, alone in its file.
        self.inner.size.fetch_add(len, Ordering::AcqRel);
        if let Err(error) = write_once(open, line) {
            *file = None;
            drop(file);
            self.silence(&error.to_string());
        }
    }

    /// Turns the log off for the rest of the process (its [`SilenceScope`]) and says so once.
    fn silence(&self, error: &str) {
        if !self.inner.silence.silence() {
            return;
        }
        let path = self
            .inner
            .path
            .as_deref()
            .map_or_else(String::new, |p| p.display().to_string());
        (self.inner.warn)(&format!(
            "cuca: call log off for this process: cannot write {path}: {error}"
        ));
    }
}

/// An end row counts as "heard back from" when nobody else closed it and it carries no
/// error or failure status.
fn answered(record: &Record) -> bool {
    record.ended.is_empty() && record.error.is_empty() && record.status < 400
}

/// One `write` of the whole line (a `writev` when it is in parts: an appending `writev` lands
/// whole like a `write`). A short write (a nearly full disk) is a failure: the rest is not
/// written after it, because by then another writer's row may follow, and the torn bytes are
/// sealed onto their own line by the next process that opens the file.
fn write_once(mut file: &File, parts: &[&[u8]]) -> io::Result<()> {
    let total: usize = parts.iter().map(|part| part.len()).sum();
    let written = match parts {
        [one] => file.write(one)?,
        _ => {
            let slices: Vec<io::IoSlice<'_>> = parts.iter().map(|p| io::IoSlice::new(p)).collect();
            file.write_vectored(&slices)?
        }
    };
    if written < total {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            format!(
                "short write: {written} of {total} bytes (the disk is likely full, or a file size limit was reached)"
            ),
        ));
    }
    Ok(())
}

/// Opens (creating) the live file for appending. When it ends in a torn row (a crash
/// mid-write) it writes a `\n` first, so the torn bytes stay on a line of their own and the
/// next row starts clean. Another process's row still being written looks the same (a reader
/// can see a multi-page write's first pages); its `\n` then lands after that row, whole, as a
/// blank line, which [`crate::read_rows`] skips. Returns the file and its size.
fn open_live(path: &Path) -> io::Result<(File, u64)> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent)?;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)?;
    let mut size = file.metadata()?.len();
    if size > 0 {
        // Appending does not move with the read position: O_APPEND writes always land at the
        // end, so reading the last byte here is safe.
        let mut last = [0u8; 1];
        file.seek(SeekFrom::End(-1))?;
        file.read_exact(&mut last)?;
        if last[0] != b'\n' {
            write_once(&file, &[b"\n"])?;
            size += 1;
        }
    }
    Ok((file, size))
}

/// Moves the live file to its predecessor (replacing the old one) and opens a fresh live file.
///
/// When another process sharing the file already rotated it, the name no longer points at
/// the file this handle held: then this handle only reopens, so it does not push the other
/// process's fresh file into the predecessor's place.
fn rotate(path: &Path, held: Option<fs::Metadata>) -> io::Result<(File, u64)> {
    let still_ours = match (held, fs::metadata(path)) {
        (Some(held), Ok(named)) => same_file(&held, &named),
        _ => false,
    };
    if still_ours {
        fs::rename(path, previous_path(path))?;
    }
    open_live(path)
}

#[cfg(unix)]
fn same_file(a: &fs::Metadata, b: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
fn same_file(a: &fs::Metadata, b: &fs::Metadata) -> bool {
    // Without inode numbers, a file at least as long as ours is taken to be ours.
    b.len() >= a.len()
}

/// A poisoned lock only means another thread panicked mid-append; the log carries on.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
