//! `cargo xtask e2e-phoenix`: exports a fixture set into a real Arize Phoenix server and checks, through Phoenix's own REST API, that it looks as a natively traced agent does.
//!
//! `.ci/run` installs the pinned Phoenix (a Python package) into a virtual environment of its
//! own and runs this after the tests. By hand:
//!
//! ```sh
//! python3 -m venv /tmp/phoenix-venv && /tmp/phoenix-venv/bin/pip install arize-phoenix==20.26.1
//! CUCA_PHOENIX=/tmp/phoenix-venv/bin/phoenix cargo xtask e2e-phoenix
//! ```
//!
//! It uses `CUCA_PHOENIX`, else `phoenix` on `PATH`; starts `phoenix serve` on free loopback
//! ports with a temporary working directory (stopped after); builds the fixture set (the
//! committed fixture sessions, a fork of `demo` with a call of its own, a fork of that fork
//! cut mid-call, one continued with a call of its own, a proxy-shaped session with call
//! metadata and a call in flight, and a call log holding the same calls plus another run's
//! call); runs `cuca export-otlp --with-content --project cuca-e2e` on it, then again after
//! the call in flight ended; and checks through `GET /v1/projects/cuca-e2e/spans` and
//! `GET /v1/projects/cuca-e2e/sessions` six points: answers, one span per call, forks, latency,
//! roots/kinds/sessions/statuses, and a proxy session's model and finish reason; with the
//! proxy session's cache-read tokens and cost (priced by the bundled table) on each of its
//! spans.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use cuca_events::{Message, SessionBackend, SessionEvent, SessionRecord, TokenDetail};
use cuca_store_file::FileBackend;
use serde_json::Value;

/// The Phoenix release this task was written against (its REST API and its mapping of the
/// GenAI attributes onto its own `llm.*` ones).
const PHOENIX_VERSION: &str = "20.26.1";

/// The project the export names (`--project`): Phoenix files the spans under it.
const PROJECT: &str = "cuca-e2e";

/// How long Phoenix may take to start: it migrates its SQLite database on first start, which
/// takes tens of seconds on a small machine.
const STARTUP_WAIT: Duration = Duration::from_secs(180);

/// How long spans may take to show up after the export returned: Phoenix ingests OTLP into
/// a queue and writes it to its database in the background.
const INGEST_WAIT: Duration = Duration::from_secs(60);

/// 2026-11-30T10:00:00Z in milliseconds since the epoch: the fixture set's clock.
const T0: u64 = 1_796_032_800_000;

/// Spans the first export sends: the fixture sessions' three calls, the fork's and the fork
/// of the fork's own call, the proxy session's two ended calls (each one span with its
/// call-log call), and the other run's call with its attempt.
const FIRST_SPANS: usize = 3 + 2 + 2 + 2;

/// The prompt tokens each proxy-shaped call read from the cache: Phoenix must show them as
/// the span's cache hits.
const CACHE_READ: u64 = 16;

/// The model the proxy-shaped session's calls ask for: one the bundled price table prices,
/// so Phoenix must show each call's cost.
const PROXIED_MODEL: &str = "gpt-4o-mini";

/// The bundled price table's `gpt-4o-mini-2024-07-18` (LiteLLM's list, as
/// `crates/cuca-cost/data` holds it), USD per token: input, cache read, output.
const PROXIED_PRICES: (f64, f64, f64) = (1.5e-7, 7.5e-8, 6e-7);

