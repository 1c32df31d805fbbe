//! The wire formats cuca speaks, one module each, every module with the same parts, held by the
//! [`WireFormat`] trait each format fills in ([`chat::Chat`], [`messages::Messages`],
//! [`responses::Responses`]) and in the same files (`request.rs`, `decode.rs`, `encode.rs`,
//! `tests.rs`):
//!
//! | part | chat ([`chat`]) | messages ([`messages`]) | responses ([`responses`]) |
//! | --- | --- | --- | --- |
//! | request → [`WireRequest`] | `parse_request` | `parse_request` | `parse_request` |
//! | stream → blocks + [`StreamSummary`] | [`chat::ChatStreamDecoder`] | `MessagesStreamDecoder` | `ResponsesStreamDecoder` |
//! | whole answer → blocks + summary | `decode_whole` | `decode_whole` | `decode_whole` |
//! | recorded answer → the format's stream and object | `encode_stream`, `encode_object` | the same | the same |
//! | error shape | `error_body` | `error_body` | `error_body` |
//!
//! [`Format`] dispatches through the trait, so the proxy holds no format knowledge of its own
//! and the client ([`chat`] only, today) decodes with the same code the proxy records with. The
//! three stream decoders are one shell (SSE framing, the end marker, passing over malformed
//! events, the bound [`MAX_INDEX`] on every index an upstream sends) around each format's
//! events. What the client and the proxy both write about a call is here once: [`api_url`],
//! [`StreamSummary::token_usage`], [`request_row`] and [`StreamSummary::fill_end_row`].
//!
//! # The invariant
//!
//! Every format maps into one session vocabulary ([`cuca_events::MessageContentBlock`]:
//! reasoning, text, tool calls; one block per streamed delta) and keeps what that vocabulary
//! has no field for (Anthropic's thinking signatures and message ids, Responses' item ids,
//! cache-usage fields, block types cuca does not know) as one JSON object,
//! [`StreamSummary::wire`], which a recorder stores beside the call and an encoder reads back.
//! Decoding a recorded answer's encoding gives the same blocks and the same `wire` again:
//! `decode(encode(decode(bytes))) == decode(bytes)` is each module's round-trip test.
//!
//! ```
//! use cuca_wire::Format;
//! use cuca_events::MessageContentBlock;
//!
//! let format = Format::for_path("/v1/chat/completions").unwrap();
//! let mut decoder = format.decoder(false);
//! let mut blocks = Vec::new();
//! decoder.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n", &mut blocks).unwrap();
//! let summary = decoder.finish(&mut blocks).unwrap();
//! assert_eq!(blocks, vec![MessageContentBlock::text("hi")]);
//! assert_eq!(summary.finish_reason.as_deref(), Some("stop"));
//! ```
#![forbid(unsafe_code)]

use bytes::Bytes;
use cuca_events::{MessageContentBlock, UnifiedRequest};

mod body;
pub mod chat;
mod encode;
mod endpoint;
mod error;
pub mod messages;
mod openai;
mod reader;
pub mod responses;
mod row;
mod sse;
mod stream;
mod summary;
mod text;

pub use encode::MAX_EVENT_TEXT;
pub use endpoint::{api_url, BaseUrlError};
pub use error::WireError;
pub use reader::{MessageReader, ReadEach, ReadElement};
pub use row::request_row;
pub use sse::{SseDecoder, SseEvent, MAX_EVENT_BYTES};
pub use stream::MAX_INDEX;
pub use summary::{LlamaTimings, StreamSummary};
pub use text::{clip_server_words, server_message, server_text, SERVER_WORDS_CHARS};

/// One of the wire formats, named as its route is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// OpenAI Chat Completions, `POST /v1/chat/completions`.
    Chat,
    /// Anthropic Messages, `POST /v1/messages`.
    Messages,
    /// OpenAI Responses, `POST /v1/responses`.
    Responses,
}

impl Format {
    /// Every format, in the order the docs list them.
    pub const ALL: [Format; 3] = [Format::Chat, Format::Messages, Format::Responses];

