//! Opening the journal: excluded from git first, never blocking on a special file, never
//! destroying the unsalvaged journal of an earlier run.
//!
//! A journal already at the path is the only account of a run that was killed before anyone
//! assembled or salvaged it; truncating it would silently erase that run. So a non-empty one is
//! kept aside under a free numbered name and the recorder says so. Anything that is not a
//! regular file (a FIFO, a socket, a device, a directory, a symlink) is refused without being
//! opened: opening a FIFO for writing blocks until a reader appears, which would hang the run.

use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::git;

/// How many numbered names are tried for a journal kept aside before giving up.
///
/// A directory with this many unsalvaged journals has a problem no new name solves; capture
/// then stops rather than overwrite one.
const MAX_SET_ASIDE: u32 = 1000;

/// The journal file, opened for writing, and where an earlier journal was kept.
pub(crate) struct Opened {
    pub(crate) file: File,
    pub(crate) set_aside: Option<PathBuf>,
}

/// Creates the journal directory, excludes it from git, and creates the journal afresh.
///
/// Errors are words for `status().error`: the recorder then starts stopped.
pub(crate) fn open_journal(path: &Path) -> Result<Opened, String> {
    let Some(dir) = path.parent() else {
        return Err(format!("{} has no parent directory", path.display()));
    };
    fs::create_dir_all(dir).map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
    // Before the journal exists, so the model's `git add -A` can never see it. Never fatal:
    // a journal that git may see is still better than no journal.
    match git::exclude_journal_dir(dir) {
        Ok(Some(exclude)) => {
            tracing::debug!(journal_dir = %dir.display(), exclude = %exclude.display(), "journal directory excluded from git");
        }
        Ok(None) => {}
        Err(error) => {
            tracing::warn!(journal_dir = %dir.display(), %error, "cannot exclude the journal directory from git; capture goes on");
        }
    }
    let mut set_aside = None;
    match fs::symlink_metadata(path) {
        Err(error) if error.kind() == ErrorKind::NotFound => {}
        Err(error) => return Err(format!("cannot inspect {}: {error}", path.display())),
        Ok(meta) if meta.file_type().is_file() && meta.len() == 0 => {
            // Nothing to lose; `create_new` below wants the name free.
            fs::remove_file(path)
                .map_err(|error| format!("cannot replace empty {}: {error}", path.display()))?;
        }
        Ok(meta) if meta.file_type().is_file() => {
            let aside = keep_aside(path)?;
            tracing::warn!(journal = %path.display(), kept = %aside.display(), "an earlier run's journal was never assembled; kept aside (salvage it with `cuca journal salvage`)");
            set_aside = Some(aside);
        }
        Ok(meta) => {
            return Err(format!(
                "{} is a {}, not a regular file; capture is off for this run (remove it to record)",
                path.display(),
                kind_of(&meta.file_type())
            ))
        }
    }
    // `create_new` is O_CREAT|O_EXCL: it never opens what is already there, so a FIFO or a
    // symlink that appeared since the check is refused (EEXIST) instead of blocking or followed.
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|error| format!("cannot create {}: {error}", path.display()))?;
    Ok(Opened { file, set_aside })
}

/// Moves the journal at `path` to the first free `replay.ndjson.N`, never over another file.
fn keep_aside(path: &Path) -> Result<PathBuf, String> {
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    for n in 1..=MAX_SET_ASIDE {
        let aside = path.with_file_name(format!("{name}.{n}"));
        // A hard link fails with AlreadyExists instead of replacing: no race can lose a file.
        match fs::hard_link(path, &aside) {
            Ok(()) => {
                fs::remove_file(path)
                    .map_err(|error| format!("cannot move {} aside: {error}", path.display()))?;
                return Ok(aside);
            }
            Err(error) if error.kind() == ErrorKind::AlreadyExists => continue,
            Err(_) => {
                // A file system without hard links: a rename, after checking the name is free.
                if fs::symlink_metadata(&aside).is_ok() {
                    continue;
                }
                fs::rename(path, &aside).map_err(|error| {
                    format!(
                        "cannot move {} aside to {}: {error}",
                        path.display(),
                        aside.display()
                    )
                })?;
                return Ok(aside);
            }
        }
    }
    Err(format!(
        "{} holds an earlier journal and {MAX_SET_ASIDE} others are already kept aside; \
         capture is off for this run rather than overwrite one",
        path.display()
    ))
}

fn kind_of(file_type: &fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "FIFO";
        }
        if file_type.is_socket() {
            return "socket";
        }
        if file_type.is_block_device() || file_type.is_char_device() {
            return "device";
        }
    }
    if file_type.is_dir() {
        "directory"
    } else if file_type.is_symlink() {
        "symbolic link"
    } else {
        "special file"
    }
}
