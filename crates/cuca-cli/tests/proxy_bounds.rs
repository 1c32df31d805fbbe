//! `cuca proxy` (and `cuca view`) as real processes against hostile callers, a hostile
//! upstream and signals: the proxy never loses or falsifies a recording, holds bounded
//! resources against callers that stall, and bounds what it reads of `/v1/models`.
//!
//! The upstream is a stand-in this file runs on loopback (plain threads, so it keeps answering
//! whatever the proxy's runtime does): it streams the byte-exact llama-server transcript, or a
//! stream that never ends on its own, or a model list that never ends.
// Helpers outside `#[test]` functions unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cuca::{FileBackend, SessionBackend};

/// The longest any step may take before the test calls it a hang; the bounds under test are
/// seconds, and a loaded machine must not turn them into failures.
const HANG: Duration = Duration::from_secs(60);

/// The request every chat call here makes: a streamed call, as agents make them.
const CHAT: &str = r#"{"model":"tiny","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"The vault is in Lisbon. Reply with: noted"}]}"#;

/// The loopback stand-in upstream.
struct Upstream {
    url: String,
    /// Chat calls that reached it.
    chats: Arc<AtomicUsize>,
}

/// An upstream whose first `slow_calls` chat calls stream a token every 50 ms for minutes
/// (until the proxy hangs up), and whose later ones stream the llama-server transcript whole.
/// `GET /v1/models` streams a model list that never ends.
fn upstream(slow_calls: usize) -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let chats = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&chats);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let counted = Arc::clone(&counted);
            std::thread::spawn(move || answer(stream, &counted, slow_calls));
        }
    });
    Upstream { url, chats }
}

/// Reads one request (head and `Content-Length` body): its request line and body.
fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut length = 0;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? == 0 {
            return None;
        }
        if header == "\r\n" {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok()?;
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((line, body))
}

