//! The ledger's bounds: refusals kept per session and in all, sessions followed, message size.

use axum::http::StatusCode;

use super::*;

fn conflict(message: &str) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "invalid_request_error",
        "cuca_replay_diverged",
        message,
    )
    .at_point(Some("s:7".to_owned()))
}

/// An agent that loops on a 409 grows a count, not the ledger; a fleet of sessions that all
/// diverge keeps at most the bound in all; sessions past the bound are counted as untracked.
#[test]
fn refusals_and_sessions_are_kept_up_to_their_bounds_and_counted_past_them() {
    let ledger = Ledger::default();
    for _ in 0..MAX_DIVERGENCES_KEPT + 10 {
        ledger.refused("looping", &conflict("differs"));
    }
    let (_, kept, n) = ledger.of("looping");
    assert_eq!(
        (kept.len(), n),
        (MAX_DIVERGENCES_KEPT, MAX_DIVERGENCES_KEPT as u64 + 10)
    );
    assert_eq!(kept[0].point.as_deref(), Some("s:7"));
    assert_eq!(kept[0].status, 409);

    for i in 0..MAX_SESSIONS + 3 {
        ledger.refused(&format!("fleet-{i}"), &conflict("differs"));
    }
    let kept_in_all: usize = ledger.sessions().iter().map(|s| ledger.of(s).1.len()).sum();
    assert_eq!(kept_in_all, MAX_DIVERGENCES_KEPT_IN_ALL);
    assert_eq!(ledger.sessions().len(), MAX_SESSIONS);
    // "looping" took one place: four of the fleet found none.
    assert_eq!(ledger.n_untracked(), 4);
    let (_, none_kept, counted) = ledger.of(&format!("fleet-{}", MAX_SESSIONS - 2));
    assert_eq!((none_kept.len(), counted), (0, 1));
}

#[test]
fn a_long_message_is_kept_cut() {
    let ledger = Ledger::default();
    ledger.refused("s", &conflict(&"x".repeat(MAX_MESSAGE_CHARS * 3)));
    ledger.consumed("s", "s:conv:1", 2);
    let (consumed, kept, _) = ledger.of("s");
    assert_eq!(kept[0].message.chars().count(), MAX_MESSAGE_CHARS + 1);
    assert!(kept[0].message.ends_with('…'));
    assert_eq!(
        consumed["s:conv:1"].iter().copied().collect::<Vec<_>>(),
        [2]
    );
}
