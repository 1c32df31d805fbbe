//! `cuca grep DIR PATTERN` (text and `--json`) searches message text, outputs, tool names and
//! arguments, tool results, models and errors across all sessions, each result linking to its
//! point, with grep's exit status (0 found, 1 none, 2 trouble).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::*;
use cuca::{FileBackend, Message, SessionBackend, SessionEvent, SessionRecord};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn grep(args: &[&str]) -> Run {
    let output = cuca().arg("grep").args(args).output().unwrap();
    let run = Run {
        code: output.status.code().unwrap(),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    };
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    run
}

fn p(dir: &Path) -> &str {
    dir.to_str().unwrap()
}

fn record(session: &str, sequence: u64, event: SessionEvent) -> SessionRecord {
    SessionRecord {
        session_id: session.into(),
        sequence,
        timestamp_ms: 1_795_975_017_906 + sequence,
        event,
    }
}

/// Two sessions: an agent's turn with a tool call, a failing tool result and a second turn
/// that streams its answer token by token; and a proxy call cut short by the upstream.
fn sessions() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let agent = [
        SessionEvent::Message(Message::user("list the files")),
        SessionEvent::CallRequest {
            model: "qwen2.5-coder-7b".into(),
            parameters: "{}".into(),
            tools: "[]".into(),
            messages: 1,
        },
        SessionEvent::ToolCall {
            id: "call_1".into(),
            name: "run_shell".into(),
            arguments: "{\"cmd\":\"ls /srv/vault\"}".into(),
        },
        SessionEvent::Latency { duration_ms: 40 },
        SessionEvent::TokenUsage {
            prompt_tokens: 10,
            completion_tokens: 5,
        },
        SessionEvent::ToolResult {
            tool_call_id: "call_1".into(),
            content: "ls: cannot access '/srv/vault': No such file".into(),
            is_error: true,
            stdout: Some(String::new()),
            stderr: Some("ls: cannot access '/srv/vault': No such file".into()),
            exit_code: Some(2),
        },
        SessionEvent::Output {
            text: "The vault is ".into(),
        },
        SessionEvent::Output { text: "mis".into() },
        SessionEvent::Output {
            text: "sing.".into(),
        },
        SessionEvent::Latency { duration_ms: 40 },
        SessionEvent::TokenUsage {
            prompt_tokens: 20,
            completion_tokens: 3,
        },
    ];
    for (sequence, event) in agent.into_iter().enumerate() {
        backend
            .append(record("agent", sequence as u64, event))
            .unwrap();
    }
    let proxy = [
        SessionEvent::CallRequest {
            model: "gpt-4o-mini".into(),
            parameters: "{}".into(),
            tools: "[]".into(),
            messages: 1,
        },
        SessionEvent::CallIncomplete {
            reason: "upstream answered 400: the prompt is over the context".into(),
        },
    ];
    for (sequence, event) in proxy.into_iter().enumerate() {
        backend
            .append(record("proxy", sequence as u64, event))
            .unwrap();
    }
    dir
}

#[test]
fn grep_prints_one_line_a_hit_with_the_point_the_turn_and_the_command_to_reach_it() {
    let dir = sessions();
    let d = p(dir.path());
    let found = grep(&[d, "vault"]);
    assert_eq!(found.code, 0, "{}", found.stderr);
    let lines: Vec<&str> = found.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            format!("agent:2  turn 1  ToolCall arguments  \"{{\"cmd\":\"ls /srv/vault\"}}\"  (cuca replay {d} agent --turn 1)"),
            format!("agent:5  turn 2  ToolResult content  \"ls: cannot access '/srv/vault': No such file\"  (cuca replay {d} agent --turn 2)"),
            format!("agent:5  turn 2  ToolResult stderr  \"ls: cannot access '/srv/vault': No such file\"  (cuca replay {d} agent --turn 2)"),
            format!("agent:6  turn 2  Output  \"The vault is missing.\"  (cuca replay {d} agent --turn 2)"),
        ]
    );
    assert_eq!(found.stderr, "");
}

