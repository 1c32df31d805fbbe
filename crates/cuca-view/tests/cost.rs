//! The viewer's session header and each turn show what the calls cost, priced from their
//! token kinds, and "unknown" for a model no table prices.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns: a failed step is a failed test

mod support;

use cuca_events::{Message, SessionBackend, SessionEvent, SessionRecord, TokenDetail};
use cuca_store_file::FileBackend;

fn write_call(backend: &FileBackend, session: &str, model: &str) {
    let events = [
        SessionEvent::Message(Message::user("Where is the vault?")),
        SessionEvent::CallRequest {
            model: model.into(),
            parameters: "{}".into(),
            tools: "[]".into(),
            messages: 1,
        },
        SessionEvent::Output {
            text: "Lisbon.".into(),
        },
        SessionEvent::CallFinish {
            finish_reason: Some("end_turn".into()),
            model: model.into(),
        },
        SessionEvent::TokenDetail(TokenDetail {
            input: Some(26),
            output: Some(57),
            cache_read: Some(3_401),
            cache_write: Some(1_201),
            cache_write_5m: Some(1_000),
            cache_write_1h: Some(201),
            ..TokenDetail::default()
        }),
        SessionEvent::Latency { duration_ms: 900 },
        SessionEvent::TokenUsage {
            prompt_tokens: 4_628,
            completion_tokens: 57,
        },
    ];
    for (sequence, event) in events.into_iter().enumerate() {
        backend
            .append(SessionRecord {
                session_id: session.into(),
                sequence: sequence as u64,
                timestamp_ms: 1_796_000_000_000 + sequence as u64,
                event,
            })
            .unwrap();
    }
}

#[tokio::test]
async fn the_session_header_and_each_turn_show_the_cost_and_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    write_call(&backend, "priced", "claude-sonnet-4-5-20250929");
    write_call(&backend, "unpriced", "mystery-model-9");
    let base = support::serve(cuca_view::ViewConfig::new(vec![dir.path().to_owned()])).await;

    let body = reqwest::get(format!("{base}/sessions/priced"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // 26 × $3/M + 57 × $15/M + 3,401 × $0.30/M + 1,000 × $3.75/M + 201 × $6/M = $0.006909.
    assert!(body.contains(r#"id="summary-cost""#), "{body}");
    assert_eq!(
        body.matches("$0.006909").count(),
        2,
        "header and turn: {body}"
    );
    assert!(body.contains("priced by LiteLLM"), "{body}");
    assert!(
        body.contains("3401 cache read"),
        "the kinds are shown: {body}"
    );

    let body = reqwest::get(format!("{base}/sessions/unpriced"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(body.contains(r#"<span class="cost""#), "{body}");
    assert!(!body.contains("$0.000000"), "{body}");
    assert!(body.contains(">unknown<"), "{body}");
}
