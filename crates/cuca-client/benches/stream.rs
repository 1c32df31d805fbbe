//! The client's decoder alone: a llama-server event stream, already in memory, through
//! `ChatStreamDecoder`, per streamed block.
//!
//! The stream is `cuca_bench::llama::long_stream`, cut from the byte-exact transcript
//! `fixtures/llama-server/stream-basic.body`: its role chunk, 10,000 content events taken
//! cyclically from its own, its finish chunk, usage chunk and `[DONE]`. Two ways of feeding
//! it:
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
use cuca_bench::llama::{events, long_stream};
use cuca_client::ChatStreamDecoder;

const N_CHUNKS: usize = 10_000;

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
    let body = long_stream(N_CHUNKS);
    let per_event = events(&body);
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
