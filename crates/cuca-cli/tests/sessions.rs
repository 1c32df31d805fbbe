//! The session commands driven through the real binary on real `.cslog` files in temp dirs:
//! sessions, show, replay, fork, verify (clean, recovered, refused), export and import.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
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
    // No user error ever ends in a panic or a backtrace.
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    run
}

fn path(dir: &Path) -> &str {
    dir.to_str().unwrap()
}

/// One `cuca: …` line on stderr, containing `needle`.
fn assert_one_error_line(run: &Run, needle: &str) {
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", run.stderr);
    assert!(lines[0].starts_with("cuca: "), "{}", run.stderr);
    assert!(lines[0].contains(needle), "{}", run.stderr);
}

fn demo_records(dir: &Path) -> Vec<SessionRecord> {
    FileBackend::new(dir).unwrap().replay("demo").unwrap()
}

#[test]
fn sessions_lists_one_row_per_session_with_counts_bytes_and_forks() {
    let dir = recorded();
    let fork = run(&["fork", path(dir.path()), "demo:1"]);
    assert_eq!(fork.code, 0, "{}", fork.stderr);
    assert_eq!(fork.stdout, "demo:fork:demo:1:0\n");

    let listed = run(&["sessions", path(dir.path())]);
    assert_eq!(listed.code, 0);
    let demo_bytes = std::fs::metadata(dir.path().join("demo.cslog"))
        .unwrap()
        .len();
    let demo_row = listed
        .stdout
        .lines()
        .find(|l| l.starts_with("demo "))
        .unwrap();
    // 35 recorded records plus the Fork audit record.
    assert!(demo_row.contains(" 36 "), "{demo_row}");
    // Written with thousands separators, as every count in the table is.
    let shown_bytes = if demo_bytes >= 1_000 {
        format!("{},{:03}", demo_bytes / 1_000, demo_bytes % 1_000)
    } else {
        demo_bytes.to_string()
    };
    assert!(demo_row.contains(&format!(" {shown_bytes} ")), "{demo_row}");
    assert!(
        demo_row.contains("clean") && demo_row.contains("1 taken"),
        "{demo_row}"
    );
    let fork_row = listed
        .stdout
        .lines()
        .find(|l| l.starts_with("demo:fork:demo:1:0"))
        .unwrap();
    assert!(fork_row.contains("forked from demo:1"), "{fork_row}");
    assert!(fork_row.contains(" 2 "), "{fork_row}");
    assert!(listed
        .stdout
        .ends_with(&format!("3 sessions in {}\n", path(dir.path()))));

    let json = run(&["sessions", path(dir.path()), "--json", "--sort", "name"]);
    let rows: Vec<serde_json::Value> = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["session"], "demo");
    assert_eq!(rows[0]["records"], 36);
    assert_eq!(rows[0]["bytes"], demo_bytes);
    assert_eq!(rows[0]["forks"][0], "demo:fork:demo:1:0");
    assert_eq!(rows[1]["forked_from"], "demo:1");
    let first = demo_records(dir.path())[0].timestamp_ms;
    assert_eq!(rows[0]["first_ms"], first);
}

#[test]
fn a_missing_directory_is_a_usage_error_and_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir");
    for args in [
        vec!["sessions", path(&missing)],
        vec!["show", path(&missing), "demo"],
        vec!["replay", path(&missing), "demo"],
        vec!["verify", path(&missing)],
        vec!["fork", path(&missing), "demo:1"],
        vec!["export", path(&missing), "demo"],
    ] {
        let result = run(&args);
        assert_eq!(result.code, 2, "{args:?}");
        assert_one_error_line(&result, "no-such-dir");
        assert!(result.stdout.is_empty());
    }
    assert!(!missing.exists());
}

