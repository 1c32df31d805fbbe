//! Workspace snapshots: an agent's working directory saved into a content-addressed object
//! store at every model call, and restored as it stood at any of them.
//!
//! A [`Snapshotter`] walks the workspace (honouring `.gitignore`; never `.git`), stores each
//! file's bytes compressed under their SHA-256 and each directory as a tree object, and
//! answers with the root tree's address and what changed since a previous snapshot. It keeps
//! a stat cache, so a snapshot reads only the files whose size, times or inode changed: its
//! cost follows what changed, not the workspace's size. [`restore`] writes a snapshot back.
//!
//! ```
//! use std::sync::Arc;
//! use cuca_workspace::{restore, MemObjects, RestoreOptions, SnapshotConfig, Snapshotter};
//!
//! let workspace = tempfile::tempdir()?;
//! std::fs::write(workspace.path().join("notes.txt"), "one\n")?;
//! let store = Arc::new(MemObjects::new());
//! let mut snapshotter = Snapshotter::new(workspace.path(), store.clone(), SnapshotConfig::default())?;
//! let first = snapshotter.snapshot(None)?;
//! std::fs::write(workspace.path().join("notes.txt"), "one\ntwo\n")?;
//! let second = snapshotter.snapshot(Some(&first.id))?;
//! assert_eq!(second.changes[0].path, "notes.txt");
//! assert_eq!((second.changes[0].added_lines, second.changes[0].removed_lines), (1, 0));
//!
//! let copy = tempfile::tempdir()?;
//! restore(store.as_ref(), &first.id, copy.path(), &RestoreOptions::default())?;
//! assert_eq!(std::fs::read_to_string(copy.path().join("notes.txt"))?, "one\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! It deliberately knows nothing of sessions, records or the proxy: the recorder decides when
//! to snapshot and writes [`Snapshot::event`] where it belongs. It never reads the user's git
//! objects nor writes into `.git`.

#![forbid(unsafe_code)]

mod diff;
mod error;
mod lines;
mod objects;
mod restore;
mod snapshot;
mod tree;

pub use diff::{file_diff, text_diff, DiffLimits, DiffLine, FileDiff, TextDiff};
pub use error::WorkspaceError;
pub use lines::{is_binary, line_changes};
pub use objects::{
    get_object, put_object, DirObjects, MemObjects, ObjectId, ObjectStore, MAX_OBJECT_BYTES,
};
pub use restore::{restore, RestoreOptions, Restored};
pub use snapshot::{Snapshot, SnapshotConfig, Snapshotter, DEFAULT_MAX_FILE_BYTES};
pub use tree::{find_file, read_flat, EntryKind, FileEntry, Flat};

#[cfg(test)]
mod tests;
