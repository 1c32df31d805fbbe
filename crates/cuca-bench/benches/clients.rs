//! Chat-stream clients over a loopback llama-server stream, measured interleaved in one run.
//!
//! A server thread answers every request with a canned llama-server response cut from the
//! byte-exact transcript `fixtures/llama-server/stream-basic.body` ([`cuca_bench::llama`]): its role chunk,
//! 10,000 content events taken cyclically from its own, its finish chunk, usage chunk and
//! `data: [DONE]`. Two framings of that body: one HTTP chunk per server-sent event, as
//! llama-server sends (the real framing, which the table's targets use), and 16 KiB HTTP
//! chunks (context). The contenders, each reading the same stream from the same server:
//!
//! * `raw_sse_bytes`: reqwest's body read, bytes counted, nothing decoded (context);
//! * `minimal_sse_json`: the minimal SSE + `serde_json` reader ([`MinimalReader`]): the floor
//!   for any JSON-parsing client;
//! * `cuca_client`: `CucaClient::generate_stream` with one counting plugin, no retries;
//! * `cuca_client_file_log`: the same client also recording through a `SessionLogPlugin` over
//!   a `FileBackend` (Buffered, the default) in a fresh directory, a fresh session per stream;
//! * `async_openai`: async-openai's `chat().create_stream`, the client a Rust user would pick
//!   instead.
//!
//! Each must yield exactly the stream's content blocks, or the bench fails. Every round runs
//! every contender back to back (rotating who goes first), so all see the same machine; round
//! 0 warms up and is not counted, and each figure is the median over rounds:
//!
//! * `per_block/per_event`, `per_block/16KiB`: one whole stream's time / 10,000, in ns;
//! * `ttft/median`, `ttft/p99`: from just before the request is sent to the first content
//!   block in hand, over many short streams (the fixture as is, one chunk per event), in ns;
//! * `peak_heap`: the most heap, in bytes, held beyond what was held when the contender's
//!   long real-framing stream started (a counting global allocator, on only then).
//!
//! Rounds come from `CUCA_BENCH_ROUNDS` (default 31), time-to-first-token rounds from
//! `CUCA_BENCH_TTFT_ROUNDS` (default 200). Results go to
//! `target/cuca-bench/clients-interleaved.json`, which `cargo xtask bench` reads. Run as a test
//! (`cargo test --benches`, no `--bench` argument) it only checks every contender once.
//!
//! `CUCA_BENCH_ROUNDS=5 cargo bench -p cuca-bench --bench clients`

// Benchmark setup failing is a broken bench, not bad input: panicking is how it stops.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_openai::config::OpenAIConfig;
use async_openai::types::chat::{
    ChatCompletionRequestSystemMessage, ChatCompletionRequestUserMessage,
    ChatCompletionStreamOptions, CreateChatCompletionRequestArgs,
};
use async_trait::async_trait;
use cuca_bench::llama::{self, Framing, MinimalReader};
use cuca_bench::write_result;
use cuca_client::{CucaClient, RetryPolicy};
use cuca_events::{
    CucaPlugin, Message, MessageContentBlock, PluginError, SessionBackend, UnifiedRequest,
};
use cuca_session_log::SessionLogPlugin;
use cuca_store_file::{Durability, FileBackend};
use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Content events in the long stream.
const N: usize = 10_000;

/// Content events in the short stream (the fixture as is).
const N_SHORT: usize = 12;

/// The fixture's own request, for the contenders that post bytes themselves.
const REQUEST_BODY: &str = r#"{"model":"tiny","stream":true,"stream_options":{"include_usage":true},"max_tokens":12,"temperature":0,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"The vault is in Lisbon. Reply with: noted"}]}"#;