#[test]
fn grep_finds_models_tool_names_and_errors_and_narrows_by_kind() {
    let dir = sessions();
    let d = p(dir.path());
    let models = grep(&[d, "gpt-4o|qwen", "--kind", "CallRequest"]);
    assert_eq!(models.code, 0);
    let points: Vec<&str> = models
        .stdout
        .lines()
        .map(|l| l.split("  ").next().unwrap())
        .collect();
    assert_eq!(points, ["agent:1", "proxy:0"]);
    let tool = grep(&[d, "run_shell", "--kind", "tool-call"]);
    assert!(
        tool.stdout
            .starts_with("agent:2  turn 1  ToolCall name  \"run_shell\""),
        "{}",
        tool.stdout
    );
    let error = grep(&[d, "over the context", "-F"]);
    assert!(
        error.stdout.starts_with("proxy:1  turn 1  CallIncomplete reason  \"upstream answered 400: the prompt is over the context\""),
        "{}",
        error.stdout
    );
    let bad_kind = grep(&[d, "x", "--kind", "Latency"]);
    assert_eq!(bad_kind.code, 2);
    assert!(
        bad_kind
            .stderr
            .starts_with("cuca: error: kind \"Latency\" is not searched"),
        "{}",
        bad_kind.stderr
    );
}

#[test]
fn grep_json_is_one_object_a_hit() {
    let dir = sessions();
    let found = grep(&[p(dir.path()), "MISSING", "--ignore-case", "--json"]);
    assert_eq!(found.code, 0);
    let rows: Vec<serde_json::Value> = found
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row["session"], "agent");
    assert_eq!(
        row["point"], "agent:7",
        "the record where the match starts: 'mis'"
    );
    assert_eq!(row["sequence"], 7);
    assert_eq!(row["turn"], 2);
    assert_eq!(row["kind"], "Output");
    assert_eq!(row["snippet"], "The vault is missing.");
    assert_eq!(row["match"]["text"], "missing");
    assert_eq!(row["match"]["start"], 13);
}

#[test]
fn grep_exits_like_grep_0_found_1_none_2_trouble() {
    let dir = sessions();
    let d = p(dir.path());
    let none = grep(&[d, "no such words anywhere"]);
    assert_eq!(
        (none.code, none.stdout.as_str(), none.stderr.as_str()),
        (1, "", "")
    );
    let bad = grep(&[d, "unclosed("]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr
            .starts_with("cuca: error: pattern \"unclosed(\" is not a regular expression"),
        "{}",
        bad.stderr
    );
    assert_eq!(bad.stderr.lines().count(), 1, "{}", bad.stderr);
    let missing = grep(&[&format!("{d}/nope"), "x"]);
    assert_eq!(missing.code, 2);
    assert!(
        missing.stderr.contains("cannot be read"),
        "{}",
        missing.stderr
    );
    // A session that cannot be read: the others' hits, a warning, and grep's trouble status.
    std::fs::write(dir.path().join("broken.cslog"), b"not a cslog").unwrap();
    let damaged = grep(&[d, "gpt-4o"]);
    assert_eq!(damaged.code, 2);
    assert!(damaged.stdout.starts_with("proxy:0"), "{}", damaged.stdout);
    assert!(
        damaged
            .stderr
            .starts_with("cuca: warning: session \"broken\" could not be read through"),
        "{}",
        damaged.stderr
    );
}

#[test]
fn grep_limit_stops_and_says_so() {
    let dir = sessions();
    let found = grep(&[p(dir.path()), "vault", "--limit", "2"]);
    assert_eq!(found.code, 0);
    assert_eq!(found.stdout.lines().count(), 2);
    assert_eq!(
        found.stderr,
        "cuca: warning: stopped at 2 hits (--limit); there may be more (--offset 2 shows the next)\n"
    );
}

#[test]
fn grep_over_the_committed_recordings_finds_the_user_message() {
    let found = grep(&[p(&fixtures_dir()), "Lisbon"]);
    assert_eq!(found.code, 0);
    assert!(
        found.stdout.starts_with(
            "demo:1  turn 1  Message user  \"The vault is in Lisbon. Reply with: noted\""
        ),
        "{}",
        found.stdout
    );
}

#[test]
fn grep_escapes_what_a_recording_holds() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    backend
        .append(record(
            "s",
            0,
            SessionEvent::Output {
                text: "evil \u{1b}]0;TITLE\u{7} here".into(),
            },
        ))
        .unwrap();
    let found = grep(&[p(dir.path()), "evil"]);
    assert!(
        found.stdout.contains("\"evil \\e]0;TITLE\\x07 here\""),
        "{}",
        found.stdout
    );
    assert!(!found.stdout.contains('\u{1b}'));
}

