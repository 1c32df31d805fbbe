//! Unit tests of `ids`.

use super::*;

#[test]
fn ids_are_a_function_of_session_and_sequence() {
    // Exporting the same session twice yields the same trace and span ids (derived from
    // session id and sequence).
    assert_eq!(turn_trace_id("demo", 0), turn_trace_id("demo", 0));
    assert_ne!(turn_trace_id("demo", 0), turn_trace_id("demo", 7));
    assert_eq!(turn_span_id("demo", 7), turn_span_id("demo", 7));
    assert_ne!(turn_span_id("demo", 7), turn_span_id("demo", 8));
    assert_ne!(turn_span_id("demo", 7), turn_span_id("demp", 7));
}

#[test]
fn a_session_call_and_a_call_log_call_with_one_name_get_different_traces() {
    assert_ne!(turn_trace_id("x", 0), call_trace_id("x", "0"));
    assert_ne!(call_trace_id("x", "a"), live_call_trace_id("a"));
}

#[test]
fn parts_are_delimited() {
    assert_ne!(call_span_id("ab", "c"), call_span_id("a", "bc"));
    assert_ne!(call_trace_id("ab", "c"), call_trace_id("a", "bc"));
}

#[test]
fn the_derivation_is_pinned() {
    // A changed derivation re-keys every span ever exported (and breaks the links forks send
    // to their parents' calls): these values may only change together with the `v1` in the
    // domain tags.
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    assert_eq!(hex(&turn_span_id("demo", 0)), "acc84f1a62243f1c");
    // `printf 'cuca-otel/v1/turn-trace\0demo\0' ; printf 0 as 8 big-endian bytes; printf
    // '\0'`, through `sha256sum`: its first 16 bytes.
    assert_eq!(
        hex(&turn_trace_id("demo", 0)),
        "808750071a6e704fd7b3f782bf2dd0fb"
    );
}
