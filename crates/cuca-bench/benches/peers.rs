//! Cross-crate peer comparisons: `FileBackend` appends against the raw-write limit, a JSONL
//! file and SQLite; `SessionReplay` over a `.cslog` file against the JSONL peer's decode and
//! a plain read of the same bytes. All rows of a group are measured in the same run.
//!
//! `cargo bench -p cuca-bench --bench peers -- --warm-up-time 1 --measurement-time 3`, or
//! `cargo xtask bench`, which also reads the sizes this writes to
//! `target/cuca-bench/peers-sizes.json`.

// Benchmark setup failing is a broken bench, not bad input: panicking is how it stops.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::fs::{File, OpenOptions};
use std::hint::black_box;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use cuca_bench::{
    prose_session, reasoning_record, turn_session, write_result, JsonlPeer, SqlitePeer, SIZES,
};
use cuca_events::{SessionBackend, SessionRecord};
use cuca_replay::SessionReplay;
use cuca_store_file::{encode_frame, FileBackend};

/// Appends into one file before the next starts, outside the timing: keeps a criterion run
/// from growing one file to gigabytes (20 MB at 1 KiB), while the cost of opening a fresh
/// file is spread over enough appends to vanish.
const CHUNK: u64 = 20_000;

/// Records in the replayed session: 100 turns of the seed's shape.
const N_REPLAY: usize = 7_800;

/// Runs `iters` timed calls of `step` on a fresh `setup(n)` every [`CHUNK`] calls; each
/// state is dropped (and its file removed by the caller's `setup`) outside the timing.
fn chunked<S>(
    iters: u64,
    mut setup: impl FnMut(u64) -> S,
    mut step: impl FnMut(&mut S),
) -> Duration {
    let mut total = Duration::ZERO;
    let mut done = 0;
    let mut n_chunk = 0;
    while done < iters {
        let n = CHUNK.min(iters - done);
        let mut state = setup(n_chunk);
        let start = Instant::now();
        for _ in 0..n {
            step(&mut state);
        }
        total += start.elapsed();
        drop(state);
        done += n;
        n_chunk += 1;
    }
    total
}

