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
async fn one_trace_per_session_and_one_chat_span_per_model_call() {
    // Issue 23: "one trace per session, one span per model call".
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
    assert_eq!(
        names,
        ["session demo", "chat", "chat", "session reasoning", "chat"]
    );

    for (session, range) in [("demo", 0..3), ("reasoning", 3..5)] {
        let trace = ids::session_trace_id(session);
        let root = &spans[range.start];
        assert_eq!(root.trace_id, trace.to_vec());
        assert_eq!(root.span_id, ids::session_root_span_id(session).to_vec());
        assert!(root.parent_span_id.is_empty(), "the root has no parent");
        assert_eq!(root.kind, SpanKind::Internal as i32);
        assert_eq!(str_attr(root, "gen_ai.conversation.id"), session);
        let recorded = records(session);
        assert_eq!(
            int_attr(root, "cuca.session.records"),
            recorded.len() as i64
        );
        assert_eq!(
            root.start_time_unix_nano,
            recorded[0].timestamp_ms * 1_000_000
        );

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
        let turns = &spans[range.start + 1..range.end];
        assert_eq!(turns.len(), calls.len());
        let mut first_sequence = 0;
        for (turn_idx, (turn, (duration_ms, prompt, completion, end_ms))) in
            turns.iter().zip(&calls).enumerate()
        {
            assert_eq!(turn.trace_id, trace.to_vec(), "same trace as its session");
            assert_eq!(
                turn.parent_span_id, root.span_id,
                "a child of the session span"
            );
            assert_eq!(turn.kind, SpanKind::Client as i32);
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
            assert_eq!(int_attr(turn, "cuca.duration_ms"), *duration_ms as i64);
            assert_eq!(int_attr(turn, "cuca.turn.index"), turn_idx as i64);
            assert!(bool_attr(turn, "cuca.turn.complete"));
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
    // Issue 23: "message content only when asked (--with-content) … never by default".
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
    let second = &spans[2];
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
}

#[tokio::test]
async fn exporting_twice_sends_the_same_ids_and_bytes() {
    // Issue 23: "Idempotent: exporting the same session twice yields the same trace and span
    // ids (derived from session id and sequence), so a re-run does not duplicate."
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
async fn an_unfinished_turn_a_model_swap_and_since() {
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
    records.extend(cuca_testkit::demo_turn("live", 8).into_iter().take(3));
    for (i, record) in records.iter_mut().enumerate() {
        if i != 7 {
            record.timestamp_ms = 1_000 + i as u64 * 100;
        }
    }
    cuca_testkit::append_all(backend.as_ref(), &records);
    let export = session_spans(Arc::clone(&backend), "live", &ExportOptions::default()).unwrap();
    assert_eq!(export.n_turns, 2);
    let unfinished = &export.spans[2];
    // The swap holds from its turn on, so the second call names the model.
    assert_eq!(unfinished.name, "chat qwen3");
    assert_eq!(str_attr(unfinished, "gen_ai.request.model"), "qwen3");
    assert!(!bool_attr(unfinished, "cuca.turn.complete"));
    assert!(!has(unfinished, "gen_ai.usage.input_tokens"));
    assert_eq!(unfinished.events.len(), 1);
    assert_eq!(unfinished.events[0].name, "cuca.model_swap");
    assert_eq!(
        export.spans[1].name, "chat",
        "before the swap no model is known"
    );

    // --since: a session whose last record is older than the cutoff is left out whole.
    let last_ms = records.iter().map(|r| r.timestamp_ms).max().unwrap();
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
        3
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

#[tokio::test]
async fn a_fork_links_to_the_session_it_was_taken_from() {
    let dir = tempfile::tempdir().unwrap();
    let file = FileBackend::new(dir.path()).unwrap();
    cuca_testkit::append_all(&file, &cuca_testkit::demo_turn("demo", 0));
    let branch = file.fork("demo", "demo:1").unwrap();
    let backend: Arc<dyn SessionBackend> = Arc::new(file);

    let (url, received) = start_receiver().await;
    let exporter = Exporter::new(&url, "cuca", DEFAULT_REQUEST_TIMEOUT).unwrap();
    let mut spans = session_spans(Arc::clone(&backend), "demo", &ExportOptions::default())
        .unwrap()
        .spans;
    spans.extend(
        session_spans(backend, &branch, &ExportOptions::default())
            .unwrap()
            .spans,
    );
    exporter.send(spans).await.unwrap();
    let spans = received.spans();
    let root = spans
        .iter()
        .find(|s| s.name == format!("session {branch}"))
        .unwrap();
    assert_eq!(str_attr(root, "cuca.session.forked_from"), "demo:1");
    assert_eq!(root.links.len(), 1);
    assert_eq!(
        root.links[0].trace_id,
        ids::session_trace_id("demo").to_vec()
    );
    assert_eq!(
        root.links[0].span_id,
        ids::session_root_span_id("demo").to_vec()
    );
    assert_ne!(
        root.trace_id, root.links[0].trace_id,
        "a branch is a trace of its own"
    );
    // The Fork audit record, appended after the parent's last call, is no model call: it is
    // an event on the parent's session span.
    let demo_trace = ids::session_trace_id("demo").to_vec();
    let chats = spans
        .iter()
        .filter(|s| s.trace_id == demo_trace && s.name == "chat")
        .count();
    assert_eq!(chats, 1);
    let parent_root = spans.iter().find(|s| s.name == "session demo").unwrap();
    assert_eq!(int_attr(parent_root, "cuca.session.turns"), 1);
    let fork = parent_root
        .events
        .iter()
        .find(|e| e.name == "cuca.fork")
        .expect("the Fork audit record is an event");
    assert_eq!(
        attr(&fork.attributes, "cuca.fork.to_session"),
        Some(
            &cuca_otel::opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(
                branch.clone()
            )
        )
    );
}

#[tokio::test]
async fn call_metadata_names_each_calls_model_parameters_and_finish() {
    // Issue 23: `gen_ai.request.model`, `gen_ai.response.model`,
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
    let call = &export.spans[1];
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

/// Issue 28: a call whose records do not hold the whole call says so on its span
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
    let call = &export.spans[1];
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
    assert!(!has(&whole.spans[1], "cuca.call.incomplete"));
}
