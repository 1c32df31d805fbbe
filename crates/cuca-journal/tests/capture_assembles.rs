//! What capture writes, host assembly accepts: the two halves of the crate agree on format 1.
// Test-crate helpers outside #[test] functions unwrap too, as tests do.
#![allow(clippy::unwrap_used)]

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use cuca_events::{
    Message, MessageContentBlock, Role, ToolDefinition, UnifiedRequest, UnifiedResponse,
};
use cuca_journal::assemble::{assemble_journal, AssembleOptions, Outcome};
use cuca_journal::clip::STREAM_CLIP_BYTES;
use cuca_journal::format::{
    AgentOrigin, AgentRow, AgentStatus, ErrorClass, Modality, RequestRole, Retention, Seed,
    ShellOrigin, Slot, SlotSeed,
};
use cuca_journal::{
    FrameEntry, GitRun, ModelFailure, Recorder, RecorderConfig, ShellRun, SinkHook, ToolOutcome,
};

fn every_kind(recorder: &Recorder, ws: &Path) {
    let row = AgentRow {
        id: "root".into(),
        profile_id: "default".into(),
        profile_name: "default".into(),
        origin: AgentOrigin::Root,
        status: AgentStatus::Started,
        ceiling: None,
    };
    recorder.agent(&row);
    recorder.seed(&Seed {
        baseline_commit: Some("4b825dc".into()),
        build_prompt: "build it".into(),
        slots: vec![SlotSeed {
            slot: "main".into(),
            model: "qwen3".into(),
            context_window: 32768,
            modalities: vec![Modality::Text, Modality::Image],
        }],
    });
    let image = Message {
        role: Role::User,
        content: vec![MessageContentBlock::ImageBase64 {
            media_type: "image/png".into(),
            data: "iVBORw0KGgo=".into(),
        }],
    };
    let mut request = UnifiedRequest::new(vec![Message::system("sys"), image]);
    request.tools = vec![ToolDefinition {
        name: "shell".into(),
        description: "run".into(),
        parameters: serde_json::json!({"type": "object"}),
    }];
    recorder.model_error(
        "root",
        &request,
        RequestRole::AgentTurn,
        &ModelFailure {
            class: ErrorClass::UnsupportedImage,
            status: Some(400),
            detail: "no images",
        },
    );
    let answer = UnifiedResponse {
        content: vec![MessageContentBlock::ToolCall {
            id: "c1".into(),
            name: "shell".into(),
            arguments: r#"{"cmd":"ls"}"#.into(),
        }],
        ..UnifiedResponse::default()
    };
    let stripped = UnifiedRequest::new(vec![Message::system("sys")]);
    recorder.model_io(
        "root",
        &stripped,
        RequestRole::AgentTurn,
        &answer,
        Duration::from_millis(9),
    );
    let sys = Message::system("sys");
    recorder.prompt_frame(
        "root",
        1,
        &[FrameEntry {
            message: &sys,
            retention: Retention::Verbatim,
            region: None,
            turn: 0,
            slot: Slot::System,
        }],
    );
    let long = "y".repeat(STREAM_CLIP_BYTES + 10);
    recorder.shell(
        "root",
        &ShellRun {
            origin: ShellOrigin::ShellTool,
            command: "ls",
            cwd: ws,
            exit_status: Some(0),
            stdout: &long,
            stderr: "",
        },
    );
    recorder.tool_result(
        "root",
        &ToolOutcome {
            call_id: "c1",
            name: "shell",
            arguments: r#"{"cmd":"ls"}"#,
            output: &long,
            is_error: false,
        },
    );
    recorder.git(
        "root",
        &GitRun {
            args: &["status"],
            cwd: ws,
            exit_status: Some(0),
            stdout: "clean",
            stderr: "",
        },
    );
    recorder.cancel_probe("root", false, None);
    recorder.clock(
        "root",
        Duration::from_secs(2),
        Some(Duration::from_secs(58)),
    );
    recorder.agent(&AgentRow {
        status: AgentStatus::Completed,
        ..row
    });
}

#[test]
fn a_finished_journal_of_every_kind_assembles_complete() {
    let ws = tempfile::tempdir().unwrap();
    let run_dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::start(RecorderConfig::new(ws.path(), "whole").unwrap()).unwrap();
    every_kind(&recorder, ws.path());
    let status = recorder.finish();
    assert_eq!(status.stopped, None);
    let report =
        assemble_journal(recorder.path(), run_dir.path(), &AssembleOptions::default()).unwrap();
    assert_eq!(report.outcome, Outcome::Complete);
    assert_eq!(report.session_id, "whole");
    assert_eq!(report.n_entries, status.entries);
    assert_eq!(report.n_entries, 8);
    assert_eq!(
        report.entries_by_kind.len(),
        8,
        "{:?}",
        report.entries_by_kind
    );
    assert_eq!(
        (report.n_messages, report.n_toolsets, report.n_texts),
        (status.messages, status.toolsets, status.texts)
    );
    // The long stream and the identical tool output are one text, clipped once.
    assert_eq!(report.n_clips, 1);
    assert_eq!(report.n_agents, 1);
    assert!(report.terminated);
}

#[test]
fn a_stopped_or_killed_capture_assembles_with_its_reason() {
    let run_dir = tempfile::tempdir().unwrap();

    let ws = tempfile::tempdir().unwrap();
    let config = RecorderConfig::new(ws.path(), "ceiling")
        .unwrap()
        .with_max_bytes(1500);
    let recorder = Recorder::start(config).unwrap();
    every_kind(&recorder, ws.path());
    let status = recorder.finish();
    assert_eq!(
        status.stopped,
        Some(cuca_journal::format::StopReason::ByteCeiling)
    );
    let report =
        assemble_journal(recorder.path(), run_dir.path(), &AssembleOptions::default()).unwrap();
    assert_eq!(report.outcome, Outcome::ByteCeiling);
    assert_eq!(report.n_entries, status.entries);

    // A recorder dropped without finish (the run died): the writer drains, drops its sink and
    // exits; the sink's drop tells the test when (a channel, not a sleep).
    let ws = tempfile::tempdir().unwrap();
    let (dropped_tx, dropped) = mpsc::channel();
    let dropped_tx = Mutex::new(Some(dropped_tx));
    let hook: SinkHook = Arc::new(move |file| {
        Box::new(Announcing {
            file,
            dropped: dropped_tx.lock().unwrap().take().unwrap(),
        })
    });
    let config = RecorderConfig::new(ws.path(), "killed")
        .unwrap()
        .with_sink_hook(hook);
    let recorder = Recorder::start(config).unwrap();
    let path = recorder.path().to_path_buf();
    every_kind(&recorder, ws.path());
    let queued = recorder.status().entries;
    drop(recorder);
    dropped.recv().unwrap();
    let run_dir = tempfile::tempdir().unwrap();
    let report = assemble_journal(&path, run_dir.path(), &AssembleOptions::default()).unwrap();
    assert_eq!(report.outcome, Outcome::SessionKilled);
    assert_eq!(report.n_entries, queued);
    assert!(!report.terminated);
}

/// Passes everything through and says when the writer lets go of it.
struct Announcing {
    file: File,
    dropped: mpsc::Sender<()>,
}

impl Write for Announcing {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for Announcing {
    fn drop(&mut self) {
        let _ = self.dropped.send(());
    }
}
