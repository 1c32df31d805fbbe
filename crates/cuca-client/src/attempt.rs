//! One HTTP attempt: sending the request, reading the status, and the record of how it went.
//!
//! Everything the call log's start and end rows need meets here: the request's shape
//! ([`AttemptShape`]), the attempt number, the status, the time to first token and the
//! final usage ([`AttemptRecord`]). [`AttemptRecord::start`] writes the start row and
//! [`AttemptRecord::end`] is the one place an attempt ends and its end row is written; an
//! attempt dropped before that (the caller dropped the stream) is closed by the call log's
//! guard as `cancelled`.

use std::time::Duration;

use bytes::Bytes;
use cuca_calllog::{clip_error, redact_error, CallLog, Ended, Quoted, Record, ResponseBody};
use cuca_events::{PluginError, UnifiedRequest};
use reqwest::header::{HeaderMap, ACCEPT, CONTENT_TYPE, RETRY_AFTER};
use tokio::time::Instant;

use crate::client::Inner;
use crate::conn::ConnUse;
use crate::endpoint::ApiKey;
use cuca_wire::{clip_server_words, server_message, server_text, StreamSummary};

/// The most bytes of an error body read for its message: a JSON error is a few hundred
/// bytes, and an HTML error page needs no more than its first screen to be recognised.
/// Under the bodies pin the rest is read too, for the row's `response_body` only.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Where a failed attempt's error came from, which decides what of it the call log's `error`
/// may hold.
///
/// Seed 003: "WHAT IS NEVER IN IT: the prompts", and "ClipError is how a provider's message
/// becomes a record's Error field … the provider's own words fit". A server's message can
/// quote the request (llama-server's "Failed to parse messages: …; messages = [the whole
/// conversation]"), so without the bodies pin a provider's sentence goes through
/// `cuca_calllog::redact_error` with the request that was sent and its headers: the
/// sentence is kept, every stretch quoting the request (or the answer so far) becomes a
/// marker. A chunk that did not parse and a nameless tool call's arguments are
/// the answer's own bytes, not a provider's sentence, and a plugin's error is whatever the
/// plugin said: those are still named by kind only. With the pin, the row keeps the words,
/// clipped once by `clip_error`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum ErrorSource {
    /// The client's own words (a timeout, a refused connection, a broken stream, a
    /// truncated body): no request or response content.
    #[default]
    Client,
    /// An HTTP error body: `text` is its message unclipped.
    Server { text: String },
    /// The stream's own bytes (an in-stream error, a chunk that did not parse, a nameless
    /// tool call): `text` quotes them unclipped; `answer` is the answer's text decoded
    /// before the failure, which an in-stream error may quote.
    Stream { text: String, answer: String },
    /// A plugin hook failed with its own error.
    Plugin,
}

/// The `error` of a failed attempt's end row. `quoted` is what the attempt sent (its body
/// and header values), whose quotes a provider's sentence loses without the bodies pin.
fn error_field(
    error: &PluginError,
    source: &ErrorSource,
    bodies: bool,
    quoted: &Quoted<'_>,
) -> String {
    const WITHHELD: &str = "withheld without CUCA_CALL_LOG_BODIES";
    match (source, bodies) {
        (ErrorSource::Client, true) | (ErrorSource::Plugin, true) => clip_error(&error.to_string()),
        (ErrorSource::Server { text } | ErrorSource::Stream { text, .. }, true) => clip_error(text),
        // The client's own words hold no request text by construction; they go through the
        // same redaction anyway, so that stays true of words added later.
        (ErrorSource::Client, false) => redact_error(&error.to_string(), quoted),
        (ErrorSource::Server { text }, false) => redact_error(text, quoted),
        (ErrorSource::Stream { text, answer }, false) => match error {
            PluginError::Provider { .. } => redact_error(text, &quoted.clone().text(answer)),
            _ => format!("the server sent a response cuca cannot read; its bytes are {WITHHELD}"),
        },
        (ErrorSource::Plugin, false) => match error {
            PluginError::Plugin { plugin, .. } => {
                format!("plugin {plugin} failed; its message is {WITHHELD}")
            }
            other => format!(
                "a plugin failed ({}); its message is {WITHHELD}",
                error_kind(other)
            ),
        },
    }
}

