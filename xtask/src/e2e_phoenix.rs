//! `cargo xtask e2e-phoenix`: exports the fixture sessions and a call log into a real Arize Phoenix server and reads the spans back through Phoenix's own REST API.
//!
//! Opt-in and not part of CI: it needs Phoenix, a Python package. Install the pinned
//! version once, in a virtual environment of its own:
//!
//! ```sh
//! python3 -m venv /tmp/phoenix-venv && /tmp/phoenix-venv/bin/pip install arize-phoenix==20.26.1
//! CUCA_PHOENIX=/tmp/phoenix-venv/bin/phoenix cargo xtask e2e-phoenix
//! ```
//!
//! It uses `CUCA_PHOENIX`, else `phoenix` on `PATH`; starts `phoenix serve` on free loopback
//! ports with a temporary working directory (stopped after); runs
//! `cuca export-otlp --endpoint http://127.0.0.1:PORT --sessions fixtures/sessions --calls FILE`;
//! and checks, through `GET /v1/projects/default/spans`, that every span arrived and that the
//! model, the token counts and the latency of a call are what the records say.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::Value;

/// The Phoenix release this task was written against (its REST API and its mapping of the
/// GenAI attributes onto its own `llm.*` ones).
const PHOENIX_VERSION: &str = "20.26.1";

/// How long Phoenix may take to start: it migrates its SQLite database on first start, which
/// takes tens of seconds on a small machine.
const STARTUP_WAIT: Duration = Duration::from_secs(180);

/// How long spans may take to show up after the export returned: Phoenix ingests OTLP into
/// a queue and writes it to its database in the background.
const INGEST_WAIT: Duration = Duration::from_secs(60);

/// The call log the task exports: one call of run `e2e` that took 1,000 ms, with its
/// model and token counts, and one that failed with a 503.
const CALL_LOG: &str = concat!(
    r#"{"ts":"2026-11-30T10:00:00.000Z","id":"e2e00001","run":"e2e","phase":"start","tag":"turn","model":"qwen3","max_tokens":256,"messages":2,"stream":true,"attempt":1}"#,
    "\n",
    r#"{"ts":"2026-11-30T10:00:01.000Z","id":"e2e00001","run":"e2e","tag":"turn","model":"qwen3","served":"qwen3-8b","attempt":1,"status":200,"ms":1000,"finish":"stop","prompt_tokens":40,"completion_tokens":12}"#,
    "\n",
    r#"{"ts":"2026-11-30T10:00:02.000Z","id":"e2e00002","run":"e2e","phase":"start","tag":"turn","model":"qwen3","attempt":1}"#,
    "\n",
    r#"{"ts":"2026-11-30T10:00:02.100Z","id":"e2e00002","run":"e2e","tag":"turn","model":"qwen3","attempt":1,"status":503,"ms":100,"error":"overloaded"}"#,
    "\n",
);

/// Spans the export sends: the fixture sessions (two roots and three calls) and the call
/// log (a root, two calls, an attempt each).
const EXPECTED_SPANS: usize = 5 + 5;

/// A Phoenix this task started; stopped when dropped.
struct Phoenix(Child);

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn run() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let phoenix = find_phoenix()?;
    let work = std::env::temp_dir().join(format!("cuca-e2e-phoenix-{}", std::process::id()));
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let port = free_port()?;
    let grpc_port = free_port()?;
    let log_path = work.join("phoenix.log");
    let log = std::fs::File::create(&log_path)?;
    println!(
        "e2e-phoenix: starting {} serve on 127.0.0.1:{port} (log {})",
        phoenix.display(),
        log_path.display()
    );
    let child = Command::new(&phoenix)
        .arg("serve")
        .env("PHOENIX_WORKING_DIR", work.join("phoenix"))
        .env("PHOENIX_HOST", "127.0.0.1")
        .env("PHOENIX_PORT", port.to_string())
        .env("PHOENIX_GRPC_PORT", grpc_port.to_string())
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log))
        .spawn()
        .with_context(|| format!("starting {}", phoenix.display()))?;
    let _phoenix = Phoenix(child);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    wait_for(STARTUP_WAIT, "Phoenix to answer /healthz", || {
        Ok(get(addr, "/healthz").is_ok_and(|(status, _)| status == 200))
    })?;

    let calls = work.join("calls.jsonl");
    std::fs::write(&calls, CALL_LOG)?;
    let endpoint = format!("http://127.0.0.1:{port}");
    println!("e2e-phoenix: cuca export-otlp --endpoint {endpoint} --sessions fixtures/sessions --calls {}", calls.display());
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(&root)
        .args([
            "run",
            "--quiet",
            "-p",
            "cuca-cli",
            "--",
            "export-otlp",
            "--endpoint",
        ])
        .arg(&endpoint)
        .args([
            "--provider",
            "llamacpp",
            "--sessions",
            "fixtures/sessions",
            "--calls",
        ])
        .arg(&calls)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .status()
        .context("running cuca export-otlp")?;
    if !status.success() {
        bail!("cuca export-otlp failed ({status})");
    }

    let mut spans = Vec::new();
    wait_for(INGEST_WAIT, "Phoenix to hold every exported span", || {
        let (status, body) = get(addr, "/v1/projects/default/spans?limit=1000")?;
        if status != 200 {
            bail!("GET /v1/projects/default/spans answered {status}: {body}");
        }
        let value: Value = serde_json::from_str(&body).context("Phoenix's span list")?;
        spans = value["data"].as_array().cloned().unwrap_or_default();
        Ok(spans.len() >= EXPECTED_SPANS)
    })?;
    check(&spans)?;
    println!(
        "e2e-phoenix: ok ({} spans in Phoenix {PHOENIX_VERSION}'s API)",
        spans.len()
    );
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

