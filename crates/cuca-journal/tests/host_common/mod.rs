//! Shared fixtures of the host-side tests: a realistic journal written with the format types,
//! ways to damage it, and a reader of the assembled artifact.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::io::Read;
use std::path::{Path, PathBuf};

use cuca_events::{Role, ToolChoice, ToolDefinition};
use cuca_journal::format::*;

pub fn cid(n: u8) -> ContentId {
    ContentId([n; 16])
}

fn request(messages: Vec<u64>, toolset: Option<u64>) -> PooledRequest {
    PooledRequest {
        model: "qwen3".into(),
        messages,
        toolset,
        tool_choice: Some(ToolChoice::Auto),
        max_tokens: Some(4096),
        temperature: None,
        reasoning_effort: None,
        role: RequestRole::AgentTurn,
        shape: RequestShape::Free,
    }
}

fn agent(id: &str, origin: AgentOrigin, status: AgentStatus) -> JournalLine {
    JournalLine::Agent(AgentRow {
        id: id.into(),
        profile_id: "p-coder".into(),
        profile_name: "coder".into(),
        origin,
        status,
        ceiling: (status == AgentStatus::Stopped).then(|| "max_turns".to_owned()),
    })
}

fn entry(seq: u64, agent: &str, input: Input) -> JournalLine {
    JournalLine::Entry(Entry {
        seq,
        agent: agent.into(),
        input,
    })
}

fn text(index: u64, text: &str) -> JournalLine {
    JournalLine::Text(TextLine {
        index,
        id: cid(100 + index as u8),
        text: text.into(),
    })
}

fn message(index: u64, role: Role, content: Vec<StoredBlock>) -> JournalLine {
    JournalLine::Message(MessageLine {
        index,
        id: cid(index as u8),
        body: StoredMessage { role, content },
    })
}

fn seed(prompt: &str, modalities: Vec<Modality>) -> JournalLine {
    JournalLine::Seed(Seed {
        baseline_commit: Some("4b825dc".into()),
        build_prompt: prompt.into(),
        slots: vec![SlotSeed {
            slot: "main".into(),
            model: "qwen3".into(),
            context_window: 32768,
            modalities,
        }],
    })
}

/// A whole session of two agents exercising all eight entry kinds, a clip row, a rewritten seed
/// and upserted agent rows; its `end` line is last.
pub fn session() -> Vec<JournalLine> {
    let root = "a0";
    let child = "a1";
    vec![
        JournalLine::Header(Header {
            format_version: FORMAT_VERSION,
            session_id: "run-42".into(),
            routing_key: Some("eu-1/run-42".into()),
            capabilities: serde_json::json!({"a0": ["shell", "git"]}),
            recorder: RecorderBuild {
                version: "0.1.0".into(),
                commit: Some("9f2c1e0".into()),
            },
        }),
        seed("build a todo app", vec![Modality::Text, Modality::Image]),
        agent(root, AgentOrigin::Root, AgentStatus::Started),
        // seq 0: a clock read.
        entry(
            0,
            root,
            Input::Clock(Clock {
                elapsed_ms: 10,
                remaining_ms: Some(599_990),
            }),
        ),
        // seq 1: the first model call.
        JournalLine::Toolset(ToolsetLine {
            index: 0,
            id: cid(200),
            tools: vec![ToolDefinition {
                name: "read_file".into(),
                description: "read a file".into(),
                parameters: serde_json::json!({"type": "object"}),
            }],
        }),
        text(0, "{\"path\":\"README.md\"}"),
        message(
            0,
            Role::System,
            vec![StoredBlock::Text {
                text: "you build things".into(),
            }],
        ),
        message(
            1,
            Role::User,
            vec![StoredBlock::Text {
                text: "build a todo app".into(),
            }],
        ),
        message(
            2,
            Role::Assistant,
            vec![StoredBlock::ToolCall {
                id: "c1".into(),
                name: "read_file".into(),
                arguments: 0,
            }],
        ),
        entry(
            1,
            root,
            Input::ModelIo(ModelIo {
                request: request(vec![0, 1], Some(0)),
                response: PooledResponse {
                    model: "qwen3".into(),
                    provider: "llamacpp".into(),
                    message: 2,
                    finish_reason: Some("tool_calls".into()),
                    prompt_tokens: 12,
                    completion_tokens: 9,
                    reasoning_tokens: None,
                    cost: None,
                    cached_tokens: None,
                },
                latency_ms: 640,
            }),
        ),
        // seq 2: the frame of that turn.
        entry(
            2,
            root,
            Input::PromptFrame(PromptFrame {
                turn: 1,
                items: vec![
                    FrameItem {
                        message: 0,
                        retention: Retention::Verbatim,
                        region: None,
                        turn: 0,
                        slot: Slot::System,
                    },
                    FrameItem {
                        message: 1,
                        retention: Retention::Compactable,
                        region: None,
                        turn: 1,
                        slot: Slot::Conversation,
                    },
                ],
            }),
        ),
        // seq 3: the tool result; its output was clipped.
        text(1, "…the kept tail of a long README"),
        JournalLine::Clip(ClipRow {
            pool: Pool::Text,
            index: 1,
            original_bytes: 300_000,
            original_id: cid(101),
        }),
        entry(
            3,
            root,
            Input::ToolResult(ToolResult {
                call_id: "c1".into(),
                name: "read_file".into(),
                arguments: 0,
                output: 1,
                is_error: false,
            }),
        ),
        agent(
            child,
            AgentOrigin::Spawn {
                parent: root.into(),
                position: 1,
            },
            AgentStatus::Started,
        ),
        // seq 4..: the child's shell, git, cancel probe and a failed model call.
        text(2, "ok\n"),
        text(3, ""),
        entry(
            4,
            child,
            Input::Shell(Shell {
                origin: ShellOrigin::Hook,
                command: "cargo fmt".into(),
                cwd: ".".into(),
                exit_status: Some(0),
                stdout: 2,
                stderr: 3,
            }),
        ),
        entry(
            5,
            child,
            Input::Git(Git {
                args: vec!["status".into(), "--porcelain".into()],
                cwd: ".".into(),
                exit_status: Some(0),
                stdout: 3,
                stderr: 3,
            }),
        ),
        entry(
            6,
            child,
            Input::CancelProbe(CancelProbe {
                present: false,
                content: None,
            }),
        ),
        entry(
            7,
            child,
            Input::ModelError(ModelError {
                request: request(vec![0, 1, 2], None),
                class: ErrorClass::UnsupportedImage,
                status: Some(400),
                detail: Some("image input is not supported".into()),
            }),
        ),
        agent(
            child,
            AgentOrigin::Spawn {
                parent: root.into(),
                position: 1,
            },
            AgentStatus::Stopped,
        ),
        // The refused image rewrites the seed's modalities: the last seed wins.
        seed("build a todo app", vec![Modality::Text]),
        agent(root, AgentOrigin::Root, AgentStatus::Completed),
        JournalLine::End(End {
            entries: 8,
            stop_reason: None,
        }),
    ]
}

