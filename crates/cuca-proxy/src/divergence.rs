//! Where a request first differs from its recording, in context: the field's path in the
//! request (`messages[4].content[1].text`), the character it differs at, and a window of
//! text around that character on both sides — so a long prompt that differs on its 22nd line
//! shows the difference, not two identical first lines.

use cuca_events::{Message, MessageContentBlock, SessionEvent};
use serde_json::{json, Value};

use crate::matching::Matching;

/// Characters of context shown before the first differing character.
const BEFORE_CHARS: usize = 40;
/// Characters shown from the first differing character on.
const AFTER_CHARS: usize = 80;

/// The first difference between a recorded value and the one a request sent (or between
/// two records, for `cuca diff`), in context.
///
/// ```
/// use cuca_proxy::FirstDifference;
/// let d = FirstDifference::of_texts("text".into(), "the vault is in Lisbon", "the vault is in Porto")
///     .unwrap();
/// assert_eq!((d.offset, d.expected.as_str(), d.got.as_str()), (16, "the vault is in Lisbon", "the vault is in Porto"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstDifference {
    /// The field, as a path into the request (`messages[4].content[1].text`).
    pub path: String,
    /// The character (from 0) of the field's text where the two first differ.
    pub offset: usize,
    /// The first text around `offset`: up to 40 characters before it and 80 from it on.
    pub expected: String,
    /// The second text around `offset`.
    pub got: String,
}

impl FirstDifference {
    /// Where two texts of field `path` first differ, `None` when they are the same.
    pub fn of_texts(path: String, expected: &str, got: &str) -> Option<Self> {
        let offset = expected
            .chars()
            .zip(got.chars())
            .position(|(a, b)| a != b)
            .or_else(|| {
                let (a, b) = (expected.chars().count(), got.chars().count());
                (a != b).then_some(a.min(b))
            })?;
        Some(FirstDifference {
            path,
            offset,
            expected: window(expected, offset),
            got: window(got, offset),
        })
    }

    /// Where message `index` of a request first differs from the recorded one, compared as
    /// replay compares them (after `matching`'s normalisation).
    pub(crate) fn of_messages(
        index: usize,
        expected: &Message,
        got: &Message,
        matching: &Matching,
    ) -> Option<Self> {
        let at = format!("messages[{index}]");
        if expected.role != got.role {
            return Self::of_texts(
                format!("{at}.role"),
                expected.role.as_str(),
                got.role.as_str(),
            );
        }
        let n = expected.content.len().max(got.content.len());
        for i in 0..n {
            let path = format!("{at}.content[{i}]");
            let difference = match (expected.content.get(i), got.content.get(i)) {
                (Some(want), Some(have)) => of_blocks(&path, want, have, matching),
                (Some(want), None) => Self::of_texts(path, &block_summary(want), "(no such block)"),
                (None, Some(have)) => Self::of_texts(path, "(no such block)", &block_summary(have)),
                (None, None) => None,
            };
            if difference.is_some() {
                return difference;
            }
        }
        None
    }

    /// Where two records of one kind first differ, compared exactly: the text of a system
    /// prompt, a streamed output or reasoning, a tool call's arguments, a tool result's
    /// output, or a message's blocks (`content[1].text`). `None` when they are the same, or
    /// of kinds with no text to compare.
    pub fn of_events(expected: &SessionEvent, got: &SessionEvent) -> Option<Self> {
        let text = |field: &str, a: &str, b: &str| Self::of_texts(field.to_owned(), a, b);
        match (expected, got) {
            (SessionEvent::SystemPrompt { text: a }, SessionEvent::SystemPrompt { text: b })
            | (SessionEvent::Output { text: a }, SessionEvent::Output { text: b })
            | (SessionEvent::Reasoning { text: a }, SessionEvent::Reasoning { text: b }) => {
                text("text", a, b)
            }
            (SessionEvent::Message(a), SessionEvent::Message(b)) => {
                let exact = Matching::new(&[], true).ok()?;
                Self::of_messages(0, a, b, &exact).map(|mut d| {
                    d.path = d.path.trim_start_matches("messages[0].").to_owned();
                    d
                })
            }
            (
                SessionEvent::ToolCall {
                    name: name_a,
                    arguments: args_a,
                    ..
                },
                SessionEvent::ToolCall {
                    name: name_b,
                    arguments: args_b,
                    ..
                },
            ) => text("name", name_a, name_b).or_else(|| text("arguments", args_a, args_b)),
            (
                SessionEvent::ToolResult {
                    content: content_a, ..
                },
                SessionEvent::ToolResult {
                    content: content_b, ..
                },
            ) => text("content", content_a, content_b),
            _ => None,
        }
    }

    /// The difference in words, for a message or a call-log note.
    pub fn sentence(&self) -> String {
        format!(
            "first difference at {}, character {}: expected {:?}, got {:?}",
            self.path, self.offset, self.expected, self.got
        )
    }

    /// The difference as JSON, for the body of the refusal that reports it.
    pub fn json(&self) -> Value {
        json!({
            "path": self.path,
            "offset": self.offset,
            "expected": self.expected,
            "got": self.got,
        })
    }
}

