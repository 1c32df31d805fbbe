//! Unit tests of the bounded line reader, the line parser and the walk's bookkeeping.

use super::*;

#[test]
fn bounded_reader_splits_lines_and_flags_a_torn_tail() {
    let lines = lines_of(b"ab\n\ncdefghijk\nxyz", 64);
    let reads: Vec<_> = lines.iter().map(|(r, b)| (*r, b.as_slice())).collect();
    assert_eq!(
        reads,
        vec![
            (LineRead::Line, &b"ab"[..]),
            (LineRead::Line, &b""[..]),
            (LineRead::Line, &b"cdefghijk"[..]),
            (LineRead::Torn, &b"xyz"[..]),
        ]
    );
}

#[test]
fn bounded_reader_ends_cleanly_on_a_line_boundary() {
    let lines = lines_of(b"one\ntwo\n", 64);
    assert_eq!(lines.last().map(|(r, _)| *r), Some(LineRead::Eof));
    assert_eq!(lines.len(), 3);
}

#[test]
fn a_line_over_the_maximum_is_damage_not_an_allocation() {
    // "A frame longer than a documented maximum is damage, not an allocation."
    let mut journal = b"short\n".to_vec();
    journal.extend(std::iter::repeat_n(b'x', 10_000));
    journal.push(b'\n');
    let lines = lines_of(&journal, 100);
    assert_eq!(lines[0], (LineRead::Line, b"short".to_vec()));
    assert_eq!(lines[1].0, LineRead::TooLong);
    assert!(
        lines[1].1.len() <= 100,
        "buffer grew to {}",
        lines[1].1.len()
    );
    // Exactly at the maximum is still a line.
    let lines = lines_of(b"0123456789\n", 10);
    assert_eq!(lines[0], (LineRead::Line, b"0123456789".to_vec()));
}

#[test]
fn parse_line_agrees_with_the_derived_parser() {
    let examples = [
        r#"{"line":"header","formatVersion":1,"sessionId":"demo","routingKey":null,"capabilities":{},"recorder":{"ggVersion":"0.1.0","commit":null}}"#,
        r#"{"line":"seed","baselineCommit":null,"buildPrompt":"summarise README","slots":[{"slot":"main","model":"qwen3","contextWindow":32768,"modalities":["text"]}]}"#,
        r#"{"line":"agent","id":"root","profileId":"default","profileName":"default","origin":{"kind":"root"},"status":"started","ceiling":null}"#,
        r#"{"line":"text","index":0,"id":"00112233445566778899aabbccddeeff","text":"{\"path\":\"README.md\"}"}"#,
        r#"{"line":"message","index":1,"id":"00112233445566778899aabbccddeeff","body":{"role":"assistant","content":[{"type":"tool_call","id":"c1","name":"read_file","arguments":0}]}}"#,
        r#"{"line":"toolset","index":0,"id":"00112233445566778899aabbccddeeff","tools":[{"name":"shell","description":"run","parameters":{"type":"object"}}]}"#,
        r#"{"line":"clip","pool":"text","index":2,"originalBytes":300000,"originalId":"00112233445566778899aabbccddeeff"}"#,
        r#"{"line":"entry","seq":1,"agent":"root","kind":"tool_result","callId":"c1","name":"read_file","arguments":0,"output":1,"isError":false}"#,
        r#"{"line":"entry","seq":7,"agent":"a0","kind":"clock","elapsedMs":60000,"remainingMs":540000}"#,
        r#"{"line":"end","entries":3,"stopReason":"byte_ceiling"}"#,
    ];
    for example in examples {
        let ours = parse_line(example.as_bytes()).unwrap();
        let derived: JournalLine = serde_json::from_str(example).unwrap();
        assert_eq!(ours, derived, "{example}");
    }
    for bad in [
        r#"{"line":"bogus","x":1}"#,
        r#"{"line":"entry","seq":0,"agent":"a","kind":"teleport"}"#,
        r#"{"line":"end"}"#,
        r#"{"line":"clock","entries":1} trailing"#,
        "",
        "{\"line\":\"end\",\"entries\":1",
    ] {
        assert!(parse_line(bad.as_bytes()).is_err(), "{bad}");
        assert!(serde_json::from_str::<JournalLine>(bad).is_err(), "{bad}");
    }
}

