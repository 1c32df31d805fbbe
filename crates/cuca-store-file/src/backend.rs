//! `FileBackend`: one `.cslog` file per session, appended to under an advisory lock.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use cuca_events::{
    fork_session_id, point_in_session, BackendGauge, PluginError, ReplayedRecord, SessionBackend,
    SessionEvent, SessionRecord,
};

use crate::codec::{decode_frame, encode_frame_with, HEADER, HEADER_LEN, MAX_FRAME_LEN};
use crate::compact::{
    compact_file, expand_file, open_compacted, scan_compacted, Compaction, COMPACTED_EXTENSION,
    COMPACTION_TMP_SUFFIX,
};
use crate::scan::{
    open_session_file, replay_file, replay_reader, scan, scan_each, ScanReport, ScanSummary,
};

#[cfg(test)]
mod tests;

/// The file name extension of a session file.
pub const EXTENSION: &str = "cslog";

/// The longest file name the common Linux and macOS file systems accept, in bytes; a session
/// id must fit in it together with `.cslog`.
pub const MAX_FILE_NAME_LEN: usize = 255;

/// How hard an append works to get its record onto the disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Durability {
    /// One `write` per append: the record is in the OS page cache when `append` returns, so it
    /// survives the process crashing but not the machine losing power.
    #[default]
    Buffered,
    /// `Buffered` plus `fdatasync` per append, and a directory sync when a session file is
    /// created: the record survives power loss. Costs one disk flush per append.
    Sync,
}

/// Checks that `session_id` can name a file `{dir}/{session_id}.cslog` and nothing else.
///
/// Refused with [`PluginError::Validation`]: an empty id; an id containing `/`, `\` or NUL
/// (it would name a subdirectory, or be cut short by the OS); an id made only of dots
/// (`.`, `..`: path components, not names); an id longer than
/// [`MAX_FILE_NAME_LEN`] bytes once `.cslog` is added.
///
/// ```
/// use cuca_store_file::validate_session_id;
/// assert!(validate_session_id("demo:fork:demo:1:0").is_ok());
/// assert!(validate_session_id("../etc/passwd").is_err());
/// ```
pub fn validate_session_id(session_id: &str) -> Result<(), PluginError> {
    let refuse = |why: &str| {
        Err(PluginError::validation(
            "session_id",
            format!("{session_id:?} {why}; FileBackend stores a session as {{dir}}/{{session_id}}.cslog"),
        ))
    };
    if session_id.is_empty() {
        return refuse("is empty");
    }
    if let Some(bad) = session_id.chars().find(|c| matches!(c, '/' | '\\' | '\0')) {
        return refuse(&format!(
            "contains {bad:?}, which would name another directory or end the name early"
        ));
    }
    if session_id.chars().all(|c| c == '.') {
        return refuse("is made only of dots, which file systems read as a path component");
    }
    let name_len = session_id.len() + 1 + EXTENSION.len();
    if name_len > MAX_FILE_NAME_LEN {
        return refuse(&format!(
            "is {} bytes; with \".cslog\" that is {name_len} bytes, over the {MAX_FILE_NAME_LEN}-byte file name limit",
            session_id.len()
        ));
    }
    Ok(())
}

/// Sessions as `.cslog` files in one directory.
///
/// See the crate docs for the format and the recovery rule.
#[derive(Debug)]
pub struct FileBackend {
    dir: PathBuf,
    durability: Durability,
    /// One open, locked append handle per session this instance has written to.
    handles: Mutex<Handles>,
    /// Counts forks made by this instance: the `n` of `{session_id}:fork:{point_id}:{n}`.
    forks: AtomicU64,
}

