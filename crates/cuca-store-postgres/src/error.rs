//! `Error`: what can go wrong talking to PostgreSQL, carried as the source of a `PluginError`.

use cuca_events::PluginError;

/// A failure of [`crate::PostgresBackend`].
///
/// The [`cuca_events::SessionBackend`] seam returns [`PluginError`]; every variant here reaches
/// callers as [`PluginError::Backend`] with `backend: "postgres"`, this error as its `source`
/// (downcast it to match on the variant) and its message as the `message`. A sequence at or
/// below the session's highest is the contract's own [`PluginError::SequenceTaken`], as in
/// every store, not a variant here.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No connection could be made: the server is down, the host or port is wrong, or it
    /// refused us. Nothing was stored by the call that got this error.
    #[error("cannot reach postgres at {host}: {}", describe(source))]
    Unreachable {
        /// Where we tried to connect (`host:port/dbname`, never the password).
        host: String,
        /// The driver's error.
        #[source]
        source: postgres::Error,
    },
    /// Another writer appended to a session, or created the branch id, while it was being
    /// forked; the fork was rolled back whole.
    #[error("fork of session {session_id:?} at {point_id:?} on {host} collided with another writer and was rolled back; nothing was changed: {}", describe(source))]
    ForkConflict {
        /// The session being forked.
        session_id: String,
        /// The point it was forked at.
        point_id: String,
        /// The server.
        host: String,
        /// The unique violation PostgreSQL reported.
        #[source]
        source: postgres::Error,
    },
    /// A statement failed for a reason other than the ones above.
    #[error("{operation} on {host} failed: {}", describe(source))]
    Query {
        /// What was being done (`"append"`, `"replay"`, `"migrate"`, …).
        operation: &'static str,
        /// The server.
        host: String,
        /// The driver's error.
        #[source]
        source: postgres::Error,
    },
    /// A stored row does not decode to the record its columns describe.
    #[error("session {session_id:?} sequence {sequence} on {host} is damaged: {message}")]
    Corrupt {
        /// The session.
        session_id: String,
        /// The sequence column of the damaged row.
        sequence: i64,
        /// The server.
        host: String,
        /// What was found.
        message: String,
    },
    /// The schema was migrated by a newer build of this crate; an older build must not write
    /// into a layout it does not know.
    #[error("schema {schema:?} on {host} is at migration {found}, newer than the {known} this build knows; upgrade cuca-store-postgres")]
    SchemaTooNew {
        /// The schema.
        schema: String,
        /// The server.
        host: String,
        /// The version recorded in `cuca_migrations`.
        found: i32,
        /// The newest version this build applies.
        known: i32,
    },
    /// A number does not fit PostgreSQL's signed 64-bit `bigint`.
    #[error("{field} {value} of session {session_id:?} does not fit a postgres bigint (at most 9223372036854775807)")]
    OutOfRange {
        /// `"sequence"` or `"timestamp_ms"`.
        field: &'static str,
        /// The value.
        value: u64,
        /// The session.
        session_id: String,
    },
    /// Pipelined records ([`crate::Durability::Pipelined`]) that were accepted but then not
    /// stored: the batch holding them failed, or an earlier record of their session was
    /// refused. Reported by the record that waited behind them in the failed batch, else by
    /// the session's next append, which is refused too (nothing is stored after the hole), so
    /// the writer knows its call is not whole; reported once.
    #[error("records {session_id}:{first}..={session_id}:{last} ({count} records) were accepted but not stored on {host}: {reason}")]
    NotStored {
        /// The session.
        session_id: String,
        /// The first sequence lost.
        first: u64,
        /// The last sequence lost.
        last: u64,
        /// How many records were lost.
        count: u64,
        /// The server.
        host: String,
        /// Why, in words (the server's error).
        reason: String,
    },
    /// A batch of appends failed as a whole (the connection broke and the retry failed too);
    /// the record this error answers was not stored.
    #[error("append on {host} failed: {reason}")]
    BatchFailed {
        /// The server.
        host: String,
        /// The driver's error, in words.
        reason: String,
    },
    /// So many pipelined records wait for the server that one more would be held in memory
    /// without bound; the record was not stored.
    #[error("{queued} records are waiting for {host}, the most a backend queues; the record was not stored")]
    Behind {
        /// The server.
        host: String,
        /// How many records wait.
        queued: usize,
    },
    /// The connection thread is gone (it panicked); the backend cannot be used any more.
    #[error("the connection thread for {host} has stopped")]
    WorkerGone {
        /// The server.
        host: String,
    },
}

impl From<Error> for PluginError {
    fn from(error: Error) -> Self {
        PluginError::Backend {
            backend: "postgres".into(),
            message: error.to_string(),
            source: Some(Box::new(error)),
        }
    }
}

/// The driver's error with what the server said: `postgres::Error` displays a server error as
/// just "db error", which tells a person nothing.
pub(crate) fn describe(error: &postgres::Error) -> String {
    let Some(db) = error.as_db_error() else {
        // The driver's own message is generic ("error connecting to server"); the cause
        // (connection refused, timed out, name not known) is what a person acts on.
        let mut out = error.to_string();
        let mut cause = std::error::Error::source(error);
        while let Some(next) = cause {
            let text = next.to_string();
            if !out.contains(&text) {
                out.push_str(": ");
                out.push_str(&text);
            }
            cause = next.source();
        }
        return out;
    };
    let mut out = format!("{} {}: {}", db.severity(), db.code().code(), db.message());
    if let Some(detail) = db.detail() {
        out.push_str(&format!(" ({detail})"));
    }
    out
}
