//! Unit tests for segmentation: where each event lands, unpaired terminators, caps, responses.

use std::task::{Context, Poll};
use std::time::Duration;

use cuca_events::{
    Message, MessageContentBlock, PluginError, SessionEvent, SessionRecord, TokenUsage,
};
use cuca_testkit::{demo_turn, record};

use super::{segment, ReplayCompletion, ReplayNote, ReplayTrajectory};
use crate::ReplayConfig;

fn records(events: Vec<SessionEvent>) -> Vec<SessionRecord> {
    events
        .into_iter()
        .enumerate()
        .map(|(sequence, event)| record("s", sequence as u64, event))
        .collect()
}

fn load(events: Vec<SessionEvent>) -> ReplayTrajectory {
    segment("s".into(), records(events), &ReplayConfig::default()).unwrap()
}

fn output(text: &str) -> SessionEvent {
    SessionEvent::Output { text: text.into() }
}

fn latency(duration_ms: u64) -> SessionEvent {
    SessionEvent::Latency { duration_ms }
}

fn usage(prompt_tokens: u64, completion_tokens: u64) -> SessionEvent {
    SessionEvent::TokenUsage {
        prompt_tokens,
        completion_tokens,
    }
}

#[test]
fn each_event_kind_lands_where_the_seed_says() {
    let trajectory = load(vec![
        SessionEvent::SystemPrompt {
            text: "terse".into(),
        },
        SessionEvent::Message(Message::user("hi")),
        SessionEvent::Reasoning {
            text: "think".into(),
        },
        output("answer"),
        SessionEvent::ToolCall {
            id: "c1".into(),
            name: "ls".into(),
            arguments: "{}".into(),
        },
        SessionEvent::ToolResult {
            tool_call_id: "c1".into(),
            content: "a b".into(),
            is_error: true,
            stdout: Some("a b".into()),
            stderr: Some("warn".into()),
            exit_code: Some(2),
        },
        SessionEvent::ModelSwap {
            from: "small".into(),
            to: "big".into(),
            reason: "too hard".into(),
        },
        SessionEvent::Fork {
            from_point: "s:1".into(),
            to_session: "s:fork:s:1:0".into(),
        },
        latency(412),
        usage(31, 9),
    ]);
    assert_eq!(trajectory.len(), 1);
    let turn = trajectory.turn(0).unwrap();
    assert_eq!(turn.system_prompts(), ["terse".to_owned()]);
    assert_eq!(turn.messages(), [Message::user("hi")]);
    assert_eq!(
        turn.blocks(),
        [
            MessageContentBlock::thinking("think"),
            MessageContentBlock::text("answer"),
            MessageContentBlock::ToolCall {
                id: "c1".into(),
                name: "ls".into(),
                arguments: "{}".into(),
            },
            // "SessionEvent::ToolResult carries stdout, stderr and exit_code, which
            // MessageContentBlock::ToolResult has no field for."
            MessageContentBlock::ToolResult {
                tool_call_id: "c1".into(),
                content: "a b".into(),
                is_error: true,
            },
        ]
    );
    assert_eq!(
        turn.notes(),
        [
            ReplayNote::ModelSwap {
                from: "small".into(),
                to: "big".into(),
                reason: "too hard".into(),
            },
            ReplayNote::Fork {
                from_point: "s:1".into(),
                to_session: "s:fork:s:1:0".into(),
            },
        ]
    );
    assert_eq!(
        turn.completion(),
        Some(ReplayCompletion {
            duration_ms: 412,
            prompt_tokens: 31,
            completion_tokens: 9,
        })
    );
    assert!(turn.is_complete());
    assert_eq!(turn.sequence_range(), 0..=9);
    assert_eq!(turn.n_records(), 10);
}

#[test]
fn a_lone_latency_stays_in_its_turn_and_the_turn_stays_open() {
    // The decision this crate documents on ReplayNote::UnpairedLatency: only the adjacent
    // pair closes a turn.
    let trajectory = load(vec![
        output("a"),
        latency(5),
        output("b"),
        latency(7),
        usage(1, 2),
    ]);
    assert_eq!(trajectory.len(), 1, "the lone Latency did not close a turn");
    let turn = trajectory.turn(0).unwrap();
    assert_eq!(
        turn.notes(),
        [ReplayNote::UnpairedLatency { duration_ms: 5 }]
    );
    assert_eq!(
        turn.blocks(),
        [
            MessageContentBlock::text("a"),
            MessageContentBlock::text("b")
        ]
    );
    assert_eq!(turn.completion().map(|c| c.duration_ms), Some(7));
    assert_eq!(turn.n_records(), 5);
}

#[test]
fn two_latencies_in_a_row_pair_the_second() {
    let trajectory = load(vec![latency(1), latency(2), usage(3, 4)]);
    let turn = trajectory.turn(0).unwrap();
    assert_eq!(
        turn.notes(),
        [ReplayNote::UnpairedLatency { duration_ms: 1 }]
    );
    assert_eq!(turn.completion().map(|c| c.duration_ms), Some(2));
}

#[test]
fn a_latency_at_the_end_is_a_note_of_the_open_final_turn() {
    let trajectory = load(vec![
        output("a"),
        latency(1),
        usage(3, 4),
        output("b"),
        latency(9),
    ]);
    assert_eq!(trajectory.len(), 2);
    let tail = trajectory.turn(1).unwrap();
    assert!(!tail.is_complete());
    assert_eq!(tail.completion(), None);
    assert_eq!(tail.sequence_range(), 3..=4);
    assert_eq!(
        tail.notes(),
        [ReplayNote::UnpairedLatency { duration_ms: 9 }]
    );
}

