//! Redaction at write time in the proxy: a call's request is redacted as it is taken in, so
//! what is recorded, placed in a conversation and compared in replay is the same redacted
//! text, and the session log redacts the answer's records as it writes them.
//!
//! The caller's bytes still go to the upstream unchanged: redaction is about what is kept,
//! never about what is forwarded.
//!
//! The same hold-back writes a restored copy's path as the recorded workspace's in a fork's
//! live answers ([`Keep`]), so a path split across streamed events is found whole.

use std::collections::VecDeque;
use std::sync::Arc;

use cuca_events::{Message, MessageContentBlock, Role};
use cuca_redact::{Counts, Rules};
use cuca_wire::WireRequest;

/// Redacts `request` in place by `rules`, as the session log would redact the records it
/// becomes, and returns how many values each rule replaced.
///
/// Each user, assistant and tool message is redacted block by block (what its `Message` or
/// `ToolResult` record holds). A system message is recorded as one `SystemPrompt` text, its
/// text blocks joined, so it is redacted as that text; when a rule replaced something the
/// message becomes that one text block. Tools' descriptions and schemas, and the parameters
/// the caller sent (the `CallRequest` record), are redacted too. Replay redacts an incoming
/// request the same way before comparing it, so a redacted recording replays: redacted
/// against redacted.
///
/// The last `redacted_already` messages were redacted as they were read (the proxy's memo of
/// messages read before, [`crate::memo`]) and are left as they are.
pub(crate) fn redact_request(
    rules: &Rules,
    request: &mut WireRequest,
    redacted_already: usize,
) -> Counts {
    let mut counts = Counts::new();
    let messages = &mut request.unified.messages;
    let unread = messages.len().saturating_sub(redacted_already);
    for message in &mut messages[..unread] {
        counts.merge(&redact_message(rules, message));
    }
    for tool in &mut request.unified.tools {
        counts.merge(&rules.redact_string(&mut tool.description));
        counts.merge(&rules.redact_json(&mut tool.parameters));
    }
    counts.merge(&rules.redact_json_string(&mut request.parameters));
    counts
}

/// Redacts one message of a request in place, as the record it becomes is redacted: a user,
/// assistant or tool message block by block, a system message as the one `SystemPrompt` text
/// its text blocks are joined into (when a rule replaced something the message becomes that
/// one text block).
pub(crate) fn redact_message(rules: &Rules, message: &mut Message) -> Counts {
    if message.role != Role::System {
        return rules.redact_message(message);
    }
    let text = message.text();
    let (redacted, found) = rules.redact_text(&text);
    if !found.is_empty() {
        *message = Message::system(redacted.into_owned());
    }
    found
}

/// A call-log row's `redacted` field from `counts`.
pub(crate) fn row_counts(counts: &Counts) -> std::collections::BTreeMap<String, u64> {
    counts
        .iter()
        .map(|(rule, n)| (rule.to_owned(), n))
        .collect()
}

/// How many bytes of a streamed text are held back from the store while the text goes on: a
/// secret split across streamed deltas (`Bearer` and its token in two, a PEM key in dozens)
/// is found whole when the text it is in is redacted as one. Longer than the longest secret
/// the default rules find (a 4096-bit RSA key in PEM is about 3.2 KiB), short enough that a
/// live reader of the session is never more than a few KiB of text behind.
pub(crate) const HOLD_BYTES: usize = 4096;

/// How far a held text may grow past [`HOLD_BYTES`] before its front is written out: each
/// release scans the held text once, so a step this size costs a few passes per byte.
const RELEASE_STEP: usize = 1024;

/// The most a held text may grow to while a rule's match runs on through it (a private key's
/// base64 with no END line yet): past it everything held is written out, so memory stays
/// bounded whatever a stream sends.
const MAX_HELD_BYTES: usize = 1 << 20;

/// The text a streamed block holds, and whether it is reasoning; `None` for a block that is
/// not streamed text (a tool call, a tool result, an image).
fn streamed_text(block: &MessageContentBlock) -> Option<(bool, &str)> {
    match block {
        MessageContentBlock::Text { text } => Some((false, text)),
        MessageContentBlock::Thinking { thinking } => Some((true, thinking)),
        _ => None,
    }
}