/// The variant's name, in words: a kind that carries no content.
fn error_kind(error: &PluginError) -> &'static str {
    match error {
        PluginError::Validation { .. } => "validation",
        PluginError::CapacityExceeded { .. } => "capacity exceeded",
        PluginError::NotFound { .. } => "not found",
        PluginError::Io { .. } => "i/o",
        PluginError::Corrupt { .. } => "corrupt data",
        PluginError::Locked { .. } => "locked",
        PluginError::Backend { .. } => "backend",
        PluginError::Provider { .. } => "provider",
        PluginError::Transport { .. } => "transport",
        PluginError::Decode { .. } => "decode",
        PluginError::Timeout { .. } => "timeout",
        PluginError::Plugin { .. } => "plugin",
        _ => "other",
    }
}

/// What was sent, in the call log's terms: the fields both rows of every attempt carry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AttemptShape {
    /// The model that travelled (empty: the server's loaded model).
    pub(crate) model: String,
    /// The answer ceiling that travelled.
    pub(crate) max_tokens: Option<u32>,
    /// Messages in the conversation.
    pub(crate) n_messages: usize,
    /// Tools offered.
    pub(crate) n_tools: usize,
    /// The request body's size.
    pub(crate) body_bytes: usize,
    /// Both rows' common fields: who asked (`metadata.run`, `tag`, `node`; the client fills
    /// `run` when the caller did not) and the request's shape ([`cuca_wire::request_row`]).
    row: Record,
}

impl AttemptShape {
    pub(crate) fn of(request: &UnifiedRequest, body: &Bytes) -> Self {
        let meta = &request.metadata;
        AttemptShape {
            model: request.model.clone(),
            max_tokens: request.max_tokens,
            n_messages: request.messages.len(),
            n_tools: request.tools.len(),
            body_bytes: body.len(),
            row: Record {
                run: meta.run.clone().unwrap_or_default(),
                tag: meta.tag.clone().unwrap_or_default(),
                node: meta.node.clone().unwrap_or_default(),
                // The client only ever sends `stream: true`.
                stream: true,
                ..cuca_wire::request_row(request)
            },
        }
    }

    /// The row both of attempt `n`'s rows start from: who asked, and the request's shape in
    /// counts and knobs, never its content.
    fn row(&self, n: u32) -> Record {
        Record {
            attempt: n,
            ..self.row.clone()
        }
    }
}

