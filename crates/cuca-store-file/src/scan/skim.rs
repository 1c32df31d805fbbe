//! A record decoded for checking and counting only: its text borrowed from the frame, so a
//! pass that never looks at the text allocates nothing per record.

use cuca_events::{Message, Role, SessionEvent, TokenDetail};
use serde::Deserialize;

/// A stored record as [`FileBackend::skim_each`](crate::FileBackend::skim_each) hands it
/// over: the session id, the sequence and the timestamp, and the event's shape (its kind and
/// its numbers) without its text.
///
/// It decodes from exactly the bytes a [`cuca_events::SessionRecord`] decodes from, and
/// consumes the same ones: every string is read as a `&str` borrowed from the frame (checked
/// as UTF-8 just as a `String` is), every number and flag as the same type. So a frame is
/// good for a skim exactly when it is good for a load, and the scan's verdict is the same.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SkimmedRecord<'a> {
    /// The session the record belongs to, borrowed from the read buffer.
    pub session_id: &'a str,
    /// The 0-based position in the session.
    pub sequence: u64,
    /// Milliseconds since the Unix epoch when the record was made.
    pub timestamp_ms: u64,
    #[serde(borrow)]
    event: SkimmedEvent<'a>,
}

impl SkimmedRecord<'_> {
    /// The event's variant name, as [`SessionEvent::kind`].
    pub fn kind(&self) -> &'static str {
        SessionEvent::KINDS[self.kind_index()]
    }

    /// The event's index in [`SessionEvent::KINDS`], as [`SessionEvent::kind_index`].
    pub fn kind_index(&self) -> usize {
        self.event.kind_index()
    }

    /// A `RequestDigest` record's digest, the one string [`Self::hollow_event`] leaves in
    /// nothing: a check that two calls were the same request (`cuca verify`) needs it.
    pub fn request_digest(&self) -> Option<&str> {
        match self.event {
            SkimmedEvent::RequestDigest { sha256 } => Some(sha256),
            _ => None,
        }
    }

    /// The event with its text left out: the same variant with the same numbers and flags,
    /// every string empty and a message's content empty. Building it allocates nothing
    /// (an empty `String` or `Vec` holds no memory), so a pass that segments by kind, as
    /// `cuca replay`'s planning pass does, costs no allocation per record.
    pub fn hollow_event(&self) -> SessionEvent {
        match self.event {
            SkimmedEvent::SystemPrompt { .. } => SessionEvent::SystemPrompt {
                text: String::new(),
            },
            SkimmedEvent::Message(ref message) => SessionEvent::Message(Message {
                role: message.role,
                content: Vec::new(),
            }),
            SkimmedEvent::Reasoning { .. } => SessionEvent::Reasoning {
                text: String::new(),
            },
            SkimmedEvent::Output { .. } => SessionEvent::Output {
                text: String::new(),
            },
            SkimmedEvent::ToolCall { .. } => SessionEvent::ToolCall {
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
            },
            SkimmedEvent::ToolResult {
                is_error,
                ref stdout,
                ref stderr,
                exit_code,
                ..
            } => SessionEvent::ToolResult {
                tool_call_id: String::new(),
                content: String::new(),
                is_error,
                stdout: stdout.map(|_| String::new()),
                stderr: stderr.map(|_| String::new()),
                exit_code,
            },
            SkimmedEvent::Latency { duration_ms } => SessionEvent::Latency { duration_ms },
            SkimmedEvent::TokenUsage {
                prompt_tokens,
                completion_tokens,
            } => SessionEvent::TokenUsage {
                prompt_tokens,
                completion_tokens,
            },
            SkimmedEvent::ModelSwap { .. } => SessionEvent::ModelSwap {
                from: String::new(),
                to: String::new(),
                reason: String::new(),
            },
            SkimmedEvent::Fork { .. } => SessionEvent::Fork {
                from_point: String::new(),
                to_session: String::new(),
            },
            SkimmedEvent::CallRequest { messages, .. } => SessionEvent::CallRequest {
                model: String::new(),
                parameters: String::new(),
                tools: String::new(),
                messages,
            },
            SkimmedEvent::CallFinish {
                ref finish_reason, ..
            } => SessionEvent::CallFinish {
                finish_reason: finish_reason.map(|_| String::new()),
                model: String::new(),
            },
            SkimmedEvent::CallIncomplete { .. } => SessionEvent::CallIncomplete {
                reason: String::new(),
            },
            SkimmedEvent::CallWire { .. } => SessionEvent::CallWire {
                format: String::new(),
                wire: String::new(),
            },
            SkimmedEvent::RequestDigest { .. } => SessionEvent::RequestDigest {
                sha256: String::new(),
            },
            SkimmedEvent::TokenDetail(detail) => SessionEvent::TokenDetail(detail),
            SkimmedEvent::Scrubbed { .. } => SessionEvent::Scrubbed {
                replaced: Vec::new(),
            },
            // The change list is left empty with the text: a list of paths is the text.
            SkimmedEvent::WorkspaceSnapshot { .. } => SessionEvent::WorkspaceSnapshot {
                snapshot: String::new(),
                changes: Vec::new(),
                skipped: Vec::new(),
            },
            SkimmedEvent::ShellCommand {
                exit_status,
                duration_ms,
                ref stdout,
                ref stderr,
                ..
            } => SessionEvent::ShellCommand {
                command: String::new(),
                cwd: String::new(),
                origin: String::new(),
                exit_status,
                duration_ms,
                stdout: stdout.hollow(),
                stderr: stderr.hollow(),
            },
        }
    }
}

