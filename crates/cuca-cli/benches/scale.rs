//! `cuca verify` and `cuca replay --turn 1` (the first turn) on a 1,000,000-record session against reading the
//! same records as JSON Lines with serde_json, with the CLI's peak RSS: the CLI
//! must be at least 3× faster than the JSONL reader, with a peak RSS under 64 MiB.
//!
//! Not a criterion bench: each figure is one run of the real binary, timed and measured by
//! GNU time (`/usr/bin/time -f "%e %M"`), best of `CUCA_BENCH_CLI_RUNS` (default 3). The
//! baseline reads the JSONL file line by line (a `BufReader` and `serde_json::from_str` into
//! a `SessionRecord`), keeping nothing: the streaming reader a JSONL log would get. Prints one
//! line `cli-scale run: {json}` that `cargo xtask bench` reads. `CUCA_BENCH_CLI_RECORDS`
//! changes the session's length (default 1,000,000).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use cuca::{FileBackend, Message, SessionBackend, SessionEvent, SessionRecord};

fn event(sequence: u64) -> SessionEvent {
    match sequence % 1_000 {
        0 => SessionEvent::Message(Message::user(format!("question {}", sequence / 1_000))),
        1..=600 => SessionEvent::Reasoning {
            text: " think".into(),
        },
        998 => SessionEvent::Latency { duration_ms: 1_200 },
        999 => SessionEvent::TokenUsage {
            prompt_tokens: 40,
            completion_tokens: 997,
        },
        _ => SessionEvent::Output {
            text: " tok".into(),
        },
    }
}

/// One run of `cuca ARGS` under GNU time: (seconds, peak RSS in KiB).
fn timed(args: &[&str]) -> (f64, f64) {
    let report = std::env::temp_dir().join(format!("cuca-bench-time-{}", std::process::id()));
    let status = Command::new("/usr/bin/time")
        .args(["-f", "%e %M", "-o"])
        .arg(&report)
        .arg(env!("CARGO_BIN_EXE_cuca"))
        .args(args)
        .stdout(Stdio::null())
        .status()
        .expect("GNU time at /usr/bin/time");
    assert!(status.success(), "cuca {args:?}: {status}");
    let text = std::fs::read_to_string(&report).unwrap();
    let mut fields = text.split_whitespace();
    let seconds: f64 = fields.next().unwrap().parse().unwrap();
    let kib: f64 = fields.next().unwrap().parse().unwrap();
    (seconds, kib)
}

/// Best (least) time and the largest peak RSS over `runs` runs.
fn best(runs: usize, args: &[&str]) -> (f64, f64) {
    let (mut seconds, mut kib) = (f64::MAX, 0f64);
    for _ in 0..runs {
        let (s, k) = timed(args);
        seconds = seconds.min(s);
        kib = kib.max(k);
    }
    (seconds, kib)
}

fn jsonl_read(path: &Path) -> (f64, u64) {
    let started = Instant::now();
    let mut n = 0u64;
    for line in BufReader::new(std::fs::File::open(path).unwrap()).lines() {
        let record: SessionRecord = serde_json::from_str(&line.unwrap()).unwrap();
        n += u64::from(record.sequence < u64::MAX);
    }
    (started.elapsed().as_secs_f64(), n)
}

fn main() {
    let n: u64 = std::env::var("CUCA_BENCH_CLI_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let runs: usize = std::env::var("CUCA_BENCH_CLI_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let jsonl = dir.path().join("long.jsonl");
    let mut out = BufWriter::new(std::fs::File::create(&jsonl).unwrap());
    for sequence in 0..n {
        let record = SessionRecord {
            session_id: "long".into(),
            sequence,
            timestamp_ms: 1_700_000_000_000 + sequence,
            event: event(sequence),
        };
        serde_json::to_writer(&mut out, &record).unwrap();
        out.write_all(b"\n").unwrap();
        backend.append(record).unwrap();
    }
    out.flush().unwrap();
    drop((out, backend));
    let d = dir.path().to_str().unwrap();

    let (verify_s, verify_kib) = best(runs, &["verify", d]);
    let (replay_s, replay_kib) = best(runs, &["replay", d, "long", "--turn", "1"]);
    let (_, start_kib) = best(1, &["--version"]);
    let mut jsonl_s = f64::MAX;
    for _ in 0..runs {
        let (s, read) = jsonl_read(&jsonl);
        assert_eq!(read, n);
        jsonl_s = jsonl_s.min(s);
    }
    let cslog_bytes = std::fs::metadata(dir.path().join("long.cslog"))
        .unwrap()
        .len();
    let jsonl_bytes = std::fs::metadata(&jsonl).unwrap().len();
    println!(
        "cli-scale run: {}",
        serde_json::json!({
            "records": n,
            "verifyNs": verify_s * 1e9,
            "replayTurn0Ns": replay_s * 1e9,
            "jsonlReadNs": jsonl_s * 1e9,
            "verifyRssKib": verify_kib,
            "replayTurn0RssKib": replay_kib,
            "startRssKib": start_kib,
            "cslogBytes": cslog_bytes,
            "jsonlBytes": jsonl_bytes,
        })
    );
}