/// Counting global allocator: current and peak heap bytes while switched on.
mod heap {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering::Relaxed};

    static ON: AtomicBool = AtomicBool::new(false);
    static CURRENT: AtomicIsize = AtomicIsize::new(0);
    static PEAK: AtomicIsize = AtomicIsize::new(0);

    pub(crate) struct Counting;

    fn grow(by: usize) {
        if ON.load(Relaxed) {
            let by = by as isize;
            let now = CURRENT.fetch_add(by, Relaxed) + by;
            PEAK.fetch_max(now, Relaxed);
        }
    }

    fn shrink(by: usize) {
        if ON.load(Relaxed) {
            CURRENT.fetch_sub(by as isize, Relaxed);
        }
    }

    // The workspace denies `unsafe_code`; a global allocator cannot be written without it.
    // This bench binary is the only user (cuca-bench is publish = false, its library
    // forbids unsafe), and every method only forwards to `System` with the caller's own
    // guarantees, counting bytes beside.
    #[allow(unsafe_code)]
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            // SAFETY: forwarded with the caller's layout, as GlobalAlloc::alloc requires.
            let ptr = unsafe { System.alloc(layout) };
            if !ptr.is_null() {
                grow(layout.size());
            }
            ptr
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            // SAFETY: as `alloc`.
            let ptr = unsafe { System.alloc_zeroed(layout) };
            if !ptr.is_null() {
                grow(layout.size());
            }
            ptr
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: `ptr` was allocated by `System` (every method here forwards to it) with
            // this layout, as the caller guarantees.
            unsafe { System.dealloc(ptr, layout) };
            shrink(layout.size());
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            // SAFETY: as `dealloc`, and `new_size` is the caller's, as GlobalAlloc::realloc
            // requires.
            let new = unsafe { System.realloc(ptr, layout, new_size) };
            if !new.is_null() {
                grow(new_size);
                shrink(layout.size());
            }
            new
        }
    }

    /// Starts counting from zero.
    pub(crate) fn start() {
        CURRENT.store(0, Relaxed);
        PEAK.store(0, Relaxed);
        ON.store(true, Relaxed);
    }

    /// Stops counting; the peak bytes held beyond what was held at [`start`]. Memory held
    /// before and freed meanwhile counts negative, so this can only underestimate.
    pub(crate) fn stop() -> f64 {
        ON.store(false, Relaxed);
        PEAK.load(Relaxed).max(0) as f64
    }
}

#[global_allocator]
static ALLOCATOR: heap::Counting = heap::Counting;

/// Answers each connection's one request (head and Content-Length body) with `response`,
/// then closes. Connections are served one after another: the bench streams one at a time,
/// and no task is spawned, so the server allocates nothing per request that the heap
/// figures would count.
async fn serve(listener: TcpListener, response: Arc<Vec<u8>>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let Ok((mut socket, _)) = listener.accept().await else {
            return;
        };
        let mut seen = 0;
        let complete = loop {
            let n = socket.read(&mut buf[seen..]).await.unwrap_or(0);
            if n == 0 {
                break false;
            }
            seen += n;
            if let Some(end) = memchr::memmem::find(&buf[..seen], b"\r\n\r\n") {
                let length: usize = buf[..end]
                    .split(|&b| b == b'\n')
                    .find_map(|line| {
                        let line = line.strip_suffix(b"\r").unwrap_or(line);
                        let (name, value) = line.split_at(line.iter().position(|&b| b == b':')?);
                        name.eq_ignore_ascii_case(b"content-length")
                            .then(|| std::str::from_utf8(&value[1..]).ok())?
                            .and_then(|v| v.trim().parse().ok())
                    })
                    .unwrap_or(0);
                if seen >= end + 4 + length {
                    break true;
                }
            }
            if seen == buf.len() {
                break false;
            }
        };
        if complete {
            let _ = socket.write_all(&response).await;
        }
        let _ = socket.shutdown().await;
    }
}

/// The three canned responses, each on its own port, served by one thread of its own: the
/// server's work is not the clients' time.
struct Servers {
    per_event: SocketAddr,
    coalesced: SocketAddr,
    short: SocketAddr,
}

fn start_servers() -> Servers {
    let long = llama::long_stream(N);
    let responses = [
        llama::chunked_response(&long, Framing::PerEvent),
        llama::chunked_response(&long, Framing::Coalesced(16 * 1024)),
        llama::chunked_response(llama::STREAM_BASIC, Framing::PerEvent),
    ];
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let mut serving = Vec::new();
            let mut addrs = Vec::new();
            for response in responses {
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                addrs.push(listener.local_addr().unwrap());
                serving.push(serve(listener, Arc::new(response)));
            }
            tx.send(addrs).unwrap();
            futures::future::join_all(serving).await;
        });
    });
    let addrs = rx.recv().unwrap();
    Servers {
        per_event: addrs[0],
        coalesced: addrs[1],
        short: addrs[2],
    }
}

