//! ns per `on_stream_chunk` block over InMemoryBackend, against a bare `backend.append` of the
//! same record measured in the same run.

// criterion's macros generate public functions that cannot carry docs.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use cuca_events::{CucaPlugin, MessageContentBlock, SessionBackend, SessionEvent, SessionRecord};
use cuca_session_log::SessionLogPlugin;
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

fn memory(c: &mut Criterion) {
    let mut group = c.benchmark_group("memory");
    group.bench_function("backend_append_baseline", |b| {
        b.iter_custom(|iters| {
            chunked(iters, InMemoryBackend::new, |backend, sequence| {
                // The same work the hook does around the append: own the text, stamp the record.
                let MessageContentBlock::Thinking { thinking } = block() else {
                    return;
                };
                let record = SessionRecord {
                    session_id: "demo".to_owned(),
                    sequence,
                    timestamp_ms: 1_700_000_000_000,
                    event: SessionEvent::Reasoning { text: thinking },
                };
                black_box(backend.append(record)).ok();
            })
        })
    });
    let chunk = block();
    group.bench_function("on_stream_chunk", |b| {
        b.iter_custom(|iters| {
            chunked(
                iters,
                || SessionLogPlugin::new(Arc::new(InMemoryBackend::new())).with_session_id("demo"),
                |log, _| {
                    black_box(block_on(log.on_stream_chunk(black_box(&chunk)))).ok();
                },
            )
        })
    });
    group.finish();
}

criterion_group!(benches, memory);
criterion_main!(benches);