#[test]
fn a_session_that_does_not_exist_is_a_usage_error() {
    let dir = recorded();
    for args in [
        vec!["show", path(dir.path()), "nope"],
        vec!["replay", path(dir.path()), "nope"],
        vec!["verify", path(dir.path()), "nope"],
        vec!["fork", path(dir.path()), "nope:1"],
        vec!["export", path(dir.path()), "nope"],
    ] {
        let result = run(&args);
        assert_eq!(result.code, 2, "{args:?}");
        assert_one_error_line(&result, "\"nope\"");
    }
}

#[test]
fn show_prints_one_line_per_record_and_the_seed_kinds_line() {
    let dir = recorded();
    let records = demo_records(dir.path());
    let shown = run(&["show", path(dir.path()), "demo"]);
    assert_eq!(shown.code, 0);
    let lines: Vec<&str> = shown.stdout.lines().collect();
    assert_eq!(lines.len(), records.len());
    assert!(lines[0].contains("SystemPrompt") && lines[0].contains("\"You are terse.\""));
    assert!(lines[1].contains("Message") && lines[1].contains(&format!("user: \"{TURN_1}\"")));
    assert!(lines[2].trim_start().starts_with("2  "), "{}", lines[2]);

    // Seed 000 prints "SystemPrompt 1, Message 1, Reasoning 72, …"; this session has two turns.
    let kinds = run(&["show", path(dir.path()), "demo", "--kinds"]);
    assert_eq!(
        kinds.stdout,
        "demo: 35 records: SystemPrompt 2, Message 3, Output 24, Latency 2, TokenUsage 2, TokenDetail 2\n"
    );
    let kinds_json = run(&["show", path(dir.path()), "demo", "--kinds", "--json"]);
    let value: serde_json::Value = serde_json::from_str(kinds_json.stdout.trim()).unwrap();
    assert_eq!(value["kinds"]["Output"], 24);

    let json = run(&["show", path(dir.path()), "demo", "--json"]);
    let parsed: Vec<SessionRecord> = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(parsed, records);
}

#[test]
fn replay_selects_a_turn_and_a_fork_point_prefix() {
    let dir = recorded();
    let (_, turn_2) = streamed_text(STREAM_SECOND_TURN);
    let one = run(&["replay", path(dir.path()), "demo", "--turn", "2"]);
    assert_eq!(one.code, 0);
    assert!(
        one.stdout.contains("Turn 2 (records 17..=34, complete)"),
        "{}",
        one.stdout
    );
    assert!(!one.stdout.contains("Turn 1 "));
    assert!(one.stdout.contains(&format!("  output: {turn_2}\n")));

    let past = run(&["replay", path(dir.path()), "demo", "--turn", "3"]);
    assert_eq!(past.code, 2);
    assert_one_error_line(
        &past,
        "has 2 turns, so turn 3 does not exist (turns count from 1)",
    );

    // The prefix a fork at demo:1 holds: the system prompt and the first message, unfinished.
    let at = run(&["replay", path(dir.path()), "demo", "--at", "demo:1"]);
    assert_eq!(at.code, 0);
    // One turn is "1 turn", not "1 turns".
    assert!(
        at.stdout.contains(": 1 turn, 2 records, 0 blocks"),
        "{}",
        at.stdout
    );
    assert!(
        at.stdout.contains("Turn 1 (records 0..=1, incomplete"),
        "{}",
        at.stdout
    );
    assert!(at.stdout.contains(&format!("  user: {TURN_1}\n")));

    let other = run(&["replay", path(dir.path()), "demo", "--at", "reasoning:1"]);
    assert_eq!(other.code, 2);
    assert_one_error_line(&other, "not of \"demo\"");
    let malformed = run(&["replay", path(dir.path()), "demo", "--at", "demo"]);
    assert_eq!(malformed.code, 2);
    assert_one_error_line(&malformed, "point_id");

    let json = run(&["replay", path(dir.path()), "demo", "--json"]);
    let turns: Vec<serde_json::Value> = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[1]["completion"]["prompt_tokens"], 68);
    assert_eq!(turns[0]["complete"], true);
    assert_eq!(turns[0]["system_prompts"][0], SYSTEM);
}

