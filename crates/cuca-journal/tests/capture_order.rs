//! Order and attribution: the attachment rule, agent rows, seeds, and the plugin's pairing.
// Test-crate helpers outside #[test] functions unwrap too, as tests do.
#![allow(clippy::unwrap_used)]

mod capture_support;

use std::path::Path;
use std::time::Duration;

use capture_support::*;
use cuca_events::{
    CucaPlugin, Message, MessageContentBlock, PluginError, Role, ToolChoice, UnifiedRequest,
    UnifiedResponse,
};
use cuca_journal::format::{
    AgentOrigin, AgentRow, AgentStatus, ErrorClass, Input, JournalLine, Modality, RequestRole,
    RequestShape, Retention, Seed, Slot, SlotSeed,
};
use cuca_journal::{FrameEntry, JournalPlugin, Recorder, RecorderConfig};

fn start(dir: &Path) -> Recorder {
    Recorder::start(
        RecorderConfig::new(dir, "order")
            .unwrap()
            .with_routing_key("eu-1/order")
            .with_capabilities(serde_json::json!({"root": ["shell"]}))
            .with_build("9.9.9", Some("abc1234".into())),
    )
    .unwrap()
}

fn with_call(mut request: UnifiedRequest, call_id: &str, agent: &str) -> UnifiedRequest {
    request.metadata.call_id = Some(call_id.into());
    request.metadata.agent = Some(agent.into());
    request
}

#[tokio::test]
async fn a_refused_image_turn_is_model_error_then_model_io_then_prompt_frame() {
    // "A refused image turn therefore produces model_error → model_io → prompt_frame, and the
    // frame attaches to the call that was actually sent."
    let dir = tempfile::tempdir().unwrap();
    let recorder = start(dir.path());
    let plugin = JournalPlugin::new(recorder.clone());
    let system = Message::system("look carefully");
    let with_image = Message {
        role: Role::User,
        content: vec![
            MessageContentBlock::text("what is in the picture?"),
            MessageContentBlock::ImageBase64 {
                media_type: "image/jpeg".into(),
                data: "/9j/4AAQ".into(),
            },
        ],
    };
    let stripped = Message::user("what is in the picture?");

    let mut first = with_call(
        UnifiedRequest::new(vec![system.clone(), with_image]),
        "call-1",
        "a1",
    );
    plugin.on_request(&mut first).await.unwrap();
    let refusal = PluginError::Provider {
        url: "http://127.0.0.1:1/v1/chat/completions".into(),
        status: 400,
        message: "image input is not supported by this model".into(),
        retry_after_s: None,
    };
    plugin.on_error(&first, &refusal).await.unwrap();

    let mut second = with_call(
        UnifiedRequest::new(vec![system.clone(), stripped.clone()]),
        "call-2",
        "a1",
    );
    second.tool_choice = Some(ToolChoice::Required);
    plugin.on_request(&mut second).await.unwrap();
    let response = UnifiedResponse {
        model: "m".into(),
        provider: "llamacpp".into(),
        content: vec![MessageContentBlock::text("I cannot see images.")],
        duration: Duration::from_millis(321),
        call_id: Some("call-2".into()),
        ..UnifiedResponse::default()
    };
    plugin.on_response_complete(&response).await.unwrap();
    assert_eq!(plugin.in_flight(), 0);

    let answer = Message::assistant("I cannot see images.");
    let items = [
        FrameEntry {
            message: &system,
            retention: Retention::Verbatim,
            region: None,
            turn: 0,
            slot: Slot::System,
        },
        FrameEntry {
            message: &stripped,
            retention: Retention::Compactable,
            region: None,
            turn: 1,
            slot: Slot::Conversation,
        },
        FrameEntry {
            message: &answer,
            retention: Retention::Compactable,
            region: None,
            turn: 1,
            slot: Slot::Conversation,
        },
    ];
    recorder.prompt_frame("a1", 1, &items);
    recorder.finish();

    let lines = read_journal(recorder.path());
    check_laws(&lines);
    let entries = entries(&lines);
    let kinds: Vec<_> = entries.iter().map(|e| e.input.kind()).collect();
    assert_eq!(kinds, ["model_error", "model_io", "prompt_frame"]);
    assert!(entries.iter().all(|e| e.agent == "a1"));
    let (error, io, frame) = match (&entries[0].input, &entries[1].input, &entries[2].input) {
        (Input::ModelError(e), Input::ModelIo(io), Input::PromptFrame(f)) => (e, io, f),
        other => panic!("{other:?}"),
    };
    assert_eq!(error.class, ErrorClass::UnsupportedImage);
    assert_eq!(error.status, Some(400));
    assert_eq!(io.request.shape, RequestShape::ToolRequired);
    assert_eq!(error.request.shape, RequestShape::Free);
    assert_eq!(io.latency_ms, 321);
    // The frame is the window of the call that was sent: the stripped request plus its answer.
    let frame_messages: Vec<u64> = frame.items.iter().map(|i| i.message).collect();
    let mut sent = io.request.messages.clone();
    sent.push(io.response.message);
    assert_eq!(frame_messages, sent);
    assert_ne!(error.request.messages[1], io.request.messages[1]);
    assert_eq!(error.request.messages[0], io.request.messages[0]);
}

