//! Listing through the real binary: `cuca sessions` computes its widths, sorts by
//! last activity and prints the most recent id; a damaged `.cslog.gz` is one refused row; a
//! `compact` of a directory carries on past a refused session.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::cuca;
use cuca::{FileBackend, SessionBackend, SessionEvent, SessionRecord};

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

/// Appends `n` Output records to `session`, stamped from `first_ms` on.
fn write(dir: &Path, session: &str, n: u64, first_ms: u64) {
    let backend = FileBackend::new(dir).unwrap();
    for sequence in 0..n {
        backend
            .append(SessionRecord {
                session_id: session.into(),
                sequence,
                timestamp_ms: first_ms + sequence,
                event: SessionEvent::Output {
                    text: format!("the vault is in Lisbon {sequence} ").repeat(8),
                },
            })
            .unwrap();
    }
}

#[test]
fn sessions_sizes_its_columns_sorts_by_activity_and_prints_the_last_id() {
    // "fixed 28-character columns: fork ids (and every UUID fork) break the table".
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "old", 3, 1_000_000);
    write(dir.path(), "newest", 2, 9_000_000);
    write(dir.path(), "b", 4, 5_000_000);
    let backend = FileBackend::new(dir.path()).unwrap();
    let fork = backend.fork("b", "b:2").unwrap();
    let nested = backend.fork(&fork, &format!("{fork}:1")).unwrap();
    assert!(nested.len() > 28, "{nested}");
    drop(backend);

    let listed = run(&["sessions", p(dir.path())]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let lines: Vec<&str> = listed.stdout.lines().collect();
    let header = lines[0];
    let rows = &lines[1..lines.len() - 1];
    assert_eq!(rows.len(), 5);
    // Every column starts where its header does, whatever the id's length.
    let first_at = header.find("FIRST").unwrap();
    let status_at = header.find("INTEGRITY").unwrap();
    let records_end = header.find("RECORDS").unwrap() + "RECORDS".len();
    for row in rows {
        assert_eq!(row.find("1970-"), Some(first_at), "{}", listed.stdout);
        assert_eq!(row.find("clean"), Some(status_at), "{}", listed.stdout);
        assert!(row.as_bytes()[records_end - 1].is_ascii_digit(), "{row}");
        assert_eq!(row.as_bytes()[records_end], b' ', "{row}");
    }
    // By last activity, newest first. A fork's records keep their stamps, and each Fork audit
    // record is stamped now, so `b` and its fork (whose own fork audited it a moment later)
    // are the most recent, in the order of their LAST column.
    let order: Vec<&str> = rows
        .iter()
        .map(|row| row.split(' ').next().unwrap())
        .collect();
    let last_at = header.find("LAST").unwrap();
    let lasts: Vec<&str> = rows.iter().map(|row| &row[last_at..last_at + 24]).collect();
    assert!(
        lasts.windows(2).all(|pair| pair[0] >= pair[1]),
        "{}",
        listed.stdout
    );
    assert!(order[0] == "b" || order[0] == fork, "{}", listed.stdout);
    assert_eq!(order[order.len() - 1], "old", "{}", listed.stdout);
    assert!(order.iter().position(|id| *id == "newest") < order.iter().position(|id| *id == "old"));

    let by_name = run(&["sessions", p(dir.path()), "--sort", "name"]);
    let names: Vec<&str> = by_name
        .stdout
        .lines()
        .skip(1)
        .take(5)
        .map(|row| row.split(' ').next().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);

    // "`--last` prints the most recent session's id (for `cuca replay DIR $(cuca sessions DIR --last)`)".
    // The most recent is the first row by activity: `b` or its fork, whichever audit record
    // was stamped later (they can fall in one millisecond).
    let last = run(&["sessions", p(dir.path()), "--last"]);
    assert_eq!(last.code, 0, "{}", last.stderr);
    assert_eq!(last.stdout, format!("{}\n", order[0]));
    let replayed = run(&["replay", p(dir.path()), last.stdout.trim()]);
    assert_eq!(replayed.code, 0, "{}", replayed.stderr);

    let empty = tempfile::tempdir().unwrap();
    let none = run(&["sessions", p(empty.path()), "--last"]);
    assert_eq!((none.code, none.stdout.as_str()), (2, ""));
}

