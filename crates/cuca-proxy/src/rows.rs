//! The call log's two rows for each forwarded call (seed 003), through `cuca_calllog`'s guard.
//!
//! The proxy is a second door model calls pass through, so it writes rows as `cuca-client`
//! does: a start row as the call goes out, an end row when it comes back, and `ended:
//! cancelled` from the guard when the caller goes away first. Rows carry the request's shape
//! (counts and knobs), never its text, unless the bodies pin is on; never its headers. An
//! `error` is the upstream's (or the proxy's) own sentence with every stretch that quotes the
//! caller's body or headers replaced by a marker (`cuca_calllog::redact_error`).

use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderMap;
use bytes::Bytes;
use cuca_calllog::{clip_error, redact_error, Attempt, CallLog, Ended, Quoted, Record};
use cuca_events::UnifiedRequest;
use cuca_redact::{Counts, Rules};
use cuca_session_log::SessionLogPlugin;
use cuca_wire::StreamSummary;
use tokio::time::Instant;

/// The most response bytes kept for `response_body` under the bodies pin: the same bound the
/// client keeps, for the same reason (a long answer many times over, far under the rotation).
const MAX_LOGGED_RESPONSE: usize = 4 << 20;

/// Request headers whose values are not looked for in an error sentence: they describe the
/// connection to the proxy, not the caller's text. `Host` is the proxy's own address, which
/// on one machine shares its `127.0.0.1:` with the upstream's, and the proxy's own sentence
/// ("the upstream http://127.0.0.1:8080 did not answer") must keep it.
const NOT_QUOTED_HEADERS: [&str; 3] = ["host", "content-length", "connection"];

/// One forwarded call's rows: the start row is written by [`CallRows::start`]; the end row by
/// [`CallRows::finished`], [`CallRows::failed`] or [`CallRows::cancelled`], or, when none
/// runs (the caller dropped the call while it waited for the upstream), by the guard.
#[derive(Debug)]
pub(crate) struct CallRows {
    guard: Option<Attempt>,
    template: Record,
    pub(crate) sent_at: Instant,
    pub(crate) status: u16,
    pub(crate) ttft: Option<Duration>,
    response: Option<Vec<u8>>,
    response_len: u64,
    /// Whether the bodies pin is on: then `error` keeps the sentence whole, as the body does.
    bodies: bool,
    /// The caller's body (a cheap clone of the one forwarded) and headers, for the redaction
    /// of an error that quotes them.
    body: Bytes,
    headers: HeaderMap,
    /// Why the session does not hold the whole call, when a record could not be written.
    not_recorded: Option<String>,
    /// The redaction rules: the bodies under the pin and every `error` are redacted by them
    /// too, so the call log holds no value the session does not.
    rules: Option<Arc<Rules>>,
    /// What redaction replaced in the call's request and, taken from `recorder` when the end
    /// row is written, in its records.
    redacted: Counts,
    /// The writer that recorded the call, whose redaction counts the end row carries.
    recorder: Option<Arc<SessionLogPlugin>>,
}