/// A Phoenix this task started; stopped when dropped.
struct Phoenix(Child);

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The records of one call of `session` from sequence `first`, 10 ms apart from `t0`: a user
/// message, call metadata when given (model, message count, finish reason), a streamed
/// answer, and its closing Latency (300 ms) and TokenUsage.
fn call_records(
    session: &str,
    first: u64,
    t0: u64,
    question: &str,
    tokens: &[&str],
    metadata: Option<(&str, u64, &str)>,
) -> Vec<SessionRecord> {
    let mut events = vec![SessionEvent::Message(Message::user(question))];
    if let Some((model, messages, _)) = metadata {
        events.push(SessionEvent::CallRequest {
            model: model.into(),
            parameters: r#"{"max_tokens":12}"#.into(),
            tools: "[]".into(),
            messages,
        });
    }
    events.extend(
        tokens
            .iter()
            .map(|t| SessionEvent::Output { text: (*t).into() }),
    );
    if let Some((model, _, finish)) = metadata {
        events.push(SessionEvent::CallFinish {
            finish_reason: Some(finish.into()),
            model: format!("{model}-2024-07-18"),
        });
    }
    if metadata.is_some() {
        // What a proxy records for a call whose answer reported cache reads: every kind.
        events.push(SessionEvent::TokenDetail(TokenDetail {
            prompt: Some(20 + first),
            output: Some(tokens.len() as u64),
            cache_read: Some(CACHE_READ),
            ..TokenDetail::default()
        }));
    }
    events.push(SessionEvent::Latency { duration_ms: 300 });
    events.push(SessionEvent::TokenUsage {
        prompt_tokens: 20 + first,
        completion_tokens: tokens.len() as u64,
    });
    events
        .into_iter()
        .enumerate()
        .map(|(i, event)| SessionRecord {
            session_id: session.into(),
            sequence: first + i as u64,
            timestamp_ms: t0 + i as u64 * 10,
            event,
        })
        .collect()
}

fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// The fixture set's session ids and the records that end the call in flight.
struct FixtureSet {
    fork: String,
    cut: String,
    twice: String,
    rest_of_in_flight: Vec<SessionRecord>,
}

const PROXIED: &str = "proxied";

/// Builds the sessions under `dir` (through `FileBackend`, forks with its `fork`) and the
/// call log at `calls` (through the `CallLog` writer).
fn build(root: &Path, dir: &Path, calls: &Path) -> anyhow::Result<FixtureSet> {
    std::fs::create_dir_all(dir)?;
    for name in ["demo.cslog", "reasoning.cslog"] {
        std::fs::copy(root.join("fixtures/sessions").join(name), dir.join(name))
            .with_context(|| format!("copying fixtures/sessions/{name}"))?;
    }
    let file = FileBackend::new(dir)?;
    let append = |records: &[SessionRecord]| -> anyhow::Result<()> {
        for record in records {
            file.append(record.clone())?;
        }
        Ok(())
    };
    let demo = file.replay("demo")?;
    let first_end = demo
        .iter()
        .find(|r| matches!(r.event, SessionEvent::TokenUsage { .. }))
        .context("demo has no call")?
        .sequence;
    let at = demo.last().context("demo is empty")?.sequence + 1;
    let fork = file.fork("demo", &format!("demo:{first_end}"))?;
    append(&call_records(
        &fork,
        at,
        T0,
        "And the key?",
        &["Under", " the", " mat"],
        None,
    ))?;
    let cut = file.fork(&fork, &format!("{fork}:{}", at + 1))?;
    let twice = file.fork(&fork, &format!("{fork}:{}", at + 5))?;
    append(&call_records(
        &twice,
        at + 6,
        T0 + 1_000,
        "And the door?",
        &["Red"],
        None,
    ))?;
    append(&call_records(
        PROXIED,
        0,
        T0 + 10_000,
        "one",
        &["o", "ne"],
        Some((PROXIED_MODEL, 1, "stop")),
    ))?;
    // Each proxied call is 8 records (question, CallRequest, 2 blocks, CallFinish,
    // TokenDetail, Latency, TokenUsage): the next starts 8 on.
    append(&call_records(
        PROXIED,
        8,
        T0 + 20_000,
        "two",
        &["t", "wo"],
        Some((PROXIED_MODEL, 3, "length")),
    ))?;
    let mut in_flight = call_records(
        PROXIED,
        16,
        T0 + 30_000,
        "three",
        &["thr"],
        Some((PROXIED_MODEL, 5, "stop")),
    );
    let rest_of_in_flight = in_flight.split_off(3);
    append(&in_flight)?;

    let log = cuca_calllog::CallLog::builder()
        .path(Some(calls.to_path_buf()))
        .build();
    for (id, node, start, end, messages) in [
        ("p1", PROXIED, T0 + 10_050 - 300, Some(T0 + 10_050), 1),
        ("p2", PROXIED, T0 + 20_050 - 300, Some(T0 + 20_050), 3),
        ("b1", "", T0 + 40_000, Some(T0 + 40_300), 2),
        ("p3", PROXIED, T0 + 30_000, None, 5),
    ] {
        log.append(call_row(
            id,
            node,
            cuca_calllog::PHASE_START,
            start,
            messages,
        ));
        if let Some(end) = end {
            log.append(end_row(id, node, end));
        }
    }
    log.close();
    Ok(FixtureSet {
        fork,
        cut,
        twice,
        rest_of_in_flight,
    })
}

