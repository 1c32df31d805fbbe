//! Records per second to load, segment and stream a 100,000-record session over
//! InMemoryBackend, beside a bare `backend.replay` clone-and-iterate measured in the same run.

// criterion's macros generate public functions that cannot carry docs.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use cuca_events::{Message, SessionBackend, SessionEvent, SessionRecord};
use cuca_replay::{ReplayConfig, SessionReplay};
use cuca_store_mem::InMemoryBackend;

/// The session size measured: larger than InMemoryBackend's default cap, so the
/// backend and the replay config are both raised to hold it.
const N_RECORDS: usize = 100_000;

/// Reasoning records per turn: the seed's first demo turn streamed 72.
const REASONING_PER_TURN: usize = 72;

/// The seed's turn shape (SystemPrompt, Message, 72 Reasoning, 2 Output, Latency,
/// TokenUsage: 78 records) repeated until the session holds [`N_RECORDS`]; the last turn is
/// cut short and stays open, as a crashed recording leaves it.
fn session() -> Vec<SessionRecord> {
    let mut events = Vec::with_capacity(N_RECORDS);
    let mut turn_idx = 0u64;
    while events.len() < N_RECORDS {
        events.push(SessionEvent::SystemPrompt {
            text: "You are terse.".into(),
        });
        events.push(SessionEvent::Message(Message::user(format!(
            "Question {turn_idx}: where is the vault?"
        ))));
        for token in 0..REASONING_PER_TURN {
            events.push(SessionEvent::Reasoning {
                text: format!(" token{token}"),
            });
        }
        events.push(SessionEvent::Output { text: "Lis".into() });
        events.push(SessionEvent::Output { text: "bon".into() });
        events.push(SessionEvent::Latency { duration_ms: 412 });
        events.push(SessionEvent::TokenUsage {
            prompt_tokens: 31,
            completion_tokens: 74,
        });
        turn_idx += 1;
    }
    events.truncate(N_RECORDS);
    events
        .into_iter()
        .enumerate()
        .map(|(sequence, event)| SessionRecord {
            session_id: "demo".into(),
            sequence: sequence as u64,
            timestamp_ms: 1_700_000_000_000 + sequence as u64,
            event,
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let backend = match InMemoryBackend::with_max_records(N_RECORDS) {
        Ok(backend) => Arc::new(backend),
        Err(error) => panic!("backend: {error}"),
    };
    for record in session() {
        if let Err(error) = backend.append(record) {
            panic!("append: {error}");
        }
    }
    let config =
        match ReplayConfig::new(N_RECORDS, ReplayConfig::DEFAULT_MAX_TURN_BLOCKS, Some(0.8)) {
            Ok(config) => config,
            Err(error) => panic!("config: {error}"),
        };
    let replay =
        match SessionReplay::with_config(Arc::clone(&backend) as Arc<dyn SessionBackend>, config) {
            Ok(replay) => replay,
            Err(error) => panic!("replay: {error}"),
        };

    let mut group = c.benchmark_group("replay_100k");
    group.throughput(Throughput::Elements(N_RECORDS as u64));
    group.sample_size(10);

    // The floor: the backend's own whole-session clone, and a look at every record.
    group.bench_function("backend_replay_baseline", |b| {
        b.iter(|| {
            let records = backend.replay("demo").unwrap_or_default();
            let mut kinds = 0usize;
            for record in &records {
                kinds += record.event.kind_index();
            }
            black_box((records.len(), kinds))
        })
    });

    group.bench_function("load", |b| {
        b.iter(|| black_box(replay.load("demo").map(|t| t.usage().blocks).ok()))
    });

    group.bench_function("load_segment_stream", |b| {
        let mut cx = Context::from_waker(Waker::noop());
        b.iter(|| {
            let Ok(trajectory) = replay.load("demo") else {
                return 0;
            };
            let mut n_blocks = 0usize;
            for turn in trajectory.turns() {
                let mut stream = turn.stream();
                while let Poll::Ready(Some(Ok(block))) = stream.as_mut().poll_next(&mut cx) {
                    black_box(&block);
                    n_blocks += 1;
                }
            }
            black_box(n_blocks)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
