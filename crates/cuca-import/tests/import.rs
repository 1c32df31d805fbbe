//! Imports of the committed Claude Code and Codex fixtures (`fixtures/claude-code`,
//! `fixtures/codex`): the records each line becomes, usage counted once, sub-agents linked,
//! re-imports that append only what is new, and every unreadable line reported.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};

use cuca_events::{
    MessageContentBlock, Role, SessionBackend, SessionEvent, SessionRecord, TokenDetail,
};
use cuca_import::{import, FindingKind, ImportReport, Source, DEFAULT_MAX_LINE_BYTES};
use cuca_store_file::FileBackend;

const A: &str = "claude-code-1b0c5a2e-4d3f-4c6e-9a1b-2f7d8e9c0a11";
const AGENT: &str = "claude-code-1b0c5a2e-4d3f-4c6e-9a1b-2f7d8e9c0a11-agent-7f3a9c01";
const B: &str = "claude-code-c47e0d19-8b2a-4f55-b3c4-6e1d2a3b4c22";
const C: &str = "claude-code-9e2d4b70-1c3e-4a8f-a0d2-5b6c7d8e9f33";
const X: &str = "codex-0199a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a44";
const Y: &str = "codex-0199a7c8-d9e0-7f1a-9b2c-3d4e5f6a7b55";

fn fixtures(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
}

/// A copy of a fixture tree a test may change.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn run(store: &FileBackend, source: Source, dir: &Path) -> ImportReport {
    import(store, source, dir, DEFAULT_MAX_LINE_BYTES).unwrap()
}

fn events(store: &FileBackend, session: &str) -> Vec<SessionEvent> {
    store
        .replay(session)
        .unwrap()
        .into_iter()
        .map(|r| r.event)
        .collect()
}

fn usage(events: &[SessionEvent]) -> Vec<(u64, u64)> {
    events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::TokenUsage {
                prompt_tokens,
                completion_tokens,
            } => Some((*prompt_tokens, *completion_tokens)),
            _ => None,
        })
        .collect()
}

fn details(events: &[SessionEvent]) -> Vec<TokenDetail> {
    events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::TokenDetail(detail) => Some(*detail),
            _ => None,
        })
        .collect()
}

/// Every `TokenDetail` sits where a recorder puts it: right before its call's
/// `Latency`/`TokenUsage` pair.
fn assert_detail_before_pair(events: &[SessionEvent]) {
    for (i, event) in events.iter().enumerate() {
        if matches!(event, SessionEvent::TokenDetail(_)) {
            assert!(
                matches!(events.get(i + 1), Some(SessionEvent::Latency { .. }))
                    && matches!(events.get(i + 2), Some(SessionEvent::TokenUsage { .. })),
                "record {i}: {:?}",
                events.get(i..i + 3)
            );
        }
    }
}

fn wires(events: &[SessionEvent], format: &str) -> Vec<serde_json::Value> {
    events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::CallWire { format: f, wire } if f == format => {
                Some(serde_json::from_str(wire).unwrap())
            }
            _ => None,
        })
        .collect()
}

/// Milliseconds of a `YYYY-MM-DDTHH:MM:SS.mmmZ` UTC time, computed here independently of
/// the importer's parser.
fn ms(text: &str) -> u64 {
    let (date, time) = text.trim_end_matches('Z').split_once('T').unwrap();
    let d: Vec<i64> = date.split('-').map(|p| p.parse().unwrap()).collect();
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let t: Vec<i64> = hms.split(':').map(|p| p.parse().unwrap()).collect();
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + t[0] * 3600 + t[1] * 60 + t[2];
    (secs * 1000 + frac.parse::<i64>().unwrap()) as u64
}

