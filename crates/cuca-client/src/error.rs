//! `ClientError`: what building a client or decoding a stream can refuse.

use cuca_events::PluginError;

/// Everything the client crate itself can refuse, before a URL is attached.
///
/// A built client's calls return [`PluginError`], the seam every plugin and provider
/// speaks; this type is what [`crate::CucaClientBuilder::build`] and the pure stream
/// decoder ([`crate::ChatStreamDecoder`]) return.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The base URL does not parse, or is not an `http`/`https` URL with a host.
    #[error("base url {url:?} is not usable: {message}")]
    InvalidBaseUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        message: String,
    },
    /// The endpoint needs an API key and none was given.
    #[error("{endpoint} needs an api key: {message}")]
    MissingApiKey {
        /// The endpoint's word (`"openai"`).
        endpoint: String,
        /// Where the key can come from.
        message: String,
    },
    /// A timeout or retry setting is out of range.
    #[error("invalid {setting}: {message}")]
    InvalidConfig {
        /// The setting (`"Timeouts::idle"`, `"RetryPolicy::max_backoff"`, …).
        setting: String,
        /// What is wrong and what would be right.
        message: String,
    },
    /// The HTTP client could not be set up (for example, no TLS backend).
    #[error("cannot set up the http client: {source}")]
    HttpClient {
        /// The HTTP library's error.
        #[source]
        source: reqwest::Error,
    },
    /// A stream event is not what an OpenAI-compatible server sends.
    #[error("{message}")]
    Decode {
        /// What was wrong, with the offending bytes clipped.
        message: String,
    },
    /// The body ended before a `finish_reason` or `data: [DONE]` arrived.
    #[error("{}", truncated_message(*n_events))]
    Truncated {
        /// Events decoded before the end (0: the body was empty).
        n_events: u64,
    },
    /// The server reported an error inside a stream that had started with HTTP 200.
    #[error("error event in the stream: {message}")]
    StreamError {
        /// The server's message, clipped.
        message: String,
    },
}

impl From<ClientError> for PluginError {
    /// A build error becomes a [`PluginError::Validation`] of `"CucaClient"`, so a caller
    /// whose own functions return `PluginError` can use `?` on `build()`.
    fn from(error: ClientError) -> Self {
        PluginError::validation("CucaClient", error.to_string())
    }
}

fn truncated_message(n_events: u64) -> String {
    if n_events == 0 {
        "the response body ended before any event: the server sent an empty stream".to_owned()
    } else {
        format!(
            "the stream ended after {n_events} events without a finish_reason or [DONE]: \
             the answer may be cut short"
        )
    }
}

impl From<cuca_wire::WireError> for ClientError {
    /// A stream the decoder refused, as the client reports it.
    fn from(error: cuca_wire::WireError) -> Self {
        match error {
            cuca_wire::WireError::Truncated { n_events } => ClientError::Truncated { n_events },
            cuca_wire::WireError::StreamError { message } => ClientError::StreamError { message },
            other => ClientError::Decode {
                message: other.to_string(),
            },
        }
    }
}
