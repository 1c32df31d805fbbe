//! The JSONPath subset `--ignore-json-path` takes: the fields of a request that replay leaves
//! out of the comparison on both sides, because they change on every run.
//!
//! Only what names fields is supported — `$.a.b`, `$.a[*].b`, `$.a[0]`, `$['a-b']`, `$.a.*` —
//! since the paths remove values and never select by content: filters (`?(…)`), slices,
//! unions and recursive descent (`..`) are refused with [`ProxyError::InvalidJsonPath`]
//! naming the character they start at. No JSONPath crate: the well-used ones
//! (`serde_json_path`, `jsonpath-rust`) query and never remove, so the removal had to be
//! written here anyway, and the subset is a few dozen lines.

use std::fmt;

use serde_json::Value;

use crate::error::ProxyError;

/// The top-level request fields replay compares as records of their own (messages, system
/// prompts, tools, the model and the stream flag are not parameters, in any wire format): a
/// path into one of them is refused, since removing a field of the sent body could never be
/// mirrored on the recorded records. `--ignore REGEX` blanks what changes in their text.
const RECORDED_ELSEWHERE: [&str; 8] = [
    "messages",
    "system",
    "input",
    "instructions",
    "tools",
    "model",
    "stream",
    "stream_options",
];

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// An object's field.
    Field(String),
    /// An array's element.
    Index(usize),
    /// Every element of an array, or every field of an object.
    All,
}

/// A parsed `--ignore-json-path`: a path from the request's root to the fields it names.
///
/// ```text
/// $.metadata.request_id     the field request_id of the object metadata
/// $.tool_choice.function    a field inside a compared parameter
/// $.a[*].b / $.a[0].b       b of every element / of the first element of the array a
/// $['odd-name']             a field whose name is not a plain word
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JsonPath {
    text: String,
    steps: Vec<Step>,
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The longest path accepted: a field path in a request body, not a document.
const MAX_PATH_CHARS: usize = 1024;

impl JsonPath {
    /// Parses `text`; anything outside the subset is refused, naming the character.
    pub(crate) fn parse(text: &str) -> Result<JsonPath, ProxyError> {
        let fail = |at: usize, message: &str| ProxyError::InvalidJsonPath {
            path: text.to_owned(),
            at,
            message: message.to_owned(),
        };
        if text.chars().count() > MAX_PATH_CHARS {
            return Err(fail(
                MAX_PATH_CHARS,
                "is longer than a request's field path can be",
            ));
        }
        let chars: Vec<char> = text.chars().collect();
        if chars.first() != Some(&'$') {
            return Err(fail(0, "must start at the root, `$`"));
        }
        let mut steps = Vec::new();
        let mut i = 1;
        while i < chars.len() {
            match chars[i] {
                '.' if chars.get(i + 1) == Some(&'.') => {
                    return Err(fail(
                        i,
                        "recursive descent (`..`) is not supported; name each field",
                    ))
                }
                '.' if chars.get(i + 1) == Some(&'*') => {
                    steps.push(Step::All);
                    i += 2;
                }
                '.' => {
                    let start = i + 1;
                    let mut end = start;
                    while end < chars.len() && is_name_char(chars[end]) {
                        end += 1;
                    }
                    if end == start {
                        return Err(fail(start, "expected a field name after `.`"));
                    }
                    steps.push(Step::Field(chars[start..end].iter().collect()));
                    i = end;
                }
                '[' => {
                    let close = chars[i..]
                        .iter()
                        .position(|c| *c == ']')
                        .map(|p| i + p)
                        .ok_or_else(|| fail(i, "`[` is never closed"))?;
                    let inner: String = chars[i + 1..close].iter().collect();
                    steps.push(bracket(&inner).ok_or_else(|| {
                        fail(
                            i,
                            "only [*], [N] and ['name'] are supported (no filters, slices or unions)",
                        )
                    })?);
                    i = close + 1;
                }
                _ => return Err(fail(i, "expected `.` or `[`")),
            }
        }
        match steps.first() {
            None => Err(fail(
                1,
                "names the whole request; name a field (`$.metadata.request_id`)",
            )),
            Some(Step::Field(top)) if RECORDED_ELSEWHERE.contains(&top.as_str()) => Err(fail(
                2,
                &format!(
                    "{top:?} is compared as records of its own (messages, system prompts, tools), not as a JSON field; blank what changes in it with --ignore REGEX"
                ),
            )),
            Some(Step::Field(_)) => Ok(JsonPath {
                text: text.to_owned(),
                steps,
            }),
            Some(_) => Err(fail(1, "a request is an object: start with a field name")),
        }
    }

    /// Removes every value the path names from `value` (nothing, where it names none).
    pub(crate) fn remove_from(&self, value: &mut Value) {
        remove(value, &self.steps);
    }
}

/// Whether `c` may appear in a field name written after `.`.
fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-' || c == '$'
}

/// What is inside `[…]`: `*`, a non-negative index, or a quoted name.
fn bracket(inner: &str) -> Option<Step> {
    let inner = inner.trim();
    if inner == "*" {
        return Some(Step::All);
    }
    if let Ok(index) = inner.parse::<usize>() {
        return Some(Step::Index(index));
    }
    let quoted = inner
        .strip_prefix('\'')
        .and_then(|s| s.strip_suffix('\''))
        .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')))?;
    (!quoted.contains(['\'', '"'])).then(|| Step::Field(quoted.to_owned()))
}

fn remove(value: &mut Value, steps: &[Step]) {
    let Some((step, rest)) = steps.split_first() else {
        return;
    };
    if rest.is_empty() {
        match (step, value) {
            (Step::Field(name), Value::Object(map)) => {
                map.remove(name);
            }
            (Step::Index(i), Value::Array(items)) if *i < items.len() => {
                items.remove(*i);
            }
            (Step::All, Value::Array(items)) => items.clear(),
            (Step::All, Value::Object(map)) => map.clear(),
            _ => {}
        }
        return;
    }
    match (step, value) {
        (Step::Field(name), Value::Object(map)) => {
            if let Some(child) = map.get_mut(name) {
                remove(child, rest);
            }
        }
        (Step::Index(i), Value::Array(items)) => {
            if let Some(child) = items.get_mut(*i) {
                remove(child, rest);
            }
        }
        (Step::All, Value::Array(items)) => items.iter_mut().for_each(|c| remove(c, rest)),
        (Step::All, Value::Object(map)) => map.values_mut().for_each(|c| remove(c, rest)),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