struct Counting(AtomicU64);

#[async_trait]
impl CucaPlugin for Counting {
    async fn on_stream_chunk(&self, _block: &MessageContentBlock) -> Result<(), PluginError> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Contender {
    RawSseBytes,
    MinimalSseJson,
    CucaClient,
    CucaClientFileLog,
    AsyncOpenai,
}

const CONTENDERS: [Contender; 5] = [
    Contender::RawSseBytes,
    Contender::MinimalSseJson,
    Contender::CucaClient,
    Contender::CucaClientFileLog,
    Contender::AsyncOpenai,
];

impl Contender {
    fn name(self) -> &'static str {
        match self {
            Contender::RawSseBytes => "raw_sse_bytes",
            Contender::MinimalSseJson => "minimal_sse_json",
            Contender::CucaClient => "cuca_client",
            Contender::CucaClientFileLog => "cuca_client_file_log",
            Contender::AsyncOpenai => "async_openai",
        }
    }
}

/// What one stream needs, built before its timing starts.
enum Prepared {
    Http {
        client: reqwest::Client,
        url: String,
    },
    Cuca {
        client: CucaClient,
        counter: Arc<Counting>,
    },
    CucaLog {
        client: CucaClient,
        counter: Arc<Counting>,
        backend: Arc<FileBackend>,
        session: String,
        _dir: tempfile::TempDir,
    },
    AsyncOpenai(async_openai::Client<OpenAIConfig>),
}

fn cuca_builder(addr: SocketAddr, counter: &Arc<Counting>) -> cuca_client::CucaClientBuilder {
    CucaClient::builder()
        .with_base_url(format!("http://{addr}"))
        .with_retry_policy(RetryPolicy::none())
        .register_plugin(Arc::clone(counter) as Arc<dyn CucaPlugin>)
}

fn prepare(contender: Contender, addr: SocketAddr, round: usize) -> Prepared {
    let counter = Arc::new(Counting(AtomicU64::new(0)));
    match contender {
        Contender::RawSseBytes | Contender::MinimalSseJson => Prepared::Http {
            client: reqwest::Client::new(),
            url: format!("http://{addr}/v1/chat/completions"),
        },
        Contender::CucaClient => Prepared::Cuca {
            client: cuca_builder(addr, &counter).build().unwrap(),
            counter,
        },
        Contender::CucaClientFileLog => {
            let dir = tempfile::tempdir().unwrap();
            let backend = Arc::new(
                FileBackend::new(dir.path())
                    .unwrap()
                    .with_durability(Durability::Buffered),
            );
            let session = format!("bench-{round}");
            let log = SessionLogPlugin::new(Arc::clone(&backend) as Arc<dyn SessionBackend>)
                .with_session_id(&session);
            Prepared::CucaLog {
                client: cuca_builder(addr, &counter)
                    .register_plugin(Arc::new(log))
                    .build()
                    .unwrap(),
                counter,
                backend,
                session,
                _dir: dir,
            }
        }
        Contender::AsyncOpenai => Prepared::AsyncOpenai(async_openai::Client::with_config(
            OpenAIConfig::new().with_api_base(format!("http://{addr}/v1")),
        )),
    }
}

fn unified_request() -> UnifiedRequest {
    UnifiedRequest::new(vec![
        Message::system("You are terse."),
        Message::user("The vault is in Lisbon. Reply with: noted"),
    ])
}

