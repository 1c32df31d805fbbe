//! A fleet on one store: several real `cuca proxy` processes record into one
//! PostgreSQL schema through the real Python `openai` package, and `cuca verify`, `cuca view`
//! and the store itself see every call of every proxy; a PostgreSQL restart mid-run costs no
//! caller's answer and no acknowledged record; a proxy SIGKILLed mid-stream leaves a session
//! another proxy continues; a database that refuses is an error naming the store. The session
//! commands on a database: `grep` (and its trouble status), `run --store`, `sessions` and
//! `verify` sizes, `compact` and `repair` refusing it; and `cuca view --store URL` in Chromium
//! (the driver shared with cuca-view's browser tests, by path).
//!
//! Needs `CUCA_PG_URL` (a server `.ci/postgres.sh` started) and `CUCA_TEST_PYTHON` (a Python
//! with the `openai` package, as `.ci/run` makes): without them each test prints why and
//! skips; under `CI` a missing one fails.
// Helpers outside `#[test]` functions unwrap too: a failure there is a failed test.
#![allow(clippy::unwrap_used)]

#[path = "../../cuca-view/tests/chromium/mod.rs"]
mod chromium;
mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use common::{serving_with, Killed};
use cuca::{Message, PostgresBackend, PostgresConfig, SessionBackend, SessionEvent, SessionRecord};
use futures::StreamExt as _;
use serde_json::Value;

/// `name` from the environment, or `None` with the reason printed (a panic under `CI`).
fn required(name: &str, why: &str) -> Option<String> {
    match std::env::var(name).ok().filter(|value| !value.is_empty()) {
        Some(value) => Some(value),
        None if std::env::var_os("CI").is_some() => {
            panic!("CI is set but {name} is not: {why}")
        }
        None => {
            eprintln!("skipped: {name} is unset ({why})");
            None
        }
    }
}

/// The server and the Python, or `None` when the test skips.
fn needs() -> Option<(String, PathBuf)> {
    let url = required(
        "CUCA_PG_URL",
        "run `bash .ci/postgres.sh start env` and `. ./env` for the PostgreSQL fleet tests",
    )?;
    let python = required(
        "CUCA_TEST_PYTHON",
        "a Python with the openai package; .ci/run makes target/py-venv",
    )?;
    Some((url, PathBuf::from(python)))
}

/// The server alone, or `None` when the test skips (a panic under `CI`).
fn needs_pg() -> Option<String> {
    required(
        "CUCA_PG_URL",
        "run `bash .ci/postgres.sh start env` and `. ./env` for the PostgreSQL fleet tests",
    )
}

/// The test server's URL with a password in it: the server trusts loopback and never asks
/// for it, so a command must work with it all the same and never print it.
const PASSWORD: &str = "s3cret-fleet";

