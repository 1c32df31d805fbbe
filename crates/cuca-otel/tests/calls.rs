//! A call log with retries, failures, a cancelled call and calls in flight, exported to a
//! loopback OTLP/HTTP receiver and checked span by span.

// Test helpers outside #[test] functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use cuca_calllog::{read_rows, CallLog, Record, PHASE_START};
use cuca_otel::opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use cuca_otel::opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use cuca_otel::opentelemetry_proto::tonic::trace::v1::Span;
use cuca_otel::{call_spans, ids, ExportOptions, Exporter, DEFAULT_REQUEST_TIMEOUT};

fn start(id: &str, run: &str, attempt: u32, ts: &str) -> Record {
    Record {
        ts: ts.into(),
        id: id.into(),
        run: run.into(),
        phase: PHASE_START.into(),
        tag: "turn".into(),
        model: "qwen3".into(),
        max_tokens: 256,
        messages: 3,
        stream: true,
        attempt,
        request_body: format!("{{\"request\":\"{id}\"}}"),
        ..Record::default()
    }
}

fn end(id: &str, run: &str, attempt: u32, ts: &str, ms: u64) -> Record {
    Record {
        ts: ts.into(),
        id: id.into(),
        run: run.into(),
        tag: "turn".into(),
        model: "qwen3".into(),
        attempt,
        ms,
        ..Record::default()
    }
}

/// Writes the log through the real writer: run `r1` has a call that failed with a 503 and
/// succeeded on its second attempt, a call cancelled by its caller, and a call in flight;
/// a call with no run id failed with a 400; and an attempt of run `r2` is in flight.
fn write_log(dir: &std::path::Path, bodies: bool) -> Vec<Record> {
    let path = dir.join("calls.jsonl");
    let log = CallLog::builder()
        .path(Some(path.clone()))
        .bodies(bodies)
        .build();
    log.append(start("aaaa0001", "r1", 1, "2026-11-30T10:00:00.000Z"));
    log.append(Record {
        status: 503,
        error: "model overloaded".into(),
        ..end("aaaa0001", "r1", 1, "2026-11-30T10:00:00.250Z", 250)
    });
    log.append(start("aaaa0002", "r1", 2, "2026-11-30T10:00:01.000Z"));
    log.append(start("cccc0001", "r1", 1, "2026-11-30T10:00:01.500Z"));
    log.append(Record {
        status: 200,
        served: "qwen3-8b-q4".into(),
        finish: "stop".into(),
        prompt_tokens: 40,
        completion_tokens: 12,
        reasoning_tokens: 5,
        ttft_ms: 90,
        response_body: "{\"answer\":\"noted\"}".into(),
        ..end("aaaa0002", "r1", 2, "2026-11-30T10:00:02.000Z", 1000)
    });
    log.append(Record {
        ended: "cancelled".into(),
        ..end("cccc0001", "r1", 1, "2026-11-30T10:00:03.000Z", 1500)
    });
    log.append(start("dddd0001", "r1", 1, "2026-11-30T10:00:04.000Z"));
    log.append(start("eeee0001", "", 1, "2026-11-30T10:00:05.000Z"));
    log.append(Record {
        status: 400,
        error: "context overflow".into(),
        ..end("eeee0001", "", 1, "2026-11-30T10:00:05.100Z", 100)
    });
    log.append(start("ffff0001", "r2", 1, "2026-11-30T10:00:06.000Z"));
    log.close();
    let report = read_rows(&path).unwrap();
    assert_eq!(report.rows.len(), 10);
    report.rows
}

async fn export(rows: &[Record], options: &ExportOptions) -> Vec<Span> {
    let (url, received) = start_receiver().await;
    let exporter = Exporter::new(&url, "cuca", DEFAULT_REQUEST_TIMEOUT).unwrap();
    let report = call_spans(rows, options);
    assert_eq!(report.n_runs, 2);
    assert_eq!(report.n_calls, 5);
    assert_eq!(report.n_attempts, 6);
    // An export skips in-flight calls and says so, and a re-export updates them: the two
    // calls in flight are counted, not sent.
    assert_eq!(report.n_in_flight, 2);
    assert_eq!(report.n_sent, 3);
    exporter.send(report.spans).await.unwrap();
    received.spans()
}

fn named<'a>(spans: &'a [Span], name: &str, attempt_id: Option<&str>) -> &'a Span {
    spans
        .iter()
        .find(|s| {
            s.name == name
                && attempt_id.is_none_or(|id| {
                    s.attributes
                        .iter()
                        .any(|kv| kv.key == "cuca.attempt.id" && format!("{kv:?}").contains(id))
                })
        })
        .unwrap_or_else(|| panic!("no span {name} {attempt_id:?}"))
}

