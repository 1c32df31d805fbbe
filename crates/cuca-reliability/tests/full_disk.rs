//! A disk that fills up, for real.
//!
//! Where the machine lets an unprivileged process mount (a user namespace: `unshare -rm`), the
//! child runs inside a private mount namespace on a tmpfs of a few hundred KiB and meets a real
//! `ENOSPC`; the files are copied out before the namespace goes. Everywhere, the `.cslog` test
//! also runs under `RLIMIT_FSIZE` (`ulimit -f` with `SIGXFSZ` ignored), where a write past the
//! limit is cut short and the next one fails with `EFBIG`: the same short-write path.
// Helpers outside `#[test]` functions unwrap too: a failure there should stop the test.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Command;

use cuca_reliability::payload;
use cuca_store_file::{scan, Verdict};

/// Whether this machine lets the test mount a tmpfs in a private namespace.
fn can_mount() -> bool {
    Command::new("unshare")
        .args([
            "-rm",
            "sh",
            "-c",
            "mount -t tmpfs -o size=64k tmpfs \"$1\"",
            "sh",
        ])
        .arg(std::env::temp_dir())
        .output()
        .is_ok_and(|output| output.status.success())
}

/// Runs `script` (`sh -ec`) in a private mount namespace with `$1` = a fresh mount point,
/// `$2` = the child binary, `$3` = a directory outside that survives; returns stdout lines.
fn in_tmpfs(script: &str, out: &Path) -> Vec<String> {
    let mount_point = tempfile::tempdir().unwrap();
    let output = Command::new("unshare")
        .args(["-rm", "sh", "-ec", script, "sh"])
        .arg(mount_point.path())
        .arg(env!("CARGO_BIN_EXE_cuca-reliability-child"))
        .arg(out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout.lines().map(str::to_owned).collect()
}

fn acks(lines: &[String]) -> Vec<u64> {
    lines
        .iter()
        .filter_map(|line| cuca_reliability::parse_ack(line))
        .collect()
}

fn line<'a>(lines: &'a [String], prefix: &str) -> &'a str {
    lines
        .iter()
        .find_map(|line| line.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in {lines:?}"))
}

/// Scans `path` and checks it holds exactly records `0..n`, intact.
fn assert_session(path: &Path, n: u64) -> Verdict {
    let report = scan(path).unwrap();
    assert!(report.is_loadable(), "{:?}", report.verdict);
    assert_eq!(report.records.len() as u64, n, "{path:?}");
    for (i, record) in report.records.iter().enumerate() {
        assert_eq!(record.sequence, i as u64);
        assert!(
            record.event == payload::session_event(i as u64),
            "record {i} is not what was written"
        );
    }
    report.verdict
}

