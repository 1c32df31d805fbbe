//! Unit tests of the small helpers.

use super::*;

#[test]
fn an_ack_line_parses_and_nothing_else_does() {
    assert_eq!(parse_ack("ack 12"), Some(12));
    assert_eq!(parse_ack("ack 12\n"), Some(12));
    assert_eq!(parse_ack("ack"), None);
    assert_eq!(parse_ack("error ack 1"), None);
    assert_eq!(parse_ack("ack -1"), None);
}

#[test]
fn payloads_differ_by_sequence_and_some_span_many_pages() {
    let sizes: Vec<usize> = (0..64).map(|n| payload::session_text(n).len()).collect();
    assert!(sizes.iter().any(|&len| len > 64 * 1024), "{sizes:?}");
    assert!(sizes.iter().any(|&len| len < 1024), "{sizes:?}");
    assert!(payload::session_text(3).starts_with("record 3 "));
}
