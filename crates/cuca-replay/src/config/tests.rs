//! Unit tests for `ReplayConfig` validation and the warn threshold.

use cuca_events::PluginError;

use super::ReplayConfig;

fn schema_of(result: Result<(), PluginError>) -> String {
    match result {
        Err(PluginError::Validation { schema, .. }) => schema,
        other => panic!("expected a validation refusal, got {other:?}"),
    }
}

#[test]
fn the_default_validates_and_keeps_its_documented_values() {
    let config = ReplayConfig::default();
    assert_eq!(config.validate().ok(), Some(()));
    assert_eq!(config.max_records, 262_144);
    assert_eq!(config.max_turn_blocks, 65_536);
    assert_eq!(config.warn_fraction, Some(0.8));
    assert_eq!(config.warn_at(), Some(209_716));
}

#[test]
fn zero_caps_are_refused_naming_the_field() {
    assert_eq!(
        schema_of(ReplayConfig::new(0, 1, None).map(drop)),
        "ReplayConfig::max_records"
    );
    assert_eq!(
        schema_of(ReplayConfig::new(1, 0, None).map(drop)),
        "ReplayConfig::max_turn_blocks"
    );
}

#[test]
fn a_warn_fraction_outside_zero_to_one_is_refused() {
    for bad in [0.0, -0.1, 1.000_001, f64::NAN, f64::INFINITY] {
        assert_eq!(
            schema_of(ReplayConfig::new(10, 10, Some(bad)).map(drop)),
            "ReplayConfig::warn_fraction",
            "{bad} was accepted"
        );
    }
    for good in [f64::MIN_POSITIVE, 0.5, 1.0] {
        assert!(ReplayConfig::new(10, 10, Some(good)).is_ok(), "{good}");
    }
}

#[test]
fn validate_re_checks_a_struct_literal() {
    // "The fields are public, so validate() re-checks a struct literal."
    let literal = ReplayConfig {
        max_records: 0,
        ..ReplayConfig::default()
    };
    assert_eq!(schema_of(literal.validate()), "ReplayConfig::max_records");
}

#[test]
fn warn_at_is_the_ceiling_of_the_fraction_of_the_cap() {
    let at = |max, fraction| ReplayConfig::new(max, 1, fraction).unwrap().warn_at();
    assert_eq!(at(100, Some(0.8)), Some(80));
    assert_eq!(at(10, Some(0.25)), Some(3));
    assert_eq!(at(10, Some(1.0)), Some(10));
    assert_eq!(at(3, Some(f64::MIN_POSITIVE)), Some(1));
    assert_eq!(at(100, None), None);
}