fn call_row(id: &str, node: &str, phase: &str, ts: u64, messages: u64) -> cuca_calllog::Record {
    cuca_calllog::Record {
        ts: rfc3339(ts),
        id: id.into(),
        run: if node.is_empty() {
            "batch"
        } else {
            "proxy-run"
        }
        .into(),
        node: node.into(),
        tag: "proxy".into(),
        model: PROXIED_MODEL.into(),
        phase: phase.into(),
        attempt: 1,
        messages,
        ..cuca_calllog::Record::default()
    }
}

fn end_row(id: &str, node: &str, ts: u64) -> cuca_calllog::Record {
    cuca_calllog::Record {
        status: 200,
        finish: "stop".into(),
        prompt_tokens: 99,
        completion_tokens: 9,
        ms: 300,
        ..call_row(id, node, "", ts, 0)
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
        .env("PHOENIX_TELEMETRY_ENABLED", "false")
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log))
        .spawn()
        .with_context(|| format!("starting {}", phoenix.display()))?;
    let _phoenix = Phoenix(child);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    wait_for(STARTUP_WAIT, "Phoenix to answer /healthz", || {
        Ok(get(addr, "/healthz").is_ok_and(|(status, _)| status == 200))
    })?;

    let sessions = work.join("sessions");
    let calls = work.join("calls.jsonl");
    let set = build(&root, &sessions, &calls)?;
    let endpoint = format!("http://127.0.0.1:{port}");
    export(&root, &endpoint, &sessions, &calls)?;
    let first = spans_in(addr, FIRST_SPANS)?;
    check_first(&first, &set)?;

    // The call in flight ends, in the session and in the call log; the re-export must show
    // it, and change nothing Phoenix already holds.
    {
        let file = FileBackend::new(&sessions)?;
        for record in &set.rest_of_in_flight {
            file.append(record.clone())?;
        }
    }
    let log = cuca_calllog::CallLog::builder()
        .path(Some(calls.clone()))
        .build();
    log.append(end_row("p3", PROXIED, T0 + 30_060));
    log.close();
    export(&root, &endpoint, &sessions, &calls)?;
    let second = spans_in(addr, FIRST_SPANS + 1)?;
    check_re_export(&first, &second)?;
    check_sessions(addr)?;
    println!(
        "e2e-phoenix: ok ({} spans in Phoenix {PHOENIX_VERSION}'s API, project {PROJECT})",
        second.len()
    );
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

/// Runs `cuca export-otlp` on the fixture set.
fn export(root: &Path, endpoint: &str, sessions: &Path, calls: &Path) -> anyhow::Result<()> {
    println!("e2e-phoenix: cuca export-otlp --endpoint {endpoint} --with-content --project {PROJECT} --sessions {} --calls {}", sessions.display(), calls.display());
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(root)
        .args([
            "run",
            "--quiet",
            "-p",
            "cuca-cli",
            "--",
            "export-otlp",
            "--endpoint",
        ])
        .arg(endpoint)
        .args([
            "--provider",
            "llamacpp",
            "--with-content",
            "--project",
            PROJECT,
            "--sessions",
        ])
        .arg(sessions)
        .arg("--calls")
        .arg(calls)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .status()
        .context("running cuca export-otlp")?;
    ensure!(status.success(), "cuca export-otlp failed ({status})");
    Ok(())
}

