//! Unit tests of the streaming record reader's format gate.

use super::*;

fn read(json: &str) -> Result<RecordSummary, RecordError> {
    read_record_from(json.as_bytes(), Path::new("r.json"))
}

const MINIMAL: &str = r#"{"formatVersion":1,"sessionId":"s","routingKey":"eu/s","recorder":{"ggVersion":"0.1.0","commit":null},"capabilities":{},"outcome":{"kind":"session_killed"},"seed":null,"agents":[],"pools":{"messages":[{"id":"00112233445566778899aabbccddeeff","body":{"role":"user","content":[]}}],"toolsets":[],"texts":[{"id":"00112233445566778899aabbccddeeff","text":"x"},{"id":"00112233445566778899aabbccddeeff","text":"y"}]},"clips":[],"entries":[{"seq":0,"agent":"a","kind":"clock","elapsedMs":1,"remainingMs":null},{"seq":1,"agent":"a","kind":"clock","elapsedMs":2}]}"#;

#[test]
fn a_format_one_record_is_summarised() {
    let summary = read(MINIMAL).unwrap();
    assert_eq!(summary.session_id, "s");
    assert_eq!(summary.routing_key.as_deref(), Some("eu/s"));
    assert_eq!(summary.outcome, Outcome::SessionKilled);
    assert_eq!(
        (summary.n_messages, summary.n_toolsets, summary.n_texts),
        (1, 0, 2)
    );
    assert_eq!(summary.n_entries, 2);
    assert_eq!(summary.last_seq, Some(1));
    assert_eq!(summary.entries_by_kind.get("clock"), Some(&2));
}

#[test]
fn another_format_does_not_parse() {
    // "Format 1 is the one format this build reads, and every other value is refused."
    for (json, found) in [
        (
            MINIMAL.replace("\"formatVersion\":1", "\"formatVersion\":2"),
            "2",
        ),
        (
            MINIMAL.replace("\"formatVersion\":1", "\"formatVersion\":\"1\""),
            "\"1\"",
        ),
    ] {
        match read(&json) {
            Err(RecordError::UnsupportedFormat { found: got, .. }) => assert_eq!(got, found),
            other => panic!("{found}: {other:?}"),
        }
    }
}

#[test]
fn a_record_stating_no_format_is_malformed_and_does_not_parse() {
    // "formatVersion is required: a record that states no format at all is malformed and does
    // not parse."
    let json = MINIMAL.replace("\"formatVersion\":1,", "");
    assert!(!json.contains("formatVersion"));
    match read(&json) {
        Err(RecordError::Malformed { source, .. }) => {
            assert!(source.to_string().contains("formatVersion"), "{source}");
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
}

#[test]
fn an_unknown_entry_kind_in_format_one_is_malformed() {
    let json = MINIMAL.replace(
        "\"kind\":\"clock\",\"elapsedMs\":2",
        "\"kind\":\"teleport\"",
    );
    assert!(matches!(read(&json), Err(RecordError::Malformed { .. })));
    assert!(matches!(
        read("{\"formatVersion\":1"),
        Err(RecordError::Malformed { .. })
    ));
    assert!(matches!(
        read(&format!("{MINIMAL} []")),
        Err(RecordError::Malformed { .. })
    ));
}

#[test]
fn a_record_with_a_gigantic_string_field_is_summarised_with_the_field_clipped() {
    // `cuca journal show` on a record with a 1 GiB string field is bounded (it once took
    // 2.1 GB and 162 s). Every string reaches serde clipped, so what a summary holds
    // is bounded by SUMMARY_STRING_BYTES, not by the field.
    let prompt = "p".repeat(8 * SUMMARY_STRING_BYTES);
    let name = "é".repeat(SUMMARY_STRING_BYTES);
    let json = format!(
        r#"{{"formatVersion":1,"sessionId":"s","routingKey":null,"recorder":{{"ggVersion":"0.1.0","commit":null}},"capabilities":{{}},"outcome":{{"kind":"complete"}},"seed":{{"baselineCommit":null,"buildPrompt":"{prompt}","slots":[]}},"agents":[{{"id":"a","profileId":"p","profileName":"{name}","origin":{{"kind":"root"}},"status":"started","ceiling":null}}],"pools":{{"messages":[],"toolsets":[],"texts":[]}},"clips":[],"entries":[{{"seq":0,"agent":"a","kind":"shell","origin":"hook","command":"{prompt}","cwd":".","exitStatus":0,"stdout":0,"stderr":0}}]}}"#
    );
    let summary = read_record_from(json.as_bytes(), Path::new("big.json")).unwrap();
    let shown = &summary.seed.as_ref().unwrap().build_prompt;
    assert!(shown.len() <= SUMMARY_STRING_BYTES + '…'.len_utf8());
    assert!(shown.ends_with('…') && shown.starts_with("ppp"));
    let profile = &summary.agents[0].profile_name;
    assert!(profile.len() <= SUMMARY_STRING_BYTES + '…'.len_utf8());
    assert!(profile.ends_with('…'));
    // The counts are untouched by clipping.
    assert_eq!(summary.n_entries, 1);
    assert_eq!(summary.entries_by_kind.get("shell"), Some(&1));
}
