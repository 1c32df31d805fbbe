//! The committed fixture sessions exported to a loopback OTLP/HTTP receiver, decoded with
//! `opentelemetry-proto`, and checked against the GenAI conventions.

// Test helpers outside #[test] functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use cuca_events::{SessionBackend, SessionEvent, SessionRecord};
use cuca_otel::opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use cuca_otel::opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use cuca_otel::opentelemetry_proto::tonic::trace::v1::Span;
use cuca_otel::{ids, session_spans, ExportOptions, Exporter, DEFAULT_REQUEST_TIMEOUT};
use cuca_store_file::FileBackend;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/sessions")
}

fn backend() -> Arc<dyn SessionBackend> {
    Arc::new(FileBackend::new(fixtures_dir()).unwrap())
}

/// The fixture's records, read straight from the store: the expectations come from these,
/// not from the exporter's own segmentation.
fn records(session: &str) -> Vec<SessionRecord> {
    backend().replay(session).unwrap()
}

async fn export(sessions: &[&str], options: &ExportOptions) -> (Vec<Span>, Received) {
    let (url, received) = start_receiver().await;
    let exporter = Exporter::new(&url, "cuca-test", DEFAULT_REQUEST_TIMEOUT).unwrap();
    let mut spans = Vec::new();
    for session in sessions {
        spans.extend(session_spans(backend(), session, options).unwrap().spans);
    }
    let report = exporter.send(spans).await.unwrap();
    assert_eq!(report.requests, 1);
    assert_eq!(report.rejected, 0);
    (received.spans(), received)
}

#[tokio::test]
async fn one_trace_per_model_call_grouped_by_session_id() {
    // One span per model call.
    let (spans, received) = export(&["demo", "reasoning"], &ExportOptions::default()).await;
    let request = &received.requests.lock().unwrap()[0];
    let resource = request.resource_spans[0].resource.as_ref().unwrap();
    match attr(&resource.attributes, "service.name") {
        Some(cuca_otel::opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(
            s,
        )) => {
            assert_eq!(s, "cuca-test")
        }
        other => panic!("service.name is {other:?}"),
    }
    assert_eq!(
        request.resource_spans[0].scope_spans[0]
            .scope
            .as_ref()
            .unwrap()
            .name,
        "cuca-otel"
    );

    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["chat", "chat", "chat"]);

    for (session, range) in [("demo", 0..2), ("reasoning", 2..3)] {
        let recorded = records(session);
        // The expected calls: each Latency-then-TokenUsage pair in the raw records.
        let calls: Vec<(u64, u64, u64, u64)> = recorded
            .windows(2)
            .filter_map(|pair| match (&pair[0].event, &pair[1].event) {
                (
                    SessionEvent::Latency { duration_ms },
                    SessionEvent::TokenUsage {
                        prompt_tokens,
                        completion_tokens,
                    },
                ) => Some((
                    *duration_ms,
                    *prompt_tokens,
                    *completion_tokens,
                    pair[1].timestamp_ms,
                )),
                _ => None,
            })
            .collect();
        let turns = &spans[range];
        assert_eq!(turns.len(), calls.len());
        let mut first_sequence = 0;
        for (turn_idx, (turn, (duration_ms, prompt, completion, end_ms))) in
            turns.iter().zip(&calls).enumerate()
        {
            // Each call is the root of a trace of its own, as a natively traced
            // call is, and `session.id` groups a session's traces in Phoenix's Sessions tab.
            assert_eq!(
                turn.trace_id,
                ids::turn_trace_id(session, first_sequence).to_vec()
            );
            assert!(turn.parent_span_id.is_empty(), "the root of its trace");
            assert_eq!(turn.kind, SpanKind::Client as i32);
            assert_eq!(str_attr(turn, "openinference.span.kind"), "LLM");
            assert_eq!(str_attr(turn, "session.id"), session);
            assert_eq!(
                turn.status.as_ref().map(|s| s.code),
                Some(StatusCode::Ok as i32),
                "a call that ended well is OK, as a native one is"
            );
            assert_eq!(
                turn.span_id,
                ids::turn_span_id(session, first_sequence).to_vec()
            );
            assert_eq!(str_attr(turn, "gen_ai.operation.name"), "chat");
            assert_eq!(str_attr(turn, "gen_ai.conversation.id"), session);
            assert_eq!(int_attr(turn, "gen_ai.usage.input_tokens"), *prompt as i64);
            assert_eq!(
                int_attr(turn, "gen_ai.usage.output_tokens"),
                *completion as i64
            );
            assert_eq!(int_attr(turn, "llm.token_count.prompt"), *prompt as i64);
            assert_eq!(int_attr(turn, "cuca.duration_ms"), *duration_ms as i64);
            assert_eq!(int_attr(turn, "cuca.turn.number"), turn_idx as i64 + 1);
            // Timings: the call ended with its TokenUsage record and took its Latency.
            assert_eq!(turn.end_time_unix_nano, end_ms * 1_000_000);
            assert_eq!(
                turn.start_time_unix_nano,
                (end_ms - duration_ms) * 1_000_000
            );
            // No provider or model is recorded in a session: none is invented.
            assert!(!has(turn, "gen_ai.provider.name"));
            assert!(!has(turn, "gen_ai.request.model"));
            first_sequence = int_attr(turn, "cuca.sequence.last") as u64 + 1;
        }
    }
}

