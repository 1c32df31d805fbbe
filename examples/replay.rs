//! The replay seed example: one live turn recorded through a `SessionLogPlugin` over a
//! temp-directory `FileBackend`; the client dropped; the turn replayed from a fresh
//! `FileBackend` over the same directory, its `UnifiedResponse` rebuilt, and a fork-point
//! prefix replayed.
//!
//! ```text
//! cargo run --example replay --features "provider-llamacpp service-replay"
//! ```
//!
//! It needs a llama-server on port 1234 with the demo model loaded; `CUCA_BASE_URL` and
//! `CUCA_MODEL` point it at any OpenAI-compatible server. `CUCA_SESSION_DIR` chooses where
//! the `.cslog` file goes (default: a new directory under the system temp dir, kept).

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;

use cuca::{
    CucaClient, CucaPlugin, FileBackend, Message, MessageContentBlock, ProviderEndpoint,
    SessionBackend, SessionEvent, SessionLogPlugin, SessionRecord, SessionReplay, UnifiedRequest,
};
use tokio_stream::StreamExt;

/// The answer ceiling: room for a reasoning model's thinking plus a one-word reply.
const MAX_TOKENS: u32 = 1024;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("replay: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let base_url = env_nonempty("CUCA_BASE_URL").unwrap_or_else(|| "http://127.0.0.1:1234".into());
    let dir = std::env::var_os("CUCA_SESSION_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("cuca-replay-{}", std::process::id()))
        });

    // Record one live turn.
    let live = {
        let log = Arc::new(
            SessionLogPlugin::new(Arc::new(FileBackend::new(dir.clone())?)).with_session_id("demo"),
        );
        let mut builder = CucaClient::builder()
            .with_provider(ProviderEndpoint::LlamaCpp)
            .with_base_url(base_url)
            .register_plugin(Arc::clone(&log) as Arc<dyn CucaPlugin>);
        if let Some(model) = env_nonempty("CUCA_MODEL") {
            builder = builder.with_model(model);
        }
        let client = builder.build()?;
        let mut request = UnifiedRequest::new(vec![
            Message::system("You are terse."),
            Message::user("The vault is in Lisbon. Reply with: noted"),
        ]);
        request.max_tokens = Some(MAX_TOKENS);
        client.generate(request).await?
        // The client and the plugin (and its FileBackend) are dropped here.
    };
    println!(
        "Recorded one live turn into {}",
        dir.join("demo.cslog").display()
    );
    println!("  reply: {}", live.text().trim());
    println!(
        "  streamed {} blocks: {}",
        live.content.len(),
        block_counts(&live.content)
    );
    println!(
        "  {} ms, {} prompt + {} completion tokens, model {}",
        live.duration.as_millis(),
        live.token_usage.prompt_tokens,
        live.token_usage.completion_tokens,
        live.model
    );

    // Replay from a fresh FileBackend over the same directory: no network.
    let backend = Arc::new(FileBackend::new(dir.clone())?);
    let replay = SessionReplay::new(Arc::clone(&backend) as Arc<dyn SessionBackend>);
    let trajectory = replay.load("demo")?;
    let usage = trajectory.usage();
    println!();
    println!("Replayed from a fresh FileBackend over the same directory");
    println!(
        "  trajectory {:?}: {} records, {}, {} blocks, near cap: {}",
        trajectory.session_id(),
        usage.records,
        plural(usage.turns, "turn"),
        usage.blocks,
        usage.near_cap
    );
    let Some(turn) = trajectory.turn(0) else {
        return Err("the recording holds no turn".into());
    };
    if let Some(completion) = turn.completion() {
        println!(
            "  turn 0: complete, {} blocks, {} ms, {} prompt + {} completion tokens",
            turn.blocks().len(),
            completion.duration_ms,
            completion.prompt_tokens,
            completion.completion_tokens
        );
    }
    let mut stream = trajectory.stream_turn(0)?;
    let mut replayed = Vec::new();
    while let Some(block) = stream.next().await {
        replayed.push(block?);
    }
    let same_stream = replayed == live.content;
    println!(
        "  stream: {} blocks, {} the live stream",
        replayed.len(),
        if same_stream {
            "identical to"
        } else {
            "DIFFERENT from"
        }
    );
    let rebuilt = turn.response(live.model.clone(), live.provider.clone());
    let same_response = rebuilt.content == live.content && rebuilt.token_usage == live.token_usage;
    println!(
        "  response: text {:?}, {} blocks and tokens as the live response",
        rebuilt.text().trim(),
        if same_response { "same" } else { "DIFFERENT" }
    );

    // A fork-point prefix: the session up to its first Message record.
    let records = backend.replay("demo")?;
    let Some(point) = records
        .iter()
        .find(|r| matches!(r.event, SessionEvent::Message(_)))
        .map(SessionRecord::point_id)
    else {
        return Err("the recording holds no Message record".into());
    };
    let prefix = replay.load_at_point(&point)?;
    println!();
    println!("Fork-point prefix at {point}, the first Message record");
    match prefix.turn(0) {
        Some(turn) => println!(
            "  {} records, {}, complete: {}, {} system prompt, {} message, {} blocks",
            prefix.usage().records,
            plural(prefix.len(), "turn"),
            turn.is_complete(),
            turn.system_prompts().len(),
            turn.messages().len(),
            turn.blocks().len()
        ),
        None => println!("  {} records, no turn", prefix.usage().records),
    }
    println!();
    println!("Replayed blocks went straight to this program: no plugin hook ran on them.");
    if same_stream && same_response {
        Ok(())
    } else {
        Err("the replay differs from the live turn".into())
    }
}

/// `"Thinking 72, Text 3"` in first-seen order.
fn block_counts(blocks: &[MessageContentBlock]) -> String {
    let mut order = Vec::new();
    let mut counts = BTreeMap::new();
    for block in blocks {
        let n = counts.entry(block.kind()).or_insert(0usize);
        if *n == 0 {
            order.push(block.kind());
        }
        *n += 1;
    }
    order
        .into_iter()
        .map(|kind| format!("{kind} {}", counts[kind]))
        .collect::<Vec<_>>()
        .join(", ")
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}
