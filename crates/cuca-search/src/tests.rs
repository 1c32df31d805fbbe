//! The search over real `.cslog` files: every searched field, streamed text, turns, options, limits and damage.

use std::ops::ControlFlow;

use cuca_events::{Message, MessageContentBlock, Role, SessionBackend, SessionEvent};
use cuca_store_file::FileBackend;

use crate::{snippet, Hit, Search, SearchError};

fn write(backend: &FileBackend, id: &str, events: Vec<SessionEvent>) {
    for (sequence, event) in events.into_iter().enumerate() {
        backend
            .append(cuca_testkit::record(id, sequence as u64, event))
            .expect("append");
    }
}

fn pair() -> [SessionEvent; 2] {
    [
        SessionEvent::Latency { duration_ms: 5 },
        SessionEvent::TokenUsage {
            prompt_tokens: 3,
            completion_tokens: 1,
        },
    ]
}

fn hits(search: &Search, dir: &std::path::Path) -> Vec<Hit> {
    let mut hits = Vec::new();
    search
        .run(dir, |hit| {
            hits.push(hit);
            ControlFlow::Continue(())
        })
        .expect("search runs");
    hits
}

/// Every searched kind and field: message text, outputs, tool names and arguments, tool
/// results, models and errors.
fn every_kind(backend: &FileBackend) {
    let mut events = vec![
        SessionEvent::SystemPrompt {
            text: "needle in the system prompt".into(),
        },
        SessionEvent::Message(Message {
            role: Role::User,
            content: vec![MessageContentBlock::Text {
                text: "a user needle".into(),
            }],
        }),
        SessionEvent::CallRequest {
            model: "needle-model-7b".into(),
            parameters: "{\"needle\":1}".into(),
            tools: "[{\"name\":\"needle\"}]".into(),
            messages: 2,
        },
        SessionEvent::Reasoning {
            text: "thinking of a nee".into(),
        },
        SessionEvent::Reasoning { text: "dle".into() },
        SessionEvent::ToolCall {
            id: "call_1".into(),
            name: "needle_tool".into(),
            arguments: "{\"path\":\"/needle\"}".into(),
        },
        SessionEvent::CallFinish {
            finish_reason: Some("needle_stop".into()),
            model: "the-needle-model".into(),
        },
    ];
    events.extend(pair());
    events.extend([
        SessionEvent::ToolResult {
            tool_call_id: "call_1".into(),
            content: "content needle".into(),
            is_error: true,
            stdout: Some("stdout needle".into()),
            stderr: Some("stderr needle".into()),
            exit_code: Some(2),
        },
        SessionEvent::Output {
            text: "an answer with a ne".into(),
        },
        SessionEvent::Output {
            text: "edle".into(),
        },
        SessionEvent::CallIncomplete {
            reason: "upstream 400: needle over the context".into(),
        },
        SessionEvent::ModelSwap {
            from: "needle-a".into(),
            to: "needle-b".into(),
            reason: "needle".into(),
        },
    ]);
    write(backend, "all", events);
}

#[test]
fn a_search_finds_message_text_outputs_tools_results_models_and_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let backend = FileBackend::new(dir.path()).expect("backend");
    every_kind(&backend);
    let found: Vec<_> = hits(&Search::new("needle"), dir.path())
        .into_iter()
        .map(|hit| (hit.sequence, hit.turn, hit.kind, hit.field, hit.role))
        .collect();
    assert_eq!(
        found,
        [
            (0, 1, "SystemPrompt", "text", None),
            (1, 1, "Message", "text", Some("user")),
            (2, 1, "CallRequest", "model", None),
            (3, 1, "Reasoning", "text", None),
            (5, 1, "ToolCall", "name", None),
            (5, 1, "ToolCall", "arguments", None),
            (6, 1, "CallFinish", "finish_reason", None),
            (6, 1, "CallFinish", "model", None),
            (9, 2, "ToolResult", "content", None),
            (9, 2, "ToolResult", "stdout", None),
            (9, 2, "ToolResult", "stderr", None),
            (10, 2, "Output", "text", None),
            (12, 2, "CallIncomplete", "reason", None),
        ]
    );
}

