//! What is already stored, and what leaves: `cuca scrub` rewrites a recording made without
//! redaction so that no key of any default kind (nor a value of the user's own rule) is left
//! in its file, a session at a time, keeping sequences and forks and `cuca verify` clean,
//! with a `Scrubbed` record saying what each rule replaced; `--dry-run` names the points and
//! never a value; `cuca export` refuses a session a default rule still matches, naming the
//! points, unless `--allow-secrets`. On a directory, and on PostgreSQL when `CUCA_PG_URL`
//! names a server (skipped otherwise; a failure under `CI`).
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod common;

#[path = "../../cuca-redact/tests/common/mod.rs"]
mod fakes;

use std::path::Path;

use common::*;
use cuca::{Message, MessageContentBlock, SessionBackend, SessionEvent, SessionRecord};

const EMPLOYEE_ID: &str = "EMP-004211";

const RULES_TOML: &str = "[[rules]]\nname = \"employee\"\nregex = \"EMP-[0-9]{6}\"\n";

fn run(args: &[&str]) -> (i32, String, String) {
    let output = cuca().args(args).output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (
        output.status.code().unwrap(),
        String::from_utf8(output.stdout).unwrap(),
        stderr,
    )
}

/// A session recorded without rules: every fake in a prompt, in a tool call's arguments and
/// in a tool's output, the user rule's value in a prompt; then the answer.
fn recording(session: &str) -> Vec<SessionRecord> {
    let all: Vec<&str> = fakes::FAKES.iter().map(|fake| fake.text).collect();
    let events = vec![
        SessionEvent::SystemPrompt {
            text: format!("deploy with {}", fakes::FAKES[0].text),
        },
        SessionEvent::Message(Message::user(format!(
            "who owns {} ? ask {EMPLOYEE_ID}",
            all.join(" and ")
        ))),
        SessionEvent::Message(Message {
            role: cuca::Role::Assistant,
            content: vec![MessageContentBlock::ToolCall {
                id: "call_1".into(),
                name: "env".into(),
                arguments: serde_json::json!({"token": fakes::FAKES[3].text}).to_string(),
            }],
        }),
        SessionEvent::ToolResult {
            tool_call_id: "call_1".into(),
            content: all.join("\n"),
            is_error: false,
            stdout: Some(all.join("\n")),
            stderr: None,
            exit_code: Some(0),
        },
        SessionEvent::Output {
            text: "nobody".into(),
        },
        SessionEvent::Latency { duration_ms: 12 },
        SessionEvent::TokenUsage {
            prompt_tokens: 40,
            completion_tokens: 1,
        },
    ];
    events
        .into_iter()
        .enumerate()
        .map(|(sequence, event)| SessionRecord {
            session_id: session.into(),
            sequence: sequence as u64,
            timestamp_ms: 1_700_000_000_000 + sequence as u64,
            event,
        })
        .collect()
}

fn store(backend: &dyn SessionBackend, records: Vec<SessionRecord>) {
    for record in records {
        backend.append(record).unwrap();
    }
}

/// The first window of a fake's secret, or the user rule's value, found in `text`.
fn secret_in(text: &str) -> Option<String> {
    for fake in fakes::FAKES {
        for window in fakes::windows(fake.secret) {
            if text.contains(window) {
                return Some(format!("{window:?} of the {} fake", fake.rule));
            }
        }
    }
    text.contains(EMPLOYEE_ID).then(|| EMPLOYEE_ID.to_owned())
}

fn files_text(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            out.push((
                path.display().to_string(),
                String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned(),
            ));
        }
    }
    out
}

