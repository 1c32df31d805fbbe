//! What replay compares: the whole conversation — system prompts, user and
//! assistant messages, tool calls and tool results — the tools offered, and the sampling
//! parameters, after a normalisation that blanks what differs on every run by nature.

use std::borrow::Cow;

#[cfg(test)]
use cuca_events::{Message, MessageContentBlock};
use regex::Regex;
use serde_json::Value;

use crate::error::ProxyError;
use crate::json_path::JsonPath;

/// The patterns replay ignores unless told otherwise: what an agent's own run puts in its
/// prompts and tool output that no rerun reproduces — Codex's per-run `Chunk ID: …` and
/// `Wall time: … seconds` in its tool output, ISO dates and times (Claude Code's system prompt
/// names today's date), and temporary paths (`/tmp/.tmpAbC123`).
pub const DEFAULT_IGNORE: [&str; 4] = [
    r"Chunk ID: \S+",
    r"Wall time: [0-9.]+ seconds",
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b",
    r"/tmp/[A-Za-z0-9._-]+",
];

/// The request fields replay compares with the recorded call's parameters, unless
/// `compare_parameters` is off: those that change what a model answers. Others (Claude
/// Code's per-run `metadata.user_id`, `stream_options`, `store`) differ between runs without
/// changing the answer.
pub const SAMPLING_PARAMETERS: [&str; 20] = [
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "seed",
    "stop",
    "stop_sequences",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "n",
    "reasoning_effort",
    "reasoning",
    "thinking",
    "response_format",
    "text",
    "tool_choice",
];

/// How replay compares a request with the recording.
#[derive(Debug, Clone)]
pub(crate) struct Matching {
    ignore: Vec<Regex>,
    compare_parameters: bool,
    /// Request fields left out of the parameters on both sides before they are compared
    /// (`--ignore-json-path`).
    json_paths: Vec<JsonPath>,
}

