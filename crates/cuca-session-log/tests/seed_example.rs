//! The seed's worked example ("Session log" page, "Example"), without a network: two turns
//! driven through the hooks with the block shapes a streaming reasoning server produces,
//! recorded by two plugin instances over InMemoryBackend and FileBackend, then a fork at the
//! first Message record.

// Helpers outside #[test] fns unwrap too: a failed hook is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cuca_events::{
    CucaPlugin, Message, MessageContentBlock, SessionBackend, SessionEvent, SessionRecord,
    TokenUsage, UnifiedRequest, UnifiedResponse,
};
use cuca_session_log::SessionLogPlugin;
use cuca_store_file::FileBackend;
use cuca_store_mem::InMemoryBackend;

const SYSTEM: &str = "You are a terse assistant.";
const TURN_1: &str = "The vault is in Lisbon. Reply with: noted";
const TURN_2: &str = "Where is the vault? Answer in one word.";

/// One streamed turn as a reasoning server sends it: many token-sized Thinking blocks, then
/// the answer in two Text blocks.
struct Streamed {
    n_thinking: usize,
    answer: [&'static str; 2],
    usage: TokenUsage,
    duration: Duration,
}

impl Streamed {
    fn blocks(&self) -> Vec<MessageContentBlock> {
        let mut blocks: Vec<MessageContentBlock> = (0..self.n_thinking)
            .map(|i| MessageContentBlock::thinking(format!(" thought{i}")))
            .collect();
        blocks.extend(
            self.answer
                .iter()
                .map(|text| MessageContentBlock::text(*text)),
        );
        blocks
    }

    fn reply(&self) -> String {
        self.answer.concat()
    }
}

/// Runs the hooks the way a client does: every plugin in registration order, per hook.
async fn drive(plugins: &[Arc<dyn CucaPlugin>], request: &mut UnifiedRequest, turn: &Streamed) {
    for plugin in plugins {
        plugin.on_request(request).await.unwrap();
    }
    let blocks = turn.blocks();
    for block in &blocks {
        for plugin in plugins {
            plugin.on_stream_chunk(block).await.unwrap();
        }
    }
    let response = UnifiedResponse {
        model: "google/gemma-4-12b-qat".into(),
        provider: "llamacpp".into(),
        content: blocks,
        finish_reason: Some("stop".into()),
        token_usage: turn.usage,
        duration: turn.duration,
        ..UnifiedResponse::default()
    };
    assert_eq!(response.text(), turn.reply());
    for plugin in plugins {
        plugin.on_response_complete(&response).await.unwrap();
    }
}

fn counts(records: &[SessionRecord]) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for record in records {
        *counts.entry(record.event.kind()).or_default() += 1;
    }
    counts
}

