//! What an Anthropic request carried that decides its price and that no record holds: the
//! `anthropic-beta` header and the `cache_control` breakpoints, kept in the call's
//! `CallWire` record under `request`.

use axum::http::HeaderMap;
use cuca_wire::Format;
use serde_json::{Map, Value};

/// The request header that opts a Messages call into Anthropic's betas; some change the
/// price (`context-1m-…` bills a long prompt at the long-context rates).
const ANTHROPIC_BETA: &str = "anthropic-beta";

/// The `request` object of a call's `CallWire` record: what the format's reader kept of the
/// body (`WireRequest::wire`: the Messages breakpoints) and, for the Messages format, the
/// `anthropic-beta` header as sent (several such headers joined by `", "`, as HTTP combines
/// them). `None` when there is nothing to keep, so a call that marked nothing records what it
/// always did.
pub(crate) fn request_wire(
    format: Format,
    headers: &HeaderMap,
    from_body: Option<&Value>,
) -> Option<Value> {
    let mut object = match from_body {
        Some(Value::Object(object)) => object.clone(),
        _ => Map::new(),
    };
    if format == Format::Messages {
        let betas: Vec<&str> = headers
            .get_all(ANTHROPIC_BETA)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .collect();
        if !betas.is_empty() {
            object.insert("anthropic_beta".into(), Value::from(betas.join(", ")));
        }
    }
    (!object.is_empty()).then_some(Value::Object(object))
}

/// The call's `CallWire` object: the answer's (what a replay encodes from), with the
/// request's beside it under `request`. The encoders read only their own keys, so a replay
/// is the same with or without it. A call with a request object and no answer object (cut
/// before the answer said anything) gets an object of `request` alone, with no `format`:
/// an encoder takes it for no wire at all, as it would have without the request's.
pub(crate) fn call_wire(answer: Option<&Value>, request: Option<&Value>) -> Option<Value> {
    let Some(request) = request else {
        return answer.cloned();
    };
    let mut object = match answer {
        Some(Value::Object(object)) => object.clone(),
        Some(other) => return Some(other.clone()),
        None => Map::new(),
    };
    object.insert("request".into(), request.clone());
    Some(Value::Object(object))
}
