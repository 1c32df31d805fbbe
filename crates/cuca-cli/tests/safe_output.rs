//! Everything that comes from a recording (text, ids, journal fields, call-log fields) is
//! untrusted: control characters are neutralised on every path that prints to a terminal
//! (`--json` stays exact and escaped as JSON), with a test per command.
//!
//! A session whose id and texts carry `\e]0;TITLE\a\e[2J` (set the window title, clear the
//! screen) goes through every command; no escape character reaches stdout or stderr, the
//! escapes are shown as text, and the JSON output holds the exact strings.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::cuca;
use cuca::{FileBackend, Message, SessionBackend, SessionEvent, SessionRecord};

/// Sets the terminal's title and clears its screen.
const HOSTILE: &str = "\u{1b}]0;TITLE\u{7}\u{1b}[2J";
/// What the CLI shows for it.
const SHOWN: &str = "\\e]0;TITLE\\x07\\e[2J";
/// A hostile session id. Every store refuses control characters in ids, so the
/// escape above cannot be an id; a bidi override (U+202E, which makes `evil<RLO>gnp.exe` read
/// as `evilexe.png`) is not a control character and still is one.
const ID: &str = "evil\u{202e}gnp.exe";
/// What the CLI shows for it.
const ID_SHOWN: &str = "evil\\u{202e}gnp.exe";

fn hostile_events() -> Vec<SessionEvent> {
    vec![
        SessionEvent::SystemPrompt {
            text: format!("system {HOSTILE}"),
        },
        SessionEvent::Message(Message::user(format!("user {HOSTILE}\r\u{9b}31m"))),
        SessionEvent::Reasoning {
            text: format!("thinking {HOSTILE}"),
        },
        SessionEvent::Output {
            text: format!("answer {HOSTILE}\u{202e}"),
        },
        SessionEvent::ToolCall {
            id: format!("call{HOSTILE}"),
            name: format!("ls{HOSTILE}"),
            arguments: format!("{{}}{HOSTILE}"),
        },
        SessionEvent::ToolResult {
            tool_call_id: format!("call{HOSTILE}"),
            content: format!("out {HOSTILE}"),
            is_error: false,
            stdout: None,
            stderr: None,
            exit_code: Some(0),
        },
        SessionEvent::Latency { duration_ms: 5 },
        SessionEvent::TokenUsage {
            prompt_tokens: 1,
            completion_tokens: 2,
        },
        SessionEvent::ModelSwap {
            from: format!("a{HOSTILE}"),
            to: "b".into(),
            reason: format!("why {HOSTILE}"),
        },
    ]
}

fn hostile_records() -> Vec<SessionRecord> {
    hostile_events()
        .into_iter()
        .enumerate()
        .map(|(sequence, event)| SessionRecord {
            session_id: ID.into(),
            sequence: sequence as u64,
            timestamp_ms: 1_700_000_000_000,
            event,
        })
        .collect()
}