fn walk_with_end(n_entries: u64, end: Option<End>, damage: Option<Damage>) -> Walk {
    Walk {
        journal: PathBuf::from("j"),
        header: Header {
            format_version: 1,
            session_id: "s".into(),
            routing_key: None,
            capabilities: serde_json::Value::Null,
            recorder: crate::format::RecorderBuild {
                version: "0".into(),
                commit: None,
            },
        },
        seed: None,
        agents: Vec::new(),
        agent_index: HashMap::new(),
        n_lines: 1,
        n_messages: 0,
        n_toolsets: 0,
        n_texts: 0,
        n_clips: 0,
        n_entries,
        last_seq: n_entries.checked_sub(1),
        entries_by_kind: BTreeMap::new(),
        end: end.map(|end| (9, end)),
        damage,
    }
}

#[test]
fn structure_outranks_the_recorders_self_report() {
    // "A recorder that stopped deliberately still wrote a correct journal, so its reported
    // reason stands unless the walk found damage or the entry count disagrees."
    let ceiling = End {
        entries: 3,
        stop_reason: Some(StopReason::ByteCeiling),
    };
    assert_eq!(
        walk_with_end(3, Some(ceiling), None).outcome(),
        Outcome::ByteCeiling
    );
    assert_eq!(
        walk_with_end(2, Some(ceiling), None).outcome().kind(),
        "corrupt_journal"
    );
    let damage = Damage {
        line: 4,
        reason: "torn".into(),
    };
    assert_eq!(
        walk_with_end(3, Some(ceiling), Some(damage)).outcome(),
        Outcome::CorruptJournal {
            last_complete_seq: Some(2),
            line: 4,
            reason: "torn".into()
        }
    );
    let queue_full = End {
        entries: 1,
        stop_reason: Some(StopReason::QueueFull),
    };
    assert_eq!(
        walk_with_end(1, Some(queue_full), None).outcome(),
        Outcome::WriteFailed {
            stop_reason: StopReason::QueueFull
        }
    );
    assert_eq!(
        walk_with_end(5, None, None).outcome(),
        Outcome::SessionKilled
    );
}

fn row(id: &str, status: AgentStatus) -> AgentRow {
    AgentRow {
        id: id.into(),
        profile_id: "p".into(),
        profile_name: "coder".into(),
        origin: crate::format::AgentOrigin::Root,
        status,
        ceiling: None,
    }
}

#[test]
fn agents_upsert_by_id_terminal_row_wins_creation_order_kept() {
    // "Assembly upserts by agent id, so the terminal row supersedes the opening one."
    let mut walk = walk_with_end(0, None, None);
    walk.upsert_agent(row("a0", AgentStatus::Started));
    walk.upsert_agent(row("a1", AgentStatus::Started));
    walk.upsert_agent(row("a1", AgentStatus::Completed));
    walk.upsert_agent(row("a2", AgentStatus::Started));
    walk.upsert_agent(row("a0", AgentStatus::Failed));
    // An opening row arriving after a terminal one does not undo it.
    walk.upsert_agent(row("a1", AgentStatus::Started));
    let table: Vec<_> = walk
        .agents
        .iter()
        .map(|r| (r.id.as_str(), r.status))
        .collect();
    assert_eq!(
        table,
        vec![
            ("a0", AgentStatus::Failed),
            ("a1", AgentStatus::Completed),
            ("a2", AgentStatus::Started),
        ]
    );
}

#[test]
fn outcome_serializes_with_the_seed_words() {
    let json = serde_json::to_value(Outcome::CorruptJournal {
        last_complete_seq: Some(41),
        line: 97,
        reason: "torn".into(),
    })
    .unwrap();
    assert_eq!(
        json,
        serde_json::json!({"kind":"corrupt_journal","lastCompleteSeq":41,"line":97,"reason":"torn"})
    );
    let json = serde_json::to_value(Outcome::WriteFailed {
        stop_reason: StopReason::WriteFailed,
    })
    .unwrap();
    assert_eq!(
        json,
        serde_json::json!({"kind":"write_failed","stopReason":"write_failed"})
    );
    assert_eq!(
        serde_json::to_value(Outcome::SessionKilled).unwrap(),
        serde_json::json!({"kind":"session_killed"})
    );
}

