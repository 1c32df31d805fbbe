//! Parsing the bundled table, and a million price look-ups, the way a report over a large store
//! prices every call.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use cuca_cost::{PriceTable, Usage};
use std::io::Read;

const BUNDLED_GZ: &[u8] = include_bytes!("../data/litellm-prices.json.gz");

/// Names as recordings carry them: exact keys, provider-prefixed, dated, and one unknown.
const NAMES: [&str; 5] = [
    "claude-sonnet-4-5-20250929",
    "anthropic/claude-opus-4-5",
    "gpt-4o-2024-08-06",
    "openai/gpt-5",
    "no-such-model",
];

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("prices");
    group.sample_size(10);
    group.bench_function("parse bundled", |b| {
        b.iter(|| {
            // `bundled()` unpacks and parses once per process; this is that work, every time.
            let mut json = String::new();
            let unpacked =
                flate2::read::GzDecoder::new(black_box(BUNDLED_GZ)).read_to_string(&mut json);
            let table = unpacked
                .ok()
                .and_then(|_| PriceTable::from_json(&json).ok());
            black_box(table.map(|t| t.len()).unwrap_or(0))
        })
    });
    let Ok(table) = PriceTable::bundled() else {
        return;
    };
    let usage = Usage {
        input: 1_000,
        output: 200,
        cache_read: 30_000,
        cache_write_5m: 2_000,
        ..Usage::default()
    };
    group.bench_function("1M look-ups and costs", |b| {
        b.iter(|| {
            let mut total = 0.0;
            for i in 0..1_000_000 {
                if let Some(price) = table.price(black_box(NAMES[i % NAMES.len()])) {
                    total += price.cost(&usage).total();
                }
            }
            black_box(total)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
