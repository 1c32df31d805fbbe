//! Failures keep their session outside the session page: `cuca logs --failed` has a session
//! column and names runs by their sessions; `cuca sessions` has error, duration and model
//! columns, says integrity as such, and writes its numbers with thousands separators.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::cuca;
use cuca::{FileBackend, SessionBackend, SessionEvent, SessionRecord};

/// A call log as a proxy writes it: run `1a2b3c4d` recorded two calls for session `agent`
/// (one refused, its upstream down), and a client's call with no session failed with a 500.
fn call_log(path: &Path) {
    let rows = [
        r#"{"ts":"2026-12-02T10:00:00.000Z","id":"c1","run":"1a2b3c4d","phase":"start","tag":"proxy","node":"agent"}"#,
        r#"{"ts":"2026-12-02T10:00:01.000Z","id":"c1","run":"1a2b3c4d","tag":"proxy","node":"agent","status":200,"ms":900,"prompt_tokens":1234567,"completion_tokens":2048}"#,
        r#"{"ts":"2026-12-02T10:00:02.000Z","id":"c2","run":"1a2b3c4d","phase":"start","tag":"proxy","node":"agent"}"#,
        r#"{"ts":"2026-12-02T10:00:02.004Z","id":"c2","run":"1a2b3c4d","tag":"proxy","node":"agent","ms":4,"error":"the upstream did not answer: Connection refused"}"#,
        r#"{"ts":"2026-12-02T10:00:03.000Z","id":"c3","run":"cafe0001","phase":"start","tag":"turn"}"#,
        r#"{"ts":"2026-12-02T10:00:03.500Z","id":"c3","run":"cafe0001","tag":"turn","status":500,"error":"boom"}"#,
    ];
    std::fs::write(path, rows.join("\n") + "\n").unwrap();
}

fn stdout_of(command: &mut assert_cmd::Command) -> String {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn failed_calls_name_their_session_and_runs_are_named_by_their_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("calls.jsonl");
    call_log(&file);
    let failed = stdout_of(cuca().args(["logs", "--file", file.to_str().unwrap(), "--failed"]));
    let lines: Vec<&str> = failed.lines().collect();
    assert_eq!(lines.len(), 2, "{failed}");
    assert!(
        lines[0].starts_with("2026-12-02T10:00:02.004Z  session agent  id=c2")
            && lines[0].ends_with("  no response"),
        "{failed}"
    );
    assert!(
        lines[1].starts_with("2026-12-02T10:00:03.500Z  session -      id=c3")
            && lines[1].contains("status=500"),
        "{failed}"
    );
    let summary = stdout_of(cuca().args(["logs", "--file", file.to_str().unwrap()]));
    assert!(
        summary.contains(
            "  agent (run 1a2b3c4d): 2 calls, 1,234,567 prompt + 2,048 completion tokens, 1 failed"
        ),
        "{summary}"
    );
    assert!(summary.contains("  cafe0001: 1 call,"), "{summary}");
    assert!(
        summary.contains("failures by status: no response 1, 500 1"),
        "{summary}"
    );
}

#[test]
fn sessions_has_error_duration_and_model_columns_and_says_integrity() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let events = [
        SessionEvent::CallRequest {
            model: "qwen2.5-7b".into(),
            parameters: "{}".into(),
            tools: "[]".into(),
            messages: 1,
        },
        SessionEvent::Output {
            text: "the vault is in Lisbon ".repeat(60),
        },
        SessionEvent::CallIncomplete {
            reason: "the upstream cut the stream".into(),
        },
        SessionEvent::CallFinish {
            finish_reason: None,
            model: "qwen2.5-7b".into(),
        },
        SessionEvent::Latency { duration_ms: 5 },
        SessionEvent::TokenUsage {
            prompt_tokens: 1,
            completion_tokens: 1,
        },
    ];
    for (sequence, event) in events.into_iter().enumerate() {
        backend
            .append(SessionRecord {
                session_id: "agent".into(),
                sequence: sequence as u64,
                // 66 minutes and 34 seconds from the first record to the last.
                timestamp_ms: 1_700_000_000_000 + sequence as u64 * 798_800,
                event,
            })
            .unwrap();
    }
    drop(backend);
    let calls = dir.path().join("calls.jsonl");
    call_log(&calls);
    let listed = stdout_of(
        cuca()
            .args(["sessions", dir.path().to_str().unwrap()])
            .env("CUCA_CALL_LOG", &calls),
    );
    let lines: Vec<&str> = listed.lines().collect();
    let header = lines[0];
    for column in ["DURATION", "MODEL", "ERRORS", "INTEGRITY"] {
        assert!(header.contains(column), "{listed}");
    }
    assert!(!header.contains("STATUS"), "{listed}");
    let row = lines[1];
    let cell = |column: &str| {
        let at = header.find(column).unwrap();
        row[at..].split("  ").next().unwrap().trim().to_owned()
    };
    assert_eq!(cell("DURATION"), "1h 6m", "{listed}");
    assert_eq!(cell("MODEL"), "qwen2.5-7b", "{listed}");
    // The CallIncomplete record and the call log's refused call; then the cost (a model
    // the price table does not know) and the integrity.
    assert!(row.contains("  2  unknown  clean"), "{listed}");
    // The file is over a thousand bytes: written 1,xxx.
    let bytes = std::fs::metadata(dir.path().join("agent.cslog"))
        .unwrap()
        .len();
    assert!(bytes >= 1_000);
    let written = format!("{},{:03}", bytes / 1_000, bytes % 1_000);
    assert!(row.contains(&written), "{written} in {listed}");

    let json = stdout_of(
        cuca()
            .args(["sessions", dir.path().to_str().unwrap(), "--json"])
            .env("CUCA_CALL_LOG", &calls),
    );
    let value: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(value["errors"], 2);
    assert_eq!(value["models"][0], "qwen2.5-7b");
    assert_eq!(value["duration_ms"], 3_994_000);
    assert_eq!(value["integrity"], "clean");
}