#[tokio::test]
async fn content_is_sent_only_when_asked() {
    // Message content is sent only when asked (--with-content), never by default.
    let (plain, _) = export(&["demo"], &ExportOptions::default()).await;
    for span in &plain {
        for key in keys(span) {
            assert!(
                !key.starts_with("gen_ai.input")
                    && !key.starts_with("gen_ai.output")
                    && key != "gen_ai.system_instructions",
                "{key} sent without --with-content"
            );
        }
        let text = format!("{span:?}");
        assert!(!text.contains("Lisbon"), "prompt text sent by default");
    }

    let options = ExportOptions {
        with_content: true,
        provider: Some("llamacpp".into()),
        ..ExportOptions::default()
    };
    let (spans, _) = export(&["demo"], &options).await;
    let second = &spans[1];
    assert_eq!(str_attr(second, "gen_ai.provider.name"), "llamacpp");
    assert_eq!(str_attr(second, "gen_ai.system"), "llamacpp");
    let system: serde_json::Value =
        serde_json::from_str(str_attr(second, "gen_ai.system_instructions")).unwrap();
    assert_eq!(system[0]["content"], "You are terse.");
    // The input of the second call is the whole conversation so far: the first question,
    // the recorded answer, and the second question.
    let input: serde_json::Value =
        serde_json::from_str(str_attr(second, "gen_ai.input.messages")).unwrap();
    let roles: Vec<&str> = input
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    assert_eq!(
        input[2]["parts"][0]["content"],
        "Where is the vault? Answer in one word."
    );
    // The output is the recorded answer text, as the Output records hold it.
    let recorded = records("demo");
    let last_usage = recorded
        .iter()
        .rposition(|r| matches!(r.event, SessionEvent::TokenUsage { .. }))
        .unwrap();
    let first_of_second = int_attr(second, "cuca.sequence.first") as usize;
    let answer: String = recorded[first_of_second..last_usage]
        .iter()
        .filter_map(|r| match &r.event {
            SessionEvent::Output { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let output: serde_json::Value =
        serde_json::from_str(str_attr(second, "gen_ai.output.messages")).unwrap();
    let sent: String = output[0]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "text")
        .map(|p| p["content"].as_str().unwrap())
        .collect();
    assert!(!answer.is_empty());
    assert_eq!(sent, answer);
    // With `--with-content` the answer is sent, and carries the finish reason the
    // schema requires (the fixture was recorded without call metadata, so the documented
    // default), and the streamed tokens are one text part.
    assert_eq!(output[0]["finish_reason"], "stop");
    let text_parts = output[0]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "text")
        .count();
    assert_eq!(text_parts, 1, "one joined text part");
    // The root of the call's trace shows the question and the answer as text.
    assert_eq!(
        str_attr(second, "input.value"),
        "Where is the vault? Answer in one word."
    );
    assert_eq!(str_attr(second, "output.value"), answer);
}

#[tokio::test]
async fn exporting_twice_sends_the_same_ids_and_bytes() {
    // Idempotent: exporting the same session twice yields the same trace and span ids
    // (derived from session id and sequence), so a re-run does not duplicate.
    let (first, first_received) = export(&["demo", "reasoning"], &ExportOptions::default()).await;
    let (second, second_received) = export(&["demo", "reasoning"], &ExportOptions::default()).await;
    let ids = |spans: &[Span]| -> Vec<(Vec<u8>, Vec<u8>, Vec<u8>)> {
        spans
            .iter()
            .map(|s| {
                (
                    s.trace_id.clone(),
                    s.span_id.clone(),
                    s.parent_span_id.clone(),
                )
            })
            .collect()
    };
    assert_eq!(ids(&first), ids(&second));
    assert_eq!(
        first_received.raw.lock().unwrap()[0],
        second_received.raw.lock().unwrap()[0],
        "the same records encode to the same request"
    );
    // Every span id is distinct within the export.
    let mut all: Vec<Vec<u8>> = first.iter().map(|s| s.span_id.clone()).collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), first.len());
}

