//! A call's every token kind and its cost reach its span in the GenAI keys and OpenInference's,
//! so a backend (Phoenix) shows cache hits and cost; a model no table prices gets no cost.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use cuca_events::{SessionBackend, SessionEvent, TokenDetail};
use cuca_otel::opentelemetry_proto::tonic::common::v1::any_value::Value;
use cuca_otel::opentelemetry_proto::tonic::trace::v1::Span;
use cuca_otel::{session_spans, ExportOptions};

/// One call of `model` that read 3,401 tokens from the cache and wrote 1,201 (1,000 for
/// 5 minutes, 201 for an hour), as the proxy records an Anthropic answer.
fn call_span(session: &str, model: &str) -> Span {
    let backend: Arc<dyn SessionBackend> = Arc::new(cuca_store_mem::InMemoryBackend::new());
    let mut records = cuca_testkit::demo_turn(session, 0);
    let at = records.len() - 2;
    records.insert(
        at,
        cuca_testkit::record(
            session,
            0,
            SessionEvent::CallFinish {
                finish_reason: Some("end_turn".into()),
                model: model.into(),
            },
        ),
    );
    records.insert(
        at + 1,
        cuca_testkit::record(
            session,
            0,
            SessionEvent::TokenDetail(TokenDetail {
                input: Some(26),
                output: Some(57),
                cache_read: Some(3_401),
                cache_write: Some(1_201),
                cache_write_5m: Some(1_000),
                cache_write_1h: Some(201),
                ..TokenDetail::default()
            }),
        ),
    );
    for (i, record) in records.iter_mut().enumerate() {
        record.sequence = i as u64;
    }
    cuca_testkit::append_all(backend.as_ref(), &records);
    let export = session_spans(backend, session, &ExportOptions::default()).unwrap();
    assert_eq!(export.n_turns, 1);
    export.spans.into_iter().next().unwrap()
}

fn float_attr(span: &Span, key: &str) -> f64 {
    match attr(&span.attributes, key) {
        Some(Value::DoubleValue(v)) => *v,
        other => panic!("{key} is {other:?}"),
    }
}

#[test]
fn cache_reads_and_writes_are_sent_in_both_conventions_with_the_cost() {
    let span = call_span("cached", "claude-sonnet-4-5-20250929");
    assert_eq!(
        int_attr(&span, "gen_ai.usage.cache_read.input_tokens"),
        3_401
    );
    assert_eq!(
        int_attr(&span, "gen_ai.usage.cache_creation.input_tokens"),
        1_201
    );
    assert_eq!(
        int_attr(&span, "llm.token_count.prompt_details.cache_read"),
        3_401
    );
    assert_eq!(
        int_attr(&span, "llm.token_count.prompt_details.cache_write"),
        1_201
    );
    let prompt = 26.0 * 3e-6 + 3_401.0 * 0.3e-6 + 1_000.0 * 3.75e-6 + 201.0 * 6e-6;
    let completion = 57.0 * 15e-6;
    assert!((float_attr(&span, "llm.cost.prompt") - prompt).abs() < 1e-12);
    assert!((float_attr(&span, "llm.cost.completion") - completion).abs() < 1e-12);
    assert!((float_attr(&span, "llm.cost.total") - (prompt + completion)).abs() < 1e-12);
    assert!(str_attr(&span, "cuca.cost.priced_by").starts_with("LiteLLM"));
    // Reasoning was not reported, so it is not sent as 0.
    assert!(!has(&span, "llm.token_count.completion_details.reasoning"));
}

#[test]
fn a_model_no_table_prices_has_no_cost_attribute_and_says_why() {
    let span = call_span("unpriced", "mystery-model-9");
    assert_eq!(
        int_attr(&span, "llm.token_count.prompt_details.cache_read"),
        3_401
    );
    assert!(!has(&span, "llm.cost.total"));
    assert!(str_attr(&span, "cuca.cost.unknown").contains("mystery-model-9"));
}
