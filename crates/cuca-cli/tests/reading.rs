//! Reading commands through the real binary on copies of the committed recordings: nothing partial on stdout, a fork's audit record shown as a note, what a torn
//! tail does and does not say, and the wording of counts, locks, errors and empty imports.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::*;
use cuca::{FileBackend, SessionBackend, SessionEvent, SessionRecord};

/// A temp dir holding copies of the committed recordings.
fn recorded() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in cslog_files(&fixtures_dir()) {
        std::fs::copy(fixtures_dir().join(&name), dir.path().join(&name)).unwrap();
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

#[test]
fn a_failing_replay_prints_nothing_on_stdout() {
    // "`replay --turn 5` past the last turn prints the header to stdout before failing. On
    // failure, print nothing partial to stdout."
    let dir = recorded();
    for args in [
        &["--turn", "5"][..],
        &["--turn", "3"][..],
        &["--turn", "0"][..],
        &["--at", "demo:999"][..],
        &["--at", "demo:999", "--json"][..],
    ] {
        let mut all = vec!["replay", p(dir.path()), "demo"];
        all.extend_from_slice(args);
        let failed = run(&all);
        assert_eq!(failed.code, 2, "{args:?}");
        assert_eq!(failed.stdout, "", "{args:?}");
        assert_eq!(failed.stderr.lines().count(), 1, "{}", failed.stderr);
        assert!(
            failed.stderr.starts_with("cuca: error: "),
            "{}",
            failed.stderr
        );
    }
    let past = run(&["replay", p(dir.path()), "demo", "--turn", "5"]);
    assert!(
        past.stderr
            .contains("has 2 turns, so turn 5 does not exist"),
        "{}",
        past.stderr
    );

    // A session damaged where a load refuses: exit 1, nothing on stdout from any reader.
    let file = dir.path().join("reasoning.cslog");
    let mut bytes = std::fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle..middle + 8].fill(0x41);
    std::fs::write(&file, bytes).unwrap();
    for command in [
        &["replay", p(dir.path()), "reasoning"][..],
        &["show", p(dir.path()), "reasoning"][..],
        &["export", p(dir.path()), "reasoning"][..],
    ] {
        let refused = run(command);
        assert_eq!(refused.code, 1, "{command:?}: {}", refused.stderr);
        assert_eq!(refused.stdout, "", "{command:?}");
    }
}

#[test]
fn a_fork_of_a_finished_session_is_a_note_after_the_last_turn() {
    // "a final turn that holds only notes (fork audits, model swaps) is shown as notes after
    // the last turn, not as a call that never finished."
    let dir = recorded();
    let fork = run(&["fork", p(dir.path()), "demo:1"]);
    assert_eq!(fork.code, 0, "{}", fork.stderr);
    let replayed = run(&["replay", p(dir.path()), "demo"]);
    assert_eq!(replayed.code, 0, "{}", replayed.stderr);
    assert!(
        !replayed.stdout.contains("incomplete"),
        "{}",
        replayed.stdout
    );
    assert!(
        replayed
            .stdout
            .starts_with("Session \"demo\": 2 turns and notes after them, 36 records, 24 blocks\n"),
        "{}",
        replayed.stdout
    );
    assert!(
        replayed.stdout.ends_with(
            "Notes after turn 2 (records 35..=35)\n  note: fork at demo:1 -> demo:fork:demo:1:0\n"
        ),
        "{}",
        replayed.stdout
    );
    let json = run(&["replay", p(dir.path()), "demo", "--json"]);
    let turns: Vec<serde_json::Value> = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(turns.len(), 3);
    assert_eq!(turns[2]["notes_only"], true);
    assert_eq!(turns[2]["notes"][0]["kind"], "Fork");
    assert_eq!(turns[1]["notes_only"], false);
    // One turn numbering everywhere (CLI, viewer, `--json`), and a notes-only block is never
    // counted as a turn.
    assert_eq!(
        (turns[0]["turn"].clone(), turns[1]["turn"].clone()),
        (1.into(), 2.into())
    );
    assert_eq!(turns[2]["turn"], serde_json::Value::Null);

    // An unfinished call is still shown as one.
    let open = run(&["replay", p(dir.path()), "demo", "--at", "demo:1"]);
    assert!(
        open.stdout.contains("Turn 1 (records 0..=1, incomplete"),
        "{}",
        open.stdout
    );
}

#[test]
fn verify_of_a_truncated_copy_says_only_what_is_known() {
    // "`verify` on a copy truncated to half says 'recovered … nothing recorded was lost'. Say
    // what is known: the torn tail held no acknowledged record only if a crash made it."
    let dir = recorded();
    let file = dir.path().join("demo.cslog");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let verified = run(&["verify", p(dir.path()), "demo"]);
    assert_eq!(verified.code, 0, "{}", verified.stderr);
    assert!(
        !verified.stdout.contains("nothing lost"),
        "{}",
        verified.stdout
    );
    assert!(
        !verified.stderr.contains("nothing recorded was lost"),
        "{}",
        verified.stderr
    );
    assert!(
        verified
            .stdout
            .contains("(a crash mid-append, or a copy cut short)"),
        "{}",
        verified.stdout
    );
    assert!(
        verified.stderr.contains("if a crash mid-append left it, no acknowledged record was lost; if the file was cut short (a partial copy), records after byte"),
        "{}",
        verified.stderr
    );
}