fn answer(mut stream: TcpStream, chats: &AtomicUsize, slow_calls: usize) {
    let Some((line, _body)) = read_request(&mut stream) else {
        return;
    };
    if line.contains("/v1/models") {
        let _ = stream.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"object\":\"list\",\"data\":[",
        );
        let entry = b"{\"id\":\"m\",\"object\":\"model\",\"owned_by\":\"x\"},";
        let block: Vec<u8> = entry
            .iter()
            .copied()
            .cycle()
            .take(64 * entry.len() * 16)
            .collect();
        // Endless: it stops only when the proxy closes the connection.
        while stream.write_all(&block).is_ok() {}
        return;
    }
    let n = chats.fetch_add(1, Ordering::SeqCst);
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
    if stream.write_all(head).is_err() {
        return;
    }
    if n >= slow_calls {
        let _ = stream.write_all(common::STREAM_BASIC);
        return;
    }
    let chunk = |delta: &str| {
        format!(
            "data: {{\"choices\":[{{\"finish_reason\":null,\"index\":0,\"delta\":{delta}}}],\"created\":1,\"id\":\"slow\",\"model\":\"cuca-tiny-random\",\"object\":\"chat.completion.chunk\"}}\n\n"
        )
    };
    let _ = stream.write_all(chunk(r#"{"role":"assistant","content":null}"#).as_bytes());
    for _ in 0..6000 {
        if stream
            .write_all(chunk(r#"{"content":" tok"}"#).as_bytes())
            .is_err()
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A `cuca` process, killed when the test ends whichever way it ends.
struct Proc {
    child: std::process::Child,
    address: String,
    stderr: Arc<Mutex<String>>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([format!("-{name}"), self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{name} failed");
    }

    /// Waits for the process to exit, at most `HANG`.
    fn exit(&mut self) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(started.elapsed() < HANG, "the process did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

/// Starts `cuca ARGS --listen 127.0.0.1:0` (under `ulimit -n` when `nofile` is given) and
/// reads the address from its first line.
fn spawn(args: &[&str], nofile: Option<u32>) -> Proc {
    let cuca = env!("CARGO_BIN_EXE_cuca");
    let mut command = match nofile {
        Some(limit) => {
            let mut sh = Command::new("sh");
            sh.arg("-c")
                .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
                .arg(cuca);
            sh
        }
        None => Command::new(cuca),
    };
    let mut child = command
        .args(args)
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("CUCA_CALL_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut err = child.stderr.take().unwrap();
    let sink = Arc::clone(&stderr);
    std::thread::spawn(move || {
        let mut buf = [0_u8; 4096];
        while let Ok(n) = err.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    let mut lines = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    lines.read_line(&mut first).unwrap();
    let address = first
        .split("http://")
        .nth(1)
        .map(|rest| rest.trim().trim_end_matches('/').to_owned())
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
    // Keep reading stdout so the process never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut rest = Vec::new();
        let _ = lines.read_to_end(&mut rest);
    });
    Proc {
        child,
        address,
        stderr,
    }
}

fn proxy(upstream: &Upstream, dir: &Path, extra: &[&str]) -> Proc {
    let mut args = vec!["proxy", "--upstream", &upstream.url, "--dir"];
    args.push(dir.to_str().unwrap());
    args.extend_from_slice(extra);
    spawn(&args, None)
}

/// `POST {path}` with `body` as JSON, `Connection: close`.
fn post_request(address: &str, path: &str, extra_headers: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\n{extra_headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Sends `request` and reads the whole response (status line, headers, de-chunked body).
fn exchange(address: &str, request: &str) -> (u16, String, Vec<u8>) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(HANG)).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    split_response(&raw)
}

fn split_response(raw: &[u8]) -> (u16, String, Vec<u8>) {
    let at = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..at]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = &raw[at + 4..];
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_vec()
    };
    (status, head, body)
}

fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = body.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&body[..end]).trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        out.extend_from_slice(&body[end + 2..end + 2 + size]);
        body = &body[end + 2 + size + 2..];
    }
    out
}

/// The kinds of `session`'s records in `dir`.
fn kinds(dir: &Path, session: &str) -> Vec<&'static str> {
    FileBackend::new(dir)
        .unwrap()
        .replay(session)
        .unwrap()
        .iter()
        .map(|r| r.event.kind())
        .collect()
}

/// Starts a slow streamed call on session `demo` and reads until tokens flow: the call's
/// `CallRequest` and its first blocks are recorded. The open connection is returned.
fn start_slow_call(address: &str) -> TcpStream {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(HANG)).unwrap();
    let request = post_request(
        address,
        "/s/demo/v1/chat/completions",
        "Content-Type: application/json\r\n",
        CHAT,
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut seen = Vec::new();
    let mut buf = [0_u8; 4096];
    while seen.windows(4).filter(|w| w == b" tok").count() < 3 {
        let n = stream.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "the stream ended early: {:?}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    assert!(seen.starts_with(b"HTTP/1.1 200"));
    stream
}

/// After a stop mid-stream: the session's last turn is closed, a second proxy records the
/// retried call, and a third replays it with 200 and the recorded text, not a 409.
fn next_call_records_and_replays(dir: &Path) {
    let kinds_after_stop = kinds(dir, "demo");
    let last_request = kinds_after_stop
        .iter()
        .rposition(|k| *k == "CallRequest")
        .expect("a CallRequest was recorded");
    let tail = &kinds_after_stop[last_request..];
    for closing in ["CallFinish", "Latency", "TokenUsage"] {
        assert!(
            tail.contains(&closing),
            "the cut turn has no {closing}: {kinds_after_stop:?}"
        );
    }
    record_and_replay_the_retried_call(dir);
}

/// A second proxy on `dir` records the call again against a fast upstream, and a third, in
/// replay mode, answers it with 200 and the transcript's text.
fn record_and_replay_the_retried_call(dir: &Path) {
    let again = upstream(0);
    let recorder = proxy(&again, dir, &[]);
    let (status, _, body) = exchange(
        &recorder.address,
        &post_request(
            &recorder.address,
            "/s/demo/v1/chat/completions",
            "Content-Type: application/json\r\n",
            CHAT,
        ),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(again.chats.load(Ordering::SeqCst), 1);
    drop(recorder);

    let replayer = spawn(
        &["proxy", "--mode", "replay", "--dir", dir.to_str().unwrap()],
        None,
    );
    let (status, head, body) = exchange(
        &replayer.address,
        &post_request(
            &replayer.address,
            "/s/demo/v1/chat/completions",
            "Content-Type: application/json\r\n",
            CHAT,
        ),
    );
    assert_eq!(
        status,
        200,
        "{head}\n{}\nrecords: {:?}",
        String::from_utf8_lossy(&body),
        kinds(dir, "demo")
    );
    let (_, expected) = common::streamed_text(common::STREAM_BASIC);
    let (_, replayed) = common::streamed_text(&body);
    assert_eq!(replayed, expected);
}

/// "Ctrl-C, SIGTERM, SIGKILL or an OOM kill during a stream leaves the turn with a
/// `CallRequest` and blocks but no `CallFinish`/`Latency`/`TokenUsage`": stopped by `signal`
/// mid-stream, the proxy closes the turn, exits 0 within the grace and a bit, and the next
/// call records and replays.
fn stop_mid_stream_gracefully(signal: &str) {
    let dir = tempfile::tempdir().unwrap();
    let slow = upstream(1);
    let mut running = proxy(&slow, dir.path(), &["--shutdown-grace", "300ms"]);
    let mut caller = start_slow_call(&running.address);
    let stopped_at = Instant::now();
    running.signal(signal);
    let status = running.exit();
    let took = stopped_at.elapsed();
    assert_eq!(status.code(), Some(0), "stderr: {}", running.stderr());
    eprintln!("cuca proxy stopped by SIG{signal} mid-stream: exited 0 after {took:?}");
    // Give the stderr reader a moment to take the last line in.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !running.stderr().contains("shutting down") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        running
            .stderr()
            .contains("cuca proxy: shutting down, closing 1 calls in flight"),
        "{}",
        running.stderr()
    );
    // The caller's stream ended with the proxy (broken off, not a clean end of the answer).
    let mut rest = Vec::new();
    let _ = caller.read_to_end(&mut rest);
    assert!(!String::from_utf8_lossy(&rest).contains("[DONE]"));
    next_call_records_and_replays(dir.path());
}

#[test]
fn sigint_mid_stream_closes_the_turn_and_the_next_call_replays() {
    stop_mid_stream_gracefully("INT");
}

#[test]
fn sigterm_mid_stream_closes_the_turn_and_the_next_call_replays() {
    stop_mid_stream_gracefully("TERM");
}

#[test]
fn sigkill_mid_stream_leaves_a_turn_the_next_proxy_closes_and_the_next_call_replays() {
    // SIGKILL runs no cleanup: the turn is left open, and closing it is the session log's
    // resume step ("on resume, close a tail turn that has a CallRequest and no CallFinish").
    let dir = tempfile::tempdir().unwrap();
    let slow = upstream(1);
    let mut running = proxy(&slow, dir.path(), &[]);
    let _caller = start_slow_call(&running.address);
    running.signal("KILL");
    let status = running.exit();
    assert_eq!(status.code(), None, "killed by a signal");
    record_and_replay_the_retried_call(dir.path());
}

/// The proxy's open file descriptors now.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| dir.count())
        .unwrap_or(0)
}

#[test]
fn eleven_hundred_half_sent_heads_under_1024_fds_do_not_keep_a_real_call_out() {
    // "1,100 half-sent request heads held every fd of a `ulimit -n 1024` proxy for 100 s and
    // every real call in between timed out."
    let dir = tempfile::tempdir().unwrap();
    let fast = upstream(0);
    let running = spawn(
        &[
            "proxy",
            "--upstream",
            &fast.url,
            "--dir",
            dir.path().to_str().unwrap(),
            // Longer than `HANG`: a real call that waited for half-sent heads to time out
            // (rather than for them to be shed) would fail this test.
            "--header-timeout",
            "120s",
        ],
        Some(1024),
    );
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", running.pid())).unwrap();
    let open_files = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    assert!(
        open_files.split_whitespace().nth(3) == Some("1024"),
        "{open_files}"
    );
    let half = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {}\r\nContent-Type: appl",
        running.address
    );
    let mut held = Vec::new();
    let mut peak_fds = 0;
    for n in 0..1100 {
        let mut stream = TcpStream::connect(&running.address).unwrap();
        stream.write_all(half.as_bytes()).unwrap();
        held.push(stream);
        if n % 100 == 99 {
            peak_fds = peak_fds.max(open_fds(running.pid()));
        }
    }
    let started = Instant::now();
    let (status, _, body) = exchange(
        &running.address,
        &post_request(
            &running.address,
            "/s/real/v1/chat/completions",
            "Content-Type: application/json\r\n",
            CHAT,
        ),
    );
    let took = started.elapsed();
    peak_fds = peak_fds.max(open_fds(running.pid()));
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let (_, expected) = common::streamed_text(common::STREAM_BASIC);
    assert_eq!(common::streamed_text(&body).1, expected);
    eprintln!(
        "1,100 half-sent heads against cuca proxy under ulimit -n 1024: a real call served in \
         {took:?}; the proxy held at most {peak_fds} fds when sampled"
    );
    assert!(peak_fds < 1024, "{peak_fds}");
    drop(held);
}

#[test]
fn a_body_that_stops_after_10_bytes_gets_a_408_and_its_connection_is_closed() {
    // "a body that stops after 10 bytes is held forever"
    let dir = tempfile::tempdir().unwrap();
    let fast = upstream(0);
    let running = proxy(&fast, dir.path(), &["--body-timeout", "500ms"]);
    let mut stream = TcpStream::connect(&running.address).unwrap();
    stream.set_read_timeout(Some(HANG)).unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
        running.address
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&CHAT.as_bytes()[..10]).unwrap();
    // Read to the end: the 408 comes, then the connection closes (the read returns 0).
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let (status, _, body) = split_response(&raw);
    assert_eq!(status, 408, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("cuca_body_timeout"));
    assert_eq!(fast.chats.load(Ordering::SeqCst), 0);
}

/// The ceiling the proxy's peak resident memory must stay under while an upstream sends an
/// endless model list (before the bound: 1 GiB sent, 1.07 GB resident).
const MODELS_RSS_CEILING_KIB: u64 = 64 * 1024;

#[test]
fn an_endless_model_list_is_a_502_naming_the_bound_and_the_proxy_stays_under_64_mib() {
    // "`GET /v1/models` buffers the upstream's body whole with no cap or timeout (1 GiB →
    // 1.07 GB RSS). Bounded, with the bound documented."
    let dir = tempfile::tempdir().unwrap();
    let endless = upstream(0);
    let running = proxy(&endless, dir.path(), &[]);
    for _ in 0..4 {
        let (status, _, body) = exchange(
            &running.address,
            &format!(
                "GET /v1/models HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
                running.address
            ),
        );
        let body = String::from_utf8_lossy(&body);
        assert_eq!(status, 502, "{body}");
        assert!(body.contains("cuca_upstream_too_large"), "{body}");
        assert!(
            body.contains(&cuca_proxy_models_max().to_string()),
            "{body}"
        );
    }
    let peak = common::status_kib(running.pid(), "VmHWM:");
    eprintln!("cuca proxy after 4 endless model lists: peak RSS {peak} KiB");
    assert!(
        peak < MODELS_RSS_CEILING_KIB,
        "peak RSS {peak} KiB is over {MODELS_RSS_CEILING_KIB} KiB"
    );
}

/// The bound the 502 names: 4 MiB (`cuca_proxy::MODELS_MAX_BYTES`, which this crate does not
/// link in its tests, so the figure is written here).
fn cuca_proxy_models_max() -> usize {
    4 << 20
}

#[test]
fn a_rebinding_host_and_a_cross_site_text_post_are_refused_and_nothing_is_forwarded() {
    // "Any `Host` and `Origin` are answered by the proxy and the viewer, so a web page can
    // read sessions through DNS rebinding, and a CORS-simple cross-site `text/plain` POST is
    // forwarded and recorded into the user's session."
    let dir = tempfile::tempdir().unwrap();
    let counted = upstream(0);
    let running = proxy(&counted, dir.path(), &[]);
    let port = running.address.rsplit(':').next().unwrap().to_owned();
    let evil_host = format!("evil.example:{port}");

    let (status, _, body) = exchange(
        &running.address,
        &format!("GET /v1/models HTTP/1.1\r\nHost: {evil_host}\r\nConnection: close\r\n\r\n"),
    );
    let text = String::from_utf8_lossy(&body);
    assert_eq!(status, 421, "{text}");
    assert!(
        text.contains("cuca_wrong_host") && text.contains("evil.example"),
        "{text}"
    );

    let rebound = format!(
        "POST /s/demo/v1/chat/completions HTTP/1.1\r\nHost: {evil_host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{CHAT}",
        CHAT.len()
    );
    assert_eq!(exchange(&running.address, &rebound).0, 421);

    let cross_site = post_request(
        &running.address,
        "/s/demo/v1/chat/completions",
        "Origin: https://evil.example\r\nContent-Type: text/plain\r\n",
        CHAT,
    );
    let (status, _, body) = exchange(&running.address, &cross_site);
    let text = String::from_utf8_lossy(&body);
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("cuca_cross_site_origin"), "{text}");

    // The body type is refused on its own too: `text/plain` is what a page can send without
    // a preflight, and no SDK sends a model call as it.
    let plain = post_request(
        &running.address,
        "/s/demo/v1/chat/completions",
        "Content-Type: text/plain\r\n",
        CHAT,
    );
    let (status, _, body) = exchange(&running.address, &plain);
    let text = String::from_utf8_lossy(&body);
    assert_eq!(status, 415, "{text}");
    assert!(text.contains("Content-Type: application/json"), "{text}");

    assert_eq!(
        counted.chats.load(Ordering::SeqCst),
        0,
        "a refused call was forwarded"
    );
    assert!(
        common::cslog_files(dir.path()).is_empty(),
        "a refused call was recorded"
    );

    // The same call from loopback, as an SDK sends it, goes through.
    let ok = post_request(
        &running.address,
        "/s/demo/v1/chat/completions",
        "Origin: http://localhost:3000\r\nContent-Type: application/json; charset=utf-8\r\n",
        CHAT,
    );
    assert_eq!(exchange(&running.address, &ok).0, 200);
    assert_eq!(counted.chats.load(Ordering::SeqCst), 1);
}

