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

/// A fork whose tail streams its answer token by token, as the parent's does, the two answers
/// differing only past the 50th character.
fn streamed_fork(dir: &std::path::Path) -> String {
    let backend = FileBackend::new(dir).unwrap();
    append(
        &backend,
        "run",
        0,
        vec![SessionEvent::SystemPrompt {
            text: "Answer at length.".into(),
        }],
    );
    let fork = backend.fork("run", "run:0").unwrap();
    let answer = |last: &str| {
        let text = format!("The vault is in the old town of Lisbon, behind the {last} door.");
        let mut events: Vec<SessionEvent> = text
            .split_inclusive(' ')
            .map(|token| SessionEvent::Output {
                text: token.to_owned(),
            })
            .collect();
        events.push(SessionEvent::Latency { duration_ms: 5 });
        events.push(SessionEvent::TokenUsage {
            prompt_tokens: 10,
            completion_tokens: 13,
        });
        events
    };
    append(&backend, "run", 2, answer("green"));
    append(&backend, &fork, 1, answer("yellow"));
    fork
}

#[test]
fn diff_joins_streamed_blocks_and_fills_the_terminal_width() {
    let dir = tempfile::tempdir().unwrap();
    let fork = streamed_fork(dir.path());
    let output = cuca()
        .args(["diff", dir.path().to_str().unwrap(), "run", &fork])
        .env("COLUMNS", "200")
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{text}");
    // The 13 Output records of each answer are one row, from the answer's start (the shared
    // tokens included), the whole difference in view.
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("Output") && l.contains(" | "))
        .collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert!(rows[0].contains("Output ×13"), "{text}");
    assert!(rows[0].contains("\"The vault is in"), "{text}");
    assert!(
        rows[0].contains("behind the green door.") && rows[0].contains("behind the yellow door."),
        "{text}"
    );
    let table = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.contains(" | "))
            .map(str::to_owned)
            .collect()
    };
    assert!(
        table(&text).iter().all(|l| l.chars().count() <= 200),
        "{text}"
    );
    // Piped: no colour, whatever the rows.
    assert!(!text.contains('\u{1b}'), "{text:?}");

    // A narrow terminal clips each side to its half.
    let narrow = cuca()
        .args(["diff", dir.path().to_str().unwrap(), "run", &fork])
        .env("COLUMNS", "60")
        .output()
        .unwrap();
    let narrow = String::from_utf8(narrow.stdout).unwrap();
    assert!(
        table(&narrow).iter().all(|l| l.chars().count() <= 60),
        "{narrow}"
    );
    assert!(narrow.contains('…'), "{narrow}");
}

#[test]
fn diff_dims_equal_rows_on_a_colour_terminal_only() {
    let dir = tempfile::tempdir().unwrap();
    let fork = streamed_fork(dir.path());
    let command = format!(
        "{} diff {} run {fork}",
        assert_cmd::cargo::cargo_bin("cuca").display(),
        dir.path().display()
    );
    let on_a_terminal = |no_color: &str| {
        std::process::Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .env("NO_COLOR", no_color)
            .env("PAGER", "")
            .env("COLUMNS", "160")
            .env("TERM", "xterm")
            .output()
    };
    let Ok(shown) = on_a_terminal("") else {
        eprintln!("skipping: script(1) cannot run; it makes the terminal");
        return;
    };
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    // The Latency rows are equal (5 ms each side): dimmed; the answers differ: not.
    let latency = shown.lines().find(|l| l.contains("Latency")).unwrap();
    assert!(latency.starts_with("\u{1b}[2m"), "{shown:?}");
    let answer = shown
        .lines()
        .find(|l| l.contains("Output") && l.contains(" | "))
        .unwrap();
    assert!(!answer.contains("\u{1b}[2m"), "{shown:?}");
    let plain = on_a_terminal("1").unwrap();
    assert!(
        !String::from_utf8_lossy(&plain.stdout).contains("\u{1b}[2m"),
        "NO_COLOR set"
    );
}

/// Two sessions whose system prompt differs on its 22nd line: the first difference is shown
/// in context — the character, and that line on both sides — not only the kind of record.
#[test]
fn diff_shows_where_a_long_prompt_first_differs() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let lines: Vec<String> = (1..=30).map(|n| format!("Rule {n}: be careful.")).collect();
    let mut changed = lines.clone();
    changed[21] = "Rule 22: be bold.".to_owned();
    for (session, text) in [("a", lines.join("\n")), ("b", changed.join("\n"))] {
        append(
            &backend,
            session,
            0,
            vec![SessionEvent::SystemPrompt { text }],
        );
    }
    let output = cuca()
        .args(["diff", dir.path().to_str().unwrap(), "a", "b", "--no-pager"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    let offset: usize =
        lines[..21].iter().map(|l| l.len() + 1).sum::<usize>() + "Rule 22: be ".len();
    assert!(
        text.contains(&format!("at text, character {offset}")),
        "{text}"
    );
    assert!(text.contains("Rule 22: be careful."), "{text}");
    assert!(text.contains("Rule 22: be bold."), "{text}");
}
