//! ns per `on_stream_chunk` block over InMemoryBackend and FileBackend, each against a bare
//! `backend.append` of the same record measured in the same run.

// criterion's macros generate public functions that cannot carry docs.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use cuca_events::{CucaPlugin, MessageContentBlock, SessionBackend, SessionEvent, SessionRecord};
use cuca_session_log::SessionLogPlugin;
use cuca_store_file::FileBackend;
use cuca_store_mem::InMemoryBackend;
use futures::executor::block_on;

/// Blocks recorded into one fresh backend before it is thrown away, outside the timing: well
/// under InMemoryBackend's 65,536-record cap, and small enough that criterion's millions of
/// iterations never hold more than one chunk's records in memory.
const CHUNK: u64 = 10_000;

/// A token-sized Thinking block, the shape a streaming reasoning server sends most.
fn block() -> MessageContentBlock {
    MessageContentBlock::thinking(" the vault")
}

/// Runs `iters` timed calls of `step`, over a fresh `setup()` every [`CHUNK`] calls.
fn chunked<S>(iters: u64, setup: impl Fn() -> S, step: impl Fn(&S, u64)) -> Duration {
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let n = CHUNK.min(iters - done);
        let state = setup();
        let start = Instant::now();
        for i in 0..n {
            step(&state, i);
        }
        total += start.elapsed();
        drop(state);
        done += n;
    }
    total
}

/// The record the hook makes from [`block`], built the same way: the text and the session id
/// are owned copies.
fn baseline_record(sequence: u64) -> Option<SessionRecord> {
    let MessageContentBlock::Thinking { thinking } = block() else {
        return None;
    };
    Some(SessionRecord {
        session_id: "demo".to_owned(),
        sequence,
        timestamp_ms: 1_700_000_000_000,
        event: SessionEvent::Reasoning { text: thinking },
    })
}

/// Benchmarks the bare append and the hook over backends made by `make`.
fn compare<B: SessionBackend + 'static>(
    c: &mut Criterion,
    name: &str,
    make: impl Fn() -> B + Copy,
) {
    let mut group = c.benchmark_group(name);
    group.bench_function("backend_append_baseline", |b| {
        b.iter_custom(|iters| {
            chunked(iters, make, |backend, sequence| {
                if let Some(record) = baseline_record(sequence) {
                    black_box(backend.append(record)).ok();
                }
            })
        })
    });
    let chunk = block();
    group.bench_function("on_stream_chunk", |b| {
        b.iter_custom(|iters| {
            chunked(
                iters,
                || SessionLogPlugin::new(Arc::new(make())).with_session_id("demo"),
                |log, _| {
                    black_box(block_on(log.on_stream_chunk(black_box(&chunk)))).ok();
                },
            )
        })
    });
    group.finish();
}

/// A plugin with the trait's no-op hooks: what calling any hook costs before it does anything
/// (the boxed future `async_trait` makes, and `block_on`).
struct Noop;

impl CucaPlugin for Noop {}

fn memory(c: &mut Criterion) {
    compare(c, "memory", InMemoryBackend::new);
    let chunk = block();
    c.bench_function("noop_hook_call", |b| {
        b.iter(|| black_box(block_on(Noop.on_stream_chunk(black_box(&chunk)))).ok())
    });
    // The hook stamps every record from the system clock; on a VM without a fast clock
    // source this is a system call, and a visible part of the hook's cost.
    c.bench_function("system_clock_now", |b| {
        b.iter(|| black_box(std::time::SystemTime::now()))
    });
}

fn file(c: &mut Criterion) {
    // One temp dir for the run; each chunk writes a fresh session file in a fresh
    // subdirectory, so a chunk never appends to a file another chunk grew.
    let Ok(root) = tempfile::tempdir() else {
        eprintln!("skipping the file benchmarks: no temp dir");
        return;
    };
    let counter = std::sync::atomic::AtomicU64::new(0);
    let root_path = root.path().to_path_buf();
    let counter = &counter;
    let root_path = &root_path;
    let make = move || {
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match FileBackend::new(root_path.join(n.to_string())) {
            Ok(backend) => backend,
            Err(error) => panic!("benchmark setup: {error}"),
        }
    };
    compare(c, "file", make);
}

criterion_group!(benches, memory, file);
criterion_main!(benches);
