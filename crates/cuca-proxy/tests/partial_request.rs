//! A request cut while its records were written — the store took its system prompt and
//! refused the next record (a full disk, a file size limit, PostgreSQL going away) — is
//! closed before the session's next call, so the retried call is a turn of its own and
//! replays.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use cuca_calllog::CallLog;
use cuca_events::{BackendGauge, PluginError, SessionBackend, SessionEvent, SessionRecord};
use cuca_proxy::{Mode, Proxy, ProxyConfig};
use cuca_store_file::FileBackend;
use serde_json::json;
use support::*;

/// A file store that, once armed, takes `budget` more appends and then refuses every one
/// until disarmed, as a disk that fills does.
#[derive(Debug)]
struct Filling {
    inner: FileBackend,
    /// `usize::MAX`: not armed.
    budget: AtomicUsize,
}

impl SessionBackend for Filling {
    fn name(&self) -> &str {
        "filling"
    }

    fn append(&self, record: SessionRecord) -> Result<(), PluginError> {
        let allowed = self
            .budget
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
                usize::MAX => Some(n),
                0 => None,
                n => Some(n - 1),
            })
            .is_ok();
        if !allowed {
            return Err(PluginError::Backend {
                backend: "filling".into(),
                message: "no space left on device".into(),
                source: None,
            });
        }
        self.inner.append(record)
    }

    fn replay(&self, session_id: &str) -> Result<Vec<SessionRecord>, PluginError> {
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

async fn serve(proxy: &Proxy) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}/s/s/v1/chat/completions",
        listener.local_addr().unwrap()
    );
    let serving = proxy.clone();
    tokio::spawn(async move {
        serving
            .serve(listener, std::future::pending::<()>())
            .await
            .unwrap();
    });
    url
}

async fn ask(url: &str, messages: &[serde_json::Value]) -> (u16, String) {
    let body = json!({"model": "m", "stream": true, "messages": messages});
    let response = client().post(url).json(&body).send().await.unwrap();
    let status = response.status().as_u16();
    let bytes = response.bytes().await.unwrap();
    let text = if status == 200 {
        joined(&blocks_of_sse(&bytes), false)
    } else {
        String::from_utf8_lossy(&bytes).into_owned()
    };
    (status, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_retried_after_its_request_was_cut_by_the_store_is_recorded_and_replays() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let filling = Arc::new(Filling {
        inner: FileBackend::new(dir.path().join("sessions")).unwrap(),
        budget: AtomicUsize::new(usize::MAX),
    });
    let config = ProxyConfig::new(Mode::Record, Some(upstream.url.clone())).unwrap();
    let log = CallLog::builder()
        .path(Some(dir.path().join("calls.jsonl")))
        .build();
    let proxy = Proxy::with_call_log(config, Arc::clone(&filling) as _, log).unwrap();
    let url = serve(&proxy).await;

    let first = vec![
        json!({"role": "system", "content": "Be brief."}),
        json!({"role": "user", "content": "Name thing 1"}),
    ];
    let (status, answer) = ask(&url, &first).await;
    assert_eq!(status, 200);
    let mut second = first.clone();
    second.push(json!({"role": "assistant", "content": answer}));
    second.push(json!({"role": "user", "content": "Name thing 2"}));

    // The store takes the second request's system prompt, then refuses: the call is refused.
    filling.budget.store(1, Ordering::SeqCst);
    let (status, body) = ask(&url, &second).await;
    assert_eq!(status, 500, "{body}");
    filling.budget.store(usize::MAX, Ordering::SeqCst);
    proxy.settled("s").await;
    let tail: Vec<&str> = filling
        .replay("s")
        .unwrap()
        .iter()
        .rev()
        .take(2)
        .map(|r| r.event.kind())
        .collect();
    assert_eq!(tail, ["SystemPrompt", "TokenUsage"], "a lone system prompt");

    // The retry is recorded, after the cut request was closed.
    let (status, _) = ask(&url, &second).await;
    assert_eq!(status, 200);
    proxy.settled("s").await;
    let records = filling.replay("s").unwrap();
    let closing = records
        .iter()
        .find_map(|r| match &r.event {
            SessionEvent::CallIncomplete { reason } => Some(reason.clone()),
            _ => None,
        })
        .unwrap_or_default();
    assert!(
        closing.ends_with("only the first record of its request was written, and no CallRequest"),
        "{closing}"
    );
    drop(proxy);
    upstream.stop().await;

    // Replayed: both calls are answered from the recording.
    let replay = replaying(dir.path()).await;
    let url = replay.chat_url(Some("s"));
    for messages in [&first, &second] {
        let body = json!({"model": "m", "stream": true, "messages": messages});
        let response = client().post(&url).json(&body).send().await.unwrap();
        let status = response.status().as_u16();
        let text = String::from_utf8_lossy(&response.bytes().await.unwrap()).into_owned();
        assert_eq!(status, 200, "{text}");
    }
}
