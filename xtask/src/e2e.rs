//! `cargo xtask e2e`: runs both seed example commands against a real llama-server and
//! checks the `.cslog` files they recorded.
//!
//! Opt-in and not part of CI: it needs a real server. It uses, in order:
//!
//! 1. a server already answering at `CUCA_BASE_URL` (default `http://127.0.0.1:1234`);
//! 2. otherwise, when `CUCA_BASE_URL` is unset, a `llama-server` found on `PATH`, started
//!    on a free loopback port with the GGUF model named by `CUCA_GGUF`, and stopped after.
//!
//! Without either it says what it needs and fails.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use cuca_store_file::Verdict;

/// Where the examples expect a server when nothing says otherwise (the seeds' port).
const DEFAULT_BASE_URL: &str = "http://127.0.0.1:1234";

/// How long a freshly started llama-server may take to load its model and answer
/// `/health`: a tiny model loads in a second, a 12B one from a cold disk in about a minute.
const STARTUP_WAIT: Duration = Duration::from_secs(180);

/// The seed commands, exactly as the docs print them.
const SESSION_LOG_FEATURES: &str = "provider-llamacpp plugin-session-log";
const REPLAY_FEATURES: &str = "provider-llamacpp service-replay";

pub(crate) fn run() -> anyhow::Result<()> {
    let root = workspace_root();
    let (base_url, _server) = find_or_start_server()?;
    println!("e2e: using the server at {base_url}");
    let work = std::env::temp_dir().join(format!("cuca-e2e-{}", std::process::id()));
    if work.exists() {
        std::fs::remove_dir_all(&work).with_context(|| format!("clearing {}", work.display()))?;
    }

    let dir = work.join("session_log");
    let out = run_example(&root, "session_log", SESSION_LOG_FEATURES, &base_url, &dir)?;
    let records = check_cslog(&dir.join("demo.cslog"), 2)?;
    expect_line(
        &out,
        &format!("The file backend replays the same trajectory: {records} records"),
    )?;
    expect_line(&out, "  new session: demo:fork:demo:1:0")?;
    expect_line(&out, "  branch: 2 records: SystemPrompt 1, Message 1")?;
    println!(
        "e2e: session_log recorded {records} records in {}",
        dir.display()
    );
    // Whether the second turn can ride the first one's connection is the server's choice:
    // ask it directly, on one raw connection, then hold the call log to its answer.
    let keeps_alive = server_keeps_streamed_connections(&base_url)?;
    println!(
        "e2e: the server {} a connection after a streamed answer",
        if keeps_alive { "keeps" } else { "closes" }
    );
    let reuse = check_call_log(&dir.join("calls.jsonl"), keeps_alive)?;
    println!("e2e: session_log's call log: {reuse}");

    let dir = work.join("replay");
    let out = run_example(&root, "replay", REPLAY_FEATURES, &base_url, &dir)?;
    let records = check_cslog(&dir.join("demo.cslog"), 1)?;
    expect_contains(&out, "identical to the live stream")?;
    expect_contains(&out, "same blocks and tokens as the live response")?;
    println!(
        "e2e: replay recorded and replayed {records} records in {}",
        dir.display()
    );

    // The proxy in front of the same server, then replaying with no upstream.
    let proxied = crate::e2e_proxy::run(&root, &base_url, &work.join("proxy"))?;
    println!("e2e: cuca proxy {proxied}");
    println!("e2e: ok");
    Ok(())
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// A llama-server this task started; killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn find_or_start_server() -> anyhow::Result<(String, Option<Server>)> {
    let explicit = std::env::var("CUCA_BASE_URL")
        .ok()
        .filter(|v| !v.trim().is_empty());
    let base_url = explicit
        .clone()
        .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
    if let Some(addr) = socket_addr(&base_url) {
        if TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok() {
            return Ok((base_url, None));
        }
    }
    if explicit.is_some() {
        bail!(
            "nothing answers at CUCA_BASE_URL={base_url}: start an OpenAI-compatible server \
             there, or unset CUCA_BASE_URL to let e2e start llama-server with CUCA_GGUF"
        );
    }
    let gguf = std::env::var_os("CUCA_GGUF").map(PathBuf::from);
    let binary = find_on_path("llama-server");
    let (Some(gguf), Some(binary)) = (gguf, binary) else {
        bail!(
            "cargo xtask e2e needs a real llama-server and found none.\n\
             Either start one at {DEFAULT_BASE_URL} (llama-server -m MODEL.gguf --port 1234 --jinja)\n\
             or set CUCA_BASE_URL to a running OpenAI-compatible server,\n\
             or put llama-server on PATH and set CUCA_GGUF=/path/to/model.gguf so e2e starts one.\n\
             (llama-server on PATH: {}; CUCA_GGUF: {})",
            if find_on_path("llama-server").is_some() { "yes" } else { "no" },
            std::env::var("CUCA_GGUF").unwrap_or_else(|_| "unset".into()),
        );
    };
    if !gguf.is_file() {
        bail!("CUCA_GGUF={} is not a file", gguf.display());
    }
    let port = free_port()?;
    let log = std::env::temp_dir().join(format!("cuca-e2e-llama-server-{port}.log"));
    let log_file =
        std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let child = Command::new(&binary)
        .arg("-m")
        .arg(&gguf)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["-c", "4096", "-np", "1", "--jinja", "--alias", "cuca-e2e"])
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let server = Server(child);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    println!(
        "e2e: started {} on port {port}, log {}",
        binary.display(),
        log.display()
    );
    let started = Instant::now();
    while started.elapsed() < STARTUP_WAIT {
        if health_ok(addr) {
            return Ok((format!("http://{addr}"), Some(server)));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    bail!(
        "llama-server did not answer /health within {} s; see {}",
        STARTUP_WAIT.as_secs(),
        log.display()
    )
}

/// The host and port of an `http://` URL; `None` for anything else (then no probe is made).
fn socket_addr(url: &str) -> Option<SocketAddr> {
    let rest = url.strip_prefix("http://")?;
    let authority = rest.split('/').next()?;
    let authority = if authority.contains(':') {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    authority.to_socket_addrs().ok()?.next()
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("finding a free loopback port")?;
    Ok(listener.local_addr()?.port())
}

/// Whether `GET /health` answers 200 (llama-server answers 503 while loading).
fn health_ok(addr: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 16];
    let n = stream.read(&mut head).unwrap_or(0);
    head[..n].starts_with(b"HTTP/1.1 200") || head[..n].starts_with(b"HTTP/1.0 200")
}

fn run_example(
    root: &Path,
    name: &str,
    features: &str,
    base_url: &str,
    dir: &Path,
) -> anyhow::Result<String> {
    println!("e2e: cargo run --example {name} --features \"{features}\"");
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(root)
        .args(["run", "--example", name, "--features", features])
        .env("CUCA_BASE_URL", base_url)
        .env("CUCA_SESSION_DIR", dir)
        // The example's call log beside its session, not in the state root of whoever runs
        // e2e; no bodies, whatever the caller's environment says.
        .env("CUCA_CALL_LOG", dir.join("calls.jsonl"))
        .env_remove("CUCA_CALL_LOG_BODIES")
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running the {name} example"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    print!("{stdout}");
    if !output.status.success() {
        bail!("the {name} example failed ({})", output.status);
    }
    Ok(stdout)
}

/// Checks a recorded session file: clean, opening with SystemPrompt then Message, and
/// holding `turns` Latency-then-TokenUsage pairs. Returns its record count.
fn check_cslog(path: &Path, turns: usize) -> anyhow::Result<usize> {
    let report =
        cuca_store_file::scan(path).with_context(|| format!("scanning {}", path.display()))?;
    if report.verdict != Verdict::Clean {
        bail!("{} is not clean: {:?}", path.display(), report.verdict);
    }
    let kinds: Vec<&str> = report.records.iter().map(|r| r.event.kind()).collect();
    if kinds.first() != Some(&"SystemPrompt") || kinds.get(1) != Some(&"Message") {
        bail!(
            "{} does not open with SystemPrompt, Message: {:?}",
            path.display(),
            &kinds[..kinds.len().min(4)]
        );
    }
    let pairs = kinds
        .windows(2)
        .filter(|w| w == &["Latency", "TokenUsage"])
        .count();
    if pairs != turns || kinds.last() != Some(&"TokenUsage") {
        bail!(
            "{} holds {pairs} Latency/TokenUsage pairs (expected {turns}, the last record closing a turn)",
            path.display()
        );
    }
    for (i, record) in report.records.iter().enumerate() {
        if record.sequence != i as u64 || record.session_id != "demo" {
            bail!(
                "{}: record {i} is {}, not demo:{i}",
                path.display(),
                record.point_id()
            );
        }
    }
    Ok(report.records.len())
}

/// Sends the same small streamed chat request twice over one TCP connection and says
/// whether the server answered the second: whether it keeps a connection alive after a
/// streamed (chunked) answer. llama-server 11434 does not: it closes the connection after the
/// stream's last chunk, while it keeps one alive after a non-streamed answer.
fn server_keeps_streamed_connections(base_url: &str) -> anyhow::Result<bool> {
    let address = base_url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let body = r#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true}"#;
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = std::net::TcpStream::connect(&address)
        .with_context(|| format!("connecting to {address} to probe keep-alive"))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    for turn in 0..2 {
        if stream.write_all(request.as_bytes()).is_err() {
            return Ok(false);
        }
        let mut seen = Vec::new();
        let mut buf = [0u8; 8192];
        // The end of a chunked body: the zero-length chunk.
        while !seen.ends_with(b"\r\n0\r\n\r\n") {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) if turn == 1 => return Ok(false),
                Ok(0) => bail!("{address} closed the connection before its first answer ended"),
                Ok(n) => seen.extend_from_slice(&buf[..n]),
                Err(error) => return Err(error).context("reading the probe's first answer"),
            }
        }
    }
    Ok(true)
}

