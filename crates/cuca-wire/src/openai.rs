//! What OpenAI's two formats (Chat Completions and Responses) share: the error shape.

use crate::ErrorInfo;

/// An error in OpenAI's shape: `{"error":{"message","type","param","code"}}`. The openai SDKs
/// raise their own `APIStatusError` with the message in it on either route.
pub(crate) fn error_body(error: &ErrorInfo<'_>) -> serde_json::Value {
    serde_json::json!({"error": {
        "message": error.message,
        "type": error.kind,
        "param": error.param,
        "code": error.code,
    }})
}
