//! Record mode: forward a call's bytes both ways unchanged, and tee the answer into the
//! session log and the call log as it passes.
//!
//! The caller's body goes to the upstream as it was received. The upstream's status and
//! headers come back as they were (less hop-by-hop headers), and each piece of its body is
//! handed to the caller *before* it is decoded and recorded, so recording never delays what
//! the caller sees. A task per call owns the upstream response: when the caller hangs up (or
//! reads nothing for the stall timeout) the task drops the response, which closes the
//! upstream connection and stops the generation, and the call log says `cancelled`.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use cuca_client::{ChatStreamDecoder, StreamSummary};
use cuca_events::{CucaPlugin, MessageContentBlock, TokenUsage, UnifiedResponse};
use cuca_session_log::SessionLogPlugin;
use tokio::sync::{mpsc, watch, OwnedMutexGuard};
use tokio::time::Instant;

use crate::flush::OneAtATime;
use crate::rows::CallRows;
use crate::server::{self, Shared, SHUT_DOWN};
use crate::session::{Slot, POINT_HEADER, SESSION_HEADER};
use crate::wire::{self, ApiError, CallerRequest};

/// Pieces of an answer buffered between the upstream and a caller that reads slower than
/// the upstream writes. Small, so a slow caller slows its own upstream read (back-pressure)
/// instead of the proxy holding its answer.
const CHANNEL_CHUNKS: usize = 16;

/// The most bytes of a non-streamed answer or an error body kept to decode and log. A
/// `chat.completion` object is its answer's text plus a few hundred bytes; eight mebibytes
/// is a very long answer. Past it the bytes still reach the caller, and the call is
/// recorded without its blocks.
const MAX_DECODED_BODY: usize = 8 << 20;

/// Request headers that describe one connection, not the call, and are never forwarded.
/// `accept-encoding` is dropped so the upstream answers uncompressed: the answer is decoded
/// as it passes, and the caller gets it byte for byte as the upstream wrote it.
const REQUEST_HOP_HEADERS: [&str; 11] = [
    "host",
    "content-length",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "accept-encoding",
];

/// Response headers that describe the upstream connection; the proxy frames its own.
const RESPONSE_HOP_HEADERS: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "content-length",
    "trailer",
    "upgrade",
];

/// The caller's headers as they go upstream: all of them, `Authorization` included (marked
/// sensitive so no debug output of the request shows it), less hop-by-hop headers and cuca's
/// own.
pub(crate) fn upstream_headers(caller: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(caller.len());
    for (name, value) in caller {
        let lower = name.as_str();
        if REQUEST_HOP_HEADERS.contains(&lower) || lower.starts_with("x-cuca-") {
            continue;
        }
        let mut value = value.clone();
        if name == header::AUTHORIZATION {
            value.set_sensitive(true);
        }
        out.append(name.clone(), value);
    }
    out
}