#[tokio::test]
async fn an_unfinished_turn_is_not_sent_a_model_swap_holds_and_since() {
    // A call exported in flight does not stay a zero-length, token-less span after it
    // ends: a call still in flight is counted, not sent, and the export after it ended
    // sends it whole.
    let backend: Arc<dyn SessionBackend> = Arc::new(cuca_store_mem::InMemoryBackend::new());
    let mut records = cuca_testkit::demo_turn("live", 0);
    records.push(SessionRecord {
        session_id: "live".into(),
        sequence: 7,
        timestamp_ms: 5_000,
        event: SessionEvent::ModelSwap {
            from: "small".into(),
            to: "qwen3".into(),
            reason: "escalate".into(),
        },
    });
    let rest = cuca_testkit::demo_turn("live", 8);
    records.extend(rest.iter().take(3).cloned());
    for (i, record) in records.iter_mut().enumerate() {
        if i != 7 {
            record.timestamp_ms = 1_000 + i as u64 * 100;
        }
    }
    cuca_testkit::append_all(backend.as_ref(), &records);
    let export = session_spans(Arc::clone(&backend), "live", &ExportOptions::default()).unwrap();
    assert_eq!(export.n_turns, 2);
    assert_eq!(export.n_in_flight, 1);
    assert_eq!(export.n_calls, 1);
    assert_eq!(export.spans.len(), 1, "the call in flight is not sent");
    assert_eq!(
        export.spans[0].name, "chat",
        "before the swap no model is known"
    );

    // The call ends: the next export sends the first call unchanged and the second whole.
    let mut tail: Vec<SessionRecord> = rest.into_iter().skip(3).collect();
    for (i, record) in tail.iter_mut().enumerate() {
        record.timestamp_ms = 6_000 + i as u64 * 100;
    }
    cuca_testkit::append_all(backend.as_ref(), &tail);
    let after = session_spans(Arc::clone(&backend), "live", &ExportOptions::default()).unwrap();
    assert_eq!(after.n_in_flight, 0);
    assert_eq!(after.spans.len(), 2);
    assert_eq!(after.spans[0], export.spans[0], "a sent span never changes");
    let ended = &after.spans[1];
    // The swap holds from its turn on, so the second call names the model.
    assert_eq!(ended.name, "chat qwen3");
    assert_eq!(str_attr(ended, "gen_ai.request.model"), "qwen3");
    assert_eq!(int_attr(ended, "gen_ai.usage.input_tokens"), 31);
    assert_eq!(ended.events.len(), 1);
    assert_eq!(ended.events[0].name, "cuca.model_swap");
    assert_eq!(
        ended.events[0].time_unix_nano, ended.start_time_unix_nano,
        "a note is an event inside its call's span"
    );

    // --since: a session whose last record is older than the cutoff is left out whole.
    let last_ms = 6_000 + 3 * 100;
    let newer = ExportOptions {
        since_ms: Some(last_ms + 1),
        ..ExportOptions::default()
    };
    let skipped = session_spans(Arc::clone(&backend), "live", &newer).unwrap();
    assert!(skipped.skipped_by_since);
    assert!(skipped.spans.is_empty());
    let older = ExportOptions {
        since_ms: Some(last_ms),
        ..ExportOptions::default()
    };
    assert_eq!(
        session_spans(backend, "live", &older).unwrap().spans.len(),
        2
    );
}

#[tokio::test]
async fn a_collector_that_refuses_is_an_error_naming_the_status() {
    let (url, received) = start_receiver().await;
    *received.status.lock().unwrap() = Some(503);
    let exporter = Exporter::new(&url, "cuca", DEFAULT_REQUEST_TIMEOUT).unwrap();
    let spans = session_spans(backend(), "demo", &ExportOptions::default())
        .unwrap()
        .spans;
    match exporter.send(spans).await {
        Err(cuca_otel::Error::Status {
            status, url: at, ..
        }) => {
            assert_eq!(status, 503);
            assert!(at.ends_with("/v1/traces"));
        }
        other => panic!("expected a status error, got {other:?}"),
    }
    let down = down_url().await;
    let exporter = Exporter::new(&down, "cuca", DEFAULT_REQUEST_TIMEOUT).unwrap();
    let spans = session_spans(backend(), "demo", &ExportOptions::default())
        .unwrap()
        .spans;
    assert!(matches!(
        exporter.send(spans).await,
        Err(cuca_otel::Error::Send { .. })
    ));
    assert!(matches!(
        Exporter::new("ftp://x", "cuca", DEFAULT_REQUEST_TIMEOUT),
        Err(cuca_otel::Error::Endpoint { .. })
    ));
}