/// The streamed blocks of an answer's current text (its text, or its reasoning) not yet
/// written: released, redacted as one text, once the text has moved [`HOLD_BYTES`] on or
/// has ended. Every block is written, in order, with its own index; a secret that spanned
/// blocks becomes one marker in the block it began in, and the blocks it covered lose its
/// bytes, so the blocks joined are the whole text redacted.
#[derive(Debug, Default)]
pub(crate) struct Held {
    blocks: VecDeque<(u64, MessageContentBlock)>,
    /// Whether the held blocks are reasoning.
    thinking: bool,
    bytes: usize,
}

/// What an answer's blocks are written through: the redaction rules, and the aliases that
/// read a restored copy's path as the recorded workspace's (a fork run's live model names the
/// copy it saw; the recording names the workspace, so that a replay in any other copy reads
/// it as its own).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Keep<'a> {
    pub(crate) rules: Option<&'a Rules>,
    pub(crate) aliases: Option<&'a crate::aliases::Aliases>,
}

impl<'a> Keep<'a> {
    /// What a recorder holding these rules and aliases writes through.
    pub(crate) fn of(
        rules: &'a Option<Arc<Rules>>,
        aliases: &'a Option<crate::aliases::Aliases>,
    ) -> Keep<'a> {
        Keep {
            rules: rules.as_deref(),
            aliases: aliases.as_ref(),
        }
    }

    /// Whether blocks are written as they came.
    pub(crate) fn is_nothing(&self) -> bool {
        self.rules.is_none() && self.aliases.is_none_or(|aliases| aliases.is_empty())
    }

    /// A block that is not streamed text, as it is written: a tool call's arguments with
    /// the aliases applied (they name files by absolute path).
    fn other_block(&self, block: MessageContentBlock) -> MessageContentBlock {
        match (self.aliases, block) {
            (
                Some(aliases),
                MessageContentBlock::ToolCall {
                    id,
                    name,
                    arguments,
                },
            ) => MessageContentBlock::ToolCall {
                id,
                name,
                arguments: aliases.apply_str(&arguments).into_owned(),
            },
            (_, block) => block,
        }
    }
}

/// What a stretch of held text is written as.
enum Put<'a> {
    /// A rule's marker, counted.
    Marker(String),
    /// The recorded workspace's path, for an aliased copy's.
    Alias(&'a str),
}

impl Held {
    /// Takes the answer's next decoded block; what can be written now is pushed onto `out`,
    /// redacted and with the aliases applied, and what the rules replaced is added to
    /// `counts`.
    pub(crate) fn push(
        &mut self,
        keep: &Keep<'_>,
        index: u64,
        block: MessageContentBlock,
        out: &mut Vec<(u64, MessageContentBlock)>,
        counts: &mut Counts,
    ) {
        match streamed_text(&block) {
            Some((thinking, text)) => {
                if !self.blocks.is_empty() && self.thinking != thinking {
                    self.release(keep, None, out, counts);
                }
                self.thinking = thinking;
                self.bytes += text.len();
                self.blocks.push_back((index, block));
                if self.bytes > MAX_HELD_BYTES {
                    self.release(keep, None, out, counts);
                } else if self.bytes > HOLD_BYTES + RELEASE_STEP {
                    self.release(keep, Some(self.bytes - HOLD_BYTES), out, counts);
                }
            }
            None => {
                self.release(keep, None, out, counts);
                out.push((index, keep.other_block(block)));
            }
        }
    }

    /// The answer ended: every held block, redacted.
    pub(crate) fn finish(
        &mut self,
        keep: &Keep<'_>,
        out: &mut Vec<(u64, MessageContentBlock)>,
        counts: &mut Counts,
    ) {
        self.release(keep, None, out, counts);
    }