impl FileBackend {
    /// A backend over `dir`, created (with its parents) if it does not exist.
    pub fn new(dir: impl Into<PathBuf>) -> Result<Self, PluginError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)
            .map_err(|error| PluginError::io("create directory", &dir, error))?;
        Ok(FileBackend {
            dir,
            durability: Durability::default(),
            handles: Mutex::new(Handles::default()),
            forks: AtomicU64::new(0),
        })
    }

    /// The same backend with `durability` for every later append.
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// The directory the session files live in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The durability appends use.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// The file a session is stored in, `{dir}/{session_id}.cslog`, once the id is valid.
    pub fn session_path(&self, session_id: &str) -> Result<PathBuf, PluginError> {
        validate_session_id(session_id)?;
        Ok(self.dir.join(format!("{session_id}.{EXTENSION}")))
    }

    /// The file a compacted session is stored in, `{dir}/{session_id}.cslog.gz`.
    pub fn compacted_path(&self, session_id: &str) -> Result<PathBuf, PluginError> {
        validate_session_id(session_id)?;
        Ok(self.dir.join(format!("{session_id}.{COMPACTED_EXTENSION}")))
    }

    /// Where a session is stored: its live file, else its compacted file, else nowhere.
    ///
    /// Both exist only after a crash during a compaction or an expansion, when both hold the
    /// same bytes; the live file is then the one read and written.
    fn stored(&self, session_id: &str) -> Result<Option<Stored>, PluginError> {
        let live = self.session_path(session_id)?;
        if exists(&live)? {
            return Ok(Some(Stored::Live(live)));
        }
        if !compactable(session_id) {
            // Its compacted name would be too long to exist (asking the OS would be an error).
            return Ok(None);
        }
        let packed = self.compacted_path(session_id)?;
        if exists(&packed)? {
            return Ok(Some(Stored::Compacted(packed)));
        }
        Ok(None)
    }

    /// Compacts a finished session: its `.cslog` is gzipped into `{session_id}.cslog.gz`,
    /// checked by reading it back, and the `.cslog` removed.
    ///
    /// Reads (`replay`, `replay_each`, `verify`, `fork`'s) decode the compacted file
    /// transparently; the first append or fork expands it back into a live `.cslog`. The gzip
    /// holds the `.cslog` bytes unchanged, so `verify` reports the same records, skipped
    /// frames and torn tail. This instance's append handle is closed first; a writer
    /// elsewhere holding the file's lock makes this fail and changes nothing. A file a load
    /// refuses is not compacted ([`PluginError::Corrupt`]). A session compacted already is
    /// reported with [`Compaction::already_compacted`].
    ///
    /// What it trades: a `.cslog` tolerates damage frame by frame, a gzip stream does not (a
    /// damaged compacted file fails to read from the damage on). Compact sessions that are
    /// finished and kept as an archive.
    ///
    /// ```
    /// use cuca_events::{SessionBackend, SessionEvent, SessionRecord};
    /// use cuca_store_file::FileBackend;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let backend = FileBackend::new(dir.path())?;
    /// let record = |sequence: u64| SessionRecord {
    ///     session_id: "demo".into(),
    ///     sequence,
    ///     timestamp_ms: 0,
    ///     event: SessionEvent::Output { text: "the vault is in Lisbon ".repeat(10) },
    /// };
    /// for sequence in 0..50 {
    ///     backend.append(record(sequence))?;
    /// }
    /// let compaction = backend.compact("demo")?;
    /// assert_eq!(compaction.records, 50);
    /// assert!(compaction.bytes_after < compaction.bytes_before / 4);
    /// assert!(!dir.path().join("demo.cslog").exists());
    /// assert_eq!(backend.replay("demo")?.len(), 50); // read through the gzip
    ///
    /// backend.append(record(50))?; // expands it back into demo.cslog first
    /// assert!(dir.path().join("demo.cslog").is_file());
    /// assert_eq!(backend.replay("demo")?.len(), 51);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn compact(&self, session_id: &str) -> Result<Compaction, PluginError> {
        validate_session_id(session_id)?;
        if !compactable(session_id) {
            return Err(PluginError::validation(
                "session_id",
                format!(
                    "{session_id:?} is too long to compact: {{id}}.{COMPACTED_EXTENSION}{COMPACTION_TMP_SUFFIX} would be {} bytes, over the {MAX_FILE_NAME_LEN}-byte file name limit",
                    session_id.len() + 1 + COMPACTED_EXTENSION.len() + COMPACTION_TMP_SUFFIX.len()
                ),
            ));
        }
        self.close(session_id);
        match self.stored(session_id)? {
            Some(Stored::Live(live)) => {
                let packed = self.compacted_path(session_id)?;
                compact_file(&live, &packed, &self.dir, try_lock)
            }
            Some(Stored::Compacted(packed)) => {
                let report = scan_compacted(&packed)?;
                let bytes_after = std::fs::metadata(&packed)
                    .map_err(|error| PluginError::io("stat", &packed, error))?
                    .len();
                Ok(Compaction {
                    path: packed,
                    records: report.records.len(),
                    bytes_before: 0,
                    bytes_after,
                    already_compacted: true,
                })
            }
            None => Err(PluginError::NotFound {
                what: "session".into(),
                id: session_id.into(),
            }),
        }
    }

    /// Scans a session's file: records, skipped frames, torn tail, verdict.
    ///
    /// A session with no file is [`PluginError::NotFound`].
    pub fn verify(&self, session_id: &str) -> Result<ScanReport, PluginError> {
        match self.stored(session_id)? {
            Some(Stored::Live(path)) => scan(&path),
            // The report of the `.cslog` bytes inside, naming the compacted file.
            Some(Stored::Compacted(path)) => scan_compacted(&path),
            None => Err(PluginError::NotFound {
                what: "session".into(),
                id: session_id.into(),
            }),
        }
    }

    /// Scans a session's file like [`FileBackend::verify`], handing each good record to
    /// `visit` in file order instead of keeping it: the summary has the counts, skipped
    /// frames, torn tail and verdict, and memory stays one read chunk however long the
    /// session. Records are visited also when the verdict turns out refused (the verdict is
    /// known only at the end). An error from `visit` stops the scan and is returned.
    ///
    /// A session with no file is [`PluginError::NotFound`]; a compacted file whose gzip
    /// stream is damaged is [`PluginError::Io`] naming it, as with [`FileBackend::verify`].
    ///
    /// ```
    /// use cuca_events::{SessionBackend, SessionEvent, SessionRecord};
    /// use cuca_store_file::{FileBackend, Verdict};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let backend = FileBackend::new(dir.path())?;
    /// for sequence in 0..3 {
    ///     backend.append(SessionRecord {
    ///         session_id: "demo".into(),
    ///         sequence,
    ///         timestamp_ms: 10 + sequence,
    ///         event: SessionEvent::Output { text: "token".into() },
    ///     })?;
    /// }
    /// let mut last_ms = 0;
    /// let summary = backend.verify_each("demo", &mut |record| {
    ///     last_ms = record.timestamp_ms;
    ///     Ok(())
    /// })?;
    /// assert_eq!((summary.n_records, summary.verdict, last_ms), (3, Verdict::Clean, 12));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn verify_each(
        &self,
        session_id: &str,
        visit: &mut dyn FnMut(ReplayedRecord<'_>) -> Result<(), PluginError>,
    ) -> Result<ScanSummary, PluginError> {
        match self.stored(session_id)? {
            Some(Stored::Live(path)) => scan_each(open_session_file(&path)?, &path, visit),
            Some(Stored::Compacted(path)) => scan_each(open_compacted(&path)?, &path, visit),
            None => Err(PluginError::NotFound {
                what: "session".into(),
                id: session_id.into(),
            }),
        }
    }

    /// Bytes one session's file (live or compacted) takes on disk; zero when it has none.
    pub fn bytes_on_disk(&self, session_id: &str) -> Result<u64, PluginError> {
        let Some(stored) = self.stored(session_id)? else {
            return Ok(0);
        };
        let path = stored.path();
        match std::fs::metadata(path) {
            Ok(metadata) => Ok(metadata.len()),
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(0),
            Err(error) => Err(PluginError::io("stat", path, error)),
        }
    }

    /// Whether a session is stored compacted (see [`FileBackend::compact`]).
    pub fn is_compacted(&self, session_id: &str) -> Result<bool, PluginError> {
        Ok(matches!(
            self.stored(session_id)?,
            Some(Stored::Compacted(_))
        ))
    }

    /// Closes this instance's append handle for a session, releasing its lock.
    ///
    /// The next append opens (and locks) the file again. Returns whether a handle was open.
    pub fn close(&self, session_id: &str) -> bool {
        self.lock_handles().remove(session_id).is_some()
    }

    fn lock_handles(&self) -> MutexGuard<'_, Handles> {
        // A panic while holding this lock cannot leave the map half-updated: it is only
        // read, inserted into and removed from, each a single step.
        self.handles
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The open append handle of a session, opening (creating, locking) the file on first use.
    fn handle(&self, session_id: &str) -> Result<Arc<Mutex<Handle>>, PluginError> {
        let mut handles = self.lock_handles();
        if let Some(handle) = handles.get(session_id) {
            return Ok(handle);
        }
        // The id is checked here, once, when its file is first opened: an id with an open
        // handle has passed.
        let path = self.session_path(session_id)?;
        if let Some(Stored::Compacted(packed)) = self.stored(session_id)? {
            // Written to again: back to a live file, which appends as any other.
            expand_file(&packed, &path, &self.dir)?;
        }
        let handle = match Handle::create(&path, &self.dir, self.durability, &[])? {
            Some(handle) => handle,
            None => Handle::open_existing(&path)?,
        };
        let handle = Arc::new(Mutex::new(handle));
        handles.insert(session_id.to_owned(), Arc::clone(&handle));
        Ok(handle)
    }
}

