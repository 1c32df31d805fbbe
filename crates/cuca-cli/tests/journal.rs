//! `cuca journal` and `cuca serve` through the real binary, over journals written by the real
//! `Recorder` in temp dirs.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::cuca;
use cuca::journal::format::RequestRole;
use cuca::journal::{Recorder, RecorderConfig};
use cuca::{Message, MessageContentBlock, UnifiedRequest, UnifiedResponse};

/// Records a journal of two model calls into `<workspace>/.cuca/replay.ndjson`.
fn record_journal(workspace: &Path) -> PathBuf {
    let recorder = Recorder::start(RecorderConfig::new(workspace, "run-1").unwrap()).unwrap();
    let request = UnifiedRequest::new(vec![
        Message::system("You are terse."),
        Message::user("hello"),
    ]);
    let response = UnifiedResponse {
        content: vec![MessageContentBlock::text("hi")],
        ..Default::default()
    };
    recorder.model_io(
        "root",
        &request,
        RequestRole::AgentTurn,
        &response,
        Duration::from_millis(5),
    );
    recorder.model_io(
        "root",
        &request,
        RequestRole::AgentTurn,
        &response,
        Duration::from_millis(7),
    );
    recorder.finish();
    recorder.path().to_path_buf()
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

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn assemble_then_show_summarises_the_record() {
    let tree = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let journal = record_journal(tree.path());
    let run_dir = runs.path().join("run-1");
    let (code, stdout, stderr) = run(&["journal", "assemble", s(tree.path()), s(&run_dir)]);
    assert_eq!(code, 0, "{stderr}");
    let record = run_dir.join("replay.json.gz");
    assert!(
        stdout.starts_with(&format!("wrote {}", record.display())),
        "{stdout}"
    );
    assert!(stdout.contains("outcome: complete\n"), "{stdout}");
    assert!(stdout.contains("entries: 2 (model_io 2)\n"), "{stdout}");
    assert!(
        stdout.contains("pools: 3 messages, 0 toolsets, 0 texts, 0 clips; 0 agents\n"),
        "{stdout}"
    );
    assert!(stderr.is_empty(), "{stderr}");
    // "On success the stage removes the journal from the collected tree".
    assert!(!journal.exists());

    let (code, stdout, _) = run(&["journal", "show", s(&record)]);
    assert_eq!(code, 0);
    assert!(stdout.contains("session: run-1\n"), "{stdout}");
    assert!(stdout.contains("outcome: complete\n"), "{stdout}");
    assert!(stdout.contains("entries: 2 (model_io 2)\n"), "{stdout}");
    assert!(stdout.contains("pools: "), "{stdout}");

    let (_, json, _) = run(&["journal", "show", s(&record), "--json"]);
    let value: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(value["format_version"], 1);
    assert_eq!(value["entries_by_kind"]["model_io"], 2);
    assert_eq!(value["outcome"]["kind"], "complete");
}

#[test]
fn a_journal_with_no_terminating_line_assembles_as_session_killed_with_a_warning() {
    let tree = tempfile::tempdir().unwrap();
    let run_dir = tempfile::tempdir().unwrap();
    let journal = record_journal(tree.path());
    let text = std::fs::read_to_string(&journal).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.pop(); // the terminating line: what a killed session never writes
    std::fs::write(&journal, lines.join("\n") + "\n").unwrap();
    let (code, stdout, stderr) = run(&[
        "journal",
        "assemble",
        s(tree.path()),
        s(run_dir.path()),
        "--json",
    ]);
    assert_eq!(code, 0);
    let value: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(value["outcome"]["kind"], "session_killed");
    assert_eq!(value["terminated"], false);
    assert!(stderr
        .contains("cuca: warning: the record says the capture did not complete: session_killed"));
}

#[test]
fn a_journal_in_another_format_is_refused_exit_1_and_left_in_place() {
    let tree = tempfile::tempdir().unwrap();
    let run_dir = tempfile::tempdir().unwrap();
    let journal = record_journal(tree.path());
    let text = std::fs::read_to_string(&journal).unwrap();
    std::fs::write(
        &journal,
        text.replacen("\"formatVersion\":1", "\"formatVersion\":2", 1),
    )
    .unwrap();
    let (code, stdout, stderr) = run(&["journal", "assemble", s(tree.path()), s(run_dir.path())]);
    assert_eq!(code, 1);
    assert!(stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("cuca: error: no record written: journal"),
        "{stderr}"
    );
    assert!(
        stderr.contains("format 2; this build reads format 1 only"),
        "{stderr}"
    );
    assert!(journal.exists());
    assert!(!run_dir.path().join("replay.json.gz").exists());

    // Salvage swallows the refusal by design; the CLI still says why and exits 1.
    let (code, _, stderr) = run(&["journal", "salvage", s(&journal), s(run_dir.path())]);
    assert_eq!(code, 1);
    assert!(stderr.contains("format 2"), "{stderr}");
    assert!(stderr.contains("cuca: error: salvage of"), "{stderr}");
}

#[test]
fn salvage_assembles_a_journal_and_leaves_it_untouched() {
    let tree = tempfile::tempdir().unwrap();
    let run_dir = tempfile::tempdir().unwrap();
    let journal = record_journal(tree.path());
    let before = std::fs::read(&journal).unwrap();
    let (code, stdout, stderr) = run(&["journal", "salvage", s(&journal), s(run_dir.path())]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("outcome: complete"), "{stdout}");
    assert_eq!(std::fs::read(&journal).unwrap(), before);
    assert!(run_dir.path().join("replay.json.gz").is_file());
}

#[test]
fn missing_inputs_are_usage_errors_and_bad_records_are_failures() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let empty_tree = tempfile::tempdir().unwrap();
    for (args, needle) in [
        (
            vec!["journal", "assemble", s(&missing), s(dir.path())],
            "is not a directory",
        ),
        (
            vec!["journal", "assemble", s(empty_tree.path()), s(dir.path())],
            "holds no journal",
        ),
        (
            vec!["journal", "salvage", s(&missing), s(dir.path())],
            "is not a file",
        ),
        (vec!["journal", "show", s(&missing)], "nope"),
    ] {
        let (code, _, stderr) = run(&args);
        assert_eq!(code, 2, "{args:?}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("cuca: ") && stderr.contains(needle),
            "{stderr}"
        );
    }
    let not_gzip = dir.path().join("replay.json.gz");
    std::fs::write(&not_gzip, b"{\"formatVersion\":1}").unwrap();
    let (code, _, stderr) = run(&["journal", "show", s(&not_gzip)]);
    assert_eq!(code, 1);
    assert!(stderr.contains("is malformed"), "{stderr}");

    let other_format = dir.path().join("v2.json.gz");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(br#"{"formatVersion":2,"sessionId":"s"}"#)
        .unwrap();
    std::fs::write(&other_format, gz.finish().unwrap()).unwrap();
    let (code, _, stderr) = run(&["journal", "show", s(&other_format)]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("format 2; this build reads format 1 only"),
        "{stderr}"
    );
}

/// Kills the server when the test ends, whichever way it ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_get(address: &str, path: &str, accept_encoding: &str) -> (String, Vec<u8>) {
    let mut stream = TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nAccept-Encoding: {accept_encoding}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8(response[..split].to_vec()).unwrap();
    (head, response[split + 4..].to_vec())
}

