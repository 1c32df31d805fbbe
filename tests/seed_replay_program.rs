//! The replay seed's example program, verbatim, compiled against the facade under
//! `service-replay` and run over a recording this test makes.
//!
//! Seed 001, "Example": "This program replays turn 0 of session demo from a directory of
//! .cslog files that a SessionLogPlugin wrote earlier. It sends no request, so it needs no
//! server." The program below is the seed's text, unchanged; the test calls its `main`.
#![cfg(feature = "service-replay")]
#![allow(clippy::unwrap_used)]

// --- the seed's program, verbatim ---
use std::sync::Arc;

use cuca::{FileBackend, SessionReplay};
use tokio_stream::StreamExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let replay = SessionReplay::new(Arc::new(FileBackend::new("sessions")?));
    let trajectory = replay.load("demo")?;
    let mut stream = trajectory.stream_turn(0)?;
    while let Some(block) = stream.next().await {
        println!("{:?}", block?);
    }
    Ok(())
}
// --- end of the seed's program ---

use cuca::{
    CucaPlugin, Message, MessageContentBlock, PluginError, SessionBackend, SessionLogPlugin,
    TokenUsage, UnifiedRequest, UnifiedResponse,
};

/// Records one turn of session `demo` into `dir` the way a client drives the hooks.
fn record_demo(dir: &std::path::Path) -> Vec<MessageContentBlock> {
    let log =
        SessionLogPlugin::new(Arc::new(FileBackend::new(dir).unwrap())).with_session_id("demo");
    let blocks = vec![
        MessageContentBlock::thinking("The user wants a short reply."),
        MessageContentBlock::text("noted"),
    ];
    block_on(async {
        let mut request = UnifiedRequest::new(vec![
            Message::system("You are terse."),
            Message::user("The vault is in Lisbon. Reply with: noted"),
        ]);
        log.on_request(&mut request).await.unwrap();
        for block in &blocks {
            log.on_stream_chunk(block).await.unwrap();
        }
        let response = UnifiedResponse {
            content: blocks.clone(),
            token_usage: TokenUsage {
                prompt_tokens: 31,
                completion_tokens: 9,
            },
            ..UnifiedResponse::default()
        };
        log.on_response_complete(&response).await.unwrap();
    });
    blocks
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

/// One test, because the seed's program names the relative directory `sessions` and the
/// working directory is per process.
#[test]
fn the_seed_replay_program_compiles_against_the_facade_and_replays_turn_0() {
    let dir = tempfile::tempdir().unwrap();
    std::env::set_current_dir(dir.path()).unwrap();

    // Nothing recorded yet: session "demo" loads empty, so turn 0 is refused by name.
    let error = main().unwrap_err();
    let error = error.downcast::<PluginError>().unwrap();
    match *error {
        PluginError::Validation {
            ref schema,
            ref message,
        } => {
            assert_eq!(schema, "turn_idx");
            assert!(message.contains("\"demo\""), "{message}");
        }
        ref other => panic!("expected Validation, got {other:?}"),
    }

    // "a directory of .cslog files that a SessionLogPlugin wrote earlier"
    let sessions = dir.path().join("sessions");
    let blocks = record_demo(&sessions);
    main().unwrap();

    // What the program printed is what was recorded: the same load, read back here.
    let replayed = SessionReplay::new(Arc::new(FileBackend::new(&sessions).unwrap()))
        .load("demo")
        .unwrap();
    assert_eq!(replayed.len(), 1);
    assert_eq!(replayed.turn(0).unwrap().blocks(), blocks.as_slice());
    assert_eq!(
        FileBackend::new(&sessions)
            .unwrap()
            .replay("demo")
            .unwrap()
            .len(),
        6
    );
}
