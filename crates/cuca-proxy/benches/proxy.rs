//! What recording through the proxy costs a caller: time to first byte and per-chunk cost of
//! one streamed call, through the recording proxy, against the same client talking to the
//! upstream directly, and against a plain pass-through reverse proxy (no decoding, no
//! recording) as the floor.
//!
//! Two loopback axum upstreams, each writing one event at a time as llama-server does: one
//! answers with the byte-exact llama-server transcript `fixtures/llama-server/stream-basic.body`
//! (a real answer's length, for time to first byte), the other with `N_CHUNKS` content deltas
//! (for the cost per chunk). The recording proxy writes to a `FileBackend` in a temp directory
//! and its call log to a temp file, as `cuca proxy` does.
//!
//! * `proxy_ttfb/{direct,passthrough,recording}`: request sent to first body byte, on the
//!   transcript;
//! * `proxy_stream/{…}`: the whole `N_CHUNKS` call, throughput in chunks, so criterion's
//!   figure is the cost per chunk; `recording` redacts by the default rules (as `cuca proxy`
//!   does unless told otherwise), `recording_unredacted` has every rule turned off, so the
//!   two together say what redaction costs a chunk (the target: at most 10%);
//! * first, an interleaved run of `TTFB_ROUNDS` transcript calls per route prints p50
//!   and p99 time to first byte and what the recording proxy adds over each baseline at p99
//!   (the issue's target: under 1 ms), and writes them, in nanoseconds, to
//!   `target/cuca-bench/proxy-ttfb.json` for `cargo xtask bench`'s table; then the same
//!   for the Messages and Responses formats on their llama-server transcripts, direct and
//!   recording (printed).
//!
//! * `proxy_stream_messages/{passthrough,recording}` and
//!   `proxy_stream_responses/{…}`: the same per-chunk cost for an Anthropic Messages and an
//!   OpenAI Responses stream of `N_CHUNKS` text deltas;
//! * `proxy_parallel/{direct,recording}`: the wall time of [`PARALLEL`] concurrent streamed
//!   calls with [`PARALLEL`] different questions through one base URL (one session, so
//!   [`PARALLEL`] conversations), against an upstream that writes [`PACED_EVENTS`] events
//!   [`PACE`] apart, as a model generates them (the target: "8 parallel streamed calls through
//!   one base URL take ≤ 1.2× the direct wall time").
//!
//! * `proxy_replay/{turns_10,turns_100,turns_1000,direct}`: one replayed streamed call, whole,
//!   through a replaying proxy (the recording's first call, the same request on every session),
//!   on sessions of 10, 100 and 1,000 recorded turns of one growing conversation, written as
//!   the proxy's session log writes them; and the same request sent to the transcript upstream
//!   directly (the target: "a replayed request on the 1,000-turn session costs ≤ 1.5× one
//!   on the 10-turn session, and ≤ 2× the direct upstream call"). Before the replay index each
//!   such call loaded and segmented its whole session.
//!
//! * `proxy_loop/{direct,recorded,replayed}`: a whole 1,000-turn agent loop in order, each
//!   turn sending the conversation so far, to an upstream that answers as the loop was
//!   recorded: directly, through a recording proxy (a new session each loop) and through a
//!   replaying proxy over its recording (the targets: each ≤ 2× direct).
//!
//! * first of all, the proxy's own CPU per streamed chunk: the pass-through floor and the
//!   recording proxy (default redaction, and none) on a runtime of their own, whose threads'
//!   CPU the kernel counts (`/proc/self/task/*/schedstat`), `N_CHUNKS` calls interleaved;
//!   printed and written to `target/cuca-bench/proxy-cpu.json` (the target: recording adds
//!   at most 2 µs a chunk to what passing it through costs).
//!
//! Why time to first byte is not taken on the long stream: an upstream that has a thousand
//! events ready at once (no model does; llama-server writes each as it is generated) keeps
//! the bench's two cores busy forwarding and recording the burst, and the first byte then
//! waits for CPU, not for the proxy. That case is the per-chunk figure.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use cuca_bench::llama;
use cuca_calllog::CallLog;
use cuca_events::SessionBackend;
use cuca_proxy::{Mode, Proxy, ProxyConfig};
use cuca_store_file::FileBackend;
use futures::StreamExt;

const N_CHUNKS: u64 = 1_000;
/// Concurrent calls in `proxy_parallel`.
const PARALLEL: usize = 8;
/// Events of each `proxy_parallel` answer, and the time between two of them: about 100 ms of
/// generation per call.
const PACED_EVENTS: usize = 50;
const PACE: Duration = Duration::from_millis(2);
const TTFB_ROUNDS: usize = 1_000;

/// The transcript's events, each with its blank line, byte for byte.
fn transcript() -> Vec<Bytes> {
    llama::events(llama::STREAM_BASIC)
        .into_iter()
        .map(Bytes::copy_from_slice)
        .collect()
}