/// A fresh, empty directory `root/n`, replacing what an earlier chunk left there.
fn fresh(root: &Path, n: u64) -> std::path::PathBuf {
    // Two directories alternate, so the one being deleted is never the one in use.
    let dir = root.join((n % 2).to_string());
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A file opened (created) for appending, as `FileBackend` opens its session files: the raw
/// write baselines write to it.
fn open_append(path: &Path) -> File {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
}

fn appends(c: &mut Criterion) {
    for size in SIZES {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        let proto = reasoning_record("bench", 1, size);
        let mut group = c.benchmark_group(format!("peers/append/{size}B"));
        group.throughput(Throughput::Elements(1));

        // Every store is handed an owned record per append, as `SessionBackend::append` takes
        // one: the clone (and the drop after the write) is timed for FileBackend and both
        // peers alike, so the ratios compare the stores, not who got to borrow. Sequences
        // must increase per session, so each clone gets the next one (a store of a u64).
        group.bench_function("file_backend", |b| {
            let mut sequence = 0u64;
            b.iter_custom(|iters| {
                chunked(
                    iters,
                    |n| FileBackend::new(fresh(root, n)).unwrap(),
                    |backend| {
                        let mut record = black_box(proto.clone());
                        sequence += 1;
                        record.sequence = sequence;
                        backend.append(record).unwrap();
                    },
                )
            })
        });

        // The physical limit: the same frame bytes, one `write` each, nothing encoded.
        let mut frame = Vec::new();
        encode_frame(&proto, &mut frame).unwrap();
        group.bench_function("raw_write", |b| {
            b.iter_custom(|iters| {
                chunked(
                    iters,
                    |n| open_append(&fresh(root, n).join("raw.cslog")),
                    |file: &mut File| {
                        file.write_all(black_box(&frame)).unwrap();
                    },
                )
            })
        });

        // The same raw write, handed the owned record FileBackend is handed (cloned before
        // and dropped after the write): the limit for a store whose append takes ownership,
        // so the gap to FileBackend is its own encoding and bookkeeping. Context only.
        group.bench_function("raw_write_owned", |b| {
            b.iter_custom(|iters| {
                chunked(
                    iters,
                    |n| open_append(&fresh(root, n).join("raw.cslog")),
                    |file: &mut File| {
                        let record = black_box(proto.clone());
                        file.write_all(black_box(&frame)).unwrap();
                        drop(record);
                    },
                )
            })
        });

        group.bench_function("jsonl", |b| {
            b.iter_custom(|iters| {
                chunked(
                    iters,
                    |n| JsonlPeer::open(fresh(root, n).join("bench.jsonl")).unwrap(),
                    |peer| peer.append(&black_box(proto.clone())).unwrap(),
                )
            })
        });

        group.bench_function("sqlite", |b| {
            b.iter_custom(|iters| {
                chunked(
                    iters,
                    |n| SqlitePeer::open(fresh(root, n).join("bench.sqlite")).unwrap(),
                    |peer| peer.append(&black_box(proto.clone())).unwrap(),
                )
            })
        });
        group.finish();
    }
}

fn replays(c: &mut Criterion) {
    let mut sizes = serde_json::Map::new();
    for size in SIZES {
        let dir = tempfile::tempdir().unwrap();
        let records: Vec<SessionRecord> = turn_session("bench", N_REPLAY, size);
        let backend = Arc::new(FileBackend::new(dir.path().join("store")).unwrap());
        let mut jsonl = JsonlPeer::open(dir.path().join("bench.jsonl")).unwrap();
        let mut sqlite = SqlitePeer::open(dir.path().join("bench.sqlite")).unwrap();
        for record in &records {
            backend.append(record.clone()).unwrap();
            jsonl.append(record).unwrap();
            sqlite.append(record).unwrap();
        }
        let cslog_path = backend.session_path("bench").unwrap();
        let cslog_bytes = backend.bytes_on_disk("bench").unwrap();
        let jsonl_bytes = std::fs::metadata(jsonl.path()).unwrap().len();
        let sqlite_bytes = sqlite.bytes_on_disk().unwrap();
        println!(
            "peers/size/{size}B: {N_REPLAY} records, cslog {cslog_bytes} B, jsonl {jsonl_bytes} B \
             ({:.2}), sqlite {sqlite_bytes} B ({:.2})",
            cslog_bytes as f64 / jsonl_bytes as f64,
            sqlite_bytes as f64 / jsonl_bytes as f64,
        );
        sizes.insert(
            format!("{size}B"),
            serde_json::json!({
                "n_records": N_REPLAY,
                "cslog": cslog_bytes,
                "jsonl": jsonl_bytes,
                "sqlite": sqlite_bytes,
            }),
        );

        let replay = SessionReplay::new(Arc::clone(&backend) as Arc<dyn SessionBackend>);
        let n_turns = replay.load("bench").unwrap().len();
        assert_eq!(n_turns, N_REPLAY.div_ceil(78));

        let mut group = c.benchmark_group(format!("peers/replay/{size}B"));
        group.throughput(Throughput::Elements(N_REPLAY as u64));
        group.sample_size(10);
        // Read the file, decode every frame, cut the records into turns.
        group.bench_function("replay_load_segment", |b| {
            b.iter(|| {
                let trajectory = replay.load("bench").unwrap();
                assert_eq!(trajectory.len(), n_turns);
                trajectory
            })
        });
        group.bench_function("file_backend_replay", |b| {
            b.iter(|| {
                let records = backend.replay("bench").unwrap();
                assert_eq!(records.len(), N_REPLAY);
                records
            })
        });
        group.bench_function("jsonl_decode", |b| {
            b.iter(|| {
                let records = JsonlPeer::decode(jsonl.path()).unwrap();
                assert_eq!(records.len(), N_REPLAY);
                records
            })
        });
        group.bench_function("sqlite_replay", |b| {
            b.iter(|| {
                let records = sqlite.replay("bench").unwrap();
                assert_eq!(records.len(), N_REPLAY);
                records
            })
        });
        // The physical limit: the .cslog file's bytes copied out of the page cache into a
        // buffer that is already allocated.
        let mut buf = Vec::with_capacity(cslog_bytes as usize + 1);
        group.bench_function("memcpy_read", |b| {
            b.iter(|| {
                buf.clear();
                File::open(&cslog_path)
                    .unwrap()
                    .read_to_end(&mut buf)
                    .unwrap();
                assert_eq!(buf.len() as u64, cslog_bytes);
                black_box(buf.len())
            })
        });
        group.finish();
    }
    // Sizes on prose (the records' text matters once a file is compressed): the live
    // .cslog, the same session compacted (FileBackend::compact, gzip), the JSONL file and,
    // for context, the JSONL file gzipped at the same level.
    for size in SIZES {
        let dir = tempfile::tempdir().unwrap();
        let records = prose_session("bench", N_REPLAY, size);
        let backend = FileBackend::new(dir.path().join("store")).unwrap();
        let mut jsonl = JsonlPeer::open(dir.path().join("bench.jsonl")).unwrap();
        for record in &records {
            backend.append(record.clone()).unwrap();
            jsonl.append(record).unwrap();
        }
        let cslog_bytes = backend.bytes_on_disk("bench").unwrap();
        let compaction = backend.compact("bench").unwrap();
        assert_eq!(compaction.bytes_before, cslog_bytes);
        assert_eq!(backend.replay("bench").unwrap(), records);
        let jsonl_bytes = std::fs::metadata(jsonl.path()).unwrap().len();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&std::fs::read(jsonl.path()).unwrap()).unwrap();
        let jsonl_gz_bytes = gz.finish().unwrap().len() as u64;
        println!(
            "peers/size/prose-{size}B: {N_REPLAY} records, cslog {cslog_bytes} B ({:.2}), \
             cslog.gz {} B ({:.2}), jsonl {jsonl_bytes} B, jsonl.gz {jsonl_gz_bytes} B ({:.2})",
            cslog_bytes as f64 / jsonl_bytes as f64,
            compaction.bytes_after,
            compaction.bytes_after as f64 / jsonl_bytes as f64,
            jsonl_gz_bytes as f64 / jsonl_bytes as f64,
        );
        sizes.insert(
            format!("prose-{size}B"),
            serde_json::json!({
                "n_records": N_REPLAY,
                "cslog": cslog_bytes,
                "cslog_gz": compaction.bytes_after,
                "jsonl": jsonl_bytes,
                "jsonl_gz": jsonl_gz_bytes,
            }),
        );
    }

    // Sessions recorded from real llama-server streams (fixtures/sessions): token-sized
    // blocks, as a streamed answer is stored, against the same records as JSONL.
    let recorded = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/sessions");
    let fixtures = FileBackend::new(&recorded).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for session in ["demo", "reasoning"] {
        let records = fixtures.replay(session).unwrap();
        let mut jsonl = JsonlPeer::open(dir.path().join(format!("{session}.jsonl"))).unwrap();
        for record in &records {
            jsonl.append(record).unwrap();
        }
        let cslog_bytes = fixtures.bytes_on_disk(session).unwrap();
        let jsonl_bytes = std::fs::metadata(jsonl.path()).unwrap().len();
        println!(
            "peers/size/{session}: {} records, cslog {cslog_bytes} B, jsonl {jsonl_bytes} B ({:.2})",
            records.len(),
            cslog_bytes as f64 / jsonl_bytes as f64,
        );
        sizes.insert(
            session.to_owned(),
            serde_json::json!({
                "n_records": records.len(),
                "cslog": cslog_bytes,
                "jsonl": jsonl_bytes,
            }),
        );
    }
    let path = write_result("peers-sizes", &serde_json::Value::Object(sizes)).unwrap();
    println!("sizes written to {}", path.display());
}

