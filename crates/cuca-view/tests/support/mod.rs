//! A viewer over real data: the committed fixture sessions, a fork, a hostile session, a call
//! log with failures and a call in flight, and one assembled journal run.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

        append_all(&backend, &agent_session(AGENT, AGENT_TURNS, AGENT_T0, 0));
        append_all(
            &backend,
            &agent_session(&format!("{AGENT}:conv:2"), 3, AGENT_T0 + 1_500, 1),
        );
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

    /// Appends one whole call to `session`, as a recorder streams it: a user message,
    /// `n_blocks` Output blocks, Latency and TokenUsage. Returns the blocks' texts.
    pub fn append_live_turn(&self, session: &str, n_blocks: usize) -> Vec<String> {
        let backend = FileBackend::new(&self.sessions).unwrap();
        let mut sequence = backend.replay(session).unwrap().len() as u64;
        let mut push = |event: SessionEvent| {
            backend.append(record(session, sequence, event)).unwrap();
            sequence += 1;
        };
        push(SessionEvent::Message(Message::user("stream, please")));
        let pieces: Vec<String> = (0..n_blocks).map(|i| format!("tok{i} ")).collect();
        for piece in &pieces {
            push(SessionEvent::Output {
                text: piece.clone(),
            });
        }
        push(SessionEvent::Latency { duration_ms: 321 });
        push(SessionEvent::TokenUsage {
            prompt_tokens: 7,
            completion_tokens: n_blocks as u64,
        });
        pieces
    }

    /// Appends an Output record at `sequence` to `session`.
    pub fn append_to(&self, session: &str, sequence: u64, text: &str) {
        let backend = FileBackend::new(&self.sessions).unwrap();
        backend
            .append(record(
                session,
                sequence,
                SessionEvent::Output { text: text.into() },
            ))
            .unwrap();
    }

    /// Forks `session` at `point`, as `cuca fork` does; returns the fork's id.
    pub fn fork(&self, session: &str, point: &str) -> String {
        FileBackend::new(&self.sessions)
            .unwrap()
            .fork(session, point)
            .unwrap()
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
    // A proxy call in the agent session that failed over its context: it left no record in
    // the session, only this row, whose `node` is the session.
    let at = UNIX_EPOCH
        + Duration::from_millis(AGENT_T0 + (FAILED_AFTER_TURN as u64 - 1) * TURN_MS + 500);
    rows.push(Record {
        ts: ts(at - Duration::from_millis(30)),
        id: "ctx00001".into(),
        run: "run-b".into(),
        phase: PHASE_START.into(),
        node: AGENT.into(),
        tag: "proxy".into(),
        model: "qwen-small".into(),
        ..Default::default()
    });
    rows.push(Record {
        ts: ts(at),
        id: "ctx00001".into(),
        run: "run-b".into(),
        node: AGENT.into(),
        tag: "proxy".into(),
        model: "qwen-small".into(),
        status: 400,
        ms: 30,
        error: "the request exceeds the available context size".into(),
        ..Default::default()
    });
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
    recorder.shell(
        "root",
        &cuca_journal::ShellRun {
            origin: cuca_journal::format::ShellOrigin::ShellTool,
            command: "cargo test --quiet",
            cwd: &workspace,
            exit_status: Some(101),
            stdout: "running 3 tests\ntest result: FAILED",
            stderr: "error: test failed, to rerun pass `--lib`",
        },
    );
    // Entry 3: a model call, its request and its answer.
    let request = cuca_events::UnifiedRequest {
        model: "gemma-tiny".into(),
        ..cuca_events::UnifiedRequest::new(vec![Message::user("Where is the vault?")])
    };
    let response = cuca_events::UnifiedResponse {
        model: "gemma-tiny-q4".into(),
        provider: "llamacpp".into(),
        content: vec![cuca_events::MessageContentBlock::text("In Lisbon.")],
        finish_reason: Some("stop".into()),
        ..Default::default()
    };
    recorder.model_io(
        "root",
        &request,
        cuca_journal::format::RequestRole::AgentTurn,
        &response,
        Duration::from_millis(412),
    );
    // Entry 4: a tool the model called, which reported failure.
    recorder.tool_result(
        "root",
        &cuca_journal::ToolOutcome {
            call_id: "call_7",
            name: "read_file",
            arguments: r#"{"path":"vault.txt"}"#,
            output: "no such file: vault.txt",
            is_error: true,
        },
    );
    // Entry 5: a model call the provider refused.
    recorder.model_error(
        "root",
        &request,
        cuca_journal::format::RequestRole::AgentTurn,
        &cuca_journal::ModelFailure {
            class: cuca_journal::format::ErrorClass::FatalStatus,
            status: Some(400),
            detail: "the request exceeds the context",
        },
    );
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

/// A proxy-recorded agent session of several pages.
pub const AGENT: &str = "agent";
/// Its turns: three pages of twenty and a few.
pub const AGENT_TURNS: usize = 47;
/// Its first record's time (older than `hostile`, newer than the fixtures).
pub const AGENT_T0: u64 = 3_000_000_000_000;
/// Milliseconds between its turns' starts.
pub const TURN_MS: u64 = 1_000;
/// The turn that runs longest.
pub const SLOWEST_TURN: usize = 33;
/// The turn whose tool result failed with an exit code.
pub const TOOL_TURN: usize = 5;
/// The call-log failure sits after this turn.
pub const FAILED_AFTER_TURN: usize = 12;

/// An agent's session as `cuca proxy` records it with call metadata and tool results: each
/// turn a system prompt, the previous answer echoed back as an assistant message, a user
/// message, the call's metadata, streamed output, latency and tokens. Turn [`TOOL_TURN`]
/// calls a tool whose result failed (exit code 2, with stdout and stderr); turn
/// [`SLOWEST_TURN`] is the slowest.
pub fn agent_session(
    id: &str,
    turns: usize,
    t0: u64,
    salt: u64,
) -> Vec<cuca_events::SessionRecord> {
    let mut out = Vec::new();
    let mut push = |at: u64, event: SessionEvent| {
        let mut r = record(id, out.len() as u64, event);
        r.timestamp_ms = at;
        out.push(r);
    };
    for turn in 1..=turns {
        let at = t0 + (turn as u64 - 1) * TURN_MS;
        let latency = if turn == SLOWEST_TURN && salt == 0 {
            9_000
        } else {
            200 + (turn as u64 * 7) % 300
        };
        push(
            at,
            SessionEvent::SystemPrompt {
                text: "You are a careful agent.".into(),
            },
        );
        if turn > 1 {
            push(
                at,
                SessionEvent::Message(Message::assistant(format!(
                    "answer {} of conversation {salt}",
                    turn - 1
                ))),
            );
        }
        if turn == TOOL_TURN + 1 && salt == 0 {
            push(
                at,
                SessionEvent::ToolResult {
                    tool_call_id: "call_ls".into(),
                    content: "ls: cannot access 'missing': No such file or directory".into(),
                    is_error: true,
                    stdout: Some("listing /work".into()),
                    stderr: Some("ls: cannot access 'missing'".into()),
                    exit_code: Some(2),
                },
            );
        }
        push(
            at,
            SessionEvent::Message(Message::user(format!("step {turn}, please"))),
        );
        push(
            at,
            SessionEvent::CallRequest {
                model: "qwen-small".into(),
                parameters: "{}".into(),
                tools: "[]".into(),
                messages: turn as u64 * 2,
            },
        );
        let end = at + latency;
        push(
            end,
            SessionEvent::Output {
                text: "answer ".into(),
            },
        );
        push(
            end,
            SessionEvent::Output {
                text: format!("{turn} of conversation {salt}"),
            },
        );
        if turn == TOOL_TURN && salt == 0 {
            push(
                end,
                SessionEvent::ToolCall {
                    id: "call_ls".into(),
                    name: "shell".into(),
                    arguments: r#"{"cmd":"ls missing"}"#.into(),
                },
            );
        }
        push(
            end,
            SessionEvent::CallFinish {
                finish_reason: Some("stop".into()),
                model: "qwen-small".into(),
            },
        );
        push(
            end,
            SessionEvent::Latency {
                duration_ms: latency,
            },
        );
        push(
            end,
            SessionEvent::TokenUsage {
                prompt_tokens: 100 + turn as u64,
                completion_tokens: 10 + turn as u64,
            },
        );
    }
    out
}

/// A session `cut` of two turns whose second call was cut short mid-stream (closed by the
/// recorder with a `CallIncomplete` and zero tokens), and a call log holding that call's row
/// (`cut00001`, no response): one call, recorded in both. Returns the sessions directory and
/// the call log's path under `root`.
pub fn cut_call(root: &Path) -> (PathBuf, PathBuf) {
    let sessions = root.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let t0: u64 = 1_800_000_000_000;
    let backend = FileBackend::new(&sessions).unwrap();
    let events = [
        (0, SessionEvent::Message(Message::user("first"))),
        (0, SessionEvent::Output { text: "one".into() }),
        (300, SessionEvent::Latency { duration_ms: 300 }),
        (
            300,
            SessionEvent::TokenUsage {
                prompt_tokens: 12,
                completion_tokens: 3,
            },
        ),
        (1_000, SessionEvent::Message(Message::user("second"))),
        (
            1_000,
            SessionEvent::CallRequest {
                model: "qwen".into(),
                parameters: "{}".into(),
                tools: "[]".into(),
                messages: 3,
            },
        ),
        (
            1_200,
            SessionEvent::Output {
                text: "half an ans".into(),
            },
        ),
        (
            1_250,
            SessionEvent::CallIncomplete {
                reason: "the upstream closed the stream".into(),
            },
        ),
        (
            1_250,
            SessionEvent::CallFinish {
                finish_reason: None,
                model: "qwen".into(),
            },
        ),
        (1_250, SessionEvent::Latency { duration_ms: 250 }),
        (
            1_250,
            SessionEvent::TokenUsage {
                prompt_tokens: 0,
                completion_tokens: 0,
            },
        ),
    ];
    for (sequence, (offset, event)) in events.into_iter().enumerate() {
        let mut r = record("cut", sequence as u64, event);
        r.timestamp_ms = t0 + offset;
        backend.append(r).unwrap();
    }
    // The call log's row for the same call, as `cuca proxy` writes it.
    let row = cuca_calllog::Record {
        ts: ts(UNIX_EPOCH + Duration::from_millis(t0 + 1_260)),
        id: "cut00001".into(),
        run: "run-c".into(),
        node: "cut".into(),
        tag: "proxy".into(),
        model: "qwen".into(),
        status: 0,
        ms: 265,
        error: "upstream stream ended early".into(),
        ..Default::default()
    };
    let calls = root.join("calls.jsonl");
    std::fs::write(&calls, serde_json::to_string(&row).unwrap() + "\n").unwrap();
    (sessions, calls)
}

/// The stderr a recorded shell command failed with in [`workspace_session`].
pub const FAILED_STDERR: &str = "error[E0425]: cannot find value `two` in this scope";

/// An agent's session recorded with a watched workspace, into `sessions` as `id`, its
/// snapshots' objects beside it (`.cuca-workspace/objects`), as `cuca run` leaves them: call
/// 1 sees `notes.txt` and `logo.bin`; the agent then appends a line to `notes.txt`, deletes
/// `logo.bin` and runs `cargo test`, which fails; call 2 sees the change.
pub fn workspace_session(sessions: &Path, id: &str) {
    use cuca_events::CapturedStream;
    use cuca_workspace::{DirObjects, SnapshotConfig, Snapshotter};
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("notes.txt"), "one\nthree\n").unwrap();
    std::fs::write(workspace.path().join("logo.bin"), b"\x89PNG\0\x01").unwrap();
    let objects = std::sync::Arc::new(DirObjects::beside(sessions));
    let mut snapshotter =
        Snapshotter::new(workspace.path(), objects, SnapshotConfig::default()).unwrap();
    let first = snapshotter.snapshot(None).unwrap();
    std::fs::write(workspace.path().join("notes.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::remove_file(workspace.path().join("logo.bin")).unwrap();
    let second = snapshotter.snapshot(Some(&first.id)).unwrap();
    let t0 = 1_700_000_000_000u64;
    let mut records = Vec::new();
    let mut push = |at: u64, event: SessionEvent| {
        let mut r = record(id, records.len() as u64, event);
        r.timestamp_ms = t0 + at;
        records.push(r);
    };
    let call = |n: u64| SessionEvent::CallRequest {
        model: "gpt-test".into(),
        parameters: "{}".into(),
        tools: "[]".into(),
        messages: n,
    };
    push(0, first.event());
    push(1, call(1));
    push(2, SessionEvent::Message(Message::user("add the line two")));
    push(
        800,
        SessionEvent::Output {
            text: "Editing notes.txt, then testing.".into(),
        },
    );
    push(900, SessionEvent::Latency { duration_ms: 900 });
    push(
        900,
        SessionEvent::TokenUsage {
            prompt_tokens: 10,
            completion_tokens: 5,
        },
    );
    let stream = |text: &str| CapturedStream {
        sha256: format!("sha256:{}", "0".repeat(64)),
        bytes: text.len() as u64,
        tail: text.to_owned(),
        cut: 0,
    };
    push(
        2_400,
        SessionEvent::ShellCommand {
            command: "cargo test --quiet".into(),
            cwd: ".".into(),
            origin: "bash -c".into(),
            exit_status: Some(101),
            duration_ms: 1_300,
            stdout: stream("running 1 test\n"),
            stderr: stream(FAILED_STDERR),
        },
    );
    push(2_500, second.event());
    push(2_501, call(3));
    push(
        2_502,
        SessionEvent::Message(Message::user("the test failed")),
    );
    push(
        3_000,
        SessionEvent::Output {
            text: "Fixing it.".into(),
        },
    );
    push(3_100, SessionEvent::Latency { duration_ms: 600 });
    push(
        3_100,
        SessionEvent::TokenUsage {
            prompt_tokens: 20,
            completion_tokens: 6,
        },
    );
    append_all(&FileBackend::new(sessions).unwrap(), &records);
}
