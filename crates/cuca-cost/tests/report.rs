//! Calls read from records and summed: every kind as the provider sent it, the cache writes
//! by lifetime, a folded pair priced as uncached input, an unknown model's cost unknown.

// Test helpers unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use cuca_cost::{CallReader, Counted, GroupBy, PriceTable, Report, Usage};
use cuca_events::{SessionEvent, TokenDetail};

fn call(model: &str, detail: Option<TokenDetail>) -> Vec<SessionEvent> {
    let mut events = vec![
        SessionEvent::CallRequest {
            model: model.into(),
            parameters: "{}".into(),
            tools: "[]".into(),
            messages: 1,
        },
        SessionEvent::CallFinish {
            finish_reason: Some("stop".into()),
            model: model.into(),
        },
    ];
    events.extend(detail.map(SessionEvent::TokenDetail));
    events.push(SessionEvent::Latency { duration_ms: 5 });
    events.push(SessionEvent::TokenUsage {
        prompt_tokens: 4_628,
        completion_tokens: 57,
    });
    events
}

#[test]
fn cache_writes_keep_their_lifetimes_and_an_unsplit_write_is_a_five_minute_one() {
    let split = TokenDetail {
        cache_write: Some(1_201),
        cache_write_1h: Some(201),
        ..TokenDetail::default()
    };
    let usage = Usage::from_detail(&split);
    assert_eq!((usage.cache_write_5m, usage.cache_write_1h), (1_000, 201));
    let unsplit = TokenDetail {
        cache_write: Some(1_201),
        ..TokenDetail::default()
    };
    let usage = Usage::from_detail(&unsplit);
    assert_eq!((usage.cache_write_5m, usage.cache_write_1h), (1_201, 0));
    // OpenAI's prompt counts its cache reads: the uncached input is the rest.
    let openai = TokenDetail {
        prompt: Some(2_048),
        cache_read: Some(1_920),
        output: Some(300),
        reasoning: Some(256),
        ..TokenDetail::default()
    };
    let usage = Usage::from_detail(&openai);
    assert_eq!(
        (usage.input, usage.cache_read, usage.output, usage.reasoning),
        (128, 1_920, 300, 256)
    );
}

#[test]
fn a_report_sums_by_model_prices_the_known_and_leaves_the_unknown_unknown() {
    let table = PriceTable::bundled().unwrap();
    let detail = TokenDetail {
        input: Some(26),
        output: Some(57),
        cache_read: Some(3_401),
        cache_write: Some(1_201),
        cache_write_5m: Some(1_000),
        cache_write_1h: Some(201),
        ..TokenDetail::default()
    };
    let mut events = call("claude-sonnet-4-5-20250929", Some(detail));
    events.extend(call("mystery-model-9", Some(detail)));
    events.extend(call("claude-sonnet-4-5-20250929", None));
    let mut reader = CallReader::default();
    let mut report = Report::new(GroupBy::Model, None, None);
    let mut counted = Vec::new();
    for (sequence, event) in events.iter().enumerate() {
        if let Some(call) = reader.see(sequence as u64, 1_796_000_000_000, event) {
            counted.push(call.counted);
            report.add("s", &call, table);
        }
    }
    assert_eq!(counted, [Counted::Detail, Counted::Detail, Counted::Folded]);
    let rows: Vec<_> = report.rows().collect();
    assert_eq!(rows.len(), 2);
    let claude = 26.0 * 3e-6 + 57.0 * 15e-6 + 3_401.0 * 0.3e-6 + 1_000.0 * 3.75e-6 + 201.0 * 6e-6;
    let folded = 4_628.0 * 3e-6 + 57.0 * 15e-6;
    let known = rows[0].totals.known_cost().unwrap();
    assert!((known - (claude + folded)).abs() < 1e-12, "{known}");
    assert_eq!(rows[0].totals.n_folded, 1);
    assert_eq!(rows[1].key, "mystery-model-9");
    assert_eq!(rows[1].totals.known_cost(), None, "unknown, never 0");
    assert_eq!(rows[1].totals.unpriced_tokens, 26 + 57 + 3_401 + 1_201);
    let totals = report.totals();
    assert_eq!(totals.known_cost(), None);
    assert!((totals.cost - (claude + folded)).abs() < 1e-12);
}

#[test]
fn the_dates_bound_what_a_report_counts() {
    let table = PriceTable::bundled().unwrap();
    let mut report = Report::new(
        GroupBy::Day,
        Some("2026-12-02".into()),
        Some("2026-12-02".into()),
    );
    // 2026-12-01, 2026-12-02 and 2026-12-03, at noon UTC.
    for (i, at) in [1_796_126_400_000u64, 1_796_212_800_000, 1_796_299_200_000]
        .into_iter()
        .enumerate()
    {
        let mut reader = CallReader::default();
        for (sequence, event) in call("gpt-4o", None).iter().enumerate() {
            if let Some(call) = reader.see(sequence as u64, at, event) {
                report.add(&format!("s{i}"), &call, table);
            }
        }
    }
    let days: Vec<&str> = report.rows().map(|r| r.key.as_str()).collect();
    assert_eq!(days, ["2026-12-02"]);
    assert_eq!(report.totals().n_calls, 1);
}
