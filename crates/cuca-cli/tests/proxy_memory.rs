//! Issue 28.11: "every block of a stream is kept until the call ends (1 GiB streamed → 778
//! MB)". The real `cuca proxy` records a 128 MiB streamed answer while a caller reads it; its
//! peak resident set (`VmHWM`) stays under a bound that does not grow with the answer.
// Helpers outside `#[test]` functions unwrap too: a failure there is a failed test.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;

use axum::body::Body;
use axum::response::Response;
use axum::routing::post;
use axum::Router;

/// Content events of 64 KiB each, 2,048 of them: 128 MiB of answer.
const EVENT_CHARS: usize = 64 * 1024;
const N_EVENTS: usize = 2048;
/// The ceiling: the proxy's own working set (a few MiB) plus a few events in flight, far
/// under the answer's 128 MiB.
const RSS_CEILING_KIB: u64 = 48 * 1024;

struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    line[field.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap()
}

/// An upstream that streams [`N_EVENTS`] big content events, then finish, usage and `[DONE]`.
fn start_upstream() -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let chat = || async {
                let text = "x".repeat(EVENT_CHARS);
                let event = move |n: usize| -> axum::body::Bytes {
                    let body = match n {
                        n if n < N_EVENTS => format!(
                            r#"{{"model":"m","choices":[{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":null}}]}}"#
                        ),
                        n if n == N_EVENTS => r#"{"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#.to_owned(),
                        n if n == N_EVENTS + 1 => r#"{"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2048}}"#.to_owned(),
                        _ => "[DONE]".to_owned(),
                    };
                    axum::body::Bytes::from(format!("data: {body}\n\n"))
                };
                let stream = futures::stream::iter(
                    (0..N_EVENTS + 3).map(move |n| Ok::<_, std::io::Error>(event(n))),
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

#[test]
fn recording_a_128_mib_stream_keeps_the_proxy_under_48_mib() {
    let upstream = start_upstream();
    let dir = tempfile::tempdir().unwrap();
    let mut child = Child(
        std::process::Command::new(assert_cmd::cargo::cargo_bin("cuca"))
            .args([
                "proxy",
                "--listen",
                "127.0.0.1:0",
                "--upstream",
                &upstream,
                "--dir",
            ])
            .arg(dir.path())
            .env_remove("CUCA_CALL_LOG_BODIES")
            .env("CUCA_CALL_LOG", dir.path().join("calls.jsonl"))
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

    let body = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"long"}]}"#;
    let mut stream = TcpStream::connect(&address).unwrap();
    write!(
        stream,
        "POST /s/big/v1/chat/completions HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // Read it all, counting, never holding it.
    let mut total = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = stream.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        total += n;
    }
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
        N_EVENTS * EVENT_CHARS >> 20
    );
    assert!(
        peak_kib < RSS_CEILING_KIB,
        "peak RSS {peak_kib} KiB, over the {RSS_CEILING_KIB} KiB ceiling"
    );
}
