//! `append` latency per row under 1 and 8 concurrent writers, beside two baselines measured
//! in the same run: a `tracing-appender` non-blocking JSON writer (the usual way a Rust
//! service logs a line) and a raw `write` of the same line bytes (the floor: no
//! serialization, no lock, one syscall).
//!
//! Criterion measures the mean latency per row (`iter_custom` returns the sum of the
//! per-row latencies, so time/iter is the mean). A manual pass then records every row's
//! latency and prints the median and p99 as a markdown table, which is what
//! `docs/performance.md` quotes.
//!
//! ```text
//! cargo bench -p cuca-calllog --bench append -- --warm-up-time 1 --measurement-time 3
//! ```

// Benchmark setup failing is a broken bench, not bad input: unwrapping is how it stops.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::Criterion;
use cuca_calllog::{CallLog, Record};
use tracing::Dispatch;
use tracing_appender::non_blocking::{NonBlockingBuilder, WorkerGuard};

/// Rows per writer in the percentile pass: enough for a stable p99 at 8 writers, short
/// enough for a shared two-core machine.
const ROWS_PER_WRITER: usize = 20_000;

/// A realistic end row: identity, the answer's shape, tokens, cost, a cold connection.
fn sample_record(n: usize) -> Record {
    Record {
        ts: "2026-11-29T17:23:41.123Z".into(),
        id: format!("{:08x}", n as u32),
        run: "run-4f2a9c1e".into(),
        tag: "turn".into(),
        model: "qwen3-30b-a3b".into(),
        served: "qwen3-30b-a3b@lane-2".into(),
        effort: "medium".into(),
        max_tokens: 8192,
        attempt: 1,
        status: 200,
        ms: 1834,
        finish: "stop".into(),
        ttft_ms: 412,
        conn_reused: Some(false),
        dns_ms: 3,
        connect_ms: 11,
        tls_ms: 24,
        prompt_tokens: 1893,
        completion_tokens: 211,
        cached_tokens: 1536,
        cost: 0.00042,
        ..Record::default()
    }
}

/// One way of getting a row onto disk.
#[derive(Clone)]
enum Sink {
    CallLog(CallLog),
    Tracing(Dispatch),
    Raw(Arc<File>),
}

impl Sink {
    fn name(&self) -> &'static str {
        match self {
            Sink::CallLog(_) => "cuca-calllog append",
            Sink::Tracing(_) => "tracing-appender JSON (non-blocking)",
            Sink::Raw(_) => "raw write of the line bytes",
        }
    }
}

/// Builds a fresh sink writing into `dir`; the guard (tracing only) flushes on drop.
fn make_sink(kind: usize, dir: &Path) -> (Sink, Option<WorkerGuard>) {
    match kind {
        0 => (
            Sink::CallLog(
                CallLog::builder()
                    .path(Some(dir.join("calls.jsonl")))
                    .build(),
            ),
            None,
        ),
        1 => {
            let file = File::create(dir.join("tracing.jsonl")).unwrap();
            // Not lossy: a writer that drops lines when its queue is full would be measuring
            // a different promise from the call log's.
            let (writer, guard) = NonBlockingBuilder::default().lossy(false).finish(file);
            let subscriber = tracing_subscriber::fmt()
                .json()
                .with_writer(writer)
                .finish();
            (Sink::Tracing(Dispatch::new(subscriber)), Some(guard))
        }
        _ => {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join("raw.jsonl"))
                .unwrap();
            (Sink::Raw(Arc::new(file)), None)
        }
    }
}

/// Writes `rows` rows from each of `writers` threads and returns every row's latency.
fn run(sink: &Sink, writers: usize, rows: usize) -> Vec<Duration> {
    let barrier = Arc::new(Barrier::new(writers));
    let mut all = Vec::with_capacity(writers * rows);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                let sink = sink.clone();
                let barrier = Arc::clone(&barrier);
                scope.spawn(move || {
                    let body = || {
                        let mut latencies = Vec::with_capacity(rows);
                        barrier.wait();
                        for n in 0..rows {
                            latencies.push(one(&sink, w * rows + n));
                        }
                        latencies
                    };
                    match &sink {
                        Sink::Tracing(dispatch) => {
                            tracing::dispatcher::with_default(dispatch, body)
                        }
                        _ => body(),
                    }
                })
            })
            .collect();
        for handle in handles {
            all.extend(handle.join().unwrap());
        }
    });
    all
}

