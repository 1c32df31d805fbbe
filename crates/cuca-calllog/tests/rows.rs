//! What a row holds: emptiness, `conn_reused`, the bodies pin, non-finite floats, timestamps.

mod common;

use cuca_calllog::{read_rows, CallLog, Record, PHASE_START};

fn lines(path: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(str::to_owned).collect()
}

#[test]
fn every_field_is_omitted_when_empty() {
    // "Every field is omitempty, because the emptiness law applies to files as much as to
    // screens".
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calls.jsonl");
    let (log, _) = common::log_at(&path);
    log.append(Record {
        ts: "2026-01-01T00:00:00.000Z".into(),
        ..Record::default()
    });
    assert_eq!(lines(&path), [r#"{"ts":"2026-01-01T00:00:00.000Z"}"#]);
}

#[test]
fn every_field_keeps_the_seed_json_name() {
    let full = Record {
        ts: "t".into(),
        id: "i".into(),
        run: "r".into(),
        phase: PHASE_START.into(),
        tag: "tag".into(),
        node: "n".into(),
        model: "m".into(),
        served: "s".into(),
        effort: "high".into(),
        effort_pin: "low".into(),
        max_tokens: 1,
        messages: 2,
        tools: 3,
        stream: true,
        attempt: 4,
        relaxed: vec!["tools".into()],
        status: 200,
        ms: 5,
        finish: "stop".into(),
        ended: "hopped".into(),
        ttft_ms: 6,
        hazard_ceiling_ms: 7,
        applied_ms: 8,
        applied: "wall".into(),
        exhaust: true,
        lane: "l".into(),
        hedged: true,
        retry_after: 1.5,
        conn_reused: Some(true),
        dns_ms: 9,
        connect_ms: 10,
        tls_ms: 11,
        silence_ms: 12,
        action: "hedge".into(),
        reason: "why".into(),
        refused: "no alt".into(),
        arms: 2,
        waste_usd: 0.25,
        wait_s: 2.5,
        cost_s: 3.5,
        note: "a note".into(),
        prompt_tokens: 13,
        completion_tokens: 14,
        reasoning_tokens: 15,
        cached_tokens: 16,
        cache_write_tokens: 17,
        cost: 0.125,
        cost_source: "litellm 2026-11-01".into(),
        error: "e".into(),
        learned: vec!["reasoning_mandatory".into()],
        empty_at_ceiling: true,
        redacted: [("openai-key".to_owned(), 2)].into_iter().collect(),
        request_body: "{}".into(),
        response_body: "{}".into(),
    };
    let value = serde_json::to_value(&full).unwrap();
    let keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut expected = vec![
        "ts",
        "id",
        "run",
        "phase",
        "tag",
        "node",
        "model",
        "served",
        "effort",
        "effort_pin",
        "max_tokens",
        "messages",
        "tools",
        "stream",
        "attempt",
        "relaxed",
        "status",
        "ms",
        "finish",
        "ended",
        "ttft_ms",
        "hazard_ceiling_ms",
        "applied_ms",
        "applied",
        "exhaust",
        "lane",
        "hedged",
        "retry_after",
        "conn_reused",
        "dns_ms",
        "connect_ms",
        "tls_ms",
        "silence_ms",
        "action",
        "reason",
        "refused",
        "arms",
        "waste_usd",
        "wait_s",
        "cost_s",
        "note",
        "prompt_tokens",
        "completion_tokens",
        "reasoning_tokens",
        "cached_tokens",
        "cache_write_tokens",
        "cost",
        "cost_source",
        "error",
        "learned",
        "empty_at_ceiling",
        "redacted",
        "request_body",
        "response_body",
    ];
    let mut got = keys.clone();
    got.sort_unstable();
    expected.sort_unstable();
    assert_eq!(got, expected);
    let back: Record = serde_json::from_value(value).unwrap();
    assert_eq!(back, full);
}

#[test]
fn conn_reused_false_is_written_out_and_none_is_omitted() {
    // "FALSE IS WRITTEN OUT ... and carries the field not at all where no trace was taken".
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calls.jsonl");
    let (log, _) = common::log_at(&path);
    for reused in [Some(false), None, Some(true)] {
        log.append(Record {
            ts: "t".into(),
            conn_reused: reused,
            ..Record::default()
        });
    }
    assert_eq!(
        lines(&path),
        [
            r#"{"ts":"t","conn_reused":false}"#,
            r#"{"ts":"t"}"#,
            r#"{"ts":"t","conn_reused":true}"#
        ]
    );
    let rows = read_rows(&path).unwrap().rows;
    let read: Vec<Option<bool>> = rows.iter().map(|r| r.conn_reused).collect();
    assert_eq!(read, [Some(false), None, Some(true)]);
}

#[test]
fn no_prompt_text_in_a_row_unless_the_bodies_pin_is_on() {
    // "RequestBody and ResponseBody are present ONLY under BodiesEnvVar."
    let secret = "the vault is in Lisbon";
    let dir = tempfile::tempdir().unwrap();
    let row = || Record {
        messages: 2,
        request_body: format!(r#"{{"messages":[{{"content":"{secret}"}}]}}"#),
        response_body: format!("{secret}, noted"),
        ..Record::default()
    };

    let plain_path = dir.path().join("plain.jsonl");
    let plain = CallLog::builder().path(Some(plain_path.clone())).build();
    plain.append(row());
    let written = std::fs::read_to_string(&plain_path).unwrap();
    assert!(!written.contains(secret), "{written}");
    assert!(!written.contains("request_body") && !written.contains("response_body"));
    assert!(written.contains(r#""messages":2"#));

    let bodies_path = dir.path().join("bodies.jsonl");
    let bodies = CallLog::builder()
        .path(Some(bodies_path.clone()))
        .bodies(true)
        .build();
    assert!(bodies.bodies());
    bodies.append(row());
    let rows = read_rows(&bodies_path).unwrap().rows;
    assert_eq!(
        rows[0].request_body,
        row().request_body,
        "whole and unclipped"
    );
    assert_eq!(rows[0].response_body, row().response_body);
}

#[test]
fn a_non_finite_float_never_costs_the_row() {
    // "AND A ROW IS NEVER LOST OVER A VALUE."
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calls.jsonl");
    let (log, warnings) = common::log_at(&path);
    log.append(Record {
        id: "abcd0123".into(),
        action: "hedge".into(),
        wait_s: f64::INFINITY,
        cost: f64::NAN,
        cost_s: 0.5,
        ..Record::default()
    });
    let rows = read_rows(&path).unwrap().rows;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].id, "abcd0123");
    assert_eq!(rows[0].cost_s, 0.5);
    assert_eq!(rows[0].wait_s, 0.0);
    assert_eq!(
        rows[0].note,
        "wait_s was +Inf and cost was NaN, which JSON cannot spell: taken off the row"
    );
    assert!(warnings.lines().is_empty());
}

#[test]
fn append_stamps_ts_in_rfc3339_millis_utc_and_keeps_a_given_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calls.jsonl");
    let (log, _) = common::log_at(&path);
    log.append(Record::default());
    log.append(Record {
        ts: "2026-09-10T00:00:00.000Z".into(),
        ..Record::default()
    });
    let rows = read_rows(&path).unwrap().rows;
    let ts = rows[0].ts.as_bytes();
    assert_eq!(ts.len(), "2026-11-29T17:23:41.123Z".len(), "{}", rows[0].ts);
    assert_eq!((ts[4], ts[10], ts[19], ts[23]), (b'-', b'T', b'.', b'Z'));
    let parsed = humantime::parse_rfc3339(&rows[0].ts).unwrap();
    let age = std::time::SystemTime::now().duration_since(parsed).unwrap();
    assert!(age.as_secs() < 60, "{age:?}");
    assert_eq!(rows[1].ts, "2026-09-10T00:00:00.000Z");
}

#[test]
fn one_arm_is_the_ordinary_case_and_is_left_off_the_row() {
    // "Arms is how many requests this one question put on the wire, counting the original.
    // One is the ordinary case and is left off the row."
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calls.jsonl");
    let (log, _) = common::log_at(&path);
    for arms in [0, 1, 2] {
        log.append(Record {
            ts: "t".into(),
            arms,
            ..Record::default()
        });
    }
    assert_eq!(
        lines(&path),
        [r#"{"ts":"t"}"#, r#"{"ts":"t"}"#, r#"{"ts":"t","arms":2}"#]
    );
}

#[test]
fn an_unclipped_error_is_clipped_on_the_way_in() {
    // "MaxErrorChars bounds Record.Error. ... an upstream that answered with a page does not
    // get to own a line of the log."
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calls.jsonl");
    let (log, _) = common::log_at(&path);
    let page = "<html>".repeat(1000);
    for error in [page.clone(), " short, kept as given ".to_owned()] {
        log.append(Record {
            ts: "t".into(),
            error,
            ..Record::default()
        });
    }
    let rows = read_rows(&path).unwrap().rows;
    assert_eq!(rows[0].error, cuca_calllog::clip_error(&page));
    assert_eq!(rows[0].error.chars().count(), cuca_calllog::MAX_ERROR_CHARS);
    assert!(rows[0].error.ends_with('…'));
    assert_eq!(rows[1].error, " short, kept as given ");
}

#[test]
fn a_held_response_body_is_written_whole_and_reads_back_as_the_bytes_sent() {
    // Seed 003: RequestBody and ResponseBody "are whole and unclipped, because the reason to
    // turn them on is that something in the exact bytes is what is wrong."
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    let log = CallLog::builder()
        .path(Some(path.clone()))
        .bodies(true)
        .build();
    // Six mebibytes of events with quotes, backslashes, control bytes and multi-byte
    // characters, pushed in pieces that split characters, plus one byte that is not UTF-8.
    let event = "data: {\"content\":\"caf\u{e9} \\\\ \u{1F600}\t\u{1}\"}\n\n".as_bytes();
    let mut sent = Vec::new();
    while sent.len() < 6 << 20 {
        sent.extend_from_slice(event);
    }
    sent.push(0xff);
    sent.extend_from_slice("tail \u{e9}".as_bytes());
    let mut body = cuca_calllog::ResponseBody::new();
    for piece in sent.chunks(4093) {
        body.push(piece);
    }
    assert_eq!(body.len(), sent.len() as u64);
    let call = log.start(Record {
        model: "m".into(),
        ..Record::default()
    });
    call.finish_with_response(
        Record {
            status: 200,
            ..Record::default()
        },
        body,
    );
    let rows = cuca_calllog::read_rows(&path).unwrap().rows;
    assert_eq!(rows.len(), 2);
    let end = &rows[1];
    assert_eq!(end.response_body, String::from_utf8_lossy(&sent));
    assert_eq!(end.note, "", "nothing was cut");
    assert_eq!((end.status, end.model.as_str()), (200, "m"));
    // The spliced line is byte for byte what serde would have written for the same row.
    let line = std::fs::read_to_string(&path).unwrap();
    let written = line.lines().nth(1).unwrap();
    assert_eq!(written, serde_json::to_string(end).unwrap());

    // Without the pin the held body is dropped like any body.
    let plain_path = tmp.path().join("plain.jsonl");
    let plain = CallLog::builder().path(Some(plain_path.clone())).build();
    let mut body = cuca_calllog::ResponseBody::new();
    body.push(b"data: secret\n\n");
    plain
        .start(Record::default())
        .finish_with_response(Record::default(), body);
    let text = std::fs::read_to_string(&plain_path).unwrap();
    assert!(
        !text.contains("secret") && !text.contains("response_body"),
        "{text}"
    );
}

#[test]
fn a_character_split_over_many_pieces_and_a_truncated_one_decode_like_from_utf8_lossy() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    let log = CallLog::builder()
        .path(Some(path.clone()))
        .bodies(true)
        .build();
    let mut sent = "a\u{1F600}b".as_bytes().to_vec();
    sent.extend_from_slice(&"\u{1F600}".as_bytes()[..2]); // cut short at the end
    let mut body = cuca_calllog::ResponseBody::new();
    for byte in &sent {
        body.push(std::slice::from_ref(byte));
    }
    log.start(Record::default())
        .finish_with_response(Record::default(), body);
    let rows = cuca_calllog::read_rows(&path).unwrap().rows;
    assert_eq!(rows[1].response_body, String::from_utf8_lossy(&sent));
    assert_eq!(rows[1].response_body, "a\u{1F600}b\u{FFFD}");
}
