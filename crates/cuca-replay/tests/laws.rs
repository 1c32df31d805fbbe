//! The replay laws as proptest properties over generated record sequences: segmentation,
//! determinism of the stream, and the caps.

// Fixture helpers outside #[test] fns unwrap too: a broken fixture should stop the test loudly.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use cuca_events::{
    AgentResponseStream, Message, MessageContentBlock, PluginError, SessionBackend, SessionEvent,
    SessionRecord,
};
use cuca_replay::{ReplayCompletion, ReplayConfig, ReplayNote, ReplayTrajectory, SessionReplay};
use cuca_store_mem::InMemoryBackend;
use proptest::prelude::*;

fn text() -> impl Strategy<Value = String> {
    "[a-z ]{0,6}"
}

/// Every event kind, weighted towards Latency and TokenUsage so that pairs, lone halves and
/// back-to-back halves all turn up often.
fn event() -> impl Strategy<Value = SessionEvent> {
    prop_oneof![
        1 => text().prop_map(|text| SessionEvent::SystemPrompt { text }),
        1 => text().prop_map(|text| SessionEvent::Message(Message::user(text))),
        3 => text().prop_map(|text| SessionEvent::Reasoning { text }),
        3 => text().prop_map(|text| SessionEvent::Output { text }),
        1 => (text(), text()).prop_map(|(id, arguments)| SessionEvent::ToolCall {
            id,
            name: "ls".into(),
            arguments,
        }),
        1 => (text(), any::<bool>(), proptest::option::of(text()), proptest::option::of(any::<i32>()))
            .prop_map(|(content, is_error, stdout, exit_code)| SessionEvent::ToolResult {
                tool_call_id: "c".into(),
                content,
                is_error,
                stdout,
                stderr: None,
                exit_code,
            }),
        3 => (0u64..10_000).prop_map(|duration_ms| SessionEvent::Latency { duration_ms }),
        3 => (0u64..1_000, 0u64..1_000).prop_map(|(prompt_tokens, completion_tokens)| {
            SessionEvent::TokenUsage { prompt_tokens, completion_tokens }
        }),
        1 => text().prop_map(|reason| SessionEvent::ModelSwap {
            from: "a".into(),
            to: "b".into(),
            reason,
        }),
        1 => text().prop_map(|to_session| SessionEvent::Fork {
            from_point: "s:0".into(),
            to_session,
        }),
    ]
}

/// A session of generated events with increasing sequence numbers, gaps included: backends
/// store records as given.
fn session() -> impl Strategy<Value = Vec<SessionRecord>> {
    proptest::collection::vec((event(), 1u64..3), 0..120).prop_map(|events| {
        let mut sequence = 0;
        events
            .into_iter()
            .map(|(event, step)| {
                sequence += step;
                SessionRecord {
                    session_id: "s".into(),
                    sequence,
                    timestamp_ms: sequence,
                    event,
                }
            })
            .collect()
    })
}

fn replay_of(records: &[SessionRecord], config: ReplayConfig) -> SessionReplay {
    let backend = InMemoryBackend::with_max_records(records.len().max(1)).unwrap();
    for record in records {
        backend.append(record.clone()).unwrap();
    }
    SessionReplay::with_config(Arc::new(backend), config).unwrap()
}

fn roomy() -> ReplayConfig {
    ReplayConfig::new(1_000, 1_000, None).unwrap()
}

/// Whether record `idx` is the TokenUsage of a Latency-then-TokenUsage pair.
fn closes(records: &[SessionRecord], idx: usize) -> bool {
    idx > 0
        && matches!(records[idx].event, SessionEvent::TokenUsage { .. })
        && matches!(records[idx - 1].event, SessionEvent::Latency { .. })
}

fn block_of(event: &SessionEvent) -> Option<MessageContentBlock> {
    match event.clone() {
        SessionEvent::Reasoning { text } => Some(MessageContentBlock::Thinking { thinking: text }),
        SessionEvent::Output { text } => Some(MessageContentBlock::Text { text }),
        SessionEvent::ToolCall {
            id,
            name,
            arguments,
        } => Some(MessageContentBlock::ToolCall {
            id,
            name,
            arguments,
        }),
        SessionEvent::ToolResult {
            tool_call_id,
            content,
            is_error,
            ..
        } => Some(MessageContentBlock::ToolResult {
            tool_call_id,
            content,
            is_error,
        }),
        _ => None,
    }
}

