//! `SessionReplay::each_turn`: the turns a load builds, handed over part by part with
//! nothing kept, and no cap on the session's length.

#![allow(clippy::unwrap_used)]

use std::ops::ControlFlow;
use std::sync::Arc;

use cuca_events::{Message, MessageContentBlock, SessionBackend, SessionEvent, SessionRecord};
use cuca_replay::{
    ReplayCompletion, ReplayConfig, ReplayNote, ReplayTrajectory, SessionReplay, TurnPart,
};
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
        // Call metadata (`SessionLogPlugin::with_call_metadata`, what `cuca proxy` records).
        1 => (text(), 0u64..9).prop_map(|(model, messages)| SessionEvent::CallRequest {
            model,
            parameters: "{}".into(),
            tools: "[]".into(),
            messages,
        }),
        1 => proptest::option::of(text()).prop_map(|finish_reason| SessionEvent::CallFinish {
            finish_reason,
            model: "m".into(),
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

/// One turn rebuilt from its parts, in the shape of a loaded `ReplayTurn`.
#[derive(Debug, Default, PartialEq)]
struct Rebuilt {
    system_prompts: Vec<String>,
    messages: Vec<Message>,
    blocks: Vec<MessageContentBlock>,
    notes: Vec<ReplayNote>,
    completion: Option<ReplayCompletion>,
    first_sequence: u64,
    last_sequence: u64,
    records: usize,
}

fn rebuilt_from_load(trajectory: &ReplayTrajectory) -> Vec<Rebuilt> {
    trajectory
        .turns()
        .iter()
        .map(|turn| Rebuilt {
            system_prompts: turn.system_prompts().to_vec(),
            messages: turn.messages().to_vec(),
            blocks: turn.blocks().to_vec(),
            notes: turn.notes().to_vec(),
            completion: turn.completion(),
            first_sequence: *turn.sequence_range().start(),
            last_sequence: *turn.sequence_range().end(),
            records: turn.n_records(),
        })
        .collect()
}

fn rebuilt_from_parts(
    replay: &SessionReplay,
    through: Option<u64>,
) -> (Vec<Rebuilt>, cuca_replay::SessionOutline) {
    let mut turns: Vec<Rebuilt> = Vec::new();
    let mut visit = |part: TurnPart| {
        match part {
            TurnPart::Start {
                turn,
                first_sequence,
            } => {
                assert_eq!(turn, turns.len());
                turns.push(Rebuilt {
                    first_sequence,
                    ..Rebuilt::default()
                });
            }
            TurnPart::SystemPrompt(text) => turns.last_mut().unwrap().system_prompts.push(text),
            TurnPart::Message(message) => turns.last_mut().unwrap().messages.push(message),
            TurnPart::Block(block) => turns.last_mut().unwrap().blocks.push(block),
            TurnPart::Note(note) => turns.last_mut().unwrap().notes.push(note),
            // Kept apart from the seed's lists, as a load keeps them in `ReplayTurn::call`.
            TurnPart::Call(event) => assert!(matches!(
                event,
                SessionEvent::CallRequest { .. } | SessionEvent::CallFinish { .. }
            )),
            TurnPart::End(outline) => {
                assert_eq!(outline.turn + 1, turns.len());
                let turn = turns.last_mut().unwrap();
                assert_eq!(outline.blocks, turn.blocks.len());
                assert_eq!(outline.notes, turn.notes.len());
                assert_eq!(outline.system_prompts, turn.system_prompts.len());
                assert_eq!(outline.messages, turn.messages.len());
                assert_eq!(outline.first_sequence, turn.first_sequence);
                turn.completion = outline.completion;
                turn.last_sequence = outline.last_sequence;
                turn.records = outline.records;
            }
            other => panic!("unexpected part {other:?}"),
        }
        Ok(ControlFlow::Continue(()))
    };
    let outline = match through {
        Some(sequence) => replay.each_turn_through("s", sequence, &mut visit),
        None => replay.each_turn("s", &mut visit),
    }
    .unwrap();
    (turns, outline)
}

fn replay_of(records: &[SessionRecord]) -> SessionReplay {
    let backend = Arc::new(InMemoryBackend::new());
    for record in records {
        backend.append(record.clone()).unwrap();
    }
    SessionReplay::new(backend)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// "stream turn by turn through a library API built for it": every turn `load` builds,
    /// with the same parts in the same order, and the same counts.
    #[test]
    fn each_turn_hands_over_what_load_builds(records in session()) {
        let replay = replay_of(&records);
        let loaded = replay.load("s").unwrap();
        let (turns, outline) = rebuilt_from_parts(&replay, None);
        prop_assert_eq!(&turns, &rebuilt_from_load(&loaded));
        let usage = loaded.usage();
        prop_assert_eq!((outline.records, outline.turns, outline.blocks, outline.stopped), (usage.records, usage.turns, usage.blocks, false));
    }

    /// The prefix through a point is what `load_prefix` builds.
    #[test]
    fn each_turn_through_hands_over_what_load_prefix_builds(records in session(), at in any::<prop::sample::Index>()) {
        prop_assume!(!records.is_empty());
        let sequence = records[at.index(records.len())].sequence;
        let replay = replay_of(&records);
        let loaded = replay.load_prefix("s", sequence).unwrap();
        let (turns, outline) = rebuilt_from_parts(&replay, Some(sequence));
        prop_assert_eq!(&turns, &rebuilt_from_load(&loaded));
        prop_assert_eq!(outline.records, loaded.usage().records);
    }
}

#[test]
fn each_turn_is_not_capped_where_a_load_is_and_stops_when_asked() {
    // "the caps stay what they are for library callers who load whole trajectories".
    let mut records = Vec::new();
    for turn in 0..4u64 {
        records.extend(cuca_testkit::demo_turn("s", turn * 7));
    }
    let backend = Arc::new(InMemoryBackend::new());
    cuca_testkit::append_all(backend.as_ref(), &records);
    let replay =
        SessionReplay::with_config(backend, ReplayConfig::new(10, 10, None).unwrap()).unwrap();
    assert!(replay.load("s").is_err());
    let mut ends = Vec::new();
    let outline = replay
        .each_turn("s", &mut |part| {
            if let TurnPart::End(outline) = part {
                ends.push((outline.turn, outline.records, outline.is_complete()));
            }
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
    assert_eq!((outline.records, outline.turns), (28, 4));
    assert_eq!(
        ends,
        [(0, 7, true), (1, 7, true), (2, 7, true), (3, 7, true)]
    );

    // A visitor that breaks at the end of turn 1 sees nothing of turns 2 and 3.
    let mut starts = 0;
    let stopped = replay
        .each_turn("s", &mut |part| {
            match part {
                TurnPart::Start { .. } => starts += 1,
                TurnPart::End(outline) if outline.turn == 1 => return Ok(ControlFlow::Break(())),
                _ => {}
            }
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
    assert!(stopped.stopped);
    assert_eq!((starts, stopped.turns, stopped.records), (2, 2, 14));

    // A point no record has is refused, as load_prefix refuses it.
    let missing = replay.each_turn_through("s", 999, &mut |_| Ok(ControlFlow::Continue(())));
    assert!(matches!(
        missing,
        Err(cuca_events::PluginError::Validation { .. })
    ));
}

#[test]
fn a_final_turn_of_audit_notes_only_says_so() {
    // A fork of a finished session leaves a Fork audit record after the last
    // pair; it is segmented as a final turn (seed 001), and the outline says it holds notes only.
    let mut records = cuca_testkit::demo_turn("s", 0);
    records.push(cuca_testkit::record(
        "s",
        7,
        SessionEvent::Fork {
            from_point: "s:1".into(),
            to_session: "s:fork:s:1:0".into(),
        },
    ));
    let replay = replay_of(&records);
    let mut outlines = Vec::new();
    replay
        .each_turn("s", &mut |part| {
            if let TurnPart::End(outline) = part {
                outlines.push(outline);
            }
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
    assert_eq!(outlines.len(), 2);
    assert!(!outlines[0].holds_only_notes());
    assert!(outlines[1].holds_only_notes() && !outlines[1].is_complete());
    // An unfinished call is not notes only.
    let mut open = records[..3].to_vec();
    open.push(cuca_testkit::record(
        "s",
        3,
        SessionEvent::Latency { duration_ms: 5 },
    ));
    let mut last = None;
    replay_of(&open)
        .each_turn("s", &mut |part| {
            if let TurnPart::End(outline) = part {
                last = Some(outline);
            }
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
    assert!(!last.unwrap().holds_only_notes());
}

#[test]
fn call_metadata_records_are_handed_over_as_call_parts_in_their_turn() {
    // A session recorded by `cuca proxy` holds CallRequest and CallFinish records: a reader
    // of any length must take them as a load does, not refuse the session.
    let events = vec![
        SessionEvent::Message(Message::user("hi")),
        SessionEvent::CallRequest {
            model: "gemma".into(),
            parameters: "{}".into(),
            tools: "[]".into(),
            messages: 1,
        },
        SessionEvent::Output {
            text: "hello".into(),
        },
        SessionEvent::CallFinish {
            finish_reason: Some("stop".into()),
            model: "gemma-q4".into(),
        },
        SessionEvent::Latency { duration_ms: 9 },
        SessionEvent::TokenUsage {
            prompt_tokens: 3,
            completion_tokens: 1,
        },
    ];
    let records: Vec<SessionRecord> = events
        .into_iter()
        .enumerate()
        .map(|(i, event)| SessionRecord {
            session_id: "s".into(),
            sequence: i as u64,
            timestamp_ms: 0,
            event,
        })
        .collect();
    let replay = replay_of(&records);
    let mut kinds = Vec::new();
    let outline = replay
        .each_turn("s", &mut |part| {
            kinds.push(match part {
                TurnPart::Start { .. } => "start".to_owned(),
                TurnPart::Message(_) => "message".to_owned(),
                TurnPart::Block(_) => "block".to_owned(),
                TurnPart::Call(event) => format!("call:{}", event.kind()),
                TurnPart::End(outline) => format!("end:{}", outline.is_complete()),
                other => format!("{other:?}"),
            });
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
    assert_eq!(
        kinds,
        [
            "start",
            "message",
            "call:CallRequest",
            "block",
            "call:CallFinish",
            "end:true"
        ]
    );
    assert_eq!((outline.turns, outline.records), (1, 6));
    let loaded = replay.load("s").unwrap();
    assert_eq!(loaded.turn(0).unwrap().call().finish_reason(), Some("stop"));
}
