//! `cuca replay` shows a tool loop whole: the tool calls an assistant message carries (name,
//! id, arguments), the tool results a request sends back (content, error flag), and a failed
//! tool's exit status and stderr where its record holds them.

#![allow(clippy::unwrap_used)]

mod common;

use common::cuca;
use cuca::{
    FileBackend, Message, MessageContentBlock, Role, SessionBackend, SessionEvent, SessionRecord,
};

fn append(backend: &FileBackend, session: &str, events: Vec<SessionEvent>) {
    for (sequence, event) in events.into_iter().enumerate() {
        backend
            .append(SessionRecord {
                session_id: session.into(),
                sequence: sequence as u64,
                timestamp_ms: 1_700_000_000_000 + sequence as u64,
                event,
            })
            .unwrap();
    }
}

/// A proxy-recorded tool loop: the second call's request holds the assistant's tool call and
/// the tool's failed result as messages; the model then calls the tool again, and the agent's
/// recorder writes the result as a record with its exit status and stderr.
fn tool_loop() -> Vec<SessionEvent> {
    vec![
        SessionEvent::Message(Message::user("Build the crate.")),
        SessionEvent::Message(Message {
            role: Role::Assistant,
            content: vec![
                MessageContentBlock::text("Building."),
                MessageContentBlock::ToolCall {
                    id: "call_1".into(),
                    name: "shell".into(),
                    arguments: r#"{"cmd":"cargo build"}"#.into(),
                },
            ],
        }),
        SessionEvent::Message(Message {
            role: Role::Tool,
            content: vec![MessageContentBlock::ToolResult {
                tool_call_id: "call_1".into(),
                content: "error[E0425]: cannot find value `x`".into(),
                is_error: true,
            }],
        }),
        SessionEvent::ToolCall {
            id: "call_2".into(),
            name: "shell".into(),
            arguments: r#"{"cmd":"cargo test"}"#.into(),
        },
        SessionEvent::ToolResult {
            tool_call_id: "call_2".into(),
            content: "tests failed".into(),
            is_error: true,
            stdout: None,
            stderr: Some("thread 'main' panicked at src/lib.rs:3".into()),
            exit_code: Some(101),
        },
        SessionEvent::Latency { duration_ms: 40 },
        SessionEvent::TokenUsage {
            prompt_tokens: 30,
            completion_tokens: 5,
        },
    ]
}

#[test]
fn replay_prints_tool_calls_and_results_with_their_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    append(&backend, "agent", tool_loop());
    drop(backend);
    let output = cuca()
        .args(["replay", dir.path().to_str().unwrap(), "agent"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8(output.stdout).unwrap();
    for needle in [
        "  assistant: Building.\n    tool call: shell (call_1) {\"cmd\":\"cargo build\"}\n",
        "  tool: tool result: call_1 error: error[E0425]: cannot find value `x`\n",
        "  tool call: shell (call_2) {\"cmd\":\"cargo test\"}\n",
        "  tool result: call_2 error, exit status 101: tests failed\n    stderr: thread 'main' panicked at src/lib.rs:3\n",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in:\n{stdout}");
    }
    // No message prints as a bare role.
    assert!(
        !stdout.lines().any(|l| l.trim_end().ends_with(':')),
        "{stdout}"
    );
}

#[test]
fn one_turn_replay_shows_the_same_tool_lines() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    append(&backend, "agent", tool_loop());
    drop(backend);
    let output = cuca()
        .args([
            "replay",
            dir.path().to_str().unwrap(),
            "agent",
            "--turn",
            "1",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        stdout.contains("  tool: tool result: call_1 error: error[E0425]"),
        "{stdout}"
    );
    assert!(
        stdout.contains(", exit status 101: tests failed"),
        "{stdout}"
    );
}