/// How an attempt ended.
#[derive(Debug)]
pub(crate) enum AttemptEnd<'a> {
    /// The stream finished; the summary holds finish reason, served model and usage.
    /// `answered` says whether any text or tool call came back.
    Finished {
        summary: &'a StreamSummary,
        answered: bool,
    },
    /// The attempt failed and the client will try again after `wait`.
    Retrying(&'a PluginError, Duration),
    /// The attempt failed and the call fails with it.
    Failed(&'a PluginError),
}

/// One attempt of a call, from sending to its end, with its call-log guard.
#[derive(Debug)]
pub(crate) struct AttemptRecord {
    /// 1-based attempt number.
    pub(crate) n: u32,
    /// When the request was sent.
    pub(crate) sent_at: Instant,
    /// The HTTP status, once headers arrived.
    pub(crate) status: Option<u16>,
    /// Time from sending to the first decoded block.
    pub(crate) ttft: Option<Duration>,
    /// Whether the response came over a connection opened for it, once headers arrived.
    conn: Option<ConnUse>,
    /// The deadline the caller stated, if any: a drop after it is the caller's deadline
    /// ending the call, not the caller changing its mind.
    caller_deadline: Option<CallerDeadline>,
    /// The call this attempt belongs to.
    call_id: String,
    /// What was sent, for the end row.
    shape: AttemptShape,
    /// The call log's guard: `Some` until the end row is written. Dropped unfinished, it
    /// writes an end row saying `cancelled` (set at start: from then on the attempt lives
    /// inside a future its caller may drop).
    guard: Option<cuca_calllog::Attempt>,
    /// The response bytes so far, kept only under the bodies pin: whole (the seed's "whole
    /// and unclipped"), held once, already escaped for the row.
    response: Option<ResponseBody>,
    /// Where a failure came from, for the end row's `error`.
    pub(crate) error_source: ErrorSource,
    /// Whether the log keeps bodies (and so the words of errors that quote them).
    bodies: bool,
    /// The body this attempt sent (a cheap clone of the call's own), for the redaction of
    /// an error that quotes it.
    body: Bytes,
    /// The key this attempt sent in `Authorization`, for the same redaction.
    api_key: Option<ApiKey>,
}

impl AttemptRecord {
    /// Starts attempt `n` now and writes its start row to `log`. Under the bodies pin the
    /// start row carries the request body exactly as it is sent.
    pub(crate) fn start(
        n: u32,
        call_id: &str,
        shape: &AttemptShape,
        log: &CallLog,
        body: &Bytes,
        caller_deadline: Option<CallerDeadline>,
    ) -> Self {
        tracing::debug!(
            call_id,
            attempt = n,
            model = %shape.model,
            max_tokens = ?shape.max_tokens,
            n_messages = shape.n_messages,
            n_tools = shape.n_tools,
            body_bytes = shape.body_bytes,
            "model call attempt started"
        );
        let bodies = log.bodies();
        let mut row = shape.row(n);
        if bodies {
            row.request_body = String::from_utf8_lossy(body).into_owned();
        }
        let mut guard = log.start(row);
        guard.on_drop(Ended::Cancelled);
        AttemptRecord {
            n,
            sent_at: Instant::now(),
            status: None,
            ttft: None,
            conn: None,
            caller_deadline,
            call_id: call_id.to_owned(),
            shape: shape.clone(),
            guard: Some(guard),
            response: bodies.then(ResponseBody::new),
            error_source: ErrorSource::Client,
            bodies,
            body: body.clone(),
            api_key: None,
        }
    }

    /// The status line arrived: on the end row from now on, even one the guard writes.
    pub(crate) fn set_status(&mut self, status: u16) {
        self.status = Some(status);
        if let Some(guard) = self.guard.as_mut() {
            guard.known().status = status;
        }
    }

    /// The first block decoded.
    pub(crate) fn set_ttft(&mut self, ttft: Duration) {
        self.ttft = Some(ttft);
        if let Some(guard) = self.guard.as_mut() {
            guard.known().ttft_ms = ceil_ms(ttft);
        }
    }

    /// How the response's connection came to be.
    pub(crate) fn set_conn(&mut self, conn: Option<ConnUse>) {
        self.conn = conn;
        if let Some(guard) = self.guard.as_mut() {
            conn_fields(guard.known(), conn);
        }
    }

    /// Keeps `bytes` of the response for the end row's `response_body`, under the bodies
    /// pin only.
    pub(crate) fn capture(&mut self, bytes: &[u8]) {
        if let Some(kept) = self.response.as_mut() {
            kept.push(bytes);
        }
    }

    /// Whether the response is kept (the bodies pin).
    pub(crate) fn keeps_response(&self) -> bool {
        self.response.is_some()
    }

    /// Ends the attempt once and writes its end row; later calls are ignored.
    pub(crate) fn end(&mut self, end: AttemptEnd<'_>) {
        let Some(guard) = self.guard.take() else {
            return;
        };
        let call_id = self.call_id.as_str();
        let ms = ceil_ms(self.sent_at.elapsed());
        let ttft_ms = self.ttft.map(ceil_ms);
        match &end {
            AttemptEnd::Finished { summary, .. } => tracing::debug!(
                call_id,
                attempt = self.n,
                status = ?self.status,
                ms,
                ttft_ms = ?ttft_ms,
                finish = ?summary.finish_reason,
                served_model = ?summary.model,
                usage = ?summary.usage,
                timings = ?summary.timings,
                "model call attempt finished"
            ),
            AttemptEnd::Retrying(error, wait) => tracing::warn!(
                call_id,
                attempt = self.n,
                status = ?self.status,
                ms,
                wait_ms = wait.as_millis() as u64,
                %error,
                "model call attempt failed; retrying"
            ),
            AttemptEnd::Failed(error) => tracing::debug!(
                call_id,
                attempt = self.n,
                status = ?self.status,
                ms,
                ttft_ms = ?ttft_ms,
                %error,
                "model call attempt failed"
            ),
        }
        let mut row = self.shape.row(self.n);
        row.status = self.status.unwrap_or(0);
        row.ms = ms;
        row.ttft_ms = ttft_ms.unwrap_or(0);
        conn_fields(&mut row, self.conn);
        match end {
            AttemptEnd::Finished { summary, answered } => {
                summary.fill_end_row(&mut row, answered);
            }
            AttemptEnd::Retrying(error, _) | AttemptEnd::Failed(error) => {
                failed_row(&mut row, error);
                let authorization = self
                    .api_key
                    .as_ref()
                    .map(|key| format!("Bearer {}", key.expose()));
                let mut quoted = Quoted::new().body(&self.body);
                if let Some(value) = &authorization {
                    quoted = quoted.header(value.as_bytes());
                }
                row.error = error_field(error, &self.error_source, self.bodies, &quoted);
            }
        }
        match self.response.take() {
            Some(kept) => guard.finish_with_response(row, kept),
            None => guard.finish(row),
        }
    }
}

/// The seed's connection fields: `conn_reused` written out either way, and the parts of
/// opening one only where one was opened for this attempt ("every one of them is absent on a
/// reused connection because none of them happened"). No trace (no response arrived): none.
fn conn_fields(row: &mut Record, conn: Option<ConnUse>) {
    match conn {
        None => {}
        Some(ConnUse::Reused) => row.conn_reused = Some(true),
        Some(ConnUse::Fresh(opened)) => {
            row.conn_reused = Some(false);
            row.dns_ms = opened.dns.map_or(0, ceil_ms);
            row.connect_ms = ceil_ms(opened.connect);
        }
    }
}

/// What a failure adds to the end row besides its `error`: the server's comeback
/// instruction, and, when one of the client's own timeouts ended it, `ended: "deadline"`
/// with the bound that fired.
fn failed_row(row: &mut Record, error: &PluginError) {
    if let PluginError::Provider {
        retry_after_s: Some(seconds),
        ..
    } = error
    {
        row.retry_after = *seconds;
    }
    if let PluginError::Timeout {
        phase, after_ms, ..
    } = error
    {
        row.ended = Ended::Deadline.as_str().to_owned();
        row.applied_ms = *after_ms;
        row.applied = timeout_setting(phase).to_owned();
    }
}

/// The [`crate::Timeouts`] field behind a timeout's phase word.
fn timeout_setting(phase: &str) -> &str {
    match phase {
        CALLER_DEADLINE_PHASE => "caller",
        "connection" => "connect",
        "first token" => "first_token",
        "data" => "idle",
        "response" => "total",
        other => other,
    }
}

/// Milliseconds rounded up: a wait that was measured is never written as 0, which the call
/// log reads as "not measured" and leaves off the row.
fn ceil_ms(duration: Duration) -> u64 {
    let micros = duration.as_micros();
    u64::try_from(micros.div_ceil(1000)).unwrap_or(u64::MAX)
}

/// The phase word of a [`PluginError::Timeout`] the caller's own deadline caused.
pub(crate) const CALLER_DEADLINE_PHASE: &str = "answer by the caller's deadline";

/// A deadline the caller stated for one call ([`crate::CucaClient::generate_stream_by`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallerDeadline {
    /// When it falls.
    pub(crate) at: Instant,
    /// Its length from the start of the call, for `applied_ms`.
    pub(crate) after: Duration,
}

