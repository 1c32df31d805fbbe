//! A stand-in upstream that serves the committed llama-server transcripts byte for byte,
//! and helpers to start a proxy in front of it.
// Each test file uses part of the support, and its helpers unwrap: a failed step is a
// failed test.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use cuca_calllog::{CallLog, Record};
use cuca_events::{MessageContentBlock, SessionBackend, SessionRecord};
use cuca_proxy::{Mode, Proxy, ProxyConfig};
use cuca_store_file::FileBackend;
use cuca_wire::chat::ChatStreamDecoder;
use futures::StreamExt;
use tokio::sync::{oneshot, Notify};

pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/llama-server")
}

pub fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixtures_dir().join(name)).unwrap()
}

/// The request body that produced transcript `name`.
pub fn request(name: &str) -> Vec<u8> {
    fixture(&format!("{name}.request.json"))
}

/// The blocks a transcript's body decodes to (the client's own decoder).
pub fn blocks_of_sse(body: &[u8]) -> Vec<MessageContentBlock> {
    let mut decoder = ChatStreamDecoder::new();
    let mut blocks = Vec::new();
    decoder.feed(body, &mut blocks).unwrap();
    decoder.finish(&mut blocks).unwrap();
    blocks
}

/// Every text of `blocks` of one kind, joined.
pub fn joined(blocks: &[MessageContentBlock], thinking: bool) -> String {
    blocks
        .iter()
        .filter_map(|b| match (b, thinking) {
            (MessageContentBlock::Text { text }, false) => Some(text.as_str()),
            (MessageContentBlock::Thinking { thinking }, true) => Some(thinking.as_str()),
            _ => None,
        })
        .collect()
}

/// What the upstream saw of one call.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// A tool-call stream in the documented OpenAI chunk shape (`choices[0].delta.tool_calls[i]`
/// with `index`, `id`, `function.name`, `function.arguments` arriving in pieces): the tiny
/// llama-server model could not be made to emit one, so this one is written by hand.
pub const TOOL_STREAM: &str = concat!(
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"cuca-tiny-random\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"cuca-tiny-random\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_7\",\"type\":\"function\",\"function\":{\"name\":\"lookup\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"cuca-tiny-random\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\":\"}}]},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"cuca-tiny-random\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"Lisbon\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"cuca-tiny-random\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"cuca-tiny-random\",\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":9,\"total_tokens\":29}}\n\n",
    "data: [DONE]\n\n",
);

pub const MODELS: &str = "{\"object\":\"list\",\"data\":[{\"id\":\"cuca-tiny-random\",\"object\":\"model\",\"created\":1,\"owned_by\":\"llamacpp\"}]}";

/// The stand-in upstream: which transcript it serves is chosen from the request (the SDK
/// writes its own bytes, so the body cannot be matched exactly).
pub struct Upstream {
    pub url: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    /// Signalled when a `HANG` call's response body is dropped: the proxy closed the
    /// upstream connection.
    pub hang_dropped: Arc<Notify>,
    /// Signalled when a `HANG` call has sent its first event.
    pub hang_started: Arc<Notify>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Upstream {
    pub fn calls(&self) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.path.ends_with("/chat/completions"))
            .count()
    }

    pub fn last(&self) -> Seen {
        self.seen.lock().unwrap().last().cloned().unwrap()
    }

    /// Stops listening and waits until the listener is closed.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}

struct DropSignal(Arc<Notify>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

fn choose(body: &[u8]) -> &'static str {
    // A body nested past serde_json's depth is answered as a basic stream.
    if body.windows(7).any(|w| w == b"Go deep") {
        return "stream-basic";
    }
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return "error-bad-json";
    };
    let stream = value["stream"] == true;
    let messages = value["messages"].as_array().cloned().unwrap_or_default();
    let last = messages
        .last()
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    if last.contains("lisbon vault lisbon vault") {
        "error-context-overflow"
    } else if last.contains("HANG") {
        "hang"
    } else if last.contains("MALFORMED") {
        "malformed"
    } else if last.contains("HUGE") {
        "huge"
    } else if last.contains("TOOLS") {
        "tools"
    } else if last == "Say hi" {
        "stream-no-usage"
    } else if last == "Where is the vault? Answer in one word." {
        match (messages.len() >= 4, stream) {
            (true, _) => "stream-second-turn",
            (false, true) => "stream-reasoning",
            (false, false) => "nonstream-reasoning",
        }
    } else if stream {
        "stream-basic"
    } else {
        "nonstream-basic"
    }
}

