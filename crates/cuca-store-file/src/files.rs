//! Opening session files: regular files in the store's directory only, and the live file's
//! lock as the session's lock for every change of form (create, expand, compact).
//!
//! The protocol, which holds across processes because it lives in the file system:
//!
//! * A session's lock is the advisory lock on its live file, `{dir}/{name}.cslog`. Whoever
//!   holds it is the only one who may append, create the file, expand a compacted file into
//!   it, or compact and remove it.
//! * A lock is only worth something on the file the name still points to: after taking it, the
//!   opener checks that the path names the same file (device and inode). A file removed (by a
//!   compaction) or replaced (by an expansion) between the open and the lock is let go, and the
//!   open starts again.
//! * A session that has only a compacted file is written to by first creating its live file
//!   (empty, exclusively), locking it, and only then looking at the compacted file: under the
//!   lock, the compacted bytes are expanded into a new file, which is locked before it is
//!   renamed over the empty one. An empty live file next to a compacted one is such a
//!   placeholder; readers read the compacted file then.
//!
//! Every open refuses what is not a regular file: a symbolic link is never followed
//! (`O_NOFOLLOW`), and a FIFO or device is never waited on (`O_NONBLOCK`, then `fstat`).

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::path::Path;

use cuca_events::PluginError;

/// How many times an open starts again because the file changed form under it, before it
/// gives up: each retry means another process completed a compaction or an expansion.
const MAX_OPEN_TRIES: usize = 16;

/// How a file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// For reading.
    Read,
    /// For reading and appending; the file must exist.
    Append,
    /// For reading and appending; the file must not exist, and is created.
    CreateNew,
}

/// Opens `path` with `mode`, refusing what is not a regular file without following or waiting
/// on it. `Err` keeps the OS error for `NotFound` and `AlreadyExists`, which callers act on.
pub(crate) fn open_regular(path: &Path, mode: Mode) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    match mode {
        Mode::Read => {}
        Mode::Append => {
            options.append(true);
        }
        Mode::CreateNew => {
            options.append(true).create_new(true);
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = match options.open(path) {
        Ok(file) => file,
        #[cfg(unix)]
        Err(error) if error.raw_os_error() == Some(libc::ELOOP) => {
            return Err(not_regular("a symbolic link"))
        }
        #[cfg(unix)]
        Err(error) if error.raw_os_error() == Some(libc::EISDIR) => {
            return Err(not_regular("a directory"))
        }
        Err(error) => return Err(error),
    };
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(not_regular(if metadata.is_dir() {
            "a directory"
        } else {
            "a FIFO, socket or device"
        }));
    }
    Ok(file)
}

fn not_regular(what: &str) -> std::io::Error {
    std::io::Error::other(format!(
        "this is {what}, not a regular file; a session is stored in regular files in the store's directory only"
    ))
}

/// Whether `path` still names `file` (same device and inode), without following a link.
pub(crate) fn still_named(path: &Path, file: &File) -> std::io::Result<bool> {
    let at_path = match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(error),
    };
    let opened = file.metadata()?;
    Ok(same_inode(&at_path, &opened))
}

#[cfg(unix)]
fn same_inode(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
fn same_inode(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    a.is_file() && b.is_file() && a.len() == b.len()
}

/// Takes a file's advisory lock without waiting.
pub(crate) fn try_lock(file: &File, path: &Path) -> Result<(), PluginError> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => Err(PluginError::Locked {
            path: path.to_path_buf(),
            message: "another FileBackend, in this process or another, has this session open for append; close it (FileBackend::close or drop) or record to another session id".into(),
        }),
        Err(std::fs::TryLockError::Error(error)) => Err(PluginError::io("lock", path, error)),
    }
}

/// A live file, opened for append and locked, that `path` still names.
#[derive(Debug)]
pub(crate) enum LockedLive {
    /// The file existed (it may be an empty placeholder or hold a header cut short).
    Existing(File),
    /// This call created the file: it is empty.
    Created(File),
}