/// The project's spans once Phoenix holds at least `n`.
fn spans_in(addr: SocketAddr, n: usize) -> anyhow::Result<Vec<Value>> {
    let mut spans = Vec::new();
    wait_for(INGEST_WAIT, "Phoenix to hold every exported span", || {
        let (status, body) = get(addr, &format!("/v1/projects/{PROJECT}/spans?limit=1000"))?;
        if status == 404 {
            return Ok(false);
        }
        ensure!(
            status == 200,
            "GET /v1/projects/{PROJECT}/spans answered {status}: {body}"
        );
        let value: Value = serde_json::from_str(&body).context("Phoenix's span list")?;
        spans = value["data"].as_array().cloned().unwrap_or_default();
        Ok(spans.len() >= n)
    })?;
    ensure!(
        spans.len() == n,
        "Phoenix holds {} spans, the export sent {n}",
        spans.len()
    );
    Ok(spans)
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

fn session_of(span: &Value) -> &str {
    attr(span, "session.id").as_str().unwrap_or("")
}

/// The checks on the first export, one numbered block per point the export must meet.
fn check_first(spans: &[Value], set: &FixtureSet) -> anyhow::Result<()> {
    let llm: Vec<&Value> = spans.iter().filter(|s| s["span_kind"] == "LLM").collect();
    ensure!(
        llm.len() == FIRST_SPANS - 1,
        "{} LLM spans, one per call made: {}",
        llm.len(),
        FIRST_SPANS - 1
    );
    // 1. Answers: Phoenix read each answer (the finish reason the schema requires, one
    //    joined text), so its Output is the answer, not `{"model": …}`.
    for span in llm.iter().filter(|s| session_of(s) != "batch") {
        let name = &span["name"];
        ensure!(
            attr(span, "llm.output_messages.0.message.finish_reason").is_string(),
            "{name} ({}): Phoenix shows no finish reason, so no answer",
            session_of(span)
        );
        // Phoenix flattens an answer of several parts into `contents.N`; a joined answer has
        // at most one text among them (beside its reasoning).
        let texts = (0..64)
            .filter(|n| {
                attr(
                    span,
                    &format!("llm.output_messages.0.message.contents.{n}.message_content.type"),
                ) == "text"
            })
            .count();
        ensure!(
            texts <= 1,
            "{name}: the answer is {texts} text parts in Phoenix"
        );
        let output = attr(span, "output.value").as_str().unwrap_or("");
        ensure!(
            !output.starts_with("{\"model\""),
            "{name}: Phoenix's output is {output}"
        );
    }
    let two = llm
        .iter()
        .find(|s| session_of(s) == PROXIED && attr(s, "cuca.call_log.id") == "p2")
        .context("the proxy session's second call is not one span with its call-log row")?;
    ensure!(
        attr(two, "llm.output_messages.0.message.content") == "two",
        "the proxied answer: {}",
        attr(two, "llm.output_messages.0.message.content")
    );
    ensure!(attr(two, "llm.output_messages.0.message.finish_reason") == "length");
    // 2. One span per call: the proxied calls are the session's spans, tokens once.
    let proxied: Vec<&&Value> = llm.iter().filter(|s| session_of(s) == PROXIED).collect();
    ensure!(
        proxied.len() == 2,
        "{} spans for the proxy session's 2 ended calls",
        proxied.len()
    );
    let prompt: i64 = proxied
        .iter()
        .filter_map(|s| attr(s, "llm.token_count.prompt").as_i64())
        .sum();
    ensure!(
        prompt == 20 + 28,
        "Phoenix counts {prompt} prompt tokens for the proxy session, the session says 48"
    );
    // Cache hits, as Phoenix stores them on each call's span.
    for span in &proxied {
        let read = attr(span, "llm.token_count.prompt_details.cache_read").as_i64();
        ensure!(
            read == Some(CACHE_READ as i64),
            "{}: Phoenix stores {read:?} cache-read tokens, the call read {CACHE_READ}",
            span["name"]
        );
    }
    // Cost, as Phoenix stores it on each call's span: the kinds priced apart (OpenAI's prompt
    // counts its cache reads; they cost less).
    for span in &proxied {
        let prompt = attr(span, "llm.token_count.prompt").as_i64().unwrap_or(0) as f64;
        let output = attr(span, "llm.token_count.completion")
            .as_i64()
            .unwrap_or(0) as f64;
        let (input_rate, cache_rate, output_rate) = PROXIED_PRICES;
        let read = CACHE_READ as f64;
        let expected = (prompt - read) * input_rate + read * cache_rate + output * output_rate;
        let total = attr(span, "llm.cost.total").as_f64();
        ensure!(
            total.is_some_and(|total| (total - expected).abs() < 1e-12),
            "{}: Phoenix stores a cost of {total:?}, the call cost {expected}",
            span["name"]
        );
    }
    // 3. Forks: no copied or cut-off call; the fork of a fork's own call links what it copied.
    for (session, calls) in [
        ("demo", 2),
        (set.fork.as_str(), 1),
        (set.cut.as_str(), 0),
        (set.twice.as_str(), 1),
    ] {
        let n = llm.iter().filter(|s| session_of(s) == session).count();
        ensure!(
            n == calls,
            "Phoenix holds {n} calls of {session}, it made {calls}"
        );
    }
    // 4. Latency: no span longer than its call's recorded Latency.
    for span in llm.iter().filter(|s| session_of(s) != "batch") {
        let latency = millis(&span["end_time"])? - millis(&span["start_time"])?;
        let recorded = attr(span, "cuca.duration_ms").as_i64().unwrap_or(-1);
        ensure!(
            latency == recorded,
            "{}: Phoenix shows {latency} ms, the call took {recorded}",
            span["name"]
        );
    }
    // 5. Roots, kinds, sessions and statuses.
    for span in spans {
        ensure!(
            !session_of(span).is_empty(),
            "{} has no session.id in Phoenix",
            span["name"]
        );
        ensure!(
            span["status_code"] == "OK",
            "{}: status {}",
            span["name"],
            span["status_code"]
        );
        let root = span["parent_id"].is_null();
        ensure!(
            root == (span["span_kind"] == "LLM"),
            "{}: kind {} root {root}",
            span["name"],
            span["span_kind"]
        );
        if !root {
            ensure!(
                span["span_kind"] == "CHAIN",
                "{}: an attempt is {}",
                span["name"],
                span["span_kind"]
            );
        }
    }
    // 6. A proxy session records the model and the finish reason, and Phoenix shows both.
    ensure!(
        attr(two, "llm.model_name").as_str()
            == Some(format!("{PROXIED_MODEL}-2024-07-18").as_str()),
        "model {}",
        attr(two, "llm.model_name")
    );
    ensure!(
        attr(two, "llm.finish_reason") == "length",
        "finish reason {}",
        attr(two, "llm.finish_reason")
    );
    Ok(())
}

/// The re-export: every span Phoenix held is unchanged, and the call that ended is there.
fn check_re_export(first: &[Value], second: &[Value]) -> anyhow::Result<()> {
    let id = |s: &Value| s["context"]["span_id"].as_str().unwrap_or("").to_owned();
    let grown: Vec<&Value> = second
        .iter()
        .filter(|s| !first.iter().any(|f| id(f) == id(s)))
        .collect();
    ensure!(
        grown.len() == 1,
        "{} new spans after the call ended, expected 1",
        grown.len()
    );
    let ended = grown[0];
    ensure!(
        attr(ended, "cuca.call_log.id") == "p3",
        "the new span is not the ended call: {ended}"
    );
    ensure!(
        attr(ended, "llm.token_count.completion") == 1,
        "the ended call's tokens: {}",
        attr(ended, "llm.token_count.completion")
    );
    Ok(())
}

/// Phoenix's Sessions tab: the proxy session groups its three traces, with the session's
/// token total, and shows a first input and a last output.
fn check_sessions(addr: SocketAddr) -> anyhow::Result<()> {
    let (status, body) = get(addr, &format!("/v1/projects/{PROJECT}/sessions?limit=100"))?;
    ensure!(
        status == 200,
        "GET /v1/projects/{PROJECT}/sessions answered {status}: {body}"
    );
    let value: Value = serde_json::from_str(&body).context("Phoenix's session list")?;
    let sessions = value["data"].as_array().cloned().unwrap_or_default();
    let proxied = sessions
        .iter()
        .find(|s| s["session_id"] == PROXIED)
        .with_context(|| format!("no session {PROXIED} in Phoenix: {body}"))?;
    let traces = proxied["traces"].as_array().map_or(0, Vec::len);
    ensure!(
        traces == 3,
        "Phoenix groups {traces} traces under {PROXIED}, it made 3 calls"
    );
    ensure!(
        proxied["token_count_prompt"] == 20 + 28 + 36,
        "Phoenix's prompt total for {PROXIED}: {}",
        proxied["token_count_prompt"]
    );
    let demo = sessions
        .iter()
        .find(|s| s["session_id"] == "demo")
        .context("no session demo in Phoenix")?;
    let traces = demo["traces"].as_array().map_or(0, Vec::len);
    ensure!(
        traces == 2,
        "Phoenix groups {traces} traces under demo, it made 2 calls"
    );
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