impl<'a> SkimmedRecord<'a> {
    /// Hands every text the record holds to `visit`, borrowed from the frame, in field order:
    /// the field's name (`text`, `thinking`, `id`, `name`, `arguments`, `tool_call_id`,
    /// `content`, `stdout`, `stderr`, `from`, `to`, `reason`, `from_point`, `to_session`,
    /// `model`, `parameters`, `tools`, `finish_reason`, `format`, `wire`, `sha256`, `rule` (each
    /// of a `Scrubbed` record's rules), `snapshot`, `path`, `skipped`, `command`, `cwd`,
    /// `origin`; an image block's
    /// `media_type` and `data`), the role of the message it is in (`None` outside a
    /// Message), and the text. A reader that searches text (`cuca-search`) reads it so,
    /// allocating nothing per record but a message's block list.
    ///
    /// ```
    /// use cuca_events::{Message, SessionBackend, SessionEvent, SessionRecord};
    /// use cuca_store_file::FileBackend;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let backend = FileBackend::new(dir.path())?;
    /// backend.append(SessionRecord {
    ///     session_id: "demo".into(),
    ///     sequence: 0,
    ///     timestamp_ms: 0,
    ///     event: SessionEvent::Message(Message::user("where is the vault?")),
    /// })?;
    /// let mut texts = Vec::new();
    /// backend.skim_each("demo", &mut |record| {
    ///     record.each_text(|field, role, text| {
    ///         texts.push((field, role.map(|r| r.as_str()), text.to_owned()))
    ///     });
    ///     Ok(())
    /// })?;
    /// assert_eq!(texts, [("text", Some("user"), "where is the vault?".to_owned())]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn each_text(&self, mut visit: impl FnMut(&'static str, Option<Role>, &'a str)) {
        let mut put = |field, text| visit(field, None, text);
        match self.event {
            SkimmedEvent::SystemPrompt { text }
            | SkimmedEvent::Reasoning { text }
            | SkimmedEvent::Output { text } => put("text", text),
            SkimmedEvent::Message(ref message) => {
                let role = Some(message.role);
                for block in &message.content {
                    match *block {
                        SkimmedBlock::Text { text } => visit("text", role, text),
                        SkimmedBlock::Thinking { thinking } => visit("thinking", role, thinking),
                        SkimmedBlock::ToolCall {
                            id,
                            name,
                            arguments,
                        } => {
                            visit("id", role, id);
                            visit("name", role, name);
                            visit("arguments", role, arguments);
                        }
                        SkimmedBlock::ToolResult {
                            tool_call_id,
                            content,
                            ..
                        } => {
                            visit("tool_call_id", role, tool_call_id);
                            visit("content", role, content);
                        }
                        SkimmedBlock::ImageBase64 { media_type, data } => {
                            visit("media_type", role, media_type);
                            visit("data", role, data);
                        }
                    }
                }
            }
            SkimmedEvent::ToolCall {
                id,
                name,
                arguments,
            } => {
                put("id", id);
                put("name", name);
                put("arguments", arguments);
            }
            SkimmedEvent::ToolResult {
                tool_call_id,
                content,
                stdout,
                stderr,
                ..
            } => {
                put("tool_call_id", tool_call_id);
                put("content", content);
                if let Some(stdout) = stdout {
                    put("stdout", stdout);
                }
                if let Some(stderr) = stderr {
                    put("stderr", stderr);
                }
            }
            SkimmedEvent::Latency { .. } | SkimmedEvent::TokenUsage { .. } => {}
            SkimmedEvent::ModelSwap { from, to, reason } => {
                put("from", from);
                put("to", to);
                put("reason", reason);
            }
            SkimmedEvent::Fork {
                from_point,
                to_session,
            } => {
                put("from_point", from_point);
                put("to_session", to_session);
            }
            SkimmedEvent::CallRequest {
                model,
                parameters,
                tools,
                ..
            } => {
                put("model", model);
                put("parameters", parameters);
                put("tools", tools);
            }
            SkimmedEvent::CallFinish {
                finish_reason,
                model,
            } => {
                if let Some(reason) = finish_reason {
                    put("finish_reason", reason);
                }
                put("model", model);
            }
            SkimmedEvent::CallIncomplete { reason } => put("reason", reason),
            SkimmedEvent::CallWire { format, wire } => {
                put("format", format);
                put("wire", wire);
            }
            SkimmedEvent::RequestDigest { sha256 } => put("sha256", sha256),
            SkimmedEvent::TokenDetail(_) => {}
            SkimmedEvent::Scrubbed { ref replaced } => {
                for &(rule, _) in replaced {
                    put("rule", rule);
                }
            }
            SkimmedEvent::WorkspaceSnapshot {
                snapshot,
                ref changes,
                ref skipped,
            } => {
                put("snapshot", snapshot);
                for change in changes {
                    put("path", change.path);
                }
                for text in skipped {
                    put("skipped", text);
                }
            }
            SkimmedEvent::ShellCommand {
                command,
                cwd,
                origin,
                ref stdout,
                ref stderr,
                ..
            } => {
                put("command", command);
                put("cwd", cwd);
                put("origin", origin);
                put("stdout", stdout.tail);
                put("stderr", stderr.tail);
            }
        }
    }
}

