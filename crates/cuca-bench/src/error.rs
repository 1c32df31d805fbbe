//! The one error type of the peers.

use std::path::PathBuf;

/// What a peer store failed at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// A file could not be opened, read or written.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done (`open`, `write`, `read`).
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A record could not be written as, or read back from, a JSON line.
    #[error("json line {line} of {path}: {source}")]
    Json {
        /// The JSONL file (or the SQLite database for a row).
        path: PathBuf,
        /// The 1-based line (or row) number; 0 while encoding.
        line: u64,
        /// serde_json's error.
        #[source]
        source: serde_json::Error,
    },
    /// SQLite refused a statement.
    #[error("sqlite {path}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// rusqlite's error.
        #[source]
        source: rusqlite::Error,
    },
}
