//! `cuca logs` through the real binary over call logs written by `cuca_calllog`'s own writer.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::path::Path;

use common::cuca;
use cuca::calllog::{CallLog, Ended, Record};

/// Writes a call log with two runs: three finished calls (one 429, one 500), one call still
/// in flight, one call that was dropped unfinished, and one row from 2020.
fn write_log(path: &Path) -> String {
    let log = CallLog::builder().path(Some(path.to_path_buf())).build();
    let started = |run: &str| {
        log.start(Record {
            run: run.into(),
            tag: "turn".into(),
            model: "tiny".into(),
            stream: true,
            attempt: 1,
            ..Default::default()
        })
    };
    started("run-a").finish(Record {
        status: 200,
        ttft_ms: 10,
        prompt_tokens: 40,
        completion_tokens: 12,
        ..Default::default()
    });
    started("run-a").finish(Record {
        status: 429,
        error: "slow down".into(),
        ttft_ms: 30,
        ..Default::default()
    });
    started("run-b").finish(Record {
        status: 500,
        error: "boom".into(),
        ..Default::default()
    });
    started("run-b").end(Ended::Cancelled);
    // "a start with no end beside it is a call that is still in flight" (seed 003).
    let in_flight = started("run-b");
    let id = in_flight.id().to_owned();
    std::mem::forget(in_flight);
    log.append(Record {
        ts: "2020-01-01T00:00:00.000Z".into(),
        run: "run-old".into(),
        phase: "start".into(),
        id: "0ld0ld00".into(),
        ..Default::default()
    });
    log.close();
    id
}

fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut command = cuca();
    command.env_remove("CUCA_HOME").env_remove("XDG_STATE_HOME");
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.args(args).output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (
        output.status.code().unwrap(),
        String::from_utf8(output.stdout).unwrap(),
        stderr,
    )
}

#[test]
fn path_follows_the_call_log_resolution() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path().to_str().unwrap();
    let (code, stdout, _) = run(&["logs", "--path"], &[("CUCA_HOME", home)]);
    assert_eq!(code, 0);
    assert_eq!(stdout, format!("{home}/logs/calls.jsonl\n"));
    let (_, stdout, _) = run(&["logs", "--path"], &[("CUCA_CALL_LOG", "off")]);
    assert_eq!(stdout, "off\n");
    let (_, stdout, _) = run(
        &["logs", "--path"],
        &[
            ("CUCA_CALL_LOG", "/tmp/elsewhere.jsonl"),
            ("CUCA_HOME", home),
        ],
    );
    assert_eq!(stdout, "/tmp/elsewhere.jsonl\n");
    let (code, _, stderr) = run(&["logs"], &[("CUCA_CALL_LOG", "off")]);
    assert_eq!(code, 2);
    assert!(
        stderr.starts_with("cuca: error: the call log is off"),
        "{stderr}"
    );
    // The message names the real cause, not a guess at CUCA_HOME/HOME.
    assert!(stderr.contains("(CUCA_CALL_LOG=off)"), "{stderr}");
    assert!(!stderr.contains("set CUCA_HOME or HOME"), "{stderr}");
}

#[test]
fn summary_counts_runs_tokens_failures_in_flight_and_ttft() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("logs").join("calls.jsonl");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let open_id = write_log(&path);
    // The default path: resolved from CUCA_HOME, no --file.
    let (code, stdout, stderr) = run(&["logs"], &[("CUCA_HOME", home.path().to_str().unwrap())]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains(": 10 rows\n"), "{stdout}");
    assert!(stdout.contains("in flight: 2\n"), "{stdout}");
    assert!(stdout.contains(&format!("id={open_id}")), "{stdout}");
    assert!(
        stdout.contains("  run-a: 2 calls, 40 prompt + 12 completion tokens, 1 failed"),
        "{stdout}"
    );
    assert!(stdout.contains("  run-b: 3 calls, 0 prompt + 0 completion tokens, 1 failed"));
    assert!(
        stdout.contains("failures by status: 429 1, 500 1\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("ttft over 2 calls: p50 10 ms, p90 30 ms, p99 30 ms"),
        "{stdout}"
    );

    let file = path.to_str().unwrap();
    let (_, json, _) = run(&["logs", "--file", file, "--json"], &[]);
    let value: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(value["rows"], 10);
    assert_eq!(value["in_flight"], 2);
    assert_eq!(value["failures_by_status"]["500"], 1);
    assert_eq!(value["ttft_ms"]["p50"], 10);
    assert_eq!(value["runs"][0]["run"], "run-a");
    assert_eq!(value["runs"][0]["calls"], 2);
}

