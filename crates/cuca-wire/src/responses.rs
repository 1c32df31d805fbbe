//! OpenAI Responses (`POST /v1/responses`): what Codex CLI, the OpenAI Agents SDK and the
//! openai SDKs' `client.responses.*` speak.
//!
//! * request: `instructions` and system/developer items → system prompts; user items; the
//!   assistant-side items of one turn (reasoning, assistant messages, `function_call`s, other
//!   `*_call`s) → one assistant message; `function_call_output` → a tool message; everything
//!   else kept verbatim as parameters ([`parse_request`]);
//! * stream: [`ResponsesStreamDecoder`]; whole answer: [`decode_whole`];
//! * replay: [`encode_stream`], [`encode_object`], in OpenAI's exact event shapes (every
//!   `sequence_number`, `output_index`, `content_index` and `item_id` the SDKs index by);
//! * errors: OpenAI's `{"error":{"message","type","param","code"}}` ([`error_body`]).
//!
//! # What `wire` keeps
//!
//! The blocks hold the text, the reasoning and the tool calls; a Responses answer also has a
//! response id, item ids, the item each block belongs to, reasoning's `encrypted_content`
//! (which Codex sends back next turn) and annotations. [`crate::StreamSummary::wire`] keeps
//! them, kept up to date as events arrive so a cut stream still has what it saw:
//!
//! ```json
//! {"format":"responses","id":"resp_…","created_at":1796117865,"status":"completed",
//!  "usage":{…verbatim…},
//!  "items":[{"type":"reasoning","id":"rs_…","records":3,"summary_records":[3],"encrypted_content":"…"},
//!           {"type":"message","id":"msg_…","records":12},
//!           {"type":"function_call","id":"fc_…","call_id":"call_…","records":1},
//!           {"type":"web_search_call","records":0,"raw":{…the item as done…}}]}
//! ```
//!
//! `records` is how many blocks the item pushed, in order, so an encoder regroups the recorded
//! blocks into the same items. A message whose content is not one plain `output_text` part
//! also has `parts` (`[{"type":"output_text"|"refusal","records":n,"annotations":[…]}]`);
//! a reasoning item has `summary_records` and/or `content_records` (blocks per summary part,
//! per `reasoning_text` part); an item's `status` is kept when it is not `"completed"`, and a
//! message's `phase` when there is one.

mod decode;
mod encode;
mod request;

pub use decode::{decode_whole, ResponsesStreamDecoder};
pub use encode::{encode_object, encode_stream, ResponsesEvents};
pub use request::{parse_request, parse_request_with};

use crate::ErrorInfo;

crate::wire_format!(
    /// OpenAI Responses as a [`crate::WireFormat`]: this module's functions.
    Responses,
    ResponsesStreamDecoder
);

/// The `format` field of a Responses [`crate::StreamSummary::wire`].
pub const WIRE_FORMAT: &str = "responses";

/// An error in OpenAI's shape, the same as Chat Completions': the openai SDKs raise their
/// own `APIStatusError` with the message in it on either route.
///
/// ```
/// let body = cuca_wire::responses::error_body(&cuca_wire::ErrorInfo {
///     status: 400,
///     kind: "invalid_request_error",
///     code: "cuca_bad_request",
///     message: "'input' must be a string or an array",
///     param: Some("input"),
/// });
/// assert_eq!(body["error"]["param"], "input");
/// ```
pub fn error_body(error: &ErrorInfo<'_>) -> serde_json::Value {
    crate::openai::error_body(error)
}

#[cfg(test)]
mod tests;
