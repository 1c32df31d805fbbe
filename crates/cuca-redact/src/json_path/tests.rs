//! The path syntax: every step kind read and selected, and every malformed path refused.

use serde_json::json;

use super::*;

#[test]
fn every_step_kind_reads_and_selects_in_document_order() {
    let doc = json!({
        "metadata": {"request_id": "r-1", "a/b~c": 1},
        "messages": [{"content": "one"}, {"role": "user"}, {"content": ["two"]}],
    });
    let cases: [(&str, &[&str]); 7] = [
        ("$.metadata.request_id", &["/metadata/request_id"]),
        (
            "$.messages[*].content",
            &["/messages/0/content", "/messages/2/content"],
        ),
        ("$.messages[2].content[0]", &["/messages/2/content/0"]),
        ("$['metadata'][\"a/b~c\"]", &["/metadata/a~1b~0c"]),
        ("$.messages[1].*", &["/messages/1/role"]),
        ("$.messages[9].content", &[]),
        ("$.metadata.request_id.deeper", &[]),
    ];
    for (text, pointers) in cases {
        let path = JsonPath::parse(text).unwrap();
        assert_eq!(path.pointers(&doc), pointers, "{text}");
        for pointer in pointers {
            assert!(doc.pointer(pointer).is_some(), "{text}: {pointer} resolves");
        }
        assert_eq!(path.to_string(), text);
    }
}

#[test]
fn a_malformed_path_names_the_byte_and_what_was_expected() {
    let cases = [
        ("metadata.id", 0, "a path starts with `$`"),
        (
            "$",
            1,
            "a step after `$` (a path cannot select the whole document)",
        ),
        ("$.", 2, "a member name or `*` after `.`"),
        ("$.a..b", 4, "a member name or `*` after `.`"),
        ("$[x]", 2, "`*`, an index or a quoted name after `[`"),
        ("$['a]", 2, "a closing quote"),
        ("$[1", 3, "`]`"),
        ("$.a b", 3, "`.` or `[`"),
        (
            "$[99999999999999999999999]",
            2,
            "an index that fits in a usize",
        ),
    ];
    for (text, at, reason) in cases {
        let error = JsonPath::parse(text).unwrap_err();
        assert_eq!((error.at, error.reason), (at, reason), "{text}");
        assert_eq!(error.path, text);
    }
}