/// Rounds of the interleaved comparison; `CUCA_BENCH_ROUNDS` lowers it for quick runs.
fn rounds() -> usize {
    std::env::var("CUCA_BENCH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(31)
}

/// Appends per timed block of the interleaved comparison.
const BLOCK: usize = 5_000;

/// The median of `times` (nanoseconds per element).
fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times.get(times.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The same comparisons as `appends` and `replays`, measured interleaved: each round times
/// one block of every contender back to back, and each contender's figure is the median of
/// its rounds. A `write` on this kind of machine drifts by a quarter between runs seconds
/// apart, which sequential criterion groups turn into ratio noise; rounds a few milliseconds
/// apart see the same machine. Results go to `target/cuca-bench/peers-interleaved.json`,
/// nanoseconds per append or per replayed record.
fn interleaved(_: &mut Criterion) {
    let rounds = rounds();
    let mut out = serde_json::Map::new();
    for size in SIZES {
        let proto = reasoning_record("bench", 1, size);
        let mut frame = Vec::new();
        encode_frame(&proto, &mut frame).unwrap();
        let names = ["file_backend", "raw_write", "raw_write_owned", "jsonl"];
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
        for round in 0..rounds + 1 {
            let dir = tempfile::tempdir().unwrap();
            let backend = FileBackend::new(dir.path().join("store")).unwrap();
            let mut raw = open_append(&dir.path().join("raw.cslog"));
            let mut owned = open_append(&dir.path().join("owned.cslog"));
            let mut jsonl = JsonlPeer::open(dir.path().join("bench.jsonl")).unwrap();
            let mut timed = |i: usize, step: &mut dyn FnMut()| {
                let start = Instant::now();
                for _ in 0..BLOCK {
                    step();
                }
                // Round 0 warms every contender up and is not counted.
                if round > 0 {
                    times[i].push(start.elapsed().as_nanos() as f64 / BLOCK as f64);
                }
            };
            let mut sequence = 0u64;
            timed(0, &mut || {
                let mut record = black_box(proto.clone());
                sequence += 1;
                record.sequence = sequence;
                backend.append(record).unwrap();
            });
            timed(1, &mut || raw.write_all(black_box(&frame)).unwrap());
            timed(2, &mut || {
                let record = black_box(proto.clone());
                owned.write_all(black_box(&frame)).unwrap();
                drop(record);
            });
            timed(3, &mut || jsonl.append(&black_box(proto.clone())).unwrap());
        }
        let medians: serde_json::Map<String, serde_json::Value> = names
            .iter()
            .zip(times)
            .map(|(name, times)| ((*name).to_owned(), serde_json::json!(median(times))))
            .collect();
        println!("peers/interleaved/append/{size}B: {medians:?}");
        out.insert(
            format!("append/{size}B"),
            serde_json::Value::Object(medians),
        );

        let records = turn_session("bench", N_REPLAY, size);
        let dir = tempfile::tempdir().unwrap();
        let backend = Arc::new(FileBackend::new(dir.path().join("store")).unwrap());
        let mut jsonl = JsonlPeer::open(dir.path().join("bench.jsonl")).unwrap();
        for record in &records {
            backend.append(record.clone()).unwrap();
            jsonl.append(record).unwrap();
        }
        let replay = SessionReplay::new(Arc::clone(&backend) as Arc<dyn SessionBackend>);
        let (mut load, mut decode) = (Vec::new(), Vec::new());
        for round in 0..rounds + 1 {
            let start = Instant::now();
            black_box(replay.load("bench").unwrap());
            let loaded = start.elapsed().as_nanos() as f64 / N_REPLAY as f64;
            let start = Instant::now();
            black_box(JsonlPeer::decode(jsonl.path()).unwrap());
            let decoded = start.elapsed().as_nanos() as f64 / N_REPLAY as f64;
            if round > 0 {
                load.push(loaded);
                decode.push(decoded);
            }
        }
        let medians = serde_json::json!({
            "replay_load_segment": median(load),
            "jsonl_decode": median(decode),
        });
        println!("peers/interleaved/replay/{size}B: {medians}");
        out.insert(format!("replay/{size}B"), medians);
    }
    let path = write_result("peers-interleaved", &serde_json::Value::Object(out)).unwrap();
    println!("interleaved results written to {}", path.display());
}

criterion_group!(benches, interleaved, appends, replays);
criterion_main!(benches);
