//! The JSONPath subset: what each form removes, and what is refused where.

use serde_json::json;

use super::*;

fn removed(path: &str, mut value: Value) -> Value {
    JsonPath::parse(path).unwrap().remove_from(&mut value);
    value
}

#[test]
fn the_documented_forms_remove_what_they_name_and_nothing_else() {
    let request = json!({
        "metadata": {"request_id": "r-1", "user": "u"},
        "a": [{"b": 1, "c": 2}, {"b": 3, "c": 4}],
        "odd-name": {"x": 1},
    });
    assert_eq!(
        removed("$.metadata.request_id", request.clone())["metadata"],
        json!({"user": "u"})
    );
    assert_eq!(
        removed("$.a[*].b", request.clone())["a"],
        json!([{"c": 2}, {"c": 4}])
    );
    assert_eq!(
        removed("$.a[0].b", request.clone())["a"],
        json!([{"c": 2}, {"b": 3, "c": 4}])
    );
    assert_eq!(
        removed("$['odd-name'].x", request.clone())["odd-name"],
        json!({})
    );
    assert_eq!(
        removed("$.metadata.*", request.clone())["metadata"],
        json!({})
    );
    // A path that names nothing in this request leaves it whole.
    assert_eq!(removed("$.nothing.here", request.clone()), request);
    assert_eq!(removed("$.a[7].b", request.clone()), request);
}

#[test]
fn what_the_subset_does_not_hold_is_refused_naming_the_character() {
    for (path, at) in [
        ("metadata.x", 0),
        ("$..request_id", 1),
        ("$.a[?(@.b==1)]", 3),
        ("$.a[0:2]", 3),
        ("$.a['x','y']", 3),
        ("$.a[", 3),
        ("$", 1),
        ("$.", 2),
        ("$[0]", 1),
    ] {
        match JsonPath::parse(path) {
            Err(ProxyError::InvalidJsonPath { path: p, at: a, .. }) => {
                assert_eq!((p.as_str(), a), (path, at), "{path}");
            }
            other => panic!("{path}: {other:?}"),
        }
    }
}

#[test]
fn a_path_into_what_has_records_of_its_own_says_to_use_ignore() {
    let error = JsonPath::parse("$.messages[*].content").unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("\"messages\"") && text.contains("--ignore REGEX"),
        "{text}"
    );
}
