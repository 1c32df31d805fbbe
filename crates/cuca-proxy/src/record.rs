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
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use cuca_events::{
    CucaPlugin, MessageContentBlock, PluginError, SessionEvent, TokenUsage, UnifiedResponse,
};
use cuca_wire::{Format, StreamDecoder, StreamSummary};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::call::Call;
use crate::flush::OneAtATime;
use crate::headers::{caller_headers, upstream_headers, POINT_HEADER, SESSION_HEADER};
use crate::placement::{record_request, Recording};
use crate::redaction::Keep;
use crate::refusal::{no_upstream, shutting_down, ApiError};
use crate::rows::CallRows;
use crate::session::Slot;
use crate::state::{self, Shared, SHUT_DOWN};
use crate::upstream::root_cause;

/// Pieces of an answer buffered between the upstream and a caller that reads slower than
/// the upstream writes. Small, so a slow caller slows its own upstream read (back-pressure)
/// instead of the proxy holding its answer.
const CHANNEL_CHUNKS: usize = 16;

/// The most bytes of a non-streamed answer or an error body kept to decode and log. A
/// `chat.completion` object is its answer's text plus a few hundred bytes; eight mebibytes
/// is a very long answer. Past it the bytes still reach the caller, and the call is
/// recorded without its blocks.
const MAX_DECODED_BODY: usize = 8 << 20;

