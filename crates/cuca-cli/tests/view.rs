//! `cuca view` through the real binary: it prints its URL, serves the viewer's pages over the
//! given directories, and refuses bad arguments as usage errors.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns: a failed step is a failed test

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;

/// Kills the server when the test ends, whichever way it ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_get(address: &str, path: &str) -> (String, String) {
    let mut stream = TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let response = String::from_utf8(response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.to_owned(), body.to_owned())
}

#[test]
fn view_prints_its_url_and_serves_the_sessions_of_its_directories() {
    let calls = tempfile::NamedTempFile::new().unwrap();
    let mut child = Child(
        std::process::Command::new(assert_cmd::cargo::cargo_bin("cuca"))
            .arg("view")
            .arg(common::fixtures_dir())
            .args(["--listen", "127.0.0.1:0", "--calls"])
            .arg(calls.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(child.0.stdout.take().unwrap());
    let mut first = String::new();
    lines.read_line(&mut first).unwrap();
    let address = first
        .trim()
        .strip_prefix("cuca view: http://")
        .and_then(|rest| rest.strip_suffix('/'))
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();
    assert!(
        address.starts_with("127.0.0.1:"),
        "loopback by default: {address}"
    );

    let (head, body) = http_get(&address, "/");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-security-policy: default-src 'none'"),
        "{head}"
    );
    assert!(
        body.contains(">demo<") && body.contains(">reasoning<"),
        "{body}"
    );
    let (head, body) = http_get(&address, "/sessions/demo");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        body.contains("The vault is in Lisbon. Reply with: noted"),
        "{body}"
    );
    let (head, body) = http_get(&address, "/calls");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(body.contains("No call is in flight."), "{body}");
    drop(lines);
}

#[test]
fn view_refuses_a_missing_directory_and_a_bad_address_as_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let output = common::cuca().arg("view").arg(&missing).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("is not a directory"), "{stderr}");

    let output = common::cuca()
        .arg("view")
        .arg(dir.path())
        .args(["--listen", "notanaddr"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--listen \"notanaddr\" is not an address"),
        "{stderr}"
    );
}

#[test]
fn serve_with_sessions_serves_the_viewer_pages_beside_the_record_route() {
    // The pages of `cuca view DIR…` are also served under `cuca serve`.
    let runs = tempfile::tempdir().unwrap();
    let mut child = Child(
        std::process::Command::new(assert_cmd::cargo::cargo_bin("cuca"))
            .arg("serve")
            .arg("--runs")
            .arg(runs.path())
            .arg("--sessions")
            .arg(common::fixtures_dir())
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(child.0.stdout.take().unwrap());
    let mut first = String::new();
    lines.read_line(&mut first).unwrap();
    let address = first
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();
    let (head, body) = http_get(&address, "/");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(body.contains(">demo<"), "{body}");
    let (head, body) = http_get(&address, "/runs");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(body.contains("No assembled run"), "{body}");
    let (head, _) = http_get(&address, "/runs/run-1/replay");
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    drop(lines);
}
