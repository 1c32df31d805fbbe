//! Unit tests of the back-off schedule.

use std::time::Duration;

use super::*;

#[test]
fn backoff_doubles_with_equal_jitter_and_stops_at_the_cap() {
    let policy = RetryPolicy::new(
        5,
        Duration::from_millis(100),
        Duration::from_millis(350),
        Duration::from_secs(1),
    )
    .unwrap();
    for _ in 0..200 {
        let first = policy.backoff(1);
        assert!(
            first >= Duration::from_millis(50) && first <= Duration::from_millis(100),
            "{first:?}"
        );
        let second = policy.backoff(2);
        assert!(
            second >= Duration::from_millis(100) && second <= Duration::from_millis(200),
            "{second:?}"
        );
        let capped = policy.backoff(9);
        assert!(
            capped >= Duration::from_millis(175) && capped <= Duration::from_millis(350),
            "{capped:?}"
        );
    }
}

#[test]
fn a_zero_backoff_stays_zero() {
    let policy = RetryPolicy::new(1, Duration::ZERO, Duration::ZERO, Duration::ZERO).unwrap();
    assert_eq!(policy.backoff(1), Duration::ZERO);
}

#[test]
fn more_than_ten_retries_is_refused() {
    let err = RetryPolicy::new(11, Duration::ZERO, Duration::ZERO, Duration::ZERO).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid RetryPolicy::max_retries: 11 is more than 10"
    );
}

/// A timeout past what `Instant` arithmetic can add is refused at validation, never a panic
/// at the first call.
#[test]
fn a_timeout_longer_than_a_day_is_refused() {
    let timeouts = Timeouts {
        total: Duration::MAX,
        ..Timeouts::default()
    };
    match timeouts.validate() {
        Err(ClientError::InvalidConfig { setting, .. }) => assert_eq!(setting, "Timeouts::total"),
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
    let day = Timeouts {
        total: MAX_TIMEOUT,
        ..Timeouts::default()
    };
    assert!(day.validate().is_ok());
}
