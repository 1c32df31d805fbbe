//! `ProxyError`: what can go wrong setting a proxy up or serving it.

/// Everything that can go wrong building or running a [`crate::Proxy`]. A failure of one
/// call is never one of these: it is an OpenAI-shaped error response to that call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The upstream URL cannot be used.
    #[error("invalid upstream url {url:?}: {message}")]
    InvalidUpstream {
        /// The URL as given.
        url: String,
        /// What is wrong with it, and what would be right.
        message: String,
    },
    /// A setting is out of range or missing.
    #[error("invalid proxy config {field}: {message}")]
    InvalidConfig {
        /// The setting (`"default_session"`, `"max_body_bytes"`, …).
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The HTTP client for the upstream could not be built.
    #[error("cannot build the upstream http client: {source}")]
    HttpClient {
        /// The cause.
        #[source]
        source: reqwest::Error,
    },
    /// Listening or serving failed.
    #[error("cannot serve on {addr}: {source}")]
    Serve {
        /// The address.
        addr: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// An `--ignore-json-path` outside the supported subset (`$.a.b`, `$.a[*].b`, `$.a[0]`,
    /// `$['a']`), or into a field replay compares as records of its own.
    #[error("invalid json path {path:?} at character {at}: {message}")]
    InvalidJsonPath {
        /// The path as given.
        path: String,
        /// The character (from 0) where it stops being understood.
        at: usize,
        /// What is wrong there, and what would be right.
        message: String,
    },
}
