//! `cuca cost` through the real binary: totals and the cache split by day and by model, in
//! ccusage's JSON shape; an unknown model's cost is "unknown", never 0; a session recorded
//! with only the folded counts is priced from them and says so; `cuca sessions` has the cost.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::cuca;
use cuca::{FileBackend, SessionBackend, SessionEvent, SessionRecord, TokenDetail};
use serde_json::Value;

/// 2026-12-01 10:00 UTC.
const DAY1_MS: u64 = 1_796_119_200_000;
/// 2026-12-02 10:00 UTC.
const DAY2_MS: u64 = DAY1_MS + 86_400_000;

fn claude_detail() -> TokenDetail {
    TokenDetail {
        input: Some(26),
        output: Some(57),
        cache_read: Some(3_401),
        cache_write: Some(1_201),
        cache_write_5m: Some(1_000),
        cache_write_1h: Some(201),
        ..TokenDetail::default()
    }
}

/// `26 × $3/M + 57 × $15/M + 3,401 × $0.30/M + 1,000 × $3.75/M + 201 × $6/M`.
const CLAUDE_CALL_USD: f64 =
    26.0 * 3e-6 + 57.0 * 15e-6 + 3_401.0 * 0.3e-6 + 1_000.0 * 3.75e-6 + 201.0 * 6e-6;

/// Writes one call of `model` per `(timestamp, detail)`, as the session log writes them.
fn write_calls(dir: &Path, session: &str, model: &str, calls: &[(u64, Option<TokenDetail>)]) {
    let backend = FileBackend::new(dir).unwrap();
    let mut sequence = 0;
    let mut append = |timestamp_ms, event| {
        backend
            .append(SessionRecord {
                session_id: session.into(),
                sequence,
                timestamp_ms,
                event,
            })
            .unwrap();
        sequence += 1;
    };
    for (at, detail) in calls {
        append(
            *at,
            SessionEvent::CallRequest {
                model: model.into(),
                parameters: "{}".into(),
                tools: "[]".into(),
                messages: 1,
            },
        );
        append(*at, SessionEvent::Output { text: "ok".into() });
        append(
            *at,
            SessionEvent::CallFinish {
                finish_reason: Some("end_turn".into()),
                model: model.into(),
            },
        );
        if let Some(detail) = detail {
            append(*at, SessionEvent::TokenDetail(*detail));
        }
        append(*at, SessionEvent::Latency { duration_ms: 5 });
        append(
            *at,
            SessionEvent::TokenUsage {
                prompt_tokens: 4_628,
                completion_tokens: 57,
            },
        );
    }
}

fn cost_json(dir: &Path, args: &[&str]) -> Value {
    let output = cuca()
        .arg("cost")
        .arg(dir)
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    serde_json::from_slice(&output.stdout).unwrap()
}

fn close(a: &Value, b: f64) {
    let a = a.as_f64().unwrap_or_else(|| panic!("{a} is not a number"));
    assert!((a - b).abs() < 1e-12, "{a} != {b}");
}

fn small_store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_calls(
        dir.path(),
        "a",
        "claude-sonnet-4-5-20250929",
        &[
            (DAY1_MS, Some(claude_detail())),
            (DAY2_MS, Some(claude_detail())),
        ],
    );
    write_calls(
        dir.path(),
        "b",
        "gpt-4o",
        &[(
            DAY2_MS + 1_000,
            Some(TokenDetail {
                prompt: Some(2_000),
                output: Some(100),
                cache_read: Some(1_000),
                ..TokenDetail::default()
            }),
        )],
    );
    dir
}

#[test]
fn cost_by_day_sums_every_kind_with_the_cache_split_in_ccusage_s_shape() {
    let dir = small_store();
    let report = cost_json(dir.path(), &["--by", "day"]);
    let daily = report["daily"].as_array().unwrap();
    assert_eq!(daily.len(), 2);
    assert_eq!(daily[0]["date"], "2026-12-01");
    assert_eq!(daily[0]["inputTokens"], 26);
    assert_eq!(daily[0]["outputTokens"], 57);
    assert_eq!(daily[0]["cacheCreationTokens"], 1_201);
    assert_eq!(daily[0]["cacheCreation5mTokens"], 1_000);
    assert_eq!(daily[0]["cacheCreation1hTokens"], 201);
    assert_eq!(daily[0]["cacheReadTokens"], 3_401);
    assert_eq!(daily[0]["totalTokens"], 26 + 57 + 1_201 + 3_401);
    close(&daily[0]["totalCost"], CLAUDE_CALL_USD);
    assert_eq!(
        daily[0]["modelsUsed"],
        serde_json::json!(["claude-sonnet-4-5-20250929"])
    );
    // The second day: one Claude call and one GPT-4o call, whose 1,000 cached tokens are
    // read from a 2,000-token prompt (1,000 uncached at $2.50/M, 1,000 at $1.25/M).
    let gpt = 1_000.0 * 2.5e-6 + 1_000.0 * 1.25e-6 + 100.0 * 10e-6;
    assert_eq!(daily[1]["date"], "2026-12-02");
    assert_eq!(daily[1]["inputTokens"], 26 + 1_000);
    assert_eq!(daily[1]["cacheReadTokens"], 3_401 + 1_000);
    close(&daily[1]["totalCost"], CLAUDE_CALL_USD + gpt);
    let breakdowns = daily[1]["modelBreakdowns"].as_array().unwrap();
    assert_eq!(breakdowns.len(), 2);
    let gpt_row = breakdowns
        .iter()
        .find(|b| b["modelName"] == "gpt-4o")
        .unwrap();
    close(&gpt_row["cost"], gpt);
    close(&report["totals"]["totalCost"], 2.0 * CLAUDE_CALL_USD + gpt);
    assert_eq!(report["totals"]["calls"], 3);
    assert!(report["pricedBy"].as_str().unwrap().starts_with("LiteLLM"));
}

