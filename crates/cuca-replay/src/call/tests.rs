//! Unit tests for call metadata: where the new records land, and what they leave unchanged.

use cuca_events::{Message, SessionEvent, SessionRecord};
use cuca_testkit::record;

use crate::trajectory::segment;
use crate::ReplayConfig;

fn records(events: Vec<SessionEvent>) -> Vec<SessionRecord> {
    events
        .into_iter()
        .enumerate()
        .map(|(sequence, event)| record("s", sequence as u64, event))
        .collect()
}

fn call_request() -> SessionEvent {
    SessionEvent::CallRequest {
        model: "tiny".into(),
        parameters: "{\"temperature\":0.0}".into(),
        tools: "[]".into(),
        messages: 2,
    }
}

fn call_finish() -> SessionEvent {
    SessionEvent::CallFinish {
        finish_reason: Some("length".into()),
        model: "cuca-tiny-random".into(),
    }
}

/// "expose the new records to replay users alongside, e.g. as the turn's call metadata, not
/// by changing what the seed defines" — the seed's lists, range and response are those of the
/// same turn recorded without the two records.
#[test]
fn call_records_become_the_turns_call_metadata_and_change_nothing_the_seed_defines() {
    let with = vec![
        SessionEvent::SystemPrompt { text: "t".into() },
        SessionEvent::Message(Message::user("hi")),
        call_request(),
        SessionEvent::Output {
            text: "noted".into(),
        },
        call_finish(),
        SessionEvent::Latency { duration_ms: 3 },
        SessionEvent::TokenUsage {
            prompt_tokens: 4,
            completion_tokens: 5,
        },
        SessionEvent::Output {
            text: "next".into(),
        },
    ];
    let without: Vec<SessionEvent> = with
        .iter()
        .filter(|e| {
            !matches!(
                e,
                SessionEvent::CallRequest { .. } | SessionEvent::CallFinish { .. }
            )
        })
        .cloned()
        .collect();
    let a = segment("s".into(), records(with), &ReplayConfig::default()).unwrap();
    let b = segment("s".into(), records(without), &ReplayConfig::default()).unwrap();
    assert_eq!(a.len(), 2);
    assert_eq!(b.len(), 2);
    let (turn, plain) = (&a.turns()[0], &b.turns()[0]);
    assert_eq!(turn.system_prompts(), plain.system_prompts());
    assert_eq!(turn.messages(), plain.messages());
    assert_eq!(turn.blocks(), plain.blocks());
    assert_eq!(turn.notes(), plain.notes());
    assert_eq!(turn.completion(), plain.completion());
    assert_eq!(turn.response("m", "p"), plain.response("m", "p"));
    assert_eq!(turn.response("m", "p").finish_reason, None);

    let call = turn.call();
    assert_eq!(call.request().map(|r| r.model.as_str()), Some("tiny"));
    assert_eq!(
        call.request().map(|r| r.parameters.as_str()),
        Some("{\"temperature\":0.0}")
    );
    assert_eq!(call.request().map(|r| r.messages), Some(2));
    assert_eq!(call.finish_reason(), Some("length"));
    assert_eq!(call.served_model(), Some("cuca-tiny-random"));
    assert!(call.has_finish());
    assert!(plain.call().is_empty());
    // The record after the pair opens the next turn, which has no call metadata.
    assert!(a.turns()[1].call().is_empty());
    assert_eq!(a.usage().records, 8);
    assert_eq!(a.turns()[0].n_records(), 7);
}
