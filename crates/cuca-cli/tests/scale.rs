//! `verify`, `sessions`, `show`, `replay --turn`, `replay --at` and `export` work on a
//! 1,000,000-record session with memory that does not grow with the session.
//! One session of a million records (one per streamed token, a thousand turns) is written
//! with `FileBackend`, and each command runs as the real binary under `/usr/bin/time -v`,
//! whose peak resident set size must stay under 64 MiB.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use cuca::{FileBackend, Message, SessionBackend, SessionEvent, SessionRecord};

const RECORDS: u64 = 1_000_000;
const TURN_RECORDS: u64 = 1_000;
const PEAK_RSS_LIMIT_KIB: u64 = 64 * 1024;

/// The event at `sequence`: each turn is a user message, 600 Reasoning tokens, 397 Output
/// tokens, then the Latency/TokenUsage pair.
fn event(sequence: u64) -> SessionEvent {
    match sequence % TURN_RECORDS {
        0 => SessionEvent::Message(Message::user(format!(
            "question {}",
            sequence / TURN_RECORDS
        ))),
        1..=600 => SessionEvent::Reasoning {
            text: "think ".into(),
        },
        998 => SessionEvent::Latency { duration_ms: 1_200 },
        999 => SessionEvent::TokenUsage {
            prompt_tokens: 40,
            completion_tokens: 997,
        },
        _ => SessionEvent::Output {
            text: "tok ".into(),
        },
    }
}

fn write_session(dir: &Path) {
    let backend = FileBackend::new(dir).unwrap();
    for sequence in 0..RECORDS {
        backend
            .append(SessionRecord {
                session_id: "long".into(),
                sequence,
                timestamp_ms: 1_700_000_000_000 + sequence,
                event: event(sequence),
            })
            .unwrap();
    }
}

struct Measured {
    code: i32,
    /// Lines of stdout, counted as they arrive (an export is too large to hold).
    lines: u64,
    /// The first lines of stdout, for the assertions.
    head: Vec<String>,
    stderr: String,
    peak_rss_kib: u64,
}

/// Runs `cuca ARGS` under GNU time, reading stdout line by line, and returns the child's
/// peak resident set size as time reports it.
fn measured(args: &[&str]) -> Measured {
    let report = tempfile::NamedTempFile::new().unwrap();
    let mut child = Command::new("/usr/bin/time")
        .arg("-v")
        .arg("-o")
        .arg(report.path())
        .arg(assert_cmd::cargo::cargo_bin("cuca"))
        .args(args)
        .env_remove("NO_COLOR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("GNU time at /usr/bin/time measures the CLI's peak RSS");
    let mut head = Vec::new();
    let mut lines = 0;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if head.len() < 8 {
            head.push(line);
        }
        lines += 1;
    }
    let output = child.wait_with_output().unwrap();
    let time_report = std::fs::read_to_string(report.path()).unwrap();
    let peak_rss_kib = time_report
        .lines()
        .find_map(|line| {
            line.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .expect(&time_report)
        .parse()
        .unwrap();
    let code = time_report
        .lines()
        .find_map(|line| line.trim().strip_prefix("Exit status: "))
        .map_or(output.status.code().unwrap(), |code| code.parse().unwrap());
    Measured {
        code,
        lines,
        head,
        stderr: String::from_utf8(output.stderr).unwrap(),
        peak_rss_kib,
    }
}

fn assert_small(run: &Measured, what: &str) {
    assert_eq!(run.code, 0, "{what}: {}", run.stderr);
    eprintln!("{what}: peak RSS {} KiB", run.peak_rss_kib);
    assert!(
        run.peak_rss_kib < PEAK_RSS_LIMIT_KIB,
        "{what}: peak RSS {} KiB, over {PEAK_RSS_LIMIT_KIB} KiB",
        run.peak_rss_kib
    );
}

#[test]
fn a_million_record_session_replays_verifies_shows_and_exports_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    write_session(dir.path());
    let d = dir.path().to_str().unwrap();

    // Over the library's load cap (262,144 records), which the CLI never hits: it streams.
    let turn = measured(&["replay", d, "long", "--turn", "1"]);
    assert_small(&turn, "replay --turn 1");
    assert_eq!(
        turn.head[0],
        "Session \"long\": 1,000 turns, 1,000,000 records, 997,000 blocks"
    );
    assert_eq!(turn.head[1], "Turn 1 (records 0..=999, complete)");
    assert_eq!(turn.head[2], "  user: question 0");
    assert_eq!(
        turn.head[3],
        format!("  reasoning: {}", "think ".repeat(600))
    );
    assert_eq!(turn.head[4], format!("  output: {}", "tok ".repeat(397)));
    assert_eq!(
        turn.head[5],
        "  completion: 1200 ms, 40 prompt tokens, 997 completion tokens"
    );
    assert_eq!(turn.lines, 6);
    assert!(!turn.stderr.contains("cap"), "{}", turn.stderr);

    let last = measured(&["replay", d, "long", "--turn", "1000"]);
    assert_small(&last, "replay --turn 1000");
    assert_eq!(
        last.head[1],
        "Turn 1000 (records 999000..=999999, complete)"
    );

    let at = measured(&["replay", d, "long", "--at", "long:500500"]);
    assert_small(&at, "replay --at");
    assert_eq!(
        at.head[0],
        "Session \"long\": 501 turns, 500,501 records, 499,000 blocks (prefix through long:500500)"
    );

    let verify = measured(&["verify", d]);
    assert_small(&verify, "verify");
    assert_eq!(
        verify.head[0],
        format!(
            "long: clean (1,000,000 records, {} bytes)",
            file_len(dir.path())
        )
    );

    let sessions = measured(&["sessions", d]);
    assert_small(&sessions, "sessions");
    assert!(
        sessions.head[1].contains(" 1,000,000 "),
        "{:?}",
        sessions.head
    );

    let kinds = measured(&["show", d, "long", "--kinds"]);
    assert_small(&kinds, "show --kinds");
    assert_eq!(
        kinds.head[0],
        "long: 1,000,000 records: Message 1000, Reasoning 600000, Output 397000, Latency 1000, TokenUsage 1000"
    );

    let show = measured(&["show", d, "long"]);
    assert_small(&show, "show");
    assert_eq!(show.lines, RECORDS);

    let export = measured(&["export", d, "long"]);
    assert_small(&export, "export");
    assert_eq!(export.lines, RECORDS);
    let first: SessionRecord = serde_json::from_str(&export.head[0]).unwrap();
    assert_eq!(first.event, event(0));
}

fn file_len(dir: &Path) -> u64 {
    std::fs::metadata(dir.join("long.cslog")).unwrap().len()
}
