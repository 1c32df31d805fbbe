//! Date suffixes, tier keys and calendar days, the parts of the table read by hand.

use super::{tier_key, utc_date, without_date_suffix};

#[test]
fn date_suffixes_are_dropped_and_versions_kept() {
    assert_eq!(
        without_date_suffix("claude-sonnet-4-5-20250929"),
        Some("claude-sonnet-4-5")
    );
    assert_eq!(
        without_date_suffix("claude-sonnet-4-5@20250929"),
        Some("claude-sonnet-4-5")
    );
    assert_eq!(without_date_suffix("gpt-4o-2024-08-06"), Some("gpt-4o"));
    assert_eq!(without_date_suffix("gpt-4-0613"), None);
    assert_eq!(without_date_suffix("claude-sonnet-4-5-20250929-v1:0"), None);
    assert_eq!(without_date_suffix("20250929"), None);
}

#[test]
fn tier_keys_give_kind_and_threshold() {
    assert_eq!(
        tier_key("input_cost_per_token_above_200k_tokens"),
        Some(("input_cost_per_token", 200_000))
    );
    assert_eq!(
        tier_key("cache_creation_input_token_cost_above_1hr_above_200k_tokens"),
        Some(("cache_creation_input_token_cost_above_1hr", 200_000))
    );
    assert_eq!(
        tier_key("cache_read_input_token_cost_above_128_tokens"),
        Some(("cache_read_input_token_cost", 128))
    );
    assert_eq!(tier_key("cache_creation_input_token_cost_above_1hr"), None);
    assert_eq!(
        tier_key("input_cost_per_token_above_200k_tokens_priority"),
        None
    );
    assert_eq!(tier_key("input_cost_per_token_batches"), None);
}

#[test]
fn utc_dates_are_calendar_days() {
    let at = |secs| std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    assert_eq!(utc_date(at(0)).as_deref(), Some("1970-01-01"));
    // 2024-02-29T23:59:59Z, a leap day.
    assert_eq!(utc_date(at(1_709_251_199)).as_deref(), Some("2024-02-29"));
    assert_eq!(utc_date(at(1_764_633_600)).as_deref(), Some("2025-12-02"));
}
