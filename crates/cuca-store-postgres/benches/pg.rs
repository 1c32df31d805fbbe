//! Appends/s and replay records/s of PostgresBackend against FileBackend and InMemoryBackend,
//! measured in the same run so the ratios compare like with like.
//!
//! `backend_stream/{file,postgres_pipelined}` times one streamed call as the recording proxy appends
//! it (its message, 1,000 `Output` blocks, its `TokenUsage`) until the closing record is
//! acknowledged: the backend's share of the bound "a 1,000-chunk stream into PostgreSQL
//! costs ≤ 2× the same into a `FileBackend`", without the proxy around it.
//!
//! `CUCA_PG_URL=… cargo bench -p cuca-store-postgres --bench pg -- --warm-up-time 1 --measurement-time 3`
//! Without `CUCA_PG_URL` only the baselines run, and the bench says so.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};
use cuca_events::{Message, SessionBackend, SessionEvent, SessionRecord};
use cuca_store_file::{Durability, FileBackend};
use cuca_store_mem::InMemoryBackend;
use cuca_store_postgres::{Durability as PgDurability, PostgresBackend, PostgresConfig};

/// Records appended per measured iteration: one demo turn is 7, so this is ~14 turns.
const APPENDS: u64 = 100;
/// Records in the replayed session: about a long interactive session's worth.
const REPLAYED: u64 = 1_000;

fn records(session_id: &str, n: u64) -> Vec<SessionRecord> {
    (0..n)
        .map(|sequence| {
            let mut record =
                cuca_testkit::demo_turn(session_id, 0)[(sequence % 7) as usize].clone();
            record.sequence = sequence;
            record
        })
        .collect()
}

fn append_n(label: &str, backend: &dyn SessionBackend, session_id: &str, n: u64) {
    for record in records(session_id, n) {
        if let Err(error) = backend.append(record) {
            panic!("{label}: {error}");
        }
    }
}

/// Blocks in one streamed call of the `stream` group.
const STREAMED: u64 = 1_000;

/// One streamed call of `session_id` from `first`: what the proxy appends for it, waiting
/// records at both ends.
fn streamed_call(session_id: &str, first: u64) -> Vec<SessionRecord> {
    let record = |offset: u64, event| SessionRecord {
        session_id: session_id.to_owned(),
        sequence: first + offset,
        timestamp_ms: 1_700_000_000_000 + offset,
        event,
    };
    let mut call = vec![record(0, SessionEvent::Message(Message::user("count")))];
    call.extend((1..=STREAMED).map(|i| {
        record(
            i,
            SessionEvent::Output {
                text: format!(" tok{i}"),
            },
        )
    }));
    call.push(record(
        STREAMED + 1,
        SessionEvent::TokenUsage {
            prompt_tokens: 4,
            completion_tokens: STREAMED,
        },
    ));
    call
}

/// Times [`streamed_call`] into each backend, in one group so the ratio is of one run.
fn bench_stream(c: &mut Criterion, backends: &[(&str, Arc<dyn SessionBackend>)]) {
    let mut group = c.benchmark_group("backend_stream");
    group.sample_size(20);
    group.throughput(Throughput::Elements(STREAMED + 2));
    for (label, backend) in backends {
        let next = AtomicU64::new(0);
        group.bench_function(BenchmarkId::from_parameter(label), |b| {
            b.iter_batched(
                || streamed_call("stream", next.fetch_add(STREAMED + 2, Ordering::Relaxed)),
                |call| {
                    for record in call {
                        if let Err(error) = backend.append(record) {
                            panic!("{label}: {error}");
                        }
                    }
                },
                BatchSize::SmallInput,
            );
        });
    }
    group.finish();
}

/// `fresh_per_iteration` gives every iteration a new backend (set up outside the timing):
/// the in-memory store is fast enough to hit its record cap within one measurement.
fn bench_backend(
    c: &mut Criterion,
    label: &str,
    make: impl Fn() -> Arc<dyn SessionBackend>,
    fresh_per_iteration: bool,
) {
    let mut appends = c.benchmark_group("append");
    appends.sample_size(10);
    appends.throughput(Throughput::Elements(APPENDS));
    if fresh_per_iteration {
        appends.bench_function(BenchmarkId::from_parameter(label), |b| {
            b.iter_batched(
                &make,
                |backend| append_n(label, backend.as_ref(), "append", APPENDS),
                BatchSize::SmallInput,
            );
        });
    } else {
        let backend = make();
        let session = AtomicU64::new(0);
        appends.bench_function(BenchmarkId::from_parameter(label), |b| {
            b.iter(|| {
                // A new session per iteration, so sequences never collide.
                let id = format!("append-{}", session.fetch_add(1, Ordering::Relaxed));
                append_n(label, backend.as_ref(), &id, APPENDS);
            });
        });
    }
    appends.finish();

    let backend = make();
    append_n(label, backend.as_ref(), "replayed", REPLAYED);
    let mut replays = c.benchmark_group("replay");
    replays.sample_size(10);
    replays.throughput(Throughput::Elements(REPLAYED));
    replays.bench_function(BenchmarkId::from_parameter(label), |b| {
        b.iter(|| match backend.replay("replayed") {
            Ok(records) => assert_eq!(records.len() as u64, REPLAYED),
            Err(error) => panic!("{label}: {error}"),
        });
    });
    replays.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let dir = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(error) => panic!("temp dir: {error}"),
    };
    bench_backend(&mut c, "memory", || Arc::new(InMemoryBackend::new()), true);
    for (label, durability) in [
        ("file", Durability::Buffered),
        ("file-sync", Durability::Sync),
    ] {
        let n = AtomicU64::new(0);
        let make = || -> Arc<dyn SessionBackend> {
            let sub = dir
                .path()
                .join(format!("{label}-{}", n.fetch_add(1, Ordering::Relaxed)));
            match FileBackend::new(sub) {
                Ok(file) => Arc::new(file.with_durability(durability)),
                Err(error) => panic!("{label}: {error}"),
            }
        };
        // A fresh backend per iteration: FileBackend keeps each session's file open until the
        // backend is dropped, so a new session per iteration in one backend ran out of file
        // descriptors once criterion reached ~20,000 iterations.
        bench_backend(&mut c, label, make, true);
    }
    let file = match FileBackend::new(dir.path().join("stream")) {
        Ok(file) => file,
        Err(error) => panic!("file: {error}"),
    };
    let mut streams: Vec<(&str, Arc<dyn SessionBackend>)> = vec![("file", Arc::new(file))];
    match std::env::var("CUCA_PG_URL") {
        Ok(url) if !url.is_empty() => {
            let config = match PostgresConfig::new(&url) {
                Ok(config) => config,
                Err(error) => panic!("CUCA_PG_URL: {error}"),
            };
            let pipelined = config
                .clone()
                .with_throwaway_schema()
                .with_durability(PgDurability::Pipelined);
            match PostgresBackend::connect(pipelined) {
                Ok(backend) => streams.push(("postgres_pipelined", Arc::new(backend))),
                Err(error) => panic!("{error}"),
            }
            bench_stream(&mut c, &streams);
            let make = || -> Arc<dyn SessionBackend> {
                match PostgresBackend::connect(config.clone().with_throwaway_schema()) {
                    Ok(backend) => Arc::new(backend),
                    Err(error) => panic!("{error}"),
                }
            };
            bench_backend(&mut c, "postgres", make, false);
        }
        _ => {
            bench_stream(&mut c, &streams);
            eprintln!("postgres skipped: CUCA_PG_URL is unset (run `bash .ci/postgres.sh start`)");
        }
    }
    c.final_summary();
}
