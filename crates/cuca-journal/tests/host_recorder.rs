//! Host assembly of journals the `Recorder` itself wrote, whole and damaged: one test per row of
//! the seed's damage table, each built by damaging a real journal.

// Helpers outside `#[test]` functions unwrap too: a failure there is a failed test.
#![allow(clippy::unwrap_used)]

mod host_common;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use cuca_events::{Message, MessageContentBlock, ToolDefinition, UnifiedRequest, UnifiedResponse};
use cuca_journal::assemble::{assemble, AssembleError, Outcome};
use cuca_journal::format::{
    AgentOrigin, AgentRow, AgentStatus, ErrorClass, Modality, RequestRole, Retention, Seed,
    ShellOrigin, Slot, SlotSeed, StopReason,
};
use cuca_journal::record::read_record;
use cuca_journal::{
    FrameEntry, GitRun, ModelFailure, Recorder, RecorderConfig, RecorderStatus, ShellRun, SinkHook,
    ToolOutcome,
};
use host_common::read_artifact;

fn answer(text: &str) -> UnifiedResponse {
    UnifiedResponse {
        model: "qwen3".into(),
        provider: "llamacpp".into(),
        content: vec![MessageContentBlock::text(text)],
        ..UnifiedResponse::default()
    }
}

fn row(id: &str, status: AgentStatus) -> AgentRow {
    AgentRow {
        id: id.into(),
        profile_id: "p".into(),
        profile_name: "coder".into(),
        origin: AgentOrigin::Root,
        status,
        ceiling: None,
    }
}

/// Records a three-turn session touching every entry kind into `config`'s workspace and
/// finishes it. Returns the recorder's final status.
fn record_session(
    config: RecorderConfig,
    first_write: Option<mpsc::Receiver<()>>,
) -> (PathBuf, RecorderStatus) {
    let recorder = Recorder::start(config).unwrap();
    if let Some(first_write) = first_write {
        // The header's write is the one that succeeds; wait for it (a channel, not a sleep).
        first_write.recv().unwrap();
    }
    let workspace = recorder
        .path()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_owned();
    recorder.seed(&Seed {
        baseline_commit: Some("4b825dc".into()),
        build_prompt: "build a todo app".into(),
        slots: vec![SlotSeed {
            slot: "main".into(),
            model: "qwen3".into(),
            context_window: 32768,
            modalities: vec![Modality::Text, Modality::Image],
        }],
    });
    recorder.agent(&row("root", AgentStatus::Started));
    recorder.clock(
        "root",
        Duration::from_secs(1),
        Some(Duration::from_secs(599)),
    );
    let system = Message::system("you build things");
    let tools = vec![ToolDefinition {
        name: "shell".into(),
        description: "run a command".into(),
        parameters: serde_json::json!({"type": "object"}),
    }];
    for turn in 0..3 {
        let user = Message::user(format!("turn {turn}"));
        let mut request = UnifiedRequest::new(vec![system.clone(), user.clone()]);
        request.tools = tools.clone();
        recorder.model_io(
            "root",
            &request,
            RequestRole::AgentTurn,
            &answer("ok"),
            Duration::from_millis(5),
        );
        let frame = [
            FrameEntry {
                message: &system,
                retention: Retention::Verbatim,
                region: None,
                turn: 0,
                slot: Slot::System,
            },
            FrameEntry {
                message: &user,
                retention: Retention::Compactable,
                region: None,
                turn,
                slot: Slot::Conversation,
            },
        ];
        recorder.prompt_frame("root", turn, &frame);
        recorder.tool_result(
            "root",
            &ToolOutcome {
                call_id: "c1",
                name: "shell",
                arguments: "{\"cmd\":\"ls\"}",
                output: "README.md\n",
                is_error: false,
            },
        );
        recorder.shell(
            "root",
            &ShellRun {
                origin: ShellOrigin::ShellTool,
                command: "ls",
                cwd: &workspace,
                exit_status: Some(0),
                stdout: "README.md\n",
                stderr: "",
            },
        );
    }
    recorder.git(
        "root",
        &GitRun {
            args: &["status"],
            cwd: &workspace,
            exit_status: Some(0),
            stdout: "",
            stderr: "",
        },
    );
    recorder.cancel_probe("root", false, None);
    recorder.model_error(
        "root",
        &UnifiedRequest::new(vec![system.clone()]),
        RequestRole::CompactionSummarizer,
        &ModelFailure {
            class: ErrorClass::RetryExhaustion,
            status: Some(503),
            detail: "gave up",
        },
    );
    recorder.agent(&row("root", AgentStatus::Completed));
    let status = recorder.finish();
    (recorder.path().to_owned(), status)
}

/// Entries the session above records.
const ENTRIES: u64 = 1 + 3 * 4 + 3;

