//! Searching a directory of a million records: a search across 1,000,000 records answers in
//! under 1 s warm on this machine.
//!
//! `search_1M/rare_word` finds the one record that holds a word among ten sessions of 100,000
//! records each (every record read, one hit); `search_1M/ignore_case` is the same search
//! case-insensitive; `search_1M/full_read_baseline` reads every record of the same sessions
//! through the same backend and does nothing else, what any search that reads everything pays
//! at least.
#![allow(clippy::expect_used, missing_docs)]

use std::ops::ControlFlow;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use cuca_events::{Message, SessionBackend, SessionEvent};
use cuca_search::Search;
use cuca_store_file::FileBackend;

const SESSIONS: u64 = 10;
const RECORDS_PER_SESSION: u64 = 100_000;

/// Turns of 100 records, as an agent's session holds them: the request's message and call
/// record, 94 streamed tokens, a tool call, the finish, and the Latency + TokenUsage pair.
fn sessions(dir: &std::path::Path) {
    let backend = FileBackend::new(dir).expect("backend");
    for session in 0..SESSIONS {
        let id = format!("agent-{session}");
        for sequence in 0..RECORDS_PER_SESSION {
            let turn = sequence / 100;
            let event = match sequence % 100 {
                0 => SessionEvent::Message(Message::user(format!(
                    "step {turn}: read the file and summarise what changed"
                ))),
                1 => SessionEvent::CallRequest {
                    model: "qwen2.5-coder-7b".into(),
                    parameters: "{\"temperature\":0}".into(),
                    tools: "[]".into(),
                    messages: 2,
                },
                96 => SessionEvent::ToolCall {
                    id: format!("call_{turn}"),
                    name: "read_file".into(),
                    arguments: format!("{{\"path\":\"src/module_{turn}.rs\"}}"),
                },
                97 => SessionEvent::CallFinish {
                    finish_reason: Some("tool_calls".into()),
                    model: "qwen2.5-coder-7b".into(),
                },
                98 => SessionEvent::Latency { duration_ms: 900 },
                99 => SessionEvent::TokenUsage {
                    prompt_tokens: 1200,
                    completion_tokens: 94,
                },
                // The one needle, mid-answer in the middle session.
                50 if session == 5 && turn == 500 => SessionEvent::Output {
                    text: " xylophone".into(),
                },
                _ => SessionEvent::Output {
                    text: " token".into(),
                },
            };
            backend
                .append(cuca_testkit::record(&id, sequence, event))
                .expect("append");
        }
    }
}

fn search(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    sessions(dir.path());
    let mut group = c.benchmark_group("search_1M");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for (name, search) in [
        ("rare_word", Search::new("xylophone")),
        ("ignore_case", Search::new("XYLOPHONE").ignore_case(true)),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut hits = Vec::new();
                let outcome = search
                    .run(dir.path(), |hit| {
                        hits.push(hit.point_id());
                        ControlFlow::Continue(())
                    })
                    .expect("search");
                assert_eq!(outcome.records, SESSIONS * RECORDS_PER_SESSION);
                assert_eq!(hits, ["agent-5:50050"]);
            })
        });
    }
    let backend = FileBackend::new(dir.path()).expect("backend");
    group.bench_function("full_read_baseline", |b| {
        b.iter(|| {
            let mut n = 0u64;
            for session in 0..SESSIONS {
                backend
                    .replay_each(&format!("agent-{session}"), &mut |_| {
                        n += 1;
                        Ok(())
                    })
                    .expect("read");
            }
            assert_eq!(n, SESSIONS * RECORDS_PER_SESSION);
        })
    });
    group.finish();
}

criterion_group!(benches, search);
criterion_main!(benches);
