//! The one error type of the crate.

use std::path::PathBuf;

/// What went wrong snapshotting, storing or restoring a workspace.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkspaceError {
    /// A file or directory could not be read or written.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done (`"read"`, `"write"`, `"create directory"`).
        action: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// The workspace walk failed (a directory vanished mid-walk, a loop of links).
    #[error("walk the workspace {root}: {message}")]
    Walk {
        /// The workspace.
        root: PathBuf,
        /// The walker's words.
        message: String,
    },
    /// An object the snapshot refers to is not in the store.
    #[error("object {id} is not in the workspace store {store}")]
    Missing {
        /// The object's content address.
        id: String,
        /// Where it was looked for.
        store: String,
    },
    /// An object's bytes are not what its address says, or do not decode.
    #[error("object {id} in the workspace store {store} is damaged: {reason}")]
    Damaged {
        /// The object's content address.
        id: String,
        /// Where it was read from.
        store: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A text is not a content address (`sha256:` and 64 hex digits).
    #[error("{text:?} is not a workspace snapshot address (sha256: and 64 hex digits)")]
    BadId {
        /// The text given.
        text: String,
    },
    /// A restore was refused: the target holds something it would overwrite.
    #[error("{path} is not empty: refusing to restore a workspace over it")]
    NotEmpty {
        /// The target directory.
        path: PathBuf,
    },
    /// The object store itself (a database) failed.
    #[error("workspace store {store}: {message}")]
    Store {
        /// Where the store is.
        store: String,
        /// What failed, in words.
        message: String,
    },
}

impl WorkspaceError {
    /// An [`WorkspaceError::Io`] for `action` on `path`.
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        WorkspaceError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}