fn hostile_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    for record in hostile_records() {
        backend.append(record).unwrap();
    }
    dir
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str]) -> Run {
    let output = cuca().args(args).output().unwrap();
    Run {
        code: output.status.code().unwrap(),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// Nothing a terminal obeys (C0 but newline, DEL, C1, bidi overrides) in `text`.
fn assert_inert(text: &str, what: &str) {
    let bad: Vec<char> = text
        .chars()
        .filter(|&c| {
            (c.is_control() && c != '\n')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .collect();
    assert!(bad.is_empty(), "{what}: {bad:?} in {text:?}");
}

fn assert_safe(run: &Run, what: &str) {
    assert_inert(&run.stdout, what);
    assert_inert(&run.stderr, what);
}

fn p(dir: &Path) -> &str {
    dir.to_str().unwrap()
}

#[test]
fn sessions_shows_a_hostile_id_escaped_and_json_keeps_it_exact() {
    let dir = hostile_dir();
    let listed = run(&["sessions", p(dir.path())]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert_safe(&listed, "sessions");
    assert!(
        listed.stdout.contains(&ID_SHOWN.to_owned()),
        "{}",
        listed.stdout
    );
    let last = run(&["sessions", p(dir.path()), "--last"]);
    assert_safe(&last, "sessions --last");
    let json = run(&["sessions", p(dir.path()), "--json"]);
    let row: serde_json::Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(row["session"], ID);
}

#[test]
fn show_escapes_every_field_and_json_is_exact() {
    let dir = hostile_dir();
    let shown = run(&["show", p(dir.path()), ID]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert_safe(&shown, "show");
    assert!(shown.stdout.contains(SHOWN), "{}", shown.stdout);
    let kinds = run(&["show", p(dir.path()), ID, "--kinds"]);
    assert_safe(&kinds, "show --kinds");
    let json = run(&["show", p(dir.path()), ID, "--json"]);
    let parsed: Vec<SessionRecord> = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(parsed, hostile_records());
}

#[test]
fn replay_escapes_output_messages_tool_results_and_notes() {
    let dir = hostile_dir();
    let replayed = run(&["replay", p(dir.path()), ID]);
    assert_eq!(replayed.code, 0, "{}", replayed.stderr);
    assert_safe(&replayed, "replay");
    for needle in [
        format!("  output: answer {SHOWN}\\u{{202e}}"),
        format!("  user: user {SHOWN}\\r\\u{{9b}}31m"),
        format!("  system: system {SHOWN}"),
        format!("  tool result: call{SHOWN} ok: out {SHOWN}"),
        format!("why {SHOWN}"),
    ] {
        assert!(
            replayed.stdout.contains(&needle),
            "{needle}\n{}",
            replayed.stdout
        );
    }
    let one = run(&["replay", p(dir.path()), ID, "--turn", "1"]);
    assert_safe(&one, "replay --turn");
    let json = run(&["replay", p(dir.path()), ID, "--json"]);
    let turn: serde_json::Value =
        serde_json::from_str(json.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(turn["system_prompts"][0], format!("system {HOSTILE}"));
    assert_eq!(
        turn["blocks"][1]["Text"]["text"],
        format!("answer {HOSTILE}\u{202e}")
    );
}

#[test]
fn verify_fork_compact_export_and_import_never_print_a_raw_escape() {
    let dir = hostile_dir();
    let verified = run(&["verify", p(dir.path())]);
    assert_eq!(verified.code, 0, "{}", verified.stderr);
    assert_safe(&verified, "verify");
    assert!(
        verified.stdout.starts_with(&format!("{ID_SHOWN}: clean")),
        "{}",
        verified.stdout
    );

    let forked = run(&["fork", p(dir.path()), &format!("{ID}:1")]);
    assert_eq!(forked.code, 0, "{}", forked.stderr);
    assert_safe(&forked, "fork");
    let forked_json = run(&["fork", p(dir.path()), &format!("{ID}:1"), "--json"]);
    let value: serde_json::Value = serde_json::from_str(forked_json.stdout.trim()).unwrap();
    assert_eq!(value["session"], format!("{ID}:fork:{ID}:1:1"));

    let exported = run(&["export", p(dir.path()), ID]);
    assert_eq!(exported.code, 0);
    let file = dir.path().join("export.jsonl");
    std::fs::write(&file, &exported.stdout).unwrap();
    let parsed: Vec<SessionRecord> = exported
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The Fork audit record the forks appended, then the recording, exact.
    assert_eq!(parsed[..hostile_records().len()], hostile_records()[..]);

    // An id with a terminal escape is refused by the store, and the refusal is escaped.
    let refused = run(&["import", p(&file), p(dir.path()), &format!("copy{HOSTILE}")]);
    assert_ne!(refused.code, 0, "{}", refused.stdout);
    assert_safe(&refused, "import refused");
    let into = format!("copy{ID}");
    let imported = run(&["import", p(&file), p(dir.path()), &into]);
    assert_eq!(imported.code, 0, "{}", imported.stderr);
    assert_safe(&imported, "import");

    let compacted = run(&["compact", p(dir.path())]);
    assert_eq!(compacted.code, 0, "{}", compacted.stderr);
    assert_safe(&compacted, "compact");

    // An error naming the hostile id is escaped too.
    let missing = run(&["show", p(dir.path()), &format!("gone{HOSTILE}")]);
    assert_eq!(missing.code, 2);
    assert_safe(&missing, "show of a missing session");
}

#[test]
fn logs_escape_every_call_log_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calls.jsonl");
    let log = cuca::calllog::CallLog::builder()
        .path(Some(path.clone()))
        .build();
    let call = log.start(cuca::calllog::Record {
        run: format!("run{HOSTILE}"),
        tag: format!("tag{HOSTILE}"),
        model: format!("model{HOSTILE}"),
        ..Default::default()
    });
    std::mem::forget(call);
    log.start(cuca::calllog::Record {
        run: format!("run{HOSTILE}"),
        ..Default::default()
    })
    .finish(cuca::calllog::Record {
        status: 500,
        error: format!("boom{HOSTILE}"),
        ..Default::default()
    });
    for args in [&[][..], &["--in-flight"][..], &["--failed"][..]] {
        let mut all = vec!["logs", "--file", p(&path)];
        all.extend_from_slice(args);
        let shown = run(&all);
        assert_eq!(shown.code, 0, "{args:?}: {}", shown.stderr);
        assert_safe(&shown, &format!("logs {args:?}"));
        assert!(shown.stdout.contains(SHOWN), "{args:?}: {}", shown.stdout);
    }
}

#[test]
fn journal_show_escapes_recorded_fields() {
    let workspace = tempfile::tempdir().unwrap();
    let run_dir = tempfile::tempdir().unwrap();
    let config = cuca::journal::RecorderConfig::new(workspace.path(), "run-1").unwrap();
    let recorder = cuca::journal::Recorder::start(config).unwrap();
    let request = cuca::UnifiedRequest::new(vec![Message::user(HOSTILE)]);
    let response = cuca::UnifiedResponse {
        content: vec![cuca::MessageContentBlock::text(HOSTILE)],
        ..Default::default()
    };
    recorder.model_io(
        &format!("agent{HOSTILE}"),
        &request,
        cuca::journal::format::RequestRole::AgentTurn,
        &response,
        Duration::from_millis(5),
    );
    recorder.finish();
    let assembled = run(&[
        "journal",
        "assemble",
        p(workspace.path()),
        p(run_dir.path()),
    ]);
    assert_eq!(assembled.code, 0, "{}", assembled.stderr);
    assert_safe(&assembled, "journal assemble");
    let shown = run(&["journal", "show", p(&run_dir.path().join("replay.json.gz"))]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert_safe(&shown, "journal show");
}
