//! A viewer over real data: the committed fixture sessions, a fork, a hostile session, a call
//! log with failures and a call in flight, and one assembled journal run.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use cuca_events::{Message, SessionBackend, SessionEvent};
use cuca_store_file::FileBackend;
use cuca_testkit::{append_all, record};

/// Recorded text that would run script, load an image or follow a link if it were markup.
pub const HOSTILE_OUTPUT: &str = "<script>alert('output')</script><img src=x onerror=\"alert('img')\"><a href=\"javascript:alert('link')\">click me</a>";
/// A user message that tries the same.
pub const HOSTILE_MESSAGE: &str = "</div><script>alert('message')</script>";

pub struct Fixture {
    pub root: tempfile::TempDir,
    pub sessions: PathBuf,
    pub calls: PathBuf,
    pub runs: PathBuf,
    pub fork_id: String,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

impl Fixture {
    pub fn new() -> Fixture {
        let root = tempfile::tempdir().unwrap();
        let sessions = root.path().join("sessions");
        std::fs::create_dir_all(&sessions).unwrap();
        for name in ["demo.cslog", "reasoning.cslog"] {
            std::fs::copy(
                repo_root().join("fixtures/sessions").join(name),
                sessions.join(name),
            )
            .unwrap();
        }
        let backend = FileBackend::new(&sessions).unwrap();
        let fork_id = backend.fork("demo", "demo:1").unwrap();

        let mut hostile = vec![
            record(
                "hostile",
                0,
                SessionEvent::SystemPrompt {
                    text: "You are terse.".into(),
                },
            ),
            record(
                "hostile",
                1,
                SessionEvent::Message(Message::user(HOSTILE_MESSAGE)),
            ),
            record(
                "hostile",
                2,
                SessionEvent::Reasoning {
                    text: "secret reasoning text".into(),
                },
            ),
            record(
                "hostile",
                3,
                SessionEvent::Output {
                    text: HOSTILE_OUTPUT.into(),
                },
            ),
            record(
                "hostile",
                4,
                SessionEvent::ToolCall {
                    id: "call_1".into(),
                    name: "lookup".into(),
                    arguments: r#"{"city":"Lisbon","days":[1,2]}"#.into(),
                },
            ),
            record("hostile", 5, SessionEvent::Latency { duration_ms: 412 }),
            record(
                "hostile",
                6,
                SessionEvent::TokenUsage {
                    prompt_tokens: 31,
                    completion_tokens: 9,
                },
            ),
        ];
        // Call metadata, as `cuca proxy` records it (`SessionLogPlugin::with_call_metadata`).
        hostile.insert(
            2,
            record(
                "hostile",
                2,
                SessionEvent::CallRequest {
                    model: "gemma-tiny".into(),
                    parameters: r#"{"max_tokens":12,"temperature":0.5}"#.into(),
                    tools: r#"[{"name":"lookup","description":"find a city","parameters":{}}]"#
                        .into(),
                    messages: 2,
                },
            ),
        );
        hostile.insert(
            6,
            record(
                "hostile",
                6,
                SessionEvent::CallFinish {
                    finish_reason: Some("tool_calls".into()),
                    model: "gemma-tiny-q4".into(),
                },
            ),
        );
        for (sequence, r) in hostile.iter_mut().enumerate() {
            r.sequence = sequence as u64;
        }
        // The newest session, so it is the list's first row.
        for r in &mut hostile {
            r.timestamp_ms = 4_000_000_000_000 + r.sequence;
        }
        append_all(&backend, &hostile);
        drop(backend);

        let calls = root.path().join("calls.jsonl");
        write_call_log(&calls);
        let runs = root.path().join("runs");
        write_journal_run(root.path(), &runs.join("run-1"));
        Fixture {
            root,
            sessions,
            calls,
            runs,
            fork_id,
        }
    }

    pub fn config(&self) -> cuca_view::ViewConfig {
        cuca_view::ViewConfig::new(vec![self.sessions.clone()])
            .with_call_log(&self.calls)
            .with_runs_dir(&self.runs)
    }

    /// Appends one more record to the fixture's `demo` session, as a recorder would.
    pub fn append_live(&self, sequence: u64, text: &str) {
        let backend = FileBackend::new(&self.sessions).unwrap();
        backend
            .append(record(
                "demo",
                sequence,
                SessionEvent::Output { text: text.into() },
            ))
            .unwrap();
    }

    /// The next free sequence of `demo`.
    pub fn demo_len(&self) -> u64 {
        let backend = FileBackend::new(&self.sessions).unwrap();
        backend.replay("demo").unwrap().len() as u64
    }
}

fn ts(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

fn write_call_log(path: &Path) {
    use cuca_calllog::{Record, PHASE_START};
    let now = SystemTime::now();
    let mut rows = Vec::new();
    let mut call = |id: &str, model: &str, status: u16, ms: u64, error: &str, ended: &str| {
        rows.push(Record {
            ts: ts(now - Duration::from_secs(600)),
            id: id.into(),
            run: "run-a".into(),
            phase: PHASE_START.into(),
            model: model.into(),
            ..Default::default()
        });
        rows.push(Record {
            ts: ts(now - Duration::from_secs(590)),
            id: id.into(),
            run: "run-a".into(),
            model: model.into(),
            status,
            ms,
            error: error.into(),
            ended: ended.into(),
            ..Default::default()
        });
    };
    for (i, ms) in [100u64, 200, 300, 400, 500, 600, 700, 800, 900, 1000]
        .iter()
        .enumerate()
    {
        call(&format!("ok{i:06}"), "gemma", 200, *ms, "", "");
    }
    call("bad00001", "gemma", 429, 12, "rate limited", "");
    call("bad00002", "qwen", 500, 40, "<b>server</b> error", "");
    call("bad00003", "qwen", 0, 3000, "", "deadline");
    rows.push(Record {
        ts: ts(now - Duration::from_secs(125)),
        id: "inflight".into(),
        run: "run-a".into(),
        phase: PHASE_START.into(),
        model: "qwen".into(),
        ..Default::default()
    });
    let mut text = String::new();
    for row in rows {
        text.push_str(&serde_json::to_string(&row).unwrap());
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

fn write_journal_run(scratch: &Path, run_dir: &Path) {
    use cuca_journal::format::{AgentOrigin, AgentRow, AgentStatus};
    use cuca_journal::{Recorder, RecorderConfig};
    let workspace = scratch.join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let recorder =
        Recorder::start(RecorderConfig::new(&workspace, "journal-session").unwrap()).unwrap();
    recorder.agent(&AgentRow {
        id: "root".into(),
        profile_id: "p1".into(),
        profile_name: "planner".into(),
        origin: AgentOrigin::Root,
        status: AgentStatus::Started,
        ceiling: None,
    });
    recorder.clock(
        "root",
        Duration::from_secs(3),
        Some(Duration::from_secs(60)),
    );
    recorder.clock("root", Duration::from_secs(9), None);
    recorder.finish();
    std::fs::create_dir_all(run_dir).unwrap();
    cuca_journal::assemble(&workspace, run_dir)
        .unwrap()
        .unwrap();
    assert!(run_dir.join("replay.json.gz").is_file());
}

/// Starts the viewer on a loopback port; returns its base URL.
pub async fn serve(config: cuca_view::ViewConfig) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, cuca_view::router(config))
            .await
            .unwrap();
    });
    format!("http://{address}")
}
