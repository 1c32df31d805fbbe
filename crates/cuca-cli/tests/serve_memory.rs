//! `cuca serve` under 200 slow clients of a 64 MiB record stays under 64 MiB of resident memory.
//!
//! A 64 MiB record served to 200 slow clients keeps `cuca serve` under 64 MiB of resident
//! memory. The server process is the real binary; its peak resident set (`VmHWM`) is read
//! from `/proc` after every slow client has been through it.
// Helpers outside `#[test]` functions unwrap too: a failure there is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The record's size on disk.
const RECORD_BYTES: usize = 64 * 1024 * 1024;
/// The ceiling on the server's resident memory: the record's own size, so no client's read
/// can hold the record whole.
const RSS_CEILING_KIB: u64 = 64 * 1024;

struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A valid gzip record of `RECORD_BYTES` that does not compress (stored blocks of noise), so
/// the file on disk is the full 64 MiB and a decoding client gets real JSON-sized output.
fn write_record(path: &std::path::Path) {
    let file = std::fs::File::create(path).unwrap();
    let mut gz =
        flate2::write::GzEncoder::new(std::io::BufWriter::new(file), flate2::Compression::none());
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut block = vec![0_u8; 1 << 20];
    for _ in 0..RECORD_BYTES >> 20 {
        for chunk in block.chunks_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
        }
        gz.write_all(&block).unwrap();
    }
    gz.finish().unwrap().flush().unwrap();
}

#[test]
fn two_hundred_slow_clients_of_a_64_mib_record_keep_the_server_under_64_mib() {
    let runs = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(runs.path().join("big")).unwrap();
    write_record(&runs.path().join("big/replay.json.gz"));
    assert!(
        std::fs::metadata(runs.path().join("big/replay.json.gz"))
            .unwrap()
            .len()
            >= RECORD_BYTES as u64
    );
    std::fs::create_dir_all(runs.path().join("small")).unwrap();
    std::fs::write(runs.path().join("small/replay.json.gz"), b"small").unwrap();

    let mut child = Child(
        std::process::Command::new(assert_cmd::cargo::cargo_bin("cuca"))
            .args(["serve", "--runs"])
            .arg(runs.path())
            .args([
                "--listen",
                "127.0.0.1:0",
                "--header-timeout",
                "1s",
                "--idle-timeout",
                "1s",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id();
    let mut lines = BufReader::new(child.0.stdout.take().unwrap());
    let mut first = String::new();
    lines.read_line(&mut first).unwrap();
    let address = first
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();
    let started_kib = common::status_kib(pid, "VmRSS:");

    // 200 slow clients, none of which ever reads: 100 take the record verbatim, 50 decoded,
    // and 50 never finish their request's head.
    let started = Instant::now();
    let mut clients = Vec::new();
    for n in 0..200 {
        let mut stream = TcpStream::connect(&address).unwrap();
        let request: &[u8] = match n % 4 {
            0 | 1 => b"GET /runs/big/replay HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n",
            2 => b"GET /runs/big/replay HTTP/1.1\r\nHost: t\r\n\r\n",
            _ => b"GET /runs/big/replay HTTP/1.1\r\nHost: t\r\nX-Slow: ",
        };
        stream.write_all(request).unwrap();
        clients.push(stream);
    }
    // A probe behind all of them: answered only once the server has taken every slow client
    // in (connections are accepted in order) and closed enough of them to make room.
    let mut probe = TcpStream::connect(&address).unwrap();
    probe
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    probe
        .write_all(
            b"GET /runs/small/replay HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
    let mut answer = Vec::new();
    probe.read_to_end(&mut answer).unwrap();
    let elapsed = started.elapsed();
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{answer:?}");
    assert!(answer.ends_with(b"small"));

    let peak_kib = common::status_kib(pid, "VmHWM:");
    let now_kib = common::status_kib(pid, "VmRSS:");
    eprintln!(
        "cuca serve, 200 slow clients of a 64 MiB record: RSS {started_kib} KiB at start, \
         peak {peak_kib} KiB, {now_kib} KiB after; probe answered after {elapsed:?}"
    );
    assert!(
        peak_kib < RSS_CEILING_KIB,
        "peak RSS {peak_kib} KiB is over the {RSS_CEILING_KIB} KiB ceiling"
    );
    drop(clients);
    drop(lines);
}