#[test]
fn a_word_streamed_across_output_records_is_found_at_the_record_where_it_starts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let backend = FileBackend::new(dir.path()).expect("backend");
    let mut events = vec![SessionEvent::Message(Message::user("hi"))];
    events.extend(pair());
    events.extend(
        ["The vault ", "is in Lis", "bon", " now."]
            .map(|text| SessionEvent::Output { text: text.into() }),
    );
    events.extend(pair());
    write(&backend, "demo", events);
    let found = hits(&Search::new("Lisbon"), dir.path());
    assert_eq!(found.len(), 1);
    let hit = &found[0];
    assert_eq!((hit.point_id().as_str(), hit.turn), ("demo:4", 2));
    assert_eq!(hit.snippet, "The vault is in Lisbon now.");
    assert_eq!(&hit.snippet[hit.matched.clone()], "Lisbon");
}

#[test]
fn turns_are_numbered_from_one_and_a_pair_closes_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let backend = FileBackend::new(dir.path()).expect("backend");
    let mut events = Vec::new();
    for turn in 1..=3 {
        events.push(SessionEvent::Output {
            text: format!("answer {turn}"),
        });
        events.extend(pair());
    }
    // A lone Latency is a note, not the end of a turn.
    events.push(SessionEvent::Latency { duration_ms: 1 });
    events.push(SessionEvent::Output {
        text: "answer 4".into(),
    });
    write(&backend, "t", events);
    let turns: Vec<_> = hits(&Search::new("answer"), dir.path())
        .into_iter()
        .map(|hit| (hit.sequence, hit.turn))
        .collect();
    assert_eq!(turns, [(0, 1), (3, 2), (6, 3), (10, 4)]);
}

#[test]
fn fixed_strings_ignore_case_and_kinds_narrow_the_search() {
    let dir = tempfile::tempdir().expect("tempdir");
    let backend = FileBackend::new(dir.path()).expect("backend");
    write(
        &backend,
        "s",
        vec![
            SessionEvent::Message(Message::user("cost: $5.00 (approx)")),
            SessionEvent::Output {
                text: "ÉCOLE and école".into(),
            },
        ],
    );
    let search = Search::new("$5.00 (").fixed_strings(true);
    assert_eq!(hits(&search, dir.path()).len(), 1);
    assert!(matches!(
        Search::new("$5.00 (").run(dir.path(), |_| ControlFlow::Continue(())),
        Err(SearchError::Pattern { .. })
    ));
    let folded = hits(&Search::new("école").ignore_case(true), dir.path());
    assert_eq!(&folded[0].snippet[folded[0].matched.clone()], "ÉCOLE");
    let only_messages = Search::new("o").kinds(["message"]).expect("a kind");
    let kinds: Vec<_> = hits(&only_messages, dir.path())
        .into_iter()
        .map(|hit| hit.kind)
        .collect();
    assert_eq!(kinds, ["Message"]);
    let error = Search::new("o")
        .kinds(["latency"])
        .expect_err("not searched");
    assert_eq!(
        error.to_string(),
        "kind \"latency\" is not searched; the kinds are SystemPrompt, Message, Reasoning, Output, ToolCall, ToolResult, CallRequest, CallFinish, CallIncomplete, ShellCommand, WorkspaceSnapshot"
    );
    assert!(Search::new("o")
        .kinds(["tool-result", "CALL_FINISH"])
        .is_ok());
}

