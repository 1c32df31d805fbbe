//! OpenAI Chat Completions (`POST /v1/chat/completions`): the format every other one is
//! measured against, since cuca's session vocabulary was made for it.
//!
//! * a client's request: [`request_body`] (a `UnifiedRequest` → the body);
//! * request: `messages` (system and developer → system prompts; user, assistant, tool) and
//!   `tools`, everything else kept verbatim as parameters ([`parse_request`]);
//! * stream: [`ChatStreamDecoder`]; whole answer: [`decode_whole`];
//! * replay: [`encode_stream`], [`encode_object`];
//! * errors: `{"error":{"message","type","param","code"}}` ([`error_body`]).
//!
//! Chat keeps nothing outside the blocks: its [`crate::StreamSummary::wire`] is `None`.

mod build;
mod decode;
mod encode;
mod request;

pub use build::{request_body, MaxTokensField};
pub use decode::{decode_whole, ChatStreamDecoder};
pub use encode::{encode_object, encode_stream, finish_reason, SseEvents};
pub use request::{parse_request, parse_request_with};

use crate::ErrorInfo;

crate::wire_format!(
    /// OpenAI Chat Completions as a [`crate::WireFormat`]: this module's functions.
    Chat,
    ChatStreamDecoder
);

/// An error in OpenAI's shape: `{"error":{"message","type","param","code"}}`.
///
/// ```
/// let body = cuca_wire::chat::error_body(&cuca_wire::ErrorInfo {
///     status: 404,
///     kind: "not_found_error",
///     code: "cuca_turn_not_found",
///     message: "no such turn",
///     param: None,
/// });
/// assert_eq!(body["error"]["code"], "cuca_turn_not_found");
/// ```
pub fn error_body(error: &ErrorInfo<'_>) -> serde_json::Value {
    crate::openai::error_body(error)
}

#[cfg(test)]
mod tests;