#[test]
fn serve_prints_its_url_and_answers_the_replay_route() {
    let tree = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    record_journal(tree.path());
    let (code, _, stderr) = run(&[
        "journal",
        "assemble",
        s(tree.path()),
        s(&runs.path().join("run-1")),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let stored = std::fs::read(runs.path().join("run-1").join("replay.json.gz")).unwrap();

    let mut child = Child(
        std::process::Command::new(assert_cmd::cargo::cargo_bin("cuca"))
            .args(["serve", "--runs", s(runs.path()), "--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut first = String::new();
    // Held until the end of the test: the server's stdout stays open while it serves.
    let mut lines = BufReader::new(child.0.stdout.take().unwrap());
    lines.read_line(&mut first).unwrap();
    let address = first
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();

    // "A browser is handed the stored bytes verbatim" (seed 004).
    let (head, body) = http_get(&address, "/runs/run-1/replay", "gzip");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(&body)
    } else {
        body
    };
    assert_eq!(body, stored);

    let (head, _) = http_get(&address, "/runs/run-2/replay", "gzip");
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    drop(lines);
}

/// Decodes an HTTP/1.1 chunked body.
fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n").unwrap();
        let size =
            usize::from_str_radix(std::str::from_utf8(&body[..line_end]).unwrap().trim(), 16)
                .unwrap();
        body = &body[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&body[..size]);
        body = &body[size + 2..];
    }
}

#[test]
fn serve_refuses_a_missing_runs_directory_and_a_bad_address() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, stderr) = run(&["serve", "--runs", s(&dir.path().join("nope"))]);
    assert_eq!(code, 2);
    assert!(
        stderr.starts_with("cuca: error: runs directory"),
        "{stderr}"
    );
    let (code, _, stderr) = run(&[
        "serve",
        "--runs",
        s(dir.path()),
        "--listen",
        "not-an-address",
    ]);
    // Bad arguments exit 2, as documented.
    assert_eq!(code, 2);
    assert!(
        stderr.starts_with("cuca: error: --listen \"not-an-address\" is not an address"),
        "{stderr}"
    );
}

#[test]
fn a_failed_salvage_or_assembly_prints_one_line_naming_the_journal_and_leaves_no_run_directory() {
    // A failed `journal salvage`/`assemble` leaves no empty run directory behind and prints
    // one line, naming the journal rather than a scratch path that no longer exists; `salvage
    // --json` never says "journal_removed": true while the journal is still there.
    let tree = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tree.path().join(".cuca")).unwrap();
    let journal = tree.path().join(".cuca/replay.ndjson");
    std::fs::write(&journal, b"{\"line\":\"header\",\"formatVersion\":2}\n").unwrap();
    let out = tempfile::tempdir().unwrap();
    let run_dir = out.path().join("run-1");
    for args in [
        vec!["journal", "salvage", s(&journal), s(&run_dir)],
        vec!["journal", "assemble", s(tree.path()), s(&run_dir)],
    ] {
        let (code, _, stderr) = run(&args);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(&journal.display().to_string()), "{stderr}");
        assert!(!stderr.contains(".cuca-salvage-"), "{stderr}");
        assert!(!run_dir.exists(), "{args:?} left {}", run_dir.display());
    }

    let good_tree = tempfile::tempdir().unwrap();
    let good = record_journal(good_tree.path());
    let (code, stdout, stderr) = run(&["journal", "salvage", "--json", s(&good), s(&run_dir)]);
    assert_eq!(code, 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["journal_removed"], false, "{stdout}");
    assert!(good.exists());
}