/// The sequence of every record of `session` whose event is `TokenUsage`.
fn usage_sequences(backend: &dyn SessionBackend, session: &str) -> Vec<u64> {
    backend
        .replay(session)
        .unwrap()
        .into_iter()
        .filter(|r| matches!(r.event, SessionEvent::TokenUsage { .. }))
        .map(|r| r.sequence)
        .collect()
}

#[tokio::test]
async fn a_fork_of_a_fork_sends_only_its_own_calls_and_links_the_copied_ones() {
    // A fork's copied prefix is not exported again as new LLM spans with tokens; the
    // unfinished turns where a fork cut its parent do not become LLM spans for calls that
    // never happened; and a fork audit record does not stretch a `chat` span (once to 38
    // hours).
    let dir = tempfile::tempdir().unwrap();
    let file = FileBackend::new(dir.path()).unwrap();
    cuca_testkit::append_all(&file, &cuca_testkit::demo_turn("demo", 0));
    cuca_testkit::append_all(&file, &cuca_testkit::demo_turn("demo", 7));
    // A clean fork after the second call; it makes a call of its own.
    let first = file.fork("demo", "demo:13").unwrap();
    // A call without the system prompt again: records `from..from + 6`, closing at
    // `from + 5`.
    let own = |session: &str, from: u64| -> Vec<SessionRecord> {
        cuca_testkit::demo_turn(session, from - 1)
            .into_iter()
            .skip(1)
            .collect()
    };
    cuca_testkit::append_all(&file, &own(&first, 14));
    // A fork of the fork, cut in the middle of the fork's own call and never continued.
    let cut = file.fork(&first, &format!("{first}:16")).unwrap();
    // A fork of the fork after its call, which makes a call of its own.
    let second = file.fork(&first, &format!("{first}:19")).unwrap();
    cuca_testkit::append_all(&file, &own(&second, 20));
    let backend: Arc<dyn SessionBackend> = Arc::new(file);

    let options = ExportOptions::default();
    let mut all = Vec::new();
    let mut reports = Vec::new();
    for session in ["demo", first.as_str(), cut.as_str(), second.as_str()] {
        let report = session_spans(Arc::clone(&backend), session, &options).unwrap();
        all.extend(report.spans.iter().cloned());
        reports.push(report);
    }
    let (demo, first_r, cut_r, second_r) = (&reports[0], &reports[1], &reports[2], &reports[3]);
    assert_eq!((demo.n_calls, demo.n_inherited), (2, 0));
    assert_eq!((first_r.n_calls, first_r.n_inherited), (1, 2));
    // The cut fork made no call: its copied calls are its parents', its cut-off turn none.
    assert_eq!(cut_r.n_calls, 0);
    assert_eq!(cut_r.n_inherited, 2);
    assert_eq!(cut_r.n_cut_off, 1);
    assert!(cut_r.spans.is_empty());
    assert_eq!((second_r.n_calls, second_r.n_inherited), (1, 3));
    // Four calls were made in all (two by demo, one by each fork that went on), and four
    // spans sent: one per call, none twice.
    assert_eq!(all.len(), 4);

    // The fork of a fork links the calls it copied to the spans their own sessions sent:
    // two of demo's and one of the first fork's, all of which resolve.
    let mine = &second_r.spans[0];
    assert_eq!(
        str_attr(mine, "cuca.session.forked_from"),
        format!("{first}:19")
    );
    assert_eq!(int_attr(mine, "cuca.fork.inherited_calls"), 3);
    assert_eq!(mine.links.len(), 3);
    for link in &mine.links {
        let target = all
            .iter()
            .find(|s| s.span_id == link.span_id && s.trace_id == link.trace_id)
            .expect("a link to a span that was sent");
        assert_ne!(target.trace_id, mine.trace_id);
    }
    let owners: Vec<String> = mine
        .links
        .iter()
        .map(|link| {
            let target = all.iter().find(|s| s.span_id == link.span_id).unwrap();
            str_attr(target, "session.id").to_owned()
        })
        .collect();
    assert_eq!(owners, ["demo", "demo", first.as_str()]);

    // No span is longer than its call: the Fork audit records written at the parents'
    // tails (years after these records' clock) stretch nothing.
    for span in &all {
        let session = str_attr(span, "session.id");
        let last = int_attr(span, "cuca.sequence.last") as u64;
        let closing = backend
            .replay(session)
            .unwrap()
            .into_iter()
            .find(|r| r.sequence == last)
            .unwrap();
        assert!(matches!(closing.event, SessionEvent::TokenUsage { .. }));
        assert_eq!(span.end_time_unix_nano, closing.timestamp_ms * 1_000_000);
        assert_eq!(
            span.end_time_unix_nano - span.start_time_unix_nano,
            int_attr(span, "cuca.duration_ms") as u64 * 1_000_000
        );
    }
    assert_eq!(usage_sequences(backend.as_ref(), "demo"), [6, 13]);
}