const MS: u64 = 1_000_000;
/// 2026-11-30T10:00:00Z in milliseconds since the epoch.
const T0: u64 = 1_796_032_800_000;

#[tokio::test]
async fn calls_become_spans_with_attempts_as_children() {
    // One span per model call (its attempts as child spans), with the OpenTelemetry GenAI
    // semantic conventions, error type and status, and timings.
    let dir = tempfile::tempdir().unwrap();
    let rows = write_log(dir.path(), false);
    let spans = export(&rows, &ExportOptions::default()).await;
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "chat qwen3",
            "attempt 1",
            "attempt 2",
            "chat qwen3",
            "attempt 1",
            "chat qwen3",
            "attempt 1",
        ]
    );

    // The retried call: a CLIENT span, the root of a trace of its own (as a natively traced
    // call is), its attempts under it; the run groups its calls as one session.
    let call = &spans[0];
    assert_eq!(call.kind, SpanKind::Client as i32);
    assert_eq!(call.trace_id, ids::call_trace_id("r1", "aaaa0001").to_vec());
    assert!(call.parent_span_id.is_empty());
    assert_eq!(str_attr(call, "openinference.span.kind"), "LLM");
    assert_eq!(str_attr(call, "session.id"), "r1");
    assert_eq!(int_attr(call, "llm.token_count.prompt"), 40);
    assert_eq!(int_attr(call, "llm.token_count.completion"), 12);
    assert_eq!(call.span_id, ids::call_span_id("r1", "aaaa0001").to_vec());
    assert_eq!(str_attr(call, "gen_ai.operation.name"), "chat");
    assert_eq!(str_attr(call, "gen_ai.request.model"), "qwen3");
    assert_eq!(str_attr(call, "gen_ai.response.model"), "qwen3-8b-q4");
    assert_eq!(int_attr(call, "gen_ai.request.max_tokens"), 256);
    assert_eq!(int_attr(call, "gen_ai.usage.input_tokens"), 40);
    assert_eq!(int_attr(call, "gen_ai.usage.output_tokens"), 12);
    assert_eq!(int_attr(call, "cuca.usage.reasoning_tokens"), 5);
    assert_eq!(
        str_array_attr(call, "gen_ai.response.finish_reasons"),
        ["stop"]
    );
    assert_eq!(int_attr(call, "cuca.attempts"), 2);
    assert_eq!(str_attr(call, "cuca.run"), "r1");
    assert_eq!(str_attr(call, "cuca.tag"), "turn");
    assert!(!has(call, "error.type"), "the call succeeded on its retry");
    // A call span's status is OK, as a native one is, never UNSET.
    assert_eq!(call.status.as_ref().unwrap().code, StatusCode::Ok as i32);
    assert_eq!(call.start_time_unix_nano, T0 * MS);
    assert_eq!(call.end_time_unix_nano, (T0 + 2_000) * MS);

    let failed = &spans[1];
    assert_eq!(failed.parent_span_id, call.span_id);
    assert_eq!(str_attr(failed, "openinference.span.kind"), "CHAIN");
    assert_eq!(str_attr(failed, "session.id"), "r1");
    assert!(
        !has(failed, "llm.token_count.prompt"),
        "tokens counted once"
    );
    assert_eq!(failed.trace_id, call.trace_id);
    assert_eq!(
        failed.span_id,
        ids::attempt_span_id("r1", "aaaa0001").to_vec()
    );
    assert_eq!(str_attr(failed, "error.type"), "503");
    assert_eq!(int_attr(failed, "http.response.status_code"), 503);
    let status = failed.status.as_ref().unwrap();
    assert_eq!(status.code, StatusCode::Error as i32);
    assert_eq!(status.message, "model overloaded");
    assert_eq!(
        failed.end_time_unix_nano - failed.start_time_unix_nano,
        250 * MS
    );
    let retried = &spans[2];
    assert_eq!(retried.parent_span_id, call.span_id);
    assert_eq!(int_attr(retried, "cuca.attempt"), 2);
    assert_eq!(int_attr(retried, "http.response.status_code"), 200);
    assert_eq!(int_attr(retried, "cuca.ttft_ms"), 90);
    assert!(!has(retried, "error.type"));
    assert_eq!(retried.status.as_ref().unwrap().code, StatusCode::Ok as i32);

    // The cancelled call: its error type is the word the log closed it with.
    let cancelled = &spans[3];
    assert_eq!(
        cancelled.span_id,
        ids::call_span_id("r1", "cccc0001").to_vec()
    );
    assert_eq!(str_attr(cancelled, "error.type"), "cancelled");
    assert_eq!(
        cancelled.status.as_ref().unwrap().code,
        StatusCode::Error as i32
    );
    assert_eq!(str_attr(&spans[4], "cuca.ended"), "cancelled");

    // The calls in flight (dddd0001 of r1, ffff0001 of r2) are not sent: a backend that
    // keeps the first copy of a span id would show them zero-length and token-less forever.
    for id in ["dddd0001", "ffff0001"] {
        assert!(
            spans
                .iter()
                .all(|s| !format!("{:?}", s.attributes).contains(id)),
            "{id} is in flight and must not be sent"
        );
    }

    // The call with no run: a trace of its own, no parent, no session to group it in.
    let lone = &spans[5];
    assert_eq!(lone.trace_id, ids::call_trace_id("", "eeee0001").to_vec());
    assert!(lone.parent_span_id.is_empty());
    assert!(!has(lone, "session.id"));
    assert_eq!(str_attr(lone, "error.type"), "400");
    assert_eq!(lone.status.as_ref().unwrap().message, "context overflow");

    // No provider is in a row, so none is sent unless named.
    assert!(spans.iter().all(|s| !has(s, "gen_ai.provider.name")));
}