/// Whether a session's compacted file, and the temporary name it is written under, fit in a
/// file name. The longest ids a `.cslog` allows do not: such sessions stay live.
fn compactable(session_id: &str) -> bool {
    session_id.len() + 1 + COMPACTED_EXTENSION.len() + COMPACTION_TMP_SUFFIX.len()
        <= MAX_FILE_NAME_LEN
}

/// Where a session's records are: a live `.cslog` or a compacted `.cslog.gz`.
#[derive(Debug)]
enum Stored {
    Live(PathBuf),
    Compacted(PathBuf),
}

impl Stored {
    fn path(&self) -> &Path {
        match self {
            Stored::Live(path) | Stored::Compacted(path) => path,
        }
    }
}

/// The open append handles, by session id, and the one used last.
///
/// A session log writes one session at a time, so the last handle answers most appends with
/// one string comparison instead of hashing the id.
#[derive(Debug, Default)]
struct Handles {
    by_session: HashMap<String, Arc<Mutex<Handle>>>,
    last: Option<(String, Arc<Mutex<Handle>>)>,
}

impl Handles {
    fn get(&mut self, session_id: &str) -> Option<Arc<Mutex<Handle>>> {
        if let Some((id, handle)) = &self.last {
            if id == session_id {
                return Some(Arc::clone(handle));
            }
        }
        let handle = Arc::clone(self.by_session.get(session_id)?);
        self.last = Some((session_id.to_owned(), Arc::clone(&handle)));
        Some(handle)
    }