#[tokio::test]
async fn call_metadata_names_each_calls_model_parameters_and_finish() {
    // `gen_ai.request.model`, `gen_ai.response.model`,
    // `gen_ai.response.finish_reasons`, from the records `cuca proxy` writes
    // (`SessionLogPlugin::with_call_metadata`).
    let backend: Arc<dyn SessionBackend> = Arc::new(cuca_store_mem::InMemoryBackend::new());
    let mut records = cuca_testkit::demo_turn("meta", 0);
    records.insert(
        2,
        cuca_testkit::record(
            "meta",
            2,
            SessionEvent::CallRequest {
                model: "gemma-tiny".into(),
                parameters: r#"{"max_tokens":12,"temperature":0.5}"#.into(),
                tools: "[]".into(),
                messages: 2,
            },
        ),
    );
    let at = records.len() - 2;
    records.insert(
        at,
        cuca_testkit::record(
            "meta",
            0,
            SessionEvent::CallFinish {
                finish_reason: Some("length".into()),
                model: "gemma-tiny-q4".into(),
            },
        ),
    );
    for (i, record) in records.iter_mut().enumerate() {
        record.sequence = i as u64;
    }
    cuca_testkit::append_all(backend.as_ref(), &records);
    let export = session_spans(backend, "meta", &ExportOptions::default()).unwrap();
    assert_eq!(export.n_turns, 1);
    let call = &export.spans[0];
    assert_eq!(call.name, "chat gemma-tiny");
    assert_eq!(str_attr(call, "gen_ai.request.model"), "gemma-tiny");
    assert_eq!(str_attr(call, "gen_ai.response.model"), "gemma-tiny-q4");
    assert_eq!(
        str_array_attr(call, "gen_ai.response.finish_reasons"),
        vec!["length".to_owned()]
    );
    assert_eq!(int_attr(call, "gen_ai.request.max_tokens"), 12);
    assert!(has(call, "gen_ai.request.temperature"));
}

/// A call whose records do not hold the whole call says so on its span
/// (`cuca.call.incomplete`, from its `CallIncomplete` record), and a proxy call that sent only
/// `max_completion_tokens` (recorded as sent) still names its ceiling.
#[tokio::test]
async fn an_incomplete_call_says_why_and_max_completion_tokens_is_its_ceiling() {
    let backend: Arc<dyn SessionBackend> = Arc::new(cuca_store_mem::InMemoryBackend::new());
    let mut records = cuca_testkit::demo_turn("cut", 0);
    records.insert(
        2,
        cuca_testkit::record(
            "cut",
            2,
            SessionEvent::CallRequest {
                model: "m".into(),
                parameters: r#"{"max_completion_tokens":9}"#.into(),
                tools: "[]".into(),
                messages: 2,
            },
        ),
    );
    let at = records.len() - 2;
    records.insert(
        at,
        cuca_testkit::record(
            "cut",
            0,
            SessionEvent::CallIncomplete {
                reason: "cut short: the caller hung up".into(),
            },
        ),
    );
    for (i, record) in records.iter_mut().enumerate() {
        record.sequence = i as u64;
    }
    cuca_testkit::append_all(backend.as_ref(), &records);
    let export = session_spans(backend, "cut", &ExportOptions::default()).unwrap();
    let call = &export.spans[0];
    assert_eq!(
        str_attr(call, "cuca.call.incomplete"),
        "cut short: the caller hung up"
    );
    assert_eq!(int_attr(call, "gen_ai.request.max_tokens"), 9);
    // A call recorded whole has no such attribute.
    let plain: Arc<dyn SessionBackend> = Arc::new(cuca_store_mem::InMemoryBackend::new());
    cuca_testkit::append_all(plain.as_ref(), &cuca_testkit::demo_turn("whole", 0));
    let whole = session_spans(plain, "whole", &ExportOptions::default()).unwrap();
    assert_eq!(whole.n_turns, 1);
    assert!(!has(&whole.spans[0], "cuca.call.incomplete"));
}

