//! Round trips of every line kind of format 1 through its documented JSON.

use super::*;

fn round_trip(json: &str) -> JournalLine {
    let line: JournalLine = serde_json::from_str(json).unwrap();
    let again = serde_json::to_string(&line).unwrap();
    let back: JournalLine = serde_json::from_str(&again).unwrap();
    assert_eq!(line, back, "{json}");
    let a: serde_json::Value = serde_json::from_str(json).unwrap();
    let b: serde_json::Value = serde_json::from_str(&again).unwrap();
    assert_eq!(a, b, "the documented example is what the types write");
    line
}

#[test]
fn header_keeps_the_seed_field_names() {
    let line = round_trip(
        r#"{"line":"header","formatVersion":1,"sessionId":"run-42","routingKey":"eu-1/run-42","capabilities":{"root":["shell","git"]},"recorder":{"ggVersion":"0.1.0","commit":"9f2c1e0"}}"#,
    );
    match line {
        JournalLine::Header(h) => {
            assert_eq!(h.format_version, FORMAT_VERSION);
            assert_eq!(h.routing_key.as_deref(), Some("eu-1/run-42"));
            assert_eq!(h.recorder.commit.as_deref(), Some("9f2c1e0"));
        }
        other => panic!("not a header: {other:?}"),
    }
}

#[test]
fn a_header_without_format_version_does_not_parse() {
    // "formatVersion is required: a record that states no format at all is malformed and does
    // not parse."
    let err = serde_json::from_str::<JournalLine>(
        r#"{"line":"header","sessionId":"s","recorder":{"version":"0.1.0"}}"#,
    )
    .unwrap_err();
    assert!(err.to_string().contains("formatVersion"), "{err}");
}