fn expected(pattern: &[(&'static str, usize)]) -> BTreeMap<&'static str, usize> {
    pattern.iter().copied().collect()
}

/// What two backends must agree on: everything but the timestamps, which each plugin stamps
/// from the clock itself.
fn trajectory(records: &[SessionRecord]) -> Vec<(String, u64, SessionEvent)> {
    records
        .iter()
        .map(|record| {
            (
                record.session_id.clone(),
                record.sequence,
                record.event.clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn seed_example_two_turns_two_backends_then_a_fork_at_the_first_message() {
    let dir = tempfile::tempdir().unwrap();
    let memory_backend = Arc::new(InMemoryBackend::new());
    let memory_log = Arc::new(
        SessionLogPlugin::new(Arc::clone(&memory_backend) as Arc<dyn SessionBackend>)
            .with_session_id("demo"),
    );
    let file_log = Arc::new(
        SessionLogPlugin::new(Arc::new(FileBackend::new(dir.path()).unwrap()))
            .with_session_id("demo"),
    );
    let plugins: Vec<Arc<dyn CucaPlugin>> = vec![
        Arc::clone(&memory_log) as Arc<dyn CucaPlugin>,
        Arc::clone(&file_log) as Arc<dyn CucaPlugin>,
    ];

    // Turn 1: "The vault is in Lisbon. Reply with: noted"
    let turn1 = Streamed {
        n_thinking: 72,
        answer: ["not", "ed"],
        usage: TokenUsage {
            prompt_tokens: 31,
            completion_tokens: 81,
        },
        duration: Duration::from_millis(1_412),
    };
    let mut request = UnifiedRequest::new(vec![Message::system(SYSTEM), Message::user(TURN_1)]);
    drive(&plugins, &mut request, &turn1).await;
    let after1 = memory_backend.replay("demo").unwrap();
    // "appended 78 records: SystemPrompt 1, Message 1, Reasoning 72, Output 2, Latency 1,
    // TokenUsage 1"
    assert_eq!(after1.len(), 78);
    assert_eq!(
        counts(&after1),
        expected(&[
            ("SystemPrompt", 1),
            ("Message", 1),
            ("Reasoning", 72),
            ("Output", 2),
            ("Latency", 1),
            ("TokenUsage", 1),
        ])
    );
    // "gauge: 78/65536 records in memory"
    assert_eq!(memory_backend.gauge().records, Some(78));
    assert_eq!(memory_backend.gauge().max_records, Some(65_536));
    let bytes_after1 = file_log.backend().gauge().bytes_on_disk.unwrap();
    assert!(bytes_after1 > 9, "header plus frames, got {bytes_after1}");

    // Turn 2: "Where is the vault? Answer in one word."
    let turn2 = Streamed {
        n_thinking: 128,
        answer: ["Lis", "bon"],
        usage: TokenUsage {
            prompt_tokens: 52,
            completion_tokens: 137,
        },
        duration: Duration::from_millis(2_730),
    };
    request
        .messages
        .extend([Message::assistant(turn1.reply()), Message::user(TURN_2)]);
    drive(&plugins, &mut request, &turn2).await;
    let after2 = memory_backend.replay("demo").unwrap();
    // "appended 135 records: SystemPrompt 1, Message 2, Reasoning 128, Output 2, Latency 1,
    // TokenUsage 1" — "Turn 2 appends a second SystemPrompt because only user and assistant
    // messages are deduplicated by position."
    assert_eq!(after2.len(), 78 + 135);
    assert_eq!(after2[..78], after1[..]);
    assert_eq!(
        counts(&after2[78..]),
        expected(&[
            ("SystemPrompt", 1),
            ("Message", 2),
            ("Reasoning", 128),
            ("Output", 2),
            ("Latency", 1),
            ("TokenUsage", 1),
        ])
    );
    let turn2_messages: Vec<&Message> = after2[78..]
        .iter()
        .filter_map(|record| match &record.event {
            SessionEvent::Message(message) => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(
        turn2_messages,
        [&Message::assistant("noted"), &Message::user(TURN_2)]
    );
    assert_eq!(
        after2[after2.len() - 2..]
            .iter()
            .map(|record| record.event.clone())
            .collect::<Vec<_>>(),
        [
            SessionEvent::Latency { duration_ms: 2_730 },
            SessionEvent::TokenUsage {
                prompt_tokens: 52,
                completion_tokens: 137
            },
        ]
    );
    assert!(file_log.backend().gauge().bytes_on_disk.unwrap() > bytes_after1);

    // "The file backend replays the same trajectory: 213 records"
    let from_file = file_log.backend().replay("demo").unwrap();
    assert_eq!(from_file.len(), 213);
    assert_eq!(trajectory(&from_file), trajectory(&after2));
    assert_eq!(
        after2.iter().map(|r| r.sequence).collect::<Vec<_>>(),
        (0..213).collect::<Vec<u64>>()
    );

    // "Fork at demo:1, the first Message record"
    let first_message = after2
        .iter()
        .find(|record| matches!(record.event, SessionEvent::Message(_)))
        .unwrap();
    let point = first_message.point_id();
    assert_eq!(point, "demo:1");
    let branch = memory_log.fork_session("demo", &point).unwrap();
    // "new session: demo:fork:demo:1:0"
    assert_eq!(branch, "demo:fork:demo:1:0");
    // "branch: 2 records: SystemPrompt 1, Message 1"
    let branch_records = memory_backend.replay(&branch).unwrap();
    assert_eq!(
        branch_records
            .iter()
            .map(|record| record.event.clone())
            .collect::<Vec<_>>(),
        [
            SessionEvent::SystemPrompt {
                text: SYSTEM.into()
            },
            SessionEvent::Message(Message::user(TURN_1)),
        ]
    );
    assert!(branch_records
        .iter()
        .all(|record| record.session_id == branch));
    // "original tail: Fork { from_point: "demo:1", to_session: "demo:fork:demo:1:0" }" and
    // "original: 214 records, one more than before the fork"
    let original = memory_backend.replay("demo").unwrap();
    assert_eq!(original.len(), 214);
    assert_eq!(original[..213], after2[..]);
    let tail = original.last().unwrap();
    assert_eq!(tail.sequence, 213);
    assert_eq!(
        tail.event,
        SessionEvent::Fork {
            from_point: "demo:1".into(),
            to_session: "demo:fork:demo:1:0".into(),
        }
    );
    // The fork touched the in-memory backend only.
    assert_eq!(file_log.backend().replay("demo").unwrap().len(), 213);
}