/// [`SessionEvent`]'s wire layout with borrowed strings: the same variants in the same order
/// (postcard encodes a variant by its index), each with the same fields in the same order.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
enum SkimmedEvent<'a> {
    SystemPrompt {
        text: &'a str,
    },
    Message(#[serde(borrow)] SkimmedMessage<'a>),
    Reasoning {
        text: &'a str,
    },
    Output {
        text: &'a str,
    },
    ToolCall {
        id: &'a str,
        name: &'a str,
        arguments: &'a str,
    },
    ToolResult {
        tool_call_id: &'a str,
        content: &'a str,
        is_error: bool,
        #[serde(borrow)]
        stdout: Option<&'a str>,
        #[serde(borrow)]
        stderr: Option<&'a str>,
        exit_code: Option<i32>,
    },
    Latency {
        duration_ms: u64,
    },
    TokenUsage {
        prompt_tokens: u64,
        completion_tokens: u64,
    },
    ModelSwap {
        from: &'a str,
        to: &'a str,
        reason: &'a str,
    },
    Fork {
        from_point: &'a str,
        to_session: &'a str,
    },
    CallRequest {
        model: &'a str,
        parameters: &'a str,
        tools: &'a str,
        messages: u64,
    },
    CallFinish {
        #[serde(borrow)]
        finish_reason: Option<&'a str>,
        model: &'a str,
    },
    CallIncomplete {
        reason: &'a str,
    },
    CallWire {
        format: &'a str,
        wire: &'a str,
    },
    RequestDigest {
        sha256: &'a str,
    },
    TokenDetail(TokenDetail),
    Scrubbed {
        #[serde(borrow)]
        replaced: Vec<(&'a str, u64)>,
    },
    WorkspaceSnapshot {
        snapshot: &'a str,
        #[serde(borrow)]
        changes: Vec<SkimmedChange<'a>>,
        #[serde(borrow)]
        skipped: Vec<&'a str>,
    },
    ShellCommand {
        command: &'a str,
        cwd: &'a str,
        origin: &'a str,
        exit_status: Option<i32>,
        duration_ms: u64,
        #[serde(borrow)]
        stdout: SkimmedStream<'a>,
        #[serde(borrow)]
        stderr: SkimmedStream<'a>,
    },
}

/// [`cuca_events::FileChange`]'s wire layout with the path borrowed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
struct SkimmedChange<'a> {
    path: &'a str,
    kind: cuca_events::FileChangeKind,
    added_lines: u64,
    removed_lines: u64,
    binary: bool,
}

