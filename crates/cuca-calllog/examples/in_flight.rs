//! Reads a call log and prints the calls still in flight and how many calls each run made.
//!
//! ```text
//! cargo run -p cuca-calllog --example in_flight [-- PATH]
//! ```
//!
//! PATH defaults to the log this process's environment names (`CUCA_CALL_LOG`, else
//! `logs/calls.jsonl` under `$CUCA_HOME`, `$XDG_STATE_HOME/cuca` or `~/.local/state/cuca`).
//! With `--demo` it writes a small log into a temporary directory first and reads that, so
//! it runs anywhere without touching the real state root.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use cuca_calllog::{calls_per_run, in_flight, read_rows, CallLog, Ended, Env, Record};

fn main() -> ExitCode {
    let arg = std::env::args_os().nth(1);
    // `_demo` keeps the demo's temporary directory alive until the log has been read.
    let (path, _demo) = match arg {
        Some(arg) if arg == "--demo" => match write_demo() {
            Ok((dir, path)) => (path, Some(dir)),
            Err(error) => {
                eprintln!("in_flight: cannot write the demo log: {error}");
                return ExitCode::FAILURE;
            }
        },
        Some(arg) => (PathBuf::from(arg), None),
        None => match Env::from_process().path_for(None) {
            Some(path) => (path, None),
            None => {
                eprintln!("in_flight: the call log is off (CUCA_CALL_LOG=off, or no home)");
                return ExitCode::FAILURE;
            }
        },
    };
    let report = match read_rows(&path) {
        Ok(report) => report,
        Err(error) => {
            eprintln!("in_flight: {error}");
            return ExitCode::FAILURE;
        }
    };

    println!("{}: {} rows", path.display(), report.rows.len());
    if let Some(torn) = report.torn_tail {
        println!(
            "  torn last line at byte {} ({} bytes), skipped",
            torn.offset, torn.len
        );
    }
    for skipped in &report.skipped {
        println!(
            "  line {} is not a row, skipped: {}",
            skipped.line, skipped.reason
        );
    }

    let flying = in_flight(&report.rows);
    println!("\nIn flight ({}):", flying.len());
    for row in &flying {
        println!(
            "  {id}  {ts}  run={run}  tag={tag}  model={model}  attempt={attempt}{age}",
            id = row.id,
            ts = row.ts,
            run = or_dash(&row.run),
            tag = or_dash(&row.tag),
            model = or_dash(&row.model),
            attempt = row.attempt,
            age = age(&row.ts),
        );
    }

    let runs = calls_per_run(&report.rows);
    println!("\nCalls per run:");
    for (run, calls) in &runs {
        println!("  {:<24} {calls}", or_dash(run));
    }
    ExitCode::SUCCESS
}

/// Writes three calls into a temporary directory: one answered, one abandoned, one open.
fn write_demo() -> std::io::Result<(tempfile::TempDir, PathBuf)> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("calls.jsonl");
    let log = CallLog::builder().path(Some(path.clone())).build();
    let start = |run: &str, tag: &str| {
        log.start(Record {
            run: run.into(),
            tag: tag.into(),
            model: "qwen3-8b".into(),
            attempt: 1,
            messages: 3,
            ..Record::default()
        })
    };
    start("run-a", "turn").finish(Record {
        status: 200,
        finish: "stop".into(),
        ..Record::default()
    });
    start("run-a", "brief").end(Ended::Hopped);
    let open = start("run-b", "leaf");
    // Leaving the attempt open stands in for a call still waiting on its server.
    std::mem::forget(open);
    Ok((dir, path))
}

fn or_dash(text: &str) -> &str {
    if text.is_empty() {
        "-"
    } else {
        text
    }
}

/// "  (42s ago)" for a row written at `ts`, or nothing when it does not parse.
fn age(ts: &str) -> String {
    humantime::parse_rfc3339(ts)
        .ok()
        .and_then(|at| SystemTime::now().duration_since(at).ok())
        .map(|since| format!("  ({}s ago)", since.as_secs()))
        .unwrap_or_default()
}