#[test]
fn fork_prints_the_new_id_and_refuses_bad_points() {
    let dir = recorded();
    let first = run(&["fork", path(dir.path()), "demo:2"]);
    assert_eq!(
        (first.code, first.stdout.as_str()),
        (0, "demo:fork:demo:2:0\n")
    );
    // A second fork at the same point never writes into the first branch.
    let second = run(&["fork", path(dir.path()), "demo:2", "--json"]);
    let value: serde_json::Value = serde_json::from_str(second.stdout.trim()).unwrap();
    assert_eq!(value["session"], "demo:fork:demo:2:1");
    let branch = FileBackend::new(dir.path())
        .unwrap()
        .replay("demo:fork:demo:2:0")
        .unwrap();
    assert_eq!(branch.len(), 3);
    // Forking a fork: the session is the part before the last ':'.
    let nested = run(&["fork", path(dir.path()), "demo:fork:demo:2:0:1"]);
    assert_eq!(
        nested.stdout,
        "demo:fork:demo:2:0:fork:demo:fork:demo:2:0:1:0\n"
    );

    for (point, needle) in [
        ("demo", "has no ':'"),
        ("demo:x", "not a sequence number"),
        (":3", "names no session"),
        ("demo:999", "\"demo:999\" not found"),
    ] {
        let result = run(&["fork", path(dir.path()), point]);
        assert_eq!(result.code, 2, "{point}");
        assert_one_error_line(&result, needle);
    }
}

/// Appends `bytes` to a session file, as damage would.
fn append_bytes(file: &Path, bytes: &[u8]) {
    let mut file = std::fs::OpenOptions::new().append(true).open(file).unwrap();
    file.write_all(bytes).unwrap();
}

#[test]
fn verify_a_torn_tail_is_recovered_exit_0_with_a_warning() {
    let dir = recorded();
    let file = dir.path().join("demo.cslog");
    let len = std::fs::metadata(&file).unwrap().len();
    append_bytes(&file, b"\x05torn");
    let result = run(&["verify", path(dir.path())]);
    assert_eq!(result.code, 0);
    assert!(
        result.stdout.contains("demo: recovered (35 records"),
        "{}",
        result.stdout
    );
    assert!(
        result
            .stdout
            .contains(&format!("  torn tail: 5 bytes at byte {len}")),
        "{}",
        result.stdout
    );
    assert!(
        result.stdout.contains("1 clean, 1 recovered"),
        "{}",
        result.stdout
    );
    let warning: Vec<&str> = result.stderr.lines().collect();
    assert_eq!(warning.len(), 1);
    assert!(warning[0].starts_with("cuca: warning: session \"demo\" is damaged but loadable"));

    // Every reader still loads it, and says so once.
    let shown = run(&["show", path(dir.path()), "demo", "--kinds"]);
    assert_eq!(shown.code, 0);
    assert!(shown.stderr.contains("warning"));

    let json = run(&["verify", path(dir.path()), "demo", "--json"]);
    let value: serde_json::Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(value["verdict"], "recovered");
    assert_eq!(value["torn_tail_bytes"], 5);
}

#[test]
fn verify_a_skipped_frame_whose_neighbours_continue_is_recovered() {
    let dir = recorded();
    let file = dir.path().join("demo.cslog");
    let offset = std::fs::metadata(&file).unwrap().len();
    // A frame that does not decode, sealed by its terminator, then the next record in sequence.
    append_bytes(&file, b"\x03zz\x00");
    let backend = FileBackend::new(dir.path()).unwrap();
    backend
        .append(SessionRecord {
            session_id: "demo".into(),
            sequence: 35,
            timestamp_ms: 1,
            event: SessionEvent::Output {
                text: "after".into(),
            },
        })
        .unwrap();
    drop(backend);
    let result = run(&["verify", path(dir.path()), "demo"]);
    assert_eq!(result.code, 0, "{}", result.stderr);
    assert!(
        result.stdout.contains("demo: recovered (36 records"),
        "{}",
        result.stdout
    );
    assert!(
        result
            .stdout
            .contains(&format!("  skipped frame at byte {offset} (3 bytes)")),
        "{}",
        result.stdout
    );
    // A record after it continues the sequence: that, and only that, is what shows nothing
    // was lost there.
    assert!(
        result
            .stderr
            .contains("the sequence continues across it, so no record is missing there"),
        "{}",
        result.stderr
    );
}

