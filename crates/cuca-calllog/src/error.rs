//! `Error`: what reading a call log can fail with. Writing never fails (see `CallLog::append`).

use std::path::PathBuf;

/// What [`read_rows`](crate::read_rows) can fail with.
///
/// Damage inside a readable file is not an error: a torn last line and lines that do not
/// parse are skipped and reported in [`ReadReport`](crate::ReadReport).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The call log could not be opened or read (missing, a directory, no permission).
    #[error("cannot read call log {path}: {source}")]
    Read {
        /// The file that was being read.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}