impl CallRows {
    /// Writes the start row of a call in `session` with the shape of `request` (when the body
    /// was a request at all) and returns the rows' owner. `body` and `headers` are what the
    /// caller sent: kept (the body by reference count) so a failure's sentence can lose what
    /// it quotes of them.
    // Each argument is one fact of the call the row states; a struct would only rename them.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start(
        log: &CallLog,
        run: &str,
        session: &str,
        request: Option<&UnifiedRequest>,
        stream: bool,
        body: &Bytes,
        headers: &HeaderMap,
        note: Option<&str>,
        rules: Option<Arc<Rules>>,
    ) -> Self {
        let row = Record {
            run: run.to_owned(),
            tag: "proxy".into(),
            node: session.to_owned(),
            stream,
            attempt: 1,
            note: note.unwrap_or_default().to_owned(),
            // The request's shape, as the client writes it.
            ..request.map(cuca_wire::request_row).unwrap_or_default()
        };
        let bodies = log.bodies();
        let mut start = row.clone();
        if bodies {
            start.request_body = redacted_text(rules.as_deref(), &String::from_utf8_lossy(body));
        }
        let mut guard = log.start(start);
        // From here the call lives in a future the caller may drop by hanging up.
        guard.on_drop(Ended::Cancelled);
        CallRows {
            guard: Some(guard),
            template: row,
            sent_at: Instant::now(),
            status: 0,
            ttft: None,
            response: bodies.then(Vec::new),
            response_len: 0,
            bodies,
            body: body.clone(),
            headers: headers.clone(),
            not_recorded: None,
            rules,
            redacted: Counts::new(),
            recorder: None,
        }
    }

    /// Adds what redaction replaced in the call's request to the end row's counts.
    pub(crate) fn add_redacted(&mut self, counts: &Counts) {
        self.redacted.merge(counts);
    }

    /// The call is recorded by `plugin`: the end row adds what redacting its records
    /// replaced. The writer records one call at a time, so what it counted since the last
    /// row took its counts is this call's.
    pub(crate) fn recorded_by(&mut self, plugin: &Arc<SessionLogPlugin>) {
        if plugin.redaction().is_some() {
            self.recorder = Some(Arc::clone(plugin));
        }
    }

    /// Keeps `bytes` for `response_body`, under the bodies pin only.
    pub(crate) fn capture(&mut self, bytes: &[u8]) {
        if let Some(kept) = self.response.as_mut() {
            self.response_len += bytes.len() as u64;
            let room = MAX_LOGGED_RESPONSE.saturating_sub(kept.len());
            kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
    }

    /// The call is recorded in `session` after all, not the one its start row named (another
    /// process began that conversation first): the end row names where it is, and says why.
    pub(crate) fn moved_to(&mut self, session: &str, why: &str) {
        self.template.node = session.to_owned();
        add_note(&mut self.template, why);
    }

    /// The call is in `session`, not the one its start row named: it began no conversation
    /// there, so the end row names the session its caller named.
    pub(crate) fn in_session(&mut self, session: &str) {
        self.template.node = session.to_owned();
    }

    /// The session could not record the whole call: the end row's `error` says so, whatever
    /// the caller got (a recording that failed is not a clean row).
    pub(crate) fn not_recorded(&mut self, message: &str) {
        self.not_recorded = Some(format!(
            "the session does not hold this call in full: {message}"
        ));
    }

    fn end_row(&mut self) -> Record {
        let mut row = self.template.clone();
        if let Some(message) = &self.not_recorded {
            row.error = self.error_field(message);
        }
        if let Some(plugin) = self.recorder.take() {
            self.redacted.merge(&plugin.take_redacted());
        }
        row.redacted = crate::redaction::row_counts(&self.redacted);
        row.status = self.status;
        row.ms = ceil_ms(self.sent_at.elapsed());
        row.ttft_ms = self.ttft.map_or(0, ceil_ms);
        if let Some(kept) = self.response.take() {
            if self.response_len > kept.len() as u64 {
                add_note(
                    &mut row,
                    &format!(
                        "response_body keeps the first {} of {} bytes",
                        kept.len(),
                        self.response_len
                    ),
                );
            }
            row.response_body =
                redacted_text(self.rules.as_deref(), &String::from_utf8_lossy(&kept));
        }
        row
    }

    /// The call came back whole: finish, served model and the server's counts.
    pub(crate) fn finished(&mut self, summary: &StreamSummary, answered: bool) {
        let Some(guard) = self.guard.take() else {
            return;
        };
        let mut row = self.end_row();
        // The served model, finish and the server's counts, as the client writes them.
        summary.fill_end_row(&mut row, answered);
        guard.finish(row);
    }

    /// The call failed: the upstream's status and its own sentence (or the decoder's, or the
    /// proxy's), clipped; without the bodies pin, less every stretch that quotes the caller's
    /// body or headers.
    pub(crate) fn failed(&mut self, message: &str) {
        let Some(guard) = self.guard.take() else {
            return;
        };
        let mut row = self.end_row();
        row.error = match &self.not_recorded {
            Some(also) => self.error_field(&format!("{message}; {also}")),
            None => self.error_field(message),
        };
        guard.finish(row);
    }

    /// What every `error` this proxy writes becomes: clipped, and without the bodies pin less
    /// every stretch that quotes the caller's body or headers.
    fn error_field(&self, message: &str) -> String {
        if self.bodies {
            return clip_error(&redacted_text(self.rules.as_deref(), message));
        }
        let quoted = self
            .headers
            .iter()
            .filter(|(name, _)| !NOT_QUOTED_HEADERS.contains(&name.as_str()))
            .fold(Quoted::new().body(&self.body), |quoted, (_, value)| {
                quoted.header(value.as_bytes())
            });
        // What quotes the caller is replaced first, so the rules see what is left of it.
        redacted_text(self.rules.as_deref(), &redact_error(message, &quoted))
    }

    /// The caller went away (or stopped reading) before the call ended.
    pub(crate) fn cancelled(&mut self, why: &str) {
        let Some(guard) = self.guard.take() else {
            return;
        };
        let mut row = self.end_row();
        row.ended = Ended::Cancelled.as_str().to_owned();
        add_note(&mut row, why);
        guard.finish(row);
    }
}

/// `text` redacted by `rules`, when there are any.
fn redacted_text(rules: Option<&Rules>, text: &str) -> String {
    match rules {
        Some(rules) => rules.redact_text(text).0.into_owned(),
        None => text.to_owned(),
    }
}

/// Adds `sentence` to the row's `note`, after `; ` when it holds one already (a fork mode
/// call's divergence note stays beside what the end row says).
fn add_note(row: &mut Record, sentence: &str) {
    if !row.note.is_empty() {
        row.note.push_str("; ");
    }
    row.note.push_str(sentence);
}

/// Milliseconds rounded up, so a measured wait is never written as 0 ("not measured").
fn ceil_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros().div_ceil(1000)).unwrap_or(u64::MAX)
}
