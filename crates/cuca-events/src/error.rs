//! `PluginError`: the one error every hook, backend and service returns.

use std::path::PathBuf;

/// A boxed cause, for errors that come from a crate this one does not name.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong in a plugin, a backend, a provider or a service.
///
/// Each variant names the thing it is about (a session, a file and offset, a URL) so that
/// the message alone tells a person what to look at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    /// Input that breaks a rule: a bad session id, a malformed point id, a config out of range.
    #[error("invalid {schema}: {message}")]
    Validation {
        /// What was being validated (`"session_id"`, `"point_id"`, `"ReplayConfig"`, …).
        schema: String,
        /// What is wrong with it, and what would be right.
        message: String,
    },
    /// A bounded resource is full; nothing was changed.
    #[error("{resource} is at its cap of {cap}: {message}")]
    CapacityExceeded {
        /// What is full (`"InMemoryBackend"`, `"ReplayConfig::max_records"`, …).
        resource: String,
        /// The cap that was hit.
        cap: u64,
        /// What was refused and how to make room.
        message: String,
    },
    /// Something the call names does not exist.
    #[error("{what} {id:?} not found")]
    NotFound {
        /// The kind of thing (`"session"`, `"point"`).
        what: String,
        /// Its id.
        id: String,
    },
    /// An operating-system call on a file failed.
    #[error("{operation} {path}: {source}")]
    Io {
        /// What was being done (`"append to"`, `"open"`, …).
        operation: String,
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Stored data is damaged in a way a reader must not paper over.
    #[error("{path} is damaged at byte {offset}: {message}")]
    Corrupt {
        /// The file (or store location) holding the data.
        path: PathBuf,
        /// The byte offset where the damage starts.
        offset: u64,
        /// What was found.
        message: String,
    },
    /// Another writer holds the session.
    #[error("{path} is locked by another writer: {message}")]
    Locked {
        /// The session file.
        path: PathBuf,
        /// Who holds it, where known, and what to do.
        message: String,
    },
    /// An append whose sequence is not above the last one its session holds. Sequences are
    /// strictly increasing per session in every store (a contract of
    /// [`crate::SessionBackend::append`]), so a duplicate or a step backwards is refused and
    /// nothing is stored. A writer that numbers its own records (the session log plugin)
    /// re-reads the session's tail and continues after `last`.
    #[error("session {session_id:?} already holds sequence {last}: an append must carry a higher sequence, not {sequence}; nothing was stored")]
    SequenceTaken {
        /// The session.
        session_id: String,
        /// The sequence the refused record carried.
        sequence: u64,
        /// The last sequence the session holds: the next append must carry a higher one.
        last: u64,
    },
    /// A backend failed in a way none of the other variants describes.
    #[error("{backend} backend: {message}")]
    Backend {
        /// The backend's name (`"memory"`, `"file"`, `"postgres"`).
        backend: String,
        /// What failed.
        message: String,
        /// The underlying error, where there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// The provider answered with an error status.
    #[error("{url} answered HTTP {status}: {message}")]
    Provider {
        /// The URL that was called.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The server's own message, clipped.
        message: String,
        /// The comeback time the server asked for, in seconds, where it named one.
        retry_after_s: Option<f64>,
    },
    /// The request did not reach the provider, or the connection broke.
    #[error("{url}: {message}")]
    Transport {
        /// The URL that was called.
        url: String,
        /// What happened, and what to check.
        message: String,
        /// The underlying error.
        #[source]
        source: Option<BoxError>,
    },
    /// The provider's stream could not be understood.
    #[error("{url} sent a response cuca cannot read: {message}")]
    Decode {
        /// The URL that was called.
        url: String,
        /// What was wrong, with the offending bytes clipped.
        message: String,
    },
    /// A client timeout ended the call.
    #[error("{url}: no {phase} within {after_ms} ms")]
    Timeout {
        /// The URL that was called.
        url: String,
        /// Which timeout fired (`"connection"`, `"first token"`, `"data"`, `"response"`).
        phase: String,
        /// The timeout in milliseconds.
        after_ms: u64,
    },
    /// A plugin refused or failed for a reason of its own.
    #[error("plugin {plugin}: {message}")]
    Plugin {
        /// The plugin's name.
        plugin: String,
        /// What it said.
        message: String,
    },
}

impl PluginError {
    /// A [`PluginError::Validation`].
    pub fn validation(schema: impl Into<String>, message: impl Into<String>) -> Self {
        PluginError::Validation {
            schema: schema.into(),
            message: message.into(),
        }
    }

    /// A [`PluginError::Io`].
    pub fn io(
        operation: impl Into<String>,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        PluginError::Io {
            operation: operation.into(),
            path: path.into(),
            source,
        }
    }
}
