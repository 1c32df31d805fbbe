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
use cuca_events::{ReadAfter, ReadMark, SessionBackend, SessionEvent};
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
    // The last page first: the live rows append to the session.
    last_page(c, &runtime, &client, dir.path());
    live(c, &runtime, &client, &base, dir.path());
}

/// Records appended before each live poll: a second of a streaming model.
const NEW_PER_POLL: u64 = 10;

/// The live poll at the end of the 1M-record session: each sample appends
/// [`NEW_PER_POLL`] records and times one poll for them (what a live page does once a
/// second), against a whole read of the session (what a poll cost when it read from the start)
/// and a bare read of only the new records from a mark (the floor).
fn live(
    c: &mut Criterion,
    runtime: &tokio::runtime::Runtime,
    client: &reqwest::Client,
    base: &str,
    dir: &std::path::Path,
) {
    let writer = FileBackend::new(dir).expect("backend");
    let mut next = RECORDS;
    let mut group = c.benchmark_group("live_1M");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    // The page the poll belongs to: the last one (it leaves the mark the first poll reads on
    // from).
    runtime.block_on(async {
        client
            .get(format!("{base}/sessions/long?turn={}", RECORDS / 100))
            .send()
            .await
            .expect("send")
            .text()
            .await
            .expect("body")
    });
    group.bench_function("poll_10_new", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let after = next - 1;
                for _ in 0..NEW_PER_POLL {
                    writer
                        .append(cuca_testkit::record(
                            "long",
                            next,
                            SessionEvent::Output {
                                text: " token".into(),
                            },
                        ))
                        .expect("append");
                    next += 1;
                }
                let started = std::time::Instant::now();
                let body = runtime.block_on(async {
                    client
                        .get(format!("{base}/api/sessions/long/records?after={after}"))
                        .send()
                        .await
                        .expect("send")
                        .text()
                        .await
                        .expect("body")
                });
                total += started.elapsed();
                assert_eq!(body.matches("\"sequence\"").count() as u64, NEW_PER_POLL);
            }
            total
        })
    });
    let reader = FileBackend::new(dir).expect("backend");
    group.bench_function("full_read_baseline", |b| {
        b.iter(|| {
            let mut n = 0u64;
            reader
                .replay_each("long", &mut |_| {
                    n += 1;
                    Ok(())
                })
                .expect("read");
            assert!(n >= RECORDS);
        })
    });
    // The floor: a bare read of only the new records, from the mark before them.
    let mut mark = ReadMark::START;
    let mut seen = 0u64;
    let _ = reader.replay_after("long", &ReadMark::START, &mut |_, at| {
        mark = *at;
        seen += 1;
        Ok(())
    });
    group.bench_function("new_records_read_baseline", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                for _ in 0..NEW_PER_POLL {
                    writer
                        .append(cuca_testkit::record(
                            "long",
                            next,
                            SessionEvent::Output {
                                text: " token".into(),
                            },
                        ))
                        .expect("append");
                    next += 1;
                }
                let started = std::time::Instant::now();
                let mut n = 0u64;
                let read = reader
                    .replay_after("long", &mark, &mut |_, _| {
                        n += 1;
                        Ok(())
                    })
                    .expect("read");
                total += started.elapsed();
                let ReadAfter::Read(after) = read else {
                    panic!("the mark is the file's own")
                };
                mark = after;
                assert_eq!(n, NEW_PER_POLL);
            }
            total
        })
    });
    group.finish();
}

/// The last page of a 1M-record session: the first request (the session's index is made, one
/// read of the whole session, each sample on a fresh copy so no cache answers) and every later
/// one (from the index's mark for that page), against a whole read of the session.
fn last_page(
    c: &mut Criterion,
    runtime: &tokio::runtime::Runtime,
    client: &reqwest::Client,
    source: &std::path::Path,
) {
    let file = session_file(source);
    let last = format!("/sessions/long?turn={}", RECORDS / 100);
    let fetch = |base: &str| {
        runtime.block_on(async {
            let body = client
                .get(format!("{base}{last}"))
                .send()
                .await
                .expect("send")
                .text()
                .await
                .expect("body");
            assert!(
                body.contains(&format!("Turn {}", RECORDS / 100)),
                "the last page"
            );
        })
    };
    let mut group = c.benchmark_group("last_page_1M");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    group.bench_function("first", |b| {
        b.iter_batched(
            || {
                let dir = tempfile::tempdir().expect("tempdir");
                std::fs::copy(&file, dir.path().join(file.file_name().expect("name")))
                    .expect("copy");
                let base = serve(runtime, dir.path());
                (dir, base)
            },
            |(_dir, base)| fetch(&base),
            criterion::BatchSize::PerIteration,
        )
    });
    let base = serve(runtime, source);
    fetch(&base);
    group.bench_function("warm", |b| b.iter(|| fetch(&base)));
    let backend = FileBackend::new(source).expect("backend");
    group.bench_function("full_read_baseline", |b| {
        b.iter(|| {
            let mut n = 0u64;
            backend
                .replay_each("long", &mut |_| {
                    n += 1;
                    Ok(())
                })
                .expect("read");
            assert!(n >= RECORDS);
        })
    });
    group.finish();
}

fn session_file(dir: &std::path::Path) -> std::path::PathBuf {
    std::fs::read_dir(dir)
        .expect("list")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|e| e == "cslog"))
        .expect("the session file")
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
        body.contains("turns 1–20 of 2,000"),
        "the summary counts every turn"
    );
}

fn summary(c: &mut Criterion) {
    let source = tempfile::tempdir().expect("tempdir");
    session_of(source.path(), SUMMARY_RECORDS);
    let file = session_file(source.path());
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