#[test]
fn the_viewer_refuses_a_rebinding_host_and_a_cross_site_origin() {
    let dir = tempfile::tempdir().unwrap();
    let viewer = spawn(&["view", dir.path().to_str().unwrap()], None);
    let port = viewer.address.rsplit(':').next().unwrap().to_owned();
    let get = |host: &str, extra: &str| {
        exchange(
            &viewer.address,
            &format!("GET / HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n"),
        )
    };
    let (status, head, body) = get(&format!("evil.example:{port}"), "");
    assert_eq!(status, 421, "{head}");
    assert!(String::from_utf8_lossy(&body).contains("evil.example"));
    assert!(head
        .to_ascii_lowercase()
        .contains("content-type: text/plain"));
    let (status, _, _) = get(&viewer.address, "Origin: https://evil.example\r\n");
    assert_eq!(status, 403);
    assert_eq!(get(&viewer.address, "").0, 200);
    assert_eq!(get(&format!("localhost:{port}"), "").0, 200);
}

#[test]
fn cuca_serve_with_the_viewer_refuses_a_rebinding_host_on_every_route() {
    let runs = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(runs.path().join("r")).unwrap();
    std::fs::write(runs.path().join("r/replay.json.gz"), b"record").unwrap();
    let sessions = tempfile::tempdir().unwrap();
    let server = spawn(
        &[
            "serve",
            "--runs",
            runs.path().to_str().unwrap(),
            "--sessions",
            sessions.path().to_str().unwrap(),
        ],
        None,
    );
    let port = server.address.rsplit(':').next().unwrap().to_owned();
    let get = |host: &str, path: &str| {
        exchange(
            &server.address,
            &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n"),
        )
    };
    let evil = format!("evil.example:{port}");
    assert_eq!(get(&evil, "/").0, 421);
    assert_eq!(get(&evil, "/runs/r/replay").0, 421);
    let (status, _, body) = get(&server.address, "/runs/r/replay");
    assert_eq!((status, body.as_slice()), (200, b"record".as_slice()));
}
