//! `cuca proxy`: a proxy that records any agent's model calls as cuca sessions, and replays
//! them offline through the same API, in the three wire formats agents speak: OpenAI Chat
//! Completions (`POST /v1/chat/completions`), the Anthropic Messages API (`POST /v1/messages`,
//! Claude Code and the `anthropic` SDKs) and the OpenAI Responses API (`POST /v1/responses`,
//! Codex CLI, the Agents SDK). Each format is read and written by `cuca_wire`.
//!
//! Point an agent's SDK at the proxy (`base_url="http://127.0.0.1:PORT/s/SESSION/v1"`, or
//! `ANTHROPIC_BASE_URL=http://127.0.0.1:PORT/s/SESSION`) and it is recorded without a line of
//! it changing:
//!
//! * **record** ([`Mode::Record`]): the caller's request bytes go to the upstream unchanged,
//!   `Authorization` included, and the upstream's status, headers and body bytes come back
//!   unchanged and as they arrive. A copy of the answer is decoded as it passes (the same
//!   format's `cuca_wire` stream decoder, the one the client uses for Chat) and fed through a
//!   [`SessionLogPlugin`](cuca_session_log::SessionLogPlugin) asked for call metadata, so the
//!   session holds the request, every streamed block, a `CallRequest`/`CallFinish` pair and
//!   the completion — what the caller got. Every call writes its two call-log rows (seed 003);
//!   a caller that hangs up cancels the upstream request and its row says `cancelled`.
//! * **replay** ([`Mode::Replay`]): no network. A request is matched to its session's
//!   recorded turn by conversation position and its messages compared with the recording;
//!   a match is answered as the upstream answered (SSE chunks or one JSON object), the same
//!   bytes every time; a difference is a 409 naming the message index, with both sides
//!   clipped; an unknown session or a turn past the end is a 404.
//! * **auto** ([`Mode::Auto`]): replays what is recorded, forwards and records what is not.
//!
//! A call's session is the `/s/{session}/` path prefix, else the `X-Cuca-Session` header,
//! else [`ProxyConfig::default_session`]. A session holds conversations: a call is recorded in
//! the conversation its request continues (same system prompts, the recorded messages a
//! prefix of its own), and a call that continues none starts one, recorded as the session
//! `{session}:conv:{n}`; calls on different conversations record at once. Replay places each
//! call in its own conversation, and a request asked again gets the next recorded answer to it. Responses say where the call was recorded or
//! replayed from in `X-Cuca-Session` and `X-Cuca-Point` (`{session}:{sequence}` of the
//! call's first record). Errors have the caller's own shape (Anthropic's on `/v1/messages`,
//! OpenAI's elsewhere) and the right status.
//!
//! [`Proxy::serve`] serves callers through `cuca_serve`'s bounded accept loop (header-read,
//! body-read and idle timeouts, a connection cap that sheds half-sent heads first) behind
//! [`cuca_serve::LocalOrigin`]: on loopback only loopback `Host`s are answered, a cross-site
//! `Origin` is a 403, and a model call that is not JSON a 415. When its shutdown future
//! resolves it stops accepting, lets calls in flight run for [`ProxyConfig::shutdown_grace`],
//! closes the rest as cut calls and returns once every record is written.
//!
//! ```
//! use std::sync::Arc;
//! use cuca_proxy::{Mode, Proxy, ProxyConfig};
//! use cuca_store_mem::InMemoryBackend;
//!
//! // Replay needs no upstream; record and auto refuse to start without one.
//! let config = ProxyConfig::new(Mode::Replay, None)?;
//! let proxy = Proxy::new(config, Arc::new(InMemoryBackend::new()))?;
//! assert_eq!(proxy.config().default_session, "default");
//! assert!(ProxyConfig::new(Mode::Record, None).is_err());
//! let _router: axum::Router = proxy.router();
//! # Ok::<(), cuca_proxy::ProxyError>(())
//! ```
//!
//! Serving needs a port and, to record, an upstream (here a llama-server on 8080):
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use cuca_proxy::{Mode, Proxy, ProxyConfig};
//! # use cuca_store_mem::InMemoryBackend as FileBackend;
//! let config = ProxyConfig::new(Mode::Record, Some("http://127.0.0.1:8080".into()))?;
//! // The CLI hands it `FileBackend::new(dir)?`; any `SessionBackend` will do.
//! let proxy = Proxy::new(config, Arc::new(FileBackend::new()))?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:4000").await?;
//! proxy.serve(listener, std::future::pending()).await?;
//! # Ok(()) }
//! ```
//!
//! # What it does not do
//!
//! No embeddings, no `n > 1` replay. It knows stores only through `SessionBackend`. It does
//! not record an upstream's refusal (a 400 never became a turn; the call log has it), nor tool
//! messages (the session log's rule); sampling parameters are recorded (every field the caller
//! sent, in `CallRequest`) but replay does not compare them. Calls on one conversation are
//! recorded one at a time.
#![forbid(unsafe_code)]

mod aliases;
mod call;
mod chain;
mod config;
mod conversations;
mod divergence;
mod error;
mod flush;
mod fork;
mod headers;
mod index;
mod json_path;
mod ledger;
mod matching;
mod memo;
mod model_swap;
mod modes;
mod placement;
mod record;
mod redaction;
mod refusal;
mod replay;
mod request_wire;
mod rows;
mod server;
mod session;
mod shell_route;
mod state;
mod strict;
mod swap;
mod upstream;
mod workspace;

pub use aliases::Aliases;
pub use config::{
    Mode, ProxyConfig, DEFAULT_BODY_READ_TIMEOUT, DEFAULT_CALLER_STALL_TIMEOUT,
    DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_SESSIONS, DEFAULT_SESSION, DEFAULT_SHUTDOWN_GRACE,
    MODELS_MAX_BYTES, MODELS_TIMEOUT,
};
pub use divergence::FirstDifference;
pub use error::ProxyError;
pub use headers::{
    CONVERSATION_HEADER, FORKED_FROM_HEADER, INCOMPLETE_HEADER, POINT_HEADER, SESSION_HEADER,
    TURN_HEADER,
};
pub use ledger::{Divergence, MAX_DIVERGENCES_KEPT};
pub use matching::{DEFAULT_IGNORE, SAMPLING_PARAMETERS};
pub use model_swap::{ModelSwap, SwapPoint};
pub use server::Proxy;
pub use strict::{RecordedCall, ReplayReport, SessionOutcome};
pub use workspace::WorkspaceWatch;
