//! `WireError`: what a stream decoder refuses.

/// Why a stream decoder refused a stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// An event is not what a server of the format sends.
    #[error("{message}")]
    Decode {
        /// What was wrong, with the offending bytes clipped.
        message: String,
    },
    /// The body ended before the format's finish or end marker arrived.
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
