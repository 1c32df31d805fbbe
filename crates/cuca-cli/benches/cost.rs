//! `cuca cost` on a 1,000,000-record store (1,000 sessions of 1,000 records, one model call
//! every 10 records, each with its `TokenDetail`): must finish in under 2 s with a peak RSS
//! under 64 MiB, by day and by model.
//!
//! Not a criterion bench: the figure that matters is the real binary's wall time and peak
//! RSS, which only a run of the process gives, timed and measured by GNU time
//! (`/usr/bin/time -f "%e %M"`), best of `CUCA_BENCH_COST_RUNS` (default 3). (The pricing
//! itself, a million calls through `CallReader` and `Report`, is a criterion group in
//! `cuca-cost`'s `prices` bench.) Prints one line `cost-scale run: {json}`.
//! `CUCA_BENCH_COST_RECORDS` changes the store's size (default 1,000,000).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::{Command, Stdio};

#[path = "support/cost_store.rs"]
mod cost_store;

/// One run of `cuca ARGS` under GNU time: (seconds, peak RSS in KiB).
fn timed(args: &[&str]) -> (f64, f64) {
    let report = std::env::temp_dir().join(format!("cuca-cost-bench-time-{}", std::process::id()));
    let status = Command::new("/usr/bin/time")
        .args(["-f", "%e %M", "-o"])
        .arg(&report)
        .arg(env!("CARGO_BIN_EXE_cuca"))
        .args(args)
        .env_remove("CUCA_PRICES")
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

fn best(runs: usize, args: &[&str]) -> (f64, f64) {
    let (mut seconds, mut kib) = (f64::MAX, 0f64);
    for _ in 0..runs {
        let (s, k) = timed(args);
        seconds = seconds.min(s);
        kib = kib.max(k);
    }
    (seconds, kib)
}

fn main() {
    let n: u64 = std::env::var("CUCA_BENCH_COST_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let runs: usize = std::env::var("CUCA_BENCH_COST_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let dir = tempfile::tempdir().unwrap();
    cost_store::build(dir.path(), n);
    let d = dir.path().to_str().unwrap();
    let (day_s, day_kib) = best(runs, &["cost", d, "--json"]);
    let (model_s, model_kib) = best(runs, &["cost", d, "--by", "model"]);
    println!(
        "cost-scale run: {}",
        serde_json::json!({
            "records": n,
            "byDayNs": day_s * 1e9,
            "byModelNs": model_s * 1e9,
            "byDayRssKib": day_kib,
            "byModelRssKib": model_kib,
        })
    );
    if n >= 1_000_000 {
        assert!(
            day_s < 2.0 && model_s < 2.0,
            "cuca cost took {day_s} s / {model_s} s"
        );
        assert!(
            day_kib < 65_536.0 && model_kib < 65_536.0,
            "cuca cost peaked at {day_kib} / {model_kib} KiB"
        );
    }
}