/// One row, timed. The row is built before the clock starts: what a caller has in hand is a
/// record, and what is measured is getting it onto disk.
fn one(sink: &Sink, n: usize) -> Duration {
    let record = sample_record(n);
    match sink {
        Sink::CallLog(log) => {
            let start = Instant::now();
            log.append(record);
            start.elapsed()
        }
        Sink::Tracing(_) => {
            let r = &record;
            let start = Instant::now();
            tracing::info!(
                ts = %r.ts, id = %r.id, run = %r.run, tag = %r.tag, model = %r.model,
                served = %r.served, effort = %r.effort, max_tokens = r.max_tokens,
                attempt = r.attempt, status = r.status, ms = r.ms, finish = %r.finish,
                ttft_ms = r.ttft_ms, conn_reused = false, dns_ms = r.dns_ms,
                connect_ms = r.connect_ms, tls_ms = r.tls_ms, prompt_tokens = r.prompt_tokens,
                completion_tokens = r.completion_tokens, cached_tokens = r.cached_tokens,
                cost = r.cost, "call"
            );
            start.elapsed()
        }
        Sink::Raw(file) => {
            let mut line = serde_json::to_vec(&record).unwrap();
            line.push(b'\n');
            let start = Instant::now();
            let written = (&**file).write(&line).unwrap();
            let elapsed = start.elapsed();
            assert_eq!(written, line.len());
            elapsed
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

fn micros(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e6)
}

fn criterion_benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("append");
    for writers in [1usize, 8] {
        for kind in 0..3 {
            let dir = tempfile::tempdir().unwrap();
            let (sink, guard) = make_sink(kind, dir.path());
            group.bench_function(format!("{} / {writers} writers", sink.name()), |b| {
                b.iter_custom(|iters| {
                    let rows = (iters as usize).div_ceil(writers).max(1);
                    let latencies = run(&sink, writers, rows);
                    // Mean latency per row, scaled to `iters` rows.
                    let total: Duration = latencies.iter().sum();
                    total.mul_f64(iters as f64 / latencies.len() as f64)
                });
            });
            drop(sink);
            drop(guard);
        }
    }
    group.finish();
}

fn percentile_table() {
    println!(
        "\n| writer | writers | median µs/row | p99 µs/row | p99.9 µs/row | mean µs/row | p99 vs raw write | wall rows/s |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for writers in [1usize, 8] {
        let mut raw_p99 = Duration::ZERO;
        for kind in [2usize, 1, 0] {
            let dir = tempfile::tempdir().unwrap();
            let (sink, guard) = make_sink(kind, dir.path());
            let started = Instant::now();
            let mut latencies = run(&sink, writers, ROWS_PER_WRITER);
            drop(sink);
            drop(guard); // tracing: the background thread drains before the wall clock stops
            let wall = started.elapsed();
            latencies.sort_unstable();
            let (median, p99) = (percentile(&latencies, 0.5), percentile(&latencies, 0.99));
            let p999 = percentile(&latencies, 0.999);
            let mean = latencies.iter().sum::<Duration>() / latencies.len() as u32;
            if kind == 2 {
                raw_p99 = p99;
            }
            let name = match kind {
                0 => "cuca-calllog append",
                1 => "tracing-appender JSON (non-blocking)",
                _ => "raw write of the line bytes",
            };
            println!(
                "| {name} | {writers} | {} | {} | {} | {} | {:.2}× | {:.0} |",
                micros(median),
                micros(p99),
                micros(p999),
                micros(mean),
                p99.as_secs_f64() / raw_p99.as_secs_f64(),
                latencies.len() as f64 / wall.as_secs_f64()
            );
        }
    }
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    criterion_benches(&mut criterion);
    criterion.final_summary();
    percentile_table();
}