/// An RFC 3339 timestamp of `ms` since the epoch, as call-log rows carry it.
fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
        .to_string()
}

#[tokio::test]
async fn a_call_in_both_the_session_and_the_call_log_is_one_span_with_tokens_once() {
    // `--sessions DIR --calls FILE` sends a proxied call once, as its session turn, not also
    // as an unlinked call-log call that would double Phoenix's token totals.
    let backend: Arc<dyn SessionBackend> = Arc::new(cuca_store_mem::InMemoryBackend::new());
    let mut records = cuca_testkit::demo_turn("proxied", 0);
    records.insert(
        2,
        cuca_testkit::record(
            "proxied",
            0,
            SessionEvent::CallRequest {
                model: "tiny".into(),
                parameters: "{}".into(),
                tools: "[]".into(),
                messages: 2,
            },
        ),
    );
    for (i, record) in records.iter_mut().enumerate() {
        record.sequence = i as u64;
        record.timestamp_ms = 1_700_000_000_000 + i as u64;
    }
    cuca_testkit::append_all(backend.as_ref(), &records);
    let end_ms = records.last().unwrap().timestamp_ms;
    let row = |id: &str, node: &str, phase: &str, ts: u64| cuca_calllog::Record {
        ts: rfc3339(ts),
        id: id.into(),
        run: "proxy-run".into(),
        node: node.into(),
        tag: "proxy".into(),
        model: "tiny".into(),
        phase: phase.into(),
        attempt: 1,
        messages: if phase.is_empty() { 0 } else { 2 },
        ..cuca_calllog::Record::default()
    };
    let done = |id: &str, node: &str, ts: u64| cuca_calllog::Record {
        status: 200,
        served: "tiny-q4".into(),
        finish: "stop".into(),
        prompt_tokens: 31,
        completion_tokens: 9,
        ttft_ms: 40,
        ms: 412,
        ..row(id, node, "", ts)
    };
    let rows = vec![
        // The same call, as the proxy logged it.
        row("p1", "proxied", cuca_calllog::PHASE_START, end_ms - 413),
        done("p1", "proxied", end_ms + 1),
        // A call of another session at the same time, which stays a call of its own.
        row("q1", "other", cuca_calllog::PHASE_START, end_ms - 413),
        done("q1", "other", end_ms + 1),
    ];
    let options = ExportOptions::default();
    let mut calls = cuca_otel::Calls::new(&rows, &options);
    let session =
        cuca_otel::session_spans_with_calls(backend, "proxied", &options, &mut calls).unwrap();
    assert_eq!(session.n_merged, 1);
    let log = calls.spans(&options);
    assert_eq!((log.n_calls, log.n_merged, log.n_sent), (2, 1, 1));
    let mut all = session.spans.clone();
    all.extend(log.spans);
    // One LLM span per call: the session's, with the call log's fields, tokens once.
    let llm: Vec<&Span> = all
        .iter()
        .filter(|s| str_attr(s, "openinference.span.kind") == "LLM")
        .collect();
    assert_eq!(llm.len(), 2);
    let merged = &session.spans[0];
    assert_eq!(str_attr(merged, "cuca.call_log.id"), "p1");
    assert_eq!(str_attr(merged, "cuca.run"), "proxy-run");
    assert_eq!(str_attr(merged, "gen_ai.response.model"), "tiny-q4");
    assert_eq!(int_attr(merged, "http.response.status_code"), 200);
    assert_eq!(int_attr(merged, "cuca.ttft_ms"), 40);
    let prompt: i64 = llm
        .iter()
        .filter(|s| str_attr(s, "session.id") == "proxied")
        .map(|s| int_attr(s, "llm.token_count.prompt"))
        .sum();
    assert_eq!(prompt, 31, "the session's tokens, counted once");
    assert_eq!(str_attr(llm[1], "session.id"), "other");
}