#[test]
fn grep_shows_a_hit_in_a_forks_copied_prefix_once_and_pages_with_an_offset() {
    let dir = sessions();
    let backend = FileBackend::new(dir.path()).unwrap();
    // The agent's first turn (records 0..=5) is copied into the fork.
    let fork = backend.fork("agent", "agent:5").unwrap();
    drop(backend);
    let d = p(dir.path());
    let found = grep(&[d, "vault", "--kind", "ToolCall"]);
    assert_eq!(found.code, 0, "{}", found.stderr);
    assert_eq!(found.stdout.lines().count(), 1, "{}", found.stdout);
    assert!(
        found
            .stdout
            .starts_with("agent:2  turn 1  ToolCall arguments")
            && found.stdout.contains("\"  also in 1 fork  (cuca replay"),
        "{}",
        found.stdout
    );
    assert!(!found.stdout.contains(&fork), "{}", found.stdout);
    let json = grep(&[d, "vault", "--kind", "ToolCall", "--json"]);
    let row: serde_json::Value = serde_json::from_str(json.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(row["also_in_forks"], 1);

    let all = grep(&[d, "vault"]);
    let every: Vec<&str> = all.stdout.lines().collect();
    assert!(every.len() > 2, "{}", all.stdout);
    let page = grep(&[d, "vault", "--offset", "1", "--limit", "1"]);
    assert_eq!(page.stdout.lines().collect::<Vec<_>>(), [every[1]]);
    assert!(
        page.stderr.contains("--offset 2 shows the next"),
        "{}",
        page.stderr
    );
}

#[test]
fn grep_kind_tool_call_finds_the_tool_calls_a_proxy_records_inside_messages() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let events = [
        SessionEvent::Message(Message::user("look it up")),
        SessionEvent::Message(cuca::Message {
            role: cuca::Role::Assistant,
            content: vec![cuca::MessageContentBlock::ToolCall {
                id: "call_9".into(),
                name: "lookup_vault".into(),
                arguments: "{}".into(),
            }],
        }),
    ];
    for (sequence, event) in events.into_iter().enumerate() {
        backend
            .append(record("proxied", sequence as u64, event))
            .unwrap();
    }
    drop(backend);
    let found = grep(&[p(dir.path()), "lookup_vault", "--kind", "ToolCall"]);
    assert_eq!(found.code, 0, "{}", found.stderr);
    assert!(
        found
            .stdout
            .starts_with("proxied:1  turn 1  ToolCall assistant name  \"lookup_vault\""),
        "{}",
        found.stdout
    );
}

#[test]
fn grep_finds_the_errors_of_failed_calls_in_the_call_log() {
    let dir = sessions();
    let d = p(dir.path());
    let calls = dir.path().join("calls.jsonl");
    std::fs::write(
        &calls,
        concat!(
            "{\"ts\":\"2026-12-02T10:00:00.000Z\",\"id\":\"c1\",\"run\":\"1a2b3c4d\",\"phase\":\"start\",\"tag\":\"proxy\",\"node\":\"agent\"}\n",
            "{\"ts\":\"2026-12-02T10:00:00.004Z\",\"id\":\"c1\",\"run\":\"1a2b3c4d\",\"tag\":\"proxy\",\"node\":\"agent\",\"ms\":4,\"error\":\"the upstream http://127.0.0.1:9 did not answer: Connection refused (os error 111)\"}\n",
        ),
    )
    .unwrap();
    let c = calls.to_str().unwrap();
    let found = grep(&[d, "Connection refused", "--calls", c]);
    assert_eq!(found.code, 0, "{}", found.stderr);
    assert_eq!(
        found.stdout,
        "call log  2026-12-02T10:00:00.004Z  session agent  run 1a2b3c4d  no response  CallLog error  \"…ream http://127.0.0.1:9 did not answer: Connection refused (os error 111)\"  (cuca logs --failed --run 1a2b3c4d)\n"
    );
    // This machine's call log (CUCA_CALL_LOG) is searched when none is named.
    let output = cuca()
        .args(["grep", d, "Connection refused", "--json"])
        .env("CUCA_CALL_LOG", c)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let row: serde_json::Value =
        serde_json::from_str(String::from_utf8(output.stdout).unwrap().trim()).unwrap();
    assert_eq!(row["source"], "call_log");
    assert_eq!(row["session"], "agent");
    assert_eq!(row["match"]["text"], "Connection refused");
    // A record kind leaves the call log out; --no-calls too.
    assert_eq!(
        grep(&[d, "Connection refused", "--calls", c, "--kind", "Output"]).code,
        1
    );
    assert_eq!(
        grep(&[d, "Connection refused", "--calls", c, "--no-calls"]).code,
        2
    );
    let only = grep(&[d, "refused|vault", "--calls", c, "--kind", "CallLog"]);
    assert_eq!(only.stdout.lines().count(), 1, "{}", only.stdout);
}
