//! The journal's structural laws hold under any interleaving of agents on threads.
//!
//! "The written pools are therefore always a contiguous prefix and no entry can reference a
//! body that was never written."
// Test-crate helpers outside #[test] functions unwrap too, as tests do.
#![allow(clippy::unwrap_used)]

mod capture_support;

use std::collections::HashMap;
use std::time::Duration;

use capture_support::*;
use cuca_events::{
    Message, MessageContentBlock, Role, ToolDefinition, UnifiedRequest, UnifiedResponse,
};
use cuca_journal::clip::STREAM_CLIP_BYTES;
use cuca_journal::format::{RequestRole, Retention, ShellOrigin, Slot};
use cuca_journal::{FrameEntry, Recorder, RecorderConfig, ShellRun, ToolOutcome};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    ModelIo {
        messages: Vec<u8>,
        tools: bool,
        answer: u8,
    },
    Tool {
        output: u8,
    },
    Shell {
        stdout: u8,
        long: bool,
    },
    Frame {
        messages: Vec<u8>,
    },
    Clock,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (
            proptest::collection::vec(0u8..6, 1..5),
            any::<bool>(),
            0u8..4
        )
            .prop_map(|(messages, tools, answer)| Op::ModelIo {
                messages,
                tools,
                answer
            }),
        (0u8..5).prop_map(|output| Op::Tool { output }),
        (0u8..4, any::<bool>()).prop_map(|(stdout, long)| Op::Shell { stdout, long }),
        proptest::collection::vec(0u8..6, 0..4).prop_map(|messages| Op::Frame { messages }),
        Just(Op::Clock),
    ]
}

fn message(n: u8) -> Message {
    match n % 3 {
        0 => Message::user(format!("message {n}")),
        1 => Message {
            role: Role::Tool,
            content: vec![MessageContentBlock::ToolResult {
                tool_call_id: format!("c{n}"),
                // Shared with the tool outputs below, so texts interleave with messages.
                content: format!("output {}", n % 5),
                is_error: false,
            }],
        },
        _ => Message {
            role: Role::User,
            content: vec![MessageContentBlock::ImageBase64 {
                media_type: "image/png".into(),
                data: format!("QUJD{n}"),
            }],
        },
    }
}

fn run(recorder: &Recorder, agent: &str, op: &Op) {
    match op {
        Op::ModelIo {
            messages,
            tools,
            answer,
        } => {
            let mut request = UnifiedRequest::new(messages.iter().map(|&n| message(n)).collect());
            if *tools {
                request.tools = vec![ToolDefinition {
                    name: "shell".into(),
                    description: "run".into(),
                    parameters: serde_json::json!({}),
                }];
            }
            let response = UnifiedResponse {
                content: vec![MessageContentBlock::text(format!("answer {answer}"))],
                ..UnifiedResponse::default()
            };
            recorder.model_io(
                agent,
                &request,
                RequestRole::AgentTurn,
                &response,
                Duration::ZERO,
            );
        }
        Op::Tool { output } => recorder.tool_result(
            agent,
            &ToolOutcome {
                call_id: "c",
                name: "read_file",
                arguments: "{}",
                output: &format!("output {output}"),
                is_error: false,
            },
        ),
        Op::Shell { stdout, long } => {
            let stdout = if *long {
                format!("{stdout}{}", "z".repeat(STREAM_CLIP_BYTES))
            } else {
                format!("output {stdout}")
            };
            recorder.shell(
                agent,
                &ShellRun {
                    origin: ShellOrigin::ShellTool,
                    command: "cat",
                    cwd: std::path::Path::new("."),
                    exit_status: Some(0),
                    stdout: &stdout,
                    stderr: "",
                },
            );
        }
        Op::Frame { messages } => {
            let owned: Vec<Message> = messages.iter().map(|&n| message(n)).collect();
            let items: Vec<FrameEntry<'_>> = owned
                .iter()
                .map(|m| FrameEntry {
                    message: m,
                    retention: Retention::Compactable,
                    region: None,
                    turn: 1,
                    slot: Slot::Conversation,
                })
                .collect();
            recorder.prompt_frame(agent, 1, &items);
        }
        Op::Clock => recorder.clock(agent, Duration::from_millis(5), None),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn pools_stay_contiguous_and_entries_reference_only_earlier_lines(
        threads in proptest::collection::vec(proptest::collection::vec(op(), 1..25), 1..5),
        ceiling in proptest::option::of(1_000u64..40_000),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut config = RecorderConfig::new(dir.path(), "prop").unwrap();
        if let Some(ceiling) = ceiling {
            config = config.with_max_bytes(ceiling);
        }
        let recorder = Recorder::start(config).unwrap();
        std::thread::scope(|scope| {
            for (n, ops) in threads.iter().enumerate() {
                let recorder = recorder.clone();
                scope.spawn(move || {
                    let agent = format!("a{n}");
                    for op in ops {
                        run(&recorder, &agent, op);
                    }
                });
            }
        });
        let status = recorder.finish();
        let lines = read_journal(recorder.path());
        // A stop mid-run (the byte ceiling, raced for by every thread) still leaves a journal
        // that obeys every law: the pools are a contiguous prefix.
        check_laws(&lines);
        let end = end(&lines).unwrap();
        prop_assert_eq!(end.stop_reason, status.stopped);
        if let Some(reason) = status.stopped {
            prop_assert_eq!(reason, cuca_journal::format::StopReason::ByteCeiling);
            prop_assert!(ceiling.is_some());
            prop_assert_eq!(end.entries, status.entries);
            return Ok(());
        }
        let mut per_agent: HashMap<String, usize> = HashMap::new();
        for entry in entries(&lines) {
            *per_agent.entry(entry.agent.clone()).or_default() += 1;
        }
        for (n, ops) in threads.iter().enumerate() {
            prop_assert_eq!(per_agent.get(&format!("a{n}")).copied().unwrap_or(0), ops.len());
        }
        let total: usize = threads.iter().map(Vec::len).sum();
        prop_assert_eq!(end.entries, total as u64);
    }
}
