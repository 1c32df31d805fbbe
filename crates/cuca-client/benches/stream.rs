//! Client overhead per streamed block against the raw bytes of the same loopback stream.
//!
//! A loopback server answers every request with one 10,000-chunk event stream shaped like
//! llama-server's (`delta.content` chunks, a finish chunk, a usage chunk, `[DONE]`). Three
//! readers take it in the same run:
//!
//! * `raw_sse_bytes`: the HTTP body read through the same HTTP stack (reqwest), bytes
//!   counted, nothing decoded — the floor;
//! * `minimal_sse_json`: the leanest hand-written reader of the same stream (blank-line
//!   split, `serde_json` into borrowed structs, owned texts out) — what any JSON-parsing
//!   client must at least do;
//! * `client_counting_plugin`: `CucaClient::generate_stream` with one plugin counting blocks;
//! * `client_session_log`: the same with a `SessionLogPlugin` over a fresh `InMemoryBackend`.
//!
//! * `decode_only`: the same event stream (body bytes only, already in memory) through
//!   `ChatStreamDecoder` in 16 KiB pieces — the decoding share of the client's cost.
//!
//! Throughput is in elements = streamed blocks, so criterion prints blocks/s.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use cuca_client::{ChatStreamDecoder, CucaClient, RetryPolicy};
use cuca_events::{
    CucaPlugin, Message, MessageContentBlock, PluginError, SessionBackend, UnifiedRequest,
};
use cuca_session_log::SessionLogPlugin;
use cuca_store_mem::InMemoryBackend;
use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const N_CHUNKS: u64 = 10_000;

/// One HTTP response: headers, then the event stream in 16 KiB HTTP chunks.
fn response_bytes() -> Vec<u8> {
    let body = event_stream();
    let mut out = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".to_vec();
    for piece in body.chunks(16 * 1024) {
        out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        out.extend_from_slice(piece);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// The event stream: a role chunk, `N_CHUNKS` content deltas, finish, usage, `[DONE]`.
fn event_stream() -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(b"data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null}}],\"created\":1795972076,\"id\":\"chatcmpl-bench\",\"model\":\"cuca-tiny-random\",\"system_fingerprint\":\"b0-unknown\",\"object\":\"chat.completion.chunk\"}\n\n");
    for i in 0..N_CHUNKS {
        body.extend_from_slice(format!("data: {{\"choices\":[{{\"finish_reason\":null,\"index\":0,\"delta\":{{\"content\":\" tok{i}\"}}}}],\"created\":1795972076,\"id\":\"chatcmpl-bench\",\"model\":\"cuca-tiny-random\",\"system_fingerprint\":\"b0-unknown\",\"object\":\"chat.completion.chunk\"}}\n\n").as_bytes());
    }
    body.extend_from_slice(b"data: {\"choices\":[{\"finish_reason\":\"length\",\"index\":0,\"delta\":{}}],\"model\":\"cuca-tiny-random\",\"object\":\"chat.completion.chunk\"}\n\n");
    body.extend_from_slice(format!("data: {{\"choices\":[],\"model\":\"cuca-tiny-random\",\"usage\":{{\"completion_tokens\":{N_CHUNKS},\"prompt_tokens\":40,\"total_tokens\":{},\"prompt_tokens_details\":{{\"cached_tokens\":0}}}}}}\n\ndata: [DONE]\n\n", N_CHUNKS + 40).as_bytes());
    body
}

async fn serve(listener: TcpListener, response: Arc<Vec<u8>>) {
    loop {
        let Ok((mut socket, _)) = listener.accept().await else {
            return;
        };
        let response = Arc::clone(&response);
        tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            let mut seen = Vec::new();
            // Read the request head and its Content-Length body before answering.
            loop {
                let n = socket.read(&mut buf).await.unwrap_or(0);
                if n == 0 {
                    return;
                }
                seen.extend_from_slice(&buf[..n]);
                if let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&seen[..end]).to_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if seen.len() >= end + 4 + length {
                        break;
                    }
                }
            }
            let _ = socket.write_all(&response).await;
            let _ = socket.shutdown().await;
        });
    }
}

/// The leanest reader that yields what the client yields: events split at blank lines,
/// `data: ` stripped, each chunk parsed by `serde_json` into borrowed structs holding only
/// the delta's content, every non-empty content copied out as an owned text. No error
/// handling, no reasoning or tool calls, no usage, no plugins, no call log: the floor for a
/// Rust chat-stream client that parses JSON, to show what the client adds on top of it.
#[derive(Default)]
struct MinimalReader {
    pending: Vec<u8>,
    texts: Vec<String>,
}