impl Drop for AttemptRecord {
    /// An attempt nobody ended was cancelled: the caller dropped the stream mid-call. The
    /// guard, dropped right after, writes the `cancelled` end row, or `deadline` when the
    /// drop came at or after a deadline the caller stated (its own `tokio::time::timeout`
    /// around the call firing).
    fn drop(&mut self) {
        if let (Some(guard), Some(deadline)) = (self.guard.as_mut(), self.caller_deadline) {
            if Instant::now() >= deadline.at {
                guard.on_drop(Ended::Deadline);
                let known = guard.known();
                known.applied = "caller".to_owned();
                known.applied_ms = ceil_ms(deadline.after);
            }
        }
        if self.guard.is_some() {
            tracing::debug!(
                call_id = %self.call_id,
                attempt = self.n,
                status = ?self.status,
                ms = self.sent_at.elapsed().as_millis() as u64,
                "model call attempt cancelled by the caller"
            );
        }
    }
}

/// Why an attempt failed, and whether another may follow.
#[derive(Debug)]
pub(crate) struct AttemptFailure {
    pub(crate) error: PluginError,
    /// Connection errors, 429 and 5xx may be retried.
    pub(crate) retryable: bool,
    /// The server's `Retry-After`, in seconds.
    pub(crate) retry_after: Option<Duration>,
}

