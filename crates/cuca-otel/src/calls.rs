//! Call-log rows as traces: one trace per call, its `chat` span the root, and one child span per attempt.

use std::collections::HashMap;
use std::time::UNIX_EPOCH;

use cuca_calllog::Record;
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, Span};

use crate::conventions as c;
use crate::ids;
use crate::span::SpanBuilder;
use crate::ExportOptions;

/// The spans built from a call log's rows, and what the rows held.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct CallSpans {
    /// Per call sent: its span (the root of a trace of its own), then its attempts' spans.
    pub spans: Vec<Span>,
    /// Distinct run ids among the calls (`session.id` groups a run's traces when its calls
    /// name no node).
    pub n_runs: usize,
    /// Calls: attempts grouped by run, tag, node, model and consecutive attempt numbers.
    pub n_calls: usize,
    /// Calls sent as spans of their own.
    pub n_sent: usize,
    /// Attempts: start rows paired with their end rows by id, and lone end rows.
    pub n_attempts: usize,
    /// Calls not sent because an attempt's start row has no end row yet (in flight when the
    /// log was read): a span is sent once, final, since a backend that keeps the first copy
    /// of a span id would never show its end. The next export sends it.
    pub n_in_flight: usize,
    /// Calls not sent here because a session holds them: the session's span is the call's
    /// one span, with the call log's fields on it ([`crate::session_spans_with_calls`]).
    pub n_merged: usize,
    /// Attempts whose rows carry no readable timestamp, left out because a span needs a time.
    pub n_untimed: usize,
}

/// A call log's rows grouped into calls, ready to become spans ([`Calls::spans`]) and to be
/// matched with the session turns that recorded the same calls
/// ([`crate::session_spans_with_calls`]), so that a call in both is sent once.
#[derive(Debug)]
pub struct Calls<'a> {
    calls: Vec<CallEntry<'a>>,
    n_untimed: usize,
}

/// One call and whether a session turn claimed it.
#[derive(Debug)]
struct CallEntry<'a> {
    attempts: Vec<Attempt<'a>>,
    claimed: bool,
}

/// How far apart a session turn's times and a call-log call's times may be and still be one
/// call. The proxy writes both for one call, from one clock, milliseconds apart (the start row
/// as it forwards, the end row as the stream ends, the session's Latency from the same
/// start); five seconds leaves room for a loaded host, and the nearest candidate wins, with
/// the conversation length (`messages`) telling apart calls of one session seconds apart.
pub const MATCH_SLACK_MS: u64 = 5_000;

/// What a session turn says about its call, to find the same call in the call log.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallKey<'k> {
    /// The session id, which the proxy writes as the row's `node`.
    pub(crate) node: &'k str,
    /// The model asked for, from the turn's `CallRequest`.
    pub(crate) model: Option<&'k str>,
    /// The request's message count, from the turn's `CallRequest`.
    pub(crate) messages: Option<u64>,
    pub(crate) start_ms: u64,
    pub(crate) end_ms: u64,
}

/// A call-log call a session turn claimed: its rows, to put on the turn's span.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Claimed<'a> {
    first: &'a Record,
    last_start: Option<&'a Record>,
    last_end: Option<&'a Record>,
    n_attempts: usize,
}

impl Claimed<'_> {
    /// The call log's fields the session does not record, onto `span`: run, tag, node, the
    /// attempt's row id and status, the served model, time to first token and the usage
    /// extras. Token counts stay the session's own, so they are counted once.
    pub(crate) fn apply(&self, mut span: SpanBuilder) -> SpanBuilder {
        let last = self.last_end.unwrap_or(self.first);
        span = span
            .str_nonempty(c::CUCA_RUN, &self.first.run)
            .str_nonempty(c::CUCA_TAG, &self.first.tag)
            .str_nonempty(c::CUCA_NODE, &self.first.node)
            .str_nonempty(c::CUCA_CALL_LOG_ID, &last.id)
            .int(c::CUCA_ATTEMPTS, self.n_attempts as u64);
        if !span.has(c::GEN_AI_RESPONSE_MODEL) {
            span = span.str_nonempty(c::GEN_AI_RESPONSE_MODEL, &last.served);
        }
        if !span.has(c::GEN_AI_REQUEST_MAX_TOKENS) {
            span = span.int_nonzero(
                c::GEN_AI_REQUEST_MAX_TOKENS,
                self.last_start.map_or(0, |row| row.max_tokens),
            );
        }
        if let Some(end) = self.last_end {
            span = span.int_nonzero(c::HTTP_RESPONSE_STATUS_CODE, u64::from(end.status));
            if !span.has(c::GEN_AI_RESPONSE_FINISH_REASONS) && !end.finish.is_empty() {
                span = span.str_array(c::GEN_AI_RESPONSE_FINISH_REASONS, &[end.finish.as_str()]);
            }
            span = usage_extras(span, end);
        }
        span
    }
}