impl Matching {
    /// The matching of `ignore` (regular expressions) and `compare_parameters`.
    pub(crate) fn new(ignore: &[String], compare_parameters: bool) -> Result<Self, ProxyError> {
        let ignore = ignore
            .iter()
            .map(|pattern| {
                Regex::new(pattern).map_err(|error| ProxyError::InvalidConfig {
                    field: "ignore",
                    message: format!("{pattern:?} is not a regular expression: {error}"),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Matching {
            ignore,
            compare_parameters,
            json_paths: Vec::new(),
        })
    }

    /// The same matching, leaving the fields `paths` name (`$.metadata.request_id`) out of
    /// both sides' parameters before they are compared; a path outside the supported subset
    /// is refused by name.
    pub(crate) fn ignoring_json_paths(mut self, paths: &[String]) -> Result<Self, ProxyError> {
        self.json_paths = paths
            .iter()
            .map(|path| JsonPath::parse(path))
            .collect::<Result<_, _>>()?;
        Ok(self)
    }

    /// `text` with every ignored stretch replaced by `…`.
    pub(crate) fn normal<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut out = Cow::Borrowed(text);
        for pattern in &self.ignore {
            if let Cow::Owned(changed) = pattern.replace_all(&out, "…") {
                out = Cow::Owned(changed);
            }
        }
        out
    }

    /// Whether two messages are the same once normalised: role, and every block's kind and
    /// text (a tool call's name and arguments, a tool result's call id, output and error flag).
    ///
    /// Replay compares the keys of `crate::index::Keys::message` instead, which hash what this
    /// compares; this is the reference the index's tests hold the keys to.
    #[cfg(test)]
    pub(crate) fn same_message(&self, a: &Message, b: &Message) -> bool {
        a.role == b.role
            && a.content.len() == b.content.len()
            && a.content
                .iter()
                .zip(&b.content)
                .all(|(x, y)| self.same_block(x, y))
    }

    #[cfg(test)]
    fn same_block(&self, a: &MessageContentBlock, b: &MessageContentBlock) -> bool {
        use MessageContentBlock as B;
        match (a, b) {
            (B::Text { text: x }, B::Text { text: y }) => self.normal(x) == self.normal(y),
            (B::Thinking { thinking: x }, B::Thinking { thinking: y }) => {
                self.normal(x) == self.normal(y)
            }
            (
                B::ToolCall {
                    id: i1,
                    name: n1,
                    arguments: a1,
                },
                B::ToolCall {
                    id: i2,
                    name: n2,
                    arguments: a2,
                },
            ) => i1 == i2 && n1 == n2 && self.normal(a1) == self.normal(a2),
            (
                B::ToolResult {
                    tool_call_id: i1,
                    content: c1,
                    is_error: e1,
                },
                B::ToolResult {
                    tool_call_id: i2,
                    content: c2,
                    is_error: e2,
                },
            ) => i1 == i2 && e1 == e2 && self.normal(c1) == self.normal(c2),
            _ => a == b,
        }
    }

    /// Whether the recorded system prompt `want` and the request's `got` agree.
    pub(crate) fn same_text(&self, want: &str, got: &str) -> bool {
        self.normal(want) == self.normal(got)
    }

    /// The first sampling parameter whose value differs between the recorded parameters and
    /// the request's (both the JSON text of one object), with both values; `None` when they
    /// agree, when comparing parameters is off, or when the recording has none to compare.
    pub(crate) fn parameter_difference(
        &self,
        recorded: &str,
        sent: &str,
    ) -> Option<(&'static str, String, String)> {
        if !self.compare_parameters {
            return None;
        }
        let mut recorded: Value = serde_json::from_str(recorded).ok()?;
        let mut sent: Value = serde_json::from_str(sent).ok()?;
        for path in &self.json_paths {
            path.remove_from(&mut recorded);
            path.remove_from(&mut sent);
        }
        SAMPLING_PARAMETERS.into_iter().find_map(|key| {
            let (want, got) = (recorded.get(key), sent.get(key));
            (want != got).then(|| {
                let show =
                    |v: Option<&Value>| v.map_or_else(|| "absent".to_owned(), Value::to_string);
                (key, show(want), show(got))
            })
        })
    }

    /// Whether the tools offered agree: the recorded `CallRequest` tools (the JSON text of
    /// `[{name, description, parameters}]`) and the request's, once normalised.
    pub(crate) fn same_tools(&self, recorded: &str, sent: &[cuca_events::ToolDefinition]) -> bool {
        let Ok(recorded) = serde_json::from_str::<Vec<Value>>(recorded) else {
            return true;
        };
        recorded.len() == sent.len()
            && recorded.iter().zip(sent).all(|(want, got)| {
                want.get("name").and_then(Value::as_str) == Some(got.name.as_str())
                    && want
                        .get("description")
                        .and_then(Value::as_str)
                        .is_some_and(|d| self.same_text(d, &got.description))
                    && want.get("parameters") == Some(&got.parameters)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> Matching {
        let ignore: Vec<String> = DEFAULT_IGNORE.iter().map(|p| (*p).to_owned()).collect();
        Matching::new(&ignore, true).unwrap()
    }

    /// "a default set that makes a Codex replay match itself"
    #[test]
    fn the_default_set_blanks_what_a_rerun_changes_and_nothing_else() {
        let m = defaults();
        let run = |chunk: &str, secs: &str, date: &str, tmp: &str| {
            format!("Chunk ID: {chunk}\nWall time: {secs} seconds\nProcess exited with code 0\nOutput:\nALPHA at {date} in {tmp}/x")
        };
        assert!(m.same_text(
            &run("3fa2b1", "0.0012", "2026-11-30T10:00:01Z", "/tmp/.tmpAbC1"),
            &run("9c0d77", "0.31", "2026-12-01T11:12:13Z", "/tmp/.tmpXyZ2"),
        ));
        assert!(!m.same_text(
            &run("3fa2b1", "0.0012", "2026-11-30", "/tmp/a"),
            &run("3fa2b1", "0.0012", "2026-11-30", "/tmp/a").replace("ALPHA", "BETA"),
        ));
        let plain = Matching::new(&[], true).unwrap();
        assert!(!plain.same_text("Chunk ID: 1", "Chunk ID: 2"));
    }

    #[test]
    fn a_bad_pattern_is_refused_by_name() {
        let error = Matching::new(&["(".to_owned()], true).unwrap_err();
        assert!(error.to_string().contains("\"(\""), "{error}");
    }

    /// "Sampling parameters are compared too, unless `--ignore-params`."
    #[test]
    fn sampling_parameters_are_compared_and_other_fields_are_not() {
        let m = defaults();
        assert_eq!(
            m.parameter_difference(
                r#"{"temperature":0.2,"metadata":{"user_id":"a"}}"#,
                r#"{"metadata":{"user_id":"b"},"temperature":0.2}"#
            ),
            None
        );
        assert_eq!(
            m.parameter_difference(r#"{"temperature":0.2}"#, r#"{"temperature":0.7}"#),
            Some(("temperature", "0.2".to_owned(), "0.7".to_owned()))
        );
        assert_eq!(
            m.parameter_difference(r#"{}"#, r#"{"seed":1}"#),
            Some(("seed", "absent".to_owned(), "1".to_owned()))
        );
        let off = Matching::new(&[], false).unwrap();
        assert_eq!(
            off.parameter_difference(r#"{"seed":2}"#, r#"{"seed":1}"#),
            None
        );
    }

    /// "`--ignore-json-path` for fields that change every run": the named field may differ,
    /// a field beside it may not.
    #[test]
    fn a_named_json_path_is_left_out_on_both_sides_and_nothing_beside_it() {
        let m = defaults()
            .ignoring_json_paths(&["$.response_format.json_schema.name".to_owned()])
            .unwrap();
        let format = |name: &str, strict: bool| {
            format!(
                r#"{{"response_format":{{"type":"json_schema","json_schema":{{"name":"{name}","strict":{strict}}}}}}}"#
            )
        };
        assert_eq!(
            m.parameter_difference(&format("run-1", true), &format("run-2", true)),
            None
        );
        assert_eq!(
            m.parameter_difference(&format("run-1", true), &format("run-1", false))
                .map(|(key, _, _)| key),
            Some("response_format")
        );
        assert!(defaults()
            .parameter_difference(&format("run-1", true), &format("run-2", true))
            .is_some());
        let whole = defaults()
            .ignoring_json_paths(&["$.temperature".to_owned()])
            .unwrap();
        assert_eq!(
            whole.parameter_difference(r#"{"temperature":0.2}"#, r#"{"temperature":0.7}"#),
            None
        );
        assert!(defaults()
            .ignoring_json_paths(&["$..x".to_owned()])
            .is_err());
    }

    #[test]
    fn parameters_off_compare_nothing() {
        let off = Matching::new(&[], false).unwrap();
        assert_eq!(
            off.parameter_difference(r#"{"seed":2}"#, r#"{"seed":1}"#),
            None
        );
    }
}