#[test]
fn the_limit_stops_the_search_across_sessions_and_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let backend = FileBackend::new(dir.path()).expect("backend");
    for id in ["a", "b", "c"] {
        write(
            &backend,
            id,
            (0..4)
                .map(|_| SessionEvent::Message(Message::user("match me")))
                .collect(),
        );
    }
    let mut seen = Vec::new();
    let outcome = Search::new("match")
        .limit(6)
        .run(dir.path(), |hit| {
            seen.push(hit.point_id());
            ControlFlow::Continue(())
        })
        .expect("runs");
    assert_eq!(seen, ["a:0", "a:1", "a:2", "a:3", "b:0", "b:1"]);
    assert!(outcome.limited && !outcome.stopped);
    assert_eq!((outcome.hits, outcome.sessions), (6, 2));
    let outcome = Search::new("match")
        .run(dir.path(), |_| ControlFlow::Break(()))
        .expect("runs");
    assert!(outcome.stopped && !outcome.limited);
    assert_eq!(outcome.hits, 1);
    let outcome = Search::new("nothing like it")
        .run(dir.path(), |_| ControlFlow::Continue(()))
        .expect("runs");
    assert_eq!(
        (outcome.hits, outcome.sessions, outcome.records),
        (0, 3, 12)
    );
}

#[test]
fn a_missing_directory_is_an_error_and_a_damaged_session_is_listed_not_fatal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nope");
    let error = Search::new("x")
        .run(&missing, |_| ControlFlow::Continue(()))
        .expect_err("missing");
    assert!(matches!(error, SearchError::Dir { .. }), "{error}");
    assert!(!missing.exists(), "a search creates no directory");
    let backend = FileBackend::new(dir.path()).expect("backend");
    write(
        &backend,
        "good",
        vec![SessionEvent::Message(Message::user("x marks"))],
    );
    std::fs::write(dir.path().join("bad.cslog"), b"not a cslog at all").expect("write");
    let mut found = Vec::new();
    let outcome = Search::new("x")
        .run(dir.path(), |hit| {
            found.push(hit.point_id());
            ControlFlow::Continue(())
        })
        .expect("runs");
    assert_eq!(found, ["good:0"]);
    assert_eq!(outcome.unreadable.len(), 1);
    assert_eq!(outcome.unreadable[0].session_id, "bad");
}

#[test]
fn a_snippet_stops_at_line_ends_and_marks_what_it_cut() {
    let text = format!(
        "{}\nfirst line before the needle and after it\n{}",
        "x".repeat(90),
        "y".repeat(90)
    );
    let start = text.find("needle").expect("in it");
    let (snippet, matched) = snippet::clip(&text, start..start + 6);
    assert_eq!(snippet, "…first line before the needle and after it…");
    assert_eq!(&snippet[matched], "needle");
    let long = "é".repeat(200);
    let (snippet, matched) = snippet::clip(&long, 100..300);
    assert!(snippet.starts_with('…') && snippet.ends_with('…'));
    assert_eq!(matched.len(), crate::MAX_MATCH_BYTES);
    assert!(snippet[matched].chars().all(|c| c == 'é'));
}

#[test]
fn run_session_searches_one_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let backend = FileBackend::new(dir.path()).expect("backend");
    every_kind(&backend);
    write(
        &backend,
        "other",
        vec![SessionEvent::Message(Message::user("needle"))],
    );
    let mut sessions = std::collections::BTreeSet::new();
    let outcome = Search::new("needle")
        .run_session(&backend, "other", |hit| {
            sessions.insert(hit.session_id);
            ControlFlow::Continue(())
        })
        .expect("runs");
    assert_eq!(sessions.into_iter().collect::<Vec<_>>(), ["other"]);
    assert_eq!(outcome.hits, 1);
}

#[test]
fn the_kind_indices_the_reader_uses_are_the_formats() {
    let kinds = SessionEvent::KINDS;
    assert_eq!(
        [
            kinds[crate::REASONING],
            kinds[crate::OUTPUT],
            kinds[crate::LATENCY],
            kinds[crate::TOKEN_USAGE]
        ],
        ["Reasoning", "Output", "Latency", "TokenUsage"]
    );
}

/// Every hit of `search` over `backend` read through the trait (`run_backend`).
fn backend_hits(search: &Search, backend: &dyn SessionBackend) -> (Vec<Hit>, crate::Outcome) {
    let mut hits = Vec::new();
    let outcome = search
        .run_backend(backend, |hit| {
            hits.push(hit);
            ControlFlow::Continue(())
        })
        .expect("search runs");
    (hits, outcome)
}

