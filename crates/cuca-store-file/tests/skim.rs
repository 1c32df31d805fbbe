//! `SkimmedRecord` and `FileBackend::skim_each`: a record decoded with its text borrowed
//! (so a scan is at least 3× faster than the JSONL reader) must read exactly the bytes
//! a `SessionRecord` reads, so a skimming scan reaches the verdict a loading scan reaches.

#![allow(clippy::unwrap_used)]

use cuca_events::{
    Message, MessageContentBlock, Role, SessionBackend, SessionEvent, SessionRecord,
};
use cuca_store_file::{FileBackend, SkimmedRecord};
use proptest::prelude::*;
use proptest::strategy::ValueTree;

fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "[a-z ]{0,12}", "\\PC{0,8}"]
}

fn arb_block() -> impl Strategy<Value = MessageContentBlock> {
    prop_oneof![
        arb_text().prop_map(|text| MessageContentBlock::Text { text }),
        arb_text().prop_map(|thinking| MessageContentBlock::Thinking { thinking }),
        (arb_text(), arb_text(), arb_text()).prop_map(|(id, name, arguments)| {
            MessageContentBlock::ToolCall {
                id,
                name,
                arguments,
            }
        }),
        (arb_text(), arb_text(), any::<bool>()).prop_map(|(tool_call_id, content, is_error)| {
            MessageContentBlock::ToolResult {
                tool_call_id,
                content,
                is_error,
            }
        }),
        (arb_text(), arb_text())
            .prop_map(|(media_type, data)| MessageContentBlock::ImageBase64 { media_type, data }),
    ]
}