/// The first difference between two content blocks at `path`.
fn of_blocks(
    path: &str,
    want: &MessageContentBlock,
    have: &MessageContentBlock,
    matching: &Matching,
) -> Option<FirstDifference> {
    let text = |field: &str, a: &str, b: &str| {
        FirstDifference::of_texts(
            format!("{path}.{field}"),
            &matching.normal(a),
            &matching.normal(b),
        )
    };
    use MessageContentBlock as B;
    match (want, have) {
        (B::Text { text: a }, B::Text { text: b }) => text("text", a, b),
        (B::Thinking { thinking: a }, B::Thinking { thinking: b }) => text("thinking", a, b),
        (
            B::ToolCall {
                id: id_a,
                name: name_a,
                arguments: args_a,
            },
            B::ToolCall {
                id: id_b,
                name: name_b,
                arguments: args_b,
            },
        ) => FirstDifference::of_texts(format!("{path}.id"), id_a, id_b)
            .or_else(|| FirstDifference::of_texts(format!("{path}.name"), name_a, name_b))
            .or_else(|| text("arguments", args_a, args_b)),
        (
            B::ToolResult {
                tool_call_id: id_a,
                content: content_a,
                is_error: error_a,
            },
            B::ToolResult {
                tool_call_id: id_b,
                content: content_b,
                is_error: error_b,
            },
        ) => FirstDifference::of_texts(format!("{path}.tool_call_id"), id_a, id_b)
            .or_else(|| {
                FirstDifference::of_texts(
                    format!("{path}.is_error"),
                    &error_a.to_string(),
                    &error_b.to_string(),
                )
            })
            .or_else(|| text("content", content_a, content_b)),
        (
            B::ImageBase64 {
                media_type: type_a,
                data: data_a,
            },
            B::ImageBase64 {
                media_type: type_b,
                data: data_b,
            },
        ) => FirstDifference::of_texts(format!("{path}.media_type"), type_a, type_b)
            .or_else(|| FirstDifference::of_texts(format!("{path}.data"), data_a, data_b)),
        (want, have) => FirstDifference::of_texts(
            format!("{path}.type"),
            &block_summary(want),
            &block_summary(have),
        ),
    }
}

/// A block's kind, for a difference in kind.
fn block_summary(block: &MessageContentBlock) -> String {
    match block {
        MessageContentBlock::Text { .. } => "text",
        MessageContentBlock::Thinking { .. } => "thinking",
        MessageContentBlock::ToolCall { .. } => "tool call",
        MessageContentBlock::ToolResult { .. } => "tool result",
        MessageContentBlock::ImageBase64 { .. } => "image",
    }
    .to_owned()
}

/// `text` around character `at`: up to [`BEFORE_CHARS`] before it and [`AFTER_CHARS`] from
/// it on, with `…` where the text goes on.
fn window(text: &str, at: usize) -> String {
    let from = at.saturating_sub(BEFORE_CHARS);
    let mut out = String::new();
    if from > 0 {
        out.push('…');
    }
    let mut chars = text.chars().skip(from);
    out.extend(chars.by_ref().take(at - from + AFTER_CHARS));
    if chars.next().is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuca_events::Role;

    fn message(role: Role, blocks: Vec<MessageContentBlock>) -> Message {
        Message {
            role,
            content: blocks,
        }
    }

    /// A long system prompt that differs on its 22nd line: the window shows that line, on
    /// both sides, and the path names the block.
    #[test]
    fn a_long_prompt_that_differs_late_shows_the_line_that_differs() {
        let lines: Vec<String> = (1..=30).map(|n| format!("Rule {n}: be careful.")).collect();
        let recorded = lines.join("\n");
        let mut changed = lines.clone();
        changed[21] = "Rule 22: be bold.".to_owned();
        let sent = changed.join("\n");
        let matching = Matching::new(&[], true).unwrap();
        let difference = FirstDifference::of_messages(
            4,
            &message(
                Role::User,
                vec![
                    MessageContentBlock::text("hi"),
                    MessageContentBlock::text(&recorded),
                ],
            ),
            &message(
                Role::User,
                vec![
                    MessageContentBlock::text("hi"),
                    MessageContentBlock::text(&sent),
                ],
            ),
            &matching,
        )
        .unwrap();
        assert_eq!(difference.path, "messages[4].content[1].text");
        let before: usize = lines[..21].iter().map(|l| l.chars().count() + 1).sum();
        assert_eq!(difference.offset, before + "Rule 22: be ".len());
        assert!(
            difference.expected.contains("Rule 22: be careful."),
            "{difference:?}"
        );
        assert!(
            difference.got.contains("Rule 22: be bold."),
            "{difference:?}"
        );
        assert!(difference.expected.starts_with('…') && difference.got.starts_with('…'));
        assert!(difference
            .sentence()
            .contains("messages[4].content[1].text, character"));
    }

    #[test]
    fn a_shorter_text_differs_where_it_ends_and_equal_messages_do_not_differ() {
        let matching = Matching::new(&[], true).unwrap();
        let a = message(Role::User, vec![MessageContentBlock::text("abc")]);
        let b = message(Role::User, vec![MessageContentBlock::text("abcdef")]);
        let difference = FirstDifference::of_messages(0, &a, &b, &matching).unwrap();
        assert_eq!((difference.offset, difference.got.as_str()), (3, "abcdef"));
        assert_eq!(FirstDifference::of_messages(0, &a, &a, &matching), None);
        let tool = message(
            Role::Tool,
            vec![MessageContentBlock::ToolResult {
                tool_call_id: "c1".into(),
                content: "exit 0".into(),
                is_error: false,
            }],
        );
        let failed = message(
            Role::Tool,
            vec![MessageContentBlock::ToolResult {
                tool_call_id: "c1".into(),
                content: "exit 1".into(),
                is_error: false,
            }],
        );
        let difference = FirstDifference::of_messages(2, &tool, &failed, &matching).unwrap();
        assert_eq!(difference.path, "messages[2].content[0].content");
        assert_eq!(difference.offset, 5);
    }
}
