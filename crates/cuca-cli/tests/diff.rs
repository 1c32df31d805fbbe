//! `cuca diff DIR A B` (text and `--json`) through the real binary: the common prefix, the
//! first divergent record, then both tails side by side (messages, tool calls and results,
//! output, tokens, latency).

#![allow(clippy::unwrap_used)]

mod common;

use common::cuca;
use cuca::{FileBackend, SessionBackend, SessionEvent, SessionRecord};

fn append(backend: &FileBackend, session: &str, from: u64, events: Vec<SessionEvent>) {
    for (i, event) in events.into_iter().enumerate() {
        backend
            .append(SessionRecord {
                session_id: session.into(),
                sequence: from + i as u64,
                timestamp_ms: 1_000 + i as u64,
                event,
            })
            .unwrap();
    }
}

fn tail(result: &str, answer: &str, tokens: u64) -> Vec<SessionEvent> {
    vec![
        SessionEvent::ToolResult {
            tool_call_id: "call_7".into(),
            content: result.into(),
            is_error: false,
            stdout: None,
            stderr: None,
            exit_code: None,
        },
        SessionEvent::Output {
            text: answer.into(),
        },
        SessionEvent::Latency { duration_ms: 5 },
        SessionEvent::TokenUsage {
            prompt_tokens: 10,
            completion_tokens: tokens,
        },
    ]
}

#[test]
fn diff_shows_the_shared_records_the_first_difference_and_both_tails() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let prefix = vec![
        SessionEvent::SystemPrompt {
            text: "Use the tool.".into(),
        },
        SessionEvent::ToolCall {
            id: "call_7".into(),
            name: "lookup".into(),
            arguments: "{}".into(),
        },
        SessionEvent::Latency { duration_ms: 3 },
        SessionEvent::TokenUsage {
            prompt_tokens: 5,
            completion_tokens: 1,
        },
    ];
    append(&backend, "run", 0, prefix);
    let fork = backend.fork("run", "run:3").unwrap();
    // The fork's audit record took sequence 4 of the parent.
    append(
        &backend,
        "run",
        5,
        tail("ALPHA", "The tool returned: ALPHA", 7),
    );
    let n = backend.replay(&fork).unwrap().len() as u64;
    append(
        &backend,
        &fork,
        n,
        tail("BETA", "The tool returned: BETA", 9),
    );

    let output = cuca()
        .args(["diff", dir.path().to_str().unwrap(), "run", &fork])
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(text.contains("share their first 4 records"), "{text}");
    assert!(
        text.contains("first difference: run:5 ToolResult"),
        "{text}"
    );
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("ToolResult") && l.contains(" | "))
        .collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert!(
        rows[0].contains("ALPHA") && rows[0].contains("BETA"),
        "{text}"
    );
    assert!(
        text.contains("10 prompt / 7 completion tokens, 5 ms"),
        "{text}"
    );

    let output = cuca()
        .args(["diff", dir.path().to_str().unwrap(), "run", &fork, "--json"])
        .output()
        .unwrap();
    let lines: Vec<serde_json::Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["common"], 4);
    assert_eq!(lines[1]["a"]["event"]["ToolResult"]["content"], "ALPHA");
    assert_eq!(lines[1]["b"]["event"]["ToolResult"]["content"], "BETA");
    assert_eq!(lines.last().unwrap()["b_tail"]["completion_tokens"], 9);

    let missing = cuca()
        .args(["diff", dir.path().to_str().unwrap(), "run", "nope"])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("\"nope\""));
}