/// `grep` takes a STORE: a store that is not a directory (PostgreSQL) is read
/// through the trait, and finds what the file scan finds, hit for hit, in every searched
/// field of every kind, a message's every block included.
#[test]
fn a_store_read_through_the_trait_finds_what_the_file_scan_finds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let backend = FileBackend::new(dir.path()).expect("backend");
    every_kind(&backend);
    write(
        &backend,
        "blocks",
        vec![SessionEvent::Message(Message {
            role: Role::Assistant,
            content: vec![
                MessageContentBlock::Thinking {
                    thinking: "a needle thought".into(),
                },
                MessageContentBlock::ToolCall {
                    id: "needle_id".into(),
                    name: "find_needle".into(),
                    arguments: "{\"needle\":true}".into(),
                },
                MessageContentBlock::ToolResult {
                    tool_call_id: "needle_id".into(),
                    content: "the needle is here".into(),
                    is_error: false,
                },
                MessageContentBlock::ImageBase64 {
                    media_type: "image/needle".into(),
                    data: "needle".into(),
                },
                MessageContentBlock::Text {
                    text: "found the needle".into(),
                },
            ],
        })],
    );
    for search in [
        Search::new("needle"),
        Search::new("NEE").ignore_case(true),
        Search::new("needle")
            .kinds(["output", "tool-result"])
            .expect("kinds"),
        Search::new("needle").limit(5),
    ] {
        let from_files = hits(&search, dir.path());
        let (from_trait, outcome) = backend_hits(&search, &backend);
        assert!(!from_files.is_empty());
        assert_eq!(from_trait, from_files, "{search:?}");
        assert_eq!(outcome.hits, from_files.len());
    }
    let (found, outcome) = backend_hits(&Search::new("needle"), &backend);
    let blocks: Vec<_> = found
        .iter()
        .filter(|hit| hit.session_id == "blocks")
        .map(|hit| (hit.field, hit.role))
        .collect();
    assert_eq!(
        blocks,
        [
            ("thinking", Some("assistant")),
            ("name", Some("assistant")),
            ("arguments", Some("assistant")),
            ("content", Some("assistant")),
            ("text", Some("assistant")),
        ]
    );
    assert_eq!((outcome.sessions, outcome.records), (2, 15));
    let (_, limited) = backend_hits(&Search::new("needle").limit(3), &backend);
    assert!(limited.limited && limited.hits == 3);
}

#[test]
fn a_session_a_store_refuses_is_listed_and_the_others_searched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let backend = FileBackend::new(dir.path()).expect("backend");
    write(
        &backend,
        "good",
        vec![SessionEvent::Message(Message::user("x marks"))],
    );
    std::fs::write(dir.path().join("bad.cslog"), b"not a cslog at all").expect("write");
    let (found, outcome) = backend_hits(&Search::new("x"), &backend);
    assert_eq!(
        found.iter().map(Hit::point_id).collect::<Vec<_>>(),
        ["good:0"]
    );
    assert_eq!(outcome.unreadable.len(), 1);
    assert_eq!(outcome.unreadable[0].session_id, "bad");
    assert!(!outcome.unreadable[0].reason.is_empty());
}

/// A parent with a hit in the prefix its fork copies and one after it, and a fork with a hit
/// of its own after the fork point.
fn forked(backend: &FileBackend) -> String {
    write(
        backend,
        "demo",
        vec![
            SessionEvent::Message(Message::user("where is the needle?")),
            SessionEvent::Output {
                text: "the needle is here".into(),
            },
            SessionEvent::Latency { duration_ms: 5 },
            SessionEvent::TokenUsage {
                prompt_tokens: 3,
                completion_tokens: 1,
            },
        ],
    );
    let fork = backend.fork("demo", "demo:3").expect("fork");
    let fork_of_fork = backend.fork(&fork, &format!("{fork}:3")).expect("fork");
    // Sequence 4 of the fork is the audit record of the fork taken from it.
    backend
        .append(cuca_testkit::record(
            &fork,
            5,
            SessionEvent::Message(Message::user("a needle of the fork's own")),
        ))
        .expect("append");
    fork_of_fork
}