/// The notes the records `start..end` should leave, by the documented rules.
fn notes_of(records: &[SessionRecord], start: usize, end: usize) -> Vec<ReplayNote> {
    (start..end)
        .filter_map(|idx| match records[idx].event.clone() {
            SessionEvent::ModelSwap { from, to, reason } => {
                Some(ReplayNote::ModelSwap { from, to, reason })
            }
            SessionEvent::Fork {
                from_point,
                to_session,
            } => Some(ReplayNote::Fork {
                from_point,
                to_session,
            }),
            SessionEvent::Latency { duration_ms }
                if !(idx + 1 < end && closes(records, idx + 1)) =>
            {
                Some(ReplayNote::UnpairedLatency { duration_ms })
            }
            SessionEvent::TokenUsage {
                prompt_tokens,
                completion_tokens,
            } if !closes(records, idx) => Some(ReplayNote::UnpairedTokenUsage {
                prompt_tokens,
                completion_tokens,
            }),
            _ => None,
        })
        .collect()
}

/// Polls a stream to its end with a noop waker, failing on `Pending` or `Err`.
fn drain(mut stream: AgentResponseStream) -> Result<Vec<MessageContentBlock>, String> {
    let mut cx = Context::from_waker(Waker::noop());
    let mut blocks = Vec::new();
    loop {
        match stream.as_mut().poll_next(&mut cx) {
            Poll::Ready(Some(Ok(block))) => blocks.push(block),
            Poll::Ready(None) => return Ok(blocks),
            Poll::Ready(Some(Err(error))) => return Err(format!("yielded Err({error})")),
            Poll::Pending => return Err("returned Pending".into()),
        }
    }
}

fn streamed_blocks(trajectory: &ReplayTrajectory) -> Result<Vec<Vec<MessageContentBlock>>, String> {
    (0..trajectory.len())
        .map(|turn_idx| {
            let stream = trajectory
                .stream_turn(turn_idx)
                .map_err(|e| e.to_string())?;
            drain(stream)
        })
        .collect()
}