    /// The format's short name, as `CallWire` records and the docs write it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Chat => "chat",
            Format::Messages => "messages",
            Format::Responses => "responses",
        }
    }

    /// The format whose [`Format::name`] is `name`.
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The model-call route of this format, under `/v1`.
    pub fn path(self) -> &'static str {
        match self {
            Format::Chat => "/v1/chat/completions",
            Format::Messages => "/v1/messages",
            Format::Responses => "/v1/responses",
        }
    }

    /// The format a request path asks for (`/v1/chat/completions`, with or without a query).
    pub fn for_path(path: &str) -> Option<Format> {
        let path = path.split('?').next().unwrap_or(path);
        Format::ALL.into_iter().find(|f| f.path() == path)
    }

    /// Reads a caller's request body. `Err` says, in words, why it is not one.
    pub fn parse_request(self, body: &[u8]) -> Result<WireRequest, String> {
        each_format!(self, F => F::parse_request(body))
    }

    /// Reads a caller's request body as [`Format::parse_request`] does, each element of its
    /// message list through `reader`, which may hand back what it read of the same bytes
    /// before. Chat's `messages` and the Messages format's are read element by element; a
    /// Responses `input` is read whole (an item may join the message before it), so `reader`
    /// is not asked there.
    pub fn parse_request_with(
        self,
        body: &[u8],
        reader: &dyn MessageReader,
    ) -> Result<WireRequest, String> {
        each_format!(self, F => F::parse_request_with(body, reader))
    }

    /// A stream decoder at the start of a stream. `skipping_malformed`: pass over an event
    /// that does not parse (counted in [`StreamSummary::n_skipped`]) instead of refusing the
    /// stream, for a recorder that must record all it can.
    pub fn decoder(self, skipping_malformed: bool) -> Box<dyn StreamDecoder> {
        each_format!(self, F => Box::new(F::decoder(skipping_malformed)))
    }

    /// A non-streamed answer's blocks (in the order a stream of it delivers them) and summary.
    pub fn decode_whole(
        self,
        body: &[u8],
    ) -> Result<(Vec<MessageContentBlock>, StreamSummary), String> {
        each_format!(self, F => F::decode_whole(body))
    }

    /// A recorded answer as this format's event stream, one event at a time as it is
    /// polled. The same answer and request give the same bytes every time.
    pub fn encode_stream<B>(
        self,
        answer: RecordedAnswer<B>,
        request: &WireRequest,
    ) -> Box<dyn Iterator<Item = Bytes> + Send>
    where
        B: AsRef<[MessageContentBlock]> + Send + 'static,
    {
        each_format!(self, F => F::encode_stream(answer, request))
    }

    /// A recorded answer as this format's whole (non-streamed) answer object.
    pub fn encode_object<B>(
        self,
        answer: &RecordedAnswer<B>,
        request: &WireRequest,
    ) -> serde_json::Value
    where
        B: AsRef<[MessageContentBlock]>,
    {
        each_format!(self, F => F::encode_object(answer, request))
    }

    /// `body` with the model it asks for replaced by `model`: every format names it in the
    /// body's top-level `model` field (Chat Completions, Messages and Responses alike), so
    /// this is where a call is sent to another model. The other fields keep their order and
    /// their bytes; a body that names no model gets the field first. `Err` says, in words,
    /// why the body is not a JSON object.
    pub fn with_model(self, body: &[u8], model: &str) -> Result<Bytes, String> {
        body::with_model(body, model).map(Bytes::from)
    }

    /// An error body in this format's shape, so the caller's SDK raises its own exception
    /// with the message in it.
    pub fn error_body(self, error: &ErrorInfo<'_>) -> serde_json::Value {
        each_format!(self, F => F::error_body(error))
    }
}

