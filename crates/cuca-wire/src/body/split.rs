//! A body's top level read with one array field split into its elements in the same pass.
//!
//! An agent's `messages` is most of its body. Read as one raw value and then split, it was
//! scanned twice; here the field's elements are taken as the top level is read.

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::TopLevel;

/// What a body's list field held: its elements, or something that is not an array.
pub(crate) enum List<'a> {
    Elements(Vec<&'a RawValue>),
    NotAnArray,
}

/// Reads `body` as one JSON object, as [`super::top_level`] does, but for the field named
/// `list`, which is split into its elements (`None`: the body has no such field) and is not
/// in the map. `Err` says, in words, why the body is not a JSON object.
pub(crate) fn top_level_split<'a>(
    body: &'a [u8],
    list: &str,
) -> Result<(TopLevel<'a>, Option<List<'a>>), String> {
    // Checked as UTF-8 once, at memory speed, and then read as text: read from bytes,
    // serde_json checks each string and each element's raw text again. A body that is not
    // UTF-8 is read from bytes, so that its error is serde_json's own, with its place.
    match std::str::from_utf8(body) {
        Ok(text) => split_from(serde_json::Deserializer::from_str(text), list),
        Err(_) => split_from(serde_json::Deserializer::from_slice(body), list),
    }
}

fn split_from<'a, R: serde_json::de::Read<'a>>(
    mut deserializer: serde_json::Deserializer<R>,
    list: &str,
) -> Result<(TopLevel<'a>, Option<List<'a>>), String> {
    let read = Fields { list }
        .deserialize(&mut deserializer)
        .and_then(|read| deserializer.end().map(|()| read));
    read.map_err(super::not_an_object)
}

/// The top level's fields.
struct Fields<'l> {
    list: &'l str,
}

impl<'de> DeserializeSeed<'de> for Fields<'_> {
    type Value = (TopLevel<'de>, Option<List<'de>>);

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Fields<'_> {
    type Value = (TopLevel<'de>, Option<List<'de>>);

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut object = TopLevel::new();
        let mut list = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == self.list {
                // A key given twice counts as it did in a map: the last one.
                list = Some(map.next_value_seed(ListSeed)?);
            } else {
                let value: &'de RawValue = map.next_value()?;
                object.insert(key, value);
            }
        }
        Ok((object, list))
    }
}

/// The list field's value: an array's elements, or any other value passed over.
struct ListSeed;

impl<'de> DeserializeSeed<'de> for ListSeed {
    type Value = List<'de>;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<List<'de>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ListSeed {
    type Value = List<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<List<'de>, A::Error> {
        let mut elements = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(element) = seq.next_element::<&'de RawValue>()? {
            elements.push(element);
        }
        Ok(List::Elements(elements))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<List<'de>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(List::NotAnArray)
    }

    fn visit_bool<E>(self, _: bool) -> Result<List<'de>, E> {
        Ok(List::NotAnArray)
    }

    fn visit_i64<E>(self, _: i64) -> Result<List<'de>, E> {
        Ok(List::NotAnArray)
    }

    fn visit_u64<E>(self, _: u64) -> Result<List<'de>, E> {
        Ok(List::NotAnArray)
    }

    fn visit_f64<E>(self, _: f64) -> Result<List<'de>, E> {
        Ok(List::NotAnArray)
    }

    fn visit_str<E>(self, _: &str) -> Result<List<'de>, E> {
        Ok(List::NotAnArray)
    }

    fn visit_unit<E>(self) -> Result<List<'de>, E> {
        Ok(List::NotAnArray)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The top level's keys, and the list field's elements (`Some(None)`: not an array).
    type Split = (Vec<String>, Option<Option<Vec<String>>>);

    fn split(body: &str) -> Result<Split, String> {
        let (object, list) = top_level_split(body.as_bytes(), "messages")?;
        let keys = object.keys().cloned().collect();
        let list = list.map(|list| match list {
            List::Elements(elements) => Some(elements.iter().map(|e| e.get().to_owned()).collect()),
            List::NotAnArray => None,
        });
        Ok((keys, list))
    }

    #[test]
    fn the_list_is_split_and_the_rest_kept_as_the_top_level_reads_it() {
        let body =
            r#"{"model":"m","messages":[{"role":"user","content":"a\"b"}, 3 ,[1]],"stream":true}"#;
        let (keys, list) = split(body).unwrap();
        assert_eq!(keys, ["model", "stream"]);
        assert_eq!(
            list,
            Some(Some(vec![
                r#"{"role":"user","content":"a\"b"}"#.to_owned(),
                "3".to_owned(),
                "[1]".to_owned()
            ]))
        );
        let whole = super::super::top_level(body.as_bytes()).unwrap();
        assert_eq!(whole["model"].get(), r#""m""#);
    }

    #[test]
    fn a_list_that_is_not_an_array_or_missing_is_said_and_errors_read_as_before() {
        for not in [r#""hi""#, "null", "true", "1", "-1", "1.5", r#"{"a":[1]}"#] {
            let (_, list) = split(&format!(r#"{{"model":"m","messages":{not}}}"#)).unwrap();
            assert_eq!(list, Some(None), "{not}");
        }
        assert_eq!(split(r#"{"model":"m"}"#).unwrap().1, None);
        assert_eq!(split("[1]").unwrap_err(), "the body is not a JSON object");
        assert!(split(r#"{"model":"m""#)
            .unwrap_err()
            .starts_with("the body is not JSON"));
        assert!(split(r#"{"model":"m"} x"#)
            .unwrap_err()
            .starts_with("the body is not JSON"));
    }

    #[test]
    fn a_body_that_is_not_utf8_is_refused_with_serde_json_s_words_and_place() {
        let mut body = br#"{"model":"m","messages":[{"role":"user","content":"caf"#.to_vec();
        body.extend_from_slice(b"\xff\"}]}");
        let Err(error) = top_level_split(&body, "messages") else {
            panic!("a body that is not UTF-8 was read");
        };
        let from_bytes = serde_json::from_slice::<serde_json::Value>(&body).unwrap_err();
        assert!(error.contains(&from_bytes.to_string()), "{error}");
        // UTF-8 text beyond ASCII reads as it is.
        let (_, list) = split(r#"{"messages":[{"content":"café ✓"}]}"#).unwrap();
        assert_eq!(list, Some(Some(vec![r#"{"content":"café ✓"}"#.to_owned()])));
    }
}
