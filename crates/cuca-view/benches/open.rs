//! Opening a long session in the viewer (issue 22: "A 1,000,000-record session opens with the
//! first turns visible in under 1 s on this machine").
//!
//! `open_1M/first_page` is the whole page request over loopback HTTP (read, render, send);
//! `open_1M/full_read_baseline` reads every record of the same session through the same
//! backend, what a page that loaded the whole trajectory would pay at least.
#![allow(clippy::expect_used, missing_docs)]

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use cuca_events::{SessionBackend, SessionEvent};
use cuca_store_file::FileBackend;

const RECORDS: u64 = 1_000_000;

fn session(dir: &std::path::Path) {
    let backend = FileBackend::new(dir).expect("backend");
    // Turns of 100 records: a user message, 97 streamed Output blocks, Latency, TokenUsage.
    for sequence in 0..RECORDS {
        let event = match sequence % 100 {
            0 => SessionEvent::Message(cuca_events::Message::user("next step, please")),
            98 => SessionEvent::Latency { duration_ms: 900 },
            99 => SessionEvent::TokenUsage {
                prompt_tokens: 1200,
                completion_tokens: 97,
            },
            _ => SessionEvent::Output {
                text: " token".into(),
            },
        };
        backend
            .append(cuca_testkit::record("long", sequence, event))
            .expect("append");
    }
}

fn open(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    session(dir.path());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let config = cuca_view::ViewConfig::new(vec![dir.path().to_owned()]);
    let base = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        tokio::spawn(async move { axum::serve(listener, cuca_view::router(config)).await });
        format!("http://{address}")
    });
    let client = reqwest::Client::new();
    let mut group = c.benchmark_group("open_1M");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("first_page", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let body = client
                    .get(format!("{base}/sessions/long"))
                    .send()
                    .await
                    .expect("send")
                    .text()
                    .await
                    .expect("body");
                assert!(body.contains("Turn 20"), "the first page shows 20 turns");
            })
        })
    });
    let backend = FileBackend::new(dir.path()).expect("backend");
    group.bench_function("full_read_baseline", |b| {
        b.iter(|| {
            let mut n = 0u64;
            backend
                .replay_each("long", &mut |_| {
                    n += 1;
                    Ok(())
                })
                .expect("read");
            assert_eq!(n, RECORDS);
        })
    });
    group.finish();
}

criterion_group!(benches, open);
criterion_main!(benches);