#[test]
fn entries_parse_and_write_as_the_derived_code_does() {
    let lines = [
        r#"{"line":"entry","seq":0,"agent":"a0","kind":"model_io","request":{"model":"qwen3","messages":[0,1],"toolset":0,"toolChoice":{"named":"shell"},"maxTokens":4096,"temperature":0.5,"reasoningEffort":"high","role":"agent_turn","shape":"tool_required"},"response":{"model":"qwen3","provider":"llamacpp","message":2,"finishReason":"tool_calls","promptTokens":10,"completionTokens":5,"reasoningTokens":null,"cost":0.25,"cachedTokens":null},"latencyMs":812}"#,
        r#"{"line":"entry","seq":1,"agent":"a\"0","kind":"model_error","request":{"model":"","messages":[],"toolset":null,"role":"compaction_summarizer","shape":"free"},"class":"unsupported_image","status":400,"detail":"no"}"#,
        r#"{"line":"entry","seq":3,"agent":"a0","kind":"prompt_frame","turn":4,"items":[{"message":0,"retention":"verbatim","region":null,"turn":0,"slot":"system"},{"message":3,"retention":"compactable","region":{"offset":0,"limit":200},"turn":4,"slot":"conversation"}]}"#,
        r#"{"line":"entry","seq":4,"agent":"a0","kind":"shell","origin":"hook","command":"cargo fmt","cwd":"crates/x","exitStatus":null,"stdout":4,"stderr":5}"#,
        r#"{"line":"entry","seq":5,"agent":"a0","kind":"git","args":["status"],"cwd":".","exitStatus":0,"stdout":4,"stderr":5}"#,
        r#"{"line":"entry","seq":6,"agent":"a0","kind":"cancel_probe","present":true,"content":"operator"}"#,
        r#"{"agent":"a0","kind":"clock","line":"entry","seq":7,"elapsedMs":60000}"#,
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut segment = Segment::create(dir.path().join("entries.json")).unwrap();
    for line in lines {
        let ours = parse_line(line.as_bytes()).unwrap();
        let derived: JournalLine = serde_json::from_str(line).unwrap();
        assert_eq!(ours, derived, "{line}");
        let JournalLine::Entry(entry) = ours else {
            panic!("{line}")
        };
        segment.push_entry(&entry).unwrap();
    }
    let mut out = Vec::new();
    segment.copy_into(&mut out).unwrap();
    out.insert(0, b'[');
    out.push(b']');
    let written: Vec<Entry> = serde_json::from_slice(&out).unwrap();
    let expected: Vec<Entry> = lines
        .iter()
        .map(|l| match serde_json::from_str::<JournalLine>(l).unwrap() {
            JournalLine::Entry(entry) => entry,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(written, expected);
    // Byte for byte what the derived serializer writes.
    let derived = serde_json::to_vec(&expected).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        String::from_utf8(derived).unwrap()
    );
    // A wrong-typed field is still a parse failure.
    assert!(
        parse_line(br#"{"line":"entry","seq":0,"agent":"a","kind":"clock","elapsedMs":"x"}"#)
            .is_err()
    );
    assert!(
        parse_line(br#"{"line":"entry","seq":-1,"agent":"a","kind":"clock","elapsedMs":1}"#)
            .is_err()
    );
}

#[test]
fn a_refused_assembly_leaves_no_run_directory_it_created() {
    // A failed `journal assemble` leaves no empty run directory behind.
    let tree = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tree.path().join(".cuca")).unwrap();
    std::fs::write(
        tree.path().join(".cuca/replay.ndjson"),
        b"{\"line\":\"header\",\"formatVersion\":2}\n",
    )
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let run_dir = out.path().join("run-1");
    assert!(assemble(tree.path(), &run_dir).is_err());
    assert!(!run_dir.exists());
    // The refused journal stays where it is.
    assert!(tree.path().join(".cuca/replay.ndjson").exists());
}