/// Compacts `session`, then overwrites bytes in the middle of its gzip stream.
fn damage_compacted(dir: &Path, session: &str) {
    // Other tests in this binary spawn `cuca` at the same time: a child between fork and exec
    // holds a copy of every open descriptor, the just-dropped writer's locked file included,
    // so the lock can outlive the drop by a moment. Such a refusal is `Locked`, and a retry
    // after the exec goes through.
    let backend = FileBackend::new(dir).unwrap();
    let mut tries = 0;
    while let Err(error) = backend.compact(session) {
        tries += 1;
        assert!(
            matches!(error, cuca::PluginError::Locked { .. }) && tries < 50,
            "{error}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let packed = dir.join(format!("{session}.cslog.gz"));
    let mut bytes = std::fs::read(&packed).unwrap();
    let middle = bytes.len() / 2;
    for byte in &mut bytes[middle..middle + 16] {
        *byte ^= 0x5a;
    }
    std::fs::write(&packed, bytes).unwrap();
}

#[test]
fn a_damaged_compacted_file_is_one_refused_row_in_verify_and_sessions() {
    // "One damaged `.cslog.gz` makes `verify` and `sessions` fail for the whole directory
    // with no rows. A damaged compacted file is a `refused` row like a damaged live file."
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a-packed", 200, 1_000);
    write(dir.path(), "b-live", 3, 2_000);
    damage_compacted(dir.path(), "a-packed");

    let verified = run(&["verify", p(dir.path())]);
    assert_eq!(verified.code, 1, "{}", verified.stderr);
    assert!(
        verified.stdout.contains("a-packed: refused"),
        "{}",
        verified.stdout
    );
    assert!(
        verified.stdout.contains("b-live: clean (3 records"),
        "{}",
        verified.stdout
    );
    assert!(
        verified
            .stdout
            .contains("1 clean, 0 recovered (loadable), 1 refused"),
        "{}",
        verified.stdout
    );
    assert_eq!(verified.stderr.lines().count(), 1, "{}", verified.stderr);
    assert!(
        verified.stderr.starts_with("cuca: error: 1 of 2 sessions"),
        "{}",
        verified.stderr
    );

    let json = run(&["verify", p(dir.path()), "--json"]);
    let rows: Vec<serde_json::Value> = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["verdict"], "refused");
    assert!(rows[0]["refused_reason"]
        .as_str()
        .unwrap()
        .contains("a-packed.cslog.gz"));

    let listed = run(&["sessions", p(dir.path())]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let packed_row = listed
        .stdout
        .lines()
        .find(|l| l.starts_with("a-packed "))
        .unwrap();
    assert!(packed_row.contains("refused, gz"), "{packed_row}");
    assert!(listed
        .stdout
        .lines()
        .any(|l| l.starts_with("b-live ") && l.contains("clean")));
}

#[test]
fn compact_carries_on_past_a_refused_session_and_exits_1() {
    // "`cuca compact DIR` stops at the first refused session and compacts nothing after it.
    // Carry on, then print a summary and exit 1 if anything was refused."
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a-bad.cslog"), b"not a session file").unwrap();
    write(dir.path(), "b-good", 50, 1_000);
    write(dir.path(), "c-good", 50, 2_000);

    let compacted = run(&["compact", p(dir.path())]);
    assert_eq!(compacted.code, 1, "{}", compacted.stderr);
    assert!(
        compacted.stdout.starts_with("a-bad: refused: "),
        "{}",
        compacted.stdout
    );
    assert!(
        compacted.stdout.contains("\nb-good: 50 records, "),
        "{}",
        compacted.stdout
    );
    assert!(
        compacted.stdout.contains("\nc-good: 50 records, "),
        "{}",
        compacted.stdout
    );
    assert!(
        compacted
            .stdout
            .contains("2 of 3 sessions compacted, 1 refused: "),
        "{}",
        compacted.stdout
    );
    assert!(dir.path().join("b-good.cslog.gz").is_file());
    assert!(dir.path().join("c-good.cslog.gz").is_file());
    assert!(dir.path().join("a-bad.cslog").is_file());
    assert_eq!(compacted.stderr.lines().count(), 1, "{}", compacted.stderr);
    assert!(
        compacted.stderr.starts_with("cuca: error: 1 of 3 sessions"),
        "{}",
        compacted.stderr
    );
}

#[test]
fn sessions_shows_ten_nested_forks_of_a_uuid_readably_and_json_keeps_the_ids_whole() {
    // Forks nested 10 deep from a 36-byte UUID session work, and `cuca sessions` lists them
    // readably.
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let root = "0b3c5a6e-9d2f-4f1a-8c7b-2e4d6f8a0c1e";
    for sequence in 0..3 {
        backend
            .append(SessionRecord {
                session_id: root.into(),
                sequence,
                timestamp_ms: 1_700_000_000_000 + sequence,
                event: SessionEvent::Output {
                    text: "token".into(),
                },
            })
            .unwrap();
    }
    let mut ids = vec![root.to_owned()];
    for _ in 0..10 {
        let parent = ids.last().unwrap().clone();
        ids.push(backend.fork(&parent, &format!("{parent}:1")).unwrap());
    }
    drop(backend);
    let output = cuca().arg("sessions").arg(dir.path()).output().unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    let longest = stdout.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(longest < 260, "a line of {longest} characters:\n{stdout}");
    assert!(
        stdout.contains(&format!(
            "{root} >1#0 >1#1 >1#2 >1#3 >1#4 >1#5 >1#6 >1#7 >1#8 >1#9 "
        )),
        "{stdout}"
    );
    let output = cuca()
        .arg("sessions")
        .arg(dir.path())
        .arg("--json")
        .output()
        .unwrap();
    let listed: Vec<String> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["session"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let mut expected = ids.clone();
    expected.sort();
    let mut got = listed.clone();
    got.sort();
    assert_eq!(got, expected);
}

/// `cuca sessions` groups conversations under their base session: a session's
/// conversations (`{base}:conv:{n}`) follow their base, indented, whatever their activity.
#[test]
fn sessions_lists_a_sessions_conversations_under_it() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "app", 2, 1_000_000);
    write(dir.path(), "other", 2, 5_000_000);
    write(dir.path(), "app:conv:2", 2, 9_000_000);
    write(dir.path(), "app:conv:1", 2, 3_000_000);
    let listed = run(&["sessions", p(dir.path())]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let ids: Vec<&str> = listed
        .stdout
        .lines()
        .skip(1)
        .filter(|l| !l.contains(" sessions in "))
        .map(|l| l.split("  ").find(|c| !c.is_empty()).unwrap().trim())
        .collect();
    // The app's group is the most active (its conversation 2 is the newest record).
    assert_eq!(ids, ["app", "app:conv:1", "app:conv:2", "other"]);
    assert!(
        listed.stdout.contains("\n  app:conv:1"),
        "{}",
        listed.stdout
    );
    let json = run(&["sessions", p(dir.path()), "--json"]);
    let rows: Vec<serde_json::Value> = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows[1]["session"], "app:conv:1");
    assert_eq!(rows[1]["conversation_of"], "app");
    assert!(rows[0]["conversation_of"].is_null());
}
