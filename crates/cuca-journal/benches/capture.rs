//! Capture cost: entries/s on the recording side (hash + intern + queue) and the writer's MB/s,
//! each against a baseline measured in the same run.
//!
//! Recording side: a `model_io` of a 24-message request whose history is already pooled (the
//! steady state of a turn loop: one new message per turn), against serializing that request
//! once with serde_json (what a naive "log the request" would cost). Writer: journaling unique
//! 4 KiB tool outputs through the writer thread to a file and finishing, against writing the same
//! bytes with a `BufWriter<File>` on the calling thread.

// criterion_group! generates an undocumented pub function, and a bench, like a test, unwraps
// its own set-up.
#![allow(missing_docs, clippy::unwrap_used)]

use std::io::Write;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use cuca_events::{Message, MessageContentBlock, ToolDefinition, UnifiedRequest, UnifiedResponse};
use cuca_journal::format::RequestRole;
use cuca_journal::{Recorder, RecorderConfig, ToolOutcome};

fn request(history: usize, turn: u64) -> UnifiedRequest {
    let mut messages = vec![Message::system("you are a careful engineer. ".repeat(40))];
    for n in 0..history {
        messages.push(if n % 2 == 0 {
            Message::user(format!(
                "step {n}: {}",
                "please change the parser ".repeat(40)
            ))
        } else {
            Message::assistant(format!("done {n}: {}", "I changed the parser ".repeat(40)))
        });
    }
    messages.push(Message::user(format!("turn {turn}")));
    let mut request = UnifiedRequest::new(messages);
    request.tools = (0..8)
        .map(|n| ToolDefinition {
            name: format!("tool_{n}"),
            description: "does one thing well".into(),
            parameters: serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        })
        .collect();
    request
}

fn recorder(dir: &std::path::Path) -> Recorder {
    let config = RecorderConfig::new(dir, "bench")
        .unwrap()
        .with_max_bytes(u64::MAX)
        .with_queue_capacity(1 << 16);
    Recorder::start(config).unwrap()
}

fn recording_side(c: &mut Criterion) {
    let mut group = c.benchmark_group("capture/record");
    group.throughput(Throughput::Elements(1));
    let response = UnifiedResponse {
        content: vec![MessageContentBlock::text("ok")],
        ..UnifiedResponse::default()
    };
    let base = request(22, 0);
    let bytes = serde_json::to_vec(&base).unwrap().len();
    eprintln!(
        "request: {} messages, {bytes} bytes of JSON",
        base.messages.len()
    );

    group.bench_function(BenchmarkId::new("baseline_serialize_request", bytes), |b| {
        b.iter(|| serde_json::to_vec(std::hint::black_box(&base)).unwrap())
    });

    group.bench_function(BenchmarkId::new("hash_only", bytes), |b| {
        b.iter(|| {
            let ids: Vec<_> = base
                .messages
                .iter()
                .map(cuca_journal::pool::message_id)
                .collect();
            (ids, cuca_journal::pool::toolset_id(&base.tools))
        })
    });

    let dir = tempfile::tempdir().unwrap();
    let rec = recorder(dir.path());
    let mut turn = 0u64;
    let mut req = request(22, 0);
    group.bench_function(BenchmarkId::new("model_io_pooled_history", bytes), |b| {
        b.iter(|| {
            // One new message per turn, as in a turn loop; the history is already pooled.
            turn += 1;
            if let Some(last) = req.messages.last_mut() {
                *last = Message::user(format!("turn {turn}"));
            }
            rec.model_io(
                "root",
                &req,
                RequestRole::AgentTurn,
                &response,
                Duration::from_millis(1),
            );
        })
    });
    let status = rec.finish();
    // A stop would turn later calls into no-ops and the figure into a lie.
    assert_eq!(
        status.stopped, None,
        "capture stopped during the bench: {status:?}"
    );
    group.finish();
}

fn writer(c: &mut Criterion) {
    const N: usize = 2048;
    const SIZE: usize = 4096;
    let mut group = c.benchmark_group("capture/write");
    group.throughput(Throughput::Bytes((N * SIZE) as u64));
    let outputs: Vec<String> = (0..N)
        .map(|n| format!("{n:08}{}", "x".repeat(SIZE - 8)))
        .collect();

    group.bench_function("baseline_bufwriter_file", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let dir = tempfile::tempdir().unwrap();
                let start = Instant::now();
                let file = std::fs::File::create(dir.path().join("raw")).unwrap();
                let mut out = std::io::BufWriter::with_capacity(64 * 1024, file);
                for output in &outputs {
                    out.write_all(output.as_bytes()).unwrap();
                    out.write_all(b"\n").unwrap();
                }
                out.flush().unwrap();
                total += start.elapsed();
            }
            total
        })
    });

    group.bench_function("journal_unique_tool_outputs", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let dir = tempfile::tempdir().unwrap();
                let start = Instant::now();
                let rec = recorder(dir.path());
                for output in &outputs {
                    rec.tool_result(
                        "root",
                        &ToolOutcome {
                            call_id: "c",
                            name: "read_file",
                            arguments: "{}",
                            output,
                            is_error: false,
                        },
                    );
                }
                let status = rec.finish();
                total += start.elapsed();
                assert_eq!(status.stopped, None, "{status:?}");
                assert_eq!(status.entries, N as u64);
            }
            total
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = recording_side, writer
}
criterion_main!(benches);
