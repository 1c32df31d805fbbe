//! Serde round-trips of every `SessionEvent` variant through postcard and JSON, and point ids.

use cuca_events::{
    parse_point_id, CapturedStream, FileChange, FileChangeKind, Message, MessageContentBlock,
    ReplayedRecord, Role, SessionEvent, SessionRecord, TokenDetail,
};
use proptest::prelude::*;

fn role() -> impl Strategy<Value = Role> {
    prop_oneof![
        Just(Role::System),
        Just(Role::User),
        Just(Role::Assistant),
        Just(Role::Tool)
    ]
}

fn block() -> impl Strategy<Value = MessageContentBlock> {
    prop_oneof![
        any::<String>().prop_map(|text| MessageContentBlock::Text { text }),
        any::<String>().prop_map(|thinking| MessageContentBlock::Thinking { thinking }),
        (any::<String>(), any::<String>(), any::<String>()).prop_map(|(id, name, arguments)| {
            MessageContentBlock::ToolCall {
                id,
                name,
                arguments,
            }
        }),
        (any::<String>(), any::<String>(), any::<bool>()).prop_map(
            |(tool_call_id, content, is_error)| MessageContentBlock::ToolResult {
                tool_call_id,
                content,
                is_error
            }
        ),
        (any::<String>(), any::<String>())
            .prop_map(|(media_type, data)| MessageContentBlock::ImageBase64 { media_type, data }),
    ]
}

/// Every variant of `SessionEvent`; the `match` in `kind_index` keeps this list honest.
pub fn event() -> impl Strategy<Value = SessionEvent> {
    prop_oneof![
        any::<String>().prop_map(|text| SessionEvent::SystemPrompt { text }),
        (role(), proptest::collection::vec(block(), 0..4))
            .prop_map(|(role, content)| SessionEvent::Message(Message { role, content })),
        any::<String>().prop_map(|text| SessionEvent::Reasoning { text }),
        any::<String>().prop_map(|text| SessionEvent::Output { text }),
        (any::<String>(), any::<String>(), any::<String>()).prop_map(|(id, name, arguments)| {
            SessionEvent::ToolCall {
                id,
                name,
                arguments,
            }
        }),
        (
            any::<String>(),
            any::<String>(),
            any::<bool>(),
            any::<Option<String>>(),
            any::<Option<String>>(),
            any::<Option<i32>>()
        )
            .prop_map(
                |(tool_call_id, content, is_error, stdout, stderr, exit_code)| {
                    SessionEvent::ToolResult {
                        tool_call_id,
                        content,
                        is_error,
                        stdout,
                        stderr,
                        exit_code,
                    }
                }
            ),
        any::<u64>().prop_map(|duration_ms| SessionEvent::Latency { duration_ms }),
        (any::<u64>(), any::<u64>()).prop_map(|(prompt_tokens, completion_tokens)| {
            SessionEvent::TokenUsage {
                prompt_tokens,
                completion_tokens,
            }
        }),
        (any::<String>(), any::<String>(), any::<String>())
            .prop_map(|(from, to, reason)| SessionEvent::ModelSwap { from, to, reason }),
        (any::<String>(), any::<String>()).prop_map(|(from_point, to_session)| {
            SessionEvent::Fork {
                from_point,
                to_session,
            }
        }),
        (
            any::<String>(),
            any::<String>(),
            any::<String>(),
            any::<u64>()
        )
            .prop_map(
                |(model, parameters, tools, messages)| SessionEvent::CallRequest {
                    model,
                    parameters,
                    tools,
                    messages,
                }
            ),
        (any::<Option<String>>(), any::<String>()).prop_map(|(finish_reason, model)| {
            SessionEvent::CallFinish {
                finish_reason,
                model,
            }
        }),
        any::<String>().prop_map(|reason| SessionEvent::CallIncomplete { reason }),
        (any::<String>(), any::<String>())
            .prop_map(|(format, wire)| SessionEvent::CallWire { format, wire }),
        any::<String>().prop_map(|sha256| SessionEvent::RequestDigest { sha256 }),
        (
            any::<String>(),
            proptest::collection::vec(file_change(), 0..4),
            proptest::collection::vec(any::<String>(), 0..3)
        )
            .prop_map(|(snapshot, changes, skipped)| {
                SessionEvent::WorkspaceSnapshot {
                    snapshot,
                    changes,
                    skipped,
                }
            }),
        (
            (any::<String>(), any::<String>(), any::<String>()),
            any::<Option<i32>>(),
            any::<u64>(),
            captured(),
            captured()
        )
            .prop_map(
                |((command, cwd, origin), exit_status, duration_ms, stdout, stderr)| {
                    SessionEvent::ShellCommand {
                        command,
                        cwd,
                        origin,
                        exit_status,
                        duration_ms,
                        stdout,
                        stderr,
                    }
                }
            ),
    ]
}

