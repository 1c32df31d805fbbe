//! FileBackend appends and replays against the physical limit (raw `write` of the same frame
//! bytes) and a peer (one serde_json line per record, written the same way).
//!
//! `cargo bench -p cuca-store-file --bench append_replay -- --warm-up-time 1 --measurement-time 3`

use std::fs::{File, OpenOptions};
use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use criterion::{criterion_main, Criterion, Throughput};
use cuca_events::{SessionBackend, SessionEvent, SessionRecord};
use cuca_store_file::{encode_frame, Durability, FileBackend, HEADER};

/// Payload sizes: a streamed token block, a sentence, a paragraph.
const SIZES: [usize; 3] = [32, 200, 1024];

/// Records in the replay file: enough that per-call overhead is noise.
const N_REPLAY: u64 = 5_000;

fn text(len: usize) -> String {
    let words = "the vault is in lisbon and the reply is noted ";
    words.chars().cycle().take(len).collect()
}

fn record(sequence: u64, len: usize) -> SessionRecord {
    SessionRecord {
        session_id: "bench".into(),
        sequence,
        timestamp_ms: 1_700_000_000_000 + sequence,
        event: SessionEvent::Reasoning { text: text(len) },
    }
}

fn append_file(path: &Path) -> File {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn jsonl_line(record: &SessionRecord, out: &mut Vec<u8>) {
    out.clear();
    serde_json::to_writer(&mut *out, record).unwrap_or_else(|error| panic!("json: {error}"));
    out.push(b'\n');
}

fn appends(c: &mut Criterion) {
    for size in SIZES {
        let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
        let mut group = c.benchmark_group(format!("append/{size}B"));
        group.throughput(Throughput::Elements(1));

        let backend = FileBackend::new(dir.path().join("store")).unwrap_or_else(|e| panic!("{e}"));
        // One prebuilt record, cloned per append (the clone is timed: a caller builds an
        // owned record for every append) and given the next sequence, as sequences must
        // increase per session; a fresh record per append built in criterion's untimed
        // setup left the timed loop with cold caches that the raw write never sees.
        let proto = record(1, size);
        let mut sequence = 0u64;
        group.bench_function("file_backend", |b| {
            b.iter(|| {
                let mut record = black_box(proto.clone());
                sequence += 1;
                record.sequence = sequence;
                backend.append(record).unwrap_or_else(|e| panic!("{e}"))
            })
        });

        let mut frame = Vec::new();
        encode_frame(&record(1, size), &mut frame).unwrap_or_else(|e| panic!("{e}"));
        let mut raw = append_file(&dir.path().join("raw.cslog"));
        group.bench_function("raw_write", |b| {
            b.iter(|| {
                raw.write(black_box(&frame))
                    .unwrap_or_else(|e| panic!("{e}"))
            })
        });

        let mut jsonl = append_file(&dir.path().join("peer.jsonl"));
        let mut line = Vec::new();
        group.bench_function("jsonl_write", |b| {
            b.iter(|| {
                jsonl_line(black_box(&proto), &mut line);
                jsonl.write(&line).unwrap_or_else(|e| panic!("{e}"))
            })
        });
        group.finish();
    }

    // What Durability::Sync costs: one fdatasync per append.
    let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
    let mut group = c.benchmark_group("append_sync/32B");
    group.sample_size(10);
    let backend = FileBackend::new(dir.path())
        .unwrap_or_else(|e| panic!("{e}"))
        .with_durability(Durability::Sync);
    let proto = record(1, 32);
    let mut sequence = 0u64;
    group.bench_function("file_backend_sync", |b| {
        b.iter(|| {
            let mut record = proto.clone();
            sequence += 1;
            record.sequence = sequence;
            backend.append(record).unwrap_or_else(|e| panic!("{e}"))
        })
    });
    group.finish();
}

fn replays(c: &mut Criterion) {
    for size in SIZES {
        let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
        let records: Vec<SessionRecord> = (0..N_REPLAY).map(|s| record(s, size)).collect();
        let mut cslog = HEADER.to_vec();
        let mut jsonl = Vec::new();
        let mut line = Vec::new();
        for r in &records {
            encode_frame(r, &mut cslog).unwrap_or_else(|e| panic!("{e}"));
            jsonl_line(r, &mut line);
            jsonl.extend_from_slice(&line);
        }
        std::fs::write(dir.path().join("bench.cslog"), &cslog).unwrap_or_else(|e| panic!("{e}"));
        let jsonl_path = dir.path().join("bench.jsonl");
        std::fs::write(&jsonl_path, &jsonl).unwrap_or_else(|e| panic!("{e}"));
        println!(
            "size/{size}B: cslog {} bytes, jsonl {} bytes, ratio {:.2} ({:.1} vs {:.1} bytes/record)",
            cslog.len(),
            jsonl.len(),
            cslog.len() as f64 / jsonl.len() as f64,
            (cslog.len() - HEADER.len()) as f64 / N_REPLAY as f64,
            jsonl.len() as f64 / N_REPLAY as f64,
        );

        let backend = FileBackend::new(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let mut group = c.benchmark_group(format!("replay/{size}B"));
        group.throughput(Throughput::Elements(N_REPLAY));
        group.sample_size(20);
        group.bench_function("file_backend", |b| {
            b.iter(|| {
                let replayed = backend.replay("bench").unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(replayed.len() as u64, N_REPLAY);
                replayed
            })
        });
        group.bench_function("jsonl_decode", |b| {
            b.iter(|| {
                let file = File::open(&jsonl_path).unwrap_or_else(|e| panic!("{e}"));
                let mut out = Vec::new();
                for line in BufReader::with_capacity(64 * 1024, file).lines() {
                    let line = line.unwrap_or_else(|e| panic!("{e}"));
                    let r: SessionRecord =
                        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}"));
                    out.push(r);
                }
                assert_eq!(out.len() as u64, N_REPLAY);
                out
            })
        });
        group.finish();
    }
}

mod group {
    // criterion_group! generates a public, undocumented fn.
    #![allow(missing_docs)]
    criterion::criterion_group!(benches, super::appends, super::replays);
}
criterion_main!(group::benches);