/// A transcript's status and content type, from its `.headers` file.
fn head(name: &str) -> (StatusCode, String) {
    let text = String::from_utf8(fixture(&format!("{name}.headers"))).unwrap();
    let status: u16 = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    let content_type = text
        .lines()
        .find_map(|l| l.strip_prefix("Content-Type: "))
        .unwrap()
        .to_owned();
    (StatusCode::from_u16(status).unwrap(), content_type)
}

/// The body in the pieces a server writes it: one piece per SSE event.
fn pieces(body: Vec<u8>) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 0..body.len() {
        if body[i] == b'\n' && body.get(i + 1) == Some(&b'\n') {
            out.push(Bytes::copy_from_slice(&body[start..i + 2]));
            start = i + 2;
        }
    }
    if start < body.len() {
        out.push(Bytes::copy_from_slice(&body[start..]));
    }
    out
}

/// The event `MALFORMED` calls get in the middle of their stream.
pub const MALFORMED_EVENT: &str =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"cut\n\n";

/// Events of 1,000 characters each in a `HUGE` call's answer.
pub const HUGE_EVENTS: usize = 1000;

/// A `HUGE` call's stream: [`HUGE_EVENTS`] content events of 1,000 `x`s, then the finish
/// chunk, the usage chunk and `[DONE]`: about a megabyte to record.
pub fn huge_stream() -> Vec<Bytes> {
    let chunk = |delta: &str, finish: &str| {
        Bytes::from(format!(
            "data: {{\"id\":\"h\",\"object\":\"chat.completion.chunk\",\"model\":\"cuca-tiny-random\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
        ))
    };
    let text = "x".repeat(1000);
    let mut out = vec![chunk("{\"role\":\"assistant\",\"content\":null}", "null")];
    for _ in 0..HUGE_EVENTS {
        out.push(chunk(&format!("{{\"content\":\"{text}\"}}"), "null"));
    }
    out.push(chunk("{}", "\"length\""));
    out.push(Bytes::from_static(
        b"data: {\"id\":\"h\",\"object\":\"chat.completion.chunk\",\"model\":\"cuca-tiny-random\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1000,\"total_tokens\":1005}}\n\n",
    ));
    out.push(Bytes::from_static(b"data: [DONE]\n\n"));
    out
}

/// How long after its last event the stand-in upstream ends a body: the few milliseconds
/// a real server takes to finish its response after writing `[DONE]`.
/// The thinking signature the stand-in's Anthropic reasoning stream carries.
pub const SIGNATURE: &str = "EqQBCkYIBxgCKkBcuca+signature/Q2FmZQ==";

pub const END_GAP: std::time::Duration = std::time::Duration::from_millis(2);