fn arb_event() -> impl Strategy<Value = SessionEvent> {
    let role = prop_oneof![
        Just(Role::System),
        Just(Role::User),
        Just(Role::Assistant),
        Just(Role::Tool)
    ];
    prop_oneof![
        arb_text().prop_map(|text| SessionEvent::SystemPrompt { text }),
        (role, prop::collection::vec(arb_block(), 0..4))
            .prop_map(|(role, content)| SessionEvent::Message(Message { role, content })),
        arb_text().prop_map(|text| SessionEvent::Reasoning { text }),
        arb_text().prop_map(|text| SessionEvent::Output { text }),
        (arb_text(), arb_text(), arb_text()).prop_map(|(id, name, arguments)| {
            SessionEvent::ToolCall {
                id,
                name,
                arguments,
            }
        }),
        (
            arb_text(),
            arb_text(),
            any::<bool>(),
            proptest::option::of(arb_text()),
            proptest::option::of(arb_text()),
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
        (arb_text(), arb_text(), arb_text())
            .prop_map(|(from, to, reason)| SessionEvent::ModelSwap { from, to, reason }),
        (arb_text(), arb_text()).prop_map(|(from_point, to_session)| SessionEvent::Fork {
            from_point,
            to_session
        }),
        (arb_text(), arb_text(), arb_text(), any::<u64>()).prop_map(
            |(model, parameters, tools, messages)| SessionEvent::CallRequest {
                model,
                parameters,
                tools,
                messages,
            }
        ),
        (proptest::option::of(arb_text()), arb_text()).prop_map(|(finish_reason, model)| {
            SessionEvent::CallFinish {
                finish_reason,
                model,
            }
        }),
        arb_text().prop_map(|reason| SessionEvent::CallIncomplete { reason }),
        (arb_text(), arb_text()).prop_map(|(format, wire)| SessionEvent::CallWire { format, wire }),
        arb_text().prop_map(|sha256| SessionEvent::RequestDigest { sha256 }),
        (
            arb_text(),
            proptest::collection::vec((arb_text(), any::<u64>(), any::<bool>()), 0..3),
            proptest::collection::vec(arb_text(), 0..3)
        )
            .prop_map(
                |(snapshot, changes, skipped)| SessionEvent::WorkspaceSnapshot {
                    snapshot,
                    changes: changes
                        .into_iter()
                        .map(|(path, lines, binary)| cuca_events::FileChange {
                            path,
                            kind: cuca_events::FileChangeKind::Modified,
                            added_lines: lines,
                            removed_lines: lines / 2,
                            binary,
                        })
                        .collect(),
                    skipped,
                }
            ),
        (
            (arb_text(), arb_text(), arb_text()),
            any::<Option<i32>>(),
            any::<u64>(),
            (arb_text(), any::<u64>(), arb_text())
        )
            .prop_map(
                |((command, cwd, origin), exit_status, duration_ms, (tail, bytes, sha256))| {
                    let stream = cuca_events::CapturedStream {
                        sha256,
                        bytes,
                        tail,
                        cut: bytes / 2,
                    };
                    SessionEvent::ShellCommand {
                        command,
                        cwd,
                        origin,
                        exit_status,
                        duration_ms,
                        stdout: stream.clone(),
                        stderr: stream,
                    }
                }
            ),
    ]
}

fn arb_record() -> impl Strategy<Value = SessionRecord> {
    (arb_text(), any::<u64>(), any::<u64>(), arb_event()).prop_map(
        |(session_id, sequence, timestamp_ms, event)| SessionRecord {
            session_id,
            sequence,
            timestamp_ms,
            event,
        },
    )
}

/// The event with every string emptied: what `hollow_event` must give back.
fn hollowed(event: &SessionEvent) -> SessionEvent {
    let mut event = event.clone();
    match &mut event {
        SessionEvent::SystemPrompt { text }
        | SessionEvent::Reasoning { text }
        | SessionEvent::Output { text } => text.clear(),
        SessionEvent::Message(message) => message.content.clear(),
        SessionEvent::ToolCall {
            id,
            name,
            arguments,
        } => [id, name, arguments].into_iter().for_each(String::clear),
        SessionEvent::ToolResult {
            tool_call_id,
            content,
            stdout,
            stderr,
            ..
        } => {
            tool_call_id.clear();
            content.clear();
            stdout
                .iter_mut()
                .chain(stderr.iter_mut())
                .for_each(String::clear);
        }
        SessionEvent::ModelSwap { from, to, reason } => {
            [from, to, reason].into_iter().for_each(String::clear);
        }
        SessionEvent::Fork {
            from_point,
            to_session,
        } => [from_point, to_session].into_iter().for_each(String::clear),
        SessionEvent::CallRequest {
            model,
            parameters,
            tools,
            ..
        } => [model, parameters, tools]
            .into_iter()
            .for_each(String::clear),
        SessionEvent::CallFinish {
            finish_reason,
            model,
        } => {
            finish_reason.iter_mut().for_each(String::clear);
            model.clear();
        }
        SessionEvent::CallIncomplete { reason } => reason.clear(),
        SessionEvent::CallWire { format, wire } => {
            format.clear();
            wire.clear();
        }
        SessionEvent::RequestDigest { sha256 } => sha256.clear(),
        SessionEvent::WorkspaceSnapshot {
            snapshot,
            changes,
            skipped,
        } => {
            snapshot.clear();
            changes.clear();
            skipped.clear();
        }
        SessionEvent::ShellCommand {
            command,
            cwd,
            origin,
            stdout,
            stderr,
            ..
        } => {
            [command, cwd, origin].into_iter().for_each(String::clear);
            for stream in [stdout, stderr] {
                stream.sha256.clear();
                stream.tail.clear();
            }
        }
        _ => {}
    }
    event
}

/// What a decode of `bytes` as `T` concludes: the bytes it left over, or that it failed
/// (with postcard's message, which a skipped frame's reason carries).
fn decoded<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8]) -> Result<(T, usize), String> {
    postcard::take_from_bytes::<T>(bytes)
        .map(|(value, rest)| (value, rest.len()))
        .map_err(|error| error.to_string())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any stored record's bytes decode as a skimmed record that consumes every byte and
    /// carries the same id, sequence, timestamp, kind and numbers.
    #[test]
    fn a_skimmed_record_reads_exactly_a_stored_records_bytes(record in arb_record()) {
        let bytes = postcard::to_allocvec(&record).unwrap();
        let (skimmed, rest) = decoded::<SkimmedRecord<'_>>(&bytes).unwrap();
        prop_assert_eq!(rest, 0);
        prop_assert_eq!(skimmed.session_id, record.session_id.as_str());
        prop_assert_eq!(skimmed.sequence, record.sequence);
        prop_assert_eq!(skimmed.timestamp_ms, record.timestamp_ms);
        prop_assert_eq!(skimmed.kind(), record.event.kind());
        prop_assert_eq!(skimmed.hollow_event(), hollowed(&record.event));
    }

    /// Whatever bytes a frame holds (a stored record's bytes with one byte changed, or cut
    /// short, or lengthened), the skimmed decode accepts them exactly when the owned decode
    /// does, leaves the same bytes over, and fails with the same message: the strict
    /// decoding rule and the skipped frames' reasons do not depend on which one a scan uses.
    #[test]
    fn a_skimmed_record_rejects_what_a_stored_record_rejects(
        record in arb_record(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        edit in 0u8..3,
    ) {
        let mut bytes = postcard::to_allocvec(&record).unwrap();
        let i = at.index(bytes.len());
        match edit {
            0 => bytes[i] = byte,
            1 => bytes.truncate(i),
            _ => bytes.insert(i, byte),
        }
        let owned = decoded::<SessionRecord>(&bytes).map(|(_, rest)| rest);
        let skimmed = decoded::<SkimmedRecord<'_>>(&bytes).map(|(_, rest)| rest);
        prop_assert_eq!(skimmed, owned);
    }
}

/// A session of every kind of event skims to the summary `verify_each` gives, live and
/// compacted, with the records' sequences and kinds in order.
#[test]
fn skim_each_summarizes_as_verify_each_does() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let events: Vec<SessionEvent> = (0..40)
        .map(|_| arb_event().new_tree(&mut runner).unwrap().current())
        .collect();
    for (sequence, event) in events.iter().enumerate() {
        backend
            .append(SessionRecord {
                session_id: "s".into(),
                sequence: sequence as u64,
                timestamp_ms: 5,
                event: event.clone(),
            })
            .unwrap();
    }
    for compacted in [false, true] {
        if compacted {
            backend.compact("s").unwrap();
        }
        let mut skimmed = Vec::new();
        let skim = backend
            .skim_each("s", &mut |record| {
                skimmed.push((record.sequence, record.kind()));
                Ok(())
            })
            .unwrap();
        let mut owned = Vec::new();
        let verify = backend
            .verify_each("s", &mut |record| {
                owned.push((record.sequence, record.event.kind()));
                Ok(())
            })
            .unwrap();
        assert_eq!(skim, verify);
        assert_eq!(skim.n_records, 40);
        assert_eq!(skimmed, owned);
    }
}