/// Sends one request and waits for its status line and headers, by `deadline`.
pub(crate) async fn send(
    inner: &Inner,
    body: Bytes,
    record: &mut AttemptRecord,
    deadline: (Instant, &'static str, Duration),
) -> Result<reqwest::Response, AttemptFailure> {
    let url = inner.url.as_str();
    let mut builder = inner
        .http
        .post(inner.url.clone())
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "text/event-stream")
        .body(body);
    if let Some(key) = &inner.api_key {
        record.api_key = Some(key.clone());
        let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {}", key.expose()))
            .map_err(|_| AttemptFailure {
                error: PluginError::Transport {
                    url: url.to_owned(),
                    message: "the api key holds characters an HTTP header cannot carry".into(),
                    source: None,
                },
                retryable: false,
                retry_after: None,
            })?;
        value.set_sensitive(true);
        builder = builder.header(reqwest::header::AUTHORIZATION, value);
    }
    let (at, phase, after) = deadline;
    let response = match tokio::time::timeout_at(at, builder.send()).await {
        Err(_) => {
            return Err(AttemptFailure {
                error: timeout(url, phase, after),
                retryable: false,
                retry_after: None,
            })
        }
        Ok(Err(error)) => return Err(send_error(inner, error)),
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    record.set_status(status.as_u16());
    record.set_conn(inner.conn_trace.claim(&response));
    if status.is_success() {
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if content_type.starts_with("application/json") {
            return Err(AttemptFailure {
                error: PluginError::Decode {
                    url: url.to_owned(),
                    message: format!(
                        "HTTP {} with {content_type}, not an event stream: the server ignored \
                         \"stream\": true",
                        status.as_u16()
                    ),
                },
                retryable: false,
                retry_after: None,
            });
        }
        return Ok(response);
    }
    let retry_after = retry_after(response.headers());
    let body = read_error_body(response, at, record).await;
    record.error_source = ErrorSource::Server {
        text: server_text(&body),
    };
    let code = status.as_u16();
    Err(AttemptFailure {
        error: PluginError::Provider {
            url: url.to_owned(),
            status: code,
            message: server_message(&body),
            retry_after_s: retry_after.map(|d| d.as_secs_f64()),
        },
        retryable: code == 429 || status.is_server_error(),
        retry_after,
    })
}

/// A [`PluginError::Timeout`] for `phase`.
pub(crate) fn timeout(url: &str, phase: &str, after: Duration) -> PluginError {
    PluginError::Timeout {
        url: url.to_owned(),
        phase: phase.to_owned(),
        // Saturating rather than `as`: the figure becomes the call log's `applied_ms`, and a
        // wrapped value would name a bound that never applied.
        after_ms: u64::try_from(after.as_millis()).unwrap_or(u64::MAX),
    }
}

fn send_error(inner: &Inner, error: reqwest::Error) -> AttemptFailure {
    let url = inner.url.as_str();
    if error.is_connect() {
        let error = if error.is_timeout() {
            timeout(url, "connection", inner.timeouts.connect)
        } else {
            let what = if is_refused(&error) {
                "connection refused".to_owned()
            } else {
                format!("cannot connect ({})", root_cause(&error))
            };
            PluginError::Transport {
                url: url.to_owned(),
                message: format!(
                    "{what}: cuca expected {} at {}; start it there, or point cuca elsewhere \
                     with CUCA_BASE_URL (and CUCA_MODEL for the model to ask for)",
                    inner.endpoint.expected_server(),
                    inner.base_url
                ),
                source: Some(Box::new(error)),
            }
        };
        return AttemptFailure {
            error,
            retryable: true,
            retry_after: None,
        };
    }
    let error = if error.is_timeout() {
        timeout(url, "connection", inner.timeouts.connect)
    } else {
        PluginError::Transport {
            url: url.to_owned(),
            message: format!(
                "the request failed before a status arrived: {}",
                root_cause(&error)
            ),
            source: Some(Box::new(error)),
        }
    };
    AttemptFailure {
        error,
        retryable: false,
        retry_after: None,
    }
}

fn is_refused(error: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(io) = current.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        source = current.source();
    }
    false
}

/// The innermost cause's message: reqwest's own top message only repeats the URL.
pub(crate) fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = error;
    while let Some(next) = current.source() {
        current = next;
    }
    clip_server_words(&current.to_string())
}

/// `Retry-After` in seconds (the HTTP-date form is not honoured: no server cuca talks to
/// sends it, and a wall-clock comparison would need a trusted clock).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    let seconds: f64 = value.parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds))
}

/// The first [`MAX_ERROR_BODY`] bytes of an error body, for its message. Under the bodies pin
/// the whole body is read (by the same deadline) and kept for the row's `response_body`.
async fn read_error_body(
    mut response: reqwest::Response,
    deadline: Instant,
    record: &mut AttemptRecord,
) -> String {
    let mut body = Vec::new();
    while body.len() < MAX_ERROR_BODY || record.keeps_response() {
        match tokio::time::timeout_at(deadline, response.chunk()).await {
            Ok(Ok(Some(chunk))) => {
                record.capture(&chunk);
                let room = MAX_ERROR_BODY.saturating_sub(body.len());
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            _ => break,
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

#[cfg(test)]
mod tests;
