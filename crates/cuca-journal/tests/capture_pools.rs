//! The pools: dedup by content address, image descriptors, tail-keeping clips and the clip table.
// Test-crate helpers outside #[test] functions unwrap too, as tests do.
#![allow(clippy::unwrap_used)]

mod capture_support;

use std::time::Duration;

use capture_support::*;
use cuca_events::{
    Message, MessageContentBlock, Role, ToolDefinition, UnifiedRequest, UnifiedResponse,
};
use cuca_journal::clip::{STREAM_CLIP_BYTES, TOOL_CLIP_BYTES};
use cuca_journal::format::{JournalLine, RequestRole, ShellOrigin, StoredBlock};
use cuca_journal::pool::text_id;
use cuca_journal::{Recorder, RecorderConfig, ShellRun, ToolOutcome};

fn start(dir: &std::path::Path) -> Recorder {
    Recorder::start(RecorderConfig::new(dir, "pools").unwrap()).unwrap()
}

fn answer(text: &str) -> UnifiedResponse {
    UnifiedResponse {
        model: "m".into(),
        provider: "test".into(),
        content: vec![MessageContentBlock::text(text)],
        ..UnifiedResponse::default()
    }
}

#[test]
fn the_same_message_in_1000_requests_is_pooled_once() {
    // "The message pool holds each distinct message body ... Each entry is stored once under a
    // content address and referenced by index."
    let dir = tempfile::tempdir().unwrap();
    let recorder = start(dir.path());
    let system = Message::system("you are a careful engineer");
    let tools = vec![ToolDefinition {
        name: "shell".into(),
        description: "run a command".into(),
        parameters: serde_json::json!({"type": "object"}),
    }];
    for turn in 0..1000 {
        let mut request =
            UnifiedRequest::new(vec![system.clone(), Message::user(format!("turn {turn}"))]);
        request.tools = tools.clone();
        recorder.model_io(
            "root",
            &request,
            RequestRole::AgentTurn,
            &answer("ok"),
            Duration::from_millis(1),
        );
    }
    let status = recorder.finish();
    assert_eq!(status.stopped, None);
    let lines = read_journal(recorder.path());
    check_laws(&lines);
    // One system message, 1000 distinct user messages, one answer; one toolset.
    let (messages, toolsets, texts, clips) = pool_counts(&lines);
    assert_eq!((messages, toolsets, texts, clips), (1002, 1, 0, 0));
    let system_lines = lines
        .iter()
        .filter(|l| matches!(l, JournalLine::Message(m) if m.body.role == Role::System))
        .count();
    assert_eq!(system_lines, 1);
    let entries = entries(&lines);
    assert_eq!(entries.len(), 1000);
    assert_eq!(end(&lines).unwrap().entries, 1000);
}

