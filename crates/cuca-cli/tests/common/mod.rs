//! Shared by the integration tests: the session recorder behind `fixtures/sessions/` (real
//! `CucaClient` + `SessionLogPlugin` + `FileBackend` over byte-exact llama-server
//! transcripts served by a loopback server this code starts), and small command helpers.
// Each test binary uses part of this module; a loopback server that cannot bind should stop
// the test at once, so unwrap is the right reaction in test support.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use assert_cmd::Command;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;
use cuca::{
    CucaClient, CucaPlugin, FileBackend, Message, MessageContentBlock, ProviderEndpoint,
    SessionBackend, SessionLogPlugin, UnifiedRequest,
};

/// The transcripts, read from the copies in `cuca-client`'s test fixtures (in this
/// repository, never from outside it).
pub const STREAM_BASIC: &[u8] =
    include_bytes!("../../../cuca-client/tests/fixtures/llama-server/stream-basic.body");
pub const STREAM_SECOND_TURN: &[u8] =
    include_bytes!("../../../cuca-client/tests/fixtures/llama-server/stream-second-turn.body");
pub const STREAM_REASONING: &[u8] =
    include_bytes!("../../../cuca-client/tests/fixtures/llama-server/stream-reasoning.body");
pub const REQUEST_BASIC: &[u8] =
    include_bytes!("../../../cuca-client/tests/fixtures/llama-server/stream-basic.request.json");
pub const REQUEST_SECOND_TURN: &[u8] = include_bytes!(
    "../../../cuca-client/tests/fixtures/llama-server/stream-second-turn.request.json"
);

/// The committed sessions.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/sessions")
}

/// The `cuca` binary, with the environment that could change its output cleared.
pub fn cuca() -> Command {
    let mut command = Command::cargo_bin("cuca").unwrap();
    command.env_remove("NO_COLOR").env_remove("CUCA_CALL_LOG");
    command
}

/// The text a transcript streams, decoded by the client's own decoder: (reasoning, text).
pub fn streamed_text(body: &[u8]) -> (String, String) {
    let mut decoder = cuca::client::ChatStreamDecoder::new();
    let mut blocks = Vec::new();
    decoder.feed(body, &mut blocks).unwrap();
    let (mut thinking, mut text) = (String::new(), String::new());
    for block in blocks {
        match block {
            MessageContentBlock::Thinking { thinking: t } => thinking.push_str(&t),
            MessageContentBlock::Text { text: t } => text.push_str(&t),
            other => panic!("unexpected block {other:?}"),
        }
    }
    (thinking, text)
}

#[derive(Clone)]
struct Script {
    replies: Arc<Mutex<VecDeque<&'static [u8]>>>,
    requests: Arc<Mutex<Vec<serde_json::Value>>>,
}

async fn completions(State(script): State<Script>, body: String) -> axum::response::Response {
    script
        .requests
        .lock()
        .unwrap()
        .push(serde_json::from_str(&body).unwrap());
    let reply = script.replies.lock().unwrap().pop_front();
    match reply {
        Some(bytes) => ([(CONTENT_TYPE, "text/event-stream")], bytes).into_response(),
        None => (axum::http::StatusCode::GONE, "no scripted reply left").into_response(),
    }
}

fn request(run: &str, messages: Vec<Message>) -> UnifiedRequest {
    let mut request = UnifiedRequest::new(messages);
    request.metadata.run = Some(run.to_owned());
    request.max_tokens = Some(12);
    request.temperature = Some(0.0);
    request
}

/// The system prompt and first question the transcripts were captured with.
pub const SYSTEM: &str = "You are terse.";
pub const TURN_1: &str = "The vault is in Lisbon. Reply with: noted";
pub const TURN_2: &str = "Where is the vault? Answer in one word.";
pub const REASONING_QUESTION: &str = "Think first, then answer: where is the vault?";

/// Records sessions `demo` (turn 1 from `stream-basic`, turn 2 from `stream-second-turn`)
/// and `reasoning` (one turn from `stream-reasoning`) into `dir`, with the client's call log
/// off. Returns the JSON request bodies the server received, in order.
pub async fn record_sessions(dir: &Path) -> Vec<serde_json::Value> {
    record_sessions_logged(dir, cuca::calllog::CallLog::off()).await
}

