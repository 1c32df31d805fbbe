//! `FileBackend`: one `.cslog` file per session, appended to under an advisory lock.

use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use cuca_events::{
    fork_session_id, point_in_session, AppendRefused, BackendGauge, PluginError, ReadAfter,
    ReadMark, ReplayedRecord, SessionBackend, SessionEvent, SessionRecord, SessionStamp,
};

use crate::codec::{check_frame_len, encode_frame_with, HEADER, HEADER_LEN, SEAL};
use crate::compact::{
    compact_file, compacted_reader, expand_locked, scan_compacted, Compaction, COMPACTED_EXTENSION,
};
use crate::files::hooks::{self, Point};
use crate::files::{
    changing, lock_live, open_regular, remove_if_present, still_named, try_lock, LockedLive, Mode,
    MAX_READ_TRIES,
};
use crate::handles::{Handles, DEFAULT_MAX_OPEN_SESSIONS};
use crate::mark::{self, compacted_check, FileCheck};
use crate::naming::{compacted_name, is_overflow_stem, live_name, MAX_SESSION_ID_LEN};
use crate::scan::{
    replay_file_after, replay_reader, scan_each, scan_reader_as, skim_each, ScanReport,
    ScanSummary, SkimmedRecord,
};
use crate::sequence::{check_sequence, last_sequence};

mod create;
#[cfg(test)]
mod races;
#[cfg(test)]
mod tests;

/// The file name extension of a session file.
pub const EXTENSION: &str = "cslog";