#[tokio::test]
async fn the_plugin_pairs_concurrent_calls_by_call_id_and_marks_compaction() {
    // "Its role is either the agent's own turn loop or the compaction summarizer ... without
    // the discriminator the two interleave into one queue"
    let dir = tempfile::tempdir().unwrap();
    let recorder = start(dir.path());
    let plugin = JournalPlugin::new(recorder.clone());
    let mut turn = with_call(
        UnifiedRequest::new(vec![Message::user("next step")]),
        "t",
        "a2",
    );
    let mut compaction = with_call(
        UnifiedRequest::new(vec![Message::user("summarise the window")]),
        "c",
        "a2",
    );
    compaction.metadata.tag = Some("compaction".into());
    plugin.on_request(&mut turn).await.unwrap();
    plugin.on_request(&mut compaction).await.unwrap();
    assert_eq!(plugin.in_flight(), 2);
    // Answers arrive in the other order.
    for (id, text) in [("c", "summary"), ("t", "step done")] {
        let response = UnifiedResponse {
            content: vec![MessageContentBlock::text(text)],
            call_id: Some(id.into()),
            duration: Duration::from_millis(10),
            ..UnifiedResponse::default()
        };
        plugin.on_response_complete(&response).await.unwrap();
    }
    recorder.finish();
    let lines = read_journal(recorder.path());
    check_laws(&lines);
    let roles: Vec<_> = entries(&lines)
        .iter()
        .map(|e| match &e.input {
            Input::ModelIo(io) => (io.request.role, io.request.messages.clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    // Pools were interned at request time: "next step" is message 0, the summary request 1.
    assert_eq!(
        roles,
        [
            (RequestRole::CompactionSummarizer, vec![1]),
            (RequestRole::AgentTurn, vec![0])
        ]
    );
}

#[test]
fn agent_rows_are_written_at_launch_and_at_the_end() {
    // "A row is written when the agent comes into existence and again when its loop ends, and
    // assembly upserts by agent id, so the terminal row supersedes the opening one."
    let dir = tempfile::tempdir().unwrap();
    let recorder = start(dir.path());
    let opening = AgentRow {
        id: "a7".into(),
        profile_id: "p-review".into(),
        profile_name: "reviewer".into(),
        origin: AgentOrigin::Reviewer {
            issue: "8".into(),
            round: 2,
            position: 1,
        },
        status: AgentStatus::Started,
        ceiling: None,
    };
    recorder.agent(&opening);
    recorder.clock("a7", Duration::from_secs(3), Some(Duration::from_secs(57)));
    let terminal = AgentRow {
        status: AgentStatus::Stopped,
        ceiling: Some("max_turns".into()),
        ..opening.clone()
    };
    recorder.agent(&terminal);
    let seed = |modalities: Vec<Modality>| Seed {
        baseline_commit: Some("4b825dc".into()),
        build_prompt: "review the parser".into(),
        slots: vec![SlotSeed {
            slot: "main".into(),
            model: "qwen3".into(),
            context_window: 32768,
            modalities,
        }],
    };
    recorder.seed(&seed(vec![Modality::Text, Modality::Image]));
    // "The seed line may be written again, and assembly keeps the last one"
    recorder.seed(&seed(vec![Modality::Text]));
    recorder.finish();
    let lines = read_journal(recorder.path());
    check_laws(&lines);
    match &lines[0] {
        JournalLine::Header(h) => {
            assert_eq!(h.session_id, "order");
            assert_eq!(h.routing_key.as_deref(), Some("eu-1/order"));
            assert_eq!(h.capabilities, serde_json::json!({"root": ["shell"]}));
            assert_eq!(
                (h.recorder.version.as_str(), h.recorder.commit.as_deref()),
                ("9.9.9", Some("abc1234"))
            );
        }
        other => panic!("{other:?}"),
    }
    let rows: Vec<_> = lines
        .iter()
        .filter_map(|l| match l {
            JournalLine::Agent(a) => Some(a.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(rows, [opening, terminal]);
    let seeds: Vec<_> = lines
        .iter()
        .filter_map(|l| match l {
            JournalLine::Seed(s) => Some(s.slots[0].modalities.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        seeds,
        [vec![Modality::Text, Modality::Image], vec![Modality::Text]]
    );
}

#[test]
fn shell_and_git_record_where_they_ran_relative_to_the_workspace() {
    // "Every command records where it ran, relative to the workspace wherever possible"
    let dir = tempfile::tempdir().unwrap();
    let recorder = start(dir.path());
    recorder.git(
        "root",
        &cuca_journal::GitRun {
            args: &["status", "--porcelain"],
            cwd: dir.path(),
            exit_status: Some(0),
            stdout: "",
            stderr: "",
        },
    );
    recorder.shell(
        "root",
        &cuca_journal::ShellRun {
            origin: cuca_journal::format::ShellOrigin::Program,
            command: "ls",
            cwd: Path::new("/somewhere/else"),
            exit_status: None,
            stdout: "a\nb\n",
            stderr: "",
        },
    );
    recorder.finish();
    let lines = read_journal(recorder.path());
    check_laws(&lines);
    let entries = entries(&lines);
    match (&entries[0].input, &entries[1].input) {
        (Input::Git(g), Input::Shell(s)) => {
            assert_eq!(
                (g.cwd.as_str(), g.args.clone()),
                (".", vec!["status".to_string(), "--porcelain".to_string()])
            );
            assert_eq!(g.stdout, g.stderr, "two empty streams are one text");
            assert_eq!((s.cwd.as_str(), s.exit_status), ("/somewhere/else", None));
            assert_eq!(text_at(&lines, s.stdout), "a\nb\n");
        }
        other => panic!("{other:?}"),
    }
}