/// Opens the live file at `path` for append, creating it (empty) when missing, and locks it.
///
/// Another holder of the lock is [`PluginError::Locked`]. A file removed or replaced between
/// the open and the lock is let go and the open starts again.
pub(crate) fn lock_live(path: &Path) -> Result<LockedLive, PluginError> {
    for _ in 0..MAX_OPEN_TRIES {
        hooks::at(hooks::Point::BeforeOpen);
        let (file, created) = match open_regular(path, Mode::Append) {
            Ok(file) => (file, false),
            Err(error) if error.kind() == ErrorKind::NotFound => {
                match open_regular(path, Mode::CreateNew) {
                    Ok(file) => (file, true),
                    // Someone created it first: open theirs.
                    Err(error) if error.kind() == ErrorKind::AlreadyExists => continue,
                    Err(error) => return Err(PluginError::io("create", path, error)),
                }
            }
            Err(error) => return Err(PluginError::io("open for append", path, error)),
        };
        hooks::at(hooks::Point::OpenedBeforeLock);
        try_lock(&file, path)?;
        if !still_named(path, &file).map_err(|error| PluginError::io("stat", path, error))? {
            // Compacted away or replaced by an expansion while this call waited: start again.
            continue;
        }
        return Ok(if created {
            LockedLive::Created(file)
        } else {
            LockedLive::Existing(file)
        });
    }
    Err(changing(path))
}

/// The error when a file keeps changing form under an open.
pub(crate) fn changing(path: &Path) -> PluginError {
    PluginError::Backend {
        backend: "file".into(),
        message: format!(
            "{} was compacted or expanded by another writer {MAX_OPEN_TRIES} times while this call opened it; try again",
            path.display()
        ),
        source: None,
    }
}

/// How many times a read looks again for a session caught between two forms.
pub(crate) const MAX_READ_TRIES: usize = MAX_OPEN_TRIES;

/// Flushes a directory's entries (a create, a rename, a link, an unlink) to disk.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), PluginError> {
    File::open(dir)
        .and_then(|dir| dir.sync_all())
        .map_err(|error| PluginError::io("sync", dir, error))
}

/// Removes a file, a missing one being no error.
pub(crate) fn remove_if_present(path: &Path) -> Result<(), PluginError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(()),
        Err(error) => Err(PluginError::io("remove", path, error)),
    }
}

/// Creates a temporary file at `tmp` for writing, replacing a stray one left by a crash
/// (never through a link someone put there).
pub(crate) fn create_tmp(tmp: &Path) -> Result<File, PluginError> {
    remove_if_present(tmp)?;
    open_regular(tmp, Mode::CreateNew).map_err(|error| PluginError::io("create", tmp, error))
}

/// Points in the open and change-of-form protocol where a test can run another writer, to
/// force an interleaving deterministically. Compiled to nothing outside this crate's tests.
pub(crate) mod hooks {
    /// A point in the protocol.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Point {
        /// An open for append is about to open the live file's path.
        BeforeOpen,
        /// An open for append has a file and is about to lock it.
        OpenedBeforeLock,
        /// An expansion wrote its new file and is about to rename it into place.
        ExpandBeforeRename,
        /// An expansion renamed its new file into place and is about to remove the compacted one.
        ExpandBeforeRemovePacked,
        /// A compaction renamed the compacted file into place and is about to remove the live one.
        CompactBeforeRemoveLive,
        /// A fork found no compacted file for a new id and is about to create its live file.
        ClaimBeforeCreate,
    }

    /// A test's hook: what to run at each point.
    #[cfg(test)]
    type Hook = Box<dyn FnMut(Point)>;

    #[cfg(test)]
    thread_local! {
        static HOOK: std::cell::RefCell<Option<Hook>> = const { std::cell::RefCell::new(None) };
    }

    /// Runs the test's hook, if one is set on this thread; the hook is taken out while it
    /// runs, so the other writer it drives does not run it again.
    #[inline]
    pub(crate) fn at(point: Point) {
        #[cfg(test)]
        {
            let hook = HOOK.with(|cell| cell.borrow_mut().take());
            if let Some(mut hook) = hook {
                hook(point);
                HOOK.with(|cell| {
                    let mut slot = cell.borrow_mut();
                    if slot.is_none() {
                        *slot = Some(hook);
                    }
                });
            }
        }
        #[cfg(not(test))]
        let _ = point;
    }

    /// Sets this thread's hook (tests only).
    #[cfg(test)]
    pub(crate) fn set(hook: impl FnMut(Point) + 'static) {
        HOOK.with(|cell| *cell.borrow_mut() = Some(Box::new(hook)));
    }

    /// Removes this thread's hook (tests only).
    #[cfg(test)]
    pub(crate) fn clear() {
        HOOK.with(|cell| *cell.borrow_mut() = None);
    }
}