/// One stream through `contender`: the content blocks it yielded and when the first was in
/// hand. For the raw read, a "block" is a content event's bytes, counted by where the events
/// end in the body it was served.
async fn run(
    contender: Contender,
    prepared: &Prepared,
    event_ends: &[usize],
) -> (usize, Option<Instant>) {
    let mut first = None;
    let mut n = 0;
    match prepared {
        Prepared::Http { client, url } => {
            let mut response = client.post(url).body(REQUEST_BODY).send().await.unwrap();
            if contender == Contender::RawSseBytes {
                let mut n_bytes = 0;
                while let Some(chunk) = response.chunk().await.unwrap() {
                    n_bytes += chunk.len();
                    if first.is_none() && event_ends.first().is_some_and(|&end| n_bytes >= end) {
                        first = Some(Instant::now());
                    }
                }
                n = event_ends.iter().filter(|&&end| end <= n_bytes).count();
            } else {
                let mut reader = MinimalReader::default();
                while let Some(chunk) = response.chunk().await.unwrap() {
                    reader.feed(&chunk).unwrap();
                    if first.is_none() && !reader.texts.is_empty() {
                        first = Some(Instant::now());
                    }
                }
                n = reader.texts.len();
            }
        }
        Prepared::Cuca { client, .. } | Prepared::CucaLog { client, .. } => {
            let mut stream = client.generate_stream(unified_request());
            while let Some(block) = stream.next().await {
                if let MessageContentBlock::Text { .. } = block.unwrap() {
                    n += 1;
                    if first.is_none() {
                        first = Some(Instant::now());
                    }
                }
            }
        }
        Prepared::AsyncOpenai(client) => {
            let request = CreateChatCompletionRequestArgs::default()
                .model("tiny")
                .messages([
                    ChatCompletionRequestSystemMessage::from("You are terse.").into(),
                    ChatCompletionRequestUserMessage::from(
                        "The vault is in Lisbon. Reply with: noted",
                    )
                    .into(),
                ])
                .stream_options(ChatCompletionStreamOptions {
                    include_usage: Some(true),
                    include_obfuscation: None,
                })
                .build()
                .unwrap();
            let mut stream = client.chat().create_stream(request).await.unwrap();
            while let Some(chunk) = stream.next().await {
                for choice in chunk.unwrap().choices {
                    if choice.delta.content.is_some_and(|c| !c.is_empty()) {
                        n += 1;
                        if first.is_none() {
                            first = Some(Instant::now());
                        }
                    }
                }
            }
        }
    }
    (n, first)
}

/// After a stream: what its plugins saw agrees with what it yielded.
fn check(contender: Contender, prepared: &Prepared, n: usize, want: usize) {
    assert_eq!(n, want, "{} yielded {n} content blocks", contender.name());
    match prepared {
        Prepared::Cuca { counter, .. } => {
            assert_eq!(counter.0.load(Ordering::Relaxed), want as u64);
        }
        Prepared::CucaLog {
            counter,
            backend,
            session,
            ..
        } => {
            assert_eq!(counter.0.load(Ordering::Relaxed), want as u64);
            // Every block is a record, besides the request's and the completion's own.
            let records = backend.replay(session).unwrap();
            assert!(records.len() > want, "{} records", records.len());
        }
        Prepared::Http { .. } | Prepared::AsyncOpenai(_) => {}
    }
}

/// Where each content event ends in the body `response` carries.
fn content_event_ends(response: &[u8]) -> Vec<usize> {
    let head = memchr::memmem::find(response, b"\r\n\r\n").unwrap() + 4;
    // Body bytes only: walk the chunked framing.
    let mut body = Vec::new();
    let mut rest = &response[head..];
    loop {
        let line = memchr::memmem::find(rest, b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&rest[..line]).unwrap(), 16).unwrap();
        if size == 0 {
            break;
        }
        body.extend_from_slice(&rest[line + 2..line + 2 + size]);
        rest = &rest[line + 2 + size + 2..];
    }
    let mut at = 0;
    let mut ends = Vec::new();
    for event in llama::events(&body) {
        at += event.len();
        if llama::is_content_event(event) {
            ends.push(at);
        }
    }
    ends
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn percentile(mut values: Vec<f64>, p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let rank = ((values.len() as f64 * p).ceil() as usize).saturating_sub(1);
    values.get(rank).copied().unwrap_or(f64::NAN)
}