/// A call cut short (its turn holds a `CallIncomplete`) is an error in OTLP, with the reason
/// as the status message, so a backend's error filter finds it; the token counts the session
/// did not learn (the closing `TokenUsage` of 0 and 0) are left off rather than sent as 0.
#[tokio::test]
async fn a_call_cut_short_is_an_error_with_its_reason_and_no_made_up_token_counts() {
    let backend: Arc<dyn SessionBackend> = Arc::new(cuca_store_mem::InMemoryBackend::new());
    let mut records = cuca_testkit::demo_turn("cut", 0);
    let at = records.len() - 2;
    records.insert(
        at,
        cuca_testkit::record(
            "cut",
            0,
            SessionEvent::CallIncomplete {
                reason: "cut short: the upstream closed the stream".into(),
            },
        ),
    );
    if let Some(last) = records.last_mut() {
        last.event = SessionEvent::TokenUsage {
            prompt_tokens: 0,
            completion_tokens: 0,
        };
    }
    for (i, record) in records.iter_mut().enumerate() {
        record.sequence = i as u64;
    }
    cuca_testkit::append_all(backend.as_ref(), &records);
    let export = session_spans(backend, "cut", &ExportOptions::default()).unwrap();
    assert_eq!(export.n_calls, 1);
    let call = &export.spans[0];
    let status = call.status.as_ref().unwrap();
    assert_eq!(status.code, StatusCode::Error as i32);
    assert_eq!(status.message, "cut short: the upstream closed the stream");
    assert_eq!(str_attr(call, "error.type"), "incomplete");
    for key in [
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "llm.token_count.prompt",
        "llm.token_count.completion",
        "llm.token_count.total",
    ] {
        assert!(
            !has(call, key),
            "{key} sent for a call whose tokens are unknown"
        );
    }
    // The recorded wall time is still known, and said.
    assert_eq!(int_attr(call, "cuca.duration_ms"), 412);
}

/// A tool loop as the proxy records it (call metadata and tool results on): the user's
/// question, a call answered with a tool call, then the assistant's tool call echoed back
/// with the tool's result, and a call answered with text.
fn tool_loop(session: &str) -> Vec<SessionRecord> {
    let tools = r#"[{"name":"weather","description":"The weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]"#;
    let request = |messages: u64| SessionEvent::CallRequest {
        model: "tiny".into(),
        parameters: "{}".into(),
        tools: tools.into(),
        messages,
    };
    let events = vec![
        SessionEvent::SystemPrompt {
            text: "You are terse.".into(),
        },
        SessionEvent::Message(cuca_events::Message::user("What is the weather in Lisbon?")),
        request(2),
        SessionEvent::ToolCall {
            id: "call_1".into(),
            name: "weather".into(),
            arguments: r#"{"city":"Lisbon"}"#.into(),
        },
        SessionEvent::CallFinish {
            finish_reason: Some("tool_calls".into()),
            model: "tiny".into(),
        },
        SessionEvent::Latency { duration_ms: 100 },
        SessionEvent::TokenUsage {
            prompt_tokens: 40,
            completion_tokens: 8,
        },
        SessionEvent::SystemPrompt {
            text: "You are terse.".into(),
        },
        SessionEvent::Message(cuca_events::Message {
            role: cuca_events::Role::Assistant,
            content: vec![cuca_events::MessageContentBlock::ToolCall {
                id: "call_1".into(),
                name: "weather".into(),
                arguments: r#"{"city":"Lisbon"}"#.into(),
            }],
        }),
        SessionEvent::ToolResult {
            tool_call_id: "call_1".into(),
            content: "sunny, 24 °C".into(),
            is_error: false,
            stdout: None,
            stderr: None,
            exit_code: None,
        },
        request(4),
        SessionEvent::Output {
            text: "Sunny and 24 °C.".into(),
        },
        SessionEvent::CallFinish {
            finish_reason: Some("stop".into()),
            model: "tiny".into(),
        },
        SessionEvent::Latency { duration_ms: 90 },
        SessionEvent::TokenUsage {
            prompt_tokens: 60,
            completion_tokens: 6,
        },
    ];
    events
        .into_iter()
        .enumerate()
        .map(|(i, event)| cuca_testkit::record(session, i as u64, event))
        .collect()
}