#[test]
fn an_unknown_line_kind_does_not_parse() {
    let err = serde_json::from_str::<JournalLine>(r#"{"line":"teleport","x":1}"#).unwrap_err();
    assert!(err.to_string().contains("teleport"), "{err}");
}

#[test]
fn seed_and_agent_rows() {
    round_trip(
        r#"{"line":"seed","baselineCommit":"4b825dc","buildPrompt":"build a todo app","slots":[{"slot":"main","model":"qwen3","contextWindow":131072,"modalities":["text","image"]}]}"#,
    );
    for origin in [
        r#"{"kind":"root"}"#,
        r#"{"kind":"spawn","parent":"a0","position":3}"#,
        r#"{"kind":"succession","predecessor":"a1","position":1}"#,
        r#"{"kind":"issue_attempt","issue":"8","dispatch":2}"#,
        r#"{"kind":"reviewer","issue":"8","round":1,"position":0}"#,
        r#"{"kind":"merge","issue":"8","merge":1}"#,
    ] {
        round_trip(&format!(
            r#"{{"line":"agent","id":"a3","profileId":"p-coder","profileName":"coder","origin":{origin},"status":"started","ceiling":null}}"#
        ));
    }
    round_trip(
        r#"{"line":"agent","id":"a3","profileId":"p-coder","profileName":"coder","origin":{"kind":"root"},"status":"stopped","ceiling":"max_turns"}"#,
    );
}

#[test]
fn pool_lines_and_clip_rows() {
    let id = "0123456789abcdef0123456789abcdef";
    round_trip(&format!(
        r#"{{"line":"message","index":0,"id":"{id}","body":{{"role":"user","content":[{{"type":"text","text":"hi"}},{{"type":"image","mediaType":"image/png","size":1024}},{{"type":"tool_call","id":"c1","name":"read_file","arguments":0}},{{"type":"tool_result","toolCallId":"c1","content":1,"isError":false}},{{"type":"thinking","thinking":"hm"}}]}}}}"#
    ));
    round_trip(&format!(
        r#"{{"line":"toolset","index":0,"id":"{id}","tools":[{{"name":"shell","description":"run","parameters":{{"type":"object"}}}}]}}"#
    ));
    round_trip(&format!(
        r#"{{"line":"text","index":2,"id":"{id}","text":"tail"}}"#
    ));
    round_trip(&format!(
        r#"{{"line":"clip","pool":"text","index":2,"originalBytes":300000,"originalId":"{id}"}}"#
    ));
}

#[test]
fn a_content_id_must_be_32_hex_digits() {
    assert!(serde_json::from_str::<JournalLine>(
        r#"{"line":"text","index":0,"id":"abc","text":""}"#
    )
    .is_err());
    assert_eq!(
        ContentId::from_hex("00112233445566778899aabbccddeeff")
            .unwrap()
            .0[15],
        0xff
    );
}

#[test]
fn every_input_kind() {
    let req = r#"{"model":"qwen3","messages":[0,1],"toolset":0,"toolChoice":"required","maxTokens":4096,"temperature":0.5,"reasoningEffort":"high","role":"agent_turn","shape":"tool_required"}"#;
    let lines = [
        format!(
            r#"{{"line":"entry","seq":0,"agent":"a0","kind":"model_io","request":{req},"response":{{"model":"qwen3","provider":"llamacpp","message":2,"finishReason":"tool_calls","promptTokens":10,"completionTokens":5,"reasoningTokens":null,"cost":null,"cachedTokens":null}},"latencyMs":812}}"#
        ),
        format!(
            r#"{{"line":"entry","seq":1,"agent":"a0","kind":"model_error","request":{req},"class":"unsupported_image","status":400,"detail":"image input is not supported"}}"#
        ),
        r#"{"line":"entry","seq":2,"agent":"a0","kind":"tool_result","callId":"c1","name":"read_file","arguments":0,"output":1,"isError":false}"#.to_string(),
        r#"{"line":"entry","seq":3,"agent":"a0","kind":"prompt_frame","turn":4,"items":[{"message":0,"retention":"verbatim","region":null,"turn":0,"slot":"system"},{"message":3,"retention":"compactable","region":{"offset":0,"limit":200},"turn":4,"slot":"conversation"}]}"#.to_string(),
        r#"{"line":"entry","seq":4,"agent":"a0","kind":"shell","origin":"hook","command":"cargo fmt","cwd":"crates/x","exitStatus":0,"stdout":4,"stderr":5}"#.to_string(),
        r#"{"line":"entry","seq":5,"agent":"a0","kind":"git","args":["status","--porcelain"],"cwd":".","exitStatus":null,"stdout":4,"stderr":5}"#.to_string(),
        r#"{"line":"entry","seq":6,"agent":"a0","kind":"cancel_probe","present":true,"content":"operator"}"#.to_string(),
        r#"{"line":"entry","seq":7,"agent":"a0","kind":"clock","elapsedMs":60000,"remainingMs":540000}"#.to_string(),
    ];
    let kinds: Vec<&str> = lines
        .iter()
        .map(|l| match round_trip(l) {
            JournalLine::Entry(e) => e.input.kind(),
            other => panic!("not an entry: {other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "model_io",
            "model_error",
            "tool_result",
            "prompt_frame",
            "shell",
            "git",
            "cancel_probe",
            "clock"
        ]
    );
}

#[test]
fn the_terminator_names_its_stop_reason_only_when_there_is_one() {
    round_trip(r#"{"line":"end","entries":12}"#);
    for reason in ["byte_ceiling", "queue_full", "write_failed"] {
        match round_trip(&format!(
            r#"{{"line":"end","entries":3,"stopReason":"{reason}"}}"#
        )) {
            JournalLine::End(end) => assert_eq!(end.stop_reason.unwrap().as_str(), reason),
            other => panic!("not an end: {other:?}"),
        }
    }
}

#[test]
fn the_recorder_build_is_written_as_the_seeds_gg_version_and_the_old_name_still_reads() {
    // The recorder's build is written under the seed's field, `recorder.ggVersion` (DESIGN
    // keeps the seed's `recorder.*` names); the later `recorder.version` still reads.
    let build = RecorderBuild {
        version: "1.2.3".to_owned(),
        commit: None,
    };
    assert_eq!(
        serde_json::to_string(&build).unwrap(),
        r#"{"ggVersion":"1.2.3","commit":null}"#
    );
    let old: RecorderBuild = serde_json::from_str(r#"{"version":"0.1.0"}"#).unwrap();
    assert_eq!(old.version, "0.1.0");
    let new: RecorderBuild = serde_json::from_str(r#"{"ggVersion":"0.2.0"}"#).unwrap();
    assert_eq!(new.version, "0.2.0");
}