/// The whole story on one store, named on the command line as `store`.
fn scrub_story(store_arg: &[&str], backend: &dyn SessionBackend, rules: &Path) {
    // The subcommand, the store, then the rest.
    let with = |args: &[&str]| {
        let mut all: Vec<&str> = vec![args[0]];
        all.extend_from_slice(store_arg);
        all.extend_from_slice(&args[1..]);
        run(&all)
    };
    // Export refuses, naming points and rules, printing no secret.
    let (code, out, err) = with(&["export", "s"]);
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("s:1 openai-key"), "{err}");
    assert!(err.contains("--allow-secrets"), "{err}");
    assert_eq!(secret_in(&err), None, "{err}");
    // Allowed, it exports what is there.
    let (code, out, err) = with(&["export", "s", "--allow-secrets"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(fakes::FAKES[0].text));

    // A dry run lists the points, and no value, and changes nothing.
    let before = backend.replay("s").unwrap();
    let rules_arg = rules.to_str().unwrap();
    let (code, out, err) = with(&["scrub", "s", "--dry-run", "--rules", rules_arg]);
    assert_eq!(code, 0, "{err}");
    for fake in fakes::FAKES {
        assert!(
            out.contains(&format!(" {} ", fake.rule)),
            "{} not listed:\n{out}",
            fake.rule
        );
    }
    assert!(
        out.contains("s:1 employee Message.content[0].text"),
        "{out}"
    );
    assert!(out.contains("s:3 github-token ToolResult.stdout"), "{out}");
    assert!(
        out.contains("s:fork:s:1:0:1 openai-key"),
        "the fork is scrubbed with it:\n{out}"
    );
    assert_eq!(secret_in(&out), None, "{out}");
    assert_eq!(backend.replay("s").unwrap(), before);

    // The scrub itself.
    let (code, out, err) = with(&["scrub", "s", "--rules", rules_arg]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("scrubbed 2 sessions"), "{out}");
    assert_eq!(secret_in(&out), None, "{out}");
    let after = backend.replay("s").unwrap();
    // Sequences kept, one record more: what the scrub replaced.
    assert_eq!(after.len(), before.len() + 1);
    for (a, b) in after.iter().zip(&before) {
        assert_eq!(
            (a.sequence, a.timestamp_ms, a.event.kind()),
            (b.sequence, b.timestamp_ms, b.event.kind())
        );
    }
    let SessionEvent::Scrubbed { replaced } = &after.last().unwrap().event else {
        panic!("{:?}", after.last())
    };
    assert!(
        replaced
            .iter()
            .any(|(rule, n)| rule == "employee" && *n == 1),
        "{replaced:?}"
    );
    assert!(
        replaced.iter().any(|(rule, _)| rule == "private-key"),
        "{replaced:?}"
    );
    assert_eq!(secret_in(&format!("{after:?}")), None);
    let fork = backend.replay("s:fork:s:1:0").unwrap();
    assert_eq!(secret_in(&format!("{fork:?}")), None);
    assert!(matches!(
        fork.last().unwrap().event,
        SessionEvent::Scrubbed { .. }
    ));
    // The session untouched by name is left as it is.
    assert!(secret_in(&format!("{:?}", backend.replay("other").unwrap())).is_some());

    let (code, out, err) = with(&["verify"]);
    assert_eq!(code, 0, "{out}{err}");
    // Nothing left for a default rule: export lets it go, and a second scrub finds nothing.
    let (code, out, err) = with(&["export", "s"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(secret_in(&out), None);
    let (code, out, _) = with(&["scrub", "s", "--rules", rules_arg]);
    assert_eq!(code, 0);
    assert!(out.contains("nothing to scrub"), "{out}");
}

#[test]
fn scrub_removes_every_key_keeps_sequences_and_forks_and_export_refuses_until_then() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("sessions");
    let backend = cuca::FileBackend::new(&sessions).unwrap();
    store(&backend, recording("s"));
    store(&backend, recording("other"));
    let fork = backend.fork("s", "s:1").unwrap();
    assert_eq!(fork, "s:fork:s:1:0");
    drop(backend);
    let rules = dir.path().join("rules.toml");
    std::fs::write(&rules, RULES_TOML).unwrap();
    let backend = cuca::FileBackend::new(&sessions).unwrap();
    scrub_story(&[sessions.to_str().unwrap()], &backend, &rules);
    // The bytes on disk: no key's, in the scrubbed session files.
    for (path, text) in files_text(&sessions) {
        if path.contains("other") {
            continue;
        }
        assert_eq!(secret_in(&text), None, "{path}");
    }
}

#[test]
fn a_rules_file_that_does_not_compile_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.toml");
    std::fs::write(&rules, "disable = [\"no-such-rule\"]\n").unwrap();
    let (code, _, err) = run(&[
        "scrub",
        dir.path().to_str().unwrap(),
        "--rules",
        rules.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no-such-rule"), "{err}");
}

/// The same story on PostgreSQL: each session rewritten in one transaction.
#[test]
fn scrub_and_the_export_scan_work_on_postgres() {
    let Some(url) = std::env::var("CUCA_PG_URL").ok().filter(|u| !u.is_empty()) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but CUCA_PG_URL is not"
        );
        eprintln!(
            "skipped: CUCA_PG_URL is unset (run `bash .ci/postgres.sh start env` and `. ./env`)"
        );
        return;
    };
    let config = cuca::PostgresConfig::new(&url)
        .unwrap()
        .with_throwaway_schema();
    let backend = cuca::PostgresBackend::connect(config).unwrap();
    let schema = backend.schema().to_owned();
    store(&backend, recording("s"));
    store(&backend, recording("other"));
    assert_eq!(backend.fork("s", "s:1").unwrap(), "s:fork:s:1:0");
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.toml");
    std::fs::write(&rules, RULES_TOML).unwrap();
    scrub_story(
        &[url.as_str(), "--schema", schema.as_str()],
        &backend,
        &rules,
    );
}
