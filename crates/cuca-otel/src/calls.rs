//! Call-log rows as traces: one trace per run, a root span, one `chat` span per call and one child span per attempt.

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
    /// Per run: its root span, then each call's span followed by its attempts' spans.
    pub spans: Vec<Span>,
    /// Runs (traces with a root span); calls with no run id get a trace each and no root.
    pub n_runs: usize,
    /// Calls: attempts grouped by run, tag, node, model and consecutive attempt numbers.
    pub n_calls: usize,
    /// Attempts: start rows paired with their end rows by id, and lone end rows.
    pub n_attempts: usize,
    /// Attempts whose start row has no end row (in flight when the log was read).
    pub n_in_flight: usize,
    /// Attempts whose rows carry no readable timestamp, left out because a span needs a time.
    pub n_untimed: usize,
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

/// Builds the spans of `rows` (as [`cuca_calllog::read_rows`] returns them, in file order).
///
/// Rows are paired into attempts by [`Record::id`]; an end row whose start row is not in
/// `rows` (rotated away, or before [`ExportOptions::since_ms`]) still makes an attempt, timed
/// back from its `ms`. Attempts become calls: attempt `n > 1` joins the latest call of the
/// same run, tag, node and model whose last attempt is `n - 1` (the client numbers the
/// attempts of one call's retry loop 1, 2, 3, and the rows carry no call id to say more).
pub fn call_spans(rows: &[Record], options: &ExportOptions) -> CallSpans {
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
    let mut report = CallSpans::default();
    let mut calls: Vec<Vec<Attempt<'_>>> = Vec::new();
    for attempt in attempts {
        if attempt.times_ms().is_none() {
            report.n_untimed += 1;
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

    // One root span per run, spanning its calls.
    let mut runs: Vec<(&str, u64, u64)> = Vec::new();
    for call in &calls {
        let Some((start_ms, end_ms)) = call_times(call) else {
            continue;
        };
        let run = call.first().map_or("", |a| a.row().run.as_str());
        if run.is_empty() {
            continue;
        }
        match runs.iter_mut().find(|(name, _, _)| *name == run) {
            Some((_, first, last)) => {
                *first = (*first).min(start_ms);
                *last = (*last).max(end_ms);
            }
            None => runs.push((run, start_ms, end_ms)),
        }
    }
    for (run, start_ms, end_ms) in &runs {
        report.spans.push(
            SpanBuilder::new(
                ids::run_trace_id(run),
                ids::run_root_span_id(run),
                None,
                format!("run {run}"),
                SpanKind::Internal,
            )
            .times_ms(*start_ms, *end_ms)
            .str(c::CUCA_RUN, *run)
            .build(),
        );
    }
    report.n_runs = runs.len();

    for call in &calls {
        report.n_calls += 1;
        report.n_attempts += call.len();
        report.n_in_flight += call.iter().filter(|a| a.in_flight()).count();
        push_call(&mut report.spans, call, options);
    }
    report
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

/// Pushes one call's span and its attempts' spans.
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
    let (trace, parent) = if run.is_empty() {
        (ids::lone_call_trace_id(first_id), None)
    } else {
        (ids::run_trace_id(run), Some(ids::run_root_span_id(run)))
    };
    let call_id = ids::call_span_id(run, first_id);
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
    let mut span = SpanBuilder::new(trace, call_id, parent, name, SpanKind::Client)
        .times_ms(start_ms, end_ms)
        .str(c::GEN_AI_OPERATION_NAME, c::OPERATION_CHAT);
    if let Some(provider) = options.provider.as_deref() {
        span = span
            .str(c::GEN_AI_PROVIDER_NAME, provider)
            .str(c::GEN_AI_SYSTEM, provider);
    }
    span = span
        .str_nonempty(c::GEN_AI_REQUEST_MODEL, model)
        .str_nonempty(c::GEN_AI_RESPONSE_MODEL, &last_row.served)
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
    if last.in_flight() {
        span = span.bool(c::CUCA_IN_FLIGHT, true);
    } else if let Some((kind, message)) = last.failure() {
        span = span.str(c::ERROR_TYPE, kind).error(message);
    }
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
        .int(c::CUCA_ATTEMPT, u64::from(number))
        .str_nonempty(c::CUCA_ATTEMPT_ID, &row.id);
        if let Some(end) = attempt.end {
            span = span
                .int_nonzero(c::HTTP_RESPONSE_STATUS_CODE, u64::from(end.status))
                .str_nonempty(c::CUCA_ENDED, &end.ended)
                .str_nonempty(c::CUCA_ERROR, &end.error)
                .int_nonzero(c::CUCA_TTFT_MS, end.ttft_ms)
                .str_nonempty(c::CUCA_EFFORT, &end.effort);
        }
        if attempt.in_flight() {
            span = span.bool(c::CUCA_IN_FLIGHT, true);
        } else if let Some((kind, message)) = attempt.failure() {
            span = span.str(c::ERROR_TYPE, kind).error(message);
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
        spans.push(span.build());
    }
}

/// The usage figures of an end row, each left off when the row left it off.
fn usage(span: SpanBuilder, end: &Record) -> SpanBuilder {
    let mut span = span
        .int_nonzero(c::GEN_AI_USAGE_INPUT_TOKENS, end.prompt_tokens)
        .int_nonzero(c::GEN_AI_USAGE_OUTPUT_TOKENS, end.completion_tokens)
        .int_nonzero(c::CUCA_USAGE_REASONING_TOKENS, end.reasoning_tokens)
        .int_nonzero(c::CUCA_USAGE_CACHED_TOKENS, end.cached_tokens)
        .int_nonzero(c::CUCA_TTFT_MS, end.ttft_ms)
        .str_nonempty(c::CUCA_EFFORT, &end.effort);
    if end.cost != 0.0 && end.cost.is_finite() {
        span = span.float(c::CUCA_COST, end.cost);
    }
    if end.empty_at_ceiling {
        span = span.bool(c::CUCA_EMPTY_AT_CEILING, true);
    }
    span
}