#[test]
fn verify_a_flipped_last_frame_of_a_v1_file_says_what_is_known_not_that_nothing_is_missing() {
    // After a flipped last frame of a v1 file, verify says what is known and does not claim
    // "the sequence continues across it, so no record is missing there".
    let dir = tempfile::tempdir().unwrap();
    let name = "v1_bitflip_last_frame.cslog";
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cuca-reliability/tests/corpus");
    std::fs::copy(corpus.join(name), dir.path().join(name)).unwrap();
    let result = run(&["verify", path(dir.path()), "v1_bitflip_last_frame"]);
    assert_eq!(result.code, 0, "{}", result.stderr);
    assert!(
        result
            .stdout
            .contains("v1_bitflip_last_frame: recovered (4 records"),
        "{}",
        result.stdout
    );
    let warning: Vec<&str> = result.stderr.lines().collect();
    assert_eq!(warning.len(), 1, "{}", result.stderr);
    assert!(
        !warning[0].contains("continues across it"),
        "{}",
        warning[0]
    );
    assert!(
        warning[0].contains(
            "no record follows it, at the end of a v1 file: it is either an append torn and sealed (never acknowledged, nothing lost) or the last record, damaged and lost; v1 cannot tell which"
        ),
        "{}",
        warning[0]
    );
}

