//! A request body as every format reads it: its top level as raw values by key, which have no
//! nesting limit, so a field nested deeper than serde_json builds a `Value` for is still kept
//! byte for byte; the parameters a recorder keeps, as the caller sent them; and the small
//! readers of fields and images the formats share.

use std::collections::BTreeMap;

use cuca_events::MessageContentBlock;
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

/// The string at `path` (object keys) inside `raw`, read level by level as raw values.
pub(crate) fn shallow_str(raw: &RawValue, path: &[&str]) -> Option<String> {
    let mut at: Box<RawValue> = serde_json::from_str(raw.get()).ok()?;
    for key in path {
        let mut object: BTreeMap<String, Box<RawValue>> = serde_json::from_str(at.get()).ok()?;
        at = object.remove(*key)?;
    }
    serde_json::from_str::<String>(at.get()).ok()
}

pub(crate) fn str_field(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// An image URL as a block: a `data:` URL split into its media type and bytes, any other URL
/// kept whole with the media type `text/uri-list`.
pub(crate) fn image_of(url: &str) -> MessageContentBlock {
    if let Some(rest) = url.strip_prefix("data:") {
        if let Some((media_type, data)) = rest.split_once(";base64,") {
            return MessageContentBlock::ImageBase64 {
                media_type: media_type.to_owned(),
                data: data.to_owned(),
            };
        }
    }
    MessageContentBlock::ImageBase64 {
        media_type: "text/uri-list".into(),
        data: url.to_owned(),
    }
}