#[test]
fn claude_code_lines_become_messages_tool_calls_results_thinking_usage_and_model() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileBackend::new(dir.path()).unwrap();
    let report = run(&store, Source::ClaudeCode, &fixtures("claude-code"));
    let records: Vec<SessionRecord> = store.replay(A).unwrap();
    let events: Vec<SessionEvent> = records.iter().map(|r| r.event.clone()).collect();

    // The user's question, with the transcript's own time.
    let question = records
        .iter()
        .find(|r| matches!(&r.event, SessionEvent::Message(m) if m.role == Role::User))
        .unwrap();
    assert_eq!(question.timestamp_ms, ms("2026-03-09T09:15:02.114Z"));
    assert_eq!(
        question.event,
        SessionEvent::Message(cuca_events::Message {
            role: Role::User,
            content: vec![MessageContentBlock::text(
                "Where is the vault's config file read? Keep it short."
            )],
        })
    );
    assert!(events.contains(&SessionEvent::Reasoning {
        text: "I should grep for the config loader first.".into()
    }));
    assert!(events.contains(&SessionEvent::ToolCall {
        id: "toolu_01GrepA".into(),
        name: "Grep".into(),
        arguments: r#"{"path":"src","pattern":"config.toml"}"#.into(),
    }));
    let result = "src/config.rs:14:    let path = dir.join(\"config.toml\");";
    assert!(events.contains(&SessionEvent::ToolResult {
        tool_call_id: "toolu_01GrepA".into(),
        content: result.into(),
        is_error: false,
        stdout: Some(result.into()),
        stderr: Some(String::new()),
        exit_code: None,
    }));
    assert!(events.contains(&SessionEvent::Output {
        text: "`src/config.rs:14` reads `config.toml`; `main.rs` and `server.rs` call it.".into()
    }));
    assert!(events.contains(&SessionEvent::CallFinish {
        finish_reason: Some("tool_use".into()),
        model: "claude-sonnet-4-5-20250929".into(),
    }));
    // Three calls; the first is written on two lines (one per block) and counted once, with
    // the larger count; the prompt sums input, cache reads and cache writes. The third is
    // counted in C, which repeats it and comes first in path order (see the dedup test).
    assert_eq!(
        usage(&events),
        [(3 + 13840, 212), (6 + 13840 + 412, 164), (0, 0)]
    );
    // Every kind apart, as the transcript wrote it, in each call's TokenDetail; the call
    // counted in C says 0 for each kind, as its folded record does.
    let anthropic = |input, output, cache_read, w5m: u64, w1h: u64| TokenDetail {
        input: Some(input),
        output: Some(output),
        cache_read: Some(cache_read),
        cache_write: Some(w5m + w1h),
        cache_write_5m: Some(w5m),
        cache_write_1h: Some(w1h),
        ..TokenDetail::default()
    };
    assert_eq!(
        details(&events),
        [
            anthropic(3, 212, 0, 13840, 0),
            anthropic(6, 164, 13840, 412, 0),
            anthropic(0, 0, 0, 0, 0),
        ]
    );
    assert_detail_before_pair(&events);
    // The kinds apart, as the transcript gave them, beside each call.
    let calls = wires(&events, "messages");
    assert_eq!(calls.len(), 3);
    assert_eq!(
        calls[2]["usage"]["cache_creation"]["ephemeral_1h_input_tokens"],
        2210
    );
    assert_eq!(calls[0]["id"], "msg_01VaultA1xQ");
    assert_eq!(calls[0]["request_id"], "req_011CVaultA1");
    // The turn's last record is its usage, at the time of the call's last line.
    let last_usage = records
        .iter()
        .rfind(|r| matches!(r.event, SessionEvent::TokenUsage { .. }))
        .unwrap();
    assert_eq!(last_usage.timestamp_ms, ms("2026-03-09T09:15:34.777Z"));
    // The malformed line is reported with its file and line, and nothing else is.
    assert!(report.failed());
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
    let finding = &report.findings[0];
    assert_eq!(finding.kind, FindingKind::Unreadable);
    assert_eq!(finding.line, Some(6));
    assert!(finding
        .file
        .ends_with("1b0c5a2e-4d3f-4c6e-9a1b-2f7d8e9c0a11.jsonl"));
    assert!(finding
        .to_string()
        .contains("1b0c5a2e-4d3f-4c6e-9a1b-2f7d8e9c0a11.jsonl:6: not JSON"));
    assert_eq!(report.skipped.get("summary"), Some(&1));
}

