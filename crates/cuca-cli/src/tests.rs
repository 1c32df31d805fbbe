//! Unit tests of the helpers the commands share.

use cuca::{SessionEvent, SessionRecord};

use crate::{fork_parent, kinds_line};

fn record(sequence: u64, event: SessionEvent) -> SessionRecord {
    SessionRecord {
        session_id: "demo".into(),
        sequence,
        timestamp_ms: 0,
        event,
    }
}

#[test]
fn kinds_line_prints_the_seed_shape_in_format_order() {
    // Seed 000: "appended 78 records: SystemPrompt 1, Message 1, Reasoning 72, Output 2, Latency 1, TokenUsage 1".
    let mut records = vec![
        record(
            0,
            SessionEvent::TokenUsage {
                prompt_tokens: 1,
                completion_tokens: 2,
            },
        ),
        record(1, SessionEvent::Latency { duration_ms: 3 }),
        record(2, SessionEvent::SystemPrompt { text: "s".into() }),
    ];
    for i in 0..72 {
        records.push(record(3 + i, SessionEvent::Reasoning { text: "r".into() }));
    }
    assert_eq!(
        kinds_line(&records),
        "SystemPrompt 1, Reasoning 72, Latency 1, TokenUsage 1"
    );
    assert_eq!(kinds_line(&[]), "");
}

#[test]
fn fork_parent_reads_nested_fork_ids() {
    assert_eq!(fork_parent("demo:fork:demo:1:0"), Some(("demo", "demo:1")));
    assert_eq!(
        fork_parent("demo:fork:demo:1:0:fork:demo:fork:demo:1:0:3:7"),
        Some(("demo:fork:demo:1:0", "demo:fork:demo:1:0:3"))
    );
    // A session id that only looks like a fork is not one.
    assert_eq!(fork_parent("a:fork:b:1:0"), None);
    assert_eq!(fork_parent("demo:fork:demo:1:x"), None);
    assert_eq!(fork_parent("demo"), None);
}

#[test]
fn timestamps_format_as_rfc3339_and_never_panic() {
    assert_eq!(crate::sessions::format_ms(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(
        crate::sessions::format_ms(1_700_000_000_123),
        "2023-11-14T22:13:20.123Z"
    );
    assert_eq!(
        crate::sessions::format_ms(u64::MAX),
        format!("{} ms", u64::MAX)
    );
}

#[test]
fn percentiles_are_nearest_rank() {
    let values: Vec<u64> = (1..=100).collect();
    assert_eq!(crate::logs::percentile_for_tests(&values, 0.5), Some(50));
    assert_eq!(crate::logs::percentile_for_tests(&values, 0.99), Some(99));
    assert_eq!(crate::logs::percentile_for_tests(&[7], 0.9), Some(7));
    assert_eq!(crate::logs::percentile_for_tests(&[], 0.5), None);
}

#[test]
fn counts_are_singular_for_one_only() {
    // One of a thing is singular: "1 agent", never "1 agents".
    assert_eq!(crate::ui::count(1u64, "agent", "agents"), "1 agent");
    assert_eq!(crate::ui::count(0u64, "agent", "agents"), "0 agents");
    assert_eq!(crate::ui::count(2u64, "call", "calls"), "2 calls");
}
