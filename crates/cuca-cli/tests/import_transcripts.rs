//! `cuca import claude-code` and `cuca import codex` on the committed fixtures
//! (`fixtures/claude-code`, `fixtures/codex`): what the command prints and exits with, the
//! session commands on the imported sessions, and the per-day token counts side by side
//! with ccusage's own report of the same transcripts.
//!
//! ccusage comes from `.ci/run` (`ccusage@20.0.24` from npm, pinned) as `CUCA_TEST_CCUSAGE`.
//! Without it (a developer's `cargo test`) the comparison prints why and passes having
//! checked nothing; under `CI` its absence fails the test.
// A failed step is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use cuca::{FileBackend, SessionBackend, SessionEvent};

const A: &str = "claude-code-1b0c5a2e-4d3f-4c6e-9a1b-2f7d8e9c0a11";

fn fixtures(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str]) -> Run {
    let output = cuca().args(args).output().unwrap();
    let run = Run {
        code: output.status.code().unwrap(),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    };
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    run
}

fn import(agent: &str, dir: &Path, store: &Path) -> Run {
    run(&[
        "import",
        agent,
        dir.to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
        "--json",
    ])
}

#[test]
fn an_unreadable_line_is_named_with_file_and_line_and_fails_the_run() {
    let store = tempfile::tempdir().unwrap();
    let first = import("claude-code", &fixtures("claude-code"), store.path());
    assert_eq!(first.code, 1, "{}", first.stderr);
    assert!(
        first
            .stderr
            .contains("1b0c5a2e-4d3f-4c6e-9a1b-2f7d8e9c0a11.jsonl:6: not JSON"),
        "{}",
        first.stderr
    );
    let summary: serde_json::Value = serde_json::from_str(first.stdout.trim()).unwrap();
    assert_eq!(summary["files"], 4);
    assert_eq!(summary["findings"][0]["line"], 6);
    assert_eq!(summary["sessions"].as_array().unwrap().len(), 5);
    // Everything else was imported; the next run has nothing new and nothing to report.
    let second = import("claude-code", &fixtures("claude-code"), store.path());
    assert_eq!(second.code, 0, "{}", second.stderr);
    let summary: serde_json::Value = serde_json::from_str(second.stdout.trim()).unwrap();
    assert_eq!(summary["records"], 0);
    assert_eq!(summary["findings"].as_array().unwrap().len(), 0);
}

#[test]
fn verify_replay_and_grep_read_imported_sessions() {
    let store = tempfile::tempdir().unwrap();
    let s = store.path().to_str().unwrap();
    import("claude-code", &fixtures("claude-code"), store.path());
    assert_eq!(import("codex", &fixtures("codex"), store.path()).code, 0);

    let verify = run(&["verify", s]);
    assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
    assert!(verify.stdout.contains("7 sessions"), "{}", verify.stdout);
    assert!(verify.stdout.contains("0 refused"), "{}", verify.stdout);

    let replay = run(&["replay", s, A, "--turn", "1"]);
    assert_eq!(replay.code, 0, "{}", replay.stderr);
    assert!(
        replay
            .stdout
            .contains("user: Where is the vault's config file read?"),
        "{}",
        replay.stdout
    );
    assert!(
        replay.stdout.contains("tool call: Grep (toolu_01GrepA)"),
        "{}",
        replay.stdout
    );
    assert!(
        replay
            .stdout
            .contains("13,843 prompt tokens, 212 completion tokens"),
        "{}",
        replay.stdout
    );
    // The import's own records sit inside the last call's turn: every turn is complete.
    let all = run(&["replay", s, A, "--json"]);
    for turn in all.stdout.lines() {
        let turn: serde_json::Value = serde_json::from_str(turn).unwrap();
        assert_eq!(turn["complete"], true, "{turn}");
    }

    let grep = run(&["grep", s, "load_config"]);
    assert_eq!(grep.code, 0, "{}", grep.stderr);
    assert!(
        grep.stdout.contains(&format!("{A}-agent-7f3a9c01:")),
        "{}",
        grep.stdout
    );
    let grep = run(&["grep", s, "reads_toml"]);
    assert!(
        grep.stdout
            .contains("codex-0199a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a44:"),
        "{}",
        grep.stdout
    );
}

#[test]
fn the_export_form_of_import_still_takes_file_store_session() {
    let store = tempfile::tempdir().unwrap();
    let s = store.path().to_str().unwrap();
    import("claude-code", &fixtures("claude-code"), store.path());
    let export = cuca().args(["export", s, A]).output().unwrap();
    assert!(export.status.success());
    let file = store.path().join("a.jsonl");
    std::fs::write(&file, &export.stdout).unwrap();
    let copy = run(&["import", file.to_str().unwrap(), s, "copy"]);
    assert_eq!(copy.code, 0, "{}", copy.stderr);
    let backend = FileBackend::new(store.path()).unwrap();
    assert_eq!(
        backend.replay("copy").unwrap().len(),
        backend.replay(A).unwrap().len()
    );
    // A missing argument of either form is a usage error.
    assert_eq!(run(&["import", file.to_str().unwrap(), s]).code, 2);
    assert_eq!(run(&["import", "claude-code", "--store"]).code, 2);
}

