//! `CallLog`: the handle that appends rows, rotates the file, and goes silent on a write
//! failure.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime};

use crate::env::{previous_path, Env, BODIES_MAX_BYTES, MAX_BYTES};
use crate::finite::take_non_finite;
use crate::record::{new_id, Record, PHASE_START};
use crate::time::format_rfc3339_millis;
use crate::Attempt;

/// Where the one line a silenced log prints goes. The default writes it to stderr; tests
/// inject one that collects the lines.
pub type WarnSink = Arc<dyn Fn(&str) + Send + Sync>;

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
    /// Set by the first write failure; every later append returns before the lock.
    silenced: AtomicBool,
    writer: Mutex<Writer>,
    memory: Arc<Memory>,
}

/// The open file and how many bytes this handle believes it holds.
#[derive(Default)]
struct Writer {
    file: Option<File>,
    size: u64,
    /// The file we opened did not end in `\n` (a torn row from a crash): the next write starts
    /// with one, so the torn bytes stay on a line of their own.
    seal_torn_tail: bool,
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
    memory: Option<Arc<Memory>>,
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
    pub fn warn_sink(mut self, warn: WarnSink) -> Self {
        self.warn = warn;
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
                silenced: AtomicBool::new(false),
                writer: Mutex::new(Writer::default()),
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
            memory: None,
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

    /// Whether a write failure has silenced this log for the rest of the process.
    pub fn is_silenced(&self) -> bool {
        self.inner.silenced.load(Ordering::Relaxed)
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
    /// bodies pin is on, and takes any non-finite float off the row, naming it in
    /// [`Record::note`]. The line is serialized before the lock is taken and written with one
    /// `write`, so rows from concurrent threads and tasks never interleave.
    pub fn append(&self, mut record: Record) {
        let now = SystemTime::now();
        if record.ts.is_empty() {
            record.ts = format_rfc3339_millis(now);
        }
        if !self.inner.bodies {
            record.request_body = String::new();
            record.response_body = String::new();
        }
        take_non_finite(&mut record);
        self.remember(&record, now);
        if self.inner.path.is_none() || self.is_silenced() {
            return;
        }
        let mut line = match serde_json::to_vec(&record) {
            Ok(line) => line,
            // Unreachable for this struct once the floats are finite; if it ever happens the
            // log says so once rather than failing the call.
            Err(error) => return self.silence(&error.to_string()),
        };
        line.push(b'\n');
        self.write_line(&line);
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
        let template = Record {
            id: record.id.clone(),
            run: record.run.clone(),
            tag: record.tag.clone(),
            node: record.node.clone(),
            model: record.model.clone(),
            attempt: record.attempt,
            ..Record::default()
        };
        self.append(record);
        Attempt::new(self.clone(), template, started)
    }

    /// Releases the file. Called on the way out of a process; one that forgets loses
    /// nothing, because every row is written as it happens. A later append opens it again.
    pub fn close(&self) {
        let mut writer = lock(&self.inner.writer);
        writer.file = None;
    }

    fn remember(&self, record: &Record, at: SystemTime) {
        let memory = &self.inner.memory;
        if record.is_start() {
            if !record.run.is_empty() {
                *lock(&memory.calls_per_run)
                    .entry(record.run.clone())
                    .or_insert(0) += 1;
            }
        } else if answered(record) {
            let model = if record.served.is_empty() {
                &record.model
            } else {
                &record.served
            };
            if !model.is_empty() {
                *lock(&memory.last_call) = Some(LastCall {
                    model: model.clone(),
                    at,
                });
            }
        }
    }

    fn write_line(&self, line: &[u8]) {
        let Some(path) = self.inner.path.as_deref() else {
            return;
        };
        let mut writer = lock(&self.inner.writer);
        // Re-checked under the lock: another thread may have silenced the log while this one
        // waited, and its file handle is gone.
        if self.is_silenced() {
            return;
        }
        if writer.file.is_none() {
            match open_live(path) {
                Ok(opened) => *writer = opened,
                Err(error) => {
                    drop(writer);
                    return self.silence(&error.to_string());
                }
            }
        }
        if writer.size > 0 && writer.size + line.len() as u64 > self.inner.max_bytes {
            if let Err(error) = rotate(&mut writer, path) {
                drop(writer);
                return self.silence(&error.to_string());
            }
        }
        let sealed;
        let bytes = if writer.seal_torn_tail {
            let mut with_seal = Vec::with_capacity(line.len() + 1);
            with_seal.push(b'\n');
            with_seal.extend_from_slice(line);
            sealed = with_seal;
            &sealed[..]
        } else {
            line
        };
        let Some(file) = writer.file.as_mut() else {
            return;
        };
        match write_once(file, bytes) {
            Ok(()) => {
                writer.size += bytes.len() as u64;
                writer.seal_torn_tail = false;
            }
            Err(error) => {
                writer.file = None;
                drop(writer);
                self.silence(&error.to_string());
            }
        }
    }

    /// Turns the log off for the rest of this handle's life and says so once.
    fn silence(&self, error: &str) {
        if self.inner.silenced.swap(true, Ordering::AcqRel) {
            return;
        }
        lock(&self.inner.writer).file = None;
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

/// One `write` of the whole line. A short write (a nearly full disk) is finished rather than
/// left torn, still under the lock, so no other row lands inside it; the next write then
/// fails and silences the log.
fn write_once(file: &mut File, bytes: &[u8]) -> io::Result<()> {
    let written = file.write(bytes)?;
    if written < bytes.len() {
        file.write_all(&bytes[written..])?;
    }
    Ok(())
}

/// Opens (creating) the live file for appending and notes whether it ends in a torn row.
fn open_live(path: &Path) -> io::Result<Writer> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent)?;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)?;
    let size = file.metadata()?.len();
    let mut seal_torn_tail = false;
    if size > 0 {
        // Appending does not move with the read position: O_APPEND writes always land at the
        // end, so reading the last byte here is safe.
        let mut last = [0u8; 1];
        file.seek(SeekFrom::End(-1))?;
        file.read_exact(&mut last)?;
        seal_torn_tail = last[0] != b'\n';
    }
    Ok(Writer {
        file: Some(file),
        size,
        seal_torn_tail,
    })
}

/// Moves the live file to its predecessor (replacing the old one) and opens a fresh live file.
///
/// When another process sharing the file already rotated it, the name no longer points at
/// the file this handle holds: then this handle only reopens, so it does not push the other
/// process's fresh file into the predecessor's place.
fn rotate(writer: &mut Writer, path: &Path) -> io::Result<()> {
    let ours = writer.file.as_ref().map(File::metadata).transpose()?;
    let still_ours = match (ours, fs::metadata(path)) {
        (Some(ours), Ok(named)) => same_file(&ours, &named),
        _ => false,
    };
    writer.file = None;
    if still_ours {
        fs::rename(path, previous_path(path))?;
    }
    *writer = open_live(path)?;
    Ok(())
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
