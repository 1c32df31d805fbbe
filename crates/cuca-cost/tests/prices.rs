//! Costs computed by hand from the bundled snapshot's prices, name matching, and the errors a
//! `--prices FILE` can meet.

use std::io::Read;

use cuca_cost::{PriceTable, PricesError, Usage};

fn bundled() -> &'static PriceTable {
    match PriceTable::bundled() {
        Ok(table) => table,
        Err(e) => panic!("the bundled table must load: {e}"),
    }
}

/// Two costs in USD agree to a billionth of a cent.
fn assert_usd(actual: f64, expected: f64) {
    assert!(
        (actual - expected).abs() < 1e-11,
        "cost {actual} is not the hand-computed {expected}"
    );
}

#[test]
fn a_claude_call_prices_cache_reads_and_both_cache_writes_apart() {
    let price = bundled().price("claude-sonnet-4-5").expect("in the list");
    assert_eq!(price.provider.as_deref(), Some("anthropic"));
    let usage = Usage {
        input: 1_000,
        output: 500,
        cache_read: 20_000,
        cache_write_5m: 3_000,
        cache_write_1h: 4_000,
        reasoning: 0,
    };
    let cost = price.cost(&usage);
    // Sonnet 4.5: $3/M input, $15/M output, $0.30/M cache read, $3.75/M 5-minute write,
    // $6/M 1-hour write.
    assert_usd(cost.input, 1_000.0 * 3e-6);
    assert_usd(cost.output, 500.0 * 15e-6);
    assert_usd(cost.cache_read, 20_000.0 * 0.3e-6);
    assert_usd(cost.cache_write_5m, 3_000.0 * 3.75e-6);
    assert_usd(cost.cache_write_1h, 4_000.0 * 6e-6);
    assert_usd(cost.reasoning, 0.0);
    assert_usd(cost.total(), 0.003 + 0.0075 + 0.006 + 0.01125 + 0.024);
    assert_eq!(cost.tier_above_tokens, None);
}

#[test]
fn an_openai_call_prices_cached_input_and_reasoning() {
    let price = bundled().price("gpt-5").expect("in the list");
    assert_eq!(price.provider.as_deref(), Some("openai"));
    // prompt_tokens 10 000 of which 2 000 cached; completion_tokens 1 500 of which 1 000
    // reasoning.
    let usage = Usage {
        input: 8_000,
        cache_read: 2_000,
        output: 1_500,
        reasoning: 1_000,
        ..Usage::default()
    };
    let cost = price.cost(&usage);
    // GPT-5: $1.25/M input, $0.125/M cached input, $10/M output; the list has no separate
    // reasoning price, so reasoning is output.
    assert_usd(cost.input, 8_000.0 * 1.25e-6);
    assert_usd(cost.cache_read, 2_000.0 * 0.125e-6);
    assert_usd(cost.output, 500.0 * 10e-6);
    assert_usd(cost.reasoning, 1_000.0 * 10e-6);
    assert_usd(cost.total(), 0.01 + 0.00025 + 0.005 + 0.01);
}

#[test]
fn a_separate_reasoning_price_is_used_for_the_reasoning_part_of_output_only() {
    let table = PriceTable::from_json(
        r#"{"thinker": {"input_cost_per_token": 1e-6, "output_cost_per_token": 4e-6,
            "output_cost_per_reasoning_token": 3e-6}}"#,
    )
    .expect("valid");
    let cost = table.price("thinker").expect("present").cost(&Usage {
        output: 1_000,
        reasoning: 600,
        ..Usage::default()
    });
    assert_usd(cost.output, 400.0 * 4e-6);
    assert_usd(cost.reasoning, 600.0 * 3e-6);
}

#[test]
fn a_prompt_past_200k_prices_every_token_at_the_long_context_tier() {
    // Bedrock's Sonnet 4.5 entry carries the 200k tier.
    let price = bundled()
        .price("claude-sonnet-4-5-20250929-v1:0")
        .expect("in the list");
    let usage = Usage {
        input: 50_000,
        cache_read: 140_001,
        cache_write_5m: 6_000,
        cache_write_1h: 4_000,
        output: 1_000,
        reasoning: 0,
    };
    assert_eq!(usage.prompt(), 200_001);
    let cost = price.cost(&usage);
    assert_eq!(cost.tier_above_tokens, Some(200_000));
    // Above 200k: $6/M input, $22.50/M output, $0.60/M cache read, $7.50/M 5-minute write,
    // $12/M 1-hour write, for the whole call.
    assert_usd(cost.input, 50_000.0 * 6e-6);
    assert_usd(cost.output, 1_000.0 * 22.5e-6);
    assert_usd(cost.cache_read, 140_001.0 * 0.6e-6);
    assert_usd(cost.cache_write_5m, 6_000.0 * 7.5e-6);
    assert_usd(cost.cache_write_1h, 4_000.0 * 12e-6);
    assert_usd(cost.total(), 0.3 + 0.0225 + 0.0840006 + 0.045 + 0.048);

    // Exactly 200 000 prompt tokens is not past the threshold: base rates.
    let at_threshold = Usage {
        cache_read: 140_000,
        ..usage
    };
    let cost = price.cost(&at_threshold);
    assert_eq!(cost.tier_above_tokens, None);
    assert_usd(cost.input, 50_000.0 * 3e-6);
    assert_usd(cost.cache_read, 140_000.0 * 0.3e-6);
    assert_usd(cost.cache_write_1h, 4_000.0 * 6e-6);
}

