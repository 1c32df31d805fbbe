//! Appends/s and replay records/s of PostgresBackend against FileBackend and InMemoryBackend,
//! measured in the same run so the ratios compare like with like.
//!
//! `CUCA_PG_URL=… cargo bench -p cuca-store-postgres --bench pg -- --warm-up-time 1 --measurement-time 3`
//! Without `CUCA_PG_URL` only the baselines run, and the bench says so.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, Throughput};
use cuca_events::{SessionBackend, SessionRecord};
use cuca_store_file::{Durability, FileBackend};
use cuca_store_mem::InMemoryBackend;
use cuca_store_postgres::{PostgresBackend, PostgresConfig};

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

fn bench_backend(c: &mut Criterion, label: &str, backend: Arc<dyn SessionBackend>) {
    let session = AtomicU64::new(0);
    let mut appends = c.benchmark_group("append");
    appends.sample_size(10);
    appends.throughput(Throughput::Elements(APPENDS));
    appends.bench_function(BenchmarkId::from_parameter(label), |b| {
        b.iter(|| {
            // A new session per iteration, so sequences never collide.
            let id = format!("append-{}", session.fetch_add(1, Ordering::Relaxed));
            for record in records(&id, APPENDS) {
                if let Err(error) = backend.append(record) {
                    panic!("{label}: {error}");
                }
            }
        });
    });
    appends.finish();

    for record in records("replayed", REPLAYED) {
        if let Err(error) = backend.append(record) {
            panic!("{label}: {error}");
        }
    }
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
    bench_backend(&mut c, "memory", Arc::new(InMemoryBackend::new()));
    for (label, durability) in [
        ("file", Durability::Buffered),
        ("file-sync", Durability::Sync),
    ] {
        match FileBackend::new(dir.path().join(label)) {
            Ok(file) => bench_backend(&mut c, label, Arc::new(file.with_durability(durability))),
            Err(error) => panic!("{label}: {error}"),
        }
    }
    match std::env::var("CUCA_PG_URL") {
        Ok(url) if !url.is_empty() => {
            let config = match PostgresConfig::new(&url) {
                Ok(config) => config.with_throwaway_schema(),
                Err(error) => panic!("CUCA_PG_URL: {error}"),
            };
            match PostgresBackend::connect(config) {
                Ok(backend) => bench_backend(&mut c, "postgres", Arc::new(backend)),
                Err(error) => panic!("{error}"),
            }
        }
        _ => eprintln!("postgres skipped: CUCA_PG_URL is unset (run `bash .ci/postgres.sh start`)"),
    }
    c.final_summary();
}
