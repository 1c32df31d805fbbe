//! A request body's top level as every format reads it: raw values by key, which have no
//! nesting limit, so a field nested deeper than serde_json builds a `Value` for is still kept
//! byte for byte; and the parameters a recorder keeps, as the caller sent them.

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::Value;

/// The top-level fields of a JSON object body, by name, each as the caller's own bytes.
pub(crate) type TopLevel = BTreeMap<String, Box<RawValue>>;

/// Reads `body` as one JSON object; `Err` says, in words, why it is not one.
pub(crate) fn top_level(body: &[u8]) -> Result<TopLevel, String> {
    serde_json::from_slice(body).map_err(|e| {
        if e.classify() == serde_json::error::Category::Data {
            "the body is not a JSON object".to_owned()
        } else {
            format!("the body is not JSON: {e}")
        }
    })
}

/// Every field of `object` but those in `recorded_elsewhere`, as the JSON text of one object
/// whose values are the caller's own bytes: a `CallRequest` record's parameters.
pub(crate) fn parameters(object: &TopLevel, recorded_elsewhere: &[&str]) -> String {
    let mut parameters = String::from("{");
    for (key, raw) in object
        .iter()
        .filter(|(key, _)| !recorded_elsewhere.contains(&key.as_str()))
    {
        if parameters.len() > 1 {
            parameters.push(',');
        }
        parameters.push_str(&Value::String(key.clone()).to_string());
        parameters.push(':');
        parameters.push_str(raw.get());
    }
    parameters.push('}');
    parameters
}
