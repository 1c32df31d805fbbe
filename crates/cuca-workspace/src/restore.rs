//! Writing a snapshot back into a directory.

use std::path::Path;

use crate::error::WorkspaceError;
use crate::objects::{get_object, ObjectId, ObjectStore};
use crate::snapshot::{SnapshotConfig, Snapshotter};
use crate::tree::{read_flat, EntryKind};

/// How a restore treats what is in its target already.
#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    /// Restore into a directory that is not empty (without it, a non-empty target is
    /// refused with [`WorkspaceError::NotEmpty`]).
    pub force: bool,
    /// Remove the files of the target the snapshot does not hold, so the target is the
    /// snapshot exactly: what the walk of a snapshot would see (`.gitignore`d files and
    /// `.git` are left alone, and so are files over `config.max_file_bytes`, which a
    /// snapshot never holds).
    pub prune: Option<SnapshotConfig>,
}

/// What a restore did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Restored {
    /// Files written (links included).
    pub n_written: usize,
    /// Files removed by [`RestoreOptions::prune`].
    pub n_removed: usize,
}

/// Writes the snapshot `id` of `store` into `target` (created if missing).
pub fn restore(
    store: &dyn ObjectStore,
    id: &ObjectId,
    target: &Path,
    options: &RestoreOptions,
) -> Result<Restored, WorkspaceError> {
    let flat = read_flat(store, id)?;
    std::fs::create_dir_all(target)
        .map_err(|error| WorkspaceError::io("create directory", target, error))?;
    let non_empty = std::fs::read_dir(target)
        .map_err(|error| WorkspaceError::io("read", target, error))?
        .next()
        .is_some();
    if non_empty && !options.force {
        return Err(WorkspaceError::NotEmpty {
            path: target.to_owned(),
        });
    }
    let mut restored = Restored::default();
    if let Some(config) = &options.prune {
        let walker = Snapshotter::new(
            target,
            std::sync::Arc::new(crate::MemObjects::new()),
            config.clone(),
        )?;
        let root = walker.root().to_owned();
        for found in walker.walker().build() {
            let Ok(entry) = found else { continue };
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            if entry.depth() == 0 || is_dir {
                continue;
            }
            let relative = entry.path().strip_prefix(&root).unwrap_or(entry.path());
            let kept = relative
                .to_str()
                .is_some_and(|path| flat.contains_key(path));
            let over_cap = entry
                .metadata()
                .is_ok_and(|m| m.is_file() && m.len() > config.max_file_bytes);
            if !kept && !over_cap {
                std::fs::remove_file(entry.path())
                    .map_err(|error| WorkspaceError::io("remove", entry.path(), error))?;
                restored.n_removed += 1;
            }
        }
    }
    for (path, entry) in &flat {
        let bytes = get_object(store, &entry.id)?;
        let at = target.join(path);
        if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|error| WorkspaceError::io("create directory", parent, error))?;
        }
        // Whatever stands at the path (a link above all: writing through it would write
        // where it points) goes first.
        if std::fs::symlink_metadata(&at).is_ok_and(|m| !m.is_dir()) {
            std::fs::remove_file(&at).map_err(|error| WorkspaceError::io("remove", &at, error))?;
        }
        match entry.kind {
            EntryKind::Symlink => {
                use std::os::unix::ffi::OsStrExt;
                std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&bytes), &at)
                    .map_err(|error| WorkspaceError::io("link", &at, error))?;
            }
            kind => {
                use std::os::unix::fs::PermissionsExt;
                std::fs::write(&at, &bytes)
                    .map_err(|error| WorkspaceError::io("write", &at, error))?;
                let mode = if kind == EntryKind::Executable {
                    0o755
                } else {
                    0o644
                };
                std::fs::set_permissions(&at, std::fs::Permissions::from_mode(mode))
                    .map_err(|error| WorkspaceError::io("write", &at, error))?;
            }
        }
        restored.n_written += 1;
    }
    Ok(restored)
}