#[test]
fn a_hit_in_a_forks_copied_prefix_is_shown_once_with_the_forks_that_hold_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let backend = FileBackend::new(dir.path()).expect("backend");
    let fork_of_fork = forked(&backend);
    let found: Vec<(String, usize)> = hits(&Search::new("needle"), dir.path())
        .into_iter()
        .map(|hit| (hit.point_id(), hit.also_in_forks))
        .collect();
    let fork = fork_of_fork.split(":fork:demo:fork:").next().expect("id");
    assert_eq!(
        found,
        [
            ("demo:0".to_owned(), 2),
            ("demo:1".to_owned(), 2),
            (format!("{fork}:5"), 0),
        ]
    );
    let (outcome_folded, outcome_hits) = {
        let outcome = Search::new("needle")
            .run(dir.path(), |_| ControlFlow::Continue(()))
            .expect("runs");
        (outcome.folded, outcome.hits)
    };
    assert_eq!((outcome_folded, outcome_hits), (4, 3));
    // Through the trait, the same.
    let (through_trait, _) = backend_hits(&Search::new("needle"), &backend);
    assert_eq!(through_trait.len(), 3);
    // Unfolded, every copy is a hit of its own.
    assert_eq!(
        hits(&Search::new("needle").fold_forks(false), dir.path()).len(),
        7
    );
}

#[test]
fn an_offset_pages_past_the_hits_already_shown() {
    let dir = tempfile::tempdir().expect("tempdir");
    let backend = FileBackend::new(dir.path()).expect("backend");
    for id in ["a", "b", "c"] {
        write(
            &backend,
            id,
            (0..4)
                .map(|_| SessionEvent::Message(Message::user("match me")))
                .collect(),
        );
    }
    let mut seen = Vec::new();
    let outcome = Search::new("match")
        .offset(5)
        .limit(4)
        .run(dir.path(), |hit| {
            seen.push(hit.point_id());
            ControlFlow::Continue(())
        })
        .expect("runs");
    assert_eq!(seen, ["b:1", "b:2", "b:3", "c:0"]);
    assert_eq!((outcome.skipped, outcome.hits), (5, 4));
    assert!(outcome.limited);
    let last_page = hits(&Search::new("match").offset(10).limit(4), dir.path());
    assert_eq!(last_page.len(), 2);
}

#[test]
fn tool_calls_and_results_inside_messages_are_found_by_their_kind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let backend = FileBackend::new(dir.path()).expect("backend");
    write(
        &backend,
        "proxied",
        vec![
            SessionEvent::Message(Message {
                role: Role::Assistant,
                content: vec![MessageContentBlock::ToolCall {
                    id: "call_1".into(),
                    name: "read_file".into(),
                    arguments: "{\"path\":\"vault.txt\"}".into(),
                }],
            }),
            SessionEvent::Message(Message {
                role: Role::Tool,
                content: vec![MessageContentBlock::ToolResult {
                    tool_call_id: "call_1".into(),
                    content: "the vault is in Lisbon".into(),
                    is_error: false,
                }],
            }),
            SessionEvent::Message(Message::user("read vault.txt for me")),
        ],
    );
    let calls = hits(
        &Search::new("vault").kinds(["ToolCall"]).expect("kind"),
        dir.path(),
    );
    let seen: Vec<_> = calls
        .iter()
        .map(|hit| (hit.point_id(), hit.kind, hit.role, hit.field))
        .collect();
    assert_eq!(
        seen,
        [(
            "proxied:0".to_owned(),
            "ToolCall",
            Some("assistant"),
            "arguments"
        )]
    );
    let results = hits(
        &Search::new("vault").kinds(["tool-result"]).expect("kind"),
        dir.path(),
    );
    let seen: Vec<_> = results
        .iter()
        .map(|hit| (hit.point_id(), hit.kind, hit.field))
        .collect();
    assert_eq!(seen, [("proxied:1".to_owned(), "ToolResult", "content")]);
    let (through_trait, _) = backend_hits(
        &Search::new("vault").kinds(["ToolCall"]).expect("kind"),
        &backend,
    );
    assert_eq!(through_trait.len(), 1);
    // Message itself still finds every block, as a Message hit.
    let all = hits(&Search::new("vault"), dir.path());
    assert!(all.iter().all(|hit| hit.kind == "Message"), "{all:?}");
    assert_eq!(all.len(), 3);
}

