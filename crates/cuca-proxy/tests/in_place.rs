//! Where a call's request records are written: in place, on the runtime's own thread, when
//! the store's appends take microseconds and the session has been read already (the hop to a
//! blocking thread and back would be most of the call's cost before its first byte); on a
//! blocking thread otherwise, so a store whose appends wait (a commit, an fsync) holds no
//! runtime worker.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use cuca_calllog::CallLog;
use cuca_events::{BackendGauge, PluginError, SessionBackend, SessionEvent, SessionRecord};
use cuca_proxy::{Mode, Proxy, ProxyConfig};
use cuca_store_file::FileBackend;
use serde_json::json;
use support::*;

/// A file store that says whether its appends may wait as it is told, and notes the thread
/// each `CallRequest` was appended on.
#[derive(Debug)]
struct Watched {
    inner: FileBackend,
    may_wait: bool,
    requests_on: Mutex<Vec<ThreadId>>,
}

impl SessionBackend for Watched {
    fn name(&self) -> &str {
        "watched"
    }

    fn append(&self, record: SessionRecord) -> Result<(), PluginError> {
        if matches!(record.event, SessionEvent::CallRequest { .. }) {
            self.requests_on
                .lock()
                .unwrap()
                .push(std::thread::current().id());
        }
        self.inner.append(record)
    }

    fn appends_may_wait(&self) -> bool {
        self.may_wait
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

/// Three calls of one conversation through a proxy on this test's own thread (a
/// current-thread runtime): the threads their `CallRequest`s were appended on.
async fn request_threads(may_wait: bool) -> Vec<ThreadId> {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Watched {
        inner: FileBackend::new(dir.path().join("sessions")).unwrap(),
        may_wait,
        requests_on: Mutex::new(Vec::new()),
    });
    let config = ProxyConfig::new(Mode::Record, Some(upstream.url.clone())).unwrap();
    let proxy = Proxy::with_call_log(config, Arc::clone(&store) as _, CallLog::off()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        proxy
            .serve(listener, std::future::pending::<()>())
            .await
            .unwrap();
    });
    let url = format!("http://{address}/s/watched/v1/chat/completions");
    let mut messages = vec![json!({"role": "system", "content": "You are terse."})];
    for turn in 1..=3 {
        let question = format!("Question {turn}");
        messages.push(json!({"role": "user", "content": question}));
        let body = json!({"model": "m", "stream": true, "messages": messages});
        let response = client().post(&url).json(&body).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let text = joined(&blocks_of_sse(&response.bytes().await.unwrap()), false);
        assert!(!text.is_empty(), "call {turn} was answered with nothing");
        messages.push(json!({"role": "assistant", "content": text}));
    }
    let threads = store.requests_on.lock().unwrap().clone();
    assert_eq!(threads.len(), 3, "one CallRequest a call");
    threads
}

#[tokio::test]
async fn a_store_whose_appends_do_not_wait_is_written_in_place_once_the_session_is_read() {
    let here = std::thread::current().id();
    let threads = request_threads(false).await;
    // The first call reads the session: on a blocking thread.
    assert_ne!(
        threads[0], here,
        "the session's first read is made in place"
    );
    assert_eq!(
        threads[1..],
        [here, here],
        "the later calls' request records went to a blocking thread"
    );
}

#[tokio::test]
async fn a_store_whose_appends_may_wait_is_written_from_a_blocking_thread() {
    let here = std::thread::current().id();
    let threads = request_threads(true).await;
    assert!(
        threads.iter().all(|thread| *thread != here),
        "a request's records were written on the runtime's thread"
    );
}