#[test]
fn cost_by_model_and_between_dates() {
    let dir = small_store();
    let report = cost_json(dir.path(), &["--by", "model", "--since", "20261202"]);
    let models = report["models"].as_array().unwrap();
    let names: Vec<&str> = models
        .iter()
        .map(|m| m["model"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["claude-sonnet-4-5-20250929", "gpt-4o"]);
    // Only the second day's Claude call is on or after 2026-12-02.
    assert_eq!(models[0]["calls"], 1);
    close(&models[0]["totalCost"], CLAUDE_CALL_USD);
    let until = cost_json(dir.path(), &["--by", "session", "--until", "2026-12-01"]);
    assert_eq!(until["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(until["sessions"][0]["sessionId"], "a");
}

#[test]
fn a_model_no_table_prices_costs_unknown_never_zero() {
    let dir = tempfile::tempdir().unwrap();
    write_calls(
        dir.path(),
        "m",
        "mystery-model-9",
        &[(DAY1_MS, Some(claude_detail()))],
    );
    let report = cost_json(dir.path(), &[]);
    assert_eq!(report["daily"][0]["totalCost"], Value::Null);
    assert_eq!(report["totals"]["totalCost"], Value::Null);
    assert_eq!(report["totals"]["unpricedCalls"], 1);
    let table = cuca().arg("cost").arg(dir.path()).output().unwrap();
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(text.contains(" unknown\n"), "{text}");
    assert!(text.contains("their cost is unknown, not 0"), "{text}");
    assert!(!text.contains("$0.000000"), "{text}");
}

#[test]
fn a_session_recorded_with_only_the_folded_counts_is_priced_from_them_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    write_calls(
        dir.path(),
        "old",
        "claude-sonnet-4-5-20250929",
        &[(DAY1_MS, None)],
    );
    let report = cost_json(dir.path(), &[]);
    assert_eq!(report["totals"]["foldedCalls"], 1);
    assert_eq!(report["totals"]["inputTokens"], 4_628);
    close(
        &report["totals"]["totalCost"],
        4_628.0 * 3e-6 + 57.0 * 15e-6,
    );
    let table = cuca().arg("cost").arg(dir.path()).output().unwrap();
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(text.contains("priced as uncached input"), "{text}");
}

#[test]
fn another_price_list_prices_the_same_calls_and_is_named() {
    let dir = small_store();
    let prices = dir.path().join("prices.json");
    std::fs::write(
        &prices,
        r#"{"claude-sonnet-4-5-20250929":{"input_cost_per_token":1e-6,"output_cost_per_token":1e-6}}"#,
    )
    .unwrap();
    let report = cost_json(
        dir.path(),
        &["--by", "model", "--prices", prices.to_str().unwrap()],
    );
    // Every Claude token at $1/M (no cache prices: they are input prices); GPT-4o unknown.
    let claude = &report["models"][0];
    close(
        &claude["totalCost"],
        2.0 * (26.0 + 57.0 + 3_401.0 + 1_201.0) * 1e-6,
    );
    assert_eq!(report["models"][1]["totalCost"], Value::Null);
    assert!(report["pricedBy"].as_str().unwrap().contains("prices.json"));
}

#[test]
fn sessions_lists_each_session_s_cost_and_the_table_that_priced_it() {
    let dir = small_store();
    let output = cuca().arg("sessions").arg(dir.path()).output().unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.lines().next().unwrap().contains("COST"), "{text}");
    assert!(
        text.contains(&format!("${:.6}", 2.0 * CLAUDE_CALL_USD)),
        "{text}"
    );
    assert!(text.contains("costs priced by LiteLLM"), "{text}");
    let output = cuca()
        .arg("sessions")
        .arg(dir.path())
        .arg("--json")
        .output()
        .unwrap();
    let rows: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let a = rows.iter().find(|r| r["session"] == "a").unwrap();
    close(&a["cost_usd"], 2.0 * CLAUDE_CALL_USD);
}