fn env_rounds(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

fn by_name(values: Vec<f64>) -> serde_json::Map<String, serde_json::Value> {
    CONTENDERS
        .iter()
        .zip(values)
        .map(|(c, v)| (c.name().to_owned(), serde_json::json!(v)))
        .collect()
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: then one check each.
    let benching = std::env::args().any(|a| a == "--bench");
    let (rounds, ttft_rounds, heap_rounds) = if benching {
        (
            env_rounds("CUCA_BENCH_ROUNDS", 31),
            env_rounds("CUCA_BENCH_TTFT_ROUNDS", 200),
            3,
        )
    } else {
        (1, 1, 1)
    };
    let servers = start_servers();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ends = |framing| {
        let body = llama::long_stream(N);
        content_event_ends(&llama::chunked_response(&body, framing))
    };
    let long_ends = ends(Framing::PerEvent);
    assert_eq!(long_ends.len(), N);
    let short_ends = content_event_ends(&llama::chunked_response(
        llama::STREAM_BASIC,
        Framing::PerEvent,
    ));
    assert_eq!(short_ends.len(), N_SHORT);

    // One timed stream: (total time, time to the first content block).
    let timed = |contender: Contender, addr: SocketAddr, round: usize, ends: &[usize]| {
        let prepared = prepare(contender, addr, round);
        let start = Instant::now();
        let (n, first) = runtime.block_on(run(contender, &prepared, ends));
        let total = start.elapsed();
        check(contender, &prepared, n, ends.len());
        let first = first.map_or(Duration::MAX, |f| f.duration_since(start));
        (total, first)
    };

    let mut per_event: Vec<Vec<f64>> = vec![Vec::new(); CONTENDERS.len()];
    let mut coalesced: Vec<Vec<f64>> = vec![Vec::new(); CONTENDERS.len()];
    for round in 0..=rounds {
        for k in 0..CONTENDERS.len() {
            let i = (round + k) % CONTENDERS.len();
            let c = CONTENDERS[i];
            let (total, _) = timed(c, servers.per_event, round, &long_ends);
            let (total_16k, _) = timed(c, servers.coalesced, round, &long_ends);
            if round > 0 {
                per_event[i].push(total.as_nanos() as f64 / N as f64);
                coalesced[i].push(total_16k.as_nanos() as f64 / N as f64);
            }
        }
    }

    let mut ttft: Vec<Vec<f64>> = vec![Vec::new(); CONTENDERS.len()];
    for round in 0..=ttft_rounds {
        for k in 0..CONTENDERS.len() {
            let i = (round + k) % CONTENDERS.len();
            let (_, first) = timed(CONTENDERS[i], servers.short, round, &short_ends);
            if round > 0 {
                ttft[i].push(first.as_nanos() as f64);
            }
        }
    }

    // Peak heap, counted apart from the timed streams so the counting costs no contender
    // time; the median of three.
    let mut heap: Vec<Vec<f64>> = vec![Vec::new(); CONTENDERS.len()];
    for round in 0..heap_rounds {
        for (i, &c) in CONTENDERS.iter().enumerate() {
            let prepared = prepare(c, servers.per_event, rounds + 1 + round);
            heap::start();
            let (n, _) = runtime.block_on(run(c, &prepared, &long_ends));
            heap[i].push(heap::stop());
            check(c, &prepared, n, N);
        }
    }

    let ttft_median = ttft.iter().cloned().map(median).collect();
    let ttft_p99 = ttft.into_iter().map(|t| percentile(t, 0.99)).collect();
    let out = serde_json::json!({
        "n_blocks": N,
        "rounds": rounds,
        "ttft_rounds": ttft_rounds,
        "per_block/per_event": by_name(per_event.into_iter().map(median).collect()),
        "per_block/16KiB": by_name(coalesced.into_iter().map(median).collect()),
        "ttft/median": by_name(ttft_median),
        "ttft/p99": by_name(ttft_p99),
        "peak_heap": by_name(heap.into_iter().map(median).collect()),
    });
    for (key, value) in out.as_object().into_iter().flatten() {
        println!("clients/{key}: {value}");
    }
    if benching {
        let path = write_result("clients-interleaved", &out).unwrap();
        println!("interleaved results written to {}", path.display());
    }
}
