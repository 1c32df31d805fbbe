//! `cuca proxy` through the real binary: it prints where it listens and answers in OpenAI's
//! shape; the proxy's behaviour itself is tested in `crates/cuca-proxy`.
// The helpers outside `#[test]` functions unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;

/// Kills the proxy when the test ends, whichever way it ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http(address: &str, request: &str) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

#[test]
fn proxy_in_replay_mode_listens_on_loopback_and_answers_in_openai_shape() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Child(
        std::process::Command::new(assert_cmd::cargo::cargo_bin("cuca"))
            .args([
                "proxy",
                "--mode",
                "replay",
                "--listen",
                "127.0.0.1:0",
                "--dir",
            ])
            .arg(dir.path())
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
        .strip_prefix("listening on http://127.0.0.1:")
        .map(|port| format!("127.0.0.1:{port}"))
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
    let mut second = String::new();
    lines.read_line(&mut second).unwrap();
    assert!(second.starts_with("mode replay, sessions in "), "{second}");

    let models = http(
        &address,
        &format!("GET /v1/models HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"),
    );
    assert!(models.starts_with("HTTP/1.1 200"), "{models}");
    assert!(models.contains("\"cuca-replay\""), "{models}");

    let body = r#"{"model":"tiny","messages":[{"role":"user","content":"hi"}]}"#;
    let answer = http(
        &address,
        &format!(
            "POST /s/nobody/v1/chat/completions HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    );
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("x-cuca-session: nobody"),
        "{answer}"
    );
    assert!(
        answer.contains("\"code\":\"cuca_session_not_found\""),
        "{answer}"
    );
    drop(lines);
}

#[test]
fn proxy_refuses_record_mode_without_an_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(assert_cmd::cargo::cargo_bin("cuca"))
        .args(["proxy", "--mode", "record", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("needs an upstream url"), "{stderr}");
}

/// `cuca proxy --ignore REGEX` takes a regular expression, and one that is not is
/// refused at start by name; `--mode fork` is a mode, and forwards, so it needs an upstream.
#[test]
fn proxy_refuses_a_bad_ignore_pattern_and_a_fork_mode_without_an_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(assert_cmd::cargo::cargo_bin("cuca"))
        .args([
            "proxy",
            "--mode",
            "replay",
            "--ignore",
            "Wall time: (",
            "--dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("\"Wall time: (\" is not a regular expression"),
        "{stderr}"
    );
    let output = std::process::Command::new(assert_cmd::cargo::cargo_bin("cuca"))
        .args(["proxy", "--mode", "fork", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("fork mode forwards calls"), "{stderr}");
}
