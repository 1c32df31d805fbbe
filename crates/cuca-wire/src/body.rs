//! A request body as every format reads it: its top level as raw values by key, which have no
//! nesting limit, so a field nested deeper than serde_json builds a `Value` for is still kept
//! byte for byte; the parameters a recorder keeps, as the caller sent them; and the small
//! readers of fields and images the formats share.

use std::collections::BTreeMap;

mod split;
pub(crate) use split::{top_level_split, List};

use cuca_events::MessageContentBlock;
use serde_json::value::RawValue;
use serde_json::Value;

/// The top-level fields of a JSON object body, by name, each as the caller's own bytes,
/// borrowed from the body (an agent's `messages` is most of a large body: not copied).
pub(crate) type TopLevel<'a> = BTreeMap<String, &'a RawValue>;

/// Why a body that did not read as one JSON object is not one, in words: not JSON at all, or
/// JSON of another shape.
pub(crate) fn not_an_object(error: serde_json::Error) -> String {
    if error.classify() == serde_json::error::Category::Data {
        "the body is not a JSON object".to_owned()
    } else {
        format!("the body is not JSON: {error}")
    }
}

/// Reads `body` as one JSON object; `Err` says, in words, why it is not one.
pub(crate) fn top_level(body: &[u8]) -> Result<TopLevel<'_>, String> {
    serde_json::from_slice(body).map_err(not_an_object)
}

/// The top-level fields of a JSON object in the order the caller sent them, each as its own
/// bytes: what [`with_model`] writes back with one value changed.
struct Ordered(Vec<(String, Box<RawValue>)>);

impl<'de> serde::Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Ordered, A::Error> {
                let mut fields = Vec::new();
                while let Some(field) = map.next_entry::<String, Box<RawValue>>()? {
                    fields.push(field);
                }
                Ok(Ordered(fields))
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

/// `body` with its top-level `model` set to `model` (see `Format::with_model`).
pub(crate) fn with_model(body: &[u8], model: &str) -> Result<Vec<u8>, String> {
    let Ordered(fields) = serde_json::from_slice(body).map_err(not_an_object)?;
    let named = Value::String(model.to_owned()).to_string();
    let mut out = Vec::with_capacity(body.len() + named.len());
    out.push(b'{');
    let mut seen = false;
    if !fields.iter().any(|(key, _)| key == "model") {
        out.extend_from_slice(b"\"model\":");
        out.extend_from_slice(named.as_bytes());
        seen = true;
    }
    for (key, raw) in &fields {
        if seen {
            out.push(b',');
        }
        seen = true;
        out.extend_from_slice(Value::String(key.clone()).to_string().as_bytes());
        out.push(b':');
        // A repeated `model` key is set everywhere, so no reader can take the old one.
        let value = if key == "model" {
            named.as_str()
        } else {
            raw.get()
        };
        out.extend_from_slice(value.as_bytes());
    }
    out.push(b'}');
    Ok(out)
}

/// Every field of `object` but those in `recorded_elsewhere`, as the JSON text of one object
/// whose values are the caller's own bytes: a `CallRequest` record's parameters.
pub(crate) fn parameters(object: &TopLevel<'_>, recorded_elsewhere: &[&str]) -> String {
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

#[cfg(test)]
mod tests {
    use crate::Format;

    #[test]
    fn another_model_is_set_in_each_formats_own_field_and_nothing_else_moves() {
        let bodies = [
            (
                Format::Chat,
                r#"{"model":"a","messages":[{"role":"user","content":"hi"}],"temperature":0.5,"stream":true}"#,
            ),
            (
                Format::Messages,
                r#"{"max_tokens":64,"model":"a","messages":[{"role":"user","content":"hi"}]}"#,
            ),
            (
                Format::Responses,
                r#"{"model":"a","input":"hi","store":false}"#,
            ),
        ];
        for (format, body) in bodies {
            let before = format.parse_request(body.as_bytes()).unwrap();
            let swapped = format.with_model(body.as_bytes(), "b \"quoted\"").unwrap();
            let after = format.parse_request(&swapped).unwrap();
            assert_eq!(after.unified.model, "b \"quoted\"", "{}", format.name());
            assert_eq!(after.parameters, before.parameters, "{}", format.name());
            assert_eq!(after.unified.messages, before.unified.messages);
            assert_eq!(
                String::from_utf8(swapped.to_vec()).unwrap(),
                body.replace(r#""model":"a""#, r#""model":"b \"quoted\"""#),
                "the fields keep their order and bytes"
            );
        }
        let unnamed = Format::Chat.with_model(br#"{"messages":[]}"#, "b").unwrap();
        assert_eq!(&unnamed[..], br#"{"model":"b","messages":[]}"#);
        assert!(Format::Chat.with_model(b"[1]", "b").is_err());
        assert!(Format::Chat.with_model(b"{", "b").is_err());
    }
}
