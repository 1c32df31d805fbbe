//! The store both `cuca cost` benches price: `n` records in sessions of 1,000, one model call
//! every 10 records with its `TokenDetail`, three models of which one the bundled table does
//! not price.

use std::path::Path;

use cuca::{FileBackend, Message, SessionBackend, SessionEvent, SessionRecord, TokenDetail};

/// Records per session: a long agent session's worth.
pub(crate) const SESSION_RECORDS: u64 = 1_000;

/// The record at `sequence` of every session: a call of ten records.
pub(crate) fn event(sequence: u64) -> SessionEvent {
    let models = ["claude-sonnet-4-5-20250929", "gpt-4o", "mystery-model"];
    let model = models[(sequence / 10 % 3) as usize];
    match sequence % 10 {
        0 => SessionEvent::Message(Message::user(format!("question {sequence}"))),
        1 => SessionEvent::CallRequest {
            model: model.into(),
            parameters: "{}".into(),
            tools: "[]".into(),
            messages: sequence / 10 + 1,
        },
        2..=5 => SessionEvent::Output {
            text: " tok".into(),
        },
        6 => SessionEvent::CallFinish {
            finish_reason: Some("stop".into()),
            model: model.into(),
        },
        7 => SessionEvent::TokenDetail(TokenDetail {
            input: Some(26),
            output: Some(57),
            cache_read: Some(3_401),
            cache_write: Some(1_201),
            ..TokenDetail::default()
        }),
        8 => SessionEvent::Latency { duration_ms: 900 },
        _ => SessionEvent::TokenUsage {
            prompt_tokens: 4_628,
            completion_tokens: 57,
        },
    }
}

/// Writes the store of `n` records into `dir` (sessions `s0000`, `s0001`, …, an hour apart,
/// records a second apart: 1,000 sessions span 42 days).
pub(crate) fn build(dir: &Path, n: u64) {
    let backend = FileBackend::new(dir).unwrap();
    for at in 0..n {
        let session = at / SESSION_RECORDS;
        let sequence = at % SESSION_RECORDS;
        backend
            .append(SessionRecord {
                session_id: format!("s{session:04}"),
                sequence,
                timestamp_ms: 1_796_000_000_000 + session * 3_600_000 + sequence * 1_000,
                event: event(sequence),
            })
            .unwrap();
    }
}
