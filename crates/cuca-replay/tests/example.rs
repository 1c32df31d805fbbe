//! The seed's example as a test: record session `demo` with a `SessionLogPlugin` over a
//! `FileBackend` in a temp dir, drop everything, then replay it from a fresh `FileBackend`,
//! with a fork-point prefix and a rebuilt `UnifiedResponse`.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cuca_events::{
    CucaPlugin, Message, MessageContentBlock, SessionEvent, TokenUsage, UnifiedRequest,
    UnifiedResponse,
};
use cuca_replay::{ReplayNote, SessionReplay};
use cuca_session_log::SessionLogPlugin;
use cuca_store_file::FileBackend;
use tokio_stream::StreamExt;

/// What the recording phase knows and the replay phase must reproduce.
struct Recorded {
    turns: Vec<UnifiedResponse>,
    branch: String,
}

fn response(
    blocks: Vec<MessageContentBlock>,
    duration_ms: u64,
    prompt_tokens: u64,
    completion_tokens: u64,
) -> UnifiedResponse {
    UnifiedResponse {
        model: "google/gemma-4-12b-qat".into(),
        provider: "llamacpp".into(),
        content: blocks,
        finish_reason: Some("stop".into()),
        token_usage: TokenUsage {
            prompt_tokens,
            completion_tokens,
        },
        duration: Duration::from_millis(duration_ms),
        call_id: Some("c-1".into()),
        ..UnifiedResponse::default()
    }
}

/// Records the seed's two turns ("The vault is in Lisbon. Reply with: noted", then "Where is
/// the vault? Answer in one word.") as a client would drive the hooks, then forks at demo:1,
/// the first Message record. Everything it opened is dropped when it returns.
async fn record_demo(dir: &Path) -> Recorded {
    let log =
        SessionLogPlugin::new(Arc::new(FileBackend::new(dir).unwrap())).with_session_id("demo");
    let system = Message::system("You are terse.");
    let first = Message::user("The vault is in Lisbon. Reply with: noted");
    let turns = vec![
        response(
            vec![
                MessageContentBlock::thinking("The user"),
                MessageContentBlock::thinking(" wants a short reply."),
                MessageContentBlock::text("not"),
                MessageContentBlock::text("ed"),
            ],
            412,
            31,
            9,
        ),
        response(
            vec![
                MessageContentBlock::thinking("It was Lisbon."),
                MessageContentBlock::text("Lisbon"),
            ],
            288,
            52,
            6,
        ),
    ];
    let requests = [
        vec![system.clone(), first.clone()],
        vec![
            system,
            first,
            Message::assistant("noted"),
            Message::user("Where is the vault? Answer in one word."),
        ],
    ];
    for (messages, turn) in requests.into_iter().zip(&turns) {
        let mut request = UnifiedRequest::new(messages);
        log.on_request(&mut request).await.unwrap();
        for block in &turn.content {
            log.on_stream_chunk(block).await.unwrap();
        }
        log.on_response_complete(turn).await.unwrap();
    }
    let branch = log.fork_session("demo", "demo:1").unwrap();
    Recorded { turns, branch }
}

/// "This program replays turn 0 of session demo from a directory of .cslog files that a
/// SessionLogPlugin wrote earlier. It sends no request, so it needs no server."
#[tokio::test(flavor = "current_thread")]
async fn the_seed_example_replays_turn_0_of_demo_from_a_fresh_file_backend(
) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let recorded = record_demo(dir.path()).await;

    // The seed's program, with the directory from the recording phase.
    let replay = SessionReplay::new(Arc::new(FileBackend::new(dir.path())?));
    let trajectory = replay.load("demo")?;
    let mut stream = trajectory.stream_turn(0)?;
    let mut streamed = Vec::new();
    while let Some(block) = stream.next().await {
        streamed.push(block?);
    }

    assert_eq!(streamed, recorded.turns[0].content);
    assert_eq!(trajectory.session_id(), "demo");
    // Two complete turns and the Fork audit record after the last pair.
    assert_eq!(trajectory.len(), 3);
    assert!(trajectory.turn(1).is_some_and(|turn| turn.is_complete()));
    let audit = trajectory.turn(2).unwrap();
    assert!(!audit.is_complete());
    let from_point = match audit.notes() {
        [ReplayNote::Fork {
            from_point,
            to_session,
        }] => {
            assert_eq!(to_session, &recorded.branch);
            from_point.clone()
        }
        other => panic!("expected one Fork note, got {other:?}"),
    };
    assert_eq!(from_point, "demo:1");

    // Fork-point prefix: the prefix of demo at the fork point is what the branch holds.
    let prefix = replay.load_at_point(&from_point)?;
    let branch = replay.load(&recorded.branch)?;
    assert_eq!(prefix.session_id(), "demo");
    assert_eq!(branch.session_id(), recorded.branch);
    assert_eq!(prefix.turns(), branch.turns());
    assert_eq!(prefix.usage().records, 2);
    let head = prefix.turn(0).unwrap();
    assert_eq!(head.system_prompts(), ["You are terse.".to_owned()]);
    assert_eq!(
        head.messages(),
        [Message::user("The vault is in Lisbon. Reply with: noted")]
    );
    assert!(head.blocks().is_empty());
    assert!(!head.is_complete());

    // The rebuilt UnifiedResponse: what on_response_complete saw, less what no record holds.
    for (turn_idx, original) in recorded.turns.iter().enumerate() {
        let rebuilt = trajectory
            .turn(turn_idx)
            .unwrap()
            .response(original.model.clone(), original.provider.clone());
        let expected = UnifiedResponse {
            finish_reason: None,
            usage: None,
            prompt_cache_usage: None,
            call_id: None,
            ..original.clone()
        };
        assert_eq!(rebuilt, expected, "turn {turn_idx}");
    }
    assert_eq!(
        trajectory.turn(1).unwrap().response("m", "p").text(),
        "Lisbon"
    );

    // The file holds the records the replay counted: nothing was dropped on the way.
    let raw = cuca_events::SessionBackend::replay(&FileBackend::new(dir.path())?, "demo")?;
    assert_eq!(trajectory.usage().records, raw.len());
    assert!(matches!(
        raw.last().map(|r| &r.event),
        Some(SessionEvent::Fork { .. })
    ));
    Ok(())
}