pub async fn upstream() -> Upstream {
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let hang_dropped = Arc::new(Notify::new());
    let hang_started = Arc::new(Notify::new());
    let questions: Arc<Questions> = Arc::default();
    let chat = {
        let questions = Arc::clone(&questions);
        let seen = Arc::clone(&seen);
        let hang_dropped = Arc::clone(&hang_dropped);
        let hang_started = Arc::clone(&hang_started);
        move |headers: HeaderMap, body: Bytes| {
            let seen = Arc::clone(&seen);
            let hang_dropped = Arc::clone(&hang_dropped);
            let hang_started = Arc::clone(&hang_started);
            let questions = Arc::clone(&questions);
            let delay = headers
                .get(DELAY_HEADER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
                .map(std::time::Duration::from_millis);
            let headers_answer: Option<&'static str> = headers
                .get("x-test-answer")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| (v == "tools").then_some("tools"));
            async move {
                seen.lock().unwrap().push(Seen {
                    path: "/v1/chat/completions".into(),
                    headers,
                    body: body.clone(),
                });
                // A question ("Name …") gets an answer of its own (the conversations' tests).
                if let Some(answer) = questions.answer(&body) {
                    return answer.into_response(delay);
                }
                // A test may name the answer outright, for a retry the body cannot tell apart.
                let name = match headers_answer {
                    Some("tools") => "tools",
                    _ => choose(&body),
                };
                let sse = |status, body: Body| {
                    Response::builder()
                        .status(status)
                        .header("Content-Type", "text/event-stream")
                        .body(body)
                        .unwrap()
                };
                match name {
                    "hang" => {
                        let first = pieces(fixture("stream-basic.body")).remove(0);
                        let guard = DropSignal(hang_dropped);
                        let stream = futures::stream::unfold(
                            (Some(first), guard, hang_started),
                            |(first, guard, started)| async move {
                                match first {
                                    Some(bytes) => Some((
                                        Ok::<_, std::io::Error>(bytes),
                                        (None, guard, started),
                                    )),
                                    None => {
                                        started.notify_one();
                                        // Generation that never ends: only a closed
                                        // connection stops it.
                                        std::future::pending::<()>().await;
                                        drop(guard);
                                        None
                                    }
                                }
                            },
                        );
                        sse(StatusCode::OK, Body::from_stream(stream))
                    }
                    "malformed" => {
                        // The real stream with one event that is not a chat chunk in the middle.
                        let mut events = pieces(fixture("stream-basic.body"));
                        events.insert(4, Bytes::from_static(MALFORMED_EVENT.as_bytes()));
                        sse(
                            StatusCode::OK,
                            Body::from_stream(futures::stream::iter(
                                events.into_iter().map(Ok::<_, std::io::Error>),
                            )),
                        )
                    }
                    "huge" => sse(
                        StatusCode::OK,
                        Body::from_stream(futures::stream::iter(
                            huge_stream().into_iter().map(Ok::<_, std::io::Error>),
                        )),
                    ),
                    "tools" => sse(
                        StatusCode::OK,
                        Body::from_stream(futures::stream::iter(
                            pieces(TOOL_STREAM.as_bytes().to_vec())
                                .into_iter()
                                .map(Ok::<_, std::io::Error>),
                        )),
                    ),
                    name => {
                        let (status, content_type) = head(name);
                        let chunks = pieces(fixture(&format!("{name}.body")));
                        // A real server ends its body a little after its last event (issue
                        // 28.1: a caller that stops reading at `[DONE]` hangs up in that gap,
                        // and a stand-in that ended the body with the last piece hid it).
                        let end_gap = futures::stream::once(async {
                            tokio::time::sleep(END_GAP).await;
                        })
                        .filter_map(|()| async { None });
                        Response::builder()
                            .status(status)
                            .header("Content-Type", content_type)
                            .header("Server", "llama.cpp")
                            .body(Body::from_stream(
                                futures::stream::iter(
                                    chunks.into_iter().map(Ok::<_, std::io::Error>),
                                )
                                .chain(end_gap),
                            ))
                            .unwrap()
                    }
                }
            }
        }
    };
    let models = {
        let seen = Arc::clone(&seen);
        move |headers: HeaderMap| {
            let seen = Arc::clone(&seen);
            async move {
                seen.lock().unwrap().push(Seen {
                    path: "/v1/models".into(),
                    headers,
                    body: Bytes::new(),
                });
                Response::builder()
                    .header("Content-Type", "application/json")
                    .body(Body::from(MODELS))
                    .unwrap()
            }
        }
    };
    // The Anthropic Messages and Responses routes serve llama-server's own transcripts of
    // them: streamed or not as asked, the thinking/reasoning one when the request asks for it.
    let other_format = |route: &'static str| {
        let seen = Arc::clone(&seen);
        move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
            let seen = Arc::clone(&seen);
            async move {
                seen.lock().unwrap().push(Seen {
                    path: uri.to_string(),
                    headers,
                    body: body.clone(),
                });
                let value: serde_json::Value =
                    serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
                let stream = value["stream"] == true;
                let name = match route {
                    "count_tokens" => "messages-count-tokens",
                    "messages" if !value["thinking"].is_null() && stream => {
                        "messages-reasoning-stream"
                    }
                    "messages" if stream => "messages-stream",
                    "messages" => "messages-basic",
                    _ if !value["reasoning"].is_null() && stream => "responses-reasoning-stream",
                    _ if stream => "responses-stream",
                    _ => "responses-basic",
                };
                let (status, content_type) = head(name);
                let mut bytes = fixture(&format!("{name}.body"));
                // llama-server signs its thinking with an empty signature; Anthropic's are
                // long base64 strings, and a replay that dropped one would be refused.
                if name == "messages-reasoning-stream" {
                    bytes = String::from_utf8(bytes)
                        .unwrap()
                        .replace(
                            r#""signature":"""#,
                            &format!(r#""signature":"{SIGNATURE}""#),
                        )
                        .into_bytes();
                }
                let chunks = pieces(bytes);
                let end_gap = futures::stream::once(async {
                    tokio::time::sleep(END_GAP).await;
                })
                .filter_map(|()| async { None });
                Response::builder()
                    .status(status)
                    .header("Content-Type", content_type)
                    .header("Server", "llama.cpp")
                    .body(Body::from_stream(
                        futures::stream::iter(chunks.into_iter().map(Ok::<_, std::io::Error>))
                            .chain(end_gap),
                    ))
                    .unwrap()
            }
        }
    };
    let router = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/messages", post(other_format("messages")))
        .route(
            "/v1/messages/count_tokens",
            post(other_format("count_tokens")),
        )
        .route("/v1/responses", post(other_format("responses")))
        .route("/v1/models", get(models));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    Upstream {
        url: format!("http://{addr}"),
        seen,
        hang_dropped,
        hang_started,
        stop: Some(stop),
        task,
    }
}