/// Token counts of one day, as ccusage's daily JSON names them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Day {
    input: u64,
    output: u64,
    cache_creation: u64,
    cache_read: u64,
    total: u64,
}

/// The UTC date of a time in milliseconds (Howard Hinnant's civil-from-days).
fn utc_date(ms: u64) -> String {
    let days = (ms / 86_400_000) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let doe = days - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// What the imported sessions used, per UTC day: each call's kinds as its `CallWire`
/// record keeps them, counted where the import counted it, on the day of its usage record.
/// The one place to switch to `cuca cost STORE --by day --json` once it exists.
fn imported_daily(store: &Path) -> BTreeMap<String, Day> {
    let backend = FileBackend::new(store).unwrap();
    let mut days: BTreeMap<String, Day> = BTreeMap::new();
    for session in backend.sessions().unwrap() {
        let mut pending: Option<serde_json::Value> = None;
        for record in backend.replay(&session).unwrap() {
            match &record.event {
                SessionEvent::CallWire { format, wire } if format == "messages" => {
                    let wire: serde_json::Value = serde_json::from_str(wire).unwrap();
                    pending = (wire["counted"] == true).then(|| wire["usage"].clone());
                }
                SessionEvent::TokenUsage {
                    prompt_tokens,
                    completion_tokens,
                } => {
                    let Some(usage) = pending.take() else {
                        continue;
                    };
                    let n = |key: &str| usage[key].as_u64().unwrap_or(0);
                    let day = days.entry(utc_date(record.timestamp_ms)).or_default();
                    let cache_creation = n("cache_creation_input_tokens");
                    day.input += n("input_tokens");
                    day.output += n("output_tokens");
                    day.cache_creation += cache_creation;
                    day.cache_read += n("cache_read_input_tokens");
                    day.total += n("input_tokens")
                        + n("output_tokens")
                        + cache_creation
                        + n("cache_read_input_tokens");
                    // The folded record agrees with the kinds it folds.
                    assert_eq!(
                        *prompt_tokens,
                        n("input_tokens") + cache_creation + n("cache_read_input_tokens")
                    );
                    assert_eq!(*completion_tokens, n("output_tokens"));
                }
                _ => {}
            }
        }
    }
    days
}

fn ccusage() -> Option<PathBuf> {
    match std::env::var_os("CUCA_TEST_CCUSAGE") {
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(
                path.exists(),
                "CUCA_TEST_CCUSAGE={} does not exist; .ci/run installs ccusage@20.0.24",
                path.display()
            );
            Some(path)
        }
        None if std::env::var_os("CI").is_some() => {
            panic!("CI is set but CUCA_TEST_CCUSAGE is not: the comparison needs ccusage@20.0.24, which .ci/run installs")
        }
        None => {
            eprintln!(
                "skipping: CUCA_TEST_CCUSAGE is not set (.ci/run sets it to ccusage@20.0.24's bin)"
            );
            None
        }
    }
}

/// Both sides group by UTC date: ccusage with `--timezone UTC`, the import's records by
/// their UTC time. Session B runs across UTC midnight, so a local-time grouping on either
/// side would move its calls.
#[test]
fn imported_claude_code_usage_equals_ccusage_daily_token_for_token() {
    let Some(ccusage) = ccusage() else { return };
    let home = tempfile::tempdir().unwrap();
    let output = Command::new(&ccusage)
        .args([
            "claude",
            "daily",
            "--json",
            "--offline",
            "--timezone",
            "UTC",
        ])
        .env("CLAUDE_CONFIG_DIR", fixtures("claude-code"))
        .env("HOME", home.path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let theirs: BTreeMap<String, Day> = report["daily"]
        .as_array()
        .unwrap()
        .iter()
        .map(|day| {
            let n = |key: &str| day[key].as_u64().unwrap();
            (
                day["date"].as_str().unwrap().to_string(),
                Day {
                    input: n("inputTokens"),
                    output: n("outputTokens"),
                    cache_creation: n("cacheCreationTokens"),
                    cache_read: n("cacheReadTokens"),
                    total: n("totalTokens"),
                },
            )
        })
        .collect();

    let store = tempfile::tempdir().unwrap();
    import("claude-code", &fixtures("claude-code"), store.path());
    let ours = imported_daily(store.path());
    assert_eq!(
        theirs.keys().collect::<Vec<_>>(),
        ["2026-03-09", "2026-03-10", "2026-03-11"],
        "the fixtures span three UTC days"
    );
    assert_eq!(ours, theirs);
}