fn events() -> Vec<Bytes> {
    let mut out = vec![Bytes::from_static(b"data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null}}],\"created\":1795972076,\"id\":\"chatcmpl-bench\",\"model\":\"cuca-tiny-random\",\"object\":\"chat.completion.chunk\"}\n\n")];
    for i in 0..N_CHUNKS {
        out.push(Bytes::from(format!("data: {{\"choices\":[{{\"finish_reason\":null,\"index\":0,\"delta\":{{\"content\":\" tok{i}\"}}}}],\"created\":1795972076,\"id\":\"chatcmpl-bench\",\"model\":\"cuca-tiny-random\",\"object\":\"chat.completion.chunk\"}}\n\n")));
    }
    out.push(Bytes::from_static(b"data: {\"choices\":[{\"finish_reason\":\"length\",\"index\":0,\"delta\":{}}],\"model\":\"cuca-tiny-random\",\"object\":\"chat.completion.chunk\"}\n\n"));
    out.push(Bytes::from(format!("data: {{\"choices\":[],\"model\":\"cuca-tiny-random\",\"usage\":{{\"completion_tokens\":{N_CHUNKS},\"prompt_tokens\":40,\"total_tokens\":{}}}}}\n\ndata: [DONE]\n\n", N_CHUNKS + 40)));
    out
}

const REQUEST: &str = r#"{"model":"tiny","stream":true,"stream_options":{"include_usage":true},"max_tokens":1000,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"The vault is in Lisbon. Reply with: noted"}]}"#;

/// Serves `router` with TCP_NODELAY on every accepted connection, as `Proxy::serve` does for
/// the recording proxy: without it the upstream and the floor would hold small writes back
/// (Nagle) and the comparison would measure socket options, not the proxies.
async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        tcp.set_nodelay(true).unwrap();
    });
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}")
}

async fn upstream(events: Vec<Bytes>) -> String {
    upstream_at("/v1/chat/completions", events).await
}

