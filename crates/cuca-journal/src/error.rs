//! `JournalError`: the one error type of cuca-journal.
//!
//! Capture never returns it to the run being recorded (the `Recorder` methods return `()`);
//! it is returned only by set-up calls a caller makes before the run — validating a
//! [`crate::RecorderConfig`] and [`crate::exclude_from_git`] — and by the host-side stages.

use std::path::PathBuf;

/// Everything that can go wrong in cuca-journal's fallible calls.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// A configuration value breaks a rule.
    #[error("invalid {field}: {message}")]
    InvalidConfig {
        /// The field (`"session_id"`, `"journal_dir"`, `"max_bytes"`, …).
        field: &'static str,
        /// What is wrong with it, and what would be right.
        message: String,
    },
    /// An operating-system call on a file failed.
    #[error("{operation} {path}: {source}")]
    Io {
        /// What was being done (`"read"`, `"append to"`, …).
        operation: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The workspace is not a git repository (it has no `.git`).
    #[error("{path} is not a git repository: no .git found there; run `git init` first")]
    NotARepository {
        /// The workspace.
        path: PathBuf,
    },
}

impl JournalError {
    pub(crate) fn io(
        operation: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        JournalError::Io {
            operation,
            path: path.into(),
            source,
        }
    }
}