#[test]
fn two_pictures_of_one_media_type_and_size_are_two_messages() {
    // "Addressing before the reduction is what keeps two different pictures of one media type
    // and decoded size two different messages."
    let dir = tempfile::tempdir().unwrap();
    let recorder = start(dir.path());
    let picture = |data: &str| Message {
        role: Role::User,
        content: vec![
            MessageContentBlock::text("what is this?"),
            MessageContentBlock::ImageBase64 {
                media_type: "image/png".into(),
                data: data.into(),
            },
        ],
    };
    let request = UnifiedRequest::new(vec![
        picture("AAAAAAAA"),
        picture("BBBBBBBB"),
        picture("AAAAAAAA"),
    ]);
    recorder.model_io(
        "root",
        &request,
        RequestRole::AgentTurn,
        &answer("two cats"),
        Duration::ZERO,
    );
    recorder.finish();
    let lines = read_journal(recorder.path());
    check_laws(&lines);
    let images: Vec<_> = lines
        .iter()
        .filter_map(|l| match l {
            JournalLine::Message(m) if m.body.role == Role::User => {
                Some((m.id, m.body.content[1].clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        images.len(),
        2,
        "two pictures, two messages; the repeat is one of them"
    );
    assert_ne!(images[0].0, images[1].0);
    for (_, block) in &images {
        // "An image is recorded as its media type and decoded size and never as its bytes."
        assert_eq!(
            *block,
            StoredBlock::Image {
                media_type: "image/png".into(),
                size: 6
            }
        );
    }
    let raw = std::fs::read_to_string(recorder.path()).unwrap();
    assert!(!raw.contains("AAAAAAAA") && !raw.contains("BBBBBBBB"));
    match &entries(&lines)[0].input {
        cuca_journal::format::Input::ModelIo(io) => assert_eq!(io.request.messages, [0, 1, 0]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_clipped_stream_keeps_its_tail_and_has_a_clip_row() {
    // "A clipped payload keeps its tail ... The clip table records, for each clipped pool
    // entry, how many bytes the whole payload had and the whole payload's content address."
    let dir = tempfile::tempdir().unwrap();
    let recorder = start(dir.path());
    let stdout = format!("{}THE END", "é".repeat(STREAM_CLIP_BYTES)); // two bytes each
    recorder.shell(
        "root",
        &ShellRun {
            origin: ShellOrigin::ShellTool,
            command: "yes é",
            cwd: &dir.path().join("sub"),
            exit_status: Some(0),
            stdout: &stdout,
            stderr: "",
        },
    );
    let output = format!("{}last line\n", "x".repeat(TOOL_CLIP_BYTES));
    recorder.tool_result(
        "root",
        &ToolOutcome {
            call_id: "c1",
            name: "read_file",
            arguments: "{}",
            output: &output,
            is_error: false,
        },
    );
    recorder.finish();
    let lines = read_journal(recorder.path());
    check_laws(&lines);
    let clips: Vec<_> = lines
        .iter()
        .filter_map(|l| match l {
            JournalLine::Clip(c) => Some(c.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(clips.len(), 2);
    assert_eq!(clips[0].original_bytes, stdout.len() as u64);
    assert_eq!(clips[0].original_id, text_id(&stdout));
    let kept = text_at(&lines, clips[0].index);
    assert!(kept.ends_with("THE END"));
    assert!(stdout.ends_with(&kept));
    assert!(kept.len() <= STREAM_CLIP_BYTES && kept.len() >= STREAM_CLIP_BYTES - 3);
    assert_eq!(clips[1].original_bytes, output.len() as u64);
    let kept = text_at(&lines, clips[1].index);
    assert_eq!(kept.len(), TOOL_CLIP_BYTES);
    assert!(kept.ends_with("last line\n"));
    match &entries(&lines)[0].input {
        cuca_journal::format::Input::Shell(s) => assert_eq!(s.cwd, "sub"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_same_tail_with_different_originals_is_two_entries_with_two_clip_rows() {
    // "interning keys on the address of the original, so two payloads that share a tail occupy
    // two entries with two rows."
    let dir = tempfile::tempdir().unwrap();
    let recorder = start(dir.path());
    let tail = "t".repeat(STREAM_CLIP_BYTES);
    let first = format!("first{tail}");
    let second = format!("second{tail}");
    for stdout in [&first, &second, &first] {
        recorder.shell(
            "root",
            &ShellRun {
                origin: ShellOrigin::Hook,
                command: "build",
                cwd: dir.path(),
                exit_status: Some(1),
                stdout,
                stderr: "",
            },
        );
    }
    recorder.finish();
    let lines = read_journal(recorder.path());
    check_laws(&lines);
    let (_, _, texts, clips) = pool_counts(&lines);
    assert_eq!(
        (texts, clips),
        (3, 2),
        "first, second, and the empty stderr"
    );
    let ids: Vec<_> = lines
        .iter()
        .filter_map(|l| match l {
            JournalLine::Clip(c) => Some(c.original_id),
            _ => None,
        })
        .collect();
    assert_eq!(ids, [text_id(&first), text_id(&second)]);
    let stdouts: Vec<u64> = entries(&lines)
        .iter()
        .map(|e| match &e.input {
            cuca_journal::format::Input::Shell(s) => s.stdout,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(stdouts[0], stdouts[2]);
    assert_ne!(stdouts[0], stdouts[1]);
    assert_eq!(text_at(&lines, stdouts[0]), text_at(&lines, stdouts[1]));
}

#[test]
fn a_tool_output_and_the_tool_message_quoting_it_share_one_text() {
    // "A tool's output is also quoted verbatim into the tool message that carries it into the
    // window, so interning both against one table collapses the pair."
    let dir = tempfile::tempdir().unwrap();
    let recorder = start(dir.path());
    let output = "fn main() {}\n".repeat(100);
    recorder.tool_result(
        "root",
        &ToolOutcome {
            call_id: "c1",
            name: "read_file",
            arguments: r#"{"path":"src/main.rs"}"#,
            output: &output,
            is_error: false,
        },
    );
    let request = UnifiedRequest::new(vec![
        Message {
            role: Role::Assistant,
            content: vec![MessageContentBlock::ToolCall {
                id: "c1".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"src/main.rs"}"#.into(),
            }],
        },
        Message {
            role: Role::Tool,
            content: vec![MessageContentBlock::ToolResult {
                tool_call_id: "c1".into(),
                content: output.clone(),
                is_error: false,
            }],
        },
    ]);
    recorder.model_io(
        "root",
        &request,
        RequestRole::AgentTurn,
        &answer("done"),
        Duration::ZERO,
    );
    recorder.finish();
    let lines = read_journal(recorder.path());
    check_laws(&lines);
    let (_, _, texts, _) = pool_counts(&lines);
    assert_eq!(texts, 2, "the arguments and the output, each once");
    let raw = std::fs::read_to_string(recorder.path()).unwrap();
    assert_eq!(
        raw.matches("fn main() {}").count(),
        100,
        "the output is written once"
    );
}

#[test]
fn a_non_finite_temperature_is_recorded_as_absent_not_a_failure() {
    // "Capture degrades; it never fails the run it observes." A NaN cannot be JSON; serde_json
    // writes it as null, so the line stays valid and capture goes on.
    let dir = tempfile::tempdir().unwrap();
    let recorder = start(dir.path());
    let mut request = UnifiedRequest::new(vec![Message::user("hot")]);
    request.temperature = Some(f32::NAN);
    recorder.model_io(
        "root",
        &request,
        RequestRole::AgentTurn,
        &answer("ok"),
        Duration::ZERO,
    );
    let status = recorder.finish();
    assert_eq!((status.stopped, status.entries), (None, 1));
    let lines = read_journal(recorder.path());
    check_laws(&lines);
    match &entries(&lines)[0].input {
        cuca_journal::format::Input::ModelIo(io) => assert_eq!(io.request.temperature, None),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_tool_output_shown_in_full_is_recorded_in_full_even_after_a_stream_clipped_the_same_bytes() {
    // Seed: "a payload the model was shown in full is recorded in full". The same
    // bytes first seen as a shell stream (clipped at 32 KiB) are not reused, clipped, for the
    // tool output: clipped and whole entries are keyed apart.
    let dir = tempfile::tempdir().unwrap();
    let recorder = start(dir.path());
    let bytes = format!("{}end of the log\n", "log line\n".repeat(8 * 1024)); // ~72 KiB
    assert!(bytes.len() > STREAM_CLIP_BYTES && bytes.len() < TOOL_CLIP_BYTES);
    recorder.shell(
        "root",
        &ShellRun {
            origin: ShellOrigin::ShellTool,
            command: "cat build.log",
            cwd: dir.path(),
            exit_status: Some(0),
            stdout: &bytes,
            stderr: "",
        },
    );
    recorder.tool_result(
        "root",
        &ToolOutcome {
            call_id: "c1",
            name: "read_file",
            arguments: "{}",
            output: &bytes,
            is_error: false,
        },
    );
    // And the stream again: it reuses its own clipped entry, not the whole one.
    recorder.shell(
        "root",
        &ShellRun {
            origin: ShellOrigin::ShellTool,
            command: "cat build.log",
            cwd: dir.path(),
            exit_status: Some(0),
            stdout: &bytes,
            stderr: "",
        },
    );
    recorder.finish();
    let lines = read_journal(recorder.path());
    check_laws(&lines);
    let entries = entries(&lines);
    let (stream, output, stream_again) =
        match (&entries[0].input, &entries[1].input, &entries[2].input) {
            (
                cuca_journal::format::Input::Shell(a),
                cuca_journal::format::Input::ToolResult(t),
                cuca_journal::format::Input::Shell(b),
            ) => (a.stdout, t.output, b.stdout),
            other => panic!("{other:?}"),
        };
    assert_eq!(text_at(&lines, output), bytes, "the tool output is whole");
    assert_ne!(stream, output);
    assert_eq!(stream, stream_again);
    assert!(text_at(&lines, stream).len() <= STREAM_CLIP_BYTES);
    // One clip row, for the stream's entry only; both lines carry the whole payload's address.
    let clips: Vec<_> = lines
        .iter()
        .filter_map(|l| match l {
            JournalLine::Clip(c) => Some((c.index, c.original_id)),
            _ => None,
        })
        .collect();
    assert_eq!(clips, [(stream, text_id(&bytes))]);
}