/// The longest file name the common Linux and macOS file systems accept, in bytes. A session
/// whose `{session_id}.cslog` does not fit is stored under an overflow name (see
/// `docs/cslog-format.md`).
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
/// Refused with [`PluginError::Validation`]: what [`cuca_events::validate_session_id`] refuses
/// in every store (an empty id, a control character: NUL, `\n`, ESC, DEL, C1 …); an id
/// containing `/` or `\` (it would name a subdirectory); an id made only of dots
/// (`.`, `..`: path components, not names); an id longer than [`MAX_SESSION_ID_LEN`] bytes.
/// An id too long for one file name is valid: it is stored under an overflow name.
///
/// ```
/// use cuca_store_file::validate_session_id;
/// assert!(validate_session_id("demo:fork:demo:1:0").is_ok());
/// assert!(validate_session_id("../etc/passwd").is_err());
/// assert!(validate_session_id("two\nlines").is_err());
/// ```
pub fn validate_session_id(session_id: &str) -> Result<(), PluginError> {
    let refuse = |why: &str| {
        Err(PluginError::validation(
            "session_id",
            format!("{session_id:?} {why}; FileBackend stores a session as {{dir}}/{{session_id}}.cslog"),
        ))
    };
    cuca_events::validate_session_id(session_id)?;
    if let Some(bad) = session_id.chars().find(|c| matches!(c, '/' | '\\')) {
        return refuse(&format!(
            "contains {bad:?}, which would name another directory"
        ));
    }
    if session_id.chars().all(|c| c == '.') {
        return refuse("is made only of dots, which file systems read as a path component");
    }
    if session_id.len() > MAX_SESSION_ID_LEN {
        return refuse(&format!(
            "is {} bytes, over the {MAX_SESSION_ID_LEN}-byte limit on session ids",
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
    /// The open, locked append handles of the sessions this instance wrote to last, at most
    /// [`FileBackend::max_open_sessions`].
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
            handles: Mutex::new(Handles::new(DEFAULT_MAX_OPEN_SESSIONS)),
            forks: AtomicU64::new(0),
        })
    }

    /// The same backend with `durability` for every later append.
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// The same backend keeping at most `max` sessions open for append (at least one); the
    /// default is [`crate::DEFAULT_MAX_OPEN_SESSIONS`].
    ///
    /// Each open session holds one file descriptor and its file's lock. Past the bound, the
    /// least recently used session is closed, which releases its lock: another writer may then
    /// take the session, and this backend's next append to it gets [`PluginError::Locked`].
    pub fn with_max_open_sessions(self, max: usize) -> Self {
        self.lock_handles().set_max_open(max);
        self
    }

    /// How many sessions this backend keeps open for append at most.
    pub fn max_open_sessions(&self) -> usize {
        self.lock_handles().max_open()
    }

    /// How many sessions this backend has open for append now.
    pub fn open_sessions(&self) -> usize {
        self.lock_handles().len()
    }

    /// The directory the session files live in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The durability appends use.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// The file a session is stored in, `{dir}/{session_id}.cslog` (or its overflow name when
    /// that does not fit one file name), once the id is valid.
    pub fn session_path(&self, session_id: &str) -> Result<PathBuf, PluginError> {
        validate_session_id(session_id)?;
        Ok(self.dir.join(live_name(session_id)))
    }

    /// The file a compacted session is stored in, `{dir}/{session_id}.cslog.gz` (or its
    /// overflow name when that does not fit one file name).
    pub fn compacted_path(&self, session_id: &str) -> Result<PathBuf, PluginError> {
        validate_session_id(session_id)?;
        Ok(self.dir.join(compacted_name(session_id)))
    }

    /// Where a session is stored: its live file, else its compacted file, else nowhere.
    ///
    /// Both exist after a crash during a compaction or an expansion. When the live file holds
    /// less than a header it is the placeholder of an expansion that did not finish, and the
    /// compacted file is the session; otherwise both hold the same bytes and the live file is
    /// the one read and written.
    fn stored(&self, session_id: &str) -> Result<Option<Stored>, PluginError> {
        let live = self.session_path(session_id)?;
        let packed = self.compacted_path(session_id)?;
        match std::fs::symlink_metadata(&live) {
            Ok(metadata) => {
                if metadata.len() < HEADER_LEN as u64 && exists(&packed)? {
                    Ok(Some(Stored::Compacted(packed)))
                } else {
                    Ok(Some(Stored::Live(live)))
                }
            }
            Err(error) if error.kind() == ErrorKind::NotFound => {
                Ok(exists(&packed)?.then_some(Stored::Compacted(packed)))
            }
            Err(error) => Err(PluginError::io("stat", &live, error)),
        }
    }

    /// A session's stored file opened for reading (a regular file only), or `None`. A file
    /// that vanishes between the look and the open was compacted or expanded meanwhile: the
    /// look starts again, and finds the session in its other form.
    fn open_stored(&self, session_id: &str) -> Result<Option<(File, Stored)>, PluginError> {
        for _ in 0..MAX_READ_TRIES {
            let Some(stored) = self.stored(session_id)? else {
                return Ok(None);
            };
            match open_regular(stored.path(), Mode::Read) {
                Ok(file) => return Ok(Some((file, stored))),
                Err(error) if error.kind() == ErrorKind::NotFound => continue,
                Err(error) => return Err(PluginError::io("open", stored.path(), error)),
            }
        }
        Err(changing(&self.session_path(session_id)?))
    }

    /// The report of a session compacted already (nothing is written).
    fn already_compacted(packed: PathBuf) -> Result<Compaction, PluginError> {
        let report = scan_compacted(&packed, None)?;
        let bytes_after = std::fs::metadata(&packed)
            .map_err(|error| PluginError::io("stat", &packed, error))?
            .len();
        Ok(Compaction {
            path: packed,
            records: report.records.len(),
            bytes_before: 0,
            bytes_after,
            already_compacted: true,
            kept_live: false,
        })
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
    /// reported with [`Compaction::already_compacted`]. It compacts even a file the gzip makes
    /// larger; [`FileBackend::compact_if_smaller`] leaves such a file alone.
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
        self.compact_as(session_id, false)
    }

    /// [`FileBackend::compact`], except that a file the gzip would not make smaller (a short
    /// session: gzip's header and trailer outweigh what it saves) is left as it is: the
    /// result has [`Compaction::kept_live`] set, `path` naming the live file and the gzip's
    /// size in `bytes_after`. What `cuca compact` runs.
    ///
    /// ```
    /// use cuca_events::{SessionBackend, SessionEvent, SessionRecord};
    /// use cuca_store_file::FileBackend;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let backend = FileBackend::new(dir.path())?;
    /// backend.append(SessionRecord {
    ///     session_id: "short".into(),
    ///     sequence: 0,
    ///     timestamp_ms: 0,
    ///     event: SessionEvent::Output { text: "ok".into() },
    /// })?;
    /// let compaction = backend.compact_if_smaller("short")?;
    /// assert!(compaction.kept_live && compaction.bytes_after >= compaction.bytes_before);
    /// assert!(dir.path().join("short.cslog").is_file());
    /// assert!(!dir.path().join("short.cslog.gz").exists());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn compact_if_smaller(&self, session_id: &str) -> Result<Compaction, PluginError> {
        self.compact_as(session_id, true)
    }

    fn compact_as(
        &self,
        session_id: &str,
        only_if_smaller: bool,
    ) -> Result<Compaction, PluginError> {
        let live = self.session_path(session_id)?;
        let packed = self.compacted_path(session_id)?;
        self.close(session_id);
        for _ in 0..MAX_READ_TRIES {
            let file = match open_regular(&live, Mode::Read) {
                Ok(file) => file,
                Err(error) if error.kind() == ErrorKind::NotFound => {
                    if !exists(&packed)? {
                        return Err(PluginError::NotFound {
                            what: "session".into(),
                            id: session_id.into(),
                        });
                    }
                    match Self::already_compacted(packed.clone()) {
                        // Expanded meanwhile: look again.
                        Err(PluginError::Io { source, .. })
                            if source.kind() == ErrorKind::NotFound =>
                        {
                            continue
                        }
                        other => return other,
                    }
                }
                Err(error) => return Err(PluginError::io("open", &live, error)),
            };
            // The session's lock: no writer appends, expands or compacts while it is held.
            try_lock(&file, &live)?;
            if !still_named(&live, &file).map_err(|error| PluginError::io("stat", &live, error))? {
                continue;
            }
            let len = file
                .metadata()
                .map_err(|error| PluginError::io("stat", &live, error))?
                .len();
            if len < HEADER_LEN as u64 && exists(&packed)? {
                // The placeholder of an expansion that never finished: it holds nothing, and
                // the compacted file is the session.
                remove_if_present(&live)?;
                drop(file);
                return Self::already_compacted(packed);
            }
            return compact_file(file, &live, &packed, &self.dir, only_if_smaller);
        }
        Err(changing(&live))
    }

    /// Scans a session's file: records, skipped frames, torn tail, verdict.
    ///
    /// A session with no file is [`PluginError::NotFound`].
    pub fn verify(&self, session_id: &str) -> Result<ScanReport, PluginError> {
        match self.open_stored(session_id)? {
            Some((file, Stored::Live(path))) => scan_reader_as(file, &path, Some(session_id)),
            // The report of the `.cslog` bytes inside, naming the compacted file.
            Some((file, Stored::Compacted(path))) => {
                scan_reader_as(compacted_reader(file), &path, Some(session_id))
            }
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
        match self.open_stored(session_id)? {
            Some((file, Stored::Live(path))) => scan_each(file, &path, Some(session_id), visit),
            Some((file, Stored::Compacted(path))) => {
                scan_each(compacted_reader(file), &path, Some(session_id), visit)
            }
            None => Err(PluginError::NotFound {
                what: "session".into(),
                id: session_id.into(),
            }),
        }
    }

    /// [`FileBackend::verify_each`] handing each good record over as a [`SkimmedRecord`]:
    /// its text stays in the read buffer, so a pass that only checks and counts (`cuca
    /// verify`, the planning pass of `cuca replay`) allocates nothing per record. The
    /// summary is the one `verify_each` returns: a skimmed record decodes from exactly the
    /// bytes a stored record does.
    ///
    /// ```
    /// use cuca_events::{SessionBackend, SessionEvent, SessionRecord};
    /// use cuca_store_file::{FileBackend, Verdict};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let backend = FileBackend::new(dir.path())?;
    /// backend.append(SessionRecord {
    ///     session_id: "demo".into(),
    ///     sequence: 0,
    ///     timestamp_ms: 10,
    ///     event: SessionEvent::Output { text: "token".into() },
    /// })?;
    /// let mut kinds = Vec::new();
    /// let summary = backend.skim_each("demo", &mut |record| {
    ///     kinds.push(record.kind());
    ///     Ok(())
    /// })?;
    /// assert_eq!((summary.n_records, summary.verdict, kinds), (1, Verdict::Clean, vec!["Output"]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn skim_each(
        &self,
        session_id: &str,
        visit: &mut dyn FnMut(SkimmedRecord<'_>) -> Result<(), PluginError>,
    ) -> Result<ScanSummary, PluginError> {
        match self.open_stored(session_id)? {
            Some((file, Stored::Live(path))) => skim_each(file, &path, Some(session_id), visit),
            Some((file, Stored::Compacted(path))) => {
                skim_each(compacted_reader(file), &path, Some(session_id), visit)
            }
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
        // The id is checked here, when its file is opened: an id with an open handle has passed.
        let handle = Arc::new(Mutex::new(self.open_for_append(session_id)?));
        handles.insert(session_id.to_owned(), Arc::clone(&handle));
        Ok(handle)
    }

    /// Opens a session's live file for append under the session's lock, creating it, or
    /// expanding the compacted file into it, as what is on disk asks (see [`crate::files`]).
    fn open_for_append(&self, session_id: &str) -> Result<Handle, PluginError> {
        let live = self.session_path(session_id)?;
        let packed = self.compacted_path(session_id)?;
        let handle = match lock_live(&live)? {
            LockedLive::Created(file) => {
                if exists(&packed)? {
                    // Written to again: back to a live file, which appends as any other.
                    Handle::open_existing(expand_locked(file, &packed, &live, &self.dir)?, &live)?
                } else {
                    Handle::start(file, &live, &self.dir, self.durability, &[])?
                }
            }
            LockedLive::Existing(file) => {
                let len = file
                    .metadata()
                    .map_err(|error| PluginError::io("stat", &live, error))?
                    .len();
                if len < HEADER_LEN as u64 && exists(&packed)? {
                    // The placeholder of an expansion that never finished.
                    Handle::open_existing(expand_locked(file, &packed, &live, &self.dir)?, &live)?
                } else {
                    Handle::open_existing(file, &live)?
                }
            }
        };
        if is_overflow_name(&live) {
            check_owner(&handle.file, &live, session_id)?;
        }
        Ok(handle)
    }
}

/// Whether a session file's name is an overflow name, whose true id is inside.
fn is_overflow_name(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .and_then(|name| {
            name.strip_suffix(&format!(".{COMPACTED_EXTENSION}"))
                .or_else(|| name.strip_suffix(&format!(".{EXTENSION}")))
        })
        .is_some_and(is_overflow_stem)
}

/// The session id the first readable record of `.cslog` bytes carries: the true id of a file
/// with an overflow name. `None` when no record reads.
pub(crate) fn first_session_id(reader: impl Read, path: &Path) -> Option<String> {
    let mut found = None;
    let _stopped = replay_reader(reader, path, None, &mut |record| {
        found = Some(record.session_id.to_owned());
        // Stop at the first record: the rest of the file is not needed.
        Err(PluginError::NotFound {
            what: "more records".into(),
            id: String::new(),
        })
    });
    found
}

/// Refuses a file under an overflow name whose records carry another session's id: two ids
/// never share a file.
fn check_owner(mut file: &File, path: &Path, session_id: &str) -> Result<(), PluginError> {
    file.seek(SeekFrom::Start(0))
        .map_err(|error| PluginError::io("read", path, error))?;
    match first_session_id(file, path) {
        Some(owner) if owner != session_id => Err(PluginError::Backend {
            backend: "file".into(),
            message: format!(
                "{} holds session {owner:?}, not {session_id:?}: two ids share one overflow name; nothing was written",
                path.display()
            ),
            source: None,
        }),
        _ => Ok(()),
    }
}

impl FileBackend {
    /// Takes `session_id` for a new session: creates its live file, empty and locked, when the
    /// session exists in no form (live, compacted, placeholder). `None` when it exists.
    fn claim_new(&self, session_id: &str) -> Result<Option<File>, PluginError> {
        let live = self.session_path(session_id)?;
        let packed = self.compacted_path(session_id)?;
        if exists(&packed)? {
            return Ok(None);
        }
        hooks::at(Point::ClaimBeforeCreate);
        let file = match open_regular(&live, Mode::CreateNew) {
            Ok(file) => file,
            Err(error) if error.kind() == ErrorKind::AlreadyExists => return Ok(None),
            Err(error) => return Err(PluginError::io("create", &live, error)),
        };
        if try_lock(&file, &live).is_err()
            || !still_named(&live, &file).map_err(|error| PluginError::io("stat", &live, error))?
        {
            // Another writer opened the new file first: it is theirs.
            return Ok(None);
        }
        // Looked at again under the lock: a compaction may have finished meanwhile.
        if exists(&packed)? {
            remove_if_present(&live)?;
            return Ok(None);
        }
        Ok(Some(file))
    }
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
    write_counted(writer, bytes).map_err(|(_, error)| error)
}

/// [`write_once`], saying on failure how many bytes a short write did put down (0 when the
/// write failed outright).
pub(crate) fn write_counted(
    writer: &mut impl Write,
    bytes: &[u8],
) -> Result<(), (usize, std::io::Error)> {
    loop {
        match writer.write(bytes) {
            Ok(n) if n == bytes.len() => return Ok(()),
            Ok(n) => {
                return Err((
                    n,
                    std::io::Error::new(
                        ErrorKind::WriteZero,
                        format!(
                            "short write: {n} of {} bytes (the disk is likely full, or a file size limit was reached)",
                            bytes.len()
                        ),
                    ),
                ))
            }
            // Nothing was written, so trying again cannot split a frame.
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => return Err((0, error)),
        }
    }
}

/// An open, locked session file and what the next append must know about its tail.
#[derive(Debug)]
pub(crate) struct Handle {
    file: File,
    path: PathBuf,
    /// What the next append writes before its frame to seal torn bytes at the file's end:
    /// nothing or [`SEAL`].
    seal: &'static [u8],
    /// A write failed part-way or the file is unknown: read the tail before the next append.
    probe_tail: bool,
    /// An fsync failed: the data may not be on disk, so this handle refuses every append.
    failed: Option<String>,
    /// The sequence of the file's last record, read when the handle opened it (under its
    /// lock) and moved by every append: the next append must carry a higher one.
    last_sequence: Option<u64>,
    /// Where appends serialize a record, kept at its high-water length.
    scratch: Vec<u8>,
    /// The frame bytes of the last append, kept for their allocation.
    frame: Vec<u8>,
    /// Where each frame of the last append ended in `frame`, kept for its allocation.
    frame_ends: Vec<usize>,
    /// The process that took the lock, and its fork generation ([`crate::fork`]). After
    /// `fork(2)` a child shares the parent's open file and its lock, so the lock cannot keep
    /// the two apart: the handle refuses appends in any other generation (any other process).
    pid: u32,
    generation: u64,
}

impl Handle {
    fn new(file: File, path: &Path) -> Self {
        Handle {
            file,
            path: path.to_path_buf(),
            seal: &[],
            probe_tail: false,
            failed: None,
            last_sequence: None,
            scratch: Vec::new(),
            frame: Vec::new(),
            frame_ends: Vec::new(),
            pid: std::process::id(),
            generation: crate::fork::generation(),
        }
    }

    /// Starts the new, empty session file `file` at `path`, which this call created and
    /// locked (before the header goes in, so a racing opener fails on a file it could finish),
    /// with the header and `body` (whole frames).
    pub(crate) fn start(
        file: File,
        path: &Path,
        dir: &Path,
        durability: Durability,
        body: &[u8],
    ) -> Result<Handle, PluginError> {
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
        Ok(handle)
    }

    /// Takes over the existing session file `file` at `path`, opened for append and locked,
    /// after checking its header.
    pub(crate) fn open_existing(file: File, path: &Path) -> Result<Handle, PluginError> {
        let len = file
            .metadata()
            .map_err(|error| PluginError::io("stat", path, error))?
            .len();
        let mut header = [0u8; HEADER_LEN];
        let n_header =
            read_at(&file, 0, &mut header).map_err(|error| PluginError::io("read", path, error))?;
        let header = &header[..n_header];
        // A v1 file is appended to as it is: its version byte is never rewritten.
        let differs = |(at, (a, b)): (usize, (&u8, &u8))| {
            a != b && !(at == HEADER_LEN - 1 && *a == crate::VERSION_1)
        };
        if let Some(at) = header
            .iter()
            .zip(HEADER.iter())
            .enumerate()
            .position(differs)
        {
            let message = if at == HEADER_LEN - 1 {
                format!(
                    "unknown .cslog version {}; this build reads and appends versions {} and {}",
                    header[at],
                    crate::VERSION_1,
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
            handle.last_sequence = last_sequence(&handle.file, len)
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
        self.append_all(std::slice::from_ref(record), durability)
            .map_err(|refused| refused.error)
    }

    /// Appends `records` as consecutive frames in one write (sealing a torn tail first, in
    /// the same write). Each is checked as [`Self::append`] checks one; the frames before the
    /// first refused record are still written, and the refusal counts them.
    fn append_all(
        &mut self,
        records: &[SessionRecord],
        durability: Durability,
    ) -> Result<(), AppendRefused> {
        let refused = |stored, error| AppendRefused { stored, error };
        self.check_appendable().map_err(|error| refused(0, error))?;
        if self.probe_tail {
            let len = self
                .file
                .metadata()
                .map_err(|error| refused(0, PluginError::io("stat", &self.path, error)))?
                .len();
            self.seal = tail_seal(&self.file, len)
                .map_err(|error| refused(0, PluginError::io("read", &self.path, error)))?;
            self.probe_tail = false;
        }
        self.frame.clear();
        self.frame.extend_from_slice(self.seal);
        // Where each encoded frame ends in `self.frame`, to count the whole frames of a
        // short write (kept with the handle for its allocation).
        let mut ends = std::mem::take(&mut self.frame_ends);
        ends.clear();
        let mut last = self.last_sequence;
        let mut refusal = None;
        for (i, record) in records.iter().enumerate() {
            if let Err(error) = check_sequence(record, last) {
                refusal = Some(refused(i, error));
                break;
            }
            if let Err(error) = encode_frame_with(record, &mut self.scratch, &mut self.frame) {
                let end = ends.last().copied().unwrap_or(self.seal.len());
                self.frame.truncate(end);
                refusal = Some(refused(
                    i,
                    PluginError::validation(
                        "SessionRecord",
                        format!("{} cannot be stored: {error}", record.point_id()),
                    ),
                ));
                break;
            }
            ends.push(self.frame.len());
            last = Some(record.sequence);
        }
        if !ends.is_empty() {
            if let Err((written, error)) = write_counted(&mut self.file, &self.frame) {
                // Some bytes may be on disk: the next append reads the tail and seals it.
                // The frames written whole are records; the one cut short is sealed off.
                self.probe_tail = true;
                let stored = ends.iter().take_while(|end| **end <= written).count();
                if stored > 0 {
                    self.last_sequence = Some(records[stored - 1].sequence);
                }
                self.frame_ends = ends;
                return Err(refused(
                    stored,
                    PluginError::io("append to", &self.path, error),
                ));
            }
            self.seal = &[];
            self.last_sequence = last;
        }
        // The buffers are kept for the next append's sake, but not past a bound: a handle
        // stays open for a long time, and hundreds of handles each holding the allocation of
        // the largest record they ever wrote would be hundreds of those records in memory.
        for buffer in [&mut self.scratch, &mut self.frame] {
            if buffer.capacity() > MAX_KEPT_BUFFER {
                *buffer = Vec::new();
            }
        }
        let wrote = !ends.is_empty();
        self.frame_ends = ends;
        if wrote && durability == Durability::Sync {
            if let Err(error) = self.file.sync_data() {
                self.failed = Some(error.to_string());
                // Written but not known to be on disk: none of them counts as stored.
                return Err(refused(0, PluginError::io("sync", &self.path, error)));
            }
        }
        match refusal {
            Some(refusal) => Err(refusal),
            None => Ok(()),
        }
    }

    /// Refuses an append from another process than the one that opened the handle, or after
    /// a failed fsync.
    fn check_appendable(&self) -> Result<(), PluginError> {
        if self.generation != crate::fork::generation() {
            return Err(PluginError::Locked {
                path: self.path.clone(),
                message: format!(
                    "this append handle was opened by process {}, and this is process {}: after fork(2) a child shares its parent's lock, so it must open its own FileBackend",
                    self.pid,
                    std::process::id()
                ),
            });
        }
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
        Ok(())
    }
}

/// The largest encoding buffer an open handle keeps between appends: a typical record's
/// many times over. A larger one was made for a rare long record and is freed after it.
const MAX_KEPT_BUFFER: usize = 64 << 10;

/// Reads up to `buf.len()` bytes at `offset`; fewer only at the end of the file.
pub(crate) fn read_at(mut file: &File, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
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

/// What must be written before the next frame: nothing when the file ends in a terminator
/// (or the header), else the seal that keeps the torn bytes from ever reading as a record.
fn tail_seal(file: &File, len: u64) -> std::io::Result<&'static [u8]> {
    if len <= HEADER_LEN as u64 {
        return Ok(&[]);
    }
    let mut last = [0u8; 1];
    if read_at(file, len - 1, &mut last)? != 1 || last[0] == 0 {
        return Ok(&[]);
    }
    Ok(&SEAL)
}

impl SessionBackend for FileBackend {
    fn name(&self) -> &str {
        "file"
    }

    /// Refuses what `append` would refuse before writing: an id this store cannot name a
    /// file after (dots only, `/`, too long, …), and a session file another process holds
    /// locked (the file is opened for append here, and its handle kept for the next append).
    /// A session with no file yet is not created.
    fn check_writable(&self, session_id: &str) -> Result<(), PluginError> {
        let live = self.session_path(session_id)?;
        if self.lock_handles().get(session_id).is_some() || !exists(&live)? {
            return Ok(());
        }
        self.handle(session_id).map(|_| ())
    }

    fn append(&self, record: SessionRecord) -> Result<(), PluginError> {
        let open = self.lock_handles().get(&record.session_id);
        let handle = match open {
            // An open handle refuses a record too large to store when it encodes it, before
            // writing anything.
            Some(handle) => handle,
            None => {
                // Before the handle, which creates the file: a record too large to store
                // leaves nothing behind, not even an empty session.
                check_frame_len(&record).map_err(|error| {
                    PluginError::validation(
                        "SessionRecord",
                        format!("{} cannot be stored: {error}", record.point_id()),
                    )
                })?;
                self.handle(&record.session_id)?
            }
        };
        let mut handle = lock_handle(&handle);
        handle.append(&record, self.durability)
    }

    /// The records of one session in one `write` (the records of several sessions one by
    /// one): what an append costs beyond its bytes is paid once for all of them.
    fn append_all(&self, records: Vec<SessionRecord>) -> Result<(), AppendRefused> {
        let Some(first) = records.first() else {
            return Ok(());
        };
        if records.iter().any(|r| r.session_id != first.session_id) {
            for (stored, record) in records.into_iter().enumerate() {
                self.append(record)
                    .map_err(|error| AppendRefused { stored, error })?;
            }
            return Ok(());
        }
        let open = self.lock_handles().get(&first.session_id);
        let handle = match open {
            Some(handle) => handle,
            None => {
                // As `append`: a first record too large to store leaves no empty session.
                check_frame_len(first)
                    .map_err(|error| {
                        PluginError::validation(
                            "SessionRecord",
                            format!("{} cannot be stored: {error}", first.point_id()),
                        )
                    })
                    .and_then(|()| self.handle(&first.session_id))
                    .map_err(|error| AppendRefused { stored: 0, error })?
            }
        };
        let mut handle = lock_handle(&handle);
        handle.append_all(&records, self.durability)
    }

    fn replay(&self, session_id: &str) -> Result<Vec<SessionRecord>, PluginError> {
        match self.open_stored(session_id)? {
            Some((file, Stored::Live(path))) => {
                scan_reader_as(file, &path, Some(session_id))?.into_records()
            }
            Some((file, Stored::Compacted(path))) => {
                scan_reader_as(compacted_reader(file), &path, Some(session_id))?.into_records()
            }
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
        match self.open_stored(session_id)? {
            Some((file, Stored::Live(path))) => replay_reader(file, &path, Some(session_id), visit),
            Some((file, Stored::Compacted(path))) => {
                replay_reader(compacted_reader(file), &path, Some(session_id), visit)
            }
            None => Ok(()),
        }
    }

    /// A live file is read from the mark's byte offset on: the cost is what was appended
    /// since, not the session. A mark's check covers the file's identity (device, inode,
    /// birth time where kept), its header and first frame, and the bytes just before the mark
    /// (`mark.rs`), read again when the mark is used: a file replaced since (`cuca repair`, a
    /// compaction and expansion, another recording copied over it in place, a new file that
    /// got a removed one's inode) is [`ReadAfter::Stale`], as is one now shorter than the
    /// mark, or whose byte before the mark is not a frame's terminator. A file cut short and
    /// then appended to past the mark in place, with its first frame and the bytes before the
    /// mark the same, is not told apart: the store never does that.
    /// A compacted session is read whole and counted ([`cuca_events::replay_after_counting`]).
    fn replay_after(
        &self,
        session_id: &str,
        after: &ReadMark,
        visit: &mut dyn FnMut(ReplayedRecord<'_>, &ReadMark) -> Result<(), PluginError>,
    ) -> Result<ReadAfter, PluginError> {
        match self.open_stored(session_id)? {
            Some((file, Stored::Live(path))) => {
                let check = FileCheck::of_live(&file)
                    .map_err(|error| PluginError::io("read", &path, error))?;
                replay_file_after(&file, &path, session_id, after, check, visit)
            }
            Some((file, Stored::Compacted(path))) => {
                // The compacted file's identity, marked apart from any live file's.
                let check = compacted_check(&file)
                    .map_err(|error| PluginError::io("read", &path, error))?;
                drop(file);
                cuca_events::replay_after_counting(self, session_id, after, check, visit)
            }
            None if *after == ReadMark::START => Ok(ReadAfter::Read(ReadMark::START)),
            None => Ok(ReadAfter::Stale),
        }
    }

    /// One `lstat` of the session's live file, or of its compacted file where it has none
    /// (two, for a session with neither): the file's length, device, inode and modification
    /// and status-change times, without opening it. An append, by this process or another,
    /// grows the length; a file renamed over the session's (`cuca repair`, a compaction, an
    /// expansion) has another inode; a file rewritten in place has later times — except
    /// within one tick of the file system's clock, to the same length: that one is left to
    /// [`SessionBackend::replay_after`]'s marks and to what a reader checks of what it reads.
    /// A path that is not a regular file, a live file shorter than a header (an expansion's
    /// placeholder) and a failed `lstat` have no stamp.
    fn stamp(&self, session_id: &str) -> Option<SessionStamp> {
        let live = self.session_path(session_id).ok()?;
        let (metadata, compacted) = match std::fs::symlink_metadata(&live) {
            Ok(metadata) => (metadata, false),
            Err(error) if error.kind() == ErrorKind::NotFound => {
                match std::fs::symlink_metadata(self.compacted_path(session_id).ok()?) {
                    Ok(metadata) => (metadata, true),
                    Err(error) if error.kind() == ErrorKind::NotFound => {
                        return Some(mark::NO_FILE)
                    }
                    Err(_) => return None,
                }
            }
            Err(_) => return None,
        };
        (metadata.is_file() && metadata.len() >= HEADER_LEN as u64)
            .then(|| mark::stamp(&metadata, compacted))
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
        // Read through the locked handle: the file appended to is the file read.
        (&original.file)
            .seek(SeekFrom::Start(0))
            .map_err(|error| PluginError::io("read", &path, error))?;
        let records = scan_reader_as(&original.file, &path, Some(session_id))?.into_records()?;
        let Some(cut) = records.iter().position(|record| record.sequence == point) else {
            return Err(PluginError::NotFound {
                what: "point".into(),
                id: point_id.into(),
            });
        };
        // A file may end at sequence u64::MAX (sequences only increase); the audit record
        // then has no sequence left, and the fork is refused before any file is made.
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
            // An id stored in any form is not free; see `claim_new`.
            if let Some(file) = self.claim_new(&new_id)? {
                let mut handle = Handle::start(file, &new_path, &self.dir, self.durability, &body)?;
                handle.last_sequence = Some(records[cut].sequence);
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

    fn release(&self, session_id: &str) {
        self.close(session_id);
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
            let (stem, is_compacted) = match name.strip_suffix(&suffix) {
                Some(stem) => (stem, false),
                None => match name.strip_suffix(&compacted) {
                    Some(stem) => (stem, true),
                    None => continue,
                },
            };
            // Regular files only: a link or a directory named like a session is none.
            let is_file =
                std::fs::symlink_metadata(entry.path()).is_ok_and(|metadata| metadata.is_file());
            if !is_file {
                continue;
            }
            if is_overflow_stem(stem) {
                // The true id is inside; a file that names no session (no record reads) is
                // left out, as is one whose id does not name this file.
                let path = entry.path();
                let Ok(file) = open_regular(&path, Mode::Read) else {
                    continue;
                };
                let owner = if is_compacted {
                    first_session_id(compacted_reader(file), &path)
                } else {
                    first_session_id(file, &path)
                };
                if let Some(id) = owner {
                    let expected = if is_compacted {
                        compacted_name(&id)
                    } else {
                        live_name(&id)
                    };
                    if validate_session_id(&id).is_ok() && expected == name {
                        ids.push(id);
                    }
                }
            } else if validate_session_id(stem).is_ok() {
                ids.push(stem.to_owned());
            }
        }
        ids.sort();
        // A session caught mid-compaction has both files: it is one session.
        ids.dedup();
        Ok(ids)
    }

    /// An append is one `write` to the page cache unless every append is flushed
    /// ([`Durability::Sync`]).
    fn appends_may_wait(&self) -> bool {
        self.durability == Durability::Sync
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
