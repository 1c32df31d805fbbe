//! Redacting and scanning session events: every text-bearing field of every variant.

use cuca_events::{Message, MessageContentBlock, SessionEvent, SessionRecord};
use serde_json::Value;

use crate::{Counts, Finding, Rules};

/// The fields of each [`SessionEvent`] kind that [`Rules::redact_event`] redacts, by kind
/// name in [`SessionEvent::KINDS`] order; every kind is listed, so a kind added to the
/// vocabulary fails this crate's tests until it is placed here. Fields marked `(JSON)` hold
/// JSON text: the text rules apply to the text, and the JSON-path rules to the document
/// it parses as (when it parses).
///
/// Left alone, because they are not text anyone wrote but identifiers, numbers and
/// digests the store, replay and forks key on: ids, tool and model names, the fork points,
/// the wire format's name, the request digest, timings and token counts, and an image's
/// base64 bytes (an image of a key is not text the rules can read).
///
/// A workspace snapshot's paths and a shell command's working directory and origin are
/// left alone too: they are the keys `cuca checkout` restores by. The files and the whole
/// streams in the workspace object store are not session records and are not redacted
/// (`docs/workspace.md` says so).
pub const REDACTED_FIELDS: [(&str, &[&str]); 19] = [
    ("SystemPrompt", &["text"]),
    (
        "Message",
        &[
            "content[].text",
            "content[].thinking",
            "content[].arguments (JSON)",
            "content[].content",
        ],
    ),
    ("Reasoning", &["text"]),
    ("Output", &["text"]),
    ("ToolCall", &["arguments (JSON)"]),
    ("ToolResult", &["content", "stdout", "stderr"]),
    ("Latency", &[]),
    ("TokenUsage", &[]),
    ("ModelSwap", &["reason"]),
    ("Fork", &[]),
    ("CallRequest", &["parameters (JSON)", "tools (JSON)"]),
    ("CallFinish", &[]),
    ("CallIncomplete", &["reason"]),
    ("CallWire", &["wire (JSON)"]),
    ("RequestDigest", &[]),
    ("TokenDetail", &[]),
    ("Scrubbed", &[]),
    ("WorkspaceSnapshot", &["skipped[]"]),
    ("ShellCommand", &["command", "stdout.tail", "stderr.tail"]),
];

impl Rules {
    /// Redacts a field that holds JSON text: the text rules on the text, then, when there
    /// are JSON-path rules and the text parses, those on the document (written back compact
    /// only if one replaced something).
    fn redact_json_text(&self, text: &mut String, counts: &mut Counts) {
        counts.merge(&self.redact_string(text));
        if !self.has_json_paths() {
            return;
        }
        let Ok(mut value) = serde_json::from_str::<Value>(text) else {
            return;
        };
        let mut path_counts = Counts::new();
        if self.redact_paths(&mut value, &mut path_counts) {
            // Serializing a `Value` cannot fail (its keys are strings); should it ever, the
            // field goes whole rather than unredacted.
            *text = serde_json::to_string(&value).unwrap_or_else(|_| {
                path_counts
                    .iter()
                    .next()
                    .map(|(rule, _)| crate::marker(rule))
                    .unwrap_or_default()
            });
            counts.merge(&path_counts);
        }
    }

    /// Redacts every text-bearing field of `event` in place ([`REDACTED_FIELDS`]), and
    /// returns how many values each rule replaced.
    pub fn redact_event(&self, event: &mut SessionEvent) -> Counts {
        let mut counts = Counts::new();
        match event {
            SessionEvent::SystemPrompt { text }
            | SessionEvent::Reasoning { text }
            | SessionEvent::Output { text }
            | SessionEvent::CallIncomplete { reason: text }
            | SessionEvent::ModelSwap { reason: text, .. } => {
                counts.merge(&self.redact_string(text))
            }
            SessionEvent::Message(message) => counts.merge(&self.redact_message(message)),
            SessionEvent::ToolCall { arguments, .. } => {
                self.redact_json_text(arguments, &mut counts)
            }
            SessionEvent::ToolResult {
                content,
                stdout,
                stderr,
                ..
            } => {
                counts.merge(&self.redact_string(content));
                for text in [stdout, stderr].into_iter().flatten() {
                    counts.merge(&self.redact_string(text));
                }
            }
            SessionEvent::CallRequest {
                parameters, tools, ..
            } => {
                self.redact_json_text(parameters, &mut counts);
                self.redact_json_text(tools, &mut counts);
            }
            SessionEvent::CallWire { wire, .. } => self.redact_json_text(wire, &mut counts),
            SessionEvent::WorkspaceSnapshot { skipped, .. } => {
                for text in skipped {
                    counts.merge(&self.redact_string(text));
                }
            }
            SessionEvent::ShellCommand {
                command,
                stdout,
                stderr,
                ..
            } => {
                for text in [command, &mut stdout.tail, &mut stderr.tail] {
                    counts.merge(&self.redact_string(text));
                }
            }
            SessionEvent::Latency { .. }
            | SessionEvent::TokenUsage { .. }
            | SessionEvent::Fork { .. }
            | SessionEvent::CallFinish { .. }
            | SessionEvent::RequestDigest { .. }
            | SessionEvent::TokenDetail(_)
            | SessionEvent::Scrubbed { .. } => {}
            // `SessionEvent` is non-exhaustive; `REDACTED_FIELDS` lists every kind the
            // vocabulary has, and a test fails when a kind is missing from it, so a new
            // kind is placed here before it can pass unredacted.
            _ => {}
        }
        counts
    }

