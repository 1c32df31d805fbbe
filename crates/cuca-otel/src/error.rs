//! `Error`: what an export can fail with, naming the session, endpoint or URL it is about.

use cuca_events::PluginError;

/// An export's failure. The live exporter never returns one from a hook: it counts.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A session could not be read (damage a load refuses, a session over replay's caps).
    #[error("session {session:?} cannot be exported: {source}")]
    Session {
        /// The session id.
        session: String,
        /// The store's or replay's error.
        #[source]
        source: PluginError,
    },
    /// The endpoint is not an `http` or `https` URL.
    #[error("endpoint {endpoint:?} is not a usable OTLP/HTTP URL: {message}")]
    Endpoint {
        /// The endpoint as given.
        endpoint: String,
        /// What is wrong with it.
        message: String,
    },
    /// The HTTP client could not be built (no TLS backend, for instance).
    #[error("cannot build the http client: {source}")]
    Client {
        /// reqwest's error.
        #[source]
        source: reqwest::Error,
    },
    /// Gzip failed while compressing a request body in memory.
    #[error("cannot gzip the request body: {source}")]
    Compress {
        /// The encoder's error.
        #[source]
        source: std::io::Error,
    },
    /// A request did not reach the collector, or its answer broke off.
    #[error("post to {url} failed: {source}")]
    Send {
        /// The traces URL.
        url: String,
        /// reqwest's error (connection refused, timeout, …).
        #[source]
        source: reqwest::Error,
    },
    /// The collector answered with a status other than 2xx.
    #[error("{url} answered HTTP {status}: {message}")]
    Status {
        /// The traces URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the collector's answer.
        message: String,
    },
    /// The live exporter was started outside a Tokio runtime.
    #[error("the live exporter needs a tokio runtime to run its sender on: {message}")]
    Runtime {
        /// Tokio's words.
        message: String,
    },
}
