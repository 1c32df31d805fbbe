//! A store that goes away and comes back in the middle of a session, with
//! `ProxyConfig::answer_unrecorded` (what `cuca proxy` does on PostgreSQL):
//! "PostgreSQL restarted in the middle of a run → the proxy answers its callers (recording
//! fails loudly per call, in the call log and on stderr …), reconnects, and resumes; nothing it
//! acknowledged is lost".
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use cuca_calllog::CallLog;
use cuca_events::{BackendGauge, PluginError, SessionBackend, SessionEvent, SessionRecord};
use cuca_proxy::{Mode, Proxy, ProxyConfig};
use cuca_store_mem::InMemoryBackend;
use serde_json::json;
use support::*;

/// An in-memory store that can be made to go away: once armed, from the first streamed block
/// it is sent on, every write and check fails until `back` is called; and `refuse_checks`
/// makes that many of the next session checks fail, as a store does in the moment it returns.
#[derive(Debug, Default)]
struct Away {
    inner: InMemoryBackend,
    armed: AtomicBool,
    gone: AtomicBool,
    refuse_checks: AtomicUsize,
}

impl Away {
    fn error(&self) -> PluginError {
        PluginError::Backend {
            backend: "away".into(),
            message: "the store is restarting".into(),
            source: None,
        }
    }

    fn back(&self) {
        self.gone.store(false, Ordering::SeqCst);
    }
}

impl SessionBackend for Away {
    fn name(&self) -> &str {
        "away"
    }

    fn append(&self, record: SessionRecord) -> Result<(), PluginError> {
        if matches!(record.event, SessionEvent::Output { .. })
            && self.armed.swap(false, Ordering::SeqCst)
        {
            self.gone.store(true, Ordering::SeqCst);
        }
        if self.gone.load(Ordering::SeqCst) {
            return Err(self.error());
        }
        self.inner.append(record)
    }

    fn check_writable(&self, session_id: &str) -> Result<(), PluginError> {
        let refused = self
            .refuse_checks
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if refused || self.gone.load(Ordering::SeqCst) {
            return Err(self.error());
        }
        self.inner.check_writable(session_id)
    }

    fn replay(&self, session_id: &str) -> Result<Vec<SessionRecord>, PluginError> {
        if self.gone.load(Ordering::SeqCst) {
            return Err(self.error());
        }
        self.inner.replay(session_id)
    }

    fn fork(&self, session_id: &str, point_id: &str) -> Result<String, PluginError> {
        self.inner.fork(session_id, point_id)
    }

    fn sessions(&self) -> Result<Vec<String>, PluginError> {
        self.inner.sessions()
    }

    fn gauge(&self) -> BackendGauge {
        self.inner.gauge()
    }
}