struct Run {
    _dir: tempfile::TempDir,
    tree: PathBuf,
    run_dir: PathBuf,
    journal: PathBuf,
}

fn recorded(configure: impl FnOnce(RecorderConfig) -> RecorderConfig) -> (Run, RecorderStatus) {
    recorded_waiting(configure, None)
}

fn recorded_waiting(
    configure: impl FnOnce(RecorderConfig) -> RecorderConfig,
    first_write: Option<mpsc::Receiver<()>>,
) -> (Run, RecorderStatus) {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    let config = configure(
        RecorderConfig::new(&tree, "run-7")
            .unwrap()
            .with_routing_key("eu/run-7"),
    );
    let (journal, status) = record_session(config, first_write);
    let run_dir = dir.path().join("runs").join("run-7");
    (
        Run {
            _dir: dir,
            tree,
            run_dir,
            journal,
        },
        status,
    )
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn rewrite(path: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_recorded_session_assembles_complete_and_reads_back() {
    let (run, status) = recorded(|c| c);
    assert_eq!(status.stopped, None);
    assert_eq!(status.entries, ENTRIES);
    let report = assemble(&run.tree, &run.run_dir).unwrap().unwrap();
    assert_eq!(report.outcome, Outcome::Complete);
    assert_eq!(report.n_entries, ENTRIES);
    assert_eq!(
        (report.n_messages, report.n_toolsets, report.n_texts),
        (status.messages, status.toolsets, status.texts)
    );
    assert!(!run.journal.exists());

    let record = read_artifact(&report.artifact);
    assert_eq!(record["routingKey"], "eu/run-7");
    assert_eq!(record["agents"][0]["status"], "completed");
    assert_eq!(
        record["entries"][ENTRIES as usize - 1]["request"]["role"],
        "compaction_summarizer"
    );
    // The record's references resolve: every message a request names is in the pool.
    let n_messages = record["pools"]["messages"].as_array().unwrap().len() as u64;
    for entry in record["entries"].as_array().unwrap() {
        for index in entry["request"]["messages"]
            .as_array()
            .into_iter()
            .flatten()
        {
            assert!(index.as_u64().unwrap() < n_messages);
        }
    }

    // `cuca journal show` reads the same figures back, streaming.
    let summary = read_record(&report.artifact).unwrap();
    assert_eq!(summary.outcome, Outcome::Complete);
    assert_eq!(summary.session_id, "run-7");
    assert_eq!(summary.n_entries, ENTRIES);
    assert_eq!(summary.last_seq, Some(ENTRIES - 1));
    assert_eq!(summary.n_texts, report.n_texts);
    assert_eq!(summary.entries_by_kind, report.entries_by_kind);
    assert_eq!(summary.entries_by_kind["model_io"], 3);
    assert_eq!(summary.agents.len(), 1);
}

#[test]
fn recorded_journal_without_its_end_is_session_killed() {
    // "No terminating line | session_killed; everything read is kept"
    let (run, _) = recorded(|c| c);
    let mut journal = lines(&run.journal);
    assert!(journal.pop().unwrap().contains("\"line\":\"end\""));
    rewrite(&run.journal, &journal);
    let report = assemble(&run.tree, &run.run_dir).unwrap().unwrap();
    assert_eq!(report.outcome, Outcome::SessionKilled);
    assert_eq!(report.n_entries, ENTRIES);
}

#[test]
fn recorded_journal_with_a_torn_line_is_corrupt_at_the_last_complete_seq() {
    // "A torn or unparseable line | corrupt_journal at the last complete seq"
    let (run, _) = recorded(|c| c);
    let mut bytes = std::fs::read(&run.journal).unwrap();
    // Drop the end line and tear the last entry in half.
    bytes.truncate(bytes.len() - 1);
    let end_at = bytes.iter().rposition(|&b| b == b'\n').unwrap();
    bytes.truncate(end_at);
    let last_at = bytes.iter().rposition(|&b| b == b'\n').unwrap();
    bytes.truncate(last_at + (bytes.len() - last_at) / 2);
    std::fs::write(&run.journal, &bytes).unwrap();
    let report = assemble(&run.tree, &run.run_dir).unwrap().unwrap();
    // The line torn is the root's terminal agent row, written after the last entry.
    match report.outcome {
        Outcome::CorruptJournal {
            last_complete_seq, ..
        } => assert_eq!(last_complete_seq, Some(ENTRIES - 1)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn recorded_journal_whose_end_miscounts_is_corrupt() {
    // "A terminating line whose count disagrees with the walk | corrupt_journal"
    let (run, _) = recorded(|c| c);
    let mut journal = lines(&run.journal);
    let end = journal.pop().unwrap();
    journal.push(end.replace(&format!("\"entries\":{ENTRIES}"), "\"entries\":99"));
    rewrite(&run.journal, &journal);
    let report = assemble(&run.tree, &run.run_dir).unwrap().unwrap();
    assert_eq!(report.outcome.kind(), "corrupt_journal");
}

/// A journal file whose every write after the first fails, like a disk that filled up.
struct FailingDisk {
    file: std::fs::File,
    first_write: Option<mpsc::Sender<()>>,
}

impl Write for FailingDisk {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some(first_write) = self.first_write.take() else {
            return Err(io::Error::other("injected disk failure"));
        };
        self.file.write_all(buf)?;
        let _ = first_write.send(());
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[test]
fn recorded_writer_failure_is_write_failed_as_reported() {
    // "The journal writer failed | write_failed, as the recorder reported it"
    let (sender, first_write) = mpsc::channel();
    let sender = Mutex::new(Some(sender));
    let hook: SinkHook = Arc::new(move |file| {
        Box::new(FailingDisk {
            file,
            first_write: sender.lock().unwrap().take(),
        })
    });
    let (run, status) = recorded_waiting(|c| c.with_sink_hook(hook), Some(first_write));
    assert_eq!(status.stopped, Some(StopReason::WriteFailed));
    let report = assemble(&run.tree, &run.run_dir).unwrap().unwrap();
    assert_eq!(
        report.outcome,
        Outcome::WriteFailed {
            stop_reason: StopReason::WriteFailed
        }
    );
    assert_eq!(report.n_entries, status.entries);
}

#[test]
fn recorded_byte_ceiling_is_byte_ceiling_as_reported() {
    // "The byte ceiling was crossed | byte_ceiling, as the recorder reported it"
    let (run, status) = recorded(|c| c.with_max_bytes(2_500));
    assert_eq!(status.stopped, Some(StopReason::ByteCeiling));
    let report = assemble(&run.tree, &run.run_dir).unwrap().unwrap();
    assert_eq!(report.outcome, Outcome::ByteCeiling);
    assert!(report.n_entries < ENTRIES);
    assert_eq!(report.n_entries, status.entries);
}

fn assert_refused(run: &Run, check: impl FnOnce(AssembleError)) {
    let before = std::fs::read(&run.journal).unwrap();
    let err = assemble(&run.tree, &run.run_dir).unwrap_err();
    check(err);
    // "Refused; no record is written", and "a refused journal is left where it is".
    let left: Vec<_> = std::fs::read_dir(&run.run_dir)
        .map(|d| d.count())
        .into_iter()
        .collect();
    assert!(
        left.is_empty() || left == [0],
        "run directory holds {left:?} entries"
    );
    assert_eq!(std::fs::read(&run.journal).unwrap(), before);
}

#[test]
fn recorded_journal_with_a_pool_gap_is_refused() {
    // "A pool line whose index is not the next one | Refused"
    let (run, _) = recorded(|c| c);
    let mut journal = lines(&run.journal);
    let at = journal
        .iter()
        .position(|l| l.contains("\"line\":\"message\",\"index\":1,"))
        .unwrap();
    journal.remove(at);
    rewrite(&run.journal, &journal);
    assert_refused(&run, |err| {
        assert!(
            matches!(
                err,
                AssembleError::PoolGap {
                    pool: "message",
                    expected: 1,
                    found: 2,
                    ..
                }
            ),
            "{err}"
        )
    });
}

#[test]
fn recorded_journal_with_a_dangling_reference_is_refused() {
    // "An entry referencing past a pool's end | Refused"
    let (run, _) = recorded(|c| c);
    let mut journal = lines(&run.journal);
    let at = journal
        .iter()
        .position(|l| l.contains("\"kind\":\"tool_result\""))
        .unwrap();
    let line = serde_json::from_str::<serde_json::Value>(&journal[at]).unwrap();
    let output = line["output"].as_u64().unwrap();
    journal[at] = journal[at].replace(&format!("\"output\":{output}"), "\"output\":4096");
    rewrite(&run.journal, &journal);
    assert_refused(&run, |err| {
        assert!(
            matches!(
                err,
                AssembleError::DanglingReference {
                    field: "output",
                    index: 4096,
                    ..
                }
            ),
            "{err}"
        )
    });
}

#[test]
fn recorded_journal_in_another_format_is_refused() {
    // "A journal in a format this build does not write | Refused"
    let (run, _) = recorded(|c| c);
    let mut journal = lines(&run.journal);
    journal[0] = journal[0].replace("\"formatVersion\":1", "\"formatVersion\":7");
    rewrite(&run.journal, &journal);
    assert_refused(&run, |err| {
        assert!(
            matches!(&err, AssembleError::UnsupportedFormat { found, .. } if found == "7"),
            "{err}"
        )
    });
}