/// [`cuca_events::CapturedStream`]'s wire layout with its text borrowed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
struct SkimmedStream<'a> {
    sha256: &'a str,
    bytes: u64,
    tail: &'a str,
    cut: u64,
}

impl SkimmedStream<'_> {
    /// The stream's numbers, its text left out.
    fn hollow(&self) -> cuca_events::CapturedStream {
        cuca_events::CapturedStream {
            sha256: String::new(),
            bytes: self.bytes,
            tail: String::new(),
            cut: self.cut,
        }
    }
}

impl SkimmedEvent<'_> {
    fn kind_index(&self) -> usize {
        match self {
            SkimmedEvent::SystemPrompt { .. } => 0,
            SkimmedEvent::Message(_) => 1,
            SkimmedEvent::Reasoning { .. } => 2,
            SkimmedEvent::Output { .. } => 3,
            SkimmedEvent::ToolCall { .. } => 4,
            SkimmedEvent::ToolResult { .. } => 5,
            SkimmedEvent::Latency { .. } => 6,
            SkimmedEvent::TokenUsage { .. } => 7,
            SkimmedEvent::ModelSwap { .. } => 8,
            SkimmedEvent::Fork { .. } => 9,
            SkimmedEvent::CallRequest { .. } => 10,
            SkimmedEvent::CallFinish { .. } => 11,
            SkimmedEvent::CallIncomplete { .. } => 12,
            SkimmedEvent::CallWire { .. } => 13,
            SkimmedEvent::RequestDigest { .. } => 14,
            SkimmedEvent::TokenDetail(_) => 15,
            SkimmedEvent::Scrubbed { .. } => 16,
            SkimmedEvent::WorkspaceSnapshot { .. } => 17,
            SkimmedEvent::ShellCommand { .. } => 18,
        }
    }
}

/// [`Message`]'s wire layout: the role as it is, the blocks borrowed. The block list is the
/// one allocation a skim makes, and only for Message records, which are few.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
struct SkimmedMessage<'a> {
    role: Role,
    #[serde(borrow)]
    content: Vec<SkimmedBlock<'a>>,
}

/// [`cuca_events::MessageContentBlock`]'s wire layout with borrowed strings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
enum SkimmedBlock<'a> {
    Text {
        text: &'a str,
    },
    Thinking {
        thinking: &'a str,
    },
    ToolCall {
        id: &'a str,
        name: &'a str,
        arguments: &'a str,
    },
    ToolResult {
        tool_call_id: &'a str,
        content: &'a str,
        is_error: bool,
    },
    ImageBase64 {
        media_type: &'a str,
        data: &'a str,
    },
}
