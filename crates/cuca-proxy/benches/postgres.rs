//! What recording into PostgreSQL costs a caller of the proxy, against recording into a
//! `FileBackend` (the target: "the proxy recording a 1,000-chunk stream into PostgreSQL costs
//! ≤ 2× the same into a `FileBackend`, and 50 concurrent streamed calls on 50 sessions through
//! one proxy hold that").
//!
//! A loopback upstream streams 1,000 content deltas, one write each; the same proxy code
//! records them into a `FileBackend` (its default `Buffered` durability) in a temp directory,
//! and into a `PostgresBackend` on `CUCA_PG_URL` with `Durability::Pipelined` (what `cuca
//! proxy --store postgres://…` uses) and, for scale, `Durability::Commit` (a commit per
//! record). A call is timed from the request to the end of its body, which comes after the
//! call's closing record was acknowledged — so the PostgreSQL figure includes the commit of
//! every record of the call. Rounds are interleaved, so drift lands on every contender alike;
//! the medians go to `target/cuca-bench/proxy-postgres.json` for `cargo xtask bench`.
//!
//! * `stream_1000/{file,postgres,postgres_commit}`: one 1,000-chunk call;
//! * `parallel_50/{file,postgres}`: 50 such calls at once, each on a session of its own;
//! * `first_byte_50/{file,postgres}`: 50 such calls at once, each beginning a new session
//!   (fresh ids every round), timed from the request to the first byte of its answer: the
//!   slowest of the 50. A new session's request records (its prompt and message, which wait
//!   for their commit) are written before its answer is passed on, so this is what fifty
//!   agents starting together wait before their first token.
//!
//! Without `CUCA_PG_URL` it prints why and measures nothing.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use cuca_calllog::CallLog;
use cuca_events::SessionBackend;
use cuca_proxy::{Mode, Proxy, ProxyConfig};
use cuca_store_file::FileBackend;
use cuca_store_postgres::{Durability, PostgresBackend, PostgresConfig};
use futures::StreamExt;

const N_CHUNKS: usize = 1_000;
const PARALLEL: usize = 50;
const ROUNDS: usize = 15;
const PARALLEL_ROUNDS: usize = 5;
const FIRST_BYTE_ROUNDS: usize = 9;
/// A commit per record costs a disk flush each: two rounds show the scale.
const COMMIT_ROUNDS: usize = 2;

const REQUEST: &str = r#"{"model":"tiny","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"count"}]}"#;

fn events() -> Arc<Vec<Bytes>> {
    let mut out = Vec::with_capacity(N_CHUNKS + 2);
    for i in 0..N_CHUNKS {
        out.push(Bytes::from(format!("data: {{\"choices\":[{{\"finish_reason\":null,\"index\":0,\"delta\":{{\"content\":\" tok{i}\"}}}}],\"model\":\"tiny\",\"object\":\"chat.completion.chunk\"}}\n\n")));
    }
    out.push(Bytes::from_static(b"data: {\"choices\":[{\"finish_reason\":\"length\",\"index\":0,\"delta\":{}}],\"model\":\"tiny\",\"object\":\"chat.completion.chunk\"}\n\n"));
    out.push(Bytes::from(format!("data: {{\"choices\":[],\"model\":\"tiny\",\"usage\":{{\"completion_tokens\":{N_CHUNKS},\"prompt_tokens\":4,\"total_tokens\":{}}}}}\n\ndata: [DONE]\n\n", N_CHUNKS + 4)));
    Arc::new(out)
}