fn caller_headers(upstream: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(upstream.len() + 2);
    for (name, value) in upstream {
        if !RESPONSE_HOP_HEADERS.contains(&name.as_str()) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// A recorded call's place in its session: what the tee records into.
pub(crate) struct Recording {
    pub(crate) slot: Arc<Slot>,
    /// Held until the call's last record is written: the proxy is the session's one writer.
    pub(crate) _guard: OwnedMutexGuard<()>,
}

/// Forwards one chat call and answers the caller with the upstream's answer as it streams.
/// `request` is what the proxy understood of the body (`Err` when it is not a chat request:
/// it is still forwarded, and only the call log records it).
pub(crate) async fn forward_chat(
    shared: Arc<Shared>,
    session: String,
    headers: HeaderMap,
    body: Bytes,
    request: Result<CallerRequest, String>,
    recording: Recording,
) -> Response {
    let parsed = request.as_ref().ok();
    let mut rows = CallRows::start(
        &shared.call_log,
        &shared.run_id,
        &session,
        parsed.map(|r| &r.unified),
        parsed.is_some_and(|r| r.stream),
        &body,
    );
    let Some(url) = shared.chat_url.clone() else {
        rows.failed("the proxy has no upstream");
        return no_upstream(&session).into_response();
    };
    let send = shared
        .http
        .post(url)
        .headers(upstream_headers(&headers))
        .body(body)
        .send();
    // A shutdown past its grace does not wait for an upstream still prefilling: nothing is
    // recorded yet, so the call just ends.
    let mut shutdown = shared.cut.subscribe();
    let sent = tokio::select! {
        sent = send => sent,
        () = server::cut(&mut shutdown) => {
            rows.cancelled(SHUT_DOWN);
            return server::shutting_down(&session).into_response();
        }
    };
    let upstream = match sent {
        Ok(upstream) => upstream,
        Err(error) => {
            let message = format!(
                "the upstream {} did not answer: {}",
                shared.upstream_base,
                root_cause(&error)
            );
            rows.failed(&message);
            return ApiError::new(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                "cuca_upstream_unreachable",
                message,
            )
            .in_session(&session)
            .into_response();
        }
    };
    let status = upstream.status();
    rows.status = status.as_u16();
    let mut response_headers = caller_headers(upstream.headers());
    if let Ok(value) = HeaderValue::from_str(&session) {
        response_headers.insert(HeaderName::from_static(SESSION_HEADER), value);
    }
    let is_sse = upstream
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));

    // Only an answer is recorded: a refused call (a 400 for a prompt over the context) never
    // became a turn, and the call log holds its status and sentence.
    let mut recorder = None;
    if let (true, Ok(request)) = (status.is_success(), request) {
        let plugin = Arc::clone(&recording.slot.plugin);
        let mut unified = request.unified;
        unified.metadata.run = Some(shared.run_id.clone());
        unified.metadata.tag = Some("proxy".into());
        unified.metadata.node = Some(session.clone());
        unified.metadata.call_id = Some(format!("{:016x}", rand::random::<u64>()));
        let started = match plugin.next_sequence() {
            // With the caller's own parameters, not only those a UnifiedRequest has fields for.
            Ok(point) => plugin
                .record_request_with(&unified, &request.parameters)
                .map(|()| point),
            Err(error) => Err(error),
        };
        match started {
            Ok(point) => {
                if let Ok(value) = HeaderValue::from_str(&format!("{session}:{point}")) {
                    response_headers.insert(HeaderName::from_static(POINT_HEADER), value);
                }
                recorder = Some(Recorder {
                    plugin,
                    model: unified.model.clone(),
                    call_id: unified.metadata.call_id.clone(),
                    failed: false,
                    session: session.clone(),
                });
            }
            Err(error) => {
                // What cannot be recorded is not served as if it were: the caller learns now,
                // and dropping the upstream response stops the generation.
                let message = format!("cannot record the call in session {session:?}: {error}");
                tracing::warn!(session = %session, %error, "recording failed; call refused");
                rows.failed(&message);
                return ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "server_error",
                    "cuca_record_failed",
                    message,
                )
                .in_session(&session)
                .into_response();
            }
        }
    }

    let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
    let tee = if !status.is_success() {
        Tee::Kept(Vec::new())
    } else if is_sse {
        Tee::Sse(Box::new(ChatStreamDecoder::new()), None)
    } else {
        Tee::Kept(Vec::new())
    };
    let pump = Pump {
        upstream,
        tx,
        rows,
        tee,
        recorder,
        blocks: Vec::new(),
        stall: shared.config.caller_stall_timeout,
        ok: status.is_success(),
        started: Instant::now(),
        shutdown,
        _recording: recording,
    };
    tokio::spawn(pump.run());
    let body = Body::from_stream(OneAtATime::new(Box::pin(futures::stream::unfold(
        rx,
        |mut rx| async move { rx.recv().await.map(|item| (item, rx)) },
    ))));
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = response_headers;
    response
}

pub(crate) fn no_upstream(session: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found_error",
        "cuca_no_upstream",
        "the proxy runs in replay mode and forwards nothing",
    )
    .in_session(session)
}

/// The innermost cause of a transport error: "connection refused" rather than reqwest's
/// outer "error sending request".
pub(crate) fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// What the tee does with the answer's bytes.
enum Tee {
    /// A stream: decoded as it passes; the error, once one is met, stops the decoding.
    Sse(Box<ChatStreamDecoder>, Option<String>),
    /// A whole JSON answer (or an error body), kept up to [`MAX_DECODED_BODY`] to decode at
    /// the end.
    Kept(Vec<u8>),
}

