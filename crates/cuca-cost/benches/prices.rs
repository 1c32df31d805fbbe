//! Parsing the bundled table, and a million price look-ups, the way a report over a large store
//! prices every call.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use cuca_cost::{CallReader, GroupBy, PriceTable, Report, Usage};
use cuca_events::{SessionEvent, TokenDetail};
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
    // A million records of a store, read one at a time into calls and summed by day, as
    // `cuca cost` does once the records are decoded: one call every 10 records.
    let events: Vec<SessionEvent> = (0..10u64)
        .map(|i| match i {
            1 => SessionEvent::CallRequest {
                model: NAMES[0].into(),
                parameters: "{}".into(),
                tools: "[]".into(),
                messages: 1,
            },
            6 => SessionEvent::CallFinish {
                finish_reason: Some("stop".into()),
                model: NAMES[0].into(),
            },
            7 => SessionEvent::TokenDetail(TokenDetail {
                input: Some(26),
                output: Some(57),
                cache_read: Some(3_401),
                cache_write: Some(1_201),
                ..TokenDetail::default()
            }),
            8 => SessionEvent::Latency { duration_ms: 900 },
            9 => SessionEvent::TokenUsage {
                prompt_tokens: 4_628,
                completion_tokens: 57,
            },
            _ => SessionEvent::Output {
                text: " tok".into(),
            },
        })
        .collect();
    group.bench_function("1M records into a report by day", |b| {
        b.iter(|| {
            let mut report = Report::new(GroupBy::Day, None, None);
            let mut reader = CallReader::default();
            for sequence in 0..1_000_000u64 {
                let event = &events[(sequence % 10) as usize];
                let at = 1_796_000_000_000 + sequence * 1_000;
                if let Some(call) = reader.see(sequence, at, black_box(event)) {
                    report.add("s", &call, table);
                }
            }
            black_box(report.totals().cost)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