/// One attempt: its start row and its end row, where each was read.
#[derive(Debug)]
struct Attempt<'a> {
    start: Option<&'a Record>,
    end: Option<&'a Record>,
    /// The row that says most about the attempt: the end row, else the start row.
    row: &'a Record,
}

impl<'a> Attempt<'a> {
    fn row(&self) -> &'a Record {
        self.row
    }

    fn number(&self) -> u32 {
        self.row().attempt.max(1)
    }

    fn in_flight(&self) -> bool {
        self.end.is_none()
    }

    /// Start and end in milliseconds since the epoch: the start row's time, else the end
    /// row's time less its `ms`; the end row's time, else (in flight) the start.
    fn times_ms(&self) -> Option<(u64, u64)> {
        let end_ms = self.end.and_then(|row| parse_ms(&row.ts));
        let start_ms = self.start.and_then(|row| parse_ms(&row.ts)).or_else(|| {
            end_ms
                .zip(self.end)
                .map(|(at, row)| at.saturating_sub(row.ms))
        })?;
        Some((start_ms, end_ms.unwrap_or(start_ms)))
    }

    /// `(error.type, description)` for an attempt that did not bring an answer back.
    fn failure(&self) -> Option<(String, String)> {
        let row = self.end?;
        if row.status >= 400 {
            let message = if row.error.is_empty() {
                format!("HTTP {}", row.status)
            } else {
                row.error.clone()
            };
            return Some((row.status.to_string(), message));
        }
        if !row.error.is_empty() {
            let kind = if row.ended.is_empty() {
                "error".to_owned()
            } else {
                row.ended.clone()
            };
            return Some((kind, row.error.clone()));
        }
        if !row.ended.is_empty() {
            return Some((row.ended.clone(), format!("attempt ended: {}", row.ended)));
        }
        None
    }
}

/// Milliseconds since the epoch of an RFC 3339 row timestamp.
fn parse_ms(ts: &str) -> Option<u64> {
    let at = humantime::parse_rfc3339_weak(ts).ok()?;
    let since = at.duration_since(UNIX_EPOCH).ok()?;
    u64::try_from(since.as_millis()).ok()
}

/// Builds the spans of `rows` (as [`cuca_calllog::read_rows`] returns them, in file order):
/// [`Calls::new`] then [`Calls::spans`].
pub fn call_spans(rows: &[Record], options: &ExportOptions) -> CallSpans {
    Calls::new(rows, options).spans(options)
}