/// The request header that makes the stand-in wait this many milliseconds before each event
/// of a question's streamed answer, so concurrent calls overlap.
pub const DELAY_HEADER: &str = "x-test-delay-ms";

/// What the stand-in answers the `nth` time (from 1) it is asked `question` with the same
/// messages before it: each question, and each asking of it, gets its own answer, so a
/// replay that served one call another's answer is seen at once.
pub fn answer_to(question: &str, nth: usize) -> String {
    format!("Answer {nth} to {question}")
}

/// Whether the stand-in answers `text` (a request's last message) with [`answer_to`].
pub fn is_question(text: &str) -> bool {
    text.starts_with("Name ")
}

/// How often each list of messages was asked, for [`answer_to`]'s `nth`.
#[derive(Default)]
struct Questions(Mutex<std::collections::HashMap<String, usize>>);

/// A question's answer, streamed or whole as the request asked.
struct Answer {
    text: String,
    stream: bool,
}

impl Questions {
    fn answer(&self, body: &[u8]) -> Option<Answer> {
        let value: serde_json::Value = serde_json::from_slice(body).ok()?;
        let messages = value["messages"].as_array()?;
        let question = messages.last()?["content"].as_str()?;
        if !is_question(question) {
            return None;
        }
        let mut asked = self.0.lock().unwrap();
        let nth = asked
            .entry(serde_json::to_string(messages).unwrap())
            .or_default();
        *nth += 1;
        Some(Answer {
            text: answer_to(question, *nth),
            stream: value["stream"] == true,
        })
    }
}

