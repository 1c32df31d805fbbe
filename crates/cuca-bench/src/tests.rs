//! Unit tests: the peers store and return exactly what they were given.

use super::*;

#[test]
fn text_is_exactly_the_asked_length_and_needs_no_escaping() {
    for len in SIZES {
        let t = text(len);
        assert_eq!(t.len(), len);
        assert!(t.bytes().all(|b| b.is_ascii_lowercase() || b == b' '));
    }
}

#[test]
fn turn_session_has_the_seed_turn_shape() {
    // The seed's demo turn: SystemPrompt, Message, Reasoning…, Output, Latency, TokenUsage.
    let records = turn_session("demo", 2 * 78 + 3, 200);
    assert_eq!(records.len(), 159);
    assert!(matches!(
        records[0].event,
        SessionEvent::SystemPrompt { .. }
    ));
    assert!(matches!(records[76].event, SessionEvent::Latency { .. }));
    assert!(matches!(records[77].event, SessionEvent::TokenUsage { .. }));
    assert!(matches!(
        records[78].event,
        SessionEvent::SystemPrompt { .. }
    ));
    let sequences: Vec<u64> = records.iter().map(|r| r.sequence).collect();
    assert_eq!(sequences, (0..159).collect::<Vec<_>>());
}

#[test]
fn jsonl_peer_round_trips_one_line_per_record() {
    let dir = tempfile::tempdir().unwrap();
    let records = turn_session("s", 90, 32);
    let mut peer = JsonlPeer::open(dir.path().join("s.jsonl")).unwrap();
    for record in &records {
        peer.append(record).unwrap();
    }
    let bytes = std::fs::read(peer.path()).unwrap();
    assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 90);
    assert_eq!(JsonlPeer::decode(peer.path()).unwrap(), records);
}

#[test]
fn jsonl_peer_names_the_line_it_cannot_decode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    let good = serde_json::to_string(&reasoning_record("s", 0, 8)).unwrap();
    std::fs::write(&path, format!("{good}\nnot json\n")).unwrap();
    match JsonlPeer::decode(&path) {
        Err(BenchError::Json { line, .. }) => assert_eq!(line, 2),
        other => panic!("expected a json error on line 2, got {other:?}"),
    }
}

#[test]
fn sqlite_peer_is_wal_normal_and_keeps_sessions_apart() {
    let dir = tempfile::tempdir().unwrap();
    let mut peer = SqlitePeer::open(dir.path().join("db.sqlite")).unwrap();
    let a = turn_session("a", 10, 200);
    let b = turn_session("b", 5, 32);
    for record in a.iter().chain(&b) {
        peer.append(record).unwrap();
    }
    assert_eq!(peer.replay("a").unwrap(), a);
    assert_eq!(peer.replay("b").unwrap(), b);
    assert!(peer.replay("c").unwrap().is_empty());
    let mode: String = peer
        .connection
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    // 1 is NORMAL.
    let sync: i64 = peer
        .connection
        .query_row("PRAGMA synchronous", [], |row| row.get(0))
        .unwrap();
    assert_eq!(sync, 1);
    assert!(peer.bytes_on_disk().unwrap() > 15 * 32);
}

#[test]
fn results_land_under_the_target_dir() {
    let dir = results_dir();
    assert!(dir.ends_with("cuca-bench"));
    assert!(dir
        .parent()
        .is_some_and(|p| p.ends_with("target") || std::env::var_os("CARGO_TARGET_DIR").is_some()));
}

