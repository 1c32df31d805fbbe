//! The Anthropic Messages API (`POST /v1/messages`), as Claude Code and the `anthropic` SDKs
//! speak it.
//!
//! * request: top-level `system` (string or text blocks) → system prompts, `messages[]`
//!   (user and assistant; a user message's `tool_result` blocks → tool messages), `tools`,
//!   everything else kept verbatim as parameters ([`parse_request`]);
//! * stream: [`MessagesStreamDecoder`]; whole answer: [`decode_whole`];
//! * replay: [`encode_stream`], [`encode_object`];
//! * errors: `{"type":"error","error":{"type","message","code"}}` ([`error_body`]);
//! * `POST /v1/messages/count_tokens` without an upstream: [`estimate_input_tokens`],
//!   [`count_tokens_body`].
//!
//! # What `wire` keeps
//!
//! The session vocabulary has no field for a message id, a thinking block's signature, a
//! redacted thinking block, a block type cuca does not know, the cache-usage counts or the
//! stop sequence. The decoders keep them in [`crate::StreamSummary::wire`], one object:
//!
//! ```json
//! {"format": "messages", "id": "msg_…", "usage": {…}, "stop_sequence": null,
//!  "blocks": [{"type": "thinking", "records": 12, "signature": "…"},
//!             {"type": "text", "records": 3},
//!             {"type": "tool_use", "records": 1},
//!             {"type": "redacted_thinking", "records": 0, "data": "…"},
//!             {"type": "server_tool_use", "records": 0, "raw": {…}, "deltas": [{…}]}]}
//! ```
//!
//! `fields` (only when there are any) holds the message object's keys cuca does not map
//! (`container`), verbatim. `usage` is the message's usage object, verbatim, `message_start`'s with `message_delta`'s
//! fields laid over it (as the SDKs accumulate it). `blocks` lists the content blocks in
//! order; `records` is how many session blocks each one produced (one per streamed delta), so
//! an encoder regroups the recorded blocks into the same content blocks. A known block may
//! also carry `fields` (keys of its start object cuca does not map, verbatim) and `deltas`
//! (deltas of a type cuca does not map, such as `citations_delta`, verbatim, in order); a
//! block of a type cuca does not know produces no session block and is kept whole as `raw`
//! (the block as started) with its `deltas`.

mod breakpoints;
mod decode;
mod encode;
mod request;

pub use decode::{decode_whole, MessagesStreamDecoder};
pub use encode::{encode_object, encode_stream, stop_reason, MessagesEvents};
pub use request::{estimate_input_tokens, parse_request, parse_request_with};

use crate::ErrorInfo;

crate::wire_format!(
    /// The Anthropic Messages API as a [`crate::WireFormat`]: this module's functions.
    Messages,
    MessagesStreamDecoder
);

/// The `format` value of this module's [`crate::StreamSummary::wire`] objects.
pub const WIRE_FORMAT: &str = "messages";

/// An error in Anthropic's shape, `{"type":"error","error":{"type","message"}}`, with cuca's
/// own `code` inside `error` beside them. The `type` is Anthropic's word for the status
/// (the SDKs pick their exception class by status, and print the type and message).
///
/// ```
/// let body = cuca_wire::messages::error_body(&cuca_wire::ErrorInfo {
///     status: 404,
///     kind: "not_found_error",
///     code: "cuca_turn_not_found",
///     message: "no such turn",
///     param: None,
/// });
/// assert_eq!(body["type"], "error");
/// assert_eq!(body["error"]["type"], "not_found_error");
/// assert_eq!(body["error"]["code"], "cuca_turn_not_found");
/// ```
pub fn error_body(error: &ErrorInfo<'_>) -> serde_json::Value {
    serde_json::json!({
        "type": "error",
        "error": {
            "type": error_type(error.status),
            "message": error.message,
            "code": error.code,
        },
    })
}

/// Anthropic's error `type` for an HTTP status, as its API documents them.
fn error_type(status: u16) -> &'static str {
    match status {
        400 | 409 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        _ => "api_error",
    }
}

/// The body of a `POST /v1/messages/count_tokens` answer: `{"input_tokens": n}`.
pub fn count_tokens_body(input_tokens: u64) -> serde_json::Value {
    serde_json::json!({ "input_tokens": input_tokens })
}

#[cfg(test)]
mod tests;