#[test]
fn a_token_usage_without_its_latency_does_not_close_a_turn() {
    let trajectory = load(vec![
        usage(1, 2),
        output("a"),
        latency(3),
        output("x"),
        usage(5, 6),
    ]);
    assert_eq!(trajectory.len(), 1);
    let turn = trajectory.turn(0).unwrap();
    assert!(!turn.is_complete());
    assert_eq!(
        turn.notes(),
        [
            ReplayNote::UnpairedTokenUsage {
                prompt_tokens: 1,
                completion_tokens: 2,
            },
            ReplayNote::UnpairedLatency { duration_ms: 3 },
            ReplayNote::UnpairedTokenUsage {
                prompt_tokens: 5,
                completion_tokens: 6,
            },
        ]
    );
}

#[test]
fn the_turn_block_cap_refuses_and_the_cap_itself_loads() {
    let config = ReplayConfig::new(100, 2, None).unwrap();
    let at_cap = records(vec![
        output("a"),
        output("b"),
        latency(1),
        usage(1, 1),
        output("c"),
    ]);
    let loaded = segment("s".into(), at_cap, &config).unwrap();
    assert_eq!(loaded.usage().blocks, 3);

    let over = records(vec![
        output("a"),
        latency(1),
        usage(1, 1),
        output("b"),
        output("c"),
        output("d"),
    ]);
    match segment("s".into(), over, &config) {
        Err(PluginError::Validation { schema, message }) => {
            assert_eq!(schema, "ReplayConfig::max_turn_blocks");
            assert!(message.contains("turn 1"), "{message}");
            assert!(message.contains("s:5"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_turn_starts_with_room_for_the_last_ones_blocks_and_keeps_at_most_twice_its_own() {
    let mut events: Vec<SessionEvent> = (0..40).map(|_| output("x")).collect();
    events.extend([latency(1), usage(1, 1)]);
    events.extend((0..40).map(|_| output("y")));
    events.extend([
        latency(1),
        usage(1, 1),
        output("z"),
        latency(1),
        usage(1, 1),
    ]);
    events.extend([latency(1), usage(1, 1)]);
    let trajectory = load(events);
    let capacities: Vec<(usize, usize)> = trajectory
        .turns()
        .iter()
        .map(|turn| (turn.blocks().len(), turn.blocks.capacity()))
        .collect();
    // The second turn was started with exactly the first one's 40; the third, started with
    // 40, gave back what it did not use. No turn keeps more than twice its blocks (rounded
    // up): the fourth, empty, was started with room for the third's one.
    assert_eq!(capacities[1], (40, 40));
    assert_eq!(capacities[2], (1, 1));
    assert_eq!(capacities[3], (0, 1));
    for (len, capacity) in capacities {
        assert!(
            capacity <= 2 * len + 1,
            "{len} blocks in room for {capacity}"
        );
    }
}

#[test]
fn usage_is_counted_once_at_load() {
    let mut two_turns = demo_turn("s", 0);
    two_turns.extend(demo_turn("s", 7));
    two_turns.push(record("s", 14, output("tail")));
    let config = ReplayConfig::new(20, 10, Some(0.75)).unwrap();
    let trajectory = segment("s".into(), two_turns, &config).unwrap();
    let usage = trajectory.usage();
    assert_eq!(usage.records, 15);
    assert_eq!(usage.max_records, 20);
    assert_eq!(usage.blocks, 7);
    assert_eq!(usage.turns, 3);
    assert!(usage.near_cap, "15 records is 75% of 20");
}

#[test]
fn response_rebuilds_the_aggregate_and_zeroes_a_missing_completion() {
    let trajectory = load(
        demo_turn("s", 0)
            .into_iter()
            .chain([record("s", 7, output("more"))])
            .map(|r| r.event)
            .collect(),
    );
    let complete = trajectory.turn(0).unwrap().response("gemma", "llamacpp");
    assert_eq!(complete.model, "gemma");
    assert_eq!(complete.provider, "llamacpp");
    assert_eq!(complete.content, trajectory.turn(0).unwrap().blocks());
    assert_eq!(complete.text(), "noted");
    assert_eq!(
        complete.token_usage,
        TokenUsage {
            prompt_tokens: 31,
            completion_tokens: 9,
        }
    );
    assert_eq!(complete.duration, Duration::from_millis(412));
    assert_eq!(complete.finish_reason, None);
    assert_eq!(complete.usage, None);
    assert_eq!(complete.prompt_cache_usage, None);
    assert_eq!(complete.call_id, None);

    // "a turn with no terminator reports zero tokens and zero duration."
    let open = trajectory.turn(1).unwrap().response("m", "p");
    assert_eq!(open.content, [MessageContentBlock::text("more")]);
    assert_eq!(open.token_usage, TokenUsage::default());
    assert_eq!(open.duration, Duration::ZERO);
}

#[test]
fn the_stream_is_always_ready_and_reports_its_exact_length() {
    let trajectory = load(demo_turn("s", 0).into_iter().map(|r| r.event).collect());
    let mut stream = trajectory.stream_turn(0).unwrap();
    assert_eq!(stream.size_hint(), (3, Some(3)));
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut seen = Vec::new();
    loop {
        match stream.as_mut().poll_next(&mut cx) {
            Poll::Ready(Some(Ok(block))) => seen.push(block),
            Poll::Ready(None) => break,
            other => panic!("a replay stream yielded {other:?}"),
        }
    }
    assert_eq!(seen, trajectory.turn(0).unwrap().blocks());
    assert_eq!(stream.size_hint(), (0, Some(0)));
    // A finished stream stays finished.
    assert!(matches!(
        stream.as_mut().poll_next(&mut cx),
        Poll::Ready(None)
    ));
}
