//! One HTTP attempt: sending the request, reading the status, and the record of how it went.
//!
//! Everything the call log's start and end rows need meets here: the request's shape
//! ([`AttemptShape`]), the attempt number, the status, the time to first token and the
//! final usage ([`AttemptRecord`]). [`AttemptRecord::end`] is the one place an attempt ends.

use std::time::Duration;

use bytes::Bytes;
use cuca_events::{PluginError, UnifiedRequest};
use reqwest::header::{HeaderMap, ACCEPT, CONTENT_TYPE, RETRY_AFTER};
use tokio::time::Instant;

use crate::client::Inner;
use crate::decode::{clip, server_message, StreamSummary};

/// The most bytes of an error body read for its message: a JSON error is a few hundred
/// bytes, and an HTML error page needs no more than its first screen to be recognised.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// What was sent, in the call log's terms.
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
}

impl AttemptShape {
    pub(crate) fn of(request: &UnifiedRequest, body: &Bytes) -> Self {
        AttemptShape {
            model: request.model.clone(),
            max_tokens: request.max_tokens,
            n_messages: request.messages.len(),
            n_tools: request.tools.len(),
            body_bytes: body.len(),
        }
    }
}

/// How an attempt ended.
#[derive(Debug)]
pub(crate) enum AttemptEnd<'a> {
    /// The stream finished; the summary holds finish reason, served model and usage.
    Finished(&'a StreamSummary),
    /// The attempt failed and the client will try again after `wait`.
    Retrying(&'a PluginError, Duration),
    /// The attempt failed and the call fails with it.
    Failed(&'a PluginError),
}

/// One attempt of a call, from sending to its end.
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
    /// The call this attempt belongs to.
    call_id: String,
    /// Whether [`AttemptRecord::end`] ran.
    ended: bool,
}

impl AttemptRecord {
    /// Starts attempt `n` now.
    pub(crate) fn start(n: u32, call_id: &str, shape: &AttemptShape) -> Self {
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
        AttemptRecord {
            n,
            sent_at: Instant::now(),
            status: None,
            ttft: None,
            call_id: call_id.to_owned(),
            ended: false,
        }
    }

    /// Ends the attempt once; later calls are ignored.
    pub(crate) fn end(&mut self, end: AttemptEnd<'_>) {
        if self.ended {
            return;
        }
        self.ended = true;
        let call_id = self.call_id.as_str();
        let ms = self.sent_at.elapsed().as_millis() as u64;
        let ttft_ms = self.ttft.map(|t| t.as_millis() as u64);
        match end {
            AttemptEnd::Finished(summary) => tracing::debug!(
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
    }
}

impl Drop for AttemptRecord {
    /// An attempt nobody ended was cancelled: the caller dropped the stream mid-call.
    fn drop(&mut self) {
        if !self.ended {
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
    record.status = Some(status.as_u16());
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
    let body = read_error_body(response, at).await;
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
        after_ms: after.as_millis() as u64,
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
    clip(&current.to_string())
}

/// `Retry-After` in seconds (the HTTP-date form is not honoured: no server cuca talks to
/// sends it, and a wall-clock comparison would need a trusted clock).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    let seconds: f64 = value.parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds))
}

async fn read_error_body(mut response: reqwest::Response, deadline: Instant) -> String {
    let mut body = Vec::new();
    while body.len() < MAX_ERROR_BODY {
        match tokio::time::timeout_at(deadline, response.chunk()).await {
            Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(MAX_ERROR_BODY);
    String::from_utf8_lossy(&body).into_owned()
}
