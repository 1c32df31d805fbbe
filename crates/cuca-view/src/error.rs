//! The viewer's error: what a page could not read, and which HTTP status says so.

use cuca_events::PluginError;

/// Why a page could not be shown.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ViewError {
    /// No configured directory holds this session.
    #[error("no session {session:?} in the viewer's directories")]
    UnknownSession {
        /// The id asked for.
        session: String,
    },
    /// The point id is not `{session}:{sequence}`, or the sequence is not in the session.
    #[error("no point {point:?}: {reason}")]
    UnknownPoint {
        /// The point asked for.
        point: String,
        /// Why it was not found.
        reason: String,
    },
    /// The viewer was started without this source (a call log or a runs directory).
    #[error("the viewer was started without {what}")]
    NotConfigured {
        /// What is missing, in words (`a call log (--calls FILE)`).
        what: &'static str,
    },
    /// No run of this id in the runs directory.
    #[error("no journal run {run:?}")]
    UnknownRun {
        /// The run id asked for.
        run: String,
    },
    /// A store read failed (damage, I/O, a lock).
    #[error(transparent)]
    Store(#[from] PluginError),
    /// The call log could not be read.
    #[error("read the call log: {0}")]
    CallLog(String),
    /// A search could not run (an invalid pattern, an unreadable directory).
    #[error(transparent)]
    Search(#[from] cuca_search::SearchError),
    /// A page saved as one file could not be written (`cuca export --format html`).
    #[error("write the page of session {session:?}: {source}")]
    Write {
        /// The session the page shows.
        session: String,
        /// What the writer said.
        #[source]
        source: std::io::Error,
    },
    /// A journal record could not be read.
    #[error("read journal run {run:?}: {reason}")]
    Run {
        /// The run.
        run: String,
        /// Why.
        reason: String,
    },
}

impl ViewError {
    /// The status a page answers with for this error.
    pub fn status(&self) -> u16 {
        match self {
            ViewError::UnknownSession { .. }
            | ViewError::UnknownPoint { .. }
            | ViewError::UnknownRun { .. }
            | ViewError::NotConfigured { .. } => 404,
            ViewError::Store(PluginError::Validation { .. }) => 400,
            ViewError::Search(cuca_search::SearchError::Pattern { .. }) => 400,
            _ => 500,
        }
    }
}
