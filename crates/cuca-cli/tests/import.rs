//! `cuca import`: the input's sequences are a session's (0, 1, 2, … in order), and a new
//! session is created atomically, so two imports of one id cannot interleave.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use common::*;
use cuca::{FileBackend, SessionBackend, SessionEvent, SessionRecord};

struct Run {
    code: i32,
    stderr: String,
}

fn run(args: &[&str]) -> Run {
    let output = cuca().args(args).output().unwrap();
    let run = Run {
        code: output.status.code().unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    };
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    run
}

fn path(dir: &Path) -> &str {
    dir.to_str().unwrap()
}

/// JSON Lines of records of "demo" with these sequences; `None` is a blank line.
fn jsonl(sequences: &[Option<u64>]) -> String {
    let mut text = String::new();
    for sequence in sequences {
        if let Some(sequence) = sequence {
            let record = SessionRecord {
                session_id: "demo".into(),
                sequence: *sequence,
                timestamp_ms: 1_700_000_000_000,
                event: SessionEvent::Output {
                    text: format!("record {sequence}"),
                },
            };
            text.push_str(&serde_json::to_string(&record).unwrap());
        }
        text.push('\n');
    }
    text
}

/// `cuca import` refuses out-of-order (0,2,1), duplicate (0,0,5) or gapped input with the
/// first bad line named, where it once accepted them and `verify` called them clean.
#[test]
fn import_refuses_out_of_order_duplicate_or_gapped_input_naming_the_first_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&[Option<u64>], &str)] = &[
        (
            &[Some(0), Some(2), Some(1)],
            "line 2: sequence 2 after 0 (sequence 1 is missing)",
        ),
        (
            &[Some(0), Some(0), Some(5)],
            "line 2: sequence 0 again (out of order or duplicated)",
        ),
        (
            &[Some(0), Some(1), Some(2), Some(1)],
            "line 4: sequence 1 again",
        ),
        (
            &[Some(0), Some(1), Some(5)],
            "line 3: sequence 5 after 1 (sequences 2 to 4 are missing)",
        ),
        (&[Some(3), Some(4)], "line 1: sequence 3 first"),
        // Blank lines are skipped, and counted: the line named is the file's line.
        (
            &[Some(0), None, None, Some(2)],
            "line 4: sequence 2 after 0",
        ),
    ];
    for (i, (sequences, needle)) in cases.iter().enumerate() {
        let input = dir.path().join(format!("case-{i}.jsonl"));
        std::fs::write(&input, jsonl(sequences)).unwrap();
        let store = dir.path().join(format!("store-{i}"));
        let result = run(&["import", path(&input), path(&store), "demo"]);
        assert_eq!(result.code, 1, "{sequences:?}: {}", result.stderr);
        assert_eq!(result.stderr.lines().count(), 1, "{}", result.stderr);
        assert!(
            result.stderr.contains(needle),
            "{sequences:?}: {}",
            result.stderr
        );
        assert!(
            result.stderr.contains(&format!("case-{i}.jsonl")),
            "{}",
            result.stderr
        );
        assert!(
            !store.join("demo.cslog").exists(),
            "{sequences:?} wrote a session"
        );
    }
    // Dense input is taken.
    let input = dir.path().join("dense.jsonl");
    std::fs::write(&input, jsonl(&[Some(0), None, Some(1), Some(2)])).unwrap();
    let store = dir.path().join("dense");
    let result = run(&["import", path(&input), path(&store), "demo"]);
    assert_eq!(result.code, 0, "{}", result.stderr);
    let stored = FileBackend::new(&store).unwrap().replay("demo").unwrap();
    assert_eq!(
        stored.iter().map(|r| r.sequence).collect::<Vec<_>>(),
        [0, 1, 2]
    );
}

/// Two imports of the same id cannot interleave: `cuca import` creates a session
/// atomically if it is absent, rather than checking and then appending without the session's
/// lock. The first import
/// reads its input from a pipe that stays open, so it has checked the store but not written;
/// a second import of the same id runs to the end meanwhile. When the first one's input
/// ends, it finds the session created by the other and writes nothing into it.
#[test]
fn two_imports_of_one_id_cannot_interleave() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let theirs = dir.path().join("theirs.jsonl");
    std::fs::write(&theirs, jsonl(&[Some(0), Some(1), Some(2)])).unwrap();

    let mut first = std::process::Command::new(assert_cmd::cargo::cargo_bin("cuca"))
        .env_remove("CUCA_CALL_LOG")
        .args(["import", "-", path(&store), "shared"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = first.stdin.take().unwrap();
    stdin
        .write_all(jsonl(&[Some(0), Some(1), Some(2), Some(3), Some(4)]).as_bytes())
        .unwrap();
    stdin.flush().unwrap();

    let second = run(&["import", path(&theirs), path(&store), "shared"]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    let session = store.join("shared.cslog");
    let after_second = std::fs::read(&session).unwrap();

    drop(stdin); // the first import's input ends here
    let first = first.wait_with_output().unwrap();
    let stderr = String::from_utf8(first.stderr).unwrap();
    assert_eq!(first.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("already exists"), "{stderr}");
    assert_eq!(
        std::fs::read(&session).unwrap(),
        after_second,
        "the refused import wrote nothing"
    );
    let stored = FileBackend::new(&store).unwrap().replay("shared").unwrap();
    assert_eq!(
        stored.iter().map(|r| r.sequence).collect::<Vec<_>>(),
        [0, 1, 2]
    );
}