/// Forwards one model call, recorded in `session` by `recording`, and answers the caller
/// with the upstream's answer as it streams. What the proxy understood of the body is
/// `call.request` (`Err` when it is not a request of the format: it is still forwarded, and
/// only the call log records it).
pub(crate) async fn forward(
    shared: Arc<Shared>,
    call: Call,
    mut session: String,
    mut recording: Recording,
) -> Response {
    let Call {
        format,
        query,
        headers,
        body,
        request,
        redacted,
        read,
        ..
    } = call;
    // The call begins now, its writer held: its request records are stamped with this time
    // and its latency counts from it, whenever its answer comes (a non-streamed answer comes
    // whole, at the end, and a call timed from it would take 0 ms).
    let started = Instant::now();
    let started_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        });
    let parsed = request.as_ref().ok();
    let mut rows = CallRows::start(
        &shared.call_log,
        &shared.run_id,
        &session,
        parsed.map(|r| &r.unified),
        parsed.is_some_and(|r| r.stream),
        &body,
        &headers,
        recording.note.as_deref(),
        shared.redaction.clone(),
    );
    rows.add_redacted(&redacted);
    let Some(mut url) = shared.upstream.call_url(format) else {
        began_nothing(&mut recording, &mut session, &mut rows).await;
        rows.failed("the proxy has no upstream");
        return no_upstream(&session).in_format(format).into_response();
    };
    // The workspace as the request reflects it, taken before the call leaves: written
    // first among its request records if the call is recorded.
    let mut prelude = match shared.workspace.get() {
        Some(watch) => Some(watch.before_call(&session).await),
        None => None,
    };
    // A query the caller sent (Claude Code's `?beta=true`) reaches the upstream as it was.
    url.set_query(query.as_deref());
    let send = shared
        .upstream
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
        () = state::cut(&mut shutdown) => {
            began_nothing(&mut recording, &mut session, &mut rows).await;
            rows.cancelled(SHUT_DOWN);
            return shutting_down(&session)
                .in_format(format)
                .into_response();
        }
    };
    let upstream = match sent {
        Ok(upstream) => upstream,
        Err(error) => {
            let message = format!(
                "the upstream {} did not answer: {}",
                shared.upstream.base,
                root_cause(&error)
            );
            began_nothing(&mut recording, &mut session, &mut rows).await;
            rows.failed(&message);
            return ApiError::new(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                "cuca_upstream_unreachable",
                message,
            )
            .in_session(&session)
            .in_format(format)
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
    let mut recorder_slot = None;
    let mut include_usage = false;
    // An answered call whose body cannot be read (not UTF-8, nested past the reader's
    // limit, not the format's request) is forwarded all the same — the upstream's answer is
    // the caller's — and never silently left out of the recording: its row says so, and so
    // does its session, where that exists (`Pump::note_unread`).
    let mut unread = None;
    if let Err(why) = &request {
        tracing::warn!(
            session = %session,
            "a call to {} was forwarded but not recorded: the body is not a request cuca can read ({why})",
            format.path()
        );
        if status.is_success() {
            let message = format!(
                "the body is not a request cuca can read, so nothing of the call was recorded ({why})"
            );
            rows.not_recorded(&message);
            if recording.unrecordable.is_none() {
                unread = Some(message);
            }
        }
    }
    let request = match (&recording.unrecordable, request) {
        (Some(why), Ok(_)) if status.is_success() => {
            let message = format!("it was not recorded: {why}");
            tracing::error!(session = %session, "the call is not recorded in full: {message}");
            rows.not_recorded(&message);
            Err(why.clone())
        }
        (_, request) => request,
    };
    if let (true, Ok(request)) = (status.is_success(), request) {
        let mut unified = request.unified;
        unified.metadata.run = Some(shared.run_id.clone());
        unified.metadata.tag = Some("proxy".into());
        unified.metadata.started_ms = Some(started_ms);
        unified.metadata.call_id = Some(format!("{:016x}", rand::random::<u64>()));
        // The point is the first record this call actually wrote: another writer's records
        // may have come first, and the plugin continues after them.
        let before = prelude.as_ref().map_or(&[][..], |p| p.events.as_slice());
        let started = record_request(
            &shared,
            &mut recording,
            &mut session,
            &mut unified,
            &request.parameters,
            before,
            &mut rows,
        )
        .await;
        // The request's messages are recorded (those the session did not hold) and placed:
        // what the memo lent of them goes back to it.
        shared
            .memo
            .give_back(&read, std::mem::take(&mut unified.messages));
        if let (Ok(_), Some(watch), Some(prelude)) =
            (&started, shared.workspace.get(), prelude.take())
        {
            watch.recorded(&session, prelude);
        }
        if let Ok(value) = HeaderValue::from_str(&session) {
            response_headers.insert(HeaderName::from_static(SESSION_HEADER), value);
        }
        rows.recorded_by(&recording.slot.plugin);
        match started {
            Ok(point) => {
                if let Some(value) = point
                    .and_then(|point| HeaderValue::from_str(&format!("{session}:{point}")).ok())
                {
                    response_headers.insert(HeaderName::from_static(POINT_HEADER), value);
                }
                let mut recorder = Recorder {
                    format,
                    slot: Arc::clone(&recording.slot),
                    model: unified.model.clone(),
                    call_id: unified.metadata.call_id.clone(),
                    failure: None,
                    missing: Vec::new(),
                    session: session.clone(),
                    rules: shared.redaction.clone(),
                    aliases: shared.aliases.get().cloned(),
                    held: crate::redaction::Held::default(),
                    redacted: cuca_redact::Counts::new(),
                    request_wire: crate::request_wire::request_wire(
                        format,
                        &headers,
                        request.wire.as_ref(),
                    ),
                };
                recorder.missing.extend(request.unrecorded.iter().cloned());
                include_usage = request.include_usage;
                recorder_slot = Some(recorder);
            }
            Err(error) if shared.config.answer_unrecorded => {
                // The caller's answer does not depend on the store: forwarded, and said
                // loudly to be missing from the session.
                let message = format!("its request could not be recorded ({error})");
                tracing::error!(session = %session, "the call is not recorded in full: {message}");
                recording.slot.needs_close();
                rows.not_recorded(&message);
            }
            Err(error) => {
                // What cannot be recorded is not served as if it were: the caller learns now,
                // and dropping the upstream response stops the generation.
                let message = format!("cannot record the call in session {session:?}: {error}");
                tracing::warn!(session = %session, %error, "recording failed; call refused");
                recording.slot.needs_close();
                began_nothing(&mut recording, &mut session, &mut rows).await;
                rows.failed(&message);
                return ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "server_error",
                    "cuca_record_failed",
                    message,
                )
                .in_session(&session)
                .in_format(format)
                .into_response();
            }
        }
    }

    if let (Some(watch), Some(prelude)) = (shared.workspace.get(), prelude) {
        watch.unrecorded(prelude);
    }
    // A call that began no conversation (the upstream refused it, or nothing of it could be
    // recorded) gives the id back before its caller has the answer, and names its base.
    if recording.begins.is_some() {
        began_nothing(&mut recording, &mut session, &mut rows).await;
        if let Ok(value) = HeaderValue::from_str(&session) {
            response_headers.insert(HeaderName::from_static(SESSION_HEADER), value);
        }
    }
    let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
    let tee = if !status.is_success() {
        Tee::Kept(Vec::new())
    } else if is_sse {
        // What a malformed event leaves out is marked, and the rest of the stream is still
        // recorded.
        Tee::Sse(format.decoder(true), None)
    } else {
        Tee::Kept(Vec::new())
    };
    let pump = Pump {
        format,
        upstream,
        tx,
        rows,
        tee,
        recorder: recorder_slot,
        n_blocks: 0,
        answered: false,
        include_usage,
        unread,
        stall: shared.config.caller_stall_timeout,
        ok: status.is_success(),
        started,
        shutdown,
        recording,
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

/// A call placed to begin a conversation that ended with nothing recorded there gives the
/// conversation's id back ([`crate::placement::Reservation::release`]) and is said, in its
/// answer and its call-log row, to be in its base session — the session its caller named —
/// never in an id that holds nothing.
async fn began_nothing(recording: &mut Recording, session: &mut String, rows: &mut CallRows) {
    if let Some(reservation) = recording.begins.take() {
        let base = reservation.base.clone();
        reservation.release().await;
        rows.in_session(&base);
        *session = base;
    }
}

/// What the tee does with the answer's bytes.
enum Tee {
    /// A stream: decoded as it passes; the error, once one is met, stops the decoding.
    Sse(Box<dyn StreamDecoder>, Option<String>),
    /// A whole JSON answer (or an error body), kept up to [`MAX_DECODED_BODY`] to decode at
    /// the end.
    Kept(Vec<u8>),
}

/// The session-log side of a recorded call.
struct Recorder {
    format: Format,
    slot: Arc<Slot>,
    model: String,
    call_id: Option<String>,
    /// The first append that failed: the rest of the call is forwarded, and only the records
    /// that close it are tried again, with a [`SessionEvent::CallIncomplete`] saying so.
    failure: Option<String>,
    /// What the records will not hold, in words, for the call's `CallIncomplete`.
    missing: Vec<String>,
    session: String,
    /// The redaction rules, when any are in force: the answer's streamed text is then held
    /// back a little and redacted as one text (`redaction::Held`).
    rules: Option<Arc<cuca_redact::Rules>>,
    /// A restored copy's path read as the recorded workspace's, when the proxy reads requests
    /// so (a replay or fork run in a copy): a live answer that names the copy is recorded
    /// naming the workspace, as its request is.
    aliases: Option<crate::aliases::Aliases>,
    held: crate::redaction::Held,
    /// What redacting the held text replaced, for the call-log row.
    pub(crate) redacted: cuca_redact::Counts,
    /// What the request carried that no record holds and that decides the price (the
    /// `anthropic-beta` header, the `cache_control` breakpoints), for the call's `CallWire`.
    request_wire: Option<serde_json::Value>,
}

impl Recorder {
    /// Records blocks decoded together (from one read of the upstream's body), the first at
    /// `first` in the answer: as they came, or through the held text when anything is
    /// redacted or aliased. What is ready together is written together.
    fn blocks(&mut self, blocks: Vec<MessageContentBlock>, first: u64) {
        if self.failure.is_some() || blocks.is_empty() {
            return;
        }
        let keep = Keep::of(&self.rules, &self.aliases);
        let ready = if keep.is_nothing() {
            (first..).zip(blocks).collect()
        } else {
            let mut ready = Vec::new();
            for (index, block) in (first..).zip(blocks) {
                self.held
                    .push(&keep, index, block, &mut ready, &mut self.redacted);
            }
            ready
        };
        self.write(ready);
    }

    /// Writes what is still held of the answer's text, redacted.
    fn release_held(&mut self) {
        let keep = Keep::of(&self.rules, &self.aliases);
        if keep.is_nothing() {
            return;
        }
        let mut ready = Vec::new();
        self.held.finish(&keep, &mut ready, &mut self.redacted);
        self.write(ready);
    }

    /// Writes `ready` (each block with its index in the answer) in one append.
    fn write(&mut self, ready: Vec<(u64, MessageContentBlock)>) {
        if self.failure.is_some() || ready.is_empty() {
            return;
        }
        let (indices, blocks): (Vec<u64>, Vec<MessageContentBlock>) = ready.into_iter().unzip();
        if let Err(refused) = self.slot.plugin.record_blocks(&blocks) {
            let index = indices.get(refused.stored).copied().unwrap_or_default();
            let message = format!(
                "block {index} of the answer could not be recorded ({}); it and the blocks after it are not in the session",
                refused.error
            );
            tracing::error!(session = %self.session, "{message}");
            self.failure = Some(message);
        }
    }

    /// Closes the call's turn. A call whose records are not whole (cut short, a block or its
    /// wire fields that could not be written, an event not decoded) gets a `CallIncomplete`
    /// just before its closing records, so a reader sees an incomplete call and not a short
    /// answer; the closing records follow either way, so the
    /// next call in the session starts a turn of its own. Returns the failure to write, if
    /// any, for the call log; a session left open is closed before its next call.
    async fn complete(
        &mut self,
        summary: Option<&StreamSummary>,
        duration: Duration,
    ) -> Option<String> {
        self.release_held();
        let mut missing = std::mem::take(&mut self.missing);
        missing.extend(self.failure.clone());
        let mut failure = self.failure.clone();
        // What the format said beyond the blocks (signatures, ids), for an exact replay in it,
        // and what the request carried that decides the price. Written before the call's
        // `CallIncomplete`, so a wire record the store refuses (one too large for a frame) is
        // named in it.
        let wire = crate::request_wire::call_wire(
            summary.and_then(|s| s.wire.as_ref()),
            self.request_wire.as_ref(),
        );
        if let Some(wire) = wire {
            let event = SessionEvent::CallWire {
                format: self.format.name().to_owned(),
                wire: wire.to_string(),
            };
            if let Err(error) = self.slot.plugin.append_log(event) {
                let message = format!("the call's wire fields could not be recorded ({error})");
                missing.push(message.clone());
                failure.get_or_insert(message);
            }
        }
        if !missing.is_empty() {
            let reason = missing.join("; ");
            if let Err(error) = self
                .slot
                .plugin
                .append_log(SessionEvent::CallIncomplete { reason })
            {
                failure.get_or_insert_with(|| {
                    format!("the call's incomplete mark could not be recorded ({error})")
                });
            }
        }
        let token_usage = summary.map_or_else(TokenUsage::default, StreamSummary::token_usage);
        let response = UnifiedResponse {
            model: summary
                .and_then(|s| s.model.clone())
                .unwrap_or_else(|| self.model.clone()),
            provider: match self.format {
                Format::Chat => "openai-compatible".to_owned(),
                other => format!("{}-api", other.name()),
            },
            // The blocks are in the session already; the plugin records none from here.
            content: Vec::new(),
            finish_reason: summary.and_then(|s| s.finish_reason.clone()),
            token_usage,
            usage: summary.and_then(|s| s.usage.clone()),
            prompt_cache_usage: summary.and_then(|s| s.prompt_cache),
            duration,
            call_id: self.call_id.clone(),
        };
        if let Err(error) = self.slot.plugin.on_response_complete(&response).await {
            failure.get_or_insert_with(|| {
                format!("the end of the call could not be recorded ({error})")
            });
        }
        if let Some(message) = &failure {
            tracing::error!(session = %self.session, "the call is not recorded in full: {message}");
            // The turn may be open in the store: the session's next call closes it first.
            self.slot.needs_close();
        }
        failure
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
    format: Format,
    upstream: reqwest::Response,
    tx: mpsc::Sender<Result<Bytes, io::Error>>,
    rows: CallRows,
    tee: Tee,
    recorder: Option<Recorder>,
    /// Blocks recorded so far; a block is recorded as it is decoded and not kept.
    n_blocks: u64,
    /// Whether a block with text or a tool call arrived: the call log's empty-answer check.
    answered: bool,
    /// The caller asked for a usage chunk after the finish chunk.
    include_usage: bool,
    /// Why nothing of the call is recorded, for the session's note of it.
    unread: Option<String>,
    stall: Duration,
    ok: bool,
    started: Instant,
    /// Says when a shutdown ends the calls still in flight.
    shutdown: watch::Receiver<bool>,
    /// The session's writer, held to the call's last record; holding the slot too keeps a
    /// full slot table from dropping a writer that is still in use.
    recording: Recording,
}

impl Pump {
    async fn run(mut self) {
        let mut decoded = Vec::new();
        let outcome = loop {
            let chunk = tokio::select! {
                biased;
                () = self.tx.closed() => break Outcome::Cancelled("the caller hung up".into()),
                () = state::cut(&mut self.shutdown) => break Outcome::ShutDown,
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
                () = state::cut(&mut self.shutdown) => break Outcome::ShutDown,
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
            self.tee(&bytes, &mut decoded);
        };
        let duration = self.started.elapsed();
        self.note_unread(duration).await;
        match outcome {
            Outcome::Ended => self.ended(&mut decoded, duration).await,
            // A caller that stops reading once it has the whole answer (the Python SDK closes
            // the response at `[DONE]`, often before the upstream's body has ended) got
            // everything: the call was answered, not cancelled.
            Outcome::Cancelled(_) if self.has_whole_answer() => {
                self.ended(&mut decoded, duration).await;
            }
            // The session's records first, so the call-log row can say whether they failed.
            Outcome::Cancelled(why) => {
                self.close_cut(&why, &mut decoded, duration).await;
                self.rows.cancelled(&why);
            }
            Outcome::Broken(message) => {
                self.close_cut(&message, &mut decoded, duration).await;
                self.rows.failed(&message);
            }
            // Shut down after the whole answer had passed: answered, as for a caller that
            // stopped reading at `[DONE]`.
            Outcome::ShutDown if self.has_whole_answer() => {
                self.ended(&mut decoded, duration).await;
            }
            Outcome::ShutDown => {
                // The caller's stream breaks rather than ending as if the answer were whole.
                let _ = self.tx.try_send(Err(io::Error::other(SHUT_DOWN)));
                self.close_cut(SHUT_DOWN, &mut decoded, duration).await;
                self.rows.cancelled(SHUT_DOWN);
            }
        }
    }

    /// A call nothing of which is recorded (its body could not be read) is said in its
    /// session, where the session exists, as a turn of its own: a `CallIncomplete` naming why,
    /// and the closing records (a `CallFinish` with no finish reason, the call's `Latency`, a
    /// zero `TokenUsage`). It carries no `CallRequest`, so replay never serves it; `cuca
    /// replay` and the viewer show it as an incomplete call. A session with no records is
    /// not made for it: the call log's row says it.
    async fn note_unread(&mut self, duration: Duration) {
        let Some(reason) = self.unread.take() else {
            return;
        };
        let plugin = Arc::clone(&self.recording.slot.plugin);
        let duration_ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        let noted = tokio::task::spawn_blocking(move || -> Result<bool, PluginError> {
            if plugin.next_sequence()? == 0 {
                return Ok(false);
            }
            plugin.append_log(SessionEvent::CallIncomplete { reason })?;
            plugin.append_log(SessionEvent::CallFinish {
                finish_reason: None,
                model: String::new(),
            })?;
            plugin.append_log(SessionEvent::Latency { duration_ms })?;
            plugin.append_log(SessionEvent::TokenUsage {
                prompt_tokens: 0,
                completion_tokens: 0,
            })?;
            Ok(true)
        })
        .await;
        let failed = match noted {
            Ok(Ok(_)) => return,
            Ok(Err(error)) => error.to_string(),
            Err(join) => join.to_string(),
        };
        tracing::error!(session = %self.recording.slot.plugin.session_id(), "the session could not say that a call is not recorded: {failed}");
        // A note cut after its `CallIncomplete` leaves the turn open: the session's next call
        // closes it.
        self.recording.slot.needs_close();
        self.rows.not_recorded(&format!(
            "the body is not a request cuca can read, so nothing of the call was recorded, and the session could not say so ({failed})"
        ));
    }

    /// Whether what passed holds the whole answer: a stream's `[DONE]`, or its finish reason
    /// and the usage chunk asked for; a whole JSON answer.
    fn has_whole_answer(&self) -> bool {
        match &self.tee {
            Tee::Sse(decoder, None) => {
                let summary = decoder.summary();
                decoder.is_done()
                    || (summary.finish_reason.is_some()
                        && (summary.usage.is_some() || !self.include_usage))
            }
            Tee::Sse(_, Some(_)) => false,
            Tee::Kept(kept) => {
                self.ok
                    && kept.len() < MAX_DECODED_BODY
                    && serde_json::from_slice::<Box<serde_json::value::RawValue>>(kept).is_ok()
            }
        }
    }

    fn tee(&mut self, bytes: &Bytes, decoded: &mut Vec<MessageContentBlock>) {
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
        self.record_decoded(decoded);
    }

    fn record_decoded(&mut self, decoded: &mut Vec<MessageContentBlock>) {
        if !decoded.is_empty() && self.rows.ttft.is_none() {
            self.rows.ttft = Some(self.rows.sent_at.elapsed());
        }
        self.answered |= decoded.iter().any(|block| match block {
            MessageContentBlock::Text { text } => !text.trim().is_empty(),
            MessageContentBlock::ToolCall { .. } => true,
            _ => false,
        });
        let first = self.n_blocks;
        self.n_blocks += decoded.len() as u64;
        match self.recorder.as_mut() {
            Some(recorder) => recorder.blocks(std::mem::take(decoded), first),
            None => decoded.clear(),
        }
    }

    async fn ended(&mut self, decoded: &mut Vec<MessageContentBlock>, duration: Duration) {
        let finished = match std::mem::replace(&mut self.tee, Tee::Kept(Vec::new())) {
            Tee::Sse(_, Some(error)) => Err(error),
            Tee::Sse(mut decoder, None) => decoder
                .finish(decoded)
                .map_err(|e| e.to_string())
                .inspect(|summary| self.note_skipped(summary)),
            Tee::Kept(kept) if !self.ok => Err(error_sentence(&kept)),
            Tee::Kept(kept) if kept.len() >= MAX_DECODED_BODY => Err(format!(
                "the answer passed {MAX_DECODED_BODY} bytes; forwarded whole, recorded without its blocks"
            )),
            Tee::Kept(kept) => self.format.decode_whole(&kept).map(|(blocks, summary)| {
                decoded.extend(blocks);
                summary
            }),
        };
        self.record_decoded(decoded);
        match finished {
            Ok(summary) => {
                let not_recorded = match self.recorder.take() {
                    Some(mut recorder) => {
                        let failed = recorder.complete(Some(&summary), duration).await;
                        self.rows.add_redacted(&recorder.redacted);
                        failed
                    }
                    None => None,
                };
                if let Some(message) = not_recorded {
                    self.rows.not_recorded(&message);
                }
                self.rows.finished(&summary, self.answered);
            }
            Err(message) => {
                if let Some(recorder) = self.recorder.as_mut() {
                    recorder
                        .missing
                        .push(format!("the answer could not be read: {message}"));
                }
                self.close_recorder(None, duration).await;
                self.rows.failed(&message);
            }
        }
    }

    /// Records a stream's passed-over events as missing from the call's records.
    fn note_skipped(&mut self, summary: &StreamSummary) {
        if summary.n_skipped == 0 {
            return;
        }
        if let Some(recorder) = self.recorder.as_mut() {
            recorder.missing.push(format!(
                "{} event(s) of the stream could not be decoded and are not recorded; the first: {}",
                summary.n_skipped,
                summary.first_skipped.as_deref().unwrap_or("(not kept)")
            ));
        }
    }

    /// A call cut short: everything the decoder had is recorded (a tool call it was still
    /// assembling included), the turn is marked incomplete with `why`, and closed with what
    /// the stream had said by then (its model, finish reason and usage where they came).
    async fn close_cut(
        &mut self,
        why: &str,
        decoded: &mut Vec<MessageContentBlock>,
        duration: Duration,
    ) {
        let mut summary = None;
        if let Tee::Sse(decoder, None) = &mut self.tee {
            // The answer is cut, so the decoder's refusal of it is expected; what it still
            // held is pushed onto `decoded` all the same.
            let _ = decoder.finish(decoded);
            summary = Some(decoder.summary().clone());
        }
        if let Some(summary) = &summary {
            self.note_skipped(summary);
        }
        self.record_decoded(decoded);
        let events = summary.as_ref().map_or(0, |s| s.n_events);
        if let Some(recorder) = self.recorder.as_mut() {
            recorder.missing.insert(
                0,
                format!(
                    "cut short: {why}, after {events} event(s) and {} block(s)",
                    self.n_blocks
                ),
            );
        }
        self.close_recorder(summary.as_ref(), duration).await;
    }

    async fn close_recorder(&mut self, summary: Option<&StreamSummary>, duration: Duration) {
        if let Some(mut recorder) = self.recorder.take() {
            let failed = recorder.complete(summary, duration).await;
            self.rows.add_redacted(&recorder.redacted);
            if let Some(message) = failed {
                self.rows.not_recorded(&message);
            }
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