#[derive(serde::Deserialize)]
struct MinimalChunk<'a> {
    #[serde(borrow, default)]
    choices: Vec<MinimalChoice<'a>>,
}

#[derive(serde::Deserialize)]
struct MinimalChoice<'a> {
    #[serde(borrow)]
    delta: Option<MinimalDelta<'a>>,
}

#[derive(serde::Deserialize)]
struct MinimalDelta<'a> {
    #[serde(borrow)]
    content: Option<std::borrow::Cow<'a, str>>,
}

impl MinimalReader {
    fn feed(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(end) = memchr::memmem::find(&self.pending[start..], b"\n\n") {
            let event = &self.pending[start..start + end];
            start += end + 2;
            let Some(data) = event.strip_prefix(b"data: ") else {
                continue;
            };
            if data == b"[DONE]" {
                continue;
            }
            let chunk: MinimalChunk<'_> = serde_json::from_slice(data).unwrap();
            for choice in chunk.choices {
                if let Some(text) = choice.delta.and_then(|d| d.content) {
                    if !text.is_empty() {
                        self.texts.push(text.into_owned());
                    }
                }
            }
        }
        self.pending.drain(..start);
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

fn request() -> UnifiedRequest {
    UnifiedRequest::new(vec![
        Message::system("You are terse."),
        Message::user("count"),
    ])
}

async fn drain(client: &CucaClient) -> u64 {
    let mut stream = client.generate_stream(request());
    let mut n = 0;
    while let Some(block) = stream.next().await {
        block.unwrap();
        n += 1;
    }
    n
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let base_url = format!("http://{}", listener.local_addr().unwrap());
    runtime.spawn(serve(listener, Arc::new(response_bytes())));
    let url = format!("{base_url}/v1/chat/completions");
    let http = reqwest::Client::new();
    let counter = Arc::new(Counting(AtomicU64::new(0)));
    let client = CucaClient::builder()
        .with_base_url(&base_url)
        .with_retry_policy(RetryPolicy::none())
        .register_plugin(Arc::clone(&counter) as Arc<dyn CucaPlugin>)
        .build()
        .unwrap();
    assert_eq!(runtime.block_on(drain(&client)), N_CHUNKS);

    let mut group = c.benchmark_group("stream_10k_chunks");
    group.throughput(Throughput::Elements(N_CHUNKS));
    group.bench_function("raw_sse_bytes", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let mut response = http.post(&url).body("{}").send().await.unwrap();
                let mut n_bytes = 0;
                while let Some(chunk) = response.chunk().await.unwrap() {
                    n_bytes += chunk.len();
                }
                n_bytes
            })
        })
    });
    group.bench_function("minimal_sse_json", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let mut response = http.post(&url).body("{}").send().await.unwrap();
                let mut reader = MinimalReader::default();
                while let Some(chunk) = response.chunk().await.unwrap() {
                    reader.feed(&chunk);
                }
                assert_eq!(reader.texts.len() as u64, N_CHUNKS);
                reader.texts.len()
            })
        })
    });
    group.bench_function("client_counting_plugin", |b| {
        b.iter(|| runtime.block_on(drain(&client)))
    });
    group.bench_function("client_session_log", |b| {
        b.iter_batched(
            || {
                let backend = Arc::new(InMemoryBackend::new());
                let log = SessionLogPlugin::new(backend as Arc<dyn SessionBackend>)
                    .with_session_id("bench");
                CucaClient::builder()
                    .with_base_url(&base_url)
                    .with_retry_policy(RetryPolicy::none())
                    .register_plugin(Arc::new(log))
                    .build()
                    .unwrap()
            },
            |client| runtime.block_on(drain(&client)),
            BatchSize::PerIteration,
        )
    });
    let body = event_stream();
    group.bench_function("decode_only", |b| {
        b.iter(|| {
            let mut decoder = ChatStreamDecoder::new();
            let mut blocks = Vec::new();
            let mut n = 0;
            for piece in body.chunks(16 * 1024) {
                decoder.feed(piece, &mut blocks).unwrap();
                n += blocks.len();
                blocks.clear();
            }
            decoder.finish(&mut blocks).unwrap();
            n + blocks.len()
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