/// [`record_sessions`] with the client writing its call-log rows to `call_log`; the `demo`
/// calls carry run id `run-demo`, the `reasoning` call `run-reasoning`.
pub async fn record_sessions_logged(
    dir: &Path,
    call_log: cuca::calllog::CallLog,
) -> Vec<serde_json::Value> {
    let script = Script {
        replies: Arc::new(Mutex::new(VecDeque::from([
            STREAM_BASIC,
            STREAM_SECOND_TURN,
            STREAM_REASONING,
        ]))),
        requests: Arc::new(Mutex::new(Vec::new())),
    };
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(script.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let backend: Arc<dyn SessionBackend> = Arc::new(FileBackend::new(dir).unwrap());
    let client_for = |session: &str| {
        let log = Arc::new(SessionLogPlugin::new(Arc::clone(&backend)).with_session_id(session));
        CucaClient::builder()
            .with_provider(ProviderEndpoint::LlamaCpp)
            .with_base_url(base_url.clone())
            .with_model("tiny")
            .with_retry_policy(cuca::RetryPolicy::none())
            .with_call_log(call_log.clone())
            .register_plugin(log as Arc<dyn CucaPlugin>)
            .build()
            .unwrap()
    };

    let demo = client_for("demo");
    demo.generate(request(
        "run-demo",
        vec![Message::system(SYSTEM), Message::user(TURN_1)],
    ))
    .await
    .unwrap();
    // The transcript's second request carries "noted" as the assistant turn, as the seed's
    // example does; the tiny model's real first answer was nonsense.
    demo.generate(request(
        "run-demo",
        vec![
            Message::system(SYSTEM),
            Message::user(TURN_1),
            Message::assistant("noted"),
            Message::user(TURN_2),
        ],
    ))
    .await
    .unwrap();
    let reasoning = client_for("reasoning");
    reasoning
        .generate(request(
            "run-reasoning",
            vec![Message::system(SYSTEM), Message::user(REASONING_QUESTION)],
        ))
        .await
        .unwrap();
    drop((demo, reasoning, backend));
    server.abort();
    let requests = script.requests.lock().unwrap().clone();
    requests
}

/// [`record_sessions`] on a fresh runtime, for synchronous tests.
pub fn record_sessions_blocking(dir: &Path) -> Vec<serde_json::Value> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(record_sessions(dir))
}

/// Whole `.cslog` file names in `dir`, sorted.
pub fn cslog_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".cslog"))
        .collect();
    names.sort();
    names
}

/// A child process killed (and reaped) when the test ends, whichever way it ends.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The real `cuca` binary started with `args`, serving: the child, the address its first
/// stdout line names after `prefix` (a trailing `/` dropped), and the rest of its stdout
/// (kept open so the child never writes into a closed pipe).
pub fn serving(
    args: &[&std::ffi::OsStr],
    prefix: &str,
) -> (
    Killed,
    String,
    std::io::BufReader<std::process::ChildStdout>,
) {
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("cuca"));
    command.args(args).stderr(std::process::Stdio::null());
    serving_with(command, prefix)
}

/// [`serving`] for a command the caller has set up (its environment, its stderr, a shell
/// that execs `cuca`): spawned with stdout piped, its first line read for the address.
pub fn serving_with(
    mut command: std::process::Command,
    prefix: &str,
) -> (
    Killed,
    String,
    std::io::BufReader<std::process::ChildStdout>,
) {
    use std::io::BufRead;
    let mut child = Killed(
        command
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = std::io::BufReader::new(child.0.stdout.take().unwrap());
    let mut first = String::new();
    lines.read_line(&mut first).unwrap();
    let address = first
        .trim()
        .strip_prefix(prefix)
        .map(|rest| rest.trim_end_matches('/').to_owned())
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
    (child, address, lines)
}

/// A `/proc/PID/status` field in KiB (`VmHWM:` is the peak resident set).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    line[field.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap()
}
