//! `cuca cost` on a 1,000,000-record store under criterion: the report by day (`--json`) and
//! by model, against `cuca verify` of the same store (every record read and checked, nothing
//! summed), so the figure says what the report adds to reading the records.
//!
//! The store (`support/cost_store.rs`, the one the GNU-time `cost` bench uses) is built once,
//! before the first sample; each sample is one run of the real binary with its output thrown
//! away, so a figure is what a user waits for. `CUCA_BENCH_COST_RECORDS` changes the store's
//! size (default 1,000,000); `CUCA_BENCH_COST_STORE=DIR` builds it in DIR and keeps it (to
//! measure the binary by hand, e.g. its peak RSS with `/usr/bin/time -v`), else a temporary
//! directory holds it. Peak memory is the `cost` bench's figure: criterion measures time only.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode};

#[path = "support/cost_store.rs"]
mod cost_store;

/// One run of `cuca ARGS`, its output discarded; a failed run fails the bench.
fn cuca(args: &[&str]) {
    let status = Command::new(env!("CARGO_BIN_EXE_cuca"))
        .args(args)
        .env_remove("CUCA_PRICES")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "cuca {args:?}: {status}");
}

fn bench(c: &mut Criterion) {
    let n: u64 = std::env::var("CUCA_BENCH_COST_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let (dir, _temp) = match std::env::var_os("CUCA_BENCH_COST_STORE") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            std::fs::create_dir_all(&dir).unwrap();
            // A store left by an earlier run is reused only if it is whole: a session per
            // thousand records, the last one included.
            let last = dir.join(format!(
                "s{:04}.cslog",
                n.div_ceil(cost_store::SESSION_RECORDS) - 1
            ));
            if !last.exists() {
                cost_store::build(&dir, n);
            }
            (dir, None)
        }
        None => {
            let temp = tempfile::tempdir().unwrap();
            cost_store::build(temp.path(), n);
            (temp.path().to_path_buf(), Some(temp))
        }
    };
    let d = dir.to_str().unwrap();
    let mut group = c.benchmark_group("cost_1M");
    // Each run reads the whole store (a quarter of a second or more): ten samples of the
    // same number of runs (flat sampling, criterion's mode for long iterations) are enough,
    // and criterion's default five seconds would not hold them.
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(Duration::from_secs(20));
    group.bench_function("by_day_json", |b| b.iter(|| cuca(&["cost", d, "--json"])));
    group.bench_function("by_model", |b| {
        b.iter(|| cuca(&["cost", d, "--by", "model"]))
    });
    group.bench_function("verify", |b| b.iter(|| cuca(&["verify", d])));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
