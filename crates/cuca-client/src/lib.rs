//! `CucaClient`: an OpenAI-compatible streaming client whose plugins see every request,
//! streamed block and completion.
//!
//! One client posts to `{base}/v1/chat/completions` of a llama.cpp `llama-server`, OpenAI,
//! or any compatible server, always with `stream: true` and
//! `stream_options.include_usage: true`, and turns the server-sent events into
//! [`MessageContentBlock`](cuca_events::MessageContentBlock)s: one block per non-empty
//! delta, tool calls assembled whole. Around every call it runs the registered
//! [`CucaPlugin`](cuca_events::CucaPlugin)s in registration order:
//!
//! 1. a `call_id` is minted into `request.metadata.call_id`, then every `on_request` sees
//!    (and may change) the request as the plugins before it left it;
//! 2. every `on_stream_chunk` sees each block, in order, before the caller does;
//! 3. after the stream ends, every `on_response_complete` sees the aggregated
//!    [`UnifiedResponse`](cuca_events::UnifiedResponse) — its failures are logged with
//!    `tracing` and do not abort the turn;
//! 4. a failure anywhere else ends the call with that error, and every `on_error` sees it.
//!
//! Calls are bounded by four timeouts ([`Timeouts`]) and retried on connection errors,
//! 429 and 5xx with jittered exponential back-off that honours `Retry-After`
//! ([`RetryPolicy`]) — never once a block has reached the caller. Every error names the URL.
//!
//! Every attempt on the wire writes two rows to the call log ([`cuca_calllog`]): a start row
//! as it goes out (run, tag, node, model, effort, ceiling, message and tool counts) and an end
//! row when it comes back (status, times, finish, served model, the server's token counts,
//! the clipped error) or is given up on (`ended`: `cancelled` when the caller drops the
//! stream, `deadline` when one of the client's own timeouts fires). The log is the
//! process-global one unless [`CucaClientBuilder::with_call_log`] names another; no prompt
//! text is in a row unless the bodies pin (`CUCA_CALL_LOG_BODIES`) is on.
//!
//! ```
//! use cuca_client::{ChatStreamDecoder, CucaClient, ProviderEndpoint};
//! use cuca_events::MessageContentBlock;
//!
//! let client = CucaClient::builder()
//!     .with_provider(ProviderEndpoint::LlamaCpp)
//!     .with_base_url("http://127.0.0.1:1234")
//!     .build()
//!     .unwrap();
//! assert_eq!(client.url(), "http://127.0.0.1:1234/v1/chat/completions");
//!
//! // The stream decoder is pure: feed it a llama.cpp reasoning delta split mid-event.
//! let mut decoder = ChatStreamDecoder::new();
//! let mut blocks = Vec::new();
//! decoder.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_", &mut blocks).unwrap();
//! decoder.feed(b"content\":\"hmm\"}}]}\n\n", &mut blocks).unwrap();
//! assert_eq!(blocks, vec![MessageContentBlock::thinking("hmm")]);
//! ```
//!
//! Streaming a turn needs a server (here llama-server on port 1234):
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use cuca_client::CucaClient;
//! use cuca_events::{Message, UnifiedRequest};
//! use futures::StreamExt;
//!
//! let client = CucaClient::builder().with_env().build()?;
//! let mut stream = client.generate_stream(UnifiedRequest::new(vec![Message::user("hi")]));
//! while let Some(block) = stream.next().await {
//!     println!("{:?}", block?);
//! }
//! # Ok(()) }
//! ```
//!
//! # What it does not do
//!
//! It does not speak non-OpenAI wire formats (Anthropic messages, Gemini), does not ask for
//! more than one choice (`n > 1`), does not accept non-streamed answers (a server that
//! ignores `stream: true` gets a clear error), does not run tools (that is
//! `execute_local_tool` on a plugin, called by the agent loop), and does not retry a call
//! that has already handed a block to its caller: the answer would be spliced from two
//! generations. It reads `CUCA_BASE_URL`/`CUCA_MODEL` only when asked
//! ([`CucaClientBuilder::with_env`]).
#![forbid(unsafe_code)]

mod attempt;
mod client;
mod config;
mod conn;
mod endpoint;
mod error;

pub use client::{CucaClient, CucaClientBuilder};
pub use config::{RetryPolicy, Timeouts, MAX_TIMEOUT};
pub use cuca_wire::chat::ChatStreamDecoder;
pub use cuca_wire::{LlamaTimings, StreamSummary};
pub use cuca_wire::{SseDecoder, SseEvent, WireError, MAX_EVENT_BYTES};
pub use endpoint::{ApiKey, ProviderEndpoint};
pub use error::ClientError;
