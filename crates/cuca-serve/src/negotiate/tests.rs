//! Unit tests of the `Accept-Encoding` rules.

use super::*;

#[test]
fn browser_header_accepts_gzip() {
    // "A browser is handed the stored bytes verbatim."
    assert!(accepts_gzip(Some("gzip, deflate, br")));
    assert!(accepts_gzip(Some("br;q=1.0, gzip;q=0.8, *;q=0.1")));
    assert!(accepts_gzip(Some("GZIP")));
    assert!(accepts_gzip(Some("x-gzip")));
}

#[test]
fn gzip_q_zero_is_a_refusal_even_beside_a_wildcard() {
    assert!(!accepts_gzip(Some("gzip;q=0")));
    assert!(!accepts_gzip(Some("gzip;q=0.000, *")));
    assert!(!accepts_gzip(Some("*, gzip; q=0")));
}

#[test]
fn wildcard_counts_for_gzip_when_gzip_is_not_named() {
    assert!(accepts_gzip(Some("*")));
    assert!(accepts_gzip(Some("br, *;q=0.5")));
    assert!(!accepts_gzip(Some("*;q=0")));
}

#[test]
fn gzip_unaware_clients_get_decoded_bytes() {
    // "A gzip-unaware client is handed them decoded."
    assert!(!accepts_gzip(None));
    assert!(!accepts_gzip(Some("")));
    assert!(!accepts_gzip(Some("identity")));
    assert!(!accepts_gzip(Some("br, deflate")));
}

#[test]
fn identity_preferred_by_weight_wins_and_ties_go_to_gzip() {
    assert!(!accepts_gzip(Some("identity;q=1, gzip;q=0.5")));
    assert!(accepts_gzip(Some("identity;q=0.5, gzip;q=0.5")));
    assert!(accepts_gzip(Some("identity;q=0, gzip")));
}

#[test]
fn malformed_q_values_drop_the_element() {
    assert!(!accepts_gzip(Some("gzip;q=2")));
    assert!(!accepts_gzip(Some("gzip;q=-1")));
    assert!(!accepts_gzip(Some("gzip;q=0.5555")));
    assert!(!accepts_gzip(Some("gzip;q=high")));
    assert!(!accepts_gzip(Some("gzip;q=1.5")));
    assert!(accepts_gzip(Some("gzip;q=1.000")));
    assert!(accepts_gzip(Some("gzip ; Q = 0.001")));
    // A malformed gzip element leaves the wildcard to decide.
    assert!(accepts_gzip(Some("gzip;q=x, *")));
}

#[test]
fn several_header_lines_are_read_as_one_list() {
    let mut headers = HeaderMap::new();
    headers.append(ACCEPT_ENCODING, HeaderValue::from_static("br"));
    headers.append(ACCEPT_ENCODING, HeaderValue::from_static("gzip;q=0.2"));
    assert_eq!(
        join_accept_encoding(&headers).as_deref(),
        Some("br,gzip;q=0.2")
    );
    assert_eq!(join_accept_encoding(&HeaderMap::new()), None);
}