fn file_change() -> impl Strategy<Value = FileChange> {
    (
        any::<String>(),
        prop_oneof![
            Just(FileChangeKind::Added),
            Just(FileChangeKind::Modified),
            Just(FileChangeKind::Deleted)
        ],
        any::<u64>(),
        any::<u64>(),
        any::<bool>(),
    )
        .prop_map(
            |(path, kind, added_lines, removed_lines, binary)| FileChange {
                path,
                kind,
                added_lines,
                removed_lines,
                binary,
            },
        )
}

fn captured() -> impl Strategy<Value = CapturedStream> {
    (any::<String>(), any::<u64>(), any::<String>(), any::<u64>()).prop_map(
        |(sha256, bytes, tail, cut)| CapturedStream {
            sha256,
            bytes,
            tail,
            cut,
        },
    )
}

fn record() -> impl Strategy<Value = SessionRecord> {
    (any::<String>(), any::<u64>(), any::<u64>(), event()).prop_map(
        |(session_id, sequence, timestamp_ms, event)| SessionRecord {
            session_id,
            sequence,
            timestamp_ms,
            event,
        },
    )
}

proptest! {
    #[test]
    fn postcard_round_trips_every_record(record in record()) {
        let bytes = postcard::to_stdvec(&record).unwrap();
        let back: SessionRecord = postcard::from_bytes(&bytes).unwrap();
        prop_assert_eq!(back, record);
    }

    /// `ReplayedRecord` has `SessionRecord`'s wire layout: every record's postcard bytes decode
    /// as the borrowed type to equal fields, with the session id borrowed from the bytes, no
    /// byte left over, and the borrowed type encodes to the same bytes.
    #[test]
    fn postcard_bytes_of_every_record_decode_as_a_replayed_record(record in record()) {
        let bytes = postcard::to_stdvec(&record).unwrap();
        let (replayed, rest) = postcard::take_from_bytes::<ReplayedRecord<'_>>(&bytes).unwrap();
        prop_assert!(rest.is_empty());
        let range = bytes.as_ptr_range();
        prop_assert!(replayed.session_id.is_empty() || range.contains(&replayed.session_id.as_ptr()));
        prop_assert_eq!(replayed.session_id, record.session_id.as_str());
        prop_assert_eq!(replayed.sequence, record.sequence);
        prop_assert_eq!(replayed.timestamp_ms, record.timestamp_ms);
        prop_assert_eq!(&replayed.event, &record.event);
        prop_assert_eq!(&postcard::to_stdvec(&replayed).unwrap(), &bytes);
        prop_assert_eq!(replayed.point_id(), record.point_id());
        prop_assert_eq!(replayed.into_owned(), record);
    }

    #[test]
    fn json_round_trips_every_record(record in record()) {
        let text = serde_json::to_string(&record).unwrap();
        let back: SessionRecord = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(back, record);
    }

    /// "SessionRecord::point_id() returns "{session_id}:{sequence}"" — for any session id,
    /// including one that itself contains ':'.
    #[test]
    fn point_id_is_session_colon_sequence(session_id in "[a-z:]{1,12}", sequence in any::<u64>()) {
        let record = SessionRecord {
            session_id: session_id.clone(),
            sequence,
            timestamp_ms: 0,
            event: SessionEvent::Latency { duration_ms: 1 },
        };
        let point = record.point_id();
        prop_assert_eq!(&point, &format!("{session_id}:{sequence}"));
        prop_assert_eq!(parse_point_id(&point).unwrap(), (session_id.as_str(), sequence));
    }
}

