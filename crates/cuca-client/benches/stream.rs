//! The client's decoder alone: a llama-server event stream, already in memory, through
//! `ChatStreamDecoder`, per streamed block.
//!
//! The stream is cut from the byte-exact transcript `tests/fixtures/llama-server/stream-basic.body`:
//! its role chunk, 10,000 content events taken cyclically from its own, its finish chunk,
//! usage chunk and `[DONE]`. Two ways of feeding it:
//!
//! * `decode_only/per_event`: one piece per server-sent event, as llama-server's one HTTP chunk
//!   per event reaches the client (the real framing);
//! * `decode_only/16KiB`: 16 KiB pieces cut anywhere (context: a coalescing proxy's framing).
//!
//! The client over the network, against async-openai, a minimal SSE + JSON reader and the raw
//! body read, is measured in `crates/cuca-bench/benches/clients.rs`.
//!
//! Throughput is in elements = streamed blocks, so criterion prints blocks/s.
#![allow(clippy::unwrap_used, missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use cuca_client::ChatStreamDecoder;

const N_CHUNKS: usize = 10_000;

const STREAM_BASIC: &[u8] = include_bytes!("../tests/fixtures/llama-server/stream-basic.body");

/// The events of `body`, each with its blank line.
fn events(body: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    while let Some(end) = memchr::memmem::find(&body[start..], b"\n\n") {
        out.push(&body[start..start + end + 2]);
        start += end + 2;
    }
    out
}

/// The long stream's events: the fixture's role chunk, `N_CHUNKS` of its content events in
/// turn, then its finish, usage and `[DONE]` events.
fn event_stream() -> Vec<&'static [u8]> {
    let all = events(STREAM_BASIC);
    let is_content = |e: &&[u8]| memchr::memmem::find(e, b"\"delta\":{\"content\":\"").is_some();
    let first = all.iter().position(is_content).unwrap();
    let last = all.iter().rposition(is_content).unwrap() + 1;
    let mut out = all[..first].to_vec();
    out.extend(all[first..last].iter().cycle().take(N_CHUNKS));
    out.extend_from_slice(&all[last..]);
    out
}

/// Every block the decoder yields for `pieces` fed in turn.
fn decode<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> usize {
    let mut decoder = ChatStreamDecoder::new();
    let mut blocks = Vec::new();
    let mut n = 0;
    for piece in pieces {
        decoder.feed(piece, &mut blocks).unwrap();
        n += blocks.len();
        blocks.clear();
    }
    decoder.finish(&mut blocks).unwrap();
    n + blocks.len()
}

fn bench(c: &mut Criterion) {
    let per_event = event_stream();
    let body = per_event.concat();
    assert_eq!(decode(per_event.iter().copied()), N_CHUNKS);
    assert_eq!(decode(body.chunks(16 * 1024)), N_CHUNKS);

    let mut group = c.benchmark_group("decode_only");
    group.throughput(Throughput::Elements(N_CHUNKS as u64));
    group.bench_function("per_event", |b| {
        b.iter(|| decode(per_event.iter().copied()))
    });
    group.bench_function("16KiB", |b| b.iter(|| decode(body.chunks(16 * 1024))));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
