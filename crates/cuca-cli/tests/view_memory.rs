//! `cuca view` over a 300 MiB session: a page of its one long turn, and eight concurrent lists,
//! each keep the viewer's peak resident memory under a ceiling derived from one record.
//!
//! The viewer's list does not hold whole sessions to verify them (8 lists with a 326 MB
//! session once cost 2.8 GB), and a page of 20 turns costs memory bounded however long a turn
//! is (a 622 MB turn once cost 2.26 GB). The server is the real binary; its peak resident set (`VmHWM`) is read
//! from `/proc` after the requests are answered.
// Helpers outside `#[test]` functions unwrap too: a failure there is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;

use common::{serving, status_kib, Killed};

use cuca::{FileBackend, SessionBackend, SessionEvent, SessionRecord};

/// One record's text: 30 MiB, under the 32 MiB frame limit.
const RECORD_BYTES: usize = 30 * 1024 * 1024;
/// Records in the session: 300 MiB in all, one turn (no Latency + TokenUsage pair closes it).
const N_RECORDS: u64 = 10;
/// The ceiling for the viewer's peak resident memory. Streaming, the viewer holds one record
/// at a time: its frame as read (up to twice the frame while the read buffer grows) and the
/// record decoded from it, about three records, plus the process itself (a few MiB) and the
/// allocator's slack. Holding the session, as before, is ten records for one request and
/// eighty for eight.
const RSS_CEILING_KIB: u64 = (4 * RECORD_BYTES as u64 + 48 * 1024 * 1024) / 1024;

fn write_session(dir: &Path) {
    let backend = FileBackend::new(dir).unwrap();
    let text = "x".repeat(RECORD_BYTES);
    for sequence in 0..N_RECORDS {
        backend
            .append(SessionRecord {
                session_id: "big".into(),
                sequence,
                timestamp_ms: 1_700_000_000_000 + sequence,
                event: SessionEvent::Output { text: text.clone() },
            })
            .unwrap();
    }
}

/// `cuca view DIR` on a free loopback port: the child and its address.
fn view(dir: &Path) -> (Killed, String) {
    let (child, address, _) = serving(
        &[
            "view".as_ref(),
            dir.as_os_str(),
            "--listen".as_ref(),
            "127.0.0.1:0".as_ref(),
        ],
        "cuca view: http://",
    );
    (child, address)
}

fn http_get(address: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    String::from_utf8(response).unwrap()
}

fn check_peak(what: &str, pid: u32) {
    let peak_kib = status_kib(pid, "VmHWM:");
    eprintln!("cuca view, {what}: peak RSS {peak_kib} KiB (ceiling {RSS_CEILING_KIB} KiB)");
    assert!(
        peak_kib < RSS_CEILING_KIB,
        "{what}: peak RSS {peak_kib} KiB is over the {RSS_CEILING_KIB} KiB ceiling"
    );
}

#[test]
fn a_page_of_a_300_mib_turn_and_eight_concurrent_lists_keep_the_viewer_bounded() {
    let dir = tempfile::tempdir().unwrap();
    write_session(dir.path());
    let on_disk = std::fs::metadata(dir.path().join("big.cslog"))
        .unwrap()
        .len();
    assert!(on_disk >= N_RECORDS * RECORD_BYTES as u64, "{on_disk}");

    // The page: one turn of ten 30 MiB records, clipped as it is read.
    let (child, address) = view(dir.path());
    let page = http_get(&address, "/sessions/big");
    assert!(page.starts_with("HTTP/1.1 200"), "{}", &page[..200]);
    assert!(
        page.contains("more bytes not shown"),
        "the page says what it cut"
    );
    assert!(page.len() < 4 * 1024 * 1024, "page of {} bytes", page.len());
    check_peak("a page of one 300 MiB turn", child.0.id());
    drop(child);

    // Eight lists at once: each verifies the session streaming, one at a time.
    let (child, address) = view(dir.path());
    let lists: Vec<_> = (0..8)
        .map(|_| {
            let address = address.clone();
            std::thread::spawn(move || http_get(&address, "/"))
        })
        .collect();
    for list in lists {
        let list = list.join().unwrap();
        assert!(list.starts_with("HTTP/1.1 200"), "{list}");
        assert!(list.contains(">big<"), "{list}");
        assert!(list.contains("status-clean"), "{list}");
    }
    check_peak("eight concurrent lists of a 300 MiB session", child.0.id());
}