    fn insert(&mut self, session_id: String, handle: Arc<Mutex<Handle>>) {
        self.last = None;
        self.by_session.insert(session_id, handle);
    }

    fn remove(&mut self, session_id: &str) -> Option<Arc<Mutex<Handle>>> {
        if self.last.as_ref().is_some_and(|(id, _)| id == session_id) {
            self.last = None;
        }
        self.by_session.remove(session_id)
    }
}

fn lock_handle(handle: &Mutex<Handle>) -> MutexGuard<'_, Handle> {
    // Nothing in an append panics after its write starts, so a poisoned handle still
    // describes the file's tail correctly.
    handle
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn exists(path: &Path) -> Result<bool, PluginError> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => Ok(true),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(false),
        Err(error) => Err(PluginError::io("stat", path, error)),
    }
}

fn now_ms() -> u64 {
    // A clock before 1970 stamps 0 and one past u64 milliseconds saturates: neither is a
    // reason to refuse a fork.
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Writes `bytes` with one `write` call. A short write is an error: the caller never writes
/// the rest of a frame later, where it could no longer be told apart from a new frame.
pub(crate) fn write_once(writer: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    loop {
        match writer.write(bytes) {
            Ok(n) if n == bytes.len() => return Ok(()),
            Ok(n) => {
                return Err(std::io::Error::new(
                    ErrorKind::WriteZero,
                    format!(
                        "short write: {n} of {} bytes (the disk is likely full, or a file size limit was reached)",
                        bytes.len()
                    ),
                ))
            }
            // Nothing was written, so trying again cannot split a frame.
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
}

fn try_lock(file: &File, path: &Path) -> Result<(), PluginError> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => Err(PluginError::Locked {
            path: path.to_path_buf(),
            message: "another FileBackend, in this process or another, has this session open for append; close it (FileBackend::close or drop) or record to another session id".into(),
        }),
        Err(std::fs::TryLockError::Error(error)) => Err(PluginError::io("lock", path, error)),
    }
}

/// An open, locked session file and what the next append must know about its tail.
#[derive(Debug)]
pub(crate) struct Handle {
    file: File,
    path: PathBuf,
    /// What the next append writes before its frame to seal torn bytes at the file's end:
    /// nothing, [`SEAL`], or [`SEAL_WHOLE_FRAME`].
    seal: &'static [u8],
    /// A write failed part-way or the file is unknown: read the tail before the next append.
    probe_tail: bool,
    /// An fsync failed: the data may not be on disk, so this handle refuses every append.
    failed: Option<String>,
    /// Where appends serialize a record, kept at its high-water length.
    scratch: Vec<u8>,
    /// The frame bytes of the last append, kept for their allocation.
    frame: Vec<u8>,
}

impl Handle {
    fn new(file: File, path: &Path) -> Self {
        Handle {
            file,
            path: path.to_path_buf(),
            seal: &[],
            probe_tail: false,
            failed: None,
            scratch: Vec::new(),
            frame: Vec::new(),
        }
    }

    /// Creates a new session file holding the header and `body` (whole frames), locked.
    /// `None` when the file already exists: it is never written into.
    fn create(
        path: &Path,
        dir: &Path,
        durability: Durability,
        body: &[u8],
    ) -> Result<Option<Handle>, PluginError> {
        let file = match OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .open(path)
        {
            Ok(file) => file,
            Err(error) if error.kind() == ErrorKind::AlreadyExists => return Ok(None),
            Err(error) => return Err(PluginError::io("create", path, error)),
        };
        // Lock before the header goes in, so a racing opener waits on a file it can finish.
        try_lock(&file, path)?;
        let mut bytes = Vec::with_capacity(HEADER_LEN + body.len());
        bytes.extend_from_slice(&HEADER);
        bytes.extend_from_slice(body);
        let mut handle = Handle::new(file, path);
        let written = write_once(&mut handle.file, &bytes).map_err(|error| ("write", error));
        let synced = written.and_then(|()| match durability {
            Durability::Buffered => Ok(()),
            Durability::Sync => handle
                .file
                .sync_data()
                .and_then(|()| File::open(dir).and_then(|dir| dir.sync_all()))
                .map_err(|error| ("sync", error)),
        });
        if let Err((operation, error)) = synced {
            // The file is this call's own and holds nothing acknowledged: take it back.
            drop(handle);
            let _ = std::fs::remove_file(path);
            return Err(PluginError::io(operation, path, error));
        }
        Ok(Some(handle))
    }

    /// Opens an existing session file for append, locked, after checking its header.
    fn open_existing(path: &Path) -> Result<Handle, PluginError> {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(path)
            .map_err(|error| PluginError::io("open for append", path, error))?;
        try_lock(&file, path)?;
        let len = file
            .metadata()
            .map_err(|error| PluginError::io("stat", path, error))?
            .len();
        let mut header = [0u8; HEADER_LEN];
        let n_header =
            read_at(&file, 0, &mut header).map_err(|error| PluginError::io("read", path, error))?;
        let header = &header[..n_header];
        if let Some(at) = header.iter().zip(HEADER.iter()).position(|(a, b)| a != b) {
            let message = if at == HEADER_LEN - 1 {
                format!(
                    "unknown .cslog version {}; this build reads and appends version {}",
                    header[at],
                    crate::VERSION
                )
            } else {
                "not a .cslog file (no \"CUCASLOG\" magic); it is left as it is".to_owned()
            };
            return Err(PluginError::Corrupt {
                path: path.to_path_buf(),
                offset: at as u64,
                message,
            });
        }
        let mut handle = Handle::new(file, path);
        if n_header < HEADER_LEN {
            // A header cut short by a crash at creation: nothing was recorded, so finish it.
            write_once(&mut handle.file, &HEADER[n_header..])
                .map_err(|error| PluginError::io("write", path, error))?;
        } else {
            handle.seal = tail_seal(&handle.file, len)
                .map_err(|error| PluginError::io("read", path, error))?;
        }
        Ok(handle)
    }

    /// Appends one record as one frame (sealing a torn tail first, in the same write).
    fn append(
        &mut self,
        record: &SessionRecord,
        durability: Durability,
    ) -> Result<(), PluginError> {
        if let Some(reason) = &self.failed {
            return Err(PluginError::Backend {
                backend: "file".into(),
                message: format!(
                    "{} refuses appends: an earlier fsync failed ({reason}) and what it held may not be on disk; drop this backend, then verify the file",
                    self.path.display()
                ),
                source: None,
            });
        }
        if self.probe_tail {
            let len = self
                .file
                .metadata()
                .map_err(|error| PluginError::io("stat", &self.path, error))?
                .len();
            self.seal = tail_seal(&self.file, len)
                .map_err(|error| PluginError::io("read", &self.path, error))?;
            self.probe_tail = false;
        }
        self.frame.clear();
        self.frame.extend_from_slice(self.seal);
        encode_frame_with(record, &mut self.scratch, &mut self.frame).map_err(|error| {
            PluginError::validation(
                "SessionRecord",
                format!("{} cannot be stored: {error}", record.point_id()),
            )
        })?;
        if let Err(error) = write_once(&mut self.file, &self.frame) {
            // Some bytes may be on disk: the next append reads the tail and seals it.
            self.probe_tail = true;
            return Err(PluginError::io("append to", &self.path, error));
        }
        self.seal = &[];
        if durability == Durability::Sync {
            if let Err(error) = self.file.sync_data() {
                self.failed = Some(error.to_string());
                return Err(PluginError::io("sync", &self.path, error));
            }
        }
        Ok(())
    }
}

/// Reads up to `buf.len()` bytes at `offset`; fewer only at the end of the file.
fn read_at(mut file: &File, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
    // The handle is in append mode, where writes ignore the cursor, so moving it is harmless.
    file.seek(SeekFrom::Start(offset))?;
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}

/// The seal for torn bytes: a lone `0x00` ends them as a frame of their own, which fails to
/// decode and is skipped because the records around it continue the sequence.
pub(crate) const SEAL: &[u8] = &[0x00];

/// The seal when the torn bytes are a whole frame short only of its terminator. A lone `0x00`
/// would turn them into a valid record that was never acknowledged (the resumed writer then
/// reuses its sequence number). `0x02 0x01` first adds a one-byte COBS group, so the bytes
/// decode one or two bytes longer than the frame that was cut, its CRC-32 no longer matches,
/// and it is skipped like any other torn frame. (A lone `0x01` is not enough: after a full
/// 254-byte group it decodes to nothing.)
pub(crate) const SEAL_WHOLE_FRAME: &[u8] = &[0x02, 0x01, 0x00];

/// What must be written before the next frame: nothing when the file ends in a terminator
/// (or the header), else the seal that keeps the torn bytes from ever reading as a record.
fn tail_seal(file: &File, len: u64) -> std::io::Result<&'static [u8]> {
    let header_end = HEADER_LEN as u64;
    if len <= header_end {
        return Ok(&[]);
    }
    let mut last = [0u8; 1];
    if read_at(file, len - 1, &mut last)? != 1 || last[0] == 0 {
        return Ok(&[]);
    }
    // Read back to the last terminator, but never more than one frame's worth: a longer
    // tail cannot be a whole frame.
    let window = (len - header_end).min(MAX_FRAME_LEN as u64 + 1);
    let mut tail = vec![0u8; window as usize];
    let n = read_at(file, len - window, &mut tail)?;
    tail.truncate(n);
    let torn_start = match memchr::memrchr(0, &tail) {
        Some(at) => at + 1,
        None if window == len - header_end => 0,
        None => return Ok(SEAL),
    };
    if decode_frame(&mut tail[torn_start..]).is_ok() {
        Ok(SEAL_WHOLE_FRAME)
    } else {
        Ok(SEAL)
    }
}

