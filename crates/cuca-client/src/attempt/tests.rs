//! Unit tests of the call-log rows an attempt writes: the pieces a loopback server cannot
//! reach (a response past the old cap, a long non-provider error, rounding).

use std::time::Duration;

use bytes::Bytes;
use cuca_calllog::{read_rows, CallLog, Record, MAX_ERROR_CHARS};
use cuca_events::{Message, PluginError, ProviderUsage, UnifiedRequest};

use super::*;

fn temp_log(bodies: bool) -> (tempfile::TempDir, std::path::PathBuf, CallLog) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calls.jsonl");
    let log = CallLog::builder()
        .path(Some(path.clone()))
        .bodies(bodies)
        .build();
    (dir, path, log)
}

fn shape() -> (AttemptShape, Bytes) {
    let mut request = UnifiedRequest::new(vec![Message::user("secret words")]);
    request.model = "m".into();
    request.max_tokens = Some(50);
    request.metadata.run = Some("r".into());
    let body = Bytes::from_static(br#"{"messages":[{"role":"user","content":"secret words"}]}"#);
    (AttemptShape::of(&request, &body), body)
}

fn summary(finish: &str, completion_tokens: u64) -> StreamSummary {
    let mut summary = StreamSummary::default();
    summary.finish_reason = Some(finish.into());
    summary.usage = Some(ProviderUsage {
        prompt_tokens: 7,
        completion_tokens,
        reasoning_tokens: Some(completion_tokens),
        cost: Some(0.25),
        ..ProviderUsage::default()
    });
    summary
}

fn end_row(path: &std::path::Path) -> Record {
    let rows = read_rows(path).unwrap().rows;
    assert_eq!(rows.len(), 2);
    rows[1].clone()
}

#[test]
fn a_response_past_the_old_4_mib_cap_is_kept_whole() {
    // With CUCA_CALL_LOG_BODIES, `response_body` no longer stops at 4 MiB with a note.
    // Seed 003: the bodies "are whole and unclipped".
    let (_dir, path, log) = temp_log(true);
    let (shape, body) = shape();
    let mut record = AttemptRecord::start(1, "c", &shape, &log, &body, None);
    let old_cap = 4 << 20;
    record.capture(&vec![b'a'; old_cap - 10]);
    record.capture(&[b'b'; 30]);
    record.capture(b"cc");
    record.end(AttemptEnd::Finished {
        summary: &summary("stop", 3),
        answered: true,
    });
    let end = end_row(&path);
    assert_eq!(end.response_body.len(), old_cap + 22);
    assert!(end.response_body.ends_with("bbbbbcc"));
    assert_eq!(end.note, "", "nothing was cut");
}

#[test]
fn without_the_bodies_pin_nothing_of_the_response_is_kept() {
    let (_dir, path, log) = temp_log(false);
    let (shape, body) = shape();
    let mut record = AttemptRecord::start(1, "c", &shape, &log, &body, None);
    record.capture(b"data: {\"secret\":1}\n\n");
    assert!(record.response.is_none());
    record.end(AttemptEnd::Finished {
        summary: &summary("stop", 3),
        answered: true,
    });
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("secret"), "{text}");
    let end = end_row(&path);
    assert_eq!(end.reasoning_tokens, 3);
    assert_eq!(end.cost, 0.25);
    assert_eq!(end.note, "");
}

#[test]
fn a_long_transport_error_is_clipped_to_the_logs_bound() {
    // Seed 003: "an upstream that answered with a page does not get to own a line of the log."
    let (_dir, path, log) = temp_log(false);
    let (shape, body) = shape();
    let mut record = AttemptRecord::start(2, "c", &shape, &log, &body, None);
    let error = PluginError::Transport {
        url: "http://x".into(),
        message: "é".repeat(1000),
        source: None,
    };
    record.end(AttemptEnd::Retrying(&error, Duration::ZERO));
    let end = end_row(&path);
    assert_eq!(end.error.chars().count(), MAX_ERROR_CHARS);
    assert!(end.error.ends_with('…'));
    assert_eq!(end.attempt, 2);
    assert_eq!(end.ended, "");
}

#[test]
fn empty_at_ceiling_needs_no_answer_a_length_finish_and_the_whole_ceiling() {
    let cases = [
        ("length", 50, false, true),
        ("length", 60, false, true),
        ("length", 49, false, false),
        ("length", 50, true, false),
        ("stop", 50, false, false),
    ];
    for (finish, completion, answered, expected) in cases {
        let mut row = Record {
            max_tokens: 50,
            ..Record::default()
        };
        summary(finish, completion).fill_end_row(&mut row, answered);
        assert_eq!(
            row.empty_at_ceiling, expected,
            "{finish} {completion} {answered}"
        );
    }
    // No ceiling travelled: nothing to have spent.
    let mut row = Record::default();
    summary("length", 50).fill_end_row(&mut row, false);
    assert!(!row.empty_at_ceiling);
}

#[test]
fn milliseconds_round_up_so_a_measured_wait_is_never_absent() {
    assert_eq!(ceil_ms(Duration::ZERO), 0);
    assert_eq!(ceil_ms(Duration::from_micros(1)), 1);
    assert_eq!(ceil_ms(Duration::from_micros(1000)), 1);
    assert_eq!(ceil_ms(Duration::from_micros(1001)), 2);
}

#[test]
fn every_timeout_phase_names_its_setting() {
    for (phase, setting) in [
        ("connection", "connect"),
        ("first token", "first_token"),
        ("data", "idle"),
        ("response", "total"),
    ] {
        let mut row = Record::default();
        failed_row(
            &mut row,
            &timeout("http://x", phase, Duration::from_millis(9)),
        );
        assert_eq!(row.applied, setting);
        assert_eq!(row.applied_ms, 9);
        assert_eq!(row.ended, "deadline");
    }
}

#[test]
fn a_timeout_too_long_for_u64_milliseconds_saturates_instead_of_wrapping() {
    // `applied_ms` is "THE BOUND THAT ACTUALLY ENDED THIS ATTEMPT": a wrapped figure would
    // name a bound that never applied.
    let mut row = Record::default();
    failed_row(
        &mut row,
        &timeout("http://x", "response", Duration::from_secs(u64::MAX)),
    );
    assert_eq!(row.applied_ms, u64::MAX);
    assert_eq!(row.applied, "total");
}