#[test]
fn filters_in_flight_failed_run_and_since() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calls.jsonl");
    let open_id = write_log(&path);
    let file = path.to_str().unwrap();

    let (_, stdout, _) = run(
        &["logs", "--file", file, "--in-flight", "--since", "1h"],
        &[],
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    assert!(lines[0].contains(&format!("id={open_id}")) && lines[0].contains("ago)"));

    let (_, stdout, _) = run(&["logs", "--file", file, "--in-flight", "--json"], &[]);
    let ids: Vec<String> = stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(ids, [open_id.clone(), "0ld0ld00".to_owned()]);

    let (_, stdout, _) = run(&["logs", "--file", file, "--failed"], &[]);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(lines[0].contains("status=429") && lines[0].contains("error=\"slow down\""));
    assert!(lines[1].contains("status=500"));

    let (_, stdout, _) = run(&["logs", "--file", file, "--run", "run-a"], &[]);
    assert!(
        stdout.contains(": 4 rows\n") && !stdout.contains("run-b"),
        "{stdout}"
    );

    let (code, _, stderr) = run(&["logs", "--file", file, "--since", "soon"], &[]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--since"), "{stderr}");
}

#[test]
fn a_torn_last_row_is_skipped_with_a_warning_and_a_missing_file_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calls.jsonl");
    write_log(&path);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    file.write_all(b"{\"ts\":\"2026-").unwrap();
    let (code, stdout, stderr) = run(&["logs", "--file", path.to_str().unwrap()], &[]);
    assert_eq!(code, 0);
    assert!(stdout.contains(": 10 rows\n"));
    assert!(
        stderr.starts_with("cuca: warning: ")
            && stderr.contains("unterminated last line of 12 bytes"),
        "{stderr}"
    );

    let missing = dir.path().join("nope.jsonl");
    let (code, _, stderr) = run(&["logs", "--file", missing.to_str().unwrap()], &[]);
    assert_eq!(code, 2);
    assert_eq!(stderr.lines().count(), 1);
    assert!(stderr.contains("nope.jsonl does not exist"), "{stderr}");
}

#[test]
fn logs_reads_the_rows_the_real_client_writes() {
    // The recorder behind fixtures/sessions, with the client's call log pointed at a temp file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calls.jsonl");
    let log = CallLog::builder().path(Some(path.clone())).build();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(common::record_sessions_logged(
            &dir.path().join("sessions"),
            log,
        ));

    let file = path.to_str().unwrap();
    let (code, stdout, stderr) = run(&["logs", "--file", file], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains(": 6 rows\n"), "{stdout}");
    assert!(stdout.contains("in flight: 0\n"), "{stdout}");
    // stream-basic and stream-second-turn report 40 and 68 prompt tokens, 12 completion each.
    assert!(
        stdout.contains("  run-demo: 2 calls, 108 prompt + 24 completion tokens, 0 failed"),
        "{stdout}"
    );
    // One call is "1 call", not "1 calls".
    assert!(stdout.contains("  run-reasoning: 1 call,"), "{stdout}");
    assert!(stdout.contains("failures: none\n"), "{stdout}");

    let (_, json, _) = run(
        &["logs", "--file", file, "--run", "run-demo", "--json"],
        &[],
    );
    let value: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(value["rows"], 4);
    assert_eq!(value["runs"][0]["prompt_tokens"], 108);
}

#[test]
fn logs_counts_only_rows_bounds_its_warnings_refuses_two_listings_and_ages_in_flight_calls() {
    // Only call-log rows count as rows (a session export is not "35 rows"); a binary file
    // prints a bounded number of warnings; `--in-flight --failed` is refused rather than one
    // silently dropped; the summary's in-flight rows carry the age `docs/cli.md` promises.
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("export.jsonl");
    std::fs::write(
        &export,
        "{\"session_id\":\"demo\",\"sequence\":0,\"timestamp_ms\":0,\"event\":{\"Output\":{\"text\":\"hi\"}}}\n{}\n",
    )
    .unwrap();
    let (code, stdout, stderr) = run(&["logs", "--file", export.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains(": 0 rows"), "{stdout}");
    assert_eq!(stderr.lines().count(), 2, "{stderr}");

    let binary = dir.path().join("binary.jsonl");
    let mut bytes = Vec::new();
    for _ in 0..200 {
        bytes.extend_from_slice(&[0xff, 0xfe, 0x00, b'\n']);
    }
    std::fs::write(&binary, bytes).unwrap();
    let (code, _, stderr) = run(&["logs", "--file", binary.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stderr.lines().count(), 6, "{stderr}");
    assert!(stderr.contains("195 more lines skipped"), "{stderr}");

    let log = dir.path().join("calls.jsonl");
    write_log(&log);
    let (code, stdout, stderr) = run(
        &[
            "logs",
            "--file",
            log.to_str().unwrap(),
            "--in-flight",
            "--failed",
        ],
        &[],
    );
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(stdout, "");

    let (code, stdout, _) = run(&["logs", "--file", log.to_str().unwrap()], &[]);
    assert_eq!(code, 0);
    let in_flight: Vec<&str> = stdout
        .lines()
        .skip_while(|line| !line.starts_with("in flight:"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .collect();
    assert!(!in_flight.is_empty(), "{stdout}");
    assert!(
        in_flight.iter().all(|line| line.ends_with(" ago)")),
        "{stdout}"
    );
}
