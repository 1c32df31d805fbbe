//! The session-log seed example: the same two live turns recorded through two
//! `SessionLogPlugin` instances, one over `InMemoryBackend` and one over `FileBackend`,
//! then a fork of the in-memory session at its first Message record.
//!
//! ```text
//! cargo run --example session_log --features "provider-llamacpp plugin-session-log"
//! ```
//!
//! It needs a llama-server on port 1234 (`llama-server -m MODEL.gguf --port 1234`).
//! `CUCA_BASE_URL` and `CUCA_MODEL` retarget it at another OpenAI-compatible server;
//! `CUCA_SESSION_DIR` chooses where the `.cslog` file goes (default: a new directory under
//! the system temp dir, kept so the file can be inspected).

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;

use cuca::{
    CucaClient, CucaPlugin, FileBackend, InMemoryBackend, Message, ProviderEndpoint,
    SessionBackend, SessionEvent, SessionLogPlugin, SessionRecord, UnifiedRequest,
};

/// The answer ceiling: room for a reasoning model's thinking plus a one-word reply.
const MAX_TOKENS: u32 = 1024;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("session_log: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let base_url = env_or("CUCA_BASE_URL", "http://127.0.0.1:1234");
    let dir = std::env::var_os("CUCA_SESSION_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("cuca-session-log-{}", std::process::id()))
        });

    let memory_backend = Arc::new(InMemoryBackend::new());
    let memory_log = Arc::new(
        SessionLogPlugin::new(Arc::clone(&memory_backend) as Arc<dyn SessionBackend>)
            .with_session_id("demo"),
    );
    let file_log = Arc::new(
        SessionLogPlugin::new(Arc::new(FileBackend::new(dir.clone())?)).with_session_id("demo"),
    );
    let mut builder = CucaClient::builder()
        .with_provider(ProviderEndpoint::LlamaCpp)
        .with_base_url(base_url)
        .register_plugin(Arc::clone(&memory_log) as Arc<dyn CucaPlugin>)
        .register_plugin(Arc::clone(&file_log) as Arc<dyn CucaPlugin>);
    if let Some(model) = env_nonempty("CUCA_MODEL") {
        builder = builder.with_model(model);
    }
    let client = builder.build()?;

    println!("Session \"demo\", two backends recording the same turns");
    println!(
        "  memory: InMemoryBackend, cap {} records",
        memory_backend.max_records()
    );
    println!("  file:   {}", dir.join("demo.cslog").display());

    let system = Message::system("You are terse.");
    let first = "The vault is in Lisbon. Reply with: noted";
    let second = "Where is the vault? Answer in one word.";
    let mut conversation = vec![system, Message::user(first)];
    for (turn, prompt) in [(1, first), (2, second)] {
        if turn == 2 {
            conversation.push(Message::user(prompt));
        }
        let before = memory_backend.replay("demo")?.len();
        let mut request = UnifiedRequest::new(conversation.clone());
        request.max_tokens = Some(MAX_TOKENS);
        let response = client.generate(request).await?;
        let reply = response.text().trim().to_owned();
        let records = memory_backend.replay("demo")?;
        let appended = &records[before..];
        let gauge_memory = memory_backend.gauge();
        let gauge_file = file_log.backend().gauge();
        println!();
        println!("Turn {turn}: {prompt:?}");
        println!("  reply: {reply}");
        println!(
            "  appended {} records: {}",
            appended.len(),
            kind_counts(appended)
        );
        println!(
            "  gauge: {}/{} records in memory, {} bytes on disk",
            gauge_memory.records.unwrap_or(0),
            gauge_memory.max_records.unwrap_or(0),
            gauge_file.bytes_on_disk.unwrap_or(0)
        );
        conversation.push(Message::assistant(reply));
    }

    // After the turns: branch at the first Message record.
    let recorded = memory_backend.replay("demo")?;
    let Some(point) = recorded
        .iter()
        .find(|r| matches!(r.event, SessionEvent::Message(_)))
        .map(SessionRecord::point_id)
    else {
        return Err("the session holds no Message record to fork at".into());
    };
    let branch = memory_log.fork_session("demo", &point)?;
    let branch_records = memory_backend.replay(&branch)?;
    let original = memory_backend.replay("demo")?;
    println!();
    println!("Fork at {point}, the first Message record");
    println!("  new session: {branch}");
    println!(
        "  branch: {} records: {}",
        branch_records.len(),
        kind_counts(&branch_records)
    );
    if let Some(tail) = original.last() {
        println!("  original tail: {:?}", tail.event);
    }
    println!(
        "  original: {} records, {} than before the fork",
        original.len(),
        if original.len() == recorded.len() + 1 {
            "one more".to_owned()
        } else {
            format!("{} more", original.len() as i64 - recorded.len() as i64)
        }
    );

    let from_file = file_log.backend().replay("demo")?;
    println!();
    // Each plugin stamps its own clock, so the trajectories match on sequence and event.
    let same = from_file.len() == recorded.len()
        && from_file
            .iter()
            .zip(&recorded)
            .all(|(a, b)| a.sequence == b.sequence && a.event == b.event);
    if same {
        println!(
            "The file backend replays the same trajectory: {} records",
            from_file.len()
        );
        Ok(())
    } else {
        Err(format!(
            "the file backend replays {} records that differ from the {} the memory backend held",
            from_file.len(),
            recorded.len()
        )
        .into())
    }
}

/// `"SystemPrompt 1, Message 1, Reasoning 72, …"` in format order, kinds that occur only.
fn kind_counts(records: &[SessionRecord]) -> String {
    let mut counts = BTreeMap::new();
    for record in records {
        *counts.entry(record.event.kind_index()).or_insert(0usize) += 1;
    }
    counts
        .into_iter()
        .map(|(index, n)| format!("{} {n}", SessionEvent::KINDS[index]))
        .collect::<Vec<_>>()
        .join(", ")
}

fn env_or(name: &str, default: &str) -> String {
    env_nonempty(name).unwrap_or_else(|| default.to_owned())
}

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}
