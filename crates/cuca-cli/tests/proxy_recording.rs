//! The real `cuca proxy` recording long streams.
//!
//! A stream's blocks are not kept until the call ends (1 GiB streamed once cost 778 MB): a
//! 128 MiB streamed answer is recorded while a caller reads it, and the proxy's peak
//! resident set (`VmHWM`) stays under a bound that does not grow with the answer. And
//! a write that fails mid-answer is said on stderr and in the call log.
// Helpers outside `#[test]` functions unwrap too: a failure there is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;

use axum::body::Body;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use common::{serving_with, status_kib, Killed};

/// Content events of 64 KiB each, 2,048 of them: 128 MiB of answer.
const EVENT_CHARS: usize = 64 * 1024;
const N_EVENTS: usize = 2048;
/// The ceiling: the proxy's own working set (a few MiB) plus a few events in flight, far
/// under the answer's 128 MiB.
const RSS_CEILING_KIB: u64 = 48 * 1024;

/// An upstream that streams `n_events` content events of [`EVENT_CHARS`], then finish, usage
/// and `[DONE]`.
fn start_upstream(n_events: usize) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let chat = move || async move {
                let text = "x".repeat(EVENT_CHARS);
                let event = move |n: usize| -> axum::body::Bytes {
                    let body = match n {
                        n if n < n_events => format!(
                            r#"{{"model":"m","choices":[{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":null}}]}}"#
                        ),
                        n if n == n_events => r#"{"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#.to_owned(),
                        n if n == n_events + 1 => r#"{"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2048}}"#.to_owned(),
                        _ => "[DONE]".to_owned(),
                    };
                    axum::body::Bytes::from(format!("data: {body}\n\n"))
                };
                let stream = futures::stream::iter(
                    (0..n_events + 3).map(move |n| Ok::<_, std::io::Error>(event(n))),
                );
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from_stream(stream))
                    .unwrap()
            };
            let router = Router::new().route("/v1/chat/completions", post(chat));
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, router).await.unwrap();
        });
    });
    format!("http://{}", rx.recv().unwrap())
}

/// Starts `command` (a `cuca proxy`, or a shell that execs one) with its call log in `dir`,
/// and returns it with the address it listens on.
fn start_proxy(
    mut command: std::process::Command,
    dir: &std::path::Path,
    stderr: Stdio,
) -> (Killed, String) {
    command
        .env_remove("CUCA_CALL_LOG_BODIES")
        .env_remove("RUST_LOG")
        .env("CUCA_CALL_LOG", dir.join("calls.jsonl"))
        .stderr(stderr);
    let (child, address, _stdout) = serving_with(command, "listening on http://");
    (child, address)
}

/// One streamed call on `session`, read to its end and counted, never held; the bytes read.
fn call(address: &str, session: &str) -> usize {
    let body = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"long"}]}"#;
    let mut stream = TcpStream::connect(address).unwrap();
    write!(
        stream,
        "POST /s/{session}/v1/chat/completions HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut total = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = stream.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        total += n;
    }
    total
}

/// A failed recording is said on stderr, which once stayed empty (the proxy only
/// `tracing::warn!`ed and the CLI installed no subscriber). A session file that may not grow past 512 KiB (`ulimit -f`, SIGXFSZ
/// ignored: the write that crosses it is cut short, the next fails) during a 4 MiB answer: the
/// caller gets it all, stderr and the call log say the session does not hold it in full.
#[test]
fn a_write_that_fails_mid_answer_is_said_on_stderr_and_in_the_call_log() {
    let upstream = start_upstream(64);
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("sessions");
    let mut command = std::process::Command::new("sh");
    command
        .arg("-c")
        .arg(r#"trap '' XFSZ; ulimit -f 1024; exec "$0" proxy --listen 127.0.0.1:0 --upstream "$1" --dir "$2""#)
        .arg(assert_cmd::cargo::cargo_bin("cuca"))
        .arg(&upstream)
        .arg(&sessions);
    let (mut child, address) = start_proxy(command, dir.path(), Stdio::piped());
    let total = call(&address, "full");
    assert!(
        total > 64 * EVENT_CHARS,
        "the caller got every byte: {total}"
    );
    let mut err = child.0.stderr.take().unwrap();
    let _ = child.0.kill();
    let _ = child.0.wait();
    let mut stderr = String::new();
    err.read_to_string(&mut stderr).unwrap();
    assert!(
        stderr.contains("could not be recorded") && stderr.contains("not recorded in full"),
        "stderr: {stderr}"
    );
    let log = std::fs::read_to_string(dir.path().join("calls.jsonl")).unwrap();
    let end: serde_json::Value = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .rfind(|row| row.get("phase").is_none())
        .unwrap();
    assert!(
        end["error"]
            .as_str()
            .unwrap()
            .starts_with("the session does not hold this call in full: block "),
        "{end}"
    );
    assert_eq!(end["finish"], "length");
}

#[test]
fn recording_a_128_mib_stream_keeps_the_proxy_under_48_mib() {
    let upstream = start_upstream(N_EVENTS);
    let dir = tempfile::tempdir().unwrap();
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("cuca"));
    command
        .args([
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            &upstream,
            "--dir",
        ])
        .arg(dir.path());
    let (child, address) = start_proxy(command, dir.path(), Stdio::null());
    let pid = child.0.id();
    let total = call(&address, "big");
    assert!(total > N_EVENTS * EVENT_CHARS, "read {total} bytes");
    // The session holds every block: the recording is whole, and it was not kept in memory.
    let session = dir.path().join("big.cslog");
    let mut waited = 0;
    while std::fs::metadata(&session).map_or(0, |m| m.len()) < (N_EVENTS * EVENT_CHARS) as u64
        && waited < 100
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
        waited += 1;
    }
    assert!(std::fs::metadata(&session).unwrap().len() > (N_EVENTS * EVENT_CHARS) as u64);

    let peak_kib = status_kib(pid, "VmHWM:");
    eprintln!(
        "cuca proxy recording a {} MiB stream: peak RSS {peak_kib} KiB",
        (N_EVENTS * EVENT_CHARS) >> 20
    );
    assert!(
        peak_kib < RSS_CEILING_KIB,
        "peak RSS {peak_kib} KiB, over the {RSS_CEILING_KIB} KiB ceiling"
    );
}