/// `$call` with `$f` standing for the [`WireFormat`] of `$format`: the one place a [`Format`]
/// is turned into its module.
macro_rules! each_format {
    ($format:expr, $f:ident => $call:expr) => {
        match $format {
            Format::Chat => {
                type $f = chat::Chat;
                $call
            }
            Format::Messages => {
                type $f = messages::Messages;
                $call
            }
            Format::Responses => {
                type $f = responses::Responses;
                $call
            }
        }
    };
}
use each_format;

/// Everything one wire format is, as each format module fills it in: how a caller's request
/// reads, how an answer (streamed or whole) decodes, how a recorded answer is sent again, and
/// how an error looks. A new format is a module with the same four files (`request.rs`,
/// `decode.rs` with its stream decoder and `decode_whole`, `encode.rs`, `tests.rs`), one impl
/// of this trait and one arm in [`Format`]'s dispatch: the compiler names any part left out.
pub trait WireFormat {
    /// The format's stream decoder.
    type Decoder: StreamDecoder + 'static;

    /// Reads a caller's request body. `Err` says, in words, why it is not one.
    fn parse_request(body: &[u8]) -> Result<WireRequest, String>;

    /// Reads a caller's request body, the elements of its message list through `reader`
    /// (see [`Format::parse_request_with`]).
    fn parse_request_with(body: &[u8], reader: &dyn MessageReader) -> Result<WireRequest, String>;

    /// A stream decoder at the start of a stream (see [`Format::decoder`]).
    fn decoder(skipping_malformed: bool) -> Self::Decoder;

    /// A non-streamed answer's blocks (in the order a stream of it delivers them) and summary.
    fn decode_whole(body: &[u8]) -> Result<(Vec<MessageContentBlock>, StreamSummary), String>;

    /// A recorded answer as the format's event stream, one event at a time as it is polled.
    fn encode_stream<B>(
        answer: RecordedAnswer<B>,
        request: &WireRequest,
    ) -> Box<dyn Iterator<Item = Bytes> + Send>
    where
        B: AsRef<[MessageContentBlock]> + Send + 'static;

    /// A recorded answer as the format's whole (non-streamed) answer object.
    fn encode_object<B>(answer: &RecordedAnswer<B>, request: &WireRequest) -> serde_json::Value
    where
        B: AsRef<[MessageContentBlock]>;