    /// Redacts every block of `message` in place as [`Rules::redact_event`] redacts a
    /// `Message` record: text, thinking and tool results' content by the text rules, tool
    /// calls' arguments as JSON text. A recorder that redacts an incoming request with this
    /// gets the bytes its `Message` records hold, which is what replay compares.
    pub fn redact_message(&self, message: &mut Message) -> Counts {
        let mut counts = Counts::new();
        for block in &mut message.content {
            match block {
                MessageContentBlock::Text { text }
                | MessageContentBlock::Thinking { thinking: text }
                | MessageContentBlock::ToolResult { content: text, .. } => {
                    counts.merge(&self.redact_string(text))
                }
                MessageContentBlock::ToolCall { arguments, .. } => {
                    self.redact_json_text(arguments, &mut counts)
                }
                MessageContentBlock::ImageBase64 { .. } => {}
            }
        }
        counts
    }

    /// Redacts a text that holds JSON (a tool call's arguments, a request's parameters) as
    /// the JSON-text fields of an event are: the text rules on the text, then the JSON-path
    /// rules on the document it parses as.
    pub fn redact_json_string(&self, text: &mut String) -> Counts {
        let mut counts = Counts::new();
        self.redact_json_text(text, &mut counts);
        counts
    }

    /// Redacts a record's event ([`Rules::redact_event`]); its session id, sequence and time
    /// are left alone.
    pub fn redact_record(&self, record: &mut SessionRecord) -> Counts {
        self.redact_event(&mut record.event)
    }

    /// Scans a field that holds JSON text: the text rules on the text, then the JSON-path
    /// rules on its document.
    fn scan_json_text(&self, text: &str, field: &str, findings: &mut Vec<Finding>) {
        findings.extend(self.scan_field(text, field));
        if !self.has_json_paths() {
            return;
        }
        let Ok(value) = serde_json::from_str::<Value>(text) else {
            return;
        };
        // Only the path rules: the text rules have already looked at the text.
        let paths_only = self.scan_json_at(&value, field);
        findings.extend(
            paths_only
                .into_iter()
                .filter(|finding| self.is_path_rule(&finding.rule)),
        );
    }

    /// Where the rules still match in `event`: each finding's `field` names the field
    /// (`Output.text`, `Message.content[2].arguments`, `CallWire.wire/metadata/id`), its
    /// range the bytes of that field's text. Empty exactly when [`Rules::redact_event`]
    /// would change nothing.
    pub fn scan_event(&self, event: &SessionEvent) -> Vec<Finding> {
        let mut findings = Vec::new();
        let kind = event.kind();
        let field = |name: &str| format!("{kind}.{name}");
        match event {
            SessionEvent::SystemPrompt { text }
            | SessionEvent::Reasoning { text }
            | SessionEvent::Output { text } => {
                findings.extend(self.scan_field(text, &field("text")))
            }
            SessionEvent::CallIncomplete { reason } | SessionEvent::ModelSwap { reason, .. } => {
                findings.extend(self.scan_field(reason, &field("reason")))
            }
            SessionEvent::Message(message) => {
                for (i, block) in message.content.iter().enumerate() {
                    let at = |name: &str| field(&format!("content[{i}].{name}"));
                    match block {
                        MessageContentBlock::Text { text } => {
                            findings.extend(self.scan_field(text, &at("text")))
                        }
                        MessageContentBlock::Thinking { thinking } => {
                            findings.extend(self.scan_field(thinking, &at("thinking")))
                        }
                        MessageContentBlock::ToolResult { content, .. } => {
                            findings.extend(self.scan_field(content, &at("content")))
                        }
                        MessageContentBlock::ToolCall { arguments, .. } => {
                            self.scan_json_text(arguments, &at("arguments"), &mut findings)
                        }
                        MessageContentBlock::ImageBase64 { .. } => {}
                    }
                }
            }
            SessionEvent::ToolCall { arguments, .. } => {
                self.scan_json_text(arguments, &field("arguments"), &mut findings)
            }
            SessionEvent::ToolResult {
                content,
                stdout,
                stderr,
                ..
            } => {
                findings.extend(self.scan_field(content, &field("content")));
                for (name, text) in [("stdout", stdout), ("stderr", stderr)] {
                    if let Some(text) = text {
                        findings.extend(self.scan_field(text, &field(name)));
                    }
                }
            }
            SessionEvent::CallRequest {
                parameters, tools, ..
            } => {
                self.scan_json_text(parameters, &field("parameters"), &mut findings);
                self.scan_json_text(tools, &field("tools"), &mut findings);
            }
            SessionEvent::CallWire { wire, .. } => {
                self.scan_json_text(wire, &field("wire"), &mut findings)
            }
            SessionEvent::WorkspaceSnapshot { skipped, .. } => {
                for (i, text) in skipped.iter().enumerate() {
                    findings.extend(self.scan_field(text, &field(&format!("skipped[{i}]"))));
                }
            }
            SessionEvent::ShellCommand {
                command,
                stdout,
                stderr,
                ..
            } => {
                findings.extend(self.scan_field(command, &field("command")));
                findings.extend(self.scan_field(&stdout.tail, &field("stdout.tail")));
                findings.extend(self.scan_field(&stderr.tail, &field("stderr.tail")));
            }
            // As in `redact_event`: every other kind holds no text (`REDACTED_FIELDS`).
            _ => {}
        }
        findings
    }
}