#[test]
fn sub_agents_are_sessions_of_their_own_linked_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileBackend::new(dir.path()).unwrap();
    let report = run(&store, Source::ClaudeCode, &fixtures("claude-code"));
    let links = |session: &str| -> Vec<(String, String)> {
        wires(&events(&store, session), "cuca-import")
            .into_iter()
            .filter(|w| w["kind"] != "marker")
            .map(|w| {
                (
                    w["kind"].as_str().unwrap().to_string(),
                    w["session"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    // A sub-agent file (`<session>/subagents/agent-<id>.jsonl`).
    let agent = events(&store, AGENT);
    assert!(matches!(&agent[0], SessionEvent::CallWire { format, .. } if format == "cuca-import"));
    assert_eq!(links(AGENT), [("parent".to_string(), A.to_string())]);
    assert!(links(A).contains(&("child".to_string(), AGENT.to_string())));
    assert!(agent.contains(&SessionEvent::CallFinish {
        finish_reason: Some("end_turn".into()),
        model: "claude-haiku-4-5-20251001".into(),
    }));
    assert_eq!(usage(&agent), [(9 + 5210, 77), (7 + 5210 + 96, 25)]);
    // Sidechain lines inline in a main transcript (the older layout).
    let side = format!("{C}-sidechain");
    assert_eq!(links(&side), [("parent".to_string(), C.to_string())]);
    assert!(links(C).contains(&("child".to_string(), side.clone())));
    assert!(events(&store, &side).contains(&SessionEvent::Output {
        text: "The notes list three open bugs.".into()
    }));
    let outcome = report.sessions.iter().find(|s| s.session == AGENT).unwrap();
    assert_eq!(outcome.parent.as_deref(), Some(A));
    // The main session of C has no sidechain content.
    assert!(!events(&store, C).contains(&SessionEvent::Output {
        text: "The notes list three open bugs.".into()
    }));
}

#[test]
fn a_call_another_transcript_already_counted_is_counted_zero() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileBackend::new(dir.path()).unwrap();
    run(&store, Source::ClaudeCode, &fixtures("claude-code"));
    // C starts with A's last message (same message and request id), as a resumed session
    // does: its content is in both sessions, its usage is counted once, in the transcript
    // imported first (path order: `-home-ada-src-notes` before `-home-ada-src-vault`).
    let copied = (4 + 14252 + 2210, 41);
    let c = events(&store, C);
    assert_eq!(usage(&c), [copied, (2 + 14252 + 120, 11)]);
    assert_eq!(usage(&events(&store, A))[2], (0, 0));
    let calls = wires(&events(&store, A), "messages");
    assert_eq!(calls[2]["counted"], false);
    assert_eq!(wires(&c, "messages")[0]["counted"], true);
    // Another store, importing A's project first and then everything: A counts the call and
    // C does not, across two runs, and the totals are the same.
    let dir2 = tempfile::tempdir().unwrap();
    let store2 = FileBackend::new(dir2.path()).unwrap();
    run(
        &store2,
        Source::ClaudeCode,
        &fixtures("claude-code/projects/-home-ada-src-vault"),
    );
    run(&store2, Source::ClaudeCode, &fixtures("claude-code"));
    assert_eq!(usage(&events(&store2, A))[2], copied);
    assert_eq!(usage(&events(&store2, C))[0], (0, 0));
    let total = |s: &FileBackend| -> u64 {
        s.sessions()
            .unwrap()
            .iter()
            .flat_map(|id| usage(&events(s, id)))
            .map(|(p, c)| p + c)
            .sum()
    };
    assert_eq!(total(&store2), total(&store));
}

#[test]
fn a_second_import_appends_nothing() {
    for (source, dir) in [
        (Source::ClaudeCode, "claude-code"),
        (Source::Codex, "codex"),
    ] {
        let store_dir = tempfile::tempdir().unwrap();
        let store = FileBackend::new(store_dir.path()).unwrap();
        let first = run(&store, source, &fixtures(dir));
        assert!(first.records() > 0);
        let before: Vec<(String, usize)> = store
            .sessions()
            .unwrap()
            .into_iter()
            .map(|id| {
                let n = store.replay(&id).unwrap().len();
                (id, n)
            })
            .collect();
        let second = run(&store, source, &fixtures(dir));
        assert_eq!(second.records(), 0, "{:?}", second.sessions);
        assert!(!second.failed(), "{:?}", second.findings);
        assert!(second.sessions.iter().all(|s| !s.new));
        let after: Vec<(String, usize)> = store
            .sessions()
            .unwrap()
            .into_iter()
            .map(|id| {
                let n = store.replay(&id).unwrap().len();
                (id, n)
            })
            .collect();
        assert_eq!(before, after);
    }
}

fn append(path: &Path, line: &str) {
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(line.as_bytes()).unwrap();
}

#[test]
fn a_line_appended_to_a_transcript_is_all_the_next_import_appends() {
    let tree = tempfile::tempdir().unwrap();
    copy_tree(&fixtures("claude-code"), tree.path());
    let transcript = tree
        .path()
        .join("projects/-home-ada-src-vault/c47e0d19-8b2a-4f55-b3c4-6e1d2a3b4c22.jsonl");
    let store_dir = tempfile::tempdir().unwrap();
    let store = FileBackend::new(store_dir.path()).unwrap();
    run(&store, Source::ClaudeCode, tree.path());
    let before = store.replay(B).unwrap().len();

    append(
        &transcript,
        concat!(
            r#"{"type":"user","sessionId":"c47e0d19-8b2a-4f55-b3c4-6e1d2a3b4c22","uuid":"c0000000-0000-4000-8000-000000000007","timestamp":"2026-03-10T00:04:00.000Z","message":{"role":"user","content":"Fix main.rs too."}}"#,
            "\n"
        ),
    );
    let report = run(&store, Source::ClaudeCode, tree.path());
    assert!(!report.failed(), "{:?}", report.findings);
    let after = store.replay(B).unwrap();
    let new: Vec<&SessionEvent> = after[before..].iter().map(|r| &r.event).collect();
    assert_eq!(new.len(), 2, "{new:?}");
    assert_eq!(
        new[0],
        &SessionEvent::Message(cuca_events::Message::new(Role::User, "Fix main.rs too."))
    );
    assert!(matches!(new[1], SessionEvent::CallWire { format, .. } if format == "cuca-import"));
    assert_eq!(after[before].timestamp_ms, ms("2026-03-10T00:04:00.000Z"));
    // No other session changed.
    assert_eq!(report.records(), 2);

    // The answer arrives in two lines (one per block); the second import reads the first
    // line, the third the second, whose larger count adds only the difference.
    let answer = |out: u64, block: &str| {
        format!(
            r#"{{"type":"assistant","sessionId":"c47e0d19-8b2a-4f55-b3c4-6e1d2a3b4c22","timestamp":"2026-03-10T00:04:05.000Z","requestId":"req_011COpusC4","message":{{"id":"msg_01OpusC4dd","model":"claude-opus-4-1-20250805","role":"assistant","content":[{block}],"stop_reason":null,"usage":{{"input_tokens":3,"output_tokens":{out},"cache_read_input_tokens":18990,"cache_creation_input_tokens":0}}}}}}"#
        ) + "\n"
    };
    append(
        &transcript,
        &answer(2, r#"{"type":"thinking","thinking":"main.rs:22"}"#),
    );
    run(&store, Source::ClaudeCode, tree.path());
    append(
        &transcript,
        &answer(57, r#"{"type":"text","text":"Done."}"#),
    );
    let report = run(&store, Source::ClaudeCode, tree.path());
    assert!(!report.failed(), "{:?}", report.findings);
    let all = events(&store, B);
    let u = usage(&all);
    assert_eq!(&u[u.len() - 2..], [(3 + 18990, 2), (0, 55)]);
    // Each import's detail holds what that import added, kind by kind, so the details of
    // the call sum to its usage however many imports read it.
    let d = details(&all);
    let written = |input, output, cache_read| TokenDetail {
        input: Some(input),
        output: Some(output),
        cache_read: Some(cache_read),
        cache_write: Some(0),
        ..TokenDetail::default()
    };
    assert_eq!(&d[d.len() - 2..], [written(3, 2, 18990), written(0, 55, 0)]);
    assert_detail_before_pair(&all);
    assert!(all.contains(&SessionEvent::Output {
        text: "Done.".into()
    }));
}

#[test]
fn a_store_imported_before_token_details_existed_reads_and_takes_only_new_lines() {
    let tree = tempfile::tempdir().unwrap();
    copy_tree(&fixtures("claude-code"), tree.path());
    let transcript = tree
        .path()
        .join("projects/-home-ada-src-vault/c47e0d19-8b2a-4f55-b3c4-6e1d2a3b4c22.jsonl");
    // A store as an import wrote it before the record existed: the same records without
    // their TokenDetail, sequences closed up.
    let now_dir = tempfile::tempdir().unwrap();
    let now = FileBackend::new(now_dir.path()).unwrap();
    run(&now, Source::ClaudeCode, tree.path());
    let old_dir = tempfile::tempdir().unwrap();
    let old = FileBackend::new(old_dir.path()).unwrap();
    for session in now.sessions().unwrap() {
        let kept = now
            .replay(&session)
            .unwrap()
            .into_iter()
            .filter(|r| !matches!(r.event, SessionEvent::TokenDetail(_)));
        for (sequence, record) in kept.enumerate() {
            old.append(SessionRecord {
                sequence: sequence as u64,
                ..record
            })
            .unwrap();
        }
    }
    let before = events(&old, B);
    assert!(details(&before).is_empty());
    // Its markers still say where each transcript was read to: nothing new, nothing written.
    let report = run(&old, Source::ClaudeCode, tree.path());
    assert!(!report.failed(), "{:?}", report.findings);
    assert_eq!(report.records(), 0);

    // A new call is appended with its detail; what was there is unchanged.
    append(
        &transcript,
        concat!(
            r#"{"type":"user","sessionId":"c47e0d19-8b2a-4f55-b3c4-6e1d2a3b4c22","uuid":"c0000000-0000-4000-8000-000000000007","timestamp":"2026-03-10T00:04:00.000Z","message":{"role":"user","content":"Fix main.rs too."}}"#,
            "\n",
            r#"{"type":"assistant","sessionId":"c47e0d19-8b2a-4f55-b3c4-6e1d2a3b4c22","timestamp":"2026-03-10T00:04:05.000Z","requestId":"req_011COpusC4","message":{"id":"msg_01OpusC4dd","model":"claude-opus-4-1-20250805","role":"assistant","content":[{"type":"text","text":"Done."}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":57,"cache_read_input_tokens":18990,"cache_creation_input_tokens":0}}}"#,
            "\n"
        ),
    );
    let report = run(&old, Source::ClaudeCode, tree.path());
    assert!(!report.failed(), "{:?}", report.findings);
    let after = events(&old, B);
    assert_eq!(after[..before.len()], before[..]);
    let new = &after[before.len()..];
    assert_eq!(
        details(new),
        [TokenDetail {
            input: Some(3),
            output: Some(57),
            cache_read: Some(18990),
            cache_write: Some(0),
            ..TokenDetail::default()
        }]
    );
    assert_detail_before_pair(new);
    assert_eq!(usage(new), [(3 + 18990, 57)]);
}

#[test]
fn a_transcript_changed_before_the_imported_point_is_reported_not_reimported() {
    let tree = tempfile::tempdir().unwrap();
    copy_tree(&fixtures("claude-code"), tree.path());
    let transcript = tree
        .path()
        .join("projects/-home-ada-src-vault/c47e0d19-8b2a-4f55-b3c4-6e1d2a3b4c22.jsonl");
    let store_dir = tempfile::tempdir().unwrap();
    let store = FileBackend::new(store_dir.path()).unwrap();
    run(&store, Source::ClaudeCode, tree.path());
    let before = store.replay(B).unwrap().len();
    let text = std::fs::read_to_string(&transcript).unwrap();
    std::fs::write(
        &transcript,
        text.replacen("Rename load_config", "Rename LOAD_config", 1),
    )
    .unwrap();
    let report = run(&store, Source::ClaudeCode, tree.path());
    assert!(report.failed());
    let finding = report
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::Changed)
        .unwrap();
    assert!(finding
        .file
        .ends_with("c47e0d19-8b2a-4f55-b3c4-6e1d2a3b4c22.jsonl"));
    assert_eq!(store.replay(B).unwrap().len(), before);
}

#[test]
fn a_line_over_the_cap_and_a_last_line_still_being_written_are_reported() {
    let tree = tempfile::tempdir().unwrap();
    let project = tree.path().join("p");
    std::fs::create_dir(&project).unwrap();
    let file = project.join("s1.jsonl");
    let user = |text: &str| {
        format!(
            r#"{{"type":"user","timestamp":"2026-03-09T10:00:00.000Z","message":{{"role":"user","content":"{text}"}}}}"#
        )
    };
    std::fs::write(
        &file,
        format!(
            "{}\n{}\n{}",
            user("short"),
            user(&"x".repeat(400)),
            &user("torn")[..40]
        ),
    )
    .unwrap();
    let store_dir = tempfile::tempdir().unwrap();
    let store = FileBackend::new(store_dir.path()).unwrap();
    let report = import(&store, Source::ClaudeCode, tree.path(), 200).unwrap();
    let kinds: Vec<(FindingKind, Option<u64>)> =
        report.findings.iter().map(|f| (f.kind, f.line)).collect();
    assert_eq!(
        kinds,
        [
            (FindingKind::TooLong, Some(2)),
            (FindingKind::Incomplete, Some(3))
        ]
    );
    // The line being written is finished later: the next import reads it, from its start.
    append(&file, &user("torn")[40..]);
    append(&file, "\n");
    let report = import(&store, Source::ClaudeCode, tree.path(), 200).unwrap();
    assert!(!report.failed(), "{:?}", report.findings);
    let texts: Vec<SessionEvent> = events(&store, "claude-code-s1")
        .into_iter()
        .filter(|e| matches!(e, SessionEvent::Message(_)))
        .collect();
    assert_eq!(
        texts,
        [
            SessionEvent::Message(cuca_events::Message::new(Role::User, "short")),
            SessionEvent::Message(cuca_events::Message::new(Role::User, "torn")),
        ]
    );
}

#[test]
fn a_session_not_written_by_an_import_is_not_written_into() {
    let store_dir = tempfile::tempdir().unwrap();
    let store = FileBackend::new(store_dir.path()).unwrap();
    store
        .append(SessionRecord {
            session_id: B.into(),
            sequence: 0,
            timestamp_ms: 1,
            event: SessionEvent::Output {
                text: "mine".into(),
            },
        })
        .unwrap();
    let report = run(&store, Source::ClaudeCode, &fixtures("claude-code"));
    assert!(report
        .findings
        .iter()
        .any(|f| f.kind == FindingKind::Foreign
            && f.file
                .ends_with("c47e0d19-8b2a-4f55-b3c4-6e1d2a3b4c22.jsonl")));
    assert_eq!(
        events(&store, B),
        [SessionEvent::Output {
            text: "mine".into()
        }]
    );
}

#[test]
fn codex_rollouts_become_sessions_with_tools_reasoning_usage_and_model() {
    let store_dir = tempfile::tempdir().unwrap();
    let store = FileBackend::new(store_dir.path()).unwrap();
    let report = run(&store, Source::Codex, &fixtures("codex"));
    assert!(!report.failed(), "{:?}", report.findings);
    let x = events(&store, X);
    assert!(x.contains(&SessionEvent::Message(cuca_events::Message::new(
        Role::User,
        "Which test is failing?"
    ))));
    assert!(x.contains(&SessionEvent::Reasoning {
        text: "**Running the tests**\n\nI'll run cargo test to see which one fails.".into()
    }));
    assert!(x.contains(&SessionEvent::ToolCall {
        id: "call_Xq1b2C3d".into(),
        name: "shell".into(),
        arguments: r#"{"command":["bash","-lc","cargo test -q"],"workdir":"/home/ada/src/vault"}"#
            .into(),
    }));
    let result = x
        .iter()
        .find_map(|e| match e {
            SessionEvent::ToolResult {
                exit_code,
                tool_call_id,
                ..
            } => Some((tool_call_id.clone(), *exit_code)),
            _ => None,
        })
        .unwrap();
    assert_eq!(result, ("call_Xq1b2C3d".to_string(), Some(101)));
    assert!(x.contains(&SessionEvent::ModelSwap {
        from: "gpt-5-codex".into(),
        to: "gpt-5".into(),
        reason: "turn_context".into(),
    }));
    assert!(x.contains(&SessionEvent::CallFinish {
        finish_reason: None,
        model: "gpt-5".into()
    }));
    // Three calls; the repeated running total is the same count written twice. The prompt
    // is Codex's input_tokens (cached included), the completion its output_tokens.
    assert_eq!(usage(&x), [(9120, 412), (9650, 98), (10010, 140)]);
    // The kinds apart: Codex's input_tokens is the whole prompt (the detail's `prompt`), the
    // cached part and the reasoning part as written.
    let responses = |prompt, cache_read, output, reasoning| TokenDetail {
        prompt: Some(prompt),
        cache_read: Some(cache_read),
        output: Some(output),
        reasoning: Some(reasoning),
        ..TokenDetail::default()
    };
    assert_eq!(
        details(&x),
        [
            responses(9120, 0, 412, 256),
            responses(9650, 9088, 98, 64),
            responses(10010, 9728, 140, 90),
        ]
    );
    assert_detail_before_pair(&x);
    assert_eq!(
        report.skipped.get("event_msg:token_count (repeated total)"),
        Some(&1)
    );
    // A token_count with only the running total: the difference is the call's.
    let y = events(&store, Y);
    assert_eq!(usage(&y), [(3100, 40)]);
    assert_eq!(details(&y), [responses(3100, 0, 40, 0)]);
    assert_eq!(
        y[0],
        SessionEvent::SystemPrompt {
            text: "Answer in one sentence.".into()
        }
    );
    let meta = wires(&y, "cuca-import");
    assert_eq!(meta[0]["kind"], "meta");
    assert_eq!(meta[0]["cli_version"], "0.46.0");
}