fn with_password(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((user, host)) if !user.contains(':') => {
                format!("{scheme}://{user}:{PASSWORD}@{host}")
            }
            _ => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// How a command names the store again ("look at it with …"): the URL without the password,
/// then the schema.
fn command_form(url: &str, schema: &str) -> String {
    let url = PostgresConfig::new(url).unwrap().url_without_password();
    assert!(!url.contains(PASSWORD), "{url}");
    format!("{url} --schema {schema}")
}

fn append(store: &dyn SessionBackend, session: &str, events: Vec<SessionEvent>) {
    for (sequence, event) in events.into_iter().enumerate() {
        store
            .append(SessionRecord {
                session_id: session.into(),
                sequence: sequence as u64,
                timestamp_ms: 1_700_000_000_000 + sequence as u64,
                event,
            })
            .unwrap();
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A schema of its own on the test server, dropped when the returned backend is.
fn schema(url: &str) -> PostgresBackend {
    let config = PostgresConfig::new(url).unwrap().with_throwaway_schema();
    PostgresBackend::connect(config).unwrap()
}

/// The words the scripted upstream streams for a request whose last user message is `ask`.
fn answer_words(ask: &str, n_chunks: usize) -> Vec<String> {
    (0..n_chunks).map(|k| format!("{ask}/{k} ")).collect()
}

/// A loopback OpenAI-compatible upstream that streams `n_chunks` content chunks naming the
/// request's last user message (one every `pause`), then finish, usage and `[DONE]`.
fn start_upstream(n_chunks: usize, pause: Duration) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let chat = move |body: axum::body::Bytes| async move {
                let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let ask = request["messages"]
                    .as_array()
                    .and_then(|messages| {
                        messages.iter().rev().find(|m| m["role"] == "user")
                    })
                    .and_then(|m| m["content"].as_str())
                    .unwrap_or("?")
                    .to_owned();
                let mut events: Vec<String> = answer_words(&ask, n_chunks)
                    .into_iter()
                    .map(|word| {
                        serde_json::json!({"model": "fleet", "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": null}]}).to_string()
                    })
                    .collect();
                events.push(r#"{"model":"fleet","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#.into());
                events.push(r#"{"model":"fleet","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5}}"#.into());
                events.push("[DONE]".into());
                let stream = futures::stream::iter(events).then(move |event| async move {
                    if !pause.is_zero() {
                        tokio::time::sleep(pause).await;
                    }
                    Ok::<_, std::io::Error>(axum::body::Bytes::from(format!("data: {event}\n\n")))
                });
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

/// A `cuca proxy` recording into `schema` at `url`, its call log in `dir`; stderr piped.
fn start_proxy(url: &str, schema: &str, upstream: &str, dir: &Path) -> (Killed, String) {
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("cuca"));
    command
        .args(["proxy", "--listen", "127.0.0.1:0", "--upstream", upstream])
        .args(["--store", url, "--schema", schema])
        .env_remove("CUCA_CALL_LOG_BODIES")
        .env_remove("RUST_LOG")
        .env("CUCA_CALL_LOG", dir.join("calls.jsonl"))
        .stderr(Stdio::piped());
    let (child, address, _stdout) = serving_with(command, "listening on http://");
    (child, address)
}

/// drive.py against `proxy`: `n_sessions` concurrent sessions `{prefix}-s{i}` of `n_calls`
/// streamed calls each; their answers and the errors the SDK raised.
fn drive(
    python: &Path,
    proxy: &str,
    prefix: &str,
    n_sessions: usize,
    n_calls: usize,
) -> std::process::Child {
    drive_with(python, proxy, prefix, n_sessions, n_calls, &[])
}

/// [`drive`] with drive.py's extra arguments (`shared`: every thread on the default session).
fn drive_with(
    python: &Path,
    proxy: &str,
    prefix: &str,
    n_sessions: usize,
    n_calls: usize,
    extra: &[&str],
) -> std::process::Child {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fleet/drive.py");
    std::process::Command::new(python)
        .arg(script)
        .arg(proxy)
        .arg(prefix)
        .arg(n_sessions.to_string())
        .arg(n_calls.to_string())
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn driven(child: std::process::Child) -> (BTreeMap<String, Vec<String>>, Vec<String>) {
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "drive.py failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let value: Value = serde_json::from_slice(&output.stdout).unwrap();
    (
        serde_json::from_value(value["answers"].clone()).unwrap(),
        serde_json::from_value(value["errors"].clone()).unwrap(),
    )
}

/// Every Output text of `session`, joined per call (a call ends at its `CallFinish`).
fn recorded_answers(backend: &dyn SessionBackend, session: &str) -> Vec<String> {
    let mut calls = Vec::new();
    let mut open = String::new();
    for record in backend.replay(session).unwrap() {
        match record.event {
            SessionEvent::Output { text } => open.push_str(&text),
            SessionEvent::CallFinish { .. } => calls.push(std::mem::take(&mut open)),
            _ => {}
        }
    }
    calls
}

fn cuca_out(args: &[&str]) -> std::process::Output {
    common::cuca().args(args).output().unwrap()
}

fn http_get(address: &str, path: &str) -> String {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// A fleet end to end: 4 `cuca proxy` processes × 25 concurrent streamed sessions each through
/// the real Python `openai` package, then `cuca verify --store URL` clean and every call's
/// answer present in order; `cuca view --store URL` shows sessions from all four.
#[test]
fn four_proxies_record_a_hundred_concurrent_sessions_into_one_schema() {
    let Some((url, python)) = needs() else { return };
    let store = schema(&url);
    let schema = store.schema().to_owned();
    let dir = tempfile::tempdir().unwrap();
    const CHUNKS: usize = 40;
    let upstream = start_upstream(CHUNKS, Duration::ZERO);
    let proxies: Vec<(Killed, String)> = (0..4)
        .map(|p| {
            let log = dir.path().join(format!("p{p}"));
            std::fs::create_dir_all(&log).unwrap();
            start_proxy(&url, &schema, &upstream, &log)
        })
        .collect();
    let drivers: Vec<_> = proxies
        .iter()
        .enumerate()
        .map(|(p, (_, address))| {
            drive(
                &python,
                &format!("http://{address}"),
                &format!("p{p}"),
                25,
                2,
            )
        })
        .collect();
    let mut answers = BTreeMap::new();
    for driver in drivers {
        let (got, errors) = driven(driver);
        assert!(errors.is_empty(), "{errors:?}");
        answers.extend(got);
    }
    assert_eq!(answers.len(), 100);
    for (session, got) in &answers {
        let expected: Vec<String> = (0..2)
            .map(|call| answer_words(&format!("{session} call {call}"), CHUNKS).concat())
            .collect();
        assert_eq!(got, &expected, "what the SDK got on {session}");
        assert_eq!(
            &recorded_answers(&store, session),
            &expected,
            "what the store holds for {session}, in order"
        );
    }

    let verify = cuca_out(&["verify", &url, "--schema", &schema]);
    let stdout = String::from_utf8_lossy(&verify.stdout);
    assert!(
        verify.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    assert!(
        stdout.contains("100 sessions")
            && stdout.contains("100 clean, 0 recovered (loadable), 0 refused"),
        "{stdout}"
    );
    assert!(!stdout.contains("not recorded in full"), "{stdout}");

    let mut viewer = std::process::Command::new(assert_cmd::cargo::cargo_bin("cuca"));
    viewer
        .args([
            "view",
            "--listen",
            "127.0.0.1:0",
            "--store",
            &url,
            "--schema",
            &schema,
        ])
        .env("CUCA_CALL_LOG", dir.path().join("none.jsonl"))
        .stderr(Stdio::null());
    let (_view, address, _out) = serving_with(viewer, "cuca view: http://");
    let page = http_get(&address, "/");
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    for p in 0..4 {
        assert!(
            page.contains(&format!("p{p}-s24")),
            "the list shows proxy {p}'s sessions"
        );
    }
    assert!(
        !page.contains("postgres@"),
        "the page names no user or password"
    );
    let session = http_get(&address, "/sessions/p3-s7");
    assert!(
        session.starts_with("HTTP/1.1 200") && session.contains("p3-s7 call 1/39"),
        "{session}"
    );
    drop(proxies);
    eprintln!("FIGURES fleet: 4 proxies, 100 sessions, 200 calls answered and recorded whole");
}

/// "Many proxies, one database … sessions, conversations … are consistent", with agents that
/// never name a session: 4 `cuca proxy` processes × 5 concurrent conversations each through
/// the real `openai` package, all on the proxies' default session of one schema. Each
/// conversation is one session of its own (`default`, `default:conv:N`), whole and in order,
/// and `cuca verify` finds the store clean and replayable.
#[test]
fn four_proxies_on_one_default_session_keep_twenty_conversations_apart() {
    let Some((url, python)) = needs() else { return };
    let store = schema(&url);
    let schema = store.schema().to_owned();
    let dir = tempfile::tempdir().unwrap();
    const CHUNKS: usize = 8;
    let upstream = start_upstream(CHUNKS, Duration::from_millis(2));
    let proxies: Vec<(Killed, String)> = (0..4)
        .map(|p| {
            let log = dir.path().join(format!("p{p}"));
            std::fs::create_dir_all(&log).unwrap();
            start_proxy(&url, &schema, &upstream, &log)
        })
        .collect();
    let drivers: Vec<_> = proxies
        .iter()
        .enumerate()
        .map(|(p, (_, address))| {
            drive_with(
                &python,
                &format!("http://{address}"),
                &format!("p{p}"),
                5,
                3,
                &["shared"],
            )
        })
        .collect();
    let mut answers = BTreeMap::new();
    for driver in drivers {
        let (got, errors) = driven(driver);
        assert!(errors.is_empty(), "{errors:?}");
        answers.extend(got);
    }
    assert_eq!(answers.len(), 20);
    let conversations: Vec<String> = store
        .sessions()
        .unwrap()
        .into_iter()
        .filter(|id| id == "default" || id.starts_with("default:conv:"))
        .collect();
    let users = |id: &str| -> Vec<String> {
        store
            .replay(id)
            .unwrap()
            .into_iter()
            .filter_map(|r| match r.event {
                SessionEvent::Message(m) => Some(format!(
                    "{} {:?}: {}",
                    r.sequence,
                    m.role,
                    m.text().chars().take(20).collect::<String>()
                )),
                SessionEvent::CallIncomplete { reason } => {
                    Some(format!("{} incomplete: {reason}", r.sequence))
                }
                _ => None,
            })
            .collect()
    };
    let all: BTreeMap<&String, Vec<String>> =
        conversations.iter().map(|id| (id, users(id))).collect();
    assert_eq!(conversations.len(), 20, "{all:#?}");
    let stored: BTreeMap<&String, Vec<String>> = conversations
        .iter()
        .map(|id| (id, recorded_answers(&store, id)))
        .collect();
    for (name, got) in &answers {
        let expected: Vec<String> = (0..3)
            .map(|call| answer_words(&format!("{name} call {call}"), CHUNKS).concat())
            .collect();
        assert_eq!(got, &expected, "what the SDK got on {name}");
        let holding: Vec<_> = stored
            .iter()
            .filter(|(_, calls)| calls.iter().any(|call| expected.contains(call)))
            .collect();
        assert_eq!(holding.len(), 1, "{name} is in one session: {stored:#?}");
        let dump: Vec<String> = store
            .replay(holding[0].0)
            .unwrap()
            .iter()
            .map(|r| {
                format!("{} {} {:?}", r.sequence, r.event.kind(), r.event)
                    .chars()
                    .take(120)
                    .collect()
            })
            .collect();
        assert_eq!(
            holding[0].1, &expected,
            "{name} whole and in order: {dump:#?}"
        );
    }
    let verify = cuca_out(&["verify", &url, "--schema", &schema]);
    assert!(
        verify.status.success(),
        "{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    drop(proxies);
}

/// "PostgreSQL restarted in the middle of a run → the proxy answers its callers (recording
/// fails loudly per call, in the call log and on stderr; the caller's answer is never lost or
/// delayed by the store), reconnects, and resumes; nothing it acknowledged is lost". On a
/// server of the test's own (the shared one keeps serving the other tests).
///
/// In one CI run it once found 2 of 96 calls that the call log called recorded read back
/// wrong: a call whose end was lost in the restart was left open, the next call's check failed
/// (the loss was reported to it rather than to its own call) and it was recorded into the
/// open call anyway. Both are fixed (`a_failed_batch_reports_its_lost_blocks_to_the_record_
/// that_waited_behind_them` in cuca-store-postgres, `a_call_is_never_recorded_into_a_call_the_
/// store_left_open` in cuca-proxy); this test is in the default suite again.
#[test]
fn a_postgres_restart_mid_run_loses_no_answer_and_no_acknowledged_record() {
    let Some((_, python)) = needs() else { return };
    let server = PrivateServer::start();
    let url = server.url.clone();
    let store = schema(&url);
    let schema = store.schema().to_owned();
    let dir = tempfile::tempdir().unwrap();
    const CHUNKS: usize = 10;
    let upstream = start_upstream(CHUNKS, Duration::from_millis(15));
    let (mut proxy, address) = start_proxy(&url, &schema, &upstream, dir.path());
    // 8 sessions × 12 calls of ~150 ms each: about 1.8 s of traffic; the restart lands in it.
    let driver = drive(&python, &format!("http://{address}"), "r", 8, 12);
    // Once the first calls are recorded (polled: Python takes a while to start), restart.
    for _ in 0..500 {
        if recorded_answers(&store, "r-s0").len() >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        recorded_answers(&store, "r-s0").len() >= 2,
        "the run started"
    );
    server.restart();
    let (answers, errors) = driven(driver);
    assert!(errors.is_empty(), "every caller got its answer: {errors:?}");
    let mut answered = 0;
    for (session, got) in &answers {
        let expected: Vec<String> = (0..12)
            .map(|call| answer_words(&format!("{session} call {call}"), CHUNKS).concat())
            .collect();
        assert_eq!(got, &expected, "{session}");
        answered += got.len();
    }
    assert_eq!(answered, 96);
    // The call log: a row per call, those the store refused saying so.
    let log = std::fs::read_to_string(dir.path().join("calls.jsonl")).unwrap();
    let ends: Vec<Value> = log
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|row| row.get("phase").is_none())
        .collect();
    assert_eq!(ends.len(), 96, "{log}");
    let refused: Vec<&Value> = ends
        .iter()
        .filter(|row| {
            row["error"]
                .as_str()
                .is_some_and(|e| e.starts_with("the session does not hold this call in full"))
        })
        .collect();
    // Every call the log calls recorded is in the store whole (nothing acknowledged lost).
    let reopened = PostgresBackend::connect(
        PostgresConfig::new(&url)
            .unwrap()
            .with_schema(&schema)
            .unwrap(),
    )
    .unwrap();
    let mut recorded = 0;
    for (session, got) in &answers {
        let stored = recorded_answers(&reopened, session);
        recorded += got.iter().filter(|answer| stored.contains(answer)).count();
        // A session's calls are one at a time, so its rows are in call order: each call
        // its row calls recorded is stored whole, as a turn of its own.
        let rows: Vec<&Value> = ends
            .iter()
            .filter(|row| row["node"].as_str() == Some(session.as_str()))
            .collect();
        assert_eq!(rows.len(), got.len(), "{session}: {log}");
        for (call, (row, answer)) in rows.iter().zip(got).enumerate() {
            if row["error"].is_null() {
                assert!(
                    stored.contains(answer),
                    "{session} call {call} was acknowledged but is not stored whole: {row} (stored: {stored:?})"
                );
            }
        }
    }
    assert!(
        recorded >= 96 - refused.len(),
        "acknowledged calls are stored whole: {recorded} stored, {} refused",
        refused.len()
    );
    assert!(!refused.is_empty(), "the restart fell within the run");
    // Resumed: the last call of every session came after the restart and is recorded.
    for (session, got) in &answers {
        assert!(
            recorded_answers(&reopened, session).last() == got.last(),
            "{session} resumed recording after the restart"
        );
    }
    let _ = proxy.0.kill();
    let _ = proxy.0.wait();
    let mut stderr = String::new();
    proxy
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        stderr.contains("not recorded in full"),
        "loudly on stderr: {stderr}"
    );
    eprintln!(
        "FIGURES fleet restart: answered={answered} recorded={recorded} refused_records_calls={}",
        refused.len()
    );
    drop(reopened);
    drop(store);
}

/// "a proxy SIGKILLed mid-stream leaves a session the others can continue and replay".
#[test]
fn a_proxy_killed_mid_stream_leaves_a_session_another_continues() {
    let Some((url, python)) = needs() else { return };
    let store = schema(&url);
    let schema = store.schema().to_owned();
    let dir = tempfile::tempdir().unwrap();
    // 800 chunks of ~16 bytes, one every 10 ms: the proxy holds the last 4-5 KiB of streamed
    // text back from the store until it is redacted as one (`redaction::HOLD_BYTES`), so the
    // first blocks reach the store after ~330 chunks, and the kill still lands mid-stream,
    // seconds before its end, however loaded the machine is.
    let slow = start_upstream(800, Duration::from_millis(10));
    let (mut first, address) = start_proxy(&url, &schema, &slow, dir.path());
    let driver = drive(&python, &format!("http://{address}"), "k", 1, 1);
    // Until some of the answer is recorded (the store is polled, not slept on blindly).
    let mut seen = 0;
    for _ in 0..1_000 {
        seen = store
            .replay("k-s0")
            .unwrap()
            .iter()
            .filter(|r| matches!(r.event, SessionEvent::Output { .. }))
            .count();
        if seen >= 5 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(seen >= 5, "blocks were recorded mid-stream: {seen}");
    // SIGKILL: no shutdown, nothing flushed.
    first.0.kill().unwrap();
    let _ = first.0.wait();
    let (_, errors) = driven(driver);
    assert!(!errors.is_empty(), "the caller saw the proxy die");

    let fast = start_upstream(5, Duration::ZERO);
    let (_second, address) = start_proxy(&url, &schema, &fast, dir.path());
    let (answers, errors) = driven(drive(&python, &format!("http://{address}"), "k", 1, 1));
    assert!(errors.is_empty(), "{errors:?}");
    let expected = answer_words("k-s0 call 0", 5).concat();
    assert_eq!(answers["k-s0"], std::slice::from_ref(&expected));
    assert_eq!(recorded_answers(&store, "k-s0").last(), Some(&expected));
    let replay = cuca_out(&["replay", &url, "--schema", &schema, "k-s0"]);
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    let verify = cuca_out(&["verify", &url, "--schema", &schema]);
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

/// "A database that refuses (permissions, disk full) is a clear error naming the store."
#[test]
fn a_database_that_refuses_is_an_error_naming_the_store() {
    let Some((url, _)) = needs() else { return };
    // A role that may connect but not create a schema (PUBLIC has no CREATE on a database).
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .batch_execute(
            "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'cuca_fleet_nobody') THEN CREATE ROLE cuca_fleet_nobody LOGIN; END IF; END $$;",
        )
        .unwrap();
    drop(admin);
    let config = PostgresConfig::new(&url).unwrap();
    let host = config.describe();
    let nobody = format!("postgres://cuca_fleet_nobody@{host}");
    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(assert_cmd::cargo::cargo_bin("cuca"))
        .args([
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "http://127.0.0.1:9",
        ])
        .args(["--store", &nobody, "--schema", "cuca_fleet_refused"])
        .env("CUCA_CALL_LOG", dir.path().join("calls.jsonl"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("store postgres {host} schema cuca_fleet_refused"))
            && stderr.contains("permission denied"),
        "{stderr}"
    );
}

/// A PostgreSQL server of the test's own, from `.ci/postgres.sh` on a port and directory no
/// other run uses; stopped and deleted on drop.
struct PrivateServer {
    url: String,
    env: Vec<(String, String)>,
}

impl PrivateServer {
    fn script() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/postgres.sh")
    }

    fn run(&self, what: &str) {
        let output = std::process::Command::new("bash")
            .arg(Self::script())
            .arg(what)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "postgres.sh {what}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    fn start() -> Self {
        // A port from the pid, away from the shared server's 54329.
        let port = 56000 + std::process::id() % 4000;
        let dir = std::env::temp_dir().join(format!("cuca-fleet-pg-{port}"));
        let mut server = PrivateServer {
            url: format!("postgres://postgres@127.0.0.1:{port}/cuca"),
            env: vec![
                ("CUCA_PG_DIR".into(), dir.display().to_string()),
                ("CUCA_PG_PORT".into(), port.to_string()),
            ],
        };
        server.run("start");
        server.url = format!("postgres://postgres@127.0.0.1:{port}/cuca");
        server
    }

    fn restart(&self) {
        self.run("stop");
        self.run("start");
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg(Self::script())
            .arg("clean")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output();
    }
}

/// Each session command (`sessions`, `show`, `replay`, `verify`, `export`, `import`, `fork`,
/// `diff`, `grep`, `export-otlp`) takes a STORE: `cuca grep` over a
/// PostgreSQL schema finds what a directory's grep finds, names the turn with a command that
/// works on the store, and never prints the password.
#[test]
fn grep_searches_every_session_of_a_postgres_store() {
    let Some(url) = needs_pg() else { return };
    let store = schema(&url);
    let schema = store.schema().to_owned();
    append(
        &store,
        "alpha",
        vec![
            SessionEvent::SystemPrompt {
                text: "You are terse.".into(),
            },
            SessionEvent::Message(Message::user("Where is the vault?")),
            SessionEvent::Output {
                text: "In Lis".into(),
            },
            SessionEvent::Output {
                text: "bon.".into(),
            },
            SessionEvent::Latency { duration_ms: 41 },
            SessionEvent::TokenUsage {
                prompt_tokens: 9,
                completion_tokens: 2,
            },
        ],
    );
    append(
        &store,
        "beta",
        vec![SessionEvent::Message(Message::user("a vault in Porto"))],
    );
    let secret = with_password(&url);
    let grep = |args: &[&str]| {
        common::cuca()
            .args(["grep", &secret, "--schema", &schema])
            .args(args)
            .output()
            .unwrap()
    };
    let found = grep(&["Lisbon"]);
    assert_eq!(found.status.code(), Some(0), "{}", text(&found.stderr));
    assert_eq!(
        text(&found.stdout),
        format!(
            "alpha:2  turn 1  Output  \"In Lisbon.\"  (cuca replay {} alpha --turn 1)\n",
            command_form(&url, &schema)
        )
    );
    let json = grep(&["--json", "-i", "VAULT"]);
    assert_eq!(json.status.code(), Some(0), "{}", text(&json.stderr));
    let hits: Vec<Value> = text(&json.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let points: Vec<&str> = hits
        .iter()
        .map(|hit| hit["point"].as_str().unwrap())
        .collect();
    assert_eq!(points, ["alpha:1", "beta:0"]);
    assert_eq!(hits[1]["role"], "user");
    let none = grep(&["--kind", "message", "Lisbon"]);
    assert_eq!(none.status.code(), Some(1), "{}", text(&none.stderr));
    assert!(none.stdout.is_empty());
    let bad = grep(&["("]);
    assert_eq!(bad.status.code(), Some(2));
    for output in [&found, &json, &none, &bad] {
        let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
        assert!(!all.contains(PASSWORD), "{all}");
    }
    // The replay hint is a command that works as printed.
    let replay = common::cuca()
        .args(["replay", &url, "--schema", &schema, "alpha", "--turn", "1"])
        .output()
        .unwrap();
    assert!(
        text(&replay.stdout).contains("In Lisbon."),
        "{}",
        text(&replay.stderr)
    );
}

/// A database grep cannot reach is grep's trouble status, 2, naming the store: never 1, which
/// a script reads as "nothing matched".
#[test]
fn grep_on_a_database_it_cannot_reach_exits_2_not_1() {
    // Port 9 (discard) has no server on loopback: the connection is refused at once.
    let output = cuca_out(&[
        "grep",
        "postgres://nobody:s3cret@127.0.0.1:9/fleet",
        "vault",
    ]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("cuca: error: store postgres 127.0.0.1:9/fleet schema cuca: "),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cret"), "{stderr}");
}

/// "`cuca sessions` and `cuca verify` say `BYTES` … ": over a database each session's size is
/// the bytes of its stored records (one query for every session), never a misleading 0; the
/// JSON leaves `bytes_on_disk` null, which a database does not tell per session.
#[test]
fn sessions_and_verify_show_the_bytes_a_postgres_session_holds() {
    let Some(url) = needs_pg() else { return };
    let store = schema(&url);
    let schema = store.schema().to_owned();
    append(
        &store,
        "big",
        vec![
            SessionEvent::Message(Message::user("write a long answer")),
            SessionEvent::Output {
                text: "x".repeat(10_000),
            },
        ],
    );
    append(
        &store,
        "small",
        vec![SessionEvent::Message(Message::user("hi"))],
    );
    // What the rows hold, asked of the database directly.
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut stored = |session: &str| -> u64 {
        let row = admin
            .query_one(
                &format!("SELECT sum(octet_length(record))::bigint FROM \"{schema}\".cuca_session_records WHERE session_id = $1"),
                &[&session],
            )
            .unwrap();
        row.get::<_, i64>(0).unsigned_abs()
    };
    let (big, small) = (stored("big"), stored("small"));
    assert!(big > 10_000 && small > 0 && small < 100, "{big} {small}");

    let listed = cuca_out(&[
        "sessions", &url, "--schema", &schema, "--json", "--sort", "name",
    ]);
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let rows: Vec<Value> = text(&listed.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(rows[0]["session"], "big");
    assert_eq!(rows[0]["bytes"], big);
    assert_eq!(rows[1]["bytes"], small);
    assert_eq!(rows[0]["bytes_on_disk"], Value::Null);
    let table = cuca_out(&["sessions", &url, "--schema", &schema, "--sort", "name"]);
    let table = text(&table.stdout);
    let big_row: Vec<&str> = table
        .lines()
        .find(|line| line.starts_with("big "))
        .unwrap()
        .split_whitespace()
        .collect();
    // The table writes counts with thousands separators, as every count the CLI prints.
    let digits = big.to_string();
    let grouped: String = digits
        .chars()
        .enumerate()
        .flat_map(|(i, c)| {
            let sep = i > 0 && (digits.len() - i) % 3 == 0;
            sep.then_some(',').into_iter().chain([c])
        })
        .collect();
    assert_eq!(big_row[1..3], ["2", grouped.as_str()], "{table}");

    let verify = cuca_out(&["verify", &url, "--schema", &schema]);
    let said = text(&verify.stdout);
    assert!(verify.status.success(), "{said}");
    assert!(
        said.contains(&format!("big: clean (2 records, {big} bytes)")),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "2 sessions, 3 records, {} bytes: 2 clean",
            big + small
        )),
        "{said}"
    );
    let verify = cuca_out(&["verify", &url, "--schema", &schema, "--json", "small"]);
    let report: Value = serde_json::from_slice(&verify.stdout).unwrap();
    assert_eq!(report["bytes"], small);
}

/// `compact` and `repair` work on `.cslog` files: given a database they refuse in one line
/// that names the store (never its password) and says why, as a usage error (exit 2). Before,
/// they said "directory postgres://alice:s3cret@… cannot be read", password and all.
#[test]
fn compact_and_repair_refuse_a_postgres_store_naming_it_and_why() {
    let url = "postgres://alice:s3cret@db.example:6543/fleet";
    for (args, words) in [
        (vec!["compact", url], "it keeps no files to gzip"),
        (
            vec!["repair", url, "demo", "--schema", "team"],
            "a session there loads whole or is refused whole",
        ),
    ] {
        let output = cuca_out(&args);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        let schema = if args.contains(&"team") {
            "team"
        } else {
            "cuca"
        };
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(
            stderr.contains(&format!(
                "cuca {} works on a directory of .cslog files, and postgres db.example:6543/fleet schema {schema} is a PostgreSQL store: ",
                args[0]
            )) && stderr.contains(words),
            "{stderr}"
        );
        assert!(
            !stderr.contains("s3cret") && !stderr.contains("alice"),
            "{stderr}"
        );
        assert!(output.stdout.is_empty());
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().to_str().unwrap();
    let output = cuca_out(&["compact", dir, "--schema", "team"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("--schema names a PostgreSQL schema"),
        "{}",
        text(&output.stderr)
    );
}

/// `cuca run --store postgres://…`, as `cuca proxy --store`: an agent's calls recorded into a
/// fleet's schema, then replayed from it with no upstream; the lines it prints name the store
/// as a command takes it, without the password.
#[test]
fn run_records_into_and_replays_from_a_postgres_store() {
    let Some((url, python)) = needs() else { return };
    let store = schema(&url);
    let schema = store.schema().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let upstream = start_upstream(4, Duration::ZERO);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fleet/drive.py");
    let secret = with_password(&url);
    let run = |mode: &str, out: &Path, upstream: Option<&str>| {
        let mut command = common::cuca();
        command
            .args(["run", "--mode", mode, "--session", "rp-s0"])
            .args(["--store", &secret, "--schema", &schema]);
        if let Some(upstream) = upstream {
            command.args(["--upstream", upstream]);
        }
        command
            .args([
                "--",
                "sh",
                "-c",
                "exec \"$PY\" \"$SCRIPT\" \"$CUCA_PROXY_URL\" rp 2 2 > \"$OUT\"",
            ])
            .env("PY", &python)
            .env("SCRIPT", &script)
            .env("OUT", out)
            .env("CUCA_CALL_LOG", dir.path().join("calls.jsonl"))
            .output()
            .unwrap()
    };
    let answers = |out: &Path| -> BTreeMap<String, Vec<String>> {
        let value: Value = serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap();
        assert_eq!(value["errors"], serde_json::json!([]), "{value}");
        serde_json::from_value(value["answers"].clone()).unwrap()
    };
    let recorded = dir.path().join("recorded.json");
    let output = run("record", &recorded, Some(&upstream));
    let said = text(&output.stderr);
    assert!(output.status.success(), "{said}");
    let got = answers(&recorded);
    for session in ["rp-s0", "rp-s1"] {
        let expected: Vec<String> = (0..2)
            .map(|call| answer_words(&format!("{session} call {call}"), 4).concat())
            .collect();
        assert_eq!(got[session], expected);
        assert_eq!(
            recorded_answers(&store, session),
            expected,
            "{session} in the store"
        );
    }
    let config = PostgresConfig::new(&url).unwrap();
    assert!(
        said.contains(&format!(
            "in postgres {} schema {schema}",
            config.describe()
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "cuca replay {} rp-s0",
            command_form(&url, &schema)
        )),
        "{said}"
    );
    assert!(!said.contains(PASSWORD), "{said}");

    let replayed = dir.path().join("replayed.json");
    let output = run("replay", &replayed, None);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(
        answers(&replayed),
        got,
        "replayed from the store, no upstream"
    );
}

/// A fleet in a browser: `cuca view --store URL` in Chromium shows sessions from every
/// proxy — here two `cuca proxy` processes × three streamed sessions in one schema; the
/// list shows every proxy's sessions, a session page its answer, the search box finds a
/// call's answer in the database, and no page names the password.
#[test]
fn cuca_view_store_in_chromium_shows_the_sessions_of_every_proxy() {
    let Some((url, python)) = needs() else { return };
    if !chromium::browser_available() {
        return;
    }
    let store = schema(&url);
    let schema = store.schema().to_owned();
    let dir = tempfile::tempdir().unwrap();
    const CHUNKS: usize = 5;
    let upstream = start_upstream(CHUNKS, Duration::ZERO);
    let proxies: Vec<(Killed, String)> = (0..2)
        .map(|p| {
            let log = dir.path().join(format!("c{p}"));
            std::fs::create_dir_all(&log).unwrap();
            start_proxy(&url, &schema, &upstream, &log)
        })
        .collect();
    let drivers: Vec<_> = proxies
        .iter()
        .enumerate()
        .map(|(p, (_, address))| {
            drive(
                &python,
                &format!("http://{address}"),
                &format!("c{p}"),
                3,
                2,
            )
        })
        .collect();
    for driver in drivers {
        let (got, errors) = driven(driver);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(got.len(), 3);
    }

    let mut viewer = std::process::Command::new(assert_cmd::cargo::cargo_bin("cuca"));
    viewer
        .args(["view", "--listen", "127.0.0.1:0", "--store"])
        .arg(with_password(&url))
        .args(["--schema", &schema])
        .env("CUCA_CALL_LOG", dir.path().join("none.jsonl"))
        .stderr(Stdio::null());
    let (_view, address, _out) = serving_with(viewer, "cuca view: http://");
    let base = format!("http://{address}");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        use fantoccini::Locator;
        let profile = tempfile::tempdir().unwrap();
        let (_driver, client) = chromium::start_browser(profile.path()).await;
        client.goto(&format!("{base}/")).await.unwrap();
        let mut listed = Vec::new();
        for cell in client
            .find_all(Locator::Css("#sessions tbody tr td.id:first-child"))
            .await
            .unwrap()
        {
            listed.push(cell.text().await.unwrap());
        }
        listed.sort();
        assert_eq!(
            listed,
            ["c0-s0", "c0-s1", "c0-s2", "c1-s0", "c1-s1", "c1-s2"],
            "the list shows both proxies' sessions"
        );
        let source = client.source().await.unwrap();
        assert!(!source.contains(PASSWORD), "the page names no password");
        assert!(!source.contains("postgres@"), "the page names no user");

        client
            .find(Locator::LinkText("c1-s2"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        let page = chromium::text_of(&client, "main").await;
        let answer = answer_words("c1-s2 call 1", CHUNKS).concat();
        assert!(page.contains("c1-s2 call 1"), "the question: {page}");
        assert!(
            page.contains(answer.trim_end()),
            "the answer, as streamed: {page}"
        );
        assert!(!client.source().await.unwrap().contains(PASSWORD));

        // The search box reads the database too.
        client
            .goto(&format!("{base}/search?q=c0-s1+call+1%2F4"))
            .await
            .unwrap();
        let hits = chromium::text_of(&client, "#search-hits").await;
        assert!(hits.contains("c0-s1"), "{hits}");
        client.close().await.unwrap();
    });
    drop(proxies);
    eprintln!("FIGURES fleet browser: 2 proxies, 6 sessions, listed and opened in Chromium");
}