/// The session-log side of a recorded call.
struct Recorder {
    plugin: Arc<SessionLogPlugin>,
    model: String,
    call_id: Option<String>,
    /// Set when an append failed: the rest of the call is forwarded but not recorded.
    failed: bool,
    session: String,
}

impl Recorder {
    async fn block(&mut self, block: &MessageContentBlock) {
        if self.failed {
            return;
        }
        if let Err(error) = self.plugin.on_stream_chunk(block).await {
            self.failed = true;
            tracing::warn!(session = %self.session, %error, "could not record a block; the rest of this call is forwarded unrecorded");
        }
    }

    /// Closes the call's turn. A call cut short is closed too, with no finish reason, so the
    /// next call in the session starts a turn of its own.
    async fn complete(
        &mut self,
        summary: Option<&StreamSummary>,
        content: Vec<MessageContentBlock>,
        duration: Duration,
    ) {
        if self.failed {
            return;
        }
        let token_usage = summary.map_or_else(TokenUsage::default, token_usage);
        let response = UnifiedResponse {
            model: summary
                .and_then(|s| s.model.clone())
                .unwrap_or_else(|| self.model.clone()),
            provider: "openai-compatible".into(),
            content,
            finish_reason: summary.and_then(|s| s.finish_reason.clone()),
            token_usage,
            usage: summary.and_then(|s| s.usage.clone()),
            prompt_cache_usage: summary.and_then(|s| s.prompt_cache),
            duration,
            call_id: self.call_id.clone(),
        };
        if let Err(error) = self.plugin.on_response_complete(&response).await {
            tracing::warn!(session = %self.session, %error, "could not record the end of a call");
        }
    }
}

/// Without a usage chunk, llama.cpp's timings count the tokens, as in the client.
fn token_usage(summary: &StreamSummary) -> TokenUsage {
    match (&summary.usage, &summary.timings) {
        (Some(usage), _) => TokenUsage {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
        },
        (None, Some(timings)) => TokenUsage {
            prompt_tokens: timings.prompt_n.unwrap_or(0) + timings.cache_n.unwrap_or(0),
            completion_tokens: timings.predicted_n.unwrap_or(0),
        },
        (None, None) => TokenUsage::default(),
    }
}

/// How the copy loop ended.
enum Outcome {
    /// The upstream's body ended.
    Ended,
    /// The caller went away or stopped reading.
    Cancelled(String),
    /// The proxy shut down with the call still in flight.
    ShutDown,
    /// The upstream connection broke mid-answer.
    Broken(String),
}

/// One call in flight: copies the upstream's body to the caller and tees it.
struct Pump {
    upstream: reqwest::Response,
    tx: mpsc::Sender<Result<Bytes, io::Error>>,
    rows: CallRows,
    tee: Tee,
    recorder: Option<Recorder>,
    /// Blocks recorded so far, for the aggregated response.
    blocks: Vec<MessageContentBlock>,
    stall: Duration,
    ok: bool,
    started: Instant,
    /// Says when a shutdown ends the calls still in flight.
    shutdown: watch::Receiver<bool>,
    /// The session's writer, held to the call's last record; holding the slot too keeps a
    /// full slot table from dropping a writer that is still in use.
    _recording: Recording,
}