async fn upstream() -> String {
    let events = events();
    let router = Router::new().route(
        "/v1/chat/completions",
        post(move || {
            let events = Arc::clone(&events);
            async move {
                // One write per event, as a model server sends them.
                let stream = futures::stream::iter(0..events.len()).then(move |i| {
                    let event = events[i].clone();
                    async move {
                        tokio::task::yield_now().await;
                        Ok::<_, std::io::Error>(event)
                    }
                });
                Response::builder()
                    .header("Content-Type", "text/event-stream")
                    .body(Body::from_stream(stream))
                    .unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        tcp.set_nodelay(true).unwrap();
    });
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}")
}

async fn recording(
    upstream: &str,
    backend: Arc<dyn SessionBackend>,
    dir: &std::path::Path,
) -> String {
    let log = CallLog::builder()
        .path(Some(dir.join("calls.jsonl")))
        .build();
    let proxy = Proxy::with_call_log(
        ProxyConfig::new(Mode::Record, Some(upstream.to_owned())).unwrap(),
        backend,
        log,
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { proxy.serve(listener, std::future::pending()).await.unwrap() });
    format!("http://{addr}")
}

/// One streamed call on `session`, read to the end of its body: the time to its end.
async fn call(client: &reqwest::Client, base: &str, session: &str) -> Duration {
    call_timed(client, base, session).await.1
}

/// One streamed call on `session`, read to the end of its body: the time to the first byte
/// of its body, and to its end.
async fn call_timed(client: &reqwest::Client, base: &str, session: &str) -> (Duration, Duration) {
    let started = Instant::now();
    let mut first = None;
    let response = client
        .post(format!("{base}/s/{session}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(REQUEST)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
    let mut body = response.bytes_stream();
    let mut n = 0;
    while let Some(piece) = body.next().await {
        let piece = piece.unwrap();
        if first.is_none() && !piece.is_empty() {
            first = Some(started.elapsed());
        }
        n += piece.len();
    }
    assert!(n > N_CHUNKS * 40);
    (first.unwrap(), started.elapsed())
}

async fn parallel(client: &reqwest::Client, base: &str, round: usize) -> Duration {
    let started = Instant::now();
    let calls: Vec<_> = (0..PARALLEL)
        .map(|i| {
            let client = client.clone();
            let base = base.to_owned();
            tokio::spawn(async move { call(&client, &base, &format!("par{round}-{i}")).await })
        })
        .collect();
    for call in calls {
        call.await.unwrap();
    }
    started.elapsed()
}

/// 50 calls at once, each beginning session `{prefix}{i}`: the slowest time to first byte.
async fn first_bytes(client: &reqwest::Client, base: &str, prefix: &str) -> Duration {
    let calls: Vec<_> = (0..PARALLEL)
        .map(|i| {
            let client = client.clone();
            let base = base.to_owned();
            let session = format!("{prefix}{i}");
            tokio::spawn(async move { call_timed(&client, &base, &session).await.0 })
        })
        .collect();
    let mut slowest = Duration::ZERO;
    for call in calls {
        slowest = slowest.max(call.await.unwrap());
    }
    slowest
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let Some(url) = std::env::var("CUCA_PG_URL").ok().filter(|u| !u.is_empty()) else {
        println!("proxy-postgres: skipped: CUCA_PG_URL is unset; start a server with `bash .ci/postgres.sh start` and export the URL it prints");
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let connect = |durability| -> Arc<dyn SessionBackend> {
        let config = PostgresConfig::new(&url)
            .unwrap()
            .with_throwaway_schema()
            .with_durability(durability);
        Arc::new(PostgresBackend::connect(config).unwrap())
    };
    let file: Arc<dyn SessionBackend> =
        Arc::new(FileBackend::new(dir.path().join("sessions")).unwrap());
    let pipelined = connect(Durability::Pipelined);
    let committed = connect(Durability::Commit);
    let (file_proxy, pg_proxy, commit_proxy) = runtime.block_on(async {
        let upstream = upstream().await;
        (
            recording(&upstream, file, dir.path()).await,
            recording(&upstream, Arc::clone(&pipelined), dir.path()).await,
            recording(&upstream, Arc::clone(&committed), dir.path()).await,
        )
    });
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(PARALLEL)
        .build()
        .unwrap();
    let (mut on_file, mut on_pg, mut on_commit) = (Vec::new(), Vec::new(), Vec::new());
    let (mut par_file, mut par_pg) = (Vec::new(), Vec::new());
    let (mut first_file, mut first_pg) = (Vec::new(), Vec::new());
    runtime.block_on(async {
        // A first call each opens the sessions and warms the connections.
        call(&client, &file_proxy, "stream").await;
        call(&client, &pg_proxy, "stream").await;
        for round in 0..ROUNDS {
            on_file.push(call(&client, &file_proxy, "stream").await);
            on_pg.push(call(&client, &pg_proxy, "stream").await);
            if round < COMMIT_ROUNDS {
                on_commit.push(call(&client, &commit_proxy, "stream").await);
            }
        }
        for round in 0..PARALLEL_ROUNDS {
            par_file.push(parallel(&client, &file_proxy, round).await);
            par_pg.push(parallel(&client, &pg_proxy, round).await);
        }
        // Every round's sessions are new in both stores; the order alternates so neither
        // store always runs right after the other's fifty streams.
        for round in 0..FIRST_BYTE_ROUNDS {
            let prefix = format!("first{round}-");
            if round % 2 == 0 {
                first_file.push(first_bytes(&client, &file_proxy, &prefix).await);
                first_pg.push(first_bytes(&client, &pg_proxy, &prefix).await);
            } else {
                first_pg.push(first_bytes(&client, &pg_proxy, &prefix).await);
                first_file.push(first_bytes(&client, &file_proxy, &prefix).await);
            }
        }
    });
    let (file_ns, pg_ns, commit_ns) = (median(on_file), median(on_pg), median(on_commit));
    let (par_file_ns, par_pg_ns) = (median(par_file), median(par_pg));
    let (first_file_ns, first_pg_ns) = (median(first_file), median(first_pg));
    let nanos = |d: Duration| d.as_nanos() as f64;
    cuca_bench::write_result(
        "proxy-postgres",
        &serde_json::json!({
            "stream_1000": {"file": nanos(file_ns), "postgres": nanos(pg_ns), "postgres_commit": nanos(commit_ns)},
            "parallel_50": {"file": nanos(par_file_ns), "postgres": nanos(par_pg_ns)},
            "first_byte_50": {"file": nanos(first_file_ns), "postgres": nanos(first_pg_ns)},
        }),
    )
    .unwrap();
    println!(
        "proxy-postgres: one {N_CHUNKS}-chunk call (median of {ROUNDS}): file {file_ns:?}, postgres pipelined {pg_ns:?} ({:.2}x), postgres commit per record {commit_ns:?} ({:.1}x); {PARALLEL} concurrent calls on {PARALLEL} sessions (median of {PARALLEL_ROUNDS}): file {par_file_ns:?}, postgres {par_pg_ns:?} ({:.2}x); the slowest first byte of {PARALLEL} calls beginning new sessions (median of {FIRST_BYTE_ROUNDS}): file {first_file_ns:?}, postgres {first_pg_ns:?} ({:.2}x)",
        nanos(pg_ns) / nanos(file_ns),
        nanos(commit_ns) / nanos(file_ns),
        nanos(par_pg_ns) / nanos(par_file_ns),
        nanos(first_pg_ns) / nanos(first_file_ns),
    );
    drop((pipelined, committed));
}
