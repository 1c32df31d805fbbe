//! `cuca export-otlp` against a loopback OTLP/HTTP receiver the test starts: the committed
//! fixture sessions arrive as decoded `opentelemetry-proto` spans.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Read;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use axum::Router;
use common::{cuca, fixtures_dir};
use cuca::otel::opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

type Received = Arc<Mutex<Vec<ExportTraceServiceRequest>>>;

async fn traces(State(received): State<Received>, body: Bytes) -> &'static str {
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(body.as_ref())
        .read_to_end(&mut plain)
        .unwrap();
    received
        .lock()
        .unwrap()
        .push(ExportTraceServiceRequest::decode(plain.as_slice()).unwrap());
    ""
}

async fn receiver() -> (String, Received) {
    let received = Received::default();
    let app = Router::new()
        .route("/v1/traces", post(traces))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_otlp_sends_the_fixture_sessions_as_traces() {
    let (url, received) = receiver().await;
    let dir = fixtures_dir();
    let output = tokio::task::spawn_blocking(move || {
        cuca()
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .args(["export-otlp", "--endpoint", &url, "--json", "--sessions"])
            .arg(&dir)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["sessions"], 2);
    assert_eq!(summary["turns"], 3);
    assert_eq!(summary["spans"], 3);
    assert_eq!(summary["with_content"], false);

    let requests = received.lock().unwrap();
    let names: Vec<String> = requests
        .iter()
        .flat_map(|r| &r.resource_spans)
        .flat_map(|rs| &rs.scope_spans)
        .flat_map(|ss| &ss.spans)
        .map(|s| s.name.clone())
        .collect();
    // A trace per model call, as a natively traced agent's.
    assert_eq!(names, ["chat", "chat", "chat"]);
}

#[test]
fn export_otlp_with_nothing_to_export_is_a_usage_error() {
    let output = cuca()
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .args(["export-otlp", "--endpoint", "http://127.0.0.1:4318"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--sessions DIR, --calls FILE"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_otlp_sends_a_call_log_with_a_call_in_flight() {
    use cuca::calllog::{CallLog, Record, PHASE_START};
    let (url, received) = receiver().await;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    let log = CallLog::builder().path(Some(path.clone())).build();
    let row = |id: &str, phase: &str, ts: &str| Record {
        id: id.into(),
        run: "r1".into(),
        model: "qwen3".into(),
        phase: phase.into(),
        ts: ts.into(),
        attempt: 1,
        ..Record::default()
    };
    log.append(row("a1", PHASE_START, "2026-11-30T10:00:00.000Z"));
    log.append(Record {
        status: 200,
        finish: "stop".into(),
        ..row("a1", "", "2026-11-30T10:00:01.000Z")
    });
    log.append(row("b1", PHASE_START, "2026-11-30T10:00:02.000Z"));
    log.close();
    let (url2, path2) = (url.clone(), path.clone());
    let output = tokio::task::spawn_blocking(move || {
        cuca()
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .args(["export-otlp", "--endpoint", &url, "--json", "--calls"])
            .arg(&path)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["runs"], 1);
    assert_eq!(summary["calls"], 2);
    assert_eq!(summary["in_flight"], 1);
    // The ended call and its attempt; the call in flight waits for an export after it ends.
    assert_eq!(summary["calls_sent"], 1);
    assert_eq!(summary["spans"], 2);
    let n: usize = received
        .lock()
        .unwrap()
        .iter()
        .flat_map(|r| &r.resource_spans)
        .flat_map(|rs| &rs.scope_spans)
        .map(|ss| ss.spans.len())
        .sum();
    assert_eq!(n, 2);

    // The CLI prints what it sent, what it skipped and why.
    let output = tokio::task::spawn_blocking(move || {
        cuca()
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .args(["export-otlp", "--endpoint", &url2, "--calls"])
            .arg(&path2)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success());
    assert!(
        stdout.contains("1 runs, 2 calls, 2 attempts: 1 sent")
            && stdout.contains("not sent: 1 in flight (sent by an export after they end)")
            && stdout.contains("sent 2 spans in 1 requests")
            && stdout.contains("project cuca"),
        "{stdout}"
    );
}

// ---------------------------------------------------------------------------------------
// An OpenTelemetry export that looks right in Phoenix (answers, one span per call, forks
// and re-exports), end to end through `cuca export-otlp`, decoded with
// `opentelemetry-proto`.

use cuca::otel::opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use cuca::otel::opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use cuca::otel::opentelemetry_proto::tonic::trace::v1::Span;
use cuca::{FileBackend, SessionBackend, SessionEvent, SessionRecord};

fn value<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn text<'a>(span: &'a Span, key: &str) -> Option<&'a str> {
    match value(&span.attributes, key) {
        Some(any_value::Value::StringValue(s)) => Some(s),
        _ => None,
    }
}

fn int(span: &Span, key: &str) -> Option<i64> {
    match value(&span.attributes, key) {
        Some(any_value::Value::IntValue(i)) => Some(*i),
        _ => None,
    }
}

/// The records of one call of `session` from `first` on: a user message, optional call
/// metadata, a streamed answer of `tokens`, and its closing pair (or none, in flight), each
/// record 10 ms after the last from `t0`.
fn call_records(
    session: &str,
    first: u64,
    t0: u64,
    question: &str,
    tokens: &[&str],
    metadata: Option<(&str, u64, &str)>,
    closed: bool,
) -> Vec<SessionRecord> {
    let mut events = vec![SessionEvent::Message(cuca::Message::user(question))];
    if let Some((model, messages, _)) = metadata {
        events.push(SessionEvent::CallRequest {
            model: model.into(),
            parameters: r#"{"max_tokens":12}"#.into(),
            tools: "[]".into(),
            messages,
        });
    }
    events.extend(
        tokens
            .iter()
            .map(|t| SessionEvent::Output { text: (*t).into() }),
    );
    if closed {
        if let Some((model, _, finish)) = metadata {
            events.push(SessionEvent::CallFinish {
                finish_reason: Some(finish.into()),
                model: format!("{model}-q4"),
            });
        }
        events.push(SessionEvent::Latency { duration_ms: 300 });
        events.push(SessionEvent::TokenUsage {
            prompt_tokens: 20 + first,
            completion_tokens: tokens.len() as u64,
        });
    }
    events
        .into_iter()
        .enumerate()
        .map(|(i, event)| SessionRecord {
            session_id: session.into(),
            sequence: first + i as u64,
            timestamp_ms: t0 + i as u64 * 10,
            event,
        })
        .collect()
}

fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
        .to_string()
}

/// 2026-11-30T10:00:00Z in milliseconds since the epoch.
const T0: u64 = 1_796_032_800_000;

/// Runs `cuca export-otlp` with `args` against `url`; its JSON summary.
async fn export_otlp(url: &str, args: Vec<std::ffi::OsString>) -> serde_json::Value {
    let url = url.to_owned();
    let output = tokio::task::spawn_blocking(move || {
        cuca()
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .args(["export-otlp", "--endpoint", &url, "--json"])
            .args(args)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn spans_of(requests: &[ExportTraceServiceRequest]) -> Vec<Span> {
    requests
        .iter()
        .flat_map(|r| &r.resource_spans)
        .flat_map(|rs| &rs.scope_spans)
        .flat_map(|ss| ss.spans.iter().cloned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_looks_right_in_phoenix_answers_one_span_per_call_forks_and_re_exports() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["demo.cslog", "reasoning.cslog"] {
        std::fs::copy(fixtures_dir().join(name), dir.join(name)).unwrap();
    }
    let file = FileBackend::new(&dir).unwrap();
    let append = |records: &[SessionRecord]| {
        for record in records {
            file.append(record.clone()).unwrap();
        }
    };
    // The fixture's demo: two calls. A fork after its first call, which makes a call of its
    // own; a fork of that fork cut mid-call and never continued; and a fork of the fork after
    // its call, which makes one more.
    let demo = file.replay("demo").unwrap();
    let first_end = demo
        .iter()
        .find(|r| matches!(r.event, SessionEvent::TokenUsage { .. }))
        .unwrap()
        .sequence;
    let demo_last = demo.last().unwrap().sequence;
    let fork = file.fork("demo", &format!("demo:{first_end}")).unwrap();
    let at = demo_last + 1;
    append(&call_records(
        &fork,
        at,
        T0,
        "And the key?",
        &["Under", " the", " mat"],
        None,
        true,
    ));
    let cut = file.fork(&fork, &format!("{fork}:{}", at + 1)).unwrap();
    let fork_end = at + 5;
    let twice = file.fork(&fork, &format!("{fork}:{fork_end}")).unwrap();
    append(&call_records(
        &twice,
        fork_end + 1,
        T0 + 1_000,
        "And the door?",
        &["Red"],
        None,
        true,
    ));
    // A proxy session with call metadata: two ended calls and one in flight.
    let proxied = "proxied";
    append(&call_records(
        proxied,
        0,
        T0 + 10_000,
        "one",
        &["o", "ne"],
        Some(("tiny", 1, "stop")),
        true,
    ));
    append(&call_records(
        proxied,
        7,
        T0 + 20_000,
        "two",
        &["t", "wo"],
        Some(("tiny", 3, "length")),
        true,
    ));
    let in_flight = call_records(
        proxied,
        14,
        T0 + 30_000,
        "three",
        &["thr"],
        Some(("tiny", 5, "stop")),
        true,
    );
    append(&in_flight[..3]);
    drop(file);

    // The call log the proxy wrote for the same calls (node = the session), plus a batch
    // call of another run that no session holds, and the third call still in flight.
    let calls = tmp.path().join("calls.jsonl");
    let log = cuca::calllog::CallLog::builder()
        .path(Some(calls.clone()))
        .build();
    let row = |id: &str, node: &str, phase: &str, ts: u64, messages: u64| cuca::calllog::Record {
        ts: rfc3339(ts),
        id: id.into(),
        run: if node.is_empty() {
            "batch".into()
        } else {
            "proxy-run".into()
        },
        node: node.into(),
        tag: "proxy".into(),
        model: "tiny".into(),
        phase: phase.into(),
        attempt: 1,
        messages,
        ..cuca::calllog::Record::default()
    };
    let done = |id: &str, node: &str, ts: u64| cuca::calllog::Record {
        status: 200,
        finish: "stop".into(),
        prompt_tokens: 99,
        completion_tokens: 9,
        ms: 300,
        ..row(id, node, "", ts, 0)
    };
    let start = cuca::calllog::PHASE_START;
    // Each proxied call closes 50 ms after its first record (5 records, 10 ms apart) and
    // took 300 ms.
    log.append(row("p1", proxied, start, T0 + 10_050 - 300, 1));
    log.append(done("p1", proxied, T0 + 10_050));
    log.append(row("p2", proxied, start, T0 + 20_050 - 300, 3));
    log.append(done("p2", proxied, T0 + 20_050));
    log.append(row("b1", "", start, T0 + 40_000, 2));
    log.append(done("b1", "", T0 + 40_300));
    log.append(row("p3", proxied, start, T0 + 30_000, 5));
    log.close();

    let (url, received) = receiver().await;
    let args = || -> Vec<std::ffi::OsString> {
        vec![
            "--with-content".into(),
            "--project".into(),
            "cuca-e2e".into(),
            "--sessions".into(),
            dir.clone().into(),
            "--calls".into(),
            calls.clone().into(),
        ]
    };
    let summary = export_otlp(&url, args()).await;
    // What was sent, skipped and why.
    assert_eq!(summary["project"], "cuca-e2e");
    assert_eq!(summary["turns_in_flight"], 1, "{summary}");
    assert_eq!(summary["in_flight"], 1, "{summary}");
    assert_eq!(summary["cut_off"], 1, "{summary}");
    assert_eq!(summary["merged"], 2, "{summary}");
    // demo (2) + reasoning (1) + the fork's own (1) + the fork of the fork's own (1) +
    // proxied (2); the batch call and its attempt.
    assert_eq!(summary["turns_sent"], 7, "{summary}");
    assert_eq!(summary["calls_sent"], 1, "{summary}");
    assert_eq!(summary["spans"], 9, "{summary}");

    let requests = received.lock().unwrap().clone();
    // "a way to name the project".
    for request in &requests {
        let resource = request.resource_spans[0].resource.as_ref().unwrap();
        assert!(matches!(
            value(&resource.attributes, "openinference.project.name"),
            Some(any_value::Value::StringValue(p)) if p == "cuca-e2e"
        ));
    }
    let spans = spans_of(&requests);
    assert_eq!(spans.len(), 9);
    let llm: Vec<&Span> = spans
        .iter()
        .filter(|s| text(s, "openinference.span.kind") == Some("LLM"))
        .collect();
    assert_eq!(llm.len(), 8, "one LLM span per call made");
    for span in &spans {
        // "`session.id` so a session's traces group in Phoenix's Sessions tab".
        assert!(
            text(span, "session.id").is_some(),
            "{} has no session.id",
            span.name
        );
        // "call spans OK when they ended well": every call here did.
        assert_eq!(
            span.status.as_ref().map(|s| s.code),
            Some(StatusCode::Ok as i32),
            "{}",
            span.name
        );
        assert!(span.end_time_unix_nano >= span.start_time_unix_nano);
    }
    for span in &llm {
        assert!(
            span.parent_span_id.is_empty(),
            "a call is the root of its trace"
        );
        let session = text(span, "session.id").unwrap_or("");
        if session == "batch" {
            // A call-log call with no bodies recorded has no content to show.
            continue;
        }
        // Input and output shown on the trace's root (content was asked for).
        assert!(
            text(span, "input.value").is_some_and(|v| !v.is_empty()),
            "{session}"
        );
        assert!(text(span, "output.value").is_some());
        // "answer present with finish reason", "one joined text part".
        let output: serde_json::Value =
            serde_json::from_str(text(span, "gen_ai.output.messages").unwrap()).unwrap();
        assert!(
            output[0]["finish_reason"].is_string(),
            "{}: {output}",
            span.name
        );
        let parts = output[0]["parts"].as_array().unwrap();
        assert!(
            parts.iter().filter(|p| p["type"] == "text").count() <= 1,
            "{session}: one joined text part, not one per token: {parts:?}"
        );
        // "no span longer than its turn": the call's recorded Latency, ending at its own
        // closing record, whatever audit records came after it.
        assert_eq!(
            (span.end_time_unix_nano - span.start_time_unix_nano) / 1_000_000,
            int(span, "cuca.duration_ms").unwrap() as u64,
            "{session}"
        );
    }
    let of = |session: &str| -> Vec<&Span> {
        llm.iter()
            .copied()
            .filter(|s| text(s, "session.id") == Some(session))
            .collect()
    };
    // "one span per call when session+call log overlap": the proxied calls are the
    // session's spans, with the call log's row on them, tokens the session's, once.
    let proxied_spans = of(proxied);
    assert_eq!(proxied_spans.len(), 2);
    let ids: Vec<&str> = proxied_spans
        .iter()
        .map(|s| text(s, "cuca.call_log.id").unwrap())
        .collect();
    assert_eq!(ids, ["p1", "p2"]);
    let prompt: i64 = proxied_spans
        .iter()
        .map(|s| int(s, "llm.token_count.prompt").unwrap())
        .sum();
    assert_eq!(
        prompt,
        20 + 27,
        "the session's counts, not the call log's 99s"
    );
    let answer: serde_json::Value =
        serde_json::from_str(text(proxied_spans[1], "gen_ai.output.messages").unwrap()).unwrap();
    assert_eq!(
        answer[0]["finish_reason"], "length",
        "the recorded CallFinish"
    );
    assert_eq!(
        answer[0]["parts"],
        serde_json::json!([{"type": "text", "content": "two"}])
    );
    assert_eq!(text(proxied_spans[1], "output.value"), Some("two"));
    // "no inherited or cut-off calls from a fork of a fork".
    assert_eq!(of("demo").len(), 2);
    assert_eq!(of(&fork).len(), 1);
    assert!(of(&cut).is_empty());
    let own = of(&twice);
    assert_eq!(own.len(), 1);
    assert_eq!(
        own[0].links.len(),
        2,
        "demo's first call and the fork's call"
    );
    for link in &own[0].links {
        assert!(
            spans
                .iter()
                .any(|s| s.span_id == link.span_id && s.trace_id == link.trace_id),
            "a link resolves to a span the export sent"
        );
    }
    // The batch call no session holds is a trace of its own, with its attempt.
    let batch: Vec<&Span> = spans
        .iter()
        .filter(|s| text(s, "session.id") == Some("batch"))
        .collect();
    assert_eq!(batch.len(), 2);
    assert_eq!(text(batch[1], "openinference.span.kind"), Some("CHAIN"));

    // "re-exporting after a session grows shows the growth": the call in flight ends (in
    // the session and in the call log), and the next export sends it, while every span
    // already sent is sent again unchanged, so a backend that keeps the first copy of a
    // span id holds the same, right, spans.
    {
        let file = FileBackend::new(&dir).unwrap();
        for record in &in_flight[3..] {
            file.append(record.clone()).unwrap();
        }
    }
    let log = cuca::calllog::CallLog::builder()
        .path(Some(calls.clone()))
        .build();
    log.append(done("p3", proxied, T0 + 30_000 + 60));
    log.close();
    received.lock().unwrap().clear();
    let again = export_otlp(&url, args()).await;
    assert_eq!(again["turns_in_flight"], 0, "{again}");
    assert_eq!(again["in_flight"], 0, "{again}");
    assert_eq!(again["merged"], 3, "{again}");
    let resent = spans_of(&received.lock().unwrap());
    assert_eq!(resent.len(), 10);
    for span in &spans {
        let same = resent.iter().find(|s| s.span_id == span.span_id).unwrap();
        assert_eq!(same, span, "a span once sent never changes");
    }
    let grown: Vec<&Span> = resent
        .iter()
        .filter(|s| !spans.iter().any(|old| old.span_id == s.span_id))
        .collect();
    assert_eq!(grown.len(), 1);
    assert_eq!(text(grown[0], "cuca.call_log.id"), Some("p3"));
    assert_eq!(int(grown[0], "llm.token_count.completion"), Some(1));
}

/// `export-otlp --help` says what the exporter does: each model call is a trace of its own,
/// grouped by `session.id`, never one trace per session or per run.
#[test]
fn the_help_says_each_call_is_a_trace_of_its_own() {
    let output = cuca().args(["export-otlp", "--help"]).output().unwrap();
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    assert!(
        !help.contains("every session in it becomes a trace"),
        "{help}"
    );
    assert!(!help.contains("every run in it becomes a trace"), "{help}");
    assert!(help.contains("a trace of its own"), "{help}");
}

// ---------------------------------------------------------------------------------------
// Cache hits, reasoning and cost on each call's span, in the GenAI conventions' keys and
// OpenInference's (what Phoenix reads), and the opt-in to the newest GenAI names.

/// A session of one call that read and wrote the cache and reasoned, exported with
/// `OTEL_SEMCONV_STABILITY_OPT_IN` set to `opt_in` (unset when `None`); its one span.
async fn cached_call_span(opt_in: Option<&str>) -> Span {
    let tmp = tempfile::tempdir().unwrap();
    let file = FileBackend::new(tmp.path()).unwrap();
    let mut records = call_records(
        "cached",
        0,
        T0,
        "Where is the vault?",
        &["Lisbon"],
        Some(("claude-sonnet-4-5-20250929", 1, "end_turn")),
        true,
    );
    // The model that answered is the one asked for (the helper names a quantised variant).
    for record in &mut records {
        if let SessionEvent::CallFinish { model, .. } = &mut record.event {
            *model = "claude-sonnet-4-5-20250929".into();
        }
    }
    let at = records.len() - 2;
    let mut detail = records[at].clone();
    detail.event = SessionEvent::TokenDetail(cuca::TokenDetail {
        input: Some(26),
        output: Some(57),
        cache_read: Some(3_401),
        cache_write: Some(1_201),
        reasoning: Some(12),
        ..cuca::TokenDetail::default()
    });
    records.insert(at, detail);
    for (i, record) in records.iter_mut().enumerate() {
        record.sequence = i as u64;
        file.append(record.clone()).unwrap();
    }
    let (url, received) = receiver().await;
    let dir = tmp.path().to_owned();
    let opt_in = opt_in.map(str::to_owned);
    let output = tokio::task::spawn_blocking(move || {
        let mut command = cuca();
        command
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_SEMCONV_STABILITY_OPT_IN")
            .args([
                "export-otlp",
                "--endpoint",
                &url,
                "--json",
                "--provider",
                "anthropic",
                "--sessions",
            ])
            .arg(&dir);
        if let Some(opt_in) = opt_in {
            command.env("OTEL_SEMCONV_STABILITY_OPT_IN", opt_in);
        }
        command.output().unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let spans = spans_of(&received.lock().unwrap());
    let calls: Vec<Span> = spans
        .into_iter()
        .filter(|s| int(s, "gen_ai.usage.input_tokens").is_some())
        .collect();
    assert_eq!(calls.len(), 1);
    calls.into_iter().next().unwrap()
}

fn float(span: &Span, key: &str) -> Option<f64> {
    match value(&span.attributes, key) {
        Some(any_value::Value::DoubleValue(v)) => Some(*v),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_s_span_carries_its_cache_hits_reasoning_and_cost() {
    let span = cached_call_span(None).await;
    assert_eq!(
        int(&span, "gen_ai.usage.cache_read.input_tokens"),
        Some(3_401)
    );
    assert_eq!(
        int(&span, "gen_ai.usage.cache_creation.input_tokens"),
        Some(1_201)
    );
    assert_eq!(
        int(&span, "llm.token_count.prompt_details.cache_read"),
        Some(3_401)
    );
    assert_eq!(
        int(&span, "llm.token_count.prompt_details.cache_write"),
        Some(1_201)
    );
    assert_eq!(
        int(&span, "llm.token_count.completion_details.reasoning"),
        Some(12)
    );
    // The newest experimental name is sent only when asked for; the pre-1.37 provider key
    // still is.
    assert_eq!(int(&span, "gen_ai.usage.reasoning.output_tokens"), None);
    assert_eq!(text(&span, "gen_ai.system"), Some("anthropic"));
    let total = float(&span, "llm.cost.total").unwrap();
    let expected = 26.0 * 3e-6 + 3_401.0 * 0.3e-6 + 1_201.0 * 3.75e-6 + 57.0 * 15e-6;
    assert!((total - expected).abs() < 1e-12, "{total} != {expected}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_latest_experimental_opt_in_sends_the_newest_names_and_not_the_old_one() {
    let span = cached_call_span(Some("http,gen_ai_latest_experimental")).await;
    assert_eq!(int(&span, "gen_ai.usage.reasoning.output_tokens"), Some(12));
    assert_eq!(
        int(&span, "gen_ai.usage.cache_read.input_tokens"),
        Some(3_401)
    );
    assert_eq!(text(&span, "gen_ai.system"), None);
    assert_eq!(text(&span, "gen_ai.provider.name"), Some("anthropic"));
}

/// What an agent did outside the model: a shell command is a `shell` span under the call
/// whose answer asked for it, its exit status the span's status; each file a snapshot says
/// changed is an event on the span of the call whose request saw it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_command_is_a_span_and_a_file_change_an_event_on_its_call() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let file = FileBackend::new(&dir).unwrap();
    let mut records = call_records("agent", 0, T0, "fix it", &["on it"], None, true);
    let stream = |tail: &str| cuca::CapturedStream {
        sha256: format!("sha256:{}", "0".repeat(64)),
        bytes: tail.len() as u64,
        tail: tail.into(),
        cut: 0,
    };
    let outside = [
        (
            T0 + 2_000,
            SessionEvent::ShellCommand {
                command: "cargo test --quiet".into(),
                cwd: "crates/app".into(),
                origin: "bash -c".into(),
                exit_status: Some(101),
                duration_ms: 1_300,
                stdout: stream("running 1 test\n"),
                stderr: stream("error: test failed\n"),
            },
        ),
        (
            T0 + 2_100,
            SessionEvent::WorkspaceSnapshot {
                snapshot: format!("sha256:{}", "a".repeat(64)),
                changes: vec![cuca::FileChange {
                    path: "src/lib.rs".into(),
                    kind: cuca::FileChangeKind::Modified,
                    added_lines: 3,
                    removed_lines: 1,
                    binary: false,
                }],
                skipped: Vec::new(),
            },
        ),
    ];
    for (at, event) in outside {
        records.push(SessionRecord {
            session_id: "agent".into(),
            sequence: records.len() as u64,
            timestamp_ms: at,
            event,
        });
    }
    let next = records.len() as u64;
    records.extend(call_records(
        "agent",
        next,
        T0 + 2_100,
        "again",
        &["done"],
        None,
        true,
    ));
    for record in records {
        file.append(record).unwrap();
    }
    let (url, received) = receiver().await;
    let summary = export_otlp(&url, vec!["--sessions".into(), dir.clone().into()]).await;
    assert_eq!(summary["turns_sent"], 2, "{summary}");
    assert_eq!(summary["commands_sent"], 1, "{summary}");
    assert_eq!(summary["spans"], 3, "{summary}");

    let spans = spans_of(&received.lock().unwrap());
    let chats: Vec<&Span> = spans.iter().filter(|s| s.name == "chat").collect();
    let shell = spans.iter().find(|s| s.name == "shell").unwrap();
    // Under the first call, whose answer asked for it, in its trace.
    assert_eq!(shell.parent_span_id, chats[0].span_id);
    assert_eq!(shell.trace_id, chats[0].trace_id);
    let status = shell.status.as_ref().unwrap();
    assert_eq!(status.code, StatusCode::Error as i32);
    assert_eq!(status.message, "exit status 101");
    assert_eq!(int(shell, "process.exit.code"), Some(101));
    assert_eq!(
        text(shell, "process.command_line"),
        Some("cargo test --quiet")
    );
    assert_eq!(text(shell, "process.working_directory"), Some("crates/app"));
    assert_eq!(text(shell, "error.type"), Some("101"));
    assert_eq!(
        shell.end_time_unix_nano - shell.start_time_unix_nano,
        1_300 * 1_000_000
    );
    assert_eq!(shell.end_time_unix_nano, (T0 + 2_000) * 1_000_000);
    // The streams are content: not sent unless asked.
    assert_eq!(text(shell, "cuca.shell.stderr"), None);
    assert_eq!(int(shell, "cuca.shell.stderr.bytes"), Some(19));

    // The file change is an event on the second call, whose request saw it.
    assert!(chats[0].events.is_empty());
    let second = chats[1];
    assert_eq!(int(second, "cuca.workspace.files_changed"), Some(1));
    let event = &second.events[0];
    assert_eq!(event.name, "cuca.file_change");
    assert!(event.time_unix_nano >= second.start_time_unix_nano);
    let attribute = |key: &str| value(&event.attributes, key).cloned();
    assert_eq!(
        attribute("cuca.file.path"),
        Some(any_value::Value::StringValue("src/lib.rs".into()))
    );
    assert_eq!(
        attribute("cuca.file.change"),
        Some(any_value::Value::StringValue("modified".into()))
    );
    assert_eq!(
        attribute("cuca.file.added_lines"),
        Some(any_value::Value::IntValue(3))
    );
    assert_eq!(
        attribute("cuca.file.removed_lines"),
        Some(any_value::Value::IntValue(1))
    );
    assert_eq!(
        attribute("cuca.file.binary"),
        Some(any_value::Value::BoolValue(false))
    );

    // With content, the streams' tails go too; the same ids, so a backend keeps one copy.
    let (url, received) = receiver().await;
    export_otlp(
        &url,
        vec!["--sessions".into(), dir.into(), "--with-content".into()],
    )
    .await;
    let again = spans_of(&received.lock().unwrap());
    let shell_again = again.iter().find(|s| s.name == "shell").unwrap();
    assert_eq!(shell_again.span_id, shell.span_id);
    assert_eq!(
        text(shell_again, "cuca.shell.stderr"),
        Some("error: test failed\n")
    );
}