/// A call that finds the previous call left open, and cannot close it because the store is
/// still away, is answered and not recorded, even when the store is back by the time it would
/// write: recorded, it would land inside the open call and read back as part of its answer.
/// The next call closes the open one, and is recorded as a turn of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_never_recorded_into_a_call_the_store_left_open() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let away = Arc::new(Away::default());
    let backend: Arc<dyn SessionBackend> = Arc::clone(&away) as _;
    let mut config = ProxyConfig::new(Mode::Record, Some(upstream.url.clone())).unwrap();
    config.answer_unrecorded = true;
    let log_path = dir.path().join("calls.jsonl");
    let log = CallLog::builder().path(Some(log_path.clone())).build();
    let proxy = Proxy::with_call_log(config, Arc::clone(&backend), log).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}/s/s1/v1/chat/completions",
        listener.local_addr().unwrap()
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = proxy.clone();
    tokio::spawn(async move {
        serving
            .serve(listener, async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });

    // One conversation of four calls, each carrying the answers before it.
    let mut messages = vec![json!({"role": "system", "content": "Be brief."})];
    let mut answers = Vec::new();
    for call in 1..=4 {
        let question = format!("Name thing {call}");
        messages.push(json!({"role": "user", "content": question}));
        match call {
            // The store goes away at the call's first streamed block.
            2 => away.armed.store(true, Ordering::SeqCst),
            // It is back, but the check before the call still fails once: the open call
            // cannot be closed yet.
            3 => {
                away.back();
                away.refuse_checks.store(1, Ordering::SeqCst);
            }
            _ => {}
        }
        let body = json!({"model": "m", "stream": true, "messages": messages});
        let response = client().post(&url).json(&body).send().await.unwrap();
        assert_eq!(response.status(), 200, "call {call} is answered");
        let text = String::from_utf8(response.bytes().await.unwrap().to_vec()).unwrap();
        let answer = answer_to(&question, 1);
        let words: Vec<&str> = answer.split(' ').collect();
        assert!(
            words.iter().all(|word| text.contains(word)),
            "call {call}'s caller got its answer: {text}"
        );
        messages.push(json!({"role": "assistant", "content": answer}));
        answers.push(answer);
    }

    let rows: Vec<serde_json::Value> = std::fs::read_to_string(&log_path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .filter(|row: &serde_json::Value| row.get("phase").is_none())
        .collect();
    assert_eq!(rows.len(), 4);
    let errors: Vec<Option<&str>> = rows.iter().map(|row| row["error"].as_str()).collect();
    assert_eq!(errors[0], None, "{errors:?}");
    assert!(
        errors[1].is_some_and(|e| e.starts_with("the session does not hold this call in full")),
        "{errors:?}"
    );
    assert!(
        errors[2].is_some_and(
            |e| e.starts_with("the session does not hold this call in full")
                && e.contains("not recorded")
                && e.contains("the store is restarting")
        ),
        "{errors:?}"
    );
    assert_eq!(errors[3], None, "{errors:?}");

    // Each recorded call is a turn of its own: between two calls' requests, the first's end.
    let records = away.inner.replay("s1").unwrap();
    let mut open = false;
    let mut requests = 0;
    for record in &records {
        match &record.event {
            SessionEvent::CallRequest { .. } => {
                assert!(!open, "a call began inside an open call: {records:#?}");
                open = true;
                requests += 1;
            }
            SessionEvent::CallFinish { .. } => open = false,
            _ => {}
        }
    }
    assert!(!open);
    assert_eq!(requests, 3, "calls 1, 2 (left open, then closed) and 4");
    let outputs: Vec<String> = records
        .split(|record| matches!(record.event, SessionEvent::CallFinish { .. }))
        .map(|turn| {
            turn.iter()
                .filter_map(|record| match &record.event {
                    SessionEvent::Output { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect()
        })
        .collect();
    assert_eq!(outputs[0], answers[0]);
    assert_eq!(outputs[1], "", "call 2's blocks were never stored");
    assert_eq!(outputs[2], answers[3], "call 4 alone");
    let _ = stop.send(());
}

/// With the store away, a call that begins a conversation (its session's conversations cannot
/// be read to place it) is answered as a known conversation's call is: forwarded, recorded
/// nowhere, and its call-log row says so. Before, it was a 500 and never forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_begins_a_conversation_is_answered_while_the_store_is_away() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let away = Arc::new(Away::default());
    away.gone.store(true, Ordering::SeqCst);
    let backend: Arc<dyn SessionBackend> = Arc::clone(&away) as _;
    let mut config = ProxyConfig::new(Mode::Record, Some(upstream.url.clone())).unwrap();
    config.answer_unrecorded = true;
    let log_path = dir.path().join("calls.jsonl");
    let log = CallLog::builder().path(Some(log_path.clone())).build();
    let proxy = Proxy::with_call_log(config, Arc::clone(&backend), log).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}/s/new/v1/chat/completions",
        listener.local_addr().unwrap()
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let settled = proxy.clone();
    tokio::spawn(async move {
        proxy
            .serve(listener, async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    let ask = |question: &str| {
        json!({"model": "m", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": question},
        ]})
    };
    let response = client()
        .post(&url)
        .json(&ask("Name a colour."))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "answered while the store is away");
    let answer: serde_json::Value = response.json().await.unwrap();
    assert_eq!(
        answer["choices"][0]["message"]["content"],
        answer_to("Name a colour.", 1)
    );
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(&log_path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .filter(|row: &serde_json::Value| row.get("phase").is_none())
        .collect();
    let error = rows[0]["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("the session does not hold this call in full")
            && error.contains("the store is restarting"),
        "{rows:?}"
    );
    // Back: the next conversation is recorded.
    away.back();
    let response = client()
        .post(&url)
        .json(&ask("Name a fish."))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.bytes().await.unwrap();
    settled.settled("new").await;
    let _ = stop.send(());
    let requests = away
        .inner
        .replay("new")
        .unwrap()
        .iter()
        .filter(|r| matches!(r.event, SessionEvent::CallRequest { .. }))
        .count();
    assert_eq!(
        requests, 1,
        "the call made once the store was back is recorded"
    );
}