#[tokio::test]
async fn bodies_are_sent_only_with_content_asked_and_the_pin_on() {
    let dir = tempfile::tempdir().unwrap();
    let rows = write_log(dir.path(), true);
    let plain = export(&rows, &ExportOptions::default()).await;
    assert!(plain
        .iter()
        .all(|s| !has(s, "cuca.request.body") && !has(s, "cuca.response.body")));
    let with = ExportOptions {
        with_content: true,
        provider: Some("openai".into()),
        ..ExportOptions::default()
    };
    let spans = export(&rows, &with).await;
    let retried = named(&spans, "attempt 2", None);
    assert_eq!(
        str_attr(retried, "cuca.request.body"),
        "{\"request\":\"aaaa0002\"}"
    );
    assert_eq!(
        str_attr(retried, "cuca.response.body"),
        "{\"answer\":\"noted\"}"
    );
    let call = named(&spans, "chat qwen3", None);
    assert_eq!(str_attr(call, "gen_ai.provider.name"), "openai");
    // The root of the call's trace shows what went and came back, as a native one does.
    assert_eq!(str_attr(call, "input.value"), "{\"request\":\"aaaa0002\"}");
    assert_eq!(str_attr(call, "output.value"), "{\"answer\":\"noted\"}");

    // Without the pin the writer dropped the bodies: content asked for finds none.
    let dir = tempfile::tempdir().unwrap();
    let rows = write_log(dir.path(), false);
    let spans = export(&rows, &with).await;
    assert!(spans.iter().all(|s| !has(s, "cuca.request.body")));
}

#[tokio::test]
async fn the_same_log_exports_the_same_ids_and_since_keeps_late_rows() {
    let dir = tempfile::tempdir().unwrap();
    let rows = write_log(dir.path(), false);
    let once = call_spans(&rows, &ExportOptions::default()).spans;
    let twice = call_spans(&rows, &ExportOptions::default()).spans;
    assert_eq!(once, twice);

    // --since after the first attempt's end: the retry's end row is kept, its start row too,
    // and the 503 attempt is gone, so the call is one attempt named by aaaa0002.
    let since = ExportOptions {
        since_ms: Some(T0 + 500),
        ..ExportOptions::default()
    };
    let report = call_spans(&rows, &since);
    assert_eq!(report.n_attempts, 5);
    let retry = report
        .spans
        .iter()
        .find(|s| s.span_id == ids::call_span_id("r1", "aaaa0002").to_vec())
        .expect("the retry is a call of its own once its first attempt is cut off");
    assert_eq!(int_attr(retry, "cuca.attempts"), 1);

    // An end row whose start row is gone is timed back from its `ms`.
    let only_end: Vec<Record> = rows
        .iter()
        .filter(|r| r.id == "aaaa0002" && !r.is_start())
        .cloned()
        .collect();
    let report = call_spans(&only_end, &ExportOptions::default());
    assert_eq!(report.n_attempts, 1);
    let attempt = report.spans.last().unwrap();
    assert_eq!(attempt.name, "attempt 2");
    assert_eq!(attempt.start_time_unix_nano, (T0 + 1_000) * MS);
    assert_eq!(attempt.end_time_unix_nano, (T0 + 2_000) * MS);
}