impl Pump {
    async fn run(mut self) {
        let mut decoded = Vec::new();
        let outcome = loop {
            let chunk = tokio::select! {
                biased;
                () = self.tx.closed() => break Outcome::Cancelled("the caller hung up".into()),
                () = server::cut(&mut self.shutdown) => break Outcome::ShutDown,
                chunk = self.upstream.chunk() => chunk,
            };
            let bytes = match chunk {
                Ok(Some(bytes)) => bytes,
                Ok(None) => break Outcome::Ended,
                Err(error) => {
                    let message = format!(
                        "the upstream connection broke mid-answer: {}",
                        root_cause(&error)
                    );
                    // The caller's stream breaks too, as it would have without the proxy.
                    let _ = self.tx.send(Err(io::Error::other(message.clone()))).await;
                    break Outcome::Broken(message);
                }
            };
            // The caller first: recording never delays a byte.
            let sent = tokio::select! {
                sent = tokio::time::timeout(self.stall, self.tx.send(Ok(bytes.clone()))) => sent,
                () = server::cut(&mut self.shutdown) => break Outcome::ShutDown,
            };
            match sent {
                Err(_) => {
                    break Outcome::Cancelled(format!(
                        "the caller read nothing for {} s",
                        self.stall.as_secs()
                    ))
                }
                Ok(Err(_)) => break Outcome::Cancelled("the caller hung up".into()),
                Ok(Ok(())) => {}
            }
            self.rows.capture(&bytes);
            self.tee(&bytes, &mut decoded).await;
        };
        let duration = self.started.elapsed();
        match outcome {
            Outcome::Ended => self.ended(&mut decoded, duration).await,
            Outcome::Cancelled(why) => {
                self.rows.cancelled(&why);
                self.close_cut(duration).await;
            }
            Outcome::Broken(message) => {
                self.rows.failed(&message);
                self.close_cut(duration).await;
            }
            Outcome::ShutDown => {
                // The caller's stream breaks rather than ending as if the answer were whole.
                let _ = self.tx.try_send(Err(io::Error::other(SHUT_DOWN)));
                self.rows.cancelled(SHUT_DOWN);
                self.close_cut(duration).await;
            }
        }
    }

    async fn tee(&mut self, bytes: &Bytes, decoded: &mut Vec<MessageContentBlock>) {
        match &mut self.tee {
            Tee::Sse(decoder, error) => {
                if error.is_some() {
                    return;
                }
                if let Err(e) = decoder.feed(bytes, decoded) {
                    *error = Some(e.to_string());
                }
            }
            Tee::Kept(kept) => {
                let room = MAX_DECODED_BODY.saturating_sub(kept.len());
                kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
                return;
            }
        }
        self.record_decoded(decoded).await;
    }

    async fn record_decoded(&mut self, decoded: &mut Vec<MessageContentBlock>) {
        if !decoded.is_empty() && self.rows.ttft.is_none() {
            self.rows.ttft = Some(self.rows.sent_at.elapsed());
        }
        for block in decoded.drain(..) {
            if let Some(recorder) = self.recorder.as_mut() {
                recorder.block(&block).await;
            }
            self.blocks.push(block);
        }
    }

    async fn ended(&mut self, decoded: &mut Vec<MessageContentBlock>, duration: Duration) {
        let finished = match std::mem::replace(&mut self.tee, Tee::Kept(Vec::new())) {
            Tee::Sse(_, Some(error)) => Err(error),
            Tee::Sse(mut decoder, None) => decoder.finish(decoded).map_err(|e| e.to_string()),
            Tee::Kept(kept) if !self.ok => Err(error_sentence(&kept)),
            Tee::Kept(kept) if kept.len() >= MAX_DECODED_BODY => Err(format!(
                "the answer passed {MAX_DECODED_BODY} bytes; forwarded whole, recorded without its blocks"
            )),
            Tee::Kept(kept) => wire::decode_completion(&kept).map(|(blocks, summary)| {
                decoded.extend(blocks);
                summary
            }),
        };
        self.record_decoded(decoded).await;
        match finished {
            Ok(summary) => {
                self.rows.finished(&summary, &self.blocks);
                if let Some(mut recorder) = self.recorder.take() {
                    let blocks = std::mem::take(&mut self.blocks);
                    recorder.complete(Some(&summary), blocks, duration).await;
                }
            }
            Err(message) => {
                self.rows.failed(&message);
                self.close_cut(duration).await;
            }
        }
    }

    async fn close_cut(&mut self, duration: Duration) {
        if let Some(mut recorder) = self.recorder.take() {
            let blocks = std::mem::take(&mut self.blocks);
            recorder.complete(None, blocks, duration).await;
        }
    }
}

/// The human part of an error body: OpenAI's and llama.cpp's `error.message`, else the
/// body's text, whitespace-collapsed.
fn error_sentence(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) {
        if let Some(message) = value
            .pointer("/error/message")
            .or_else(|| value.get("message"))
            .and_then(|m| m.as_str())
        {
            return message.to_owned();
        }
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