#[test]
fn a_matcher_finds_the_pattern_in_a_text_outside_sessions() {
    let matcher = Search::new("connection refused")
        .ignore_case(true)
        .matcher()
        .expect("pattern");
    let (snippet, matched) = matcher
        .find("the upstream http://127.0.0.1:9 did not answer: Connection refused (os error 111)")
        .expect("found");
    assert_eq!(&snippet[matched], "Connection refused");
    assert!(matcher.find("all good").is_none());
    assert!(Search::new("(").matcher().is_err());
}

/// A shell command's line and its streams' tails, and the paths a snapshot says changed, are
/// found, read from the file and through the trait alike; its cwd and origin, the
/// snapshot's address and its skipped notes are not searched.
#[test]
fn shell_commands_and_changed_paths_are_found() {
    let dir = tempfile::tempdir().expect("tempdir");
    let backend = FileBackend::new(dir.path()).expect("backend");
    let stream = |tail: &str| cuca_events::CapturedStream {
        sha256: format!("sha256:{}", "0".repeat(64)),
        bytes: tail.len() as u64,
        tail: tail.into(),
        cut: 0,
    };
    let mut events = vec![SessionEvent::Message(Message::user("go"))];
    events.extend(pair());
    events.extend([
        SessionEvent::ShellCommand {
            command: "cargo test needle_cmd".into(),
            cwd: "needle_dir".into(),
            origin: "bash -c needle".into(),
            exit_status: Some(101),
            duration_ms: 1_300,
            stdout: stream("needle_out\n"),
            stderr: stream("error: needle_err\n"),
        },
        SessionEvent::WorkspaceSnapshot {
            snapshot: "sha256:needle".into(),
            changes: vec![cuca_events::FileChange {
                path: "src/needle_file.rs".into(),
                kind: cuca_events::FileChangeKind::Modified,
                added_lines: 1,
                removed_lines: 0,
                binary: false,
            }],
            skipped: vec!["needle.bin: too big".into()],
        },
        SessionEvent::Message(Message::user("again")),
    ]);
    events.extend(pair());
    write(&backend, "ws", events);
    let search = Search::new("needle_[a-z]+");
    let found = |hits: Vec<Hit>| -> Vec<(u64, u64, &'static str, &'static str, String)> {
        hits.into_iter()
            .map(|h| (h.sequence, h.turn, h.kind, h.field, h.snippet))
            .collect()
    };
    let expected = vec![
        (
            3,
            2,
            "ShellCommand",
            "command",
            "cargo test needle_cmd".to_string(),
        ),
        // A snippet that stops before the text's end (its newline) says so.
        (3, 2, "ShellCommand", "stdout", "needle_out…".to_string()),
        (
            3,
            2,
            "ShellCommand",
            "stderr",
            "error: needle_err…".to_string(),
        ),
        (
            4,
            2,
            "WorkspaceSnapshot",
            "path",
            "src/needle_file.rs".to_string(),
        ),
    ];
    assert_eq!(found(hits(&search, dir.path())), expected);
    let mut through_trait = Vec::new();
    search
        .run_backend(&backend, |hit| {
            through_trait.push(hit);
            ControlFlow::Continue(())
        })
        .expect("search runs");
    assert_eq!(found(through_trait), expected);
    // The kind filter takes the new kinds by name.
    let only = Search::new("needle_[a-z]+")
        .kinds(["shell-command"])
        .expect("a searched kind");
    assert_eq!(hits(&only, dir.path()).len(), 3);
}
