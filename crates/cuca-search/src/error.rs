//! Why a search could not run.

use std::path::PathBuf;

use cuca_events::PluginError;

/// Why a search could not run at all. A session that cannot be read through is not an
/// error: it is listed in [`crate::Outcome::unreadable`] and the search goes on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// The pattern is not a regular expression the `regex` crate accepts.
    #[error("pattern {pattern:?} is not a regular expression: {reason}")]
    Pattern {
        /// The pattern as given.
        pattern: String,
        /// The regex crate's reason, on one line.
        reason: String,
    },
    /// A kind name that is not one of [`crate::SEARCHED_KINDS`].
    #[error("kind {kind:?} is not searched; the kinds are {}", crate::SEARCHED_KINDS.join(", "))]
    UnknownKind {
        /// The kind as given.
        kind: String,
    },
    /// The directory does not exist or is not a directory.
    #[error("directory {} cannot be read: {source}", dir.display())]
    Dir {
        /// The directory as given.
        dir: PathBuf,
        /// Why it cannot be read.
        #[source]
        source: std::io::Error,
    },
    /// The store could not list the directory's sessions.
    #[error(transparent)]
    Store(#[from] PluginError),
}