impl SessionBackend for FileBackend {
    fn name(&self) -> &str {
        "file"
    }

    fn append(&self, record: SessionRecord) -> Result<(), PluginError> {
        let handle = self.handle(&record.session_id)?;
        let mut handle = lock_handle(&handle);
        handle.append(&record, self.durability)
    }

    fn replay(&self, session_id: &str) -> Result<Vec<SessionRecord>, PluginError> {
        match self.stored(session_id)? {
            Some(Stored::Live(path)) => scan(&path)?.into_records(),
            Some(Stored::Compacted(path)) => scan_compacted(&path)?.into_records(),
            None => Ok(Vec::new()),
        }
    }

    /// Decodes each frame where it lies in the read chunk into a [`ReplayedRecord`] that
    /// borrows its session id from the chunk, and visits it: no `Vec` of the session's
    /// records, one allocation per string of the event and none for the id.
    ///
    /// The recovery rule is [`crate::scan`]'s: a file `replay` refuses returns the same
    /// [`PluginError::Corrupt`], as soon as the refusal is found, which is only at the first
    /// good record after the damage; the records visited before it are to be discarded.
    fn replay_each(
        &self,
        session_id: &str,
        visit: &mut dyn FnMut(ReplayedRecord<'_>) -> Result<(), PluginError>,
    ) -> Result<(), PluginError> {
        match self.stored(session_id)? {
            Some(Stored::Live(path)) => replay_file(&path, visit),
            Some(Stored::Compacted(path)) => replay_reader(open_compacted(&path)?, &path, visit),
            None => Ok(()),
        }
    }

    fn fork(&self, session_id: &str, point_id: &str) -> Result<String, PluginError> {
        let path = self.session_path(session_id)?;
        let point = point_in_session(session_id, point_id)?;
        // A compacted original is expanded by `handle` below, before it is read.
        if self.stored(session_id)?.is_none() {
            return Err(PluginError::NotFound {
                what: "session".into(),
                id: session_id.into(),
            });
        }
        // Hold the original's handle for the whole fork, so no append of this instance lands
        // between reading its tail and writing the audit record at tail + 1.
        let original = self.handle(session_id)?;
        let mut original = lock_handle(&original);
        let records = scan(&path)?.into_records()?;
        let Some(cut) = records.iter().position(|record| record.sequence == point) else {
            return Err(PluginError::NotFound {
                what: "point".into(),
                id: point_id.into(),
            });
        };
        // Records are stored as given, so a file may end at sequence u64::MAX; the audit
        // record then has no sequence left, and the fork is refused before any file is made.
        let tail = match records.last() {
            Some(last) => last.sequence.checked_add(1).ok_or_else(|| PluginError::CapacityExceeded {
                resource: format!("session {session_id:?}"),
                cap: u64::MAX,
                message: format!(
                    "the last record of {} has sequence u64::MAX, so the Fork audit record has no sequence left; nothing was changed",
                    path.display()
                ),
            })?,
            None => 0,
        };

        let mut body = Vec::new();
        let mut scratch = Vec::new();
        let mut new_id;
        let mut new_path;
        let branch = loop {
            let n = self.forks.fetch_add(1, Ordering::Relaxed);
            new_id = fork_session_id(session_id, point_id, n);
            new_path = self.session_path(&new_id)?;
            body.clear();
            for record in &records[..=cut] {
                let relabelled = SessionRecord {
                    session_id: new_id.clone(),
                    ..record.clone()
                };
                encode_frame_with(&relabelled, &mut scratch, &mut body).map_err(|error| {
                    PluginError::validation(
                        "SessionRecord",
                        format!("{} cannot be stored: {error}", relabelled.point_id()),
                    )
                })?;
            }
            // `create` never opens a file that exists: an existing id is not free.
            if let Some(handle) = Handle::create(&new_path, &self.dir, self.durability, &body)? {
                break handle;
            }
        };
        let audit = SessionRecord {
            session_id: session_id.to_owned(),
            sequence: tail,
            timestamp_ms: now_ms(),
            event: SessionEvent::Fork {
                from_point: point_id.to_owned(),
                to_session: new_id.clone(),
            },
        };
        if let Err(error) = original.append(&audit, self.durability) {
            // The branch is this call's own and nothing acknowledged it: a fork fails whole.
            drop(branch);
            let _ = std::fs::remove_file(&new_path);
            return Err(error);
        }
        self.lock_handles()
            .insert(new_id.clone(), Arc::new(Mutex::new(branch)));
        Ok(new_id)
    }

    fn sessions(&self) -> Result<Vec<String>, PluginError> {
        let entries = std::fs::read_dir(&self.dir)
            .map_err(|error| PluginError::io("list", &self.dir, error))?;
        let suffix = format!(".{EXTENSION}");
        let compacted = format!(".{COMPACTED_EXTENSION}");
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|error| PluginError::io("list", &self.dir, error))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let Some(id) = name
                .strip_suffix(&suffix)
                .or_else(|| name.strip_suffix(&compacted))
            else {
                continue;
            };
            let is_file = std::fs::metadata(entry.path()).is_ok_and(|metadata| metadata.is_file());
            if is_file && validate_session_id(id).is_ok() {
                ids.push(id.to_owned());
            }
        }
        ids.sort();
        // A session caught mid-compaction has both files: it is one session.
        ids.dedup();
        Ok(ids)
    }

    fn gauge(&self) -> BackendGauge {
        let bytes = self.sessions().ok().map(|ids| {
            ids.iter()
                .filter_map(|id| self.bytes_on_disk(id).ok())
                .sum::<u64>()
        });
        BackendGauge {
            records: None,
            max_records: None,
            bytes_on_disk: bytes,
        }
    }
}