/// The checks on what Phoenix's API returns.
fn check(spans: &[Value]) -> anyhow::Result<()> {
    if spans.len() != EXPECTED_SPANS {
        bail!(
            "Phoenix holds {} spans, the export sent {EXPECTED_SPANS}",
            spans.len()
        );
    }
    let names: Vec<&str> = spans.iter().filter_map(|s| s["name"].as_str()).collect();
    for name in ["session demo", "session reasoning", "run e2e"] {
        if !names.contains(&name) {
            bail!("no span {name:?} in Phoenix: {names:?}");
        }
    }
    let call = spans
        .iter()
        .find(|s| s["name"] == "chat qwen3" && s["attributes"]["gen_ai.usage.input_tokens"] == 40)
        .context("the successful call is not in Phoenix")?;
    let attributes = &call["attributes"];
    // Phoenix reads the GenAI attributes into its own: model, token counts and kind.
    let expect = [
        ("gen_ai.request.model", Value::from("qwen3")),
        ("gen_ai.response.model", Value::from("qwen3-8b")),
        ("gen_ai.usage.output_tokens", Value::from(12)),
        ("llm.token_count.prompt", Value::from(40)),
        ("llm.token_count.completion", Value::from(12)),
    ];
    for (key, want) in expect {
        if attributes[key] != want {
            bail!(
                "Phoenix shows {key} = {}, the record says {want}",
                attributes[key]
            );
        }
    }
    if call["span_kind"] != "LLM" {
        bail!(
            "Phoenix does not see the call as an LLM span: {}",
            call["span_kind"]
        );
    }
    let latency_ms = millis(&call["end_time"])? - millis(&call["start_time"])?;
    if latency_ms != 1000 {
        bail!("Phoenix shows a latency of {latency_ms} ms, the record says 1000");
    }
    let failed = spans
        .iter()
        .find(|s| s["name"] == "chat qwen3" && s["status_code"] == "ERROR")
        .context("the failed call is not an error in Phoenix")?;
    if failed["attributes"]["error.type"] != "503" {
        bail!(
            "the failed call's error.type is {}",
            failed["attributes"]["error.type"]
        );
    }
    let turns = spans
        .iter()
        .filter(|s| s["name"] == "chat" && s["attributes"]["gen_ai.conversation.id"] == "demo")
        .count();
    if turns != 2 {
        bail!("Phoenix shows {turns} model calls of session demo, the fixture has 2");
    }
    Ok(())
}

/// Milliseconds since midnight of an ISO 8601 UTC time as Phoenix writes it
/// (`2026-11-30T10:00:01.000000+00:00`): enough for the latency of a call that does not cross
/// midnight, which the task's own call log guarantees.
fn millis(value: &Value) -> anyhow::Result<i64> {
    let text = value.as_str().context("a time that is not a string")?;
    let time = text
        .split('T')
        .nth(1)
        .context("a time without a T")?
        .trim_end_matches("+00:00")
        .trim_end_matches('Z');
    let mut parts = time.split(':');
    let (Some(h), Some(m), Some(s)) = (parts.next(), parts.next(), parts.next()) else {
        bail!("an unreadable time {text:?}");
    };
    let seconds: f64 = s.parse().with_context(|| format!("seconds of {text:?}"))?;
    let h: i64 = h.parse()?;
    let m: i64 = m.parse()?;
    Ok((h * 3600 + m * 60) * 1000 + (seconds * 1000.0).round() as i64)
}

fn find_phoenix() -> anyhow::Result<PathBuf> {
    if let Some(explicit) = std::env::var_os("CUCA_PHOENIX") {
        return Ok(PathBuf::from(explicit));
    }
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("phoenix"))
            .find(|candidate| candidate.is_file())
    });
    on_path.with_context(|| {
        format!(
            "cargo xtask e2e-phoenix needs Arize Phoenix and found none.\n\
             Install it (a Python package) and point CUCA_PHOENIX at it:\n  \
             python3 -m venv /tmp/phoenix-venv && /tmp/phoenix-venv/bin/pip install arize-phoenix=={PHOENIX_VERSION}\n  \
             CUCA_PHOENIX=/tmp/phoenix-venv/bin/phoenix cargo xtask e2e-phoenix"
        )
    })
}

fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("finding a free loopback port")?;
    Ok(listener.local_addr()?.port())
}

/// Polls `ready` every half second until it says yes or `limit` passes. Polling is the
/// honest wait here: Phoenix is another process with no way to tell us it is ready.
fn wait_for(
    limit: Duration,
    what: &str,
    mut ready: impl FnMut() -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let start = Instant::now();
    let mut last_error = None;
    while start.elapsed() < limit {
        match ready() {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(error) => last_error = Some(error),
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    match last_error {
        Some(error) => Err(error.context(format!("waited {limit:?} for {what}"))),
        None => bail!("waited {limit:?} for {what}"),
    }
}

/// A plain HTTP/1.0 GET (the server closes the connection, so the body is the rest of the
/// stream): the status and the body.
fn get(addr: SocketAddr, path: &str) -> anyhow::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n\r\n"
    )?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .context("an HTTP answer without a head")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("an HTTP answer without a status")?;
    Ok((status, body.to_owned()))
}
