//! `cuca proxy --mode replay` with sixteen concurrent callers of a session holding one 50 MiB
//! turn keeps its peak resident memory under a ceiling derived from the session's size.
//!
//! A replayed request does not load its whole session: a 50 MB turn served to 16 callers
//! once cost 1.04 GB, and now stays under a bound that does not grow with the callers. The proxy is the real binary; its peak resident set (`VmHWM`) is read from
//! `/proc` after every caller has read its whole answer.
// Helpers outside `#[test]` functions unwrap too: a failure there is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Barrier};

use common::{serving, status_kib};

use cuca::{FileBackend, Message, SessionBackend, SessionEvent, SessionRecord};

/// One streamed block of the turn: 1 MiB.
const BLOCK_BYTES: usize = 1024 * 1024;
/// Blocks in the turn: 50 MiB in all.
const N_BLOCKS: usize = 50;
/// Concurrent callers, as many as the measurement that once cost 1.04 GB had.
const N_CALLERS: usize = 16;
/// The ceiling for the proxy's peak resident memory: the one shared copy of the session (the
/// trajectory, 50 MiB) and the reading of it (a frame and its decoded record, a few MiB), plus
/// what each caller's stream holds (one event of at most 64 KiB of text, and the socket's
/// buffers) and the process itself. Twice the session leaves room for the allocator's slack;
/// sixteen loads, as before, are sixteen copies.
const RSS_CEILING_KIB: u64 = (2 * (N_BLOCKS * BLOCK_BYTES) as u64 + 48 * 1024 * 1024) / 1024;

fn write_session(dir: &Path) {
    let backend = FileBackend::new(dir).unwrap();
    let block = "x".repeat(BLOCK_BYTES);
    let mut events = vec![SessionEvent::Message(Message::user("BIG: say it all"))];
    events.extend((0..N_BLOCKS).map(|_| SessionEvent::Output {
        text: block.clone(),
    }));
    events.push(SessionEvent::Latency { duration_ms: 9 });
    events.push(SessionEvent::TokenUsage {
        prompt_tokens: 4,
        completion_tokens: N_BLOCKS as u64,
    });
    for (sequence, event) in events.into_iter().enumerate() {
        backend
            .append(SessionRecord {
                session_id: "big".into(),
                sequence: sequence as u64,
                timestamp_ms: 1_700_000_000_000,
                event,
            })
            .unwrap();
    }
}

/// One streamed replay of the turn, read whole or up to `limit` bytes (then hung up on);
/// returns the status line and the bytes read.
fn call(address: &str, limit: Option<u64>) -> (String, usize) {
    let body = r#"{"model":"tiny","stream":true,"messages":[{"role":"user","content":"BIG: say it all"}]}"#;
    let mut stream = TcpStream::connect(address).unwrap();
    write!(
        stream,
        "POST /s/big/v1/chat/completions HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    let mut sink = Vec::new();
    let n = match limit {
        Some(limit) => reader.take(limit).read_to_end(&mut sink).unwrap(),
        None => reader.read_to_end(&mut sink).unwrap(),
    };
    (status, n)
}

#[test]
fn sixteen_concurrent_replays_of_a_50_mib_turn_share_one_load() {
    let dir = tempfile::tempdir().unwrap();
    write_session(dir.path());
    let (child, address, lines) = serving(
        &[
            "proxy".as_ref(),
            "--mode".as_ref(),
            "replay".as_ref(),
            "--listen".as_ref(),
            "127.0.0.1:0".as_ref(),
            "--dir".as_ref(),
            dir.path().as_os_str(),
        ],
        "listening on http://",
    );
    let pid = child.0.id();
    let start = Arc::new(Barrier::new(N_CALLERS));
    // All sixteen ask at once, so all sixteen need the session at once. One reads its whole
    // answer; the others read the first blocks and hang up, which keeps the test short (each
    // answer is 50 MiB of JSON written by a debug build) and the sixteen loads, or the one
    // shared load, are what the peak measures.
    let callers: Vec<_> = (0..N_CALLERS)
        .map(|n| {
            let address = address.clone();
            let start = Arc::clone(&start);
            let limit = (n > 0).then_some(4 * BLOCK_BYTES as u64);
            std::thread::spawn(move || {
                start.wait();
                (limit, call(&address, limit))
            })
        })
        .collect();
    for caller in callers {
        let (limit, (status, n)) = caller.join().unwrap();
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        match limit {
            // The whole turn, and the stream's end.
            None => assert!(n > N_BLOCKS * BLOCK_BYTES, "{n} bytes"),
            Some(limit) => assert_eq!(n as u64, limit),
        }
    }
    let peak_kib = status_kib(pid, "VmHWM:");
    eprintln!(
        "cuca proxy --mode replay, {N_CALLERS} callers of a {} MiB turn: peak RSS {peak_kib} KiB \
         (ceiling {RSS_CEILING_KIB} KiB)",
        (N_BLOCKS * BLOCK_BYTES) >> 20
    );
    assert!(
        peak_kib < RSS_CEILING_KIB,
        "peak RSS {peak_kib} KiB is over the {RSS_CEILING_KIB} KiB ceiling"
    );
    drop((lines, child));
}
