//! `cuca import claude-code` and `cuca import codex` on the committed fixtures
//! (`fixtures/claude-code`, `fixtures/codex`): what the command prints and exits with, the
//! session commands on the imported sessions, and `cuca cost`'s per-day token counts and
//! costs side by side with ccusage's own report of the same transcripts.
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
use cuca::{FileBackend, SessionBackend};

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

/// One day of a daily report, in ccusage's field names: the token counts, and the cost
/// apart (it is compared within a tolerance, the counts exactly).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Day {
    input: u64,
    output: u64,
    cache_creation: u64,
    cache_read: u64,
    total: u64,
}

/// The days of a `daily --json` report (ccusage's or `cuca cost`'s, the same shape): each
/// date's counts and `totalCost` (`None`: cuca's for a day with a call it could not price).
fn daily(report: &serde_json::Value) -> BTreeMap<String, (Day, Option<f64>)> {
    report["daily"]
        .as_array()
        .unwrap()
        .iter()
        .map(|day| {
            let n = |key: &str| day[key].as_u64().unwrap();
            (
                day["date"].as_str().unwrap().to_string(),
                (
                    Day {
                        input: n("inputTokens"),
                        output: n("outputTokens"),
                        cache_creation: n("cacheCreationTokens"),
                        cache_read: n("cacheReadTokens"),
                        total: n("totalTokens"),
                    },
                    day["totalCost"].as_f64(),
                ),
            )
        })
        .collect()
}

/// Each (date, model) of a daily report and its cost: ccusage's `modelBreakdowns[].cost`, or
/// cuca's (`None`: a model the table does not price).
fn model_costs(report: &serde_json::Value) -> BTreeMap<(String, String), Option<f64>> {
    let mut costs = BTreeMap::new();
    for day in report["daily"].as_array().unwrap() {
        for model in day["modelBreakdowns"].as_array().unwrap() {
            costs.insert(
                (
                    day["date"].as_str().unwrap().to_string(),
                    model["modelName"].as_str().unwrap().to_string(),
                ),
                model["cost"].as_f64(),
            );
        }
    }
    costs
}

/// What `cuca cost STORE --by day --json` reports for the imported sessions (UTC days),
/// priced by the bundled table or by `prices`.
fn cuca_daily(store: &Path, prices: Option<&Path>) -> serde_json::Value {
    let mut args = vec!["cost", store.to_str().unwrap(), "--by", "day", "--json"];
    if let Some(prices) = prices {
        args.extend(["--prices", prices.to_str().unwrap()]);
    }
    let cost = run(&args);
    assert_eq!(cost.code, 0, "{}", cost.stderr);
    serde_json::from_str(&cost.stdout).unwrap()
}

/// Whether two costs agree within half a percent of ccusage's.
fn within_half_a_percent(ours: f64, theirs: f64) -> bool {
    theirs > 0.0 && ((ours - theirs) / theirs).abs() <= 0.005
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

/// ccusage's daily report of the fixtures.
fn ccusage_daily(ccusage: &Path) -> serde_json::Value {
    let home = tempfile::tempdir().unwrap();
    let output = Command::new(ccusage)
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
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The model the bundled table has no entry for: LiteLLM's list (1.110.2) names Opus 4.1
/// only under Bedrock, Vercel and Databricks keys, and cuca does not price a call by another
/// provider's entry; ccusage prices it at Anthropic's prices (docs/cost.md).
const UNPRICED_IN_BUNDLED: &str = "claude-opus-4-1-20250805";

/// Both sides group by UTC date: ccusage with `--timezone UTC`, `cuca cost` by the UTC day
/// of each call's usage record. Session B runs across UTC midnight, so a local-time grouping
/// on either side would move its calls.
///
/// The counts and costs come from the `TokenDetail` records the import writes: without them
/// `cuca cost` reads each call's folded prompt as uncached input, and neither the cache
/// columns nor the costs would match.
#[test]
fn imported_claude_code_costs_equal_ccusage_daily_token_for_token_and_within_half_a_percent() {
    let Some(ccusage) = ccusage() else { return };
    let report = ccusage_daily(&ccusage);
    let theirs = daily(&report);
    let store = tempfile::tempdir().unwrap();
    import("claude-code", &fixtures("claude-code"), store.path());
    let bundled = cuca_daily(store.path(), None);
    // Every call has its kinds apart.
    assert_eq!(bundled["totals"]["foldedCalls"], 0, "{bundled}");
    let ours = daily(&bundled);
    assert_eq!(
        theirs.keys().collect::<Vec<_>>(),
        ["2026-03-09", "2026-03-10", "2026-03-11"],
        "the fixtures span three UTC days"
    );
    let counts = |days: &BTreeMap<String, (Day, Option<f64>)>| -> BTreeMap<String, Day> {
        days.iter()
            .map(|(date, (day, _))| (date.clone(), *day))
            .collect()
    };
    assert_eq!(counts(&ours), counts(&theirs));

    // Priced by the bundled table: every model it prices costs what ccusage says, day by
    // day; the one it has no entry for is unknown, never 0.
    let their_models = model_costs(&report);
    let our_models = model_costs(&bundled);
    assert_eq!(
        our_models.keys().collect::<Vec<_>>(),
        their_models.keys().collect::<Vec<_>>()
    );
    for (key, their_cost) in &their_models {
        let their_cost = their_cost.unwrap();
        match our_models[key] {
            Some(our_cost) => assert!(
                within_half_a_percent(our_cost, their_cost),
                "{key:?}: cuca ${our_cost} against ccusage ${their_cost}"
            ),
            None => assert_eq!(key.1, UNPRICED_IN_BUNDLED, "{key:?} is unpriced"),
        }
    }
    assert_eq!(bundled["totals"]["unpricedCalls"], 3, "{bundled}");

    // Priced by the same prices ccusage used (fixtures/claude-code/prices.json: the bundled
    // entries, and Opus 4.1 at the prices ccusage gives it): every day's total.
    let same = cuca_daily(
        store.path(),
        Some(&fixtures("claude-code").join("prices.json")),
    );
    assert_eq!(same["totals"]["unpricedCalls"], 0, "{same}");
    let ours = daily(&same);
    assert_eq!(counts(&ours), counts(&theirs));
    for (date, (_, their_cost)) in &theirs {
        let (our_cost, their_cost) = (ours[date].1.unwrap(), their_cost.unwrap());
        assert!(
            within_half_a_percent(our_cost, their_cost),
            "{date}: cuca ${our_cost} against ccusage ${their_cost}"
        );
    }
}