/// Checks the session-log example's call log: its two turns went through one client, so the
/// first turn's end row opened a connection (`conn_reused:false`), and the second rode it
/// (`conn_reused:true`) when the server keeps connections alive after a streamed answer, or
/// opened its own (`false`) when it closes them. Returns a one-line summary.
fn check_call_log(path: &Path, server_keeps_alive: bool) -> anyhow::Result<String> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut ends = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let row: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("{}: line {} is not a row", path.display(), n + 1))?;
        if row.get("phase").is_none() {
            ends.push(row);
        }
    }
    let reused: Vec<Option<bool>> = ends
        .iter()
        .map(|row| row.get("conn_reused").and_then(serde_json::Value::as_bool))
        .collect();
    let expected = [Some(false), Some(server_keeps_alive)];
    if reused != expected {
        bail!(
            "{}: the two turns' end rows say conn_reused {reused:?}, expected {expected:?} \
             (one client; the server {} connections after a streamed answer)",
            path.display(),
            if server_keeps_alive {
                "keeps"
            } else {
                "closes"
            }
        );
    }
    // On loopback a connect can take under a millisecond, which the row omits as zero.
    let connect_ms = |row: &serde_json::Value| {
        row.get("connect_ms")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
    };
    Ok(format!(
        "turn 1 conn_reused:false connect_ms:{}, turn 2 conn_reused:{server_keeps_alive}{}",
        connect_ms(&ends[0]),
        if server_keeps_alive {
            String::new()
        } else {
            format!(" connect_ms:{}", connect_ms(&ends[1]))
        }
    ))
}