/// The number of entries in [`session`].
pub const SESSION_ENTRIES: u64 = 8;

/// The lines as journal bytes, each followed by `\n`.
pub fn to_bytes(lines: &[JournalLine]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in lines {
        serde_json::to_writer(&mut out, line).unwrap();
        out.push(b'\n');
    }
    out
}

/// The journal bytes as text lines (without their `\n`), for surgical damage.
pub fn text_lines(lines: &[JournalLine]) -> Vec<String> {
    lines
        .iter()
        .map(|l| serde_json::to_string(l).unwrap())
        .collect()
}

/// Joins text lines back into journal bytes, each followed by `\n`.
pub fn join(lines: &[String]) -> Vec<u8> {
    let mut out = String::new();
    for line in lines {
        out.push_str(line);
        out.push('\n');
    }
    out.into_bytes()
}

/// A collected tree with `journal` at `.cuca/replay.ndjson`, and an empty run directory.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub tree: PathBuf,
    pub run_dir: PathBuf,
    pub journal: PathBuf,
}

impl Fixture {
    pub fn new(journal: &[u8]) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("collected");
        let run_dir = dir.path().join("runs").join("run-42");
        std::fs::create_dir_all(tree.join(".cuca")).unwrap();
        std::fs::create_dir_all(tree.join("src")).unwrap();
        std::fs::write(tree.join("src/main.rs"), "fn main() {}\n").unwrap();
        let path = tree.join(".cuca").join("replay.ndjson");
        std::fs::write(&path, journal).unwrap();
        Fixture {
            dir,
            tree,
            run_dir,
            journal: path,
        }
    }

    pub fn artifact(&self) -> PathBuf {
        self.run_dir.join("replay.json.gz")
    }

    /// Every name in the run directory, sorted.
    pub fn run_dir_names(&self) -> Vec<String> {
        let Ok(read) = std::fs::read_dir(&self.run_dir) else {
            return Vec::new();
        };
        let mut names: Vec<String> = read
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

/// Decodes a gzipped record into JSON.
pub fn read_artifact(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap();
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(bytes.as_slice())
        .read_to_end(&mut json)
        .unwrap();
    serde_json::from_slice(&json).unwrap()
}