#[test]
fn point_id_of_a_fork_session_splits_at_the_last_colon() {
    let record = SessionRecord {
        session_id: "demo:fork:demo:1:0".into(),
        sequence: 7,
        timestamp_ms: 0,
        event: SessionEvent::Output { text: "x".into() },
    };
    assert_eq!(record.point_id(), "demo:fork:demo:1:0:7");
    assert_eq!(
        parse_point_id(&record.point_id()).unwrap(),
        ("demo:fork:demo:1:0", 7)
    );
}

/// Variant order is part of the `.cslog` format: postcard writes the variant index first.
#[test]
fn postcard_variant_indices_are_pinned() {
    let samples = [
        SessionEvent::SystemPrompt {
            text: String::new(),
        },
        SessionEvent::Message(Message {
            role: Role::User,
            content: vec![],
        }),
        SessionEvent::Reasoning {
            text: String::new(),
        },
        SessionEvent::Output {
            text: String::new(),
        },
        SessionEvent::ToolCall {
            id: String::new(),
            name: String::new(),
            arguments: String::new(),
        },
        SessionEvent::ToolResult {
            tool_call_id: String::new(),
            content: String::new(),
            is_error: false,
            stdout: None,
            stderr: None,
            exit_code: None,
        },
        SessionEvent::Latency { duration_ms: 0 },
        SessionEvent::TokenUsage {
            prompt_tokens: 0,
            completion_tokens: 0,
        },
        SessionEvent::ModelSwap {
            from: String::new(),
            to: String::new(),
            reason: String::new(),
        },
        SessionEvent::Fork {
            from_point: String::new(),
            to_session: String::new(),
        },
        SessionEvent::CallRequest {
            model: String::new(),
            parameters: String::new(),
            tools: String::new(),
            messages: 0,
        },
        SessionEvent::CallFinish {
            finish_reason: None,
            model: String::new(),
        },
        SessionEvent::CallIncomplete {
            reason: String::new(),
        },
        SessionEvent::CallWire {
            format: String::new(),
            wire: String::new(),
        },
        SessionEvent::RequestDigest {
            sha256: String::new(),
        },
        SessionEvent::TokenDetail(TokenDetail::default()),
        SessionEvent::Scrubbed {
            replaced: Vec::new(),
        },
        SessionEvent::WorkspaceSnapshot {
            snapshot: String::new(),
            changes: vec![],
            skipped: vec![],
        },
        SessionEvent::ShellCommand {
            command: String::new(),
            cwd: String::new(),
            origin: String::new(),
            exit_status: None,
            duration_ms: 0,
            stdout: CapturedStream::default(),
            stderr: CapturedStream::default(),
        },
    ];
    assert_eq!(samples.len(), SessionEvent::KINDS.len());
    for (index, event) in samples.iter().enumerate() {
        let bytes = postcard::to_stdvec(event).unwrap();
        assert_eq!(bytes[0] as usize, index, "{} moved", event.kind());
        assert_eq!(event.kind_index(), index);
        assert_eq!(SessionEvent::KINDS[index], event.kind());
    }
}

#[test]
fn malformed_point_ids_are_validation_errors() {
    for bad in [
        "", "demo", ":3", "demo:x", "demo:-1", "demo:01", "demo:+1", "demo: 1", "demo:",
    ] {
        match parse_point_id(bad) {
            Err(cuca_events::PluginError::Validation { schema, .. }) => {
                assert_eq!(schema, "point_id")
            }
            other => panic!("{bad:?} gave {other:?}"),
        }
    }
}