#[test]
fn the_highest_tier_crossed_applies_and_keeps_what_it_does_not_name() {
    let table = PriceTable::from_json(
        r#"{"tiered": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6,
            "input_cost_per_token_above_128k_tokens": 3e-6,
            "output_cost_per_token_above_128k_tokens": 5e-6,
            "input_cost_per_token_above_200k_tokens": 4e-6}}"#,
    )
    .expect("valid");
    let price = table.price("tiered").expect("present");
    let cost = price.cost(&Usage {
        input: 250_000,
        output: 10,
        ..Usage::default()
    });
    assert_eq!(cost.tier_above_tokens, Some(200_000));
    assert_usd(cost.input, 250_000.0 * 4e-6);
    assert_usd(cost.output, 10.0 * 5e-6);
    let cost = price.cost(&Usage {
        input: 150_000,
        output: 10,
        ..Usage::default()
    });
    assert_eq!(cost.tier_above_tokens, Some(128_000));
    assert_usd(cost.input, 150_000.0 * 3e-6);
}

#[test]
fn kinds_without_a_price_fall_back_as_litellm_does() {
    let table = PriceTable::from_json(
        r#"{"plain": {"input_cost_per_token": 2e-6, "output_cost_per_token": 8e-6,
            "cache_creation_input_token_cost": 2.5e-6}}"#,
    )
    .expect("valid");
    let cost = table.price("plain").expect("present").cost(&Usage {
        cache_read: 100,
        cache_write_1h: 100,
        ..Usage::default()
    });
    // No cache-read price: input's. No 1-hour price: the 5-minute write's.
    assert_usd(cost.cache_read, 100.0 * 2e-6);
    assert_usd(cost.cache_write_1h, 100.0 * 2.5e-6);
}

#[test]
fn an_unknown_model_has_no_price_rather_than_a_zero_one() {
    let table = bundled();
    assert!(table.price("no-such-model-anywhere").is_none());
    assert!(table.price("anthropic/no-such-model-20250101").is_none());
    assert!(table.price("").is_none());
    assert!(table.price("/").is_none());
    // An image model is in LiteLLM's list but not priced per token.
    assert!(table.price("256-x-256/dall-e-2").is_none());
}

#[test]
fn prefixed_dated_and_dotted_names_find_their_entry() {
    let table = bundled();
    let found = |name: &str| table.price(name).map(|p| p.model.as_str());
    assert_eq!(
        found("claude-sonnet-4-5-20250929"),
        Some("claude-sonnet-4-5-20250929")
    );
    assert_eq!(
        found("anthropic/claude-sonnet-4-5-20250929"),
        Some("claude-sonnet-4-5-20250929")
    );
    // A release date the list does not have yet: priced as the undated alias.
    assert_eq!(found("claude-haiku-4-5-20991231"), Some("claude-haiku-4-5"));
    assert_eq!(
        found("anthropic/claude-haiku-4-5@20991231"),
        Some("claude-haiku-4-5")
    );
    assert_eq!(found("openai/gpt-4o-2099-01-01"), Some("gpt-4o"));
    assert_eq!(found("claude-sonnet-4.5"), Some("claude-sonnet-4-5"));
    // A name the list has with its prefix is found as given, not stripped.
    assert_eq!(found("azure/eu/gpt-4o"), Some("azure/eu/gpt-4o"));
    // And a dated name keeps its provider's entry before any other provider's.
    assert_eq!(found("azure/eu/gpt-4o-2099-01-01"), Some("azure/eu/gpt-4o"));
}

#[test]
fn the_bundled_table_says_which_list_and_day_priced_it() {
    let source = bundled().source();
    assert!(source.name.contains("LiteLLM"), "{source}");
    let date = source.date.as_deref().expect("the snapshot is dated");
    assert_eq!(date.len(), 10, "{date}");
    assert!(bundled().len() > 1_000, "{} models", bundled().len());
}