/// Each span of a tool loop shows that call's own new input (what was added since the call
/// before it: the question, then the tool's result), not the first question every time.
#[tokio::test]
async fn each_call_of_a_tool_loop_shows_its_own_new_input() {
    let backend: Arc<dyn SessionBackend> = Arc::new(cuca_store_mem::InMemoryBackend::new());
    cuca_testkit::append_all(backend.as_ref(), &tool_loop("loop"));
    let with_content = ExportOptions {
        with_content: true,
        ..ExportOptions::default()
    };
    let export = session_spans(backend, "loop", &with_content).unwrap();
    assert_eq!(export.n_calls, 2);
    let (first, second) = (&export.spans[0], &export.spans[1]);
    assert_eq!(
        str_attr(first, "input.value"),
        "What is the weather in Lisbon?"
    );
    assert_eq!(str_attr(first, "input.mime_type"), "text/plain");
    let input = str_attr(second, "input.value");
    assert_ne!(input, "What is the weather in Lisbon?");
    let messages: serde_json::Value = serde_json::from_str(input).unwrap();
    assert_eq!(
        messages,
        serde_json::json!([{
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "call_1", "response": "sunny, 24 °C"}],
        }])
    );
    assert_eq!(str_attr(second, "input.mime_type"), "application/json");
    // The whole conversation sent is still there, in the GenAI key.
    let sent: serde_json::Value =
        serde_json::from_str(str_attr(second, "gen_ai.input.messages")).unwrap();
    assert_eq!(sent.as_array().unwrap().len(), 3);
}

/// The tools a request offered (recorded in its `CallRequest`) are sent as OpenInference's
/// `llm.tools.{i}.tool.json_schema`, in the OpenAI function shape Phoenix reads; content
/// only, and none for a call that offered none.
#[tokio::test]
async fn the_tools_a_call_offered_are_sent_with_content() {
    let backend: Arc<dyn SessionBackend> = Arc::new(cuca_store_mem::InMemoryBackend::new());
    cuca_testkit::append_all(backend.as_ref(), &tool_loop("loop"));
    let with_content = ExportOptions {
        with_content: true,
        ..ExportOptions::default()
    };
    let export = session_spans(Arc::clone(&backend), "loop", &with_content).unwrap();
    for span in &export.spans {
        let schema: serde_json::Value =
            serde_json::from_str(str_attr(span, "llm.tools.0.tool.json_schema")).unwrap();
        assert_eq!(
            schema,
            serde_json::json!({
                "type": "function",
                "function": {
                    "name": "weather",
                    "description": "The weather in a city",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                },
            })
        );
        assert!(!has(span, "llm.tools.1.tool.json_schema"));
    }
    let plain = session_spans(backend, "loop", &ExportOptions::default()).unwrap();
    assert!(plain
        .spans
        .iter()
        .all(|span| !has(span, "llm.tools.0.tool.json_schema")));
}

/// An answer that is reasoning alone shows its reasoning as text in `output.value`, not the
/// output messages' JSON.
#[tokio::test]
async fn a_reasoning_only_answer_is_readable_text() {
    let backend: Arc<dyn SessionBackend> = Arc::new(cuca_store_mem::InMemoryBackend::new());
    let records: Vec<SessionRecord> = cuca_testkit::demo_turn("thinking", 0)
        .into_iter()
        .filter(|r| !matches!(r.event, SessionEvent::Output { .. }))
        .enumerate()
        .map(|(i, mut r)| {
            r.sequence = i as u64;
            r
        })
        .collect();
    cuca_testkit::append_all(backend.as_ref(), &records);
    let with_content = ExportOptions {
        with_content: true,
        ..ExportOptions::default()
    };
    let export = session_spans(backend, "thinking", &with_content).unwrap();
    let call = &export.spans[0];
    assert_eq!(
        str_attr(call, "output.value"),
        "The user wants a short reply."
    );
    assert_eq!(str_attr(call, "output.mime_type"), "text/plain");
}

/// A fork cut after a message holds no call in flight, also once a fork taken from it has
/// written its audit record there: the turn where it was cut is no call of its own, and the
/// session is whole, so nothing waits for "the export after it ends".
#[tokio::test]
async fn a_fork_cut_after_a_message_is_whole_even_after_it_is_forked_again() {
    let dir = tempfile::tempdir().unwrap();
    let file = FileBackend::new(dir.path()).unwrap();
    cuca_testkit::append_all(&file, &cuca_testkit::demo_turn("demo", 0));
    cuca_testkit::append_all(&file, &cuca_testkit::demo_turn("demo", 7));
    // Sequence 8 is the second call's user message.
    let fork = file.fork("demo", "demo:8").unwrap();
    let again = file.fork(&fork, &format!("{fork}:8")).unwrap();
    let backend: Arc<dyn SessionBackend> = Arc::new(file);
    for session in [fork.as_str(), again.as_str()] {
        let report =
            session_spans(Arc::clone(&backend), session, &ExportOptions::default()).unwrap();
        assert_eq!(report.n_in_flight, 0, "{session}");
        assert_eq!((report.n_inherited, report.n_cut_off), (1, 1), "{session}");
        assert!(report.spans.is_empty(), "{session}");
    }
}
