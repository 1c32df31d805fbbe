//! What stops an import as a whole (a problem with one line is a [`crate::Finding`] instead).

use std::path::PathBuf;

use cuca_events::PluginError;

/// Why an import stopped. A line it cannot read does not stop it: that is a
/// [`crate::Finding`] in the report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The transcript directory could not be listed.
    #[error("cannot read the transcript directory {path}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The store refused a read or an append.
    #[error("the store refused session \"{session}\"")]
    Store {
        /// The session being read or written.
        session: String,
        /// What the store said.
        #[source]
        source: PluginError,
    },
}