    /// An error body in the format's shape.
    fn error_body(error: &ErrorInfo<'_>) -> serde_json::Value;
}

/// A format module's [`WireFormat`] impl: each part is the module's function of that name.
macro_rules! wire_format {
    ($(#[$doc:meta])* $name:ident, $decoder:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name;

        impl $crate::WireFormat for $name {
            type Decoder = $decoder;

            fn parse_request(body: &[u8]) -> Result<$crate::WireRequest, String> {
                parse_request(body)
            }

            fn parse_request_with(
                body: &[u8],
                reader: &dyn $crate::MessageReader,
            ) -> Result<$crate::WireRequest, String> {
                parse_request_with(body, reader)
            }

            fn decoder(skipping_malformed: bool) -> $decoder {
                if skipping_malformed {
                    <$decoder>::skipping_malformed()
                } else {
                    <$decoder>::new()
                }
            }

            fn decode_whole(
                body: &[u8],
            ) -> Result<
                (
                    Vec<cuca_events::MessageContentBlock>,
                    $crate::StreamSummary,
                ),
                String,
            > {
                decode_whole(body)
            }

            fn encode_stream<B>(
                answer: $crate::RecordedAnswer<B>,
                request: &$crate::WireRequest,
            ) -> Box<dyn Iterator<Item = bytes::Bytes> + Send>
            where
                B: AsRef<[cuca_events::MessageContentBlock]> + Send + 'static,
            {
                Box::new(encode_stream(answer, request))
            }

            fn encode_object<B>(
                answer: &$crate::RecordedAnswer<B>,
                request: &$crate::WireRequest,
            ) -> serde_json::Value
            where
                B: AsRef<[cuca_events::MessageContentBlock]>,
            {
                encode_object(answer, request)
            }

            fn error_body(error: &$crate::ErrorInfo<'_>) -> serde_json::Value {
                error_body(error)
            }
        }
    };
}
use wire_format;

/// What a format's decoder does: bytes in, blocks and a summary out, pure (no I/O, no
/// clock), so a test can feed it a transcript split at any byte.
pub trait StreamDecoder: Send + std::fmt::Debug {
    /// Feeds the next bytes; the blocks they complete are pushed onto `out` in order.
    fn feed(&mut self, bytes: &[u8], out: &mut Vec<MessageContentBlock>) -> Result<(), WireError>;

    /// Ends the stream (the body ended), pushing any block still being assembled. Refuses a
    /// stream that ended before the format's end (its finish or its end marker) with
    /// [`WireError::Truncated`]; the blocks still held are pushed onto `out` all the same.
    fn finish(&mut self, out: &mut Vec<MessageContentBlock>) -> Result<StreamSummary, WireError>;

    /// The summary so far, [`StreamSummary::wire`] included.
    fn summary(&self) -> &StreamSummary;

    /// Whether the format's end marker arrived (`[DONE]`, `message_stop`,
    /// `response.completed`): the caller may stop reading.
    fn is_done(&self) -> bool;

    /// The last error's text with the server's own bytes in it unclipped (up to what the
    /// call log's `clip_error` needs), when the error quoted them.
    fn error_detail(&self) -> Option<&str> {
        None
    }
}

/// What a recorder understood of a caller's request body, in any format.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct WireRequest {
    /// The request in cuca's terms, for the session log and the replay match.
    pub unified: UnifiedRequest,
    /// The caller asked for a stream.
    pub stream: bool,
    /// Chat's `stream_options.include_usage: true`: a usage chunk follows the finish.
    pub include_usage: bool,
    /// Every top-level field the caller sent that has no record of its own, as the JSON text
    /// of one object whose values are the caller's own bytes: the `CallRequest` record's
    /// parameters.
    pub parameters: String,
    /// What the request carried that could not be read into the records, in words; the
    /// recorder marks the call incomplete with it.
    pub unrecorded: Vec<String>,
    /// Responses' `previous_response_id`: the recorded answer this request continues.
    pub previous_response_id: Option<String>,
    /// What the request carried that its records have no field for and that decides what
    /// the answer costs, as one JSON object, `None` when there is nothing: the Messages
    /// format's `cache_control` breakpoints (`{"cache_control": [{"at", "cache_control"}]}`,
    /// [`messages::parse_request`]). A recorder stores it in the call's `CallWire` record,
    /// under `request`.
    pub wire: Option<serde_json::Value>,
}

/// A recorded answer, as an encoder replays it.
#[derive(Debug, Clone)]
pub struct RecordedAnswer<B> {
    /// The answer's blocks, as recorded (one per streamed delta).
    pub blocks: B,
    /// The model that answered.
    pub model: String,
    /// Why generation stopped, in the recorded server's word (`None`: never said).
    pub finish_reason: Option<String>,
    /// Prompt tokens, as recorded.
    pub prompt_tokens: u64,
    /// Answer tokens, as recorded.
    pub completion_tokens: u64,
    /// What the recording kept beyond the blocks ([`StreamSummary::wire`]), when it was
    /// recorded in the format being encoded; `None` otherwise (the encoder makes up what it
    /// needs, deterministically).
    pub wire: Option<serde_json::Value>,
    /// A stable id for the answer (no clock, no randomness), used where the recording kept
    /// none: `"cuca-{session}-{turn}"`.
    pub id: String,
}

/// An error to answer a caller with, in terms every format can shape.
#[derive(Debug, Clone, Copy)]
pub struct ErrorInfo<'a> {
    /// The HTTP status.
    pub status: u16,
    /// OpenAI's `type` (`"invalid_request_error"`, `"not_found_error"`, `"server_error"`).
    pub kind: &'a str,
    /// cuca's machine-readable code (`"cuca_replay_diverged"`).
    pub code: &'a str,
    /// The sentence.
    pub message: &'a str,
    /// The request field the error is about, where there is one (`"messages[3]"`).
    pub param: Option<&'a str>,
}