/// An upstream answering `path` with `events`, one write each.
async fn upstream_at(path: &str, events: Vec<Bytes>) -> String {
    let events = Arc::new(events);
    let router = Router::new().route(
        path,
        // The body is read, as a real server reads it: one answered before its request was
        // read whole closes the connection under a long request.
        post(move |_request: Bytes| {
            let events = Arc::clone(&events);
            async move {
                // One write per event, as llama-server sends them: a yield after each makes
                // hyper flush it, where a stream with every event ready would be buffered and
                // sent in one go.
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
    serve(router).await
}

/// An upstream that generates: [`PACED_EVENTS`] content events [`PACE`] apart, then the
/// finish, the usage and `[DONE]`.
async fn paced_upstream() -> String {
    let mut paced = events();
    paced.drain(1..paced.len() - 2 - PACED_EVENTS);
    let paced = Arc::new(paced);
    let router = Router::new().route(
        "/v1/chat/completions",
        post(move || {
            let paced = Arc::clone(&paced);
            async move {
                let stream = futures::stream::iter(paced.to_vec()).then(|event| async move {
                    tokio::time::sleep(PACE).await;
                    Ok::<_, std::io::Error>(event)
                });
                Response::builder()
                    .header("Content-Type", "text/event-stream")
                    .body(Body::from_stream(stream))
                    .unwrap()
            }
        }),
    );
    serve(router).await
}

/// The request of `proxy_parallel`'s call `i`: the same system prompt, a question of its own.
fn question(i: usize) -> String {
    REQUEST.replace(
        "The vault is in Lisbon. Reply with: noted",
        &format!("Question {i}: where is vault {i}?"),
    )
}

/// [`PARALLEL`] calls at once, each with its own question: the wall time until the last ends.
async fn parallel(client: &reqwest::Client, base: &str, requests: &[String]) -> Duration {
    let started = Instant::now();
    let calls = requests.iter().map(|request| async move {
        let response = client
            .post(format!("{base}/v1/chat/completions"))
            .header("content-type", "application/json")
            .body(request.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let mut body = response.bytes_stream();
        let mut n = 0;
        while let Some(piece) = body.next().await {
            n += piece.unwrap().len();
        }
        assert!(n > 0);
    });
    futures::future::join_all(calls).await;
    started.elapsed()
}

/// The floor: forwards the body and streams the answer back, nothing else.
async fn passthrough(upstream: String) -> String {
    passthrough_at(upstream, "/v1/chat/completions").await
}

/// The floor for `path`: forwards the body and streams the answer back, nothing else.
async fn passthrough_at(upstream: String, path: &str) -> String {
    let http = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let url = format!("{upstream}{path}");
    let router = Router::new()
        .route(
            path,
            post(
                |State((http, url)): State<(reqwest::Client, String)>,
                 headers: HeaderMap,
                 body: Bytes| async move {
                    let answer = http
                        .post(url)
                        .header("content-type", headers["content-type"].clone())
                        .body(body)
                        .send()
                        .await
                        .unwrap();
                    let status = answer.status();
                    let mut response = Response::new(Body::from_stream(answer.bytes_stream()));
                    *response.status_mut() = status;
                    response
                },
            ),
        )
        .with_state((http, url));
    serve(router).await
}

async fn recording(upstream: String, dir: &std::path::Path) -> String {
    recording_with(upstream, dir, true).await
}

/// A recording proxy, redacting by the default rules or, without `redact`, by none.
async fn recording_with(upstream: String, dir: &std::path::Path, redact: bool) -> String {
    let mut config = ProxyConfig::new(Mode::Record, Some(upstream)).unwrap();
    if !redact {
        config.redaction.disable = cuca_redact::DEFAULT_RULES
            .iter()
            .map(|rule| rule.name.to_owned())
            .collect();
    }
    let backend: Arc<dyn SessionBackend> =
        Arc::new(FileBackend::new(dir.join("sessions")).unwrap());
    let log = CallLog::builder()
        .path(Some(dir.join("calls.jsonl")))
        .build();
    let proxy = Proxy::with_call_log(config, backend, log).unwrap();
    // Served the way `cuca proxy` serves it, socket options included.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { proxy.serve(listener, std::future::pending()).await.unwrap() });
    format!("http://{addr}")
}

/// One call: the time to the first body byte, and to the end.
async fn call(client: &reqwest::Client, base: &str) -> (Duration, Duration) {
    call_at(client, base, "/v1/chat/completions", REQUEST).await
}

/// One call to `path` with `request`.
async fn call_at(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    request: &'static str,
) -> (Duration, Duration) {
    let started = Instant::now();
    let response = client
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(request)
        .send()
        .await
        .unwrap();
    let mut body = response.bytes_stream();
    let first = body.next().await.unwrap().unwrap();
    let ttfb = started.elapsed();
    let mut n = first.len();
    while let Some(piece) = body.next().await {
        n += piece.unwrap().len();
    }
    assert!(n > 0);
    (ttfb, started.elapsed())
}

/// An Anthropic Messages stream of `N_CHUNKS` text deltas, in Anthropic's event shapes.
fn messages_events() -> Vec<Bytes> {
    let event = |name: &str, data: String| Bytes::from(format!("event: {name}\ndata: {data}\n\n"));
    let mut out = vec![
        event("message_start", r#"{"type":"message_start","message":{"id":"msg_bench","type":"message","role":"assistant","content":[],"model":"cuca-tiny-random","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":40,"output_tokens":1}}}"#.to_owned()),
        event("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#.to_owned()),
    ];
    for i in 0..N_CHUNKS {
        out.push(event("content_block_delta", format!(r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":" tok{i}"}}}}"#)));
    }
    out.push(event(
        "content_block_stop",
        r#"{"type":"content_block_stop","index":0}"#.to_owned(),
    ));
    out.push(event("message_delta", format!(r#"{{"type":"message_delta","delta":{{"stop_reason":"max_tokens","stop_sequence":null}},"usage":{{"output_tokens":{N_CHUNKS}}}}}"#)));
    out.push(event(
        "message_stop",
        r#"{"type":"message_stop"}"#.to_owned(),
    ));
    out
}

/// A Responses event stream of `N_CHUNKS` text deltas, in OpenAI's event shapes.
fn responses_events() -> Vec<Bytes> {
    let event = |name: &str, data: String| Bytes::from(format!("event: {name}\ndata: {data}\n\n"));
    let mut out = vec![
        event("response.created", r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_bench","object":"response","created_at":0,"status":"in_progress","model":"cuca-tiny-random","output":[]}}"#.to_owned()),
        event("response.output_item.added", r#"{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_bench","type":"message","role":"assistant","status":"in_progress","content":[]}}"#.to_owned()),
        event("response.content_part.added", r#"{"type":"response.content_part.added","sequence_number":2,"item_id":"msg_bench","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}"#.to_owned()),
    ];
    for i in 0..N_CHUNKS {
        out.push(event("response.output_text.delta", format!(r#"{{"type":"response.output_text.delta","sequence_number":{},"item_id":"msg_bench","output_index":0,"content_index":0,"delta":" tok{i}","logprobs":[]}}"#, i + 3)));
    }
    out.push(event("response.output_item.done", format!(r#"{{"type":"response.output_item.done","sequence_number":{},"output_index":0,"item":{{"id":"msg_bench","type":"message","role":"assistant","status":"completed","content":[{{"type":"output_text","text":"…","annotations":[]}}]}}}}"#, N_CHUNKS + 3)));
    out.push(event("response.completed", format!(r#"{{"type":"response.completed","sequence_number":{},"response":{{"id":"resp_bench","object":"response","created_at":0,"status":"completed","model":"cuca-tiny-random","output":[],"usage":{{"input_tokens":40,"output_tokens":{N_CHUNKS},"total_tokens":{}}}}}}}"#, N_CHUNKS + 4, N_CHUNKS + 40)));
    out
}

/// llama-server's streamed answers in the Messages and Responses formats, and their requests.
const MESSAGES_STREAM: &[u8] =
    include_bytes!("../../../fixtures/llama-server/messages-stream.body");
const MESSAGES_STREAM_REQUEST: &str =
    include_str!("../../../fixtures/llama-server/messages-stream.request.json");
const RESPONSES_STREAM: &[u8] =
    include_bytes!("../../../fixtures/llama-server/responses-stream.body");
const RESPONSES_STREAM_REQUEST: &str =
    include_str!("../../../fixtures/llama-server/responses-stream.request.json");

const MESSAGES_REQUEST: &str = r#"{"model":"tiny","stream":true,"max_tokens":1000,"system":"You are terse.","messages":[{"role":"user","content":"The vault is in Lisbon. Reply with: noted"}]}"#;
const RESPONSES_REQUEST: &str = r#"{"model":"tiny","stream":true,"max_output_tokens":1000,"instructions":"You are terse.","input":[{"role":"user","content":"The vault is in Lisbon. Reply with: noted"}]}"#;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let routes_to = |events: Vec<Bytes>, dir: std::path::PathBuf| async move {
        let upstream = upstream(events).await;
        let floor = passthrough(upstream.clone()).await;
        let proxy = recording(upstream.clone(), &dir).await;
        [
            ("direct", upstream),
            ("passthrough", floor),
            ("recording", proxy),
        ]
    };
    let (short, routes) = runtime.block_on(async {
        (
            routes_to(transcript(), dir.path().join("short")).await,
            routes_to(events(), dir.path().join("long")).await,
        )
    });
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .unwrap();

    // Interleaved, so drift on a shared machine lands on every route alike; and first,
    // before criterion's groups fill the page cache with the long streams' records, whose
    // writeback would otherwise land on these calls' writes.
    let mut ttfb: [Vec<Duration>; 3] = Default::default();
    runtime.block_on(async {
        for _ in 0..TTFB_ROUNDS {
            for (i, (_, base)) in short.iter().enumerate() {
                ttfb[i].push(call(&client, base).await.0);
            }
        }
    });
    for times in &mut ttfb {
        times.sort();
    }
    let p99: Vec<Duration> = ttfb.iter().map(|t| percentile(t, 0.99)).collect();
    // For `cargo xtask bench`'s table (the results directory every cuca bench writes to).
    let per_route = |p: f64| -> serde_json::Value {
        short
            .iter()
            .zip(&ttfb)
            .map(|((name, _), times)| {
                (
                    (*name).to_owned(),
                    serde_json::json!(percentile(times, p).as_nanos() as f64),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    cuca_bench::write_result(
        "proxy-ttfb",
        &serde_json::json!({ "p50": per_route(0.5), "p99": per_route(0.99) }),
    )
    .unwrap();
    println!(
        "proxy ttfb ({TTFB_ROUNDS} interleaved calls each, llama-server transcript): p50 direct {:?}, pass-through {:?}, recording {:?}; p99 direct {:?}, pass-through {:?}, recording {:?}; recording adds {:?} over direct and {:?} over pass-through at p99",
        percentile(&ttfb[0], 0.5),
        percentile(&ttfb[1], 0.5),
        percentile(&ttfb[2], 0.5),
        p99[0],
        p99[1],
        p99[2],
        p99[2].saturating_sub(p99[0]),
        p99[2].saturating_sub(p99[1]),
    );

    // The other two formats on their real llama-server transcripts, direct and recorded,
    // interleaved as above: what recording adds to each format's first byte.
    for (format, path, body, request) in [
        (
            "messages",
            "/v1/messages",
            MESSAGES_STREAM,
            MESSAGES_STREAM_REQUEST,
        ),
        (
            "responses",
            "/v1/responses",
            RESPONSES_STREAM,
            RESPONSES_STREAM_REQUEST,
        ),
    ] {
        let bases = runtime.block_on(async {
            let events = llama::events(body)
                .into_iter()
                .map(Bytes::copy_from_slice)
                .collect();
            let upstream = upstream_at(path, events).await;
            let proxy = recording(upstream.clone(), &dir.path().join(format)).await;
            [upstream, proxy]
        });
        let mut times: [Vec<Duration>; 2] = Default::default();
        runtime.block_on(async {
            for _ in 0..TTFB_ROUNDS {
                for (i, base) in bases.iter().enumerate() {
                    times[i].push(call_at(&client, base, path, request).await.0);
                }
            }
        });
        for t in &mut times {
            t.sort();
        }
        let (direct, recorded) = (percentile(&times[0], 0.99), percentile(&times[1], 0.99));
        println!(
            "proxy ttfb, {format} ({TTFB_ROUNDS} interleaved calls each, llama-server transcript): p50 direct {:?}, recording {:?}; p99 direct {direct:?}, recording {recorded:?}; recording adds {:?} at p99",
            percentile(&times[0], 0.5),
            percentile(&times[1], 0.5),
            recorded.saturating_sub(direct),
        );
    }

    let mut group = c.benchmark_group("proxy_ttfb");
    for (name, base) in &short {
        group.bench_function(*name, |b| {
            b.iter_custom(|iters| {
                runtime.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += call(&client, base).await.0;
                    }
                    total
                })
            })
        });
    }
    group.finish();

    let unredacted = runtime.block_on(recording_with(
        routes[0].1.clone(),
        &dir.path().join("long-unredacted"),
        false,
    ));
    let stream_routes: Vec<(&str, String)> = routes
        .iter()
        .cloned()
        .chain([("recording_unredacted", unredacted)])
        .collect();
    let mut group = c.benchmark_group("proxy_stream");
    group.throughput(Throughput::Elements(N_CHUNKS));
    for (name, base) in &stream_routes {
        group.bench_function(*name, |b| {
            b.iter_custom(|iters| {
                runtime.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += call(&client, base).await.1;
                    }
                    total
                })
            })
        });
    }
    group.finish();

    // Recording an Anthropic and a Responses stream, per chunk, against the same
    // pass-through floor (the target: at most 1.5×, as for Chat Completions).
    for (group_name, path, events, request) in [
        (
            "proxy_stream_messages",
            "/v1/messages",
            messages_events(),
            MESSAGES_REQUEST,
        ),
        (
            "proxy_stream_responses",
            "/v1/responses",
            responses_events(),
            RESPONSES_REQUEST,
        ),
    ] {
        let routes = runtime.block_on(async {
            let upstream = upstream_at(path, events).await;
            let floor = passthrough_at(upstream.clone(), path).await;
            let proxy = recording(upstream, &dir.path().join(group_name)).await;
            [("passthrough", floor), ("recording", proxy)]
        });
        let mut group = c.benchmark_group(group_name);
        group.throughput(Throughput::Elements(N_CHUNKS));
        for (name, base) in &routes {
            group.bench_function(*name, |b| {
                b.iter_custom(|iters| {
                    runtime.block_on(async {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            total += call_at(&client, base, path, request).await.1;
                        }
                        total
                    })
                })
            });
        }
        group.finish();
    }

    // Calls on different conversations of one session record in parallel.
    let paced = runtime.block_on(async {
        let upstream = paced_upstream().await;
        let proxy = recording(upstream.clone(), &dir.path().join("parallel")).await;
        [("direct", upstream), ("recording", proxy)]
    });
    let requests: Vec<String> = (0..PARALLEL).map(question).collect();
    let mut group = c.benchmark_group("proxy_parallel");
    // Each iteration is ~100 ms of generation: few, equal samples.
    group.sampling_mode(criterion::SamplingMode::Flat);
    group.sample_size(10);
    for (name, base) in &paced {
        group.bench_function(*name, |b| {
            b.iter_custom(|iters| {
                runtime.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += parallel(&client, base, &requests).await;
                    }
                    total
                })
            })
        });
    }
    group.finish();
}

/// The records the proxy's session log writes for call `k` of one conversation with a
/// system prompt, each call asking the next question (`messages`: the system prompt, the `k`
/// exchanges before it and the question).
fn replay_turn(session: &str, k: u64, sequence: &mut u64) -> Vec<cuca_events::SessionRecord> {
    use cuca_events::{Message, SessionEvent};
    let mut events = vec![SessionEvent::SystemPrompt {
        text: "You are terse.".into(),
    }];
    if k > 0 {
        events.push(SessionEvent::Message(Message::assistant(format!(
            "noted {}",
            k - 1
        ))));
    }
    events.push(SessionEvent::Message(Message::user(format!(
        "The vault is in city {k}. Reply with: noted"
    ))));
    events.extend([
        SessionEvent::CallRequest {
            model: "tiny".into(),
            parameters: "{}".into(),
            tools: "[]".into(),
            messages: 2 * k + 2,
        },
        SessionEvent::Output {
            text: format!("noted {k}"),
        },
        SessionEvent::CallFinish {
            finish_reason: Some("stop".into()),
            model: "cuca-tiny-random".into(),
        },
        SessionEvent::Latency { duration_ms: 41 },
        SessionEvent::TokenUsage {
            prompt_tokens: 31,
            completion_tokens: 2,
        },
    ]);
    events
        .into_iter()
        .map(|event| {
            *sequence += 1;
            cuca_events::SessionRecord {
                session_id: session.to_owned(),
                sequence: *sequence - 1,
                timestamp_ms: 1_700_000_000_000,
                event,
            }
        })
        .collect()
}

/// Interleaved rounds of `proxy_replay`'s printed medians.
const REPLAY_ROUNDS: usize = 500;

/// The request of the recording's first call.
const REPLAY_REQUEST: &str = r#"{"model":"tiny","stream":true,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"The vault is in city 0. Reply with: noted"}]}"#;

/// A replaying proxy over `dir`, holding sessions `turns_{n}` of `n` recorded turns each.
async fn replaying(dir: &std::path::Path, sizes: &[u64]) -> String {
    let backend = FileBackend::new(dir).unwrap();
    for n in sizes {
        let session = format!("turns_{n}");
        let mut sequence = 0;
        for k in 0..*n {
            for record in replay_turn(&session, k, &mut sequence) {
                backend.append(record).unwrap();
            }
        }
    }
    let proxy = Proxy::with_call_log(
        ProxyConfig::new(Mode::Replay, None).unwrap(),
        Arc::new(backend),
        CallLog::builder().path(None).build(),
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { proxy.serve(listener, std::future::pending()).await.unwrap() });
    format!("http://{addr}")
}

/// One replayed call, read whole.
async fn replayed(client: &reqwest::Client, url: &str) {
    asked(client, url, REPLAY_REQUEST).await;
}

/// The request of call `k` of the recorded agent loop ([`replay_turn`]): the system prompt,
/// the `k` exchanges before it and its question — what an agent sends at its `k + 1`th turn.
fn loop_request(k: u64) -> String {
    let mut messages = vec![serde_json::json!({"role": "system", "content": "You are terse."})];
    for j in 0..=k {
        messages.push(serde_json::json!({
            "role": "user",
            "content": format!("The vault is in city {j}. Reply with: noted"),
        }));
        if j < k {
            messages
                .push(serde_json::json!({"role": "assistant", "content": format!("noted {j}")}));
        }
    }
    serde_json::json!({"model": "tiny", "stream": true, "messages": messages}).to_string()
}

/// A replayed call costs what its turn costs, not what its session does.
fn bench_replay(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sizes = [10u64, 100, 1_000];
    let (proxy, upstream) = runtime.block_on(async {
        (
            replaying(dir.path(), &sizes).await,
            upstream(transcript()).await,
        )
    });
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let mut routes: Vec<(String, String)> = sizes
        .iter()
        .map(|n| {
            (
                format!("turns_{n}"),
                format!("{proxy}/s/turns_{n}/v1/chat/completions"),
            )
        })
        .collect();
    routes.push(("direct".into(), format!("{upstream}/v1/chat/completions")));
    // The last turn of the 1,000-turn loop, as the agent sends it (1,999 messages), against
    // the same request sent to the upstream directly: what an agent's late turns cost.
    let late = loop_request(999);
    let late_routes = [
        (
            "turns_1000_last".to_owned(),
            format!("{proxy}/s/turns_1000/v1/chat/completions"),
        ),
        (
            "direct_last".to_owned(),
            format!("{upstream}/v1/chat/completions"),
        ),
    ];
    // The first call of each session builds its index; the bench measures the calls after.
    // Interleaved warm-up rounds first, so no route is measured on a machine still settling
    // (connections, caches, the writeback of the sessions just written).
    runtime.block_on(async {
        for _ in 0..200 {
            for (_, url) in &routes {
                replayed(&client, url).await;
            }
            for (_, url) in &late_routes {
                asked(&client, url, &late).await;
            }
        }
    });
    // Interleaved too, as the time-to-first-byte run is, so drift on a shared machine lands
    // on every route alike: the medians and their ratios, printed beside criterion's figures.
    let medians: Vec<Duration> = runtime.block_on(async {
        let mut times = vec![Vec::new(); routes.len()];
        for _ in 0..REPLAY_ROUNDS {
            for (i, (_, url)) in routes.iter().enumerate() {
                let started = Instant::now();
                replayed(&client, url).await;
                times[i].push(started.elapsed());
            }
        }
        times
            .iter_mut()
            .map(|t| {
                t.sort();
                percentile(t, 0.5)
            })
            .collect()
    });
    let line: Vec<String> = routes
        .iter()
        .zip(&medians)
        .map(|((name, _), median)| format!("{name} {median:?}"))
        .collect();
    let ratio = |a: usize, b: usize| medians[a].as_secs_f64() / medians[b].as_secs_f64();
    println!(
        "proxy replay ({REPLAY_ROUNDS} interleaved calls each), median: {}; 1,000 turns / 10 turns {:.2}, 1,000 turns / direct {:.2}",
        line.join(", "),
        ratio(2, 0),
        ratio(2, 3)
    );
    let late_medians: Vec<Duration> = runtime.block_on(async {
        let mut times = vec![Vec::new(); late_routes.len()];
        for _ in 0..REPLAY_ROUNDS {
            for (i, (_, url)) in late_routes.iter().enumerate() {
                let started = Instant::now();
                asked(&client, url, &late).await;
                times[i].push(started.elapsed());
            }
        }
        times
            .iter_mut()
            .map(|t| {
                t.sort();
                percentile(t, 0.5)
            })
            .collect()
    });
    println!(
        "proxy replay of the 1,000th turn ({REPLAY_ROUNDS} interleaved calls each), median: replayed {:?}, direct {:?}; replayed / direct {:.2}",
        late_medians[0],
        late_medians[1],
        late_medians[0].as_secs_f64() / late_medians[1].as_secs_f64()
    );
    let mut group = c.benchmark_group("proxy_replay");
    for (name, url) in &routes {
        group.bench_function(name.as_str(), |b| {
            b.iter(|| runtime.block_on(replayed(&client, url)))
        });
    }
    for (name, url) in &late_routes {
        group.bench_function(name.as_str(), |b| {
            b.iter(|| runtime.block_on(asked(&client, url, &late)))
        });
    }
    group.finish();
}

/// How many one-question conversations the eval-harness session holds.
const CONVERSATIONS: u64 = 1_000;

/// The question of conversation `k` of the eval-harness session.
fn harness_question(k: u64) -> String {
    format!("Question {k}: what is {k} plus one? Reply with the number.")
}

/// The request that asks conversation `k`'s question again.
fn harness_request(k: u64) -> String {
    serde_json::json!({
        "model": "tiny",
        "stream": true,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": harness_question(k)},
        ],
    })
    .to_string()
}

/// A replaying proxy over `dir`, holding session `harness` recorded as an eval harness
/// records: [`CONVERSATIONS`] one-question conversations on one session, the first in the
/// base session and each next one in `harness:conv:N`.
async fn replaying_harness(dir: &std::path::Path) -> String {
    use cuca_events::{Message, SessionEvent, SessionRecord};
    let backend = FileBackend::new(dir).unwrap();
    for k in 0..CONVERSATIONS {
        let session = if k == 0 {
            "harness".to_owned()
        } else {
            cuca_events::conversation_session_id("harness", k)
        };
        let events = [
            SessionEvent::SystemPrompt {
                text: "You are terse.".into(),
            },
            SessionEvent::Message(Message::user(harness_question(k))),
            SessionEvent::CallRequest {
                model: "tiny".into(),
                parameters: "{}".into(),
                tools: "[]".into(),
                messages: 2,
            },
            SessionEvent::Output {
                text: format!("{}", k + 1),
            },
            SessionEvent::CallFinish {
                finish_reason: Some("stop".into()),
                model: "cuca-tiny-random".into(),
            },
            SessionEvent::Latency { duration_ms: 41 },
            SessionEvent::TokenUsage {
                prompt_tokens: 31,
                completion_tokens: 2,
            },
        ];
        for (sequence, event) in events.into_iter().enumerate() {
            backend
                .append(SessionRecord {
                    session_id: session.clone(),
                    sequence: sequence as u64,
                    timestamp_ms: 1_700_000_000_000,
                    event,
                })
                .unwrap();
        }
    }
    let proxy = Proxy::with_call_log(
        ProxyConfig::new(Mode::Replay, None).unwrap(),
        Arc::new(backend),
        CallLog::builder().path(None).build(),
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { proxy.serve(listener, std::future::pending()).await.unwrap() });
    format!("http://{addr}")
}

/// One call of `body` to `url`, read whole.
async fn asked(client: &reqwest::Client, url: &str, body: &str) {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(!response.bytes().await.unwrap().is_empty());
}

/// A conversation's replay costs what its own turns cost, not what the session's other
/// conversations do: the first and the last of [`CONVERSATIONS`] against the direct call.
fn bench_replay_conversations(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (proxy, upstream) = runtime.block_on(async {
        (
            replaying_harness(dir.path()).await,
            upstream(transcript()).await,
        )
    });
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let url = format!("{proxy}/s/harness/v1/chat/completions");
    let routes: Vec<(&str, String, String)> = vec![
        ("first", url.clone(), harness_request(0)),
        ("last", url.clone(), harness_request(CONVERSATIONS - 1)),
        (
            "direct",
            format!("{upstream}/v1/chat/completions"),
            harness_request(0),
        ),
    ];
    runtime.block_on(async {
        for _ in 0..50 {
            for (_, url, body) in &routes {
                asked(&client, url, body).await;
            }
        }
    });
    let medians: Vec<Duration> = runtime.block_on(async {
        let mut times = vec![Vec::new(); routes.len()];
        for _ in 0..REPLAY_ROUNDS {
            for (i, (_, url, body)) in routes.iter().enumerate() {
                let started = Instant::now();
                asked(&client, url, body).await;
                times[i].push(started.elapsed());
            }
        }
        times
            .iter_mut()
            .map(|t| {
                t.sort();
                percentile(t, 0.5)
            })
            .collect()
    });
    let ratio = |a: usize| medians[a].as_secs_f64() / medians[2].as_secs_f64();
    println!(
        "proxy replay of a {CONVERSATIONS}-conversation session ({REPLAY_ROUNDS} interleaved calls each), median: first {:?}, last {:?}, direct {:?}; first / direct {:.2}, last / direct {:.2}",
        medians[0],
        medians[1],
        medians[2],
        ratio(0),
        ratio(1)
    );
    let mut group = c.benchmark_group("proxy_replay_conversations");
    for (name, url, body) in &routes {
        group.bench_function(*name, |b| {
            b.iter(|| runtime.block_on(asked(&client, url, body)))
        });
    }
    group.finish();
}

/// Turns of `proxy_loop`'s agent loop.
const LOOP_TURNS: u64 = 1_000;
/// Interleaved rounds of `proxy_loop`'s printed medians: a round is three whole loops.
const LOOP_ROUNDS: usize = 3;

/// An upstream that answers an agent loop as [`replay_turn`] recorded it: the request's
/// `k + 1`th question is answered `noted k`, in a short stream. It counts the questions in
/// the body's bytes, the same work whoever sends it.
async fn loop_upstream() -> String {
    let router = Router::new().route(
        "/v1/chat/completions",
        post(|request: Bytes| async move {
            let questions = request
                .windows(15)
                .filter(|w| *w == br#""role":"user","#)
                .count();
            let k = questions.saturating_sub(1);
            let events = vec![
                Bytes::from(format!("data: {{\"choices\":[{{\"finish_reason\":null,\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"noted {k}\"}}}}],\"model\":\"cuca-tiny-random\",\"object\":\"chat.completion.chunk\"}}\n\n")),
                Bytes::from_static(b"data: {\"choices\":[{\"finish_reason\":\"stop\",\"index\":0,\"delta\":{}}],\"model\":\"cuca-tiny-random\",\"object\":\"chat.completion.chunk\"}\n\n"),
                Bytes::from_static(b"data: {\"choices\":[],\"model\":\"cuca-tiny-random\",\"usage\":{\"completion_tokens\":2,\"prompt_tokens\":31,\"total_tokens\":33}}\n\ndata: [DONE]\n\n"),
            ];
            let stream = futures::stream::iter(events.into_iter().map(Ok::<_, std::io::Error>));
            Response::builder()
                .header("Content-Type", "text/event-stream")
                .body(Body::from_stream(stream))
                .unwrap()
        }),
    );
    serve(router).await
}

/// One whole agent loop of `requests`, in order, on `url`.
async fn whole_loop(client: &reqwest::Client, url: &str, requests: &[String]) -> Duration {
    let started = Instant::now();
    for request in requests {
        asked(client, url, request).await;
    }
    started.elapsed()
}

/// A whole 1,000-turn agent loop, each turn sending the conversation so far, as an agent
/// does: sent to the upstream directly, recorded through the proxy (a new session each
/// time), and replayed from a recording of it (the targets: each ≤ 2× direct).
fn bench_loop(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (upstream, recorder, replayer) = runtime.block_on(async {
        let upstream = loop_upstream().await;
        let recorder = recording(upstream.clone(), &dir.path().join("loop-record")).await;
        let replayer = replaying(&dir.path().join("loop-replay"), &[LOOP_TURNS]).await;
        (upstream, recorder, replayer)
    });
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let requests: Vec<String> = (0..LOOP_TURNS).map(loop_request).collect();
    let direct = format!("{upstream}/v1/chat/completions");
    let replayed = format!("{replayer}/s/turns_{LOOP_TURNS}/v1/chat/completions");
    // A recorded loop begins a session of its own each time.
    let loops = std::cell::Cell::new(0);
    let recorded = || {
        loops.set(loops.get() + 1);
        format!("{recorder}/s/loop-{}/v1/chat/completions", loops.get())
    };
    let direct_url = || direct.clone();
    let replayed_url = || replayed.clone();
    let routes: [(&str, &dyn Fn() -> String); 3] = [
        ("direct", &direct_url),
        ("recorded", &recorded),
        ("replayed", &replayed_url),
    ];
    let mut times = [Vec::new(), Vec::new(), Vec::new()];
    runtime.block_on(async {
        for _ in 0..LOOP_ROUNDS {
            for (i, (_, url)) in routes.iter().enumerate() {
                times[i].push(whole_loop(&client, &url(), &requests).await);
            }
        }
    });
    let medians: Vec<Duration> = times
        .iter_mut()
        .map(|t| {
            t.sort();
            percentile(t, 0.5)
        })
        .collect();
    println!(
        "proxy loop of {LOOP_TURNS} turns, whole, in order ({LOOP_ROUNDS} interleaved rounds), median: direct {:?}, recorded {:?}, replayed {:?}; recorded / direct {:.2}, replayed / direct {:.2}",
        medians[0],
        medians[1],
        medians[2],
        medians[1].as_secs_f64() / medians[0].as_secs_f64(),
        medians[2].as_secs_f64() / medians[0].as_secs_f64(),
    );
    let mut group = c.benchmark_group("proxy_loop");
    group.sample_size(10);
    for (name, url) in routes {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                runtime.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += whole_loop(&client, &url(), &requests).await;
                    }
                    total
                })
            })
        });
    }
    group.finish();
}

/// The name of the threads of [`bench_cpu`]'s proxy runtime, by which their CPU is counted.
const PROXY_THREADS: &str = "proxy-measured";
/// Interleaved rounds of [`bench_cpu`].
const CPU_ROUNDS: usize = 31;

/// CPU time, in nanoseconds, that the kernel counted for this process's threads named
/// [`PROXY_THREADS`] (`/proc/self/task/*/schedstat`: time on a CPU, to the nanosecond).
fn proxy_cpu() -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let task = task.unwrap().path();
        // A thread may end between the listing and the reads: it is then not counted.
        let Ok(comm) = std::fs::read_to_string(task.join("comm")) else {
            continue;
        };
        if comm.trim_end() != PROXY_THREADS {
            continue;
        }
        if let Ok(stat) = std::fs::read_to_string(task.join("schedstat")) {
            total += stat
                .split_whitespace()
                .next()
                .and_then(|ns| ns.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    total
}

/// The proxy's own CPU per streamed chunk: the pass-through floor and the recording proxy
/// (default redaction, and none) run on a runtime of their own, whose threads' CPU is read
/// from the kernel before and after each `N_CHUNKS` call, the routes interleaved. The client
/// and the upstream run on the bench's runtime and are not counted. Printed, and written to
/// `target/cuca-bench/proxy-cpu.json` (nanoseconds per chunk, median of [`CPU_ROUNDS`]) for
/// `cargo xtask bench`'s table.
fn bench_cpu(_: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let proxies = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(PROXY_THREADS)
        // Its blocking threads stay, so no counted thread ends (and takes its count with it)
        // between two reads.
        .thread_keep_alive(Duration::from_secs(3_600))
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let upstream = runtime.block_on(upstream(events()));
    let routes = proxies.block_on(async {
        [
            ("passthrough", passthrough(upstream.clone()).await),
            ("recording", recording(upstream.clone(), dir.path()).await),
            (
                "recording_unredacted",
                recording_with(upstream.clone(), &dir.path().join("unredacted"), false).await,
            ),
        ]
    });
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let mut per_chunk: [Vec<u64>; 3] = Default::default();
    runtime.block_on(async {
        for round in 0..=CPU_ROUNDS {
            for (i, (_, base)) in routes.iter().enumerate() {
                let before = proxy_cpu();
                call(&client, base).await;
                // What the proxy does after the caller's last byte (the call's closing
                // records) belongs to the call.
                tokio::time::sleep(Duration::from_millis(20)).await;
                let used = proxy_cpu() - before;
                // Round 0 warms the connections and the session.
                if round > 0 {
                    per_chunk[i].push(used / N_CHUNKS);
                }
            }
        }
    });
    let medians: Vec<u64> = per_chunk
        .iter_mut()
        .map(|v| {
            v.sort_unstable();
            v[v.len() / 2]
        })
        .collect();
    cuca_bench::write_result(
        "proxy-cpu",
        &serde_json::json!({
            "per_chunk": routes
                .iter()
                .zip(&medians)
                .map(|((name, _), ns)| ((*name).to_owned(), serde_json::json!(*ns as f64)))
                .collect::<serde_json::Map<_, _>>()
        }),
    )
    .unwrap();
    println!(
        "proxy CPU per chunk ({CPU_ROUNDS} interleaved {N_CHUNKS}-chunk calls each, the proxy's threads only): pass-through {} ns, recording {} ns, recording with redaction off {} ns; recording adds {} ns over the pass-through",
        medians[0],
        medians[1],
        medians[2],
        medians[1].saturating_sub(medians[0]),
    );
    drop(routes);
    proxies.shutdown_background();
}

// The replay rows first: they write nothing, so the interleaved time-to-first-byte run that
// opens `bench` still finds a quiet disk.
// The whole loops last: recording them writes a thousand turns each.
criterion_group!(
    benches,
    bench_replay,
    bench_replay_conversations,
    bench_cpu,
    bench,
    bench_loop
);
criterion_main!(benches);
