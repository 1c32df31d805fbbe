//! Replay against what `SessionLogPlugin` really recorded, and proof that replayed blocks
//! reach no plugin.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cuca_events::{
    async_trait, CucaPlugin, Message, MessageContentBlock, PluginError, SessionBackend, TokenUsage,
    UnifiedRequest, UnifiedResponse,
};
use cuca_replay::{ReplayCompletion, SessionReplay};
use cuca_session_log::SessionLogPlugin;
use cuca_store_mem::InMemoryBackend;
use tokio_stream::StreamExt;

/// Counts every hook call it receives. The tests hold one beside a replay and check that
/// nothing ever called it.
#[derive(Default)]
struct CountingPlugin {
    calls: AtomicUsize,
}

#[async_trait]
impl CucaPlugin for CountingPlugin {
    async fn on_request(&self, _: &mut UnifiedRequest) -> Result<(), PluginError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    async fn on_stream_chunk(&self, _: &MessageContentBlock) -> Result<(), PluginError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    async fn on_response_complete(&self, _: &UnifiedResponse) -> Result<(), PluginError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// The blocks one turn of each test streams: every kind the log records, and one image it
/// does not.
fn turn_blocks(turn_idx: usize) -> Vec<MessageContentBlock> {
    vec![
        MessageContentBlock::thinking(format!("turn {turn_idx}: the user")),
        MessageContentBlock::thinking(" wants a tool"),
        MessageContentBlock::ToolCall {
            id: format!("call-{turn_idx}"),
            name: "read_file".into(),
            arguments: r#"{"path":"vault.txt"}"#.into(),
        },
        MessageContentBlock::ToolResult {
            tool_call_id: format!("call-{turn_idx}"),
            content: "Lisbon".into(),
            is_error: false,
        },
        MessageContentBlock::ImageBase64 {
            media_type: "image/png".into(),
            data: "iVBORw0KGgo=".into(),
        },
        MessageContentBlock::text("Lis"),
        MessageContentBlock::text("bon"),
    ]
}

/// Drives the plugin's three hooks the way a client does for one turn.
async fn record_turn(
    log: &SessionLogPlugin,
    messages: Vec<Message>,
    blocks: &[MessageContentBlock],
    response: &UnifiedResponse,
) {
    let mut request = UnifiedRequest::new(messages);
    log.on_request(&mut request).await.unwrap();
    for block in blocks {
        log.on_stream_chunk(block).await.unwrap();
    }
    log.on_response_complete(response).await.unwrap();
}

fn response_of(
    blocks: &[MessageContentBlock],
    duration_ms: u64,
    prompt_tokens: u64,
) -> UnifiedResponse {
    UnifiedResponse {
        model: "gemma".into(),
        provider: "llamacpp".into(),
        content: blocks.to_vec(),
        finish_reason: Some("stop".into()),
        token_usage: TokenUsage {
            prompt_tokens,
            completion_tokens: 7,
        },
        duration: Duration::from_millis(duration_ms),
        ..UnifiedResponse::default()
    }
}

/// "A turn closes on the Latency then TokenUsage pair that SessionLogPlugin::on_response_complete
/// always appends", and the blocks replayed are the blocks the hooks saw, less what the log
/// never records: "MessageContentBlock::ImageBase64 is never recorded".
#[tokio::test(flavor = "current_thread")]
async fn a_replayed_turn_streams_what_the_session_log_recorded() {
    let log = SessionLogPlugin::new(Arc::new(InMemoryBackend::new())).with_session_id("demo");
    let system = Message::system("You are terse.");
    let first = Message::user("Where is the vault?");
    let second = Message::user("Say it again.");
    let turns = [turn_blocks(0), turn_blocks(1)];
    let responses = [
        response_of(&turns[0], 412, 31),
        response_of(&turns[1], 97, 58),
    ];
    record_turn(
        &log,
        vec![system.clone(), first.clone()],
        &turns[0],
        &responses[0],
    )
    .await;
    record_turn(
        &log,
        vec![
            system.clone(),
            first.clone(),
            Message::assistant("Lisbon"),
            second.clone(),
        ],
        &turns[1],
        &responses[1],
    )
    .await;
    // The start of a third turn whose response never completed.
    log.on_stream_chunk(&MessageContentBlock::text("cut off"))
        .await
        .unwrap();

    let trajectory = SessionReplay::new(log.backend()).load("demo").unwrap();
    assert_eq!(trajectory.len(), 3);
    for (turn_idx, (blocks, response)) in turns.iter().zip(&responses).enumerate() {
        let expected: Vec<MessageContentBlock> = blocks
            .iter()
            .filter(|block| !matches!(block, MessageContentBlock::ImageBase64 { .. }))
            .cloned()
            .collect();
        let turn = trajectory.turn(turn_idx).unwrap();
        assert_eq!(turn.blocks(), expected.as_slice(), "turn {turn_idx}");
        let mut streamed = Vec::new();
        let mut stream = trajectory.stream_turn(turn_idx).unwrap();
        while let Some(block) = stream.next().await {
            streamed.push(block.unwrap());
        }
        assert_eq!(streamed, expected, "turn {turn_idx} streamed");
        assert_eq!(
            turn.completion(),
            Some(ReplayCompletion {
                duration_ms: response.duration.as_millis() as u64,
                prompt_tokens: response.token_usage.prompt_tokens,
                completion_tokens: 7,
            })
        );
        assert_eq!(turn.system_prompts(), ["You are terse.".to_owned()]);
    }
    assert_eq!(trajectory.turn(0).unwrap().messages(), [first]);
    // Only new positions are recorded: the assistant reply and the second question.
    assert_eq!(
        trajectory.turn(1).unwrap().messages(),
        [Message::assistant("Lisbon"), second]
    );
    let open = trajectory.turn(2).unwrap();
    assert!(!open.is_complete());
    assert_eq!(open.blocks(), [MessageContentBlock::text("cut off")]);
    assert_eq!(
        trajectory.usage().records,
        log.backend().replay("demo").unwrap().len()
    );
}

/// "Replay streams and responses go straight to the caller. No registered plugin's
/// on_stream_chunk or on_response_complete runs on them."
#[tokio::test(flavor = "current_thread")]
async fn replayed_blocks_reach_no_plugin() {
    let backend: Arc<dyn SessionBackend> = Arc::new(InMemoryBackend::new());
    let log = SessionLogPlugin::new(Arc::clone(&backend)).with_session_id("demo");
    let blocks = turn_blocks(0);
    record_turn(
        &log,
        vec![Message::user("Where is the vault?")],
        &blocks,
        &response_of(&blocks, 412, 31),
    )
    .await;
    let recorded = backend.replay("demo").unwrap().len();

    // Both plugins are alive and would be what a client runs; nothing in replay reaches them.
    let counting = Arc::new(CountingPlugin::default());
    let _registered: [Arc<dyn CucaPlugin>; 2] =
        [Arc::clone(&counting) as Arc<dyn CucaPlugin>, Arc::new(log)];

    let trajectory = SessionReplay::new(Arc::clone(&backend))
        .load("demo")
        .unwrap();
    let mut stream = trajectory.stream_turn(0).unwrap();
    let mut n_streamed = 0;
    while let Some(block) = stream.next().await {
        block.unwrap();
        n_streamed += 1;
    }
    let response = trajectory.turn(0).unwrap().response("gemma", "llamacpp");

    assert_eq!(n_streamed, 6);
    assert_eq!(response.content.len(), 6);
    assert_eq!(
        counting.calls.load(Ordering::SeqCst),
        0,
        "a replayed block reached a plugin"
    );
    // The session log's hooks did not run either: nothing was appended.
    assert_eq!(backend.replay("demo").unwrap().len(), recorded);
}
