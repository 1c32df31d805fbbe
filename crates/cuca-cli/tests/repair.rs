//! `cuca repair`, what `cuca verify` flags about sequences, and how much it prints about a
//! hostile file, driven through the real binary on `.cslog`
//! files in temp dirs.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::*;
use cuca::store_file::{encode_frame, HEADER, HEADER_LEN, VERSION_1};
use cuca::{SessionEvent, SessionRecord};

fn record(sequence: u64) -> SessionRecord {
    SessionRecord {
        session_id: "s".into(),
        sequence,
        timestamp_ms: 1_700_000_000_000,
        event: SessionEvent::Output {
            text: format!("record {sequence}"),
        },
    }
}

/// A file of records with these sequences, and where each frame starts.
fn file_of(sequences: &[u64]) -> (Vec<u8>, Vec<usize>) {
    let mut bytes = HEADER.to_vec();
    let mut starts = Vec::new();
    for &sequence in sequences {
        starts.push(bytes.len());
        encode_frame(&record(sequence), &mut bytes).unwrap();
    }
    (bytes, starts)
}

fn run(args: &[&str]) -> (i32, String, String) {
    let output = cuca().args(args).output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (
        output.status.code().unwrap(),
        String::from_utf8(output.stdout).unwrap(),
        stderr,
    )
}

fn path(dir: &Path) -> &str {
    dir.to_str().unwrap()
}

/// "A person who decides to accept the loss needs a deliberate way to do it (`cuca repair
/// SESSION` or similar: writes a new file, keeps the damaged one aside, never edits in place,
/// prints what was dropped)."
#[test]
fn repair_accepts_the_loss_of_a_damaged_last_record_and_prints_what_was_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.cslog");
    let (mut bytes, starts) = file_of(&[0, 1, 2]);
    bytes[starts[2] + 2] ^= 0x08;
    std::fs::write(&file, &bytes).unwrap();

    let (code, stdout, _) = run(&["verify", path(dir.path()), "s"]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains(&format!("refused at byte {}", starts[2])),
        "{stdout}"
    );

    let (code, stdout, stderr) = run(&["repair", path(dir.path()), "s"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("with 2 records"), "{stdout}");
    assert!(stdout.contains("s.cslog.damaged"), "{stdout}");
    assert!(
        stdout.contains(&format!("dropped 1 damaged frame at byte {}", starts[2])),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read(dir.path().join("s.cslog.damaged")).unwrap(),
        bytes
    );

    let (code, stdout, _) = run(&["verify", path(dir.path()), "s"]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("s: clean (2 records"), "{stdout}");

    // Again: nothing to drop, nothing written.
    let (code, stdout, _) = run(&["repair", path(dir.path()), "s", "--json"]);
    assert_eq!(code, 0);
    let value: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(value["repaired"], false);
    let (code, _, stderr) = run(&["repair", path(dir.path()), "nobody"]);
    assert_eq!(code, 2, "{stderr}");
}

/// `verify` flags duplicates in any file and reports a sequence that goes backwards: in a v1 file they load, so verify exits 0 and names them.
#[test]
fn verify_flags_repeated_and_backward_sequences_in_a_v1_file() {
    let dir = tempfile::tempdir().unwrap();
    let (mut bytes, starts) = file_of(&[0, 1, 1, 0]);
    bytes[HEADER_LEN - 1] = VERSION_1;
    std::fs::write(dir.path().join("s.cslog"), &bytes).unwrap();
    let (code, stdout, _) = run(&["verify", path(dir.path())]);
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.contains(&format!(
            "finding: record at byte {} repeats sequence 1",
            starts[2]
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "finding: record at byte {} goes back from sequence 1 to 0",
            starts[3]
        )),
        "{stdout}"
    );
    let (_, json, _) = run(&["verify", path(dir.path()), "--json"]);
    let value: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(value["findings_total"], 2);
}

/// A run of damage is summarised in one line, not listed byte by byte (19 MB of appended
/// zeros once cost 2.2 GB of `cuca verify` output).
#[test]
fn verify_of_a_session_with_a_megabyte_of_zeros_prints_one_line_for_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let (mut bytes, _) = file_of(&[0, 1]);
    let clean_len = bytes.len();
    bytes.resize(clean_len + (1 << 20), 0);
    std::fs::write(dir.path().join("s.cslog"), &bytes).unwrap();
    let (code, stdout, _) = run(&["verify", path(dir.path()), "s"]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(stdout.lines().count(), 3, "{stdout}");
    assert!(
        stdout.contains(&format!(
            "  skipped 1048576 frames at byte {clean_len} (1048575 bytes; the first: empty frame)"
        )),
        "{stdout}"
    );
}