#[test]
fn prose_is_exactly_the_length_asked_and_does_not_repeat_within_a_window() {
    for len in [1, 32, 200, 1024] {
        for offset in [0, 7, crate::PROSE.len() - 3, 5 * crate::PROSE.len() + 11] {
            assert_eq!(
                crate::prose(offset, len).len(),
                len,
                "offset {offset}, len {len}"
            );
        }
    }
    let session = crate::prose_session("bench", 200, 200);
    let texts: Vec<String> = session
        .iter()
        .filter_map(|record| match &record.event {
            cuca_events::SessionEvent::Reasoning { text } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert!(texts.len() > 100);
    let distinct: std::collections::HashSet<&String> = texts.iter().collect();
    assert_eq!(distinct.len(), texts.len(), "passages repeat");
    assert!(texts.iter().all(|text| text.len() == 200));
}

// The client benches stream the byte-exact llama-server transcripts with one HTTP chunk per
// event; the 16 KiB case stays as a context row.

#[test]
fn the_fixture_has_a_role_chunk_twelve_content_chunks_and_a_tail() {
    let events = llama::events(llama::STREAM_BASIC);
    assert_eq!(events.len(), 16);
    assert_eq!(events.concat(), llama::STREAM_BASIC);
    let content: Vec<bool> = events.iter().map(|e| llama::is_content_event(e)).collect();
    assert!(!content[0] && content[1..13].iter().all(|&c| c) && !content[13]);
    assert_eq!(events[15], b"data: [DONE]\n\n");
}

#[test]
fn a_long_stream_repeats_the_fixtures_own_content_events_byte_exact() {
    let fixture = llama::events(llama::STREAM_BASIC);
    let body = llama::long_stream(30);
    let events = llama::events(&body);
    assert_eq!(events.len(), 1 + 30 + 3);
    assert_eq!(events[0], fixture[0]);
    for (i, event) in events[1..31].iter().enumerate() {
        assert_eq!(*event, fixture[1 + i % 12], "content event {i}");
    }
    assert_eq!(&events[31..], &fixture[13..]);
    // The fixture as is: the long stream of its own length is the fixture.
    assert_eq!(llama::long_stream(12), llama::STREAM_BASIC);
}

/// The chunk payloads of a chunked HTTP/1.1 response, in order, after its head.
fn dechunk(response: &[u8]) -> Vec<&[u8]> {
    let head_end = memchr::memmem::find(response, b"\r\n\r\n").unwrap() + 4;
    let mut rest = &response[head_end..];
    let mut chunks = Vec::new();
    loop {
        let line_end = memchr::memmem::find(rest, b"\r\n").unwrap();
        let size =
            usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).unwrap(), 16).unwrap();
        rest = &rest[line_end + 2..];
        if size == 0 {
            assert_eq!(rest, b"\r\n");
            return chunks;
        }
        chunks.push(&rest[..size]);
        assert_eq!(&rest[size..size + 2], b"\r\n");
        rest = &rest[size + 2..];
    }
}

#[test]
fn real_framing_sends_one_http_chunk_per_event_and_coalesced_framing_16_kib() {
    let body = llama::long_stream(1_000);
    let per_event = llama::chunked_response(&body, llama::Framing::PerEvent);
    assert!(per_event.starts_with(b"HTTP/1.1 200 OK\r\n"));
    let head = String::from_utf8_lossy(&per_event[..200]).to_lowercase();
    assert!(head.contains("transfer-encoding: chunked\r\n"));
    assert!(head.contains("connection: close\r\n"));
    let chunks = dechunk(&per_event);
    assert_eq!(chunks, llama::events(&body));
    assert_eq!(chunks.len(), 1_004);

    let coalesced = llama::chunked_response(&body, llama::Framing::Coalesced(16 * 1024));
    let chunks = dechunk(&coalesced);
    assert_eq!(chunks.concat(), body);
    assert_eq!(chunks.len(), body.len().div_ceil(16 * 1024));
    assert!(chunks[..chunks.len() - 1]
        .iter()
        .all(|c| c.len() == 16 * 1024));
}

#[test]
fn the_minimal_reader_yields_every_content_text_whatever_the_pieces() {
    let body = llama::long_stream(100);
    for piece in [1, 7, 230, 16 * 1024] {
        let mut reader = llama::MinimalReader::default();
        for bytes in body.chunks(piece) {
            reader.feed(bytes).unwrap();
        }
        assert_eq!(reader.texts.len(), 100, "pieces of {piece} B");
        assert_eq!(reader.texts[0], "phas");
        assert_eq!(reader.texts[11], "ancy");
        assert_eq!(reader.texts[12], "phas");
    }
    let mut reader = llama::MinimalReader::default();
    assert!(reader.feed(b"data: {not json\n\n").is_err());
}