    /// Writes out the held blocks that end at or before `upto` bytes of the held text (all
    /// of them for `None`), never cutting through a stretch a rule matches or an aliased path.
    fn release(
        &mut self,
        keep: &Keep<'_>,
        upto: Option<usize>,
        out: &mut Vec<(u64, MessageContentBlock)>,
        counts: &mut Counts,
    ) {
        if self.blocks.is_empty() {
            return;
        }
        let mut joined = String::with_capacity(self.bytes);
        let mut ends = Vec::with_capacity(self.blocks.len());
        for (_, block) in &self.blocks {
            if let Some((_, text)) = streamed_text(block) {
                joined.push_str(text);
            }
            ends.push(joined.len());
        }
        let mut spans: Vec<(std::ops::Range<usize>, Put<'_>)> = keep
            .rules
            .map(|rules| {
                rules
                    .scan(&joined)
                    .into_iter()
                    .filter_map(|finding| {
                        finding
                            .range
                            .map(|range| (range, Put::Marker(finding.rule)))
                    })
                    .collect()
            })
            .unwrap_or_default();
        if let Some(aliases) = keep.aliases {
            for (range, to) in aliases.find(&joined) {
                // A secret is redacted whole; a path inside one is not there to alias.
                if !spans
                    .iter()
                    .any(|(r, _)| r.start < range.end && range.start < r.end)
                {
                    spans.push((range, Put::Alias(to)));
                }
            }
            spans.sort_by_key(|(range, _)| range.start);
        }
        let inside_span = |at: usize| spans.iter().any(|(r, _)| r.start < at && at < r.end);
        let n_out = match upto {
            None => self.blocks.len(),
            Some(limit) => ends
                .iter()
                .rposition(|&end| end <= limit && !inside_span(end))
                .map_or(0, |i| i + 1),
        };
        let mut start = 0;
        for &end in ends.iter().take(n_out) {
            let Some((index, block)) = self.blocks.pop_front() else {
                break;
            };
            let mut text = String::with_capacity(end - start);
            let mut at = start;
            for (range, put) in spans.iter().filter(|(r, _)| r.start < end && r.end > start) {
                if range.start >= start {
                    text.push_str(&joined[at..range.start]);
                    match put {
                        Put::Marker(rule) => {
                            text.push_str(&cuca_redact::marker(rule));
                            counts.add(rule, 1);
                        }
                        Put::Alias(to) => text.push_str(to),
                    }
                }
                at = at.max(range.end.min(end));
            }
            text.push_str(&joined[at.min(end)..end]);
            // A rule that needs another pass (a user's rule around a marker) runs to its end.
            if let Some(rules) = keep.rules {
                counts.merge(&rules.redact_string(&mut text));
            }
            let block = match block {
                MessageContentBlock::Thinking { .. } => {
                    MessageContentBlock::Thinking { thinking: text }
                }
                _ => MessageContentBlock::Text { text },
            };
            out.push((index, block));
            self.bytes -= end - start;
            start = end;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aliases::Aliases;

    fn text(text: &str) -> MessageContentBlock {
        MessageContentBlock::Text { text: text.into() }
    }

    #[test]
    fn an_aliased_path_split_across_streamed_blocks_is_written_as_the_workspace_s() {
        let aliases = Aliases::workspace("/tmp/cuca-run-7", "/work/app");
        let keep = Keep {
            rules: None,
            aliases: Some(&aliases),
        };
        let mut held = Held::default();
        let (mut out, mut counts) = (Vec::new(), Counts::new());
        for (index, piece) in ["I will edit /tmp/cu", "ca-run-", "7/src/main.rs now"]
            .into_iter()
            .enumerate()
        {
            held.push(&keep, index as u64, text(piece), &mut out, &mut counts);
        }
        held.push(
            &keep,
            3,
            MessageContentBlock::ToolCall {
                id: "t1".into(),
                name: "Edit".into(),
                arguments: r#"{"file_path":"/tmp/cuca-run-7/src/main.rs"}"#.into(),
            },
            &mut out,
            &mut counts,
        );
        held.finish(&keep, &mut out, &mut counts);
        // Every block is written, in order, with its own index; the path lands whole in the
        // block it began in, and the tool call's arguments name the workspace.
        assert_eq!(
            out,
            vec![
                (0, text("I will edit /work/app")),
                (1, text("")),
                (2, text("/src/main.rs now")),
                (
                    3,
                    MessageContentBlock::ToolCall {
                        id: "t1".into(),
                        name: "Edit".into(),
                        arguments: r#"{"file_path":"/work/app/src/main.rs"}"#.into(),
                    }
                ),
            ]
        );
        assert!(counts.is_empty());
    }

    #[test]
    fn with_no_rules_and_no_aliases_nothing_is_held() {
        assert!(Keep::default().is_nothing());
        let none = Aliases::workspace("/work", "/work");
        assert!(Keep {
            rules: None,
            aliases: Some(&none),
        }
        .is_nothing());
    }
}