fn expect_line(output: &str, line: &str) -> anyhow::Result<()> {
    if output.lines().any(|l| l == line) {
        Ok(())
    } else {
        bail!("the example's report lacks the line {line:?}")
    }
}

fn expect_contains(output: &str, text: &str) -> anyhow::Result<()> {
    if output.contains(text) {
        Ok(())
    } else {
        bail!("the example's report lacks {text:?}")
    }
}

#[cfg(test)]
mod call_log_tests {
    use super::check_call_log;

    fn log_of(lines: &[&str]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("calls.jsonl");
        std::fs::write(&path, lines.join("\n") + "\n").unwrap_or_else(|e| panic!("{e}"));
        (dir, path)
    }

    #[test]
    fn the_second_turn_must_ride_the_first_turns_connection() {
        let (_dir, good) = log_of(&[
            r#"{"id":"a","phase":"start","attempt":1}"#,
            r#"{"id":"a","status":200,"conn_reused":false,"connect_ms":2}"#,
            r#"{"id":"b","phase":"start","attempt":1}"#,
            r#"{"id":"b","status":200,"conn_reused":true}"#,
        ]);
        let summary = check_call_log(&good, true).unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(
            summary,
            "turn 1 conn_reused:false connect_ms:2, turn 2 conn_reused:true"
        );
        let (_dir, cold) = log_of(&[
            r#"{"id":"a","status":200,"conn_reused":false,"connect_ms":2}"#,
            r#"{"id":"b","status":200,"conn_reused":false,"connect_ms":1}"#,
        ]);
        // A server that closes streamed connections: both turns connect, and say so.
        let summary = check_call_log(&cold, false).unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(
            summary,
            "turn 1 conn_reused:false connect_ms:2, turn 2 conn_reused:false connect_ms:1"
        );
        assert!(check_call_log(&good, false).is_err());
        let error = check_call_log(&cold, true).err().map(|e| e.to_string());
        assert!(
            error
                .as_deref()
                .is_some_and(|e| e.contains("[Some(false), Some(false)]")),
            "{error:?}"
        );
    }
}