#[test]
fn verify_damage_that_loses_a_record_refuses_exit_1() {
    let dir = recorded();
    let file = dir.path().join("demo.cslog");
    let mut bytes = std::fs::read(&file).unwrap();
    // Flip a bit in the middle of the file: the frame fails its CRC and the records around it
    // jump a sequence number, so a recorded event may be lost.
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&file, &bytes).unwrap();

    let result = run(&["verify", path(dir.path())]);
    assert_eq!(result.code, 1);
    assert!(result.stdout.contains("demo: refused"), "{}", result.stdout);
    assert!(
        result.stdout.contains("  refused at byte "),
        "{}",
        result.stdout
    );
    assert!(result
        .stdout
        .contains("1 clean, 0 recovered (loadable), 1 refused"));
    assert_one_error_line(&result, "1 of 2 sessions");

    for args in [
        vec!["show", path(dir.path()), "demo"],
        vec!["replay", path(dir.path()), "demo"],
        vec!["export", path(dir.path()), "demo"],
    ] {
        let refused = run(&args);
        assert_eq!(refused.code, 1, "{args:?}");
        assert_one_error_line(&refused, "is damaged at byte");
        assert!(refused.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn verify_a_file_that_is_not_a_cslog_refuses_exit_1() {
    let dir = recorded();
    std::fs::write(dir.path().join("notes.cslog"), b"hello, world\n").unwrap();
    let result = run(&["verify", path(dir.path()), "notes"]);
    assert_eq!(result.code, 1);
    assert!(
        result.stdout.contains("not a .cslog file"),
        "{}",
        result.stdout
    );
}

#[test]
fn export_import_round_trips_and_import_refuses_an_existing_session() {
    let dir = recorded();
    let exported = run(&["export", path(dir.path()), "demo", "--format", "jsonl"]);
    assert_eq!(exported.code, 0);
    let jsonl = dir.path().join("demo.jsonl");
    std::fs::write(&jsonl, &exported.stdout).unwrap();

    let other = tempfile::tempdir().unwrap();
    let imported = run(&["import", path(&jsonl), path(other.path()), "demo"]);
    assert_eq!(imported.code, 0, "{}", imported.stderr);
    assert!(imported
        .stdout
        .starts_with("imported 35 records into session \"demo\""));
    // Byte for byte: the same records make the same frames (an import creates a v2 file; a
    // recording made before v2 differs in its version byte only, so that byte is left out).
    let (imported, recorded) = (
        std::fs::read(other.path().join("demo.cslog")).unwrap(),
        std::fs::read(dir.path().join("demo.cslog")).unwrap(),
    );
    assert_eq!(imported[8], 2);
    assert_eq!(imported[..8], recorded[..8]);
    assert_eq!(imported[9..], recorded[9..]);
    let again = run(&["export", path(other.path()), "demo"]);
    assert_eq!(again.stdout, exported.stdout);

    // Under another name every record is relabelled.
    let renamed = run(&["import", path(&jsonl), path(other.path()), "copy", "--json"]);
    let value: serde_json::Value = serde_json::from_str(renamed.stdout.trim()).unwrap();
    assert_eq!(value["records"], 35);
    let copy = FileBackend::new(other.path())
        .unwrap()
        .replay("copy")
        .unwrap();
    assert!(copy.iter().all(|r| r.session_id == "copy"));
    assert_eq!(copy[5].event, demo_records(dir.path())[5].event);

    let before = std::fs::read(other.path().join("demo.cslog")).unwrap();
    let existing = run(&["import", path(&jsonl), path(other.path()), "demo"]);
    assert_eq!(existing.code, 2);
    assert_one_error_line(&existing, "already exists");
    assert_eq!(
        std::fs::read(other.path().join("demo.cslog")).unwrap(),
        before
    );
}

#[test]
fn import_refuses_a_malformed_line_before_writing_anything() {
    let dir = tempfile::tempdir().unwrap();
    let exported = run(&["export", path(&fixtures_dir()), "demo"]);
    let mut text = exported.stdout.clone();
    text.push_str("{\"session_id\":\"demo\",\"sequence\":35}\n");
    let jsonl = dir.path().join("bad.jsonl");
    std::fs::write(&jsonl, text).unwrap();
    let result = run(&["import", path(&jsonl), path(dir.path()), "demo"]);
    assert_eq!(result.code, 1);
    assert_one_error_line(&result, "line 36: not a SessionRecord");
    assert!(!dir.path().join("demo.cslog").exists());

    let missing = run(&[
        "import",
        path(&dir.path().join("nope.jsonl")),
        path(dir.path()),
        "x",
    ]);
    assert_eq!(missing.code, 2);
    assert_one_error_line(&missing, "nope.jsonl");

    let bad_id = run(&["import", path(&jsonl), path(dir.path()), "../escape"]);
    assert_eq!(bad_id.code, 2);
}

#[test]
fn bad_arguments_are_usage_errors_and_help_is_success() {
    let missing_arg = run(&["replay"]);
    assert_eq!(missing_arg.code, 2);
    // A usage error is one `cuca: error:` line, with the usage inside it.
    assert_one_error_line(&missing_arg, "usage: cuca replay <STORE> <SESSION>");
    let bad_format = run(&["export", ".", "demo", "--format", "csv"]);
    assert_eq!(bad_format.code, 2);
    let help = run(&["--help"]);
    assert_eq!(help.code, 0);
    assert!(help.stdout.contains("Exit codes: 0 success"));
}

#[test]
fn verify_of_many_sessions_draws_no_progress_bar_or_colour_off_a_terminal() {
    // The bar and colours are for a person at a terminal: piped stderr stays plain, with or
    // without NO_COLOR.
    let dir = tempfile::tempdir().unwrap();
    let exported = run(&["export", path(&fixtures_dir()), "demo"]);
    let jsonl = dir.path().join("demo.jsonl");
    std::fs::write(&jsonl, &exported.stdout).unwrap();
    let store = dir.path().join("store");
    for i in 0..12 {
        let imported = run(&["import", path(&jsonl), path(&store), &format!("s{i:02}")]);
        assert_eq!(imported.code, 0);
    }
    // 12 files of 962 bytes (35 records each), plus two torn bytes.
    append_bytes(&store.join("s03.cslog"), b"\x02x");
    for no_color in [None, Some("1")] {
        let mut command = cuca();
        if let Some(value) = no_color {
            command.env("NO_COLOR", value);
        }
        let output = command.args(["verify", path(&store)]).output().unwrap();
        assert_eq!(output.status.code(), Some(0));
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("cuca: warning: session \"s03\""),
            "{stderr}"
        );
        assert!(
            !stderr.contains('\x1b') && !stderr.contains('\r'),
            "{stderr:?}"
        );
        let stdout = String::from_utf8(output.stdout).unwrap();
        assert!(stdout.ends_with("12 sessions, 420 records, 11546 bytes: 11 clean, 1 recovered (loadable), 0 refused\n"), "{stdout}");
    }
}

#[test]
fn compact_gzips_sessions_that_every_command_still_reads() {
    let dir = recorded();
    let records = demo_records(dir.path());
    let verify_before = run(&["verify", path(dir.path()), "demo", "--json"]);

    let compacted = run(&["compact", path(dir.path()), "--json"]);
    assert_eq!(compacted.code, 0, "{}", compacted.stderr);
    let rows: Vec<serde_json::Value> = compacted
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(rows.len(), 2, "{}", compacted.stdout);
    for row in &rows {
        assert_eq!(row["already_compacted"], false);
        assert!(
            row["bytes_after"].as_u64() < row["bytes_before"].as_u64(),
            "{row}"
        );
    }
    assert!(dir.path().join("demo.cslog.gz").is_file());
    assert!(!dir.path().join("demo.cslog").exists());

    // Read as before: the records, the scan report, the listing and the replay.
    assert_eq!(demo_records(dir.path()), records);
    let verify_after = run(&["verify", path(dir.path()), "demo", "--json"]);
    assert_eq!(verify_after.code, 0, "{}", verify_after.stderr);
    let (before, after): (serde_json::Value, serde_json::Value) = (
        serde_json::from_str(&verify_before.stdout).unwrap(),
        serde_json::from_str(&verify_after.stdout).unwrap(),
    );
    assert_eq!(before["records"], after["records"]);
    let listed = run(&["sessions", path(dir.path())]);
    assert!(listed.stdout.contains("clean, gz"), "{}", listed.stdout);
    let replay = run(&["replay", path(dir.path()), "demo"]);
    assert_eq!(replay.code, 0, "{}", replay.stderr);

    // Again: nothing to do. A fork expands the original to record its audit line.
    let again = run(&["compact", path(dir.path()), "demo"]);
    assert!(
        again.stdout.contains("compacted already"),
        "{}",
        again.stdout
    );
    let fork = run(&["fork", path(dir.path()), "demo:1"]);
    assert_eq!(fork.code, 0, "{}", fork.stderr);
    assert!(dir.path().join("demo.cslog").is_file());
    assert_eq!(demo_records(dir.path()).len(), records.len() + 1);

    // An import never writes into a compacted session.
    let export = dir.path().join("reasoning.jsonl");
    std::fs::write(
        &export,
        run(&["export", path(dir.path()), "reasoning"]).stdout,
    )
    .unwrap();
    let import = run(&["import", path(&export), path(dir.path()), "reasoning"]);
    assert_eq!(import.code, 2, "{}", import.stderr);
    assert_one_error_line(&import, "already exists");

    let missing = run(&["compact", path(dir.path()), "nobody"]);
    assert_eq!(missing.code, 2);
    assert_one_error_line(&missing, "not found");
}