#[test]
fn a_full_tmpfs_fails_the_append_clearly_and_the_file_reads_to_the_last_ack() {
    // ".cslog v1: A short write is an error: the handle never 'finishes' a partial frame,
    // reports the append as failed, and the file stays readable to the last acknowledged record."
    if !can_mount() {
        eprintln!(
            "FIGURES full-disk cslog: no unprivileged mount here; only the RLIMIT_FSIZE test ran"
        );
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let lines = in_tmpfs(
        r#"mount -t tmpfs -o size=1m tmpfs "$1"
           head -c 393216 /dev/zero > "$1/filler"
           "$2" session "$1" full buffered || true
           cp "$1/full.cslog" "$3/after-enospc.cslog"
           rm "$1/filler"
           echo resume
           "$2" session "$1" full buffered 3
           "$2" verify "$1" full
           cp "$1/full.cslog" "$3/after-resume.cslog""#,
        out.path(),
    );
    let split = lines.iter().position(|line| line == "resume").unwrap();
    let (filling, resumed) = lines.split_at(split);
    let first = acks(filling);
    assert_eq!(first, (0..first.len() as u64).collect::<Vec<_>>());
    let error = line(filling, "error ");
    assert!(
        error.contains("full.cslog"),
        "the error names the file: {error}"
    );
    assert!(
        error.contains("No space left on device") || error.contains("short write"),
        "{error}"
    );
    // Exactly the acknowledged records: the failed append left nothing that reads as a record.
    let n = first.len() as u64;
    let verdict = assert_session(&out.path().join("after-enospc.cslog"), n);
    // Space freed, a new process continues the sequence and seals whatever the failure left.
    assert_eq!(acks(resumed), vec![n, n + 1, n + 2]);
    assert_eq!(line(resumed, "records "), (n + 3).to_string());
    assert_eq!(line(resumed, "intact "), "true");
    assert_session(&out.path().join("after-resume.cslog"), n + 3);
    eprintln!("FIGURES full-disk cslog (tmpfs ENOSPC): acked={n} error={error:?} verdict_after_failure={verdict:?}");
}

#[test]
fn a_file_size_limit_fails_the_append_clearly_and_a_new_process_continues() {
    // RLIMIT_FSIZE: the write that crosses the limit is cut short (a real torn frame from the
    // real writer), the next gets EFBIG.
    let dir = tempfile::tempdir().unwrap();
    let child = env!("CARGO_BIN_EXE_cuca-reliability-child");
    let output = Command::new("sh")
        .args([
            "-c",
            r#"ulimit -f 2048; trap '' XFSZ; exec "$0" session "$1" fsize buffered"#,
        ])
        .arg(child)
        .arg(dir.path())
        .output()
        .unwrap();
    let lines: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert!(!output.status.success());
    let n = acks(&lines).len() as u64;
    assert!(n > 0);
    let error = line(&lines, "error ");
    assert!(error.contains("fsize.cslog"), "{error}");
    assert!(
        error.contains("File too large") || error.contains("short write"),
        "{error}"
    );
    let path = dir.path().join("fsize.cslog");
    assert!(std::fs::metadata(&path).unwrap().len() <= 2048 * 512);
    let verdict = assert_session(&path, n);

    let mut command = common::child();
    command
        .arg("session")
        .arg(dir.path())
        .args(["fsize", "buffered", "3"]);
    let (status, lines) = common::run_to_end(command);
    assert!(status.success(), "{lines:?}");
    assert_eq!(acks(&lines), vec![n, n + 1, n + 2]);
    assert_session(&path, n + 3);
    eprintln!("FIGURES full-disk cslog (RLIMIT_FSIZE): acked={n} error={error:?} verdict_after_failure={verdict:?}");
}

#[test]
fn a_full_disk_silences_the_call_log_once_and_every_call_still_succeeds() {
    // "A write failure never fails a call: the log goes silent for the process and says so
    // once on stderr, naming the path."
    if !can_mount() {
        eprintln!("FIGURES full-disk calllog: no unprivileged mount here; calllog's /dev/full test covers it");
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let lines = in_tmpfs(
        r#"mount -t tmpfs -o size=256k tmpfs "$1"
           "$2" calllog-full "$1/calls.jsonl" 200 2> "$3/stderr"
           cp "$1/calls.jsonl" "$3/calls.jsonl""#,
        out.path(),
    );
    assert_eq!(
        acks(&lines),
        (0..200).collect::<Vec<_>>(),
        "every call returned"
    );
    assert_eq!(line(&lines, "silenced "), "true");
    let stderr = std::fs::read_to_string(out.path().join("stderr")).unwrap();
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("cuca: call log off"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    // The row that meets the full disk is cut short (the OS writes what fits), so the one line
    // says "short write"; a row that finds no room at all says ENOSPC in the OS's words.
    assert!(warnings[0].contains("calls.jsonl"), "{}", warnings[0]);
    assert!(
        warnings[0].contains("short write") || warnings[0].contains("No space left"),
        "{}",
        warnings[0]
    );
    let report = cuca_calllog::read_rows(out.path().join("calls.jsonl")).unwrap();
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert!(!report.rows.is_empty());
    for row in &report.rows {
        let n = u64::from_str_radix(&row.id, 16).unwrap();
        if row.is_start() {
            assert_eq!(row.request_body, payload::call_body(n));
        } else {
            assert_eq!(row.completion_tokens, n);
        }
    }
    eprintln!(
        "FIGURES full-disk calllog: calls=200 rows_kept={} torn_tail={:?} warning={:?}",
        report.rows.len(),
        report.torn_tail,
        warnings[0]
    );
}

#[test]
fn a_full_disk_stops_journal_capture_with_the_reason_recorded() {
    // "capture that stops and never fails the run": a full disk stops capture with
    // write_failed, says so in the terminating line, and assembly reports it.
    if !can_mount() {
        eprintln!("FIGURES full-disk journal: no unprivileged mount here; journal's failing-sink tests cover it");
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let lines = in_tmpfs(
        r#"mount -t tmpfs -o size=256k tmpfs "$1"
           "$2" journal-full "$1" 64
           cp "$1/.cuca/replay.ndjson" "$3/replay.ndjson""#,
        out.path(),
    );
    assert_eq!(
        acks(&lines),
        (0..64).collect::<Vec<_>>(),
        "every recording call returned"
    );
    assert_eq!(line(&lines, "stopped "), "Some(WriteFailed)");
    let reason = line(&lines, "reason ");
    assert!(reason.contains("No space left"), "{reason}");
    let run_dir = tempfile::tempdir().unwrap();
    let report = cuca_journal::assemble::assemble_journal(
        &out.path().join("replay.ndjson"),
        run_dir.path(),
        &cuca_journal::assemble::AssembleOptions::default(),
    )
    .unwrap();
    assert_eq!(
        report.outcome.kind(),
        "write_failed",
        "{:?}",
        report.outcome
    );
    assert!(report.terminated);
    assert_eq!(report.last_seq, report.n_entries.checked_sub(1));
    eprintln!(
        "FIGURES full-disk journal: recorded=64 entries_kept={} outcome={:?}",
        report.n_entries, report.outcome
    );
}
