//! JSON paths: the small path syntax a user rule selects values of a JSON document with.

use std::fmt;

use serde_json::Value;

#[cfg(test)]
mod tests;

/// A path into a JSON document, in a small subset of JSONPath:
///
/// * `$` is the document; every path starts with it and has at least one step after it;
/// * `.name` is the member `name` of an object (a name is any characters but `.`, `[`, `]`,
///   quotes and white space);
/// * `['name']` or `["name"]` is the member `name`, for names with those characters;
/// * `[3]` is the element at index 3 of an array (from 0);
/// * `.*` and `[*]` are every member of an object or every element of an array.
///
/// A step that finds nothing (a missing member, an index past the end, a member of a string)
/// selects nothing; it is not an error.
///
/// ```
/// use cuca_redact::JsonPath;
/// let path = JsonPath::parse("$.messages[*].content")?;
/// let body = serde_json::json!({"messages": [{"content": "hi"}, {"role": "user"}, {"content": "yo"}]});
/// assert_eq!(path.pointers(&body), ["/messages/0/content", "/messages/2/content"]);
/// # Ok::<(), cuca_redact::JsonPathError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    text: String,
    steps: Vec<Step>,
}

/// One step of a [`JsonPath`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// An object's member.
    Key(String),
    /// An array's element.
    Index(usize),
    /// Every member or element.
    Any,
}

/// Why a text is not a [`JsonPath`]: where reading stopped and what was expected there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("JSON path {path:?} cannot be read at byte {at}: {reason}")]
pub struct JsonPathError {
    /// The path as given.
    pub path: String,
    /// The byte offset where reading stopped.
    pub at: usize,
    /// What was expected there.
    pub reason: &'static str,
}

impl JsonPath {
    /// Reads a path in the syntax above.
    pub fn parse(text: &str) -> Result<JsonPath, JsonPathError> {
        let fail = |at: usize, reason: &'static str| JsonPathError {
            path: text.to_owned(),
            at,
            reason,
        };
        let bytes = text.as_bytes();
        if bytes.first() != Some(&b'$') {
            return Err(fail(0, "a path starts with `$`"));
        }
        let mut steps = Vec::new();
        let mut at = 1;
        while at < bytes.len() {
            match bytes[at] {
                b'.' => {
                    at += 1;
                    if bytes.get(at) == Some(&b'*') {
                        steps.push(Step::Any);
                        at += 1;
                        continue;
                    }
                    let start = at;
                    while at < bytes.len() && !is_name_end(bytes[at]) {
                        at += 1;
                    }
                    if at == start {
                        return Err(fail(start, "a member name or `*` after `.`"));
                    }
                    steps.push(Step::Key(text[start..at].to_owned()));
                }
                b'[' => {
                    at += 1;
                    match bytes.get(at) {
                        Some(b'*') => {
                            steps.push(Step::Any);
                            at += 1;
                        }
                        Some(&quote @ (b'\'' | b'"')) => {
                            let start = at + 1;
                            let Some(len) = text[start..].find(quote as char) else {
                                return Err(fail(at, "a closing quote"));
                            };
                            steps.push(Step::Key(text[start..start + len].to_owned()));
                            at = start + len + 1;
                        }
                        Some(b'0'..=b'9') => {
                            let start = at;
                            while at < bytes.len() && bytes[at].is_ascii_digit() {
                                at += 1;
                            }
                            let index = text[start..at]
                                .parse::<usize>()
                                .map_err(|_| fail(start, "an index that fits in a usize"))?;
                            steps.push(Step::Index(index));
                        }
                        _ => return Err(fail(at, "`*`, an index or a quoted name after `[`")),
                    }
                    if bytes.get(at) != Some(&b']') {
                        return Err(fail(at, "`]`"));
                    }
                    at += 1;
                }
                _ => return Err(fail(at, "`.` or `[`")),
            }
        }
        if steps.is_empty() {
            return Err(fail(
                1,
                "a step after `$` (a path cannot select the whole document)",
            ));
        }
        Ok(JsonPath {
            text: text.to_owned(),
            steps,
        })
    }

    /// The path as it was written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The JSON pointers (RFC 6901, as `serde_json::Value::pointer` takes) of every value the
    /// path selects in `root`, in document order.
    pub fn pointers(&self, root: &Value) -> Vec<String> {
        let mut current: Vec<(String, &Value)> = vec![(String::new(), root)];
        for step in &self.steps {
            let mut next = Vec::new();
            for (pointer, value) in current {
                match (step, value) {
                    (Step::Key(key), Value::Object(map)) => {
                        if let Some(child) = map.get(key) {
                            next.push((child_pointer(&pointer, key), child));
                        }
                    }
                    (Step::Index(index), Value::Array(items)) => {
                        if let Some(child) = items.get(*index) {
                            next.push((format!("{pointer}/{index}"), child));
                        }
                    }
                    (Step::Any, Value::Object(map)) => {
                        for (key, child) in map {
                            next.push((child_pointer(&pointer, key), child));
                        }
                    }
                    (Step::Any, Value::Array(items)) => {
                        for (index, child) in items.iter().enumerate() {
                            next.push((format!("{pointer}/{index}"), child));
                        }
                    }
                    _ => {}
                }
            }
            current = next;
        }
        current.into_iter().map(|(pointer, _)| pointer).collect()
    }
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Whether a byte ends a `.name` step.
fn is_name_end(byte: u8) -> bool {
    matches!(byte, b'.' | b'[' | b']' | b'\'' | b'"') || byte.is_ascii_whitespace()
}

/// `pointer` extended by an object member, escaped as RFC 6901 says (`~` as `~0`, `/` as `~1`).
pub(crate) fn child_pointer(pointer: &str, key: &str) -> String {
    let mut out = String::with_capacity(pointer.len() + key.len() + 1);
    out.push_str(pointer);
    out.push('/');
    for c in key.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
    out
}