impl Answer {
    fn into_response(self, delay: Option<std::time::Duration>) -> Response {
        let usage =
            serde_json::json!({"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13});
        if !self.stream {
            let body = serde_json::json!({
                "id": "q1", "object": "chat.completion", "created": 1, "model": "cuca-tiny-random",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": self.text}}],
                "usage": usage,
            });
            return Response::builder()
                .header("Content-Type", "application/json")
                .body(Body::from(body.to_string()))
                .unwrap();
        }
        let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
            let chunk = serde_json::json!({
                "id": "q1", "object": "chat.completion.chunk", "created": 1,
                "model": "cuca-tiny-random",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            });
            Bytes::from(format!("data: {chunk}\n\n"))
        };
        let mut events = vec![chunk(
            serde_json::json!({"role": "assistant", "content": ""}),
            serde_json::Value::Null,
        )];
        // One event per word, as a model generates them.
        for (i, word) in self.text.split(' ').enumerate() {
            let piece = if i == 0 {
                word.to_owned()
            } else {
                format!(" {word}")
            };
            events.push(chunk(
                serde_json::json!({ "content": piece }),
                serde_json::Value::Null,
            ));
        }
        events.push(chunk(serde_json::json!({}), "stop".into()));
        let end = serde_json::json!({
            "id": "q1", "object": "chat.completion.chunk", "created": 1,
            "model": "cuca-tiny-random", "choices": [], "usage": usage,
        });
        events.push(Bytes::from(format!("data: {end}\n\ndata: [DONE]\n\n")));
        let stream = futures::stream::iter(events).then(move |event| async move {
            if let Some(delay) = delay {
                tokio::time::sleep(delay).await;
            }
            Ok::<_, std::io::Error>(event)
        });
        Response::builder()
            .header("Content-Type", "text/event-stream")
            .body(Body::from_stream(stream))
            .unwrap()
    }
}

/// A proxy serving on a loopback port.
pub struct Running {
    pub url: String,
    pub proxy: Proxy,
    pub backend: Arc<dyn SessionBackend>,
    pub log_path: PathBuf,
    stop: Option<oneshot::Sender<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Running {
    pub fn records(&self, session: &str) -> Vec<SessionRecord> {
        self.backend.replay(session).unwrap()
    }

    pub fn kinds(&self, session: &str) -> Vec<&'static str> {
        self.records(session)
            .iter()
            .map(|r| r.event.kind())
            .collect()
    }

    pub fn rows(&self) -> Vec<Record> {
        match cuca_calllog::read_rows(&self.log_path) {
            Ok(report) => report.rows,
            Err(_) => Vec::new(),
        }
    }

    pub fn chat_url(&self, session: Option<&str>) -> String {
        match session {
            Some(session) => format!("{}/s/{session}/v1/chat/completions", self.url),
            None => format!("{}/v1/chat/completions", self.url),
        }
    }
}

pub async fn start(config: ProxyConfig, dir: &Path) -> Running {
    let backend: Arc<dyn SessionBackend> =
        Arc::new(FileBackend::new(dir.join("sessions")).unwrap());
    let log_path = dir.join("calls.jsonl");
    let log = CallLog::builder().path(Some(log_path.clone())).build();
    let proxy = Proxy::with_call_log(config, Arc::clone(&backend), log).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let serving = proxy.clone();
    tokio::spawn(async move {
        serving
            .serve(listener, async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    Running {
        url: format!("http://{addr}"),
        proxy,
        backend,
        log_path,
        stop: Some(stop),
    }
}

pub async fn recording(upstream: &Upstream, dir: &Path) -> Running {
    start(
        ProxyConfig::new(Mode::Record, Some(upstream.url.clone())).unwrap(),
        dir,
    )
    .await
}

/// A recording proxy in front of the upstream at `url` (a test's own scripted upstream).
pub async fn recording_at(url: &str, dir: &Path) -> Running {
    start(
        ProxyConfig::new(Mode::Record, Some(url.to_owned())).unwrap(),
        dir,
    )
    .await
}

pub async fn replaying(dir: &Path) -> Running {
    start(ProxyConfig::new(Mode::Replay, None).unwrap(), dir).await
}

/// A client that sends `Content-Type: application/json` as the OpenAI SDKs do, unless a
/// request sets its own (the proxy refuses a model call in any other type).
pub fn client() -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::CONTENT_TYPE,
        reqwest::header::HeaderValue::from_static("application/json"),
    );
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap()
}