#[test]
fn the_bundled_snapshot_is_what_the_regeneration_step_writes() {
    let mut json = String::new();
    flate2::read::GzDecoder::new(&include_bytes!("../data/litellm-prices.json.gz")[..])
        .read_to_string(&mut json)
        .expect("gzip");
    let again = cuca_cost::trim_litellm_json(&json, "bundled").expect("trims");
    assert_eq!(again, json, "trimming the snapshot again changes it");
}

#[test]
fn a_file_in_litellm_format_is_read_and_cited_by_its_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("prices.json");
    std::fs::write(
        &path,
        r#"{"sample_spec": {"input_cost_per_token": 0.0, "litellm_provider": "one of"},
            "my-model": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6,
                         "litellm_provider": "custom", "max_input_tokens": 1000,
                         "supports_vision": true}}"#,
    )
    .expect("write");
    let table = PriceTable::from_file(&path).expect("reads");
    assert_eq!(table.source().name, path.display().to_string());
    assert!(table.source().date.is_some());
    let cost = table.price("my-model").expect("present").cost(&Usage {
        input: 10,
        output: 10,
        ..Usage::default()
    });
    assert_usd(cost.total(), 10.0 * 1e-6 + 10.0 * 2e-6);
    assert!(table.price("claude-sonnet-4-5").is_none());
}

/// The error `from_file` gives for a file holding `contents`, and the file's path.
fn file_error(contents: &str) -> (String, PricesError) {
    let dir = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(e) => panic!("tempdir: {e}"),
    };
    let path = dir.path().join("my-prices.json");
    if let Err(e) = std::fs::write(&path, contents) {
        panic!("write {}: {e}", path.display());
    }
    match PriceTable::from_file(&path) {
        Ok(table) => panic!("{contents} was read as {} models", table.len()),
        Err(err) => (path.display().to_string(), err),
    }
}

#[test]
fn file_errors_name_the_file_and_the_problem() {
    let missing = std::path::Path::new("/nonexistent/cuca/prices.json");
    let err = PriceTable::from_file(missing).expect_err("refused");
    assert!(matches!(err, PricesError::Read { .. }), "{err:?}");
    assert!(
        err.to_string().contains("/nonexistent/cuca/prices.json"),
        "{err}"
    );

    let (path, err) = file_error("{ not json");
    assert!(matches!(err, PricesError::Json { .. }), "{err:?}");
    assert!(err.to_string().contains(&path), "{err}");

    let (path, err) = file_error("[1, 2]");
    assert!(matches!(err, PricesError::NotAnObject { .. }), "{err:?}");
    assert!(err.to_string().contains(&path), "{err}");

    let (path, err) =
        file_error(r#"{"m": {"input_cost_per_token": "free", "output_cost_per_token": 1e-6}}"#);
    let text = err.to_string();
    assert!(matches!(err, PricesError::Field { .. }), "{err:?}");
    assert!(
        text.contains(&path) && text.contains("\"m\"") && text.contains("input_cost_per_token"),
        "{text}"
    );

    let (_, err) =
        file_error(r#"{"m": {"input_cost_per_token": -1e-6, "output_cost_per_token": 1e-6}}"#);
    assert!(matches!(err, PricesError::Field { .. }), "{err:?}");

    let (path, err) = file_error(r#"{"models": [], "m": {"output_cost_per_image": 0.04}}"#);
    assert!(matches!(err, PricesError::NoPrices { .. }), "{err:?}");
    assert!(err.to_string().contains(&path), "{err}");
}

#[test]
fn a_file_past_the_bound_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("huge.json");
    // Sparse: the length is past the bound without writing 64 MiB.
    let file = std::fs::File::create(&path).expect("create");
    file.set_len(cuca_cost::MAX_TABLE_BYTES + 1)
        .expect("set_len");
    let err = PriceTable::from_file(&path).expect_err("refused");
    assert!(
        matches!(err, PricesError::TooLarge { bytes, .. } if bytes == cuca_cost::MAX_TABLE_BYTES + 1),
        "{err:?}"
    );
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

#[test]
fn costs_add_kind_by_kind_and_keep_a_tier_only_when_both_had_it() {
    let price = bundled()
        .price("claude-sonnet-4-5-20250929-v1:0")
        .expect("in the list");
    let short = price.cost(&Usage {
        input: 100,
        output: 10,
        ..Usage::default()
    });
    let long = price.cost(&Usage {
        input: 300_000,
        output: 10,
        ..Usage::default()
    });
    let mut sum = short;
    sum += long;
    assert_usd(sum.input, 100.0 * 3e-6 + 300_000.0 * 6e-6);
    assert_usd(sum.output, 10.0 * 15e-6 + 10.0 * 22.5e-6);
    assert_usd(sum.total(), short.total() + long.total());
    assert_eq!(sum.tier_above_tokens, None);
    let mut twice = long;
    twice += long;
    assert_eq!(twice.tier_above_tokens, Some(200_000));
}