#[test]
fn counts_are_singular_for_one() {
    // '"1 turns", "1 calls", "1 agents"'.
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    backend
        .append(SessionRecord {
            session_id: "one".into(),
            sequence: 0,
            timestamp_ms: 0,
            event: SessionEvent::Output { text: "hi".into() },
        })
        .unwrap();
    drop(backend);
    let replayed = run(&["replay", p(dir.path()), "one"]);
    assert!(
        replayed
            .stdout
            .starts_with("Session \"one\": 1 turn, 1 record, 1 block\n"),
        "{}",
        replayed.stdout
    );
    let verified = run(&["verify", p(dir.path())]);
    assert!(
        verified.stdout.contains("one: clean (1 record, "),
        "{}",
        verified.stdout
    );
    assert!(
        verified.stdout.contains("\n1 session, 1 record, "),
        "{}",
        verified.stdout
    );
    let listed = run(&["sessions", p(dir.path())]);
    assert!(
        listed
            .stdout
            .ends_with(&format!("1 session in {}\n", p(dir.path()))),
        "{}",
        listed.stdout
    );
    let kinds = run(&["show", p(dir.path()), "one", "--kinds"]);
    assert_eq!(kinds.stdout, "one: 1 record: Output 1\n");
}

#[test]
fn a_locked_session_gets_shell_advice_not_library_advice() {
    // 'the lock error gives library advice ("FileBackend::close or drop") to a CLI user'.
    let dir = recorded();
    let holder = FileBackend::new(dir.path()).unwrap();
    holder
        .append(SessionRecord {
            session_id: "demo".into(),
            sequence: 35,
            timestamp_ms: 0,
            event: SessionEvent::Output {
                text: "still writing".into(),
            },
        })
        .unwrap();
    let forked = run(&["fork", p(dir.path()), "demo:1"]);
    assert_eq!(forked.code, 1, "{}", forked.stderr);
    assert!(!forked.stderr.contains("FileBackend"), "{}", forked.stderr);
    assert!(
        forked.stderr.contains(&format!(
            "is held open for append by process {}",
            std::process::id()
        )),
        "{}",
        forked.stderr
    );
    drop(holder);
}

#[test]
fn importing_an_empty_file_creates_nothing_and_says_so() {
    // "`import` of an empty file reports a file it never created".
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "\n\n").unwrap();
    let store = dir.path().join("store");
    let imported = run(&["import", p(&empty), p(&store), "new"]);
    assert_eq!(imported.code, 1, "{}", imported.stderr);
    assert_eq!(imported.stdout, "");
    assert!(
        imported
            .stderr
            .contains("holds no records; nothing was imported"),
        "{}",
        imported.stderr
    );
    assert!(!store.join("new.cslog").exists());
}

#[test]
fn errors_read_the_same_on_a_terminal_and_in_a_pipe() {
    // 'errors read `cuca: error:` on a terminal and `cuca:` when piped'.
    let dir = tempfile::tempdir().unwrap();
    let missing = run(&["show", p(dir.path()), "nope"]);
    assert_eq!(missing.code, 2);
    assert!(
        missing
            .stderr
            .starts_with("cuca: error: session \"nope\" not found"),
        "{}",
        missing.stderr
    );
}

#[test]
fn a_session_recorded_with_call_metadata_replays_shows_and_verifies() {
    // What `cuca proxy` records (`SessionLogPlugin::with_call_metadata`): CallRequest and
    // CallFinish records inside each turn. Every session command reads them.
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let events = [
        SessionEvent::Message(cuca::Message::user("hi")),
        SessionEvent::CallRequest {
            model: "gemma".into(),
            parameters: r#"{"max_tokens":8}"#.into(),
            tools: "[]".into(),
            messages: 1,
        },
        SessionEvent::Output {
            text: "hello".into(),
        },
        SessionEvent::CallIncomplete {
            reason: "1 event(s) of the stream could not be decoded".into(),
        },
        SessionEvent::CallFinish {
            finish_reason: Some("stop".into()),
            model: "gemma-q4".into(),
        },
        SessionEvent::Latency { duration_ms: 9 },
        SessionEvent::TokenUsage {
            prompt_tokens: 3,
            completion_tokens: 1,
        },
    ];
    for (sequence, event) in events.into_iter().enumerate() {
        backend
            .append(SessionRecord {
                session_id: "proxied".into(),
                sequence: sequence as u64,
                timestamp_ms: 1_700_000_000_000,
                event,
            })
            .unwrap();
    }
    drop(backend);
    let replayed = run(&["replay", p(dir.path()), "proxied"]);
    assert_eq!(replayed.code, 0, "{}", replayed.stderr);
    assert!(
        replayed
            .stdout
            .contains("call: model gemma, 1 messages sent, parameters {\"max_tokens\":8}"),
        "{}",
        replayed.stdout
    );
    assert!(
        replayed
            .stdout
            .contains("finished: stop (answered by gemma-q4)"),
        "{}",
        replayed.stdout
    );
    let json = run(&["replay", p(dir.path()), "proxied", "--json"]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    let turn: serde_json::Value =
        serde_json::from_str(json.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(
        turn["call"][1]["CallIncomplete"]["reason"],
        "1 event(s) of the stream could not be decoded"
    );
    assert_eq!(turn["call"][2]["CallFinish"]["finish_reason"], "stop");
    assert!(
        replayed
            .stdout
            .contains("incomplete: 1 event(s) of the stream could not be decoded"),
        "{}",
        replayed.stdout
    );
    for command in ["show", "verify", "export"] {
        let out = run(&[command, p(dir.path()), "proxied"]);
        assert_eq!(out.code, 0, "{command}: {}", out.stderr);
    }
    // `show` previews every record kind.
    let shown = run(&["show", p(dir.path()), "proxied"]).stdout;
    for preview in [
        r#"gemma with 1 messages, 0 tools, parameters {"max_tokens":8}"#,
        "stop by gemma-q4",
        "1 event(s) of the stream could not be decoded",
    ] {
        assert!(shown.contains(preview), "{preview:?} in {shown}");
    }
}