impl<'a> Calls<'a> {
    /// Groups `rows` (as [`cuca_calllog::read_rows`] returns them, in file order) into calls.
    ///
    /// Rows are paired into attempts by [`Record::id`]; an end row whose start row is not in
    /// `rows` (rotated away, or before [`ExportOptions::since_ms`]) still makes an attempt,
    /// timed back from its `ms`. Attempts become calls: attempt `n > 1` joins the latest call
    /// of the same run, tag, node and model whose last attempt is `n - 1` (the client numbers
    /// the attempts of one call's retry loop 1, 2, 3, and the rows carry no call id to say
    /// more).
    pub fn new(rows: &'a [Record], options: &ExportOptions) -> Calls<'a> {
        let rows: Vec<&Record> = rows
            .iter()
            .filter(|row| {
                options
                    .since_ms
                    .is_none_or(|since| parse_ms(&row.ts).is_some_and(|at| at >= since))
            })
            .collect();

        // Pair start and end rows by id, in order of first appearance.
        let mut attempts: Vec<Attempt<'_>> = Vec::new();
        let mut open_by_id: HashMap<&str, usize> = HashMap::new();
        for row in rows {
            if row.is_start() {
                let idx = attempts.len();
                attempts.push(Attempt {
                    start: Some(row),
                    end: None,
                    row,
                });
                if !row.id.is_empty() {
                    open_by_id.insert(row.id.as_str(), idx);
                }
            } else {
                match open_by_id.remove(row.id.as_str()) {
                    Some(idx) if !row.id.is_empty() => {
                        if let Some(attempt) = attempts.get_mut(idx) {
                            attempt.end = Some(row);
                            attempt.row = row;
                        }
                    }
                    _ => attempts.push(Attempt {
                        start: None,
                        end: Some(row),
                        row,
                    }),
                }
            }
        }

        // Group attempts into calls.
        let mut n_untimed = 0;
        let mut calls: Vec<Vec<Attempt<'_>>> = Vec::new();
        for attempt in attempts {
            if attempt.times_ms().is_none() {
                n_untimed += 1;
                continue;
            }
            let number = attempt.number();
            let row = attempt.row();
            let joins = (number > 1)
                .then(|| {
                    calls.iter().rposition(|call| {
                        call.last().is_some_and(|last| {
                            let prev = last.row();
                            last.number() + 1 == number
                                && prev.run == row.run
                                && prev.tag == row.tag
                                && prev.node == row.node
                                && prev.model == row.model
                        })
                    })
                })
                .flatten();
            match joins.and_then(|idx| calls.get_mut(idx)) {
                Some(call) => call.push(attempt),
                None => calls.push(vec![attempt]),
            }
        }
        Calls {
            calls: calls
                .into_iter()
                .map(|attempts| CallEntry {
                    attempts,
                    claimed: false,
                })
                .collect(),
            n_untimed,
        }
    }

    /// Calls in the log.
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// Whether the log holds no call.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Claims the unclaimed call nearest to `key`: the row's `node` is the session, the model
    /// and message count agree where both sides recorded them, and the start and end are
    /// within [`MATCH_SLACK_MS`] of the turn's (the end only when the call has ended).
    pub(crate) fn claim(&mut self, key: &CallKey<'_>) -> Option<Claimed<'a>> {
        let distance = |entry: &CallEntry<'a>| -> Option<u64> {
            let first = entry.attempts.first()?;
            let last = entry.attempts.last()?;
            let row = first.row();
            if entry.claimed || row.node != key.node {
                return None;
            }
            if let Some(model) = key.model.filter(|m| !m.is_empty()) {
                if !row.model.is_empty() && row.model != model {
                    return None;
                }
            }
            let messages = last.start.map_or(0, |start| start.messages);
            if let Some(wanted) = key.messages {
                if messages != 0 && messages != wanted {
                    return None;
                }
            }
            let (start_ms, end_ms) = call_times(&entry.attempts)?;
            let d_start = start_ms.abs_diff(key.start_ms);
            let d_end = if last.in_flight() {
                0
            } else {
                end_ms.abs_diff(key.end_ms)
            };
            (d_start <= MATCH_SLACK_MS && d_end <= MATCH_SLACK_MS).then_some(d_start + d_end)
        };
        let best = self
            .calls
            .iter()
            .enumerate()
            .filter_map(|(idx, entry)| distance(entry).map(|d| (d, idx)))
            .min()?
            .1;
        let entry = self.calls.get_mut(best)?;
        entry.claimed = true;
        let first = entry.attempts.first()?;
        let last = entry.attempts.last()?;
        Some(Claimed {
            first: first.row(),
            last_start: last.start,
            last_end: last.end,
            n_attempts: entry.attempts.len(),
        })
    }

    /// The spans of every call no session claimed and none of whose attempts is in flight.
    pub fn spans(&self, options: &ExportOptions) -> CallSpans {
        let mut report = CallSpans {
            n_untimed: self.n_untimed,
            ..CallSpans::default()
        };
        let mut runs: Vec<&str> = Vec::new();
        for entry in &self.calls {
            let call = &entry.attempts;
            report.n_calls += 1;
            report.n_attempts += call.len();
            let run = call.first().map_or("", |a| a.row().run.as_str());
            if !run.is_empty() && !runs.contains(&run) {
                runs.push(run);
            }
            if entry.claimed {
                report.n_merged += 1;
            } else if call.iter().any(Attempt::in_flight) {
                report.n_in_flight += 1;
            } else {
                report.n_sent += 1;
                push_call(&mut report.spans, call, options);
            }
        }
        report.n_runs = runs.len();
        report
    }
}

/// The first attempt's start and the last attempt's end.
fn call_times(call: &[Attempt<'_>]) -> Option<(u64, u64)> {
    let (start_ms, _) = call.first()?.times_ms()?;
    let end_ms = call
        .iter()
        .filter_map(|a| a.times_ms().map(|(_, end)| end))
        .max()?;
    Some((start_ms, end_ms))
}

/// The `session.id` of a call-log call: its node (the proxy writes the session there), else
/// its run; `None` for a call that names neither.
fn session_of(row: &Record) -> Option<&str> {
    [row.node.as_str(), row.run.as_str()]
        .into_iter()
        .find(|s| !s.is_empty())
}

/// Pushes one ended call's span (the root of its own trace) and its attempts' spans.
fn push_call(spans: &mut Vec<Span>, call: &[Attempt<'_>], options: &ExportOptions) {
    let (Some(first), Some(last), Some((start_ms, end_ms))) =
        (call.first(), call.last(), call_times(call))
    else {
        return;
    };
    let first_row = first.row();
    let last_row = last.row();
    let run = first_row.run.as_str();
    let first_id = first_row.id.as_str();
    let trace = ids::call_trace_id(run, first_id);
    let call_id = ids::call_span_id(run, first_id);
    let session = session_of(first_row);
    let model = if last_row.model.is_empty() {
        first_row.model.as_str()
    } else {
        last_row.model.as_str()
    };
    let name = if model.is_empty() {
        c::OPERATION_CHAT.to_owned()
    } else {
        format!("{} {model}", c::OPERATION_CHAT)
    };
    let mut span = SpanBuilder::new(trace, call_id, None, name, SpanKind::Client)
        .times_ms(start_ms, end_ms)
        .str(c::OPENINFERENCE_SPAN_KIND, c::KIND_LLM)
        .str(c::GEN_AI_OPERATION_NAME, c::OPERATION_CHAT);
    if let Some(session) = session {
        span = span.str(c::SESSION_ID, session);
    }
    if let Some(provider) = options.provider.as_deref() {
        span = span.str(c::GEN_AI_PROVIDER_NAME, provider);
        // The name before 1.37 is the old convention the opt-in asks not to send.
        if !crate::span::latest_from_env() {
            span = span.str(c::GEN_AI_SYSTEM, provider);
        }
    }
    let served = last_row.served.as_str();
    span = span
        .str_nonempty(c::GEN_AI_REQUEST_MODEL, model)
        .str_nonempty(c::GEN_AI_RESPONSE_MODEL, served)
        .str_nonempty(
            c::LLM_MODEL_NAME,
            if served.is_empty() { model } else { served },
        )
        // The request's shape is on the start row; the end row repeats only its identity.
        .int_nonzero(
            c::GEN_AI_REQUEST_MAX_TOKENS,
            last.start.or(first.start).map_or(0, |row| row.max_tokens),
        )
        .str_nonempty(c::CUCA_RUN, run)
        .str_nonempty(c::CUCA_TAG, &first_row.tag)
        .str_nonempty(c::CUCA_NODE, &first_row.node)
        .int(c::CUCA_ATTEMPTS, call.len() as u64);
    if let Some(end) = last.end {
        span = usage(span, end);
        if !end.finish.is_empty() {
            span = span.str_array(c::GEN_AI_RESPONSE_FINISH_REASONS, &[end.finish.as_str()]);
        }
    }
    if options.with_content {
        // What the root of a trace shows as its input and output: the bodies, where the log
        // kept them (its bodies pin).
        let request_body = last
            .start
            .map(|r| r.request_body.as_str())
            .filter(|b| !b.is_empty())
            .unwrap_or(last_row.request_body.as_str());
        if !request_body.is_empty() {
            span = span
                .str(c::INPUT_VALUE, request_body)
                .str(c::INPUT_MIME_TYPE, c::MIME_JSON);
        }
        if !last_row.response_body.is_empty() {
            span = span
                .str(c::OUTPUT_VALUE, last_row.response_body.as_str())
                .str(c::OUTPUT_MIME_TYPE, c::MIME_TEXT);
        }
    }
    span = match last.failure() {
        Some((kind, message)) => span.str(c::ERROR_TYPE, kind).error(message),
        None => span.ok(),
    };
    spans.push(span.build());

    for attempt in call {
        let Some((start_ms, end_ms)) = attempt.times_ms() else {
            continue;
        };
        let row = attempt.row();
        let number = attempt.number();
        let mut span = SpanBuilder::new(
            trace,
            ids::attempt_span_id(run, &row.id),
            Some(call_id),
            format!("attempt {number}"),
            SpanKind::Internal,
        )
        .times_ms(start_ms, end_ms)
        // One try on the wire is a step of the call, not a model call of its own: an `LLM`
        // kind would count the call's tokens twice in a backend that sums them per kind.
        .str(c::OPENINFERENCE_SPAN_KIND, c::KIND_CHAIN)
        .int(c::CUCA_ATTEMPT, u64::from(number))
        .str_nonempty(c::CUCA_ATTEMPT_ID, &row.id);
        if let Some(session) = session {
            span = span.str(c::SESSION_ID, session);
        }
        if let Some(end) = attempt.end {
            span = span
                .int_nonzero(c::HTTP_RESPONSE_STATUS_CODE, u64::from(end.status))
                .str_nonempty(c::CUCA_ENDED, &end.ended)
                .str_nonempty(c::CUCA_ERROR, &end.error)
                .int_nonzero(c::CUCA_TTFT_MS, end.ttft_ms)
                .str_nonempty(c::CUCA_EFFORT, &end.effort);
        }
        if options.with_content {
            // The bodies are in the log only under its bodies pin; they are sent only when
            // the export was asked for content as well.
            let request_body = attempt
                .start
                .map(|r| r.request_body.as_str())
                .filter(|b| !b.is_empty())
                .unwrap_or(row.request_body.as_str());
            span = span
                .str_nonempty(c::CUCA_REQUEST_BODY, request_body)
                .str_nonempty(c::CUCA_RESPONSE_BODY, &row.response_body);
        }
        span = match attempt.failure() {
            Some((kind, message)) => span.str(c::ERROR_TYPE, kind).error(message),
            None => span.ok(),
        };
        spans.push(span.build());
    }
}

/// The usage figures of an end row, each left off when the row left it off, in the GenAI
/// keys and in OpenInference's, which Phoenix sums per session and trace.
fn usage(span: SpanBuilder, end: &Record) -> SpanBuilder {
    let span = span
        .int_nonzero(c::GEN_AI_USAGE_INPUT_TOKENS, end.prompt_tokens)
        .int_nonzero(c::GEN_AI_USAGE_OUTPUT_TOKENS, end.completion_tokens);
    let span = crate::span::openinference_tokens(span, end.prompt_tokens, end.completion_tokens);
    usage_extras(span, end)
}

/// The call log's usage figures beyond the two token counts.
fn usage_extras(span: SpanBuilder, end: &Record) -> SpanBuilder {
    let mut span = span
        .int_nonzero(c::CUCA_USAGE_REASONING_TOKENS, end.reasoning_tokens)
        .int_nonzero(c::CUCA_USAGE_CACHED_TOKENS, end.cached_tokens)
        .int_nonzero(c::CUCA_TTFT_MS, end.ttft_ms)
        .str_nonempty(c::CUCA_EFFORT, &end.effort);
    if end.cost != 0.0 && end.cost.is_finite() {
        span = span.float(c::CUCA_COST, end.cost);
    }
    // The session's own `TokenDetail` wins where the call is in a session too: these fill
    // only what its span does not carry yet.
    if span.has(c::LLM_COST_TOTAL) || span.has(c::CUCA_COST_UNKNOWN) {
        return call_log_flags(span, end);
    }
    let mut counts = vec![
        (c::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, end.cached_tokens),
        (c::LLM_TOKEN_COUNT_PROMPT_CACHE_READ, end.cached_tokens),
        (
            c::GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
            end.cache_write_tokens,
        ),
        (
            c::LLM_TOKEN_COUNT_PROMPT_CACHE_WRITE,
            end.cache_write_tokens,
        ),
        (
            c::LLM_TOKEN_COUNT_COMPLETION_REASONING,
            end.reasoning_tokens,
        ),
    ];
    if crate::span::latest_from_env() {
        counts.push((
            c::GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
            end.reasoning_tokens,
        ));
    }
    for (key, value) in counts {
        if !span.has(key) {
            span = span.int_nonzero(key, value);
        }
    }
    if end.cost != 0.0 && end.cost.is_finite() {
        span = span.float(c::LLM_COST_TOTAL, end.cost);
        if !end.cost_source.is_empty() {
            span = span.str(c::CUCA_COST_PRICED_BY, end.cost_source.as_str());
        }
    } else if end.cost_source.starts_with("unknown") {
        span = span.str(c::CUCA_COST_UNKNOWN, end.cost_source.as_str());
    }
    call_log_flags(span, end)
}

/// The call log's flags that no record carries.
fn call_log_flags(mut span: SpanBuilder, end: &Record) -> SpanBuilder {
    if end.empty_at_ceiling {
        span = span.bool(c::CUCA_EMPTY_AT_CEILING, true);
    }
    span
}
