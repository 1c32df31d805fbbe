//! Opening a long session in the viewer: a 1,000,000-record session opens with the first
//! turns visible in under 1 s on this machine.
//!
//! `open_1M/first_page` is the whole page request over loopback HTTP (read, render, send);
//! `open_1M/full_read_baseline` reads every record of the same session through the same
//! backend, what a page that loaded the whole trajectory would pay at least.
//!
//! `summary_200k/first_page_cold` is the bound on the summary page: the first request for the summary page
//! (its header totals the whole session, so it reads the session once and indexes its turns)
//! of a 200,000-record session the viewer has not read yet — each sample on a fresh copy, so
//! the index cache never answers; `first_page_warm` is the next request, from the index.
#![allow(clippy::expect_used, missing_docs)]

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use cuca_events::{SessionBackend, SessionEvent};
use cuca_store_file::FileBackend;

const RECORDS: u64 = 1_000_000;

fn session(dir: &std::path::Path) {
    session_of(dir, RECORDS);
}

fn session_of(dir: &std::path::Path, records: u64) {
    let backend = FileBackend::new(dir).expect("backend");
    // Turns of 100 records: a user message, 97 streamed Output blocks, Latency, TokenUsage.
    for sequence in 0..records {
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
    let base = serve(&runtime, dir.path());
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

const SUMMARY_RECORDS: u64 = 200_000;

fn serve(runtime: &tokio::runtime::Runtime, dir: &std::path::Path) -> String {
    let config = cuca_view::ViewConfig::new(vec![dir.to_owned()]);
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        tokio::spawn(async move { axum::serve(listener, cuca_view::router(config)).await });
        format!("http://{address}")
    })
}

async fn summary_page(client: &reqwest::Client, base: &str) {
    let body = client
        .get(format!("{base}/sessions/long"))
        .send()
        .await
        .expect("send")
        .text()
        .await
        .expect("body");
    assert!(
        body.contains("turns 1–20 of 2000"),
        "the summary counts every turn"
    );
}

fn summary(c: &mut Criterion) {
    let source = tempfile::tempdir().expect("tempdir");
    session_of(source.path(), SUMMARY_RECORDS);
    let file = std::fs::read_dir(source.path())
        .expect("list")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|e| e == "cslog"))
        .expect("the session file");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let client = reqwest::Client::new();
    let mut group = c.benchmark_group("summary_200k");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("first_page_cold", |b| {
        b.iter_batched(
            || {
                // A fresh directory is a session the viewer has never indexed.
                let dir = tempfile::tempdir().expect("tempdir");
                std::fs::copy(&file, dir.path().join(file.file_name().expect("name")))
                    .expect("copy");
                let base = serve(&runtime, dir.path());
                (dir, base)
            },
            |(_dir, base)| runtime.block_on(summary_page(&client, &base)),
            criterion::BatchSize::PerIteration,
        )
    });
    let base = serve(&runtime, source.path());
    group.bench_function("first_page_warm", |b| {
        b.iter(|| runtime.block_on(summary_page(&client, &base)))
    });
    let backend = FileBackend::new(source.path()).expect("backend");
    group.bench_function("full_read_baseline", |b| {
        b.iter(|| {
            let mut n = 0u64;
            backend
                .replay_each("long", &mut |_| {
                    n += 1;
                    Ok(())
                })
                .expect("read");
            assert_eq!(n, SUMMARY_RECORDS);
        })
    });
    group.finish();
}

criterion_group!(benches, open, summary);
criterion_main!(benches);