proptest! {
    /// "A turn closes on the Latency then TokenUsage pair [...] Records after the last pair
    /// form a final turn with completion() == None and is_complete() == false. They are never
    /// merged into the previous turn and never dropped." And "Each SessionEvent lands in the
    /// turn it belongs to."
    #[test]
    fn every_record_lands_in_exactly_one_turn(records in session()) {
        let trajectory = replay_of(&records, roomy()).load("s").unwrap();
        let closing: Vec<usize> = (0..records.len()).filter(|&idx| closes(&records, idx)).collect();
        let trailing = records.len() - closing.last().map_or(0, |&idx| idx + 1);
        prop_assert_eq!(trajectory.len(), closing.len() + usize::from(trailing > 0));
        prop_assert_eq!(trajectory.usage().turns, trajectory.len());
        prop_assert_eq!(trajectory.usage().records, records.len());

        let mut start = 0;
        for (turn_idx, turn) in trajectory.turns().iter().enumerate() {
            let end = start + turn.n_records();
            prop_assert!(turn.n_records() > 0, "turn {} is empty", turn_idx);
            let slice = &records[start..end];
            prop_assert_eq!(turn.sequence_range(), slice[0].sequence..=slice[slice.len() - 1].sequence);

            let complete = closing.contains(&(end - 1));
            prop_assert_eq!(turn.is_complete(), complete);
            if complete {
                let expected = match (&records[end - 2].event, &records[end - 1].event) {
                    (
                        SessionEvent::Latency { duration_ms },
                        SessionEvent::TokenUsage { prompt_tokens, completion_tokens },
                    ) => ReplayCompletion {
                        duration_ms: *duration_ms,
                        prompt_tokens: *prompt_tokens,
                        completion_tokens: *completion_tokens,
                    },
                    other => panic!("oracle: not a pair {other:?}"),
                };
                prop_assert_eq!(turn.completion(), Some(expected));
                // A pair inside the turn would have closed it earlier.
                prop_assert!(!closing.iter().any(|&idx| idx >= start && idx < end - 1));
            } else {
                prop_assert_eq!(turn_idx, trajectory.len() - 1, "only the final turn may be open");
                prop_assert_eq!(turn.completion(), None);
            }

            let blocks: Vec<_> = slice.iter().filter_map(|r| block_of(&r.event)).collect();
            prop_assert_eq!(turn.blocks(), blocks.as_slice());
            let messages: Vec<Message> = slice
                .iter()
                .filter_map(|r| match &r.event { SessionEvent::Message(m) => Some(m.clone()), _ => None })
                .collect();
            prop_assert_eq!(turn.messages(), messages.as_slice());
            let prompts: Vec<String> = slice
                .iter()
                .filter_map(|r| match &r.event { SessionEvent::SystemPrompt { text } => Some(text.clone()), _ => None })
                .collect();
            prop_assert_eq!(turn.system_prompts(), prompts.as_slice());
            let notes = notes_of(&records, start, end);
            prop_assert_eq!(turn.notes(), notes.as_slice());

            // Every record is accounted for exactly once by the lists it fed.
            let pair = if complete { 2 } else { 0 };
            prop_assert_eq!(
                turn.n_records(),
                turn.system_prompts().len() + turn.messages().len() + turn.blocks().len() + turn.notes().len() + pair
            );
            start = end;
        }
        prop_assert_eq!(start, records.len(), "every record landed in a turn");
        let n_blocks: usize = trajectory.turns().iter().map(|t| t.blocks().len()).sum();
        prop_assert_eq!(trajectory.usage().blocks, n_blocks);
    }

    /// "The stream is order-deterministic [...] Its poll_next never sleeps, never returns
    /// Poll::Pending and never yields Err, so two loads of one trajectory give identical block
    /// sequences."
    #[test]
    fn two_loads_stream_identical_blocks_and_never_pend(records in session()) {
        let replay = replay_of(&records, roomy());
        let first = replay.load("s").unwrap();
        let second = replay.load("s").unwrap();
        prop_assert_eq!(&first, &second);
        let first_blocks = streamed_blocks(&first);
        let second_blocks = streamed_blocks(&second);
        prop_assert!(first_blocks.is_ok(), "{:?}", first_blocks);
        prop_assert_eq!(&first_blocks, &second_blocks);
        let recorded: Vec<Vec<MessageContentBlock>> =
            first.turns().iter().map(|turn| turn.blocks().to_vec()).collect();
        prop_assert_eq!(first_blocks.unwrap(), recorded);
        // A second stream of the same turn starts again from the first block.
        if !first.is_empty() {
            prop_assert_eq!(drain(first.stream_turn(0).unwrap()), drain(first.stream_turn(0).unwrap()));
        }
    }

    /// "A silently shortened trajectory is a wrong fixture and a wrong eval, so replay
    /// refuses", and "warn_fraction is the fraction of max_records at which
    /// ReplayUsage::near_cap turns true".
    #[test]
    fn over_the_caps_load_refuses_and_near_cap_flips_at_warn_fraction(
        records in session(),
        max_records in 1usize..150,
        max_turn_blocks in 1usize..40,
        warn_fraction in proptest::option::of(0.01f64..=1.0),
    ) {
        let config = ReplayConfig::new(max_records, max_turn_blocks, warn_fraction).unwrap();
        let result = replay_of(&records, config).load("s");

        let unbounded = replay_of(&records, roomy()).load("s").unwrap();
        let biggest_turn = unbounded.turns().iter().map(|t| t.blocks().len()).max().unwrap_or(0);
        let over_records = records.len() > max_records;
        let over_blocks = biggest_turn > max_turn_blocks;
        match result {
            Ok(trajectory) => {
                prop_assert!(!over_records && !over_blocks);
                // Loaded whole: nothing was shortened to fit.
                prop_assert_eq!(trajectory.turns(), unbounded.turns());
                prop_assert_eq!(trajectory.usage().records, records.len());
                prop_assert_eq!(trajectory.usage().blocks, unbounded.usage().blocks);
                let near = config.warn_at().is_some_and(|at| records.len() >= at);
                prop_assert_eq!(trajectory.usage().near_cap, near);
                prop_assert_eq!(trajectory.usage().max_records, max_records);
            }
            Err(PluginError::Validation { schema, .. }) => {
                let expected = if over_records { "ReplayConfig::max_records" } else { "ReplayConfig::max_turn_blocks" };
                prop_assert!(over_records || over_blocks);
                prop_assert_eq!(schema, expected);
            }
            Err(other) => prop_assert!(false, "unexpected error {other}"),
        }
    }

    /// near_cap is false one record below `ceil(warn_fraction * max_records)` and true at it.
    #[test]
    fn near_cap_flips_exactly_at_the_threshold(max_records in 1usize..300, warn_fraction in 0.001f64..=1.0) {
        let config = ReplayConfig::new(max_records, 1_000, Some(warn_fraction)).unwrap();
        let at = config.warn_at().unwrap();
        prop_assert!((1..=max_records).contains(&at));
        prop_assert!(at as f64 >= warn_fraction * max_records as f64);
        prop_assert!(((at - 1) as f64) < warn_fraction * max_records as f64);
        let outputs = |n: usize| -> Vec<SessionRecord> {
            (0..n as u64)
                .map(|sequence| cuca_testkit::record("s", sequence, SessionEvent::Output { text: "x".into() }))
                .collect()
        };
        // One turn of `at` blocks: keep the block cap out of the way.
        let below = replay_of(&outputs(at - 1), config).load("s").unwrap();
        let reached = replay_of(&outputs(at), config).load("s").unwrap();
        prop_assert!(!below.usage().near_cap);
        prop_assert!(reached.usage().near_cap);
        let over = replay_of(&outputs(max_records + 1), config).load("s");
        prop_assert!(matches!(over, Err(PluginError::Validation { .. })), "{:?}", over.map(|t| t.usage()));
    }
}
