//! Calls that begin sessions at once reach the store at once: a store whose appends wait for
//! a round trip (PostgreSQL answers a session's first record and its messages after their
//! commit) is asked by all of them together, and can commit them together, however few
//! threads the runtime has.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use cuca_calllog::CallLog;
use cuca_events::{BackendGauge, PluginError, SessionBackend, SessionEvent, SessionRecord};
use cuca_proxy::{Mode, Proxy, ProxyConfig};
use cuca_store_file::FileBackend;
use serde_json::json;
use support::*;

/// How many calls begin a session at once: more than the runtime's two workers.
const N_CALLS: usize = 8;

/// How long the gate waits for all `N_CALLS` messages before it gives up and lets every
/// append through for good. It only bounds how long a failing test takes: a passing one
/// opens the gate as soon as the last call's message arrives.
const GIVE_UP: Duration = Duration::from_secs(20);

#[derive(Debug, Default)]
struct GateState {
    /// Appends of a message waiting at the gate now.
    waiting: usize,
    /// The most that ever waited together.
    most: usize,
    /// Open for good: every append passes.
    open: bool,
}

/// A file store whose appends of a message wait, as a commit does, until `N_CALLS` of them
/// wait together: only calls whose request records are written at the same time open it.
#[derive(Debug)]
struct Gate {
    inner: FileBackend,
    state: Mutex<GateState>,
    changed: Condvar,
}

impl Gate {
    fn most(&self) -> usize {
        self.state.lock().unwrap().most
    }
}

impl SessionBackend for Gate {
    fn name(&self) -> &str {
        "gate"
    }

    fn append(&self, record: SessionRecord) -> Result<(), PluginError> {
        if matches!(record.event, SessionEvent::Message(_)) {
            let mut state = self.state.lock().unwrap();
            state.waiting += 1;
            state.most = state.most.max(state.waiting);
            if state.waiting >= N_CALLS {
                state.open = true;
                self.changed.notify_all();
            }
            let deadline = Instant::now() + GIVE_UP;
            while !state.open {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    state.open = true;
                    self.changed.notify_all();
                    break;
                }
                state = self.changed.wait_timeout(state, left).unwrap().0;
            }
            state.waiting -= 1;
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

/// `cuca proxy` on two cores: a runtime of two workers serving more calls than that, each
/// beginning a session of its own, whose first records the store holds until all are asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_beginning_sessions_at_once_write_their_first_records_together() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let gate = Arc::new(Gate {
        inner: FileBackend::new(dir.path().join("sessions")).unwrap(),
        state: Mutex::new(GateState::default()),
        changed: Condvar::new(),
    });
    let config = ProxyConfig::new(Mode::Record, Some(upstream.url.clone())).unwrap();
    let proxy = Proxy::with_call_log(config, Arc::clone(&gate) as _, CallLog::off()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        proxy
            .serve(listener, std::future::pending::<()>())
            .await
            .unwrap();
    });
    let calls: Vec<_> = (0..N_CALLS)
        .map(|i| {
            let url = format!("http://{address}/s/new{i}/v1/chat/completions");
            tokio::spawn(async move {
                let question = format!("Name part {i}");
                let body = json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": question}]});
                let response = client().post(url).json(&body).send().await.unwrap();
                let status = response.status().as_u16();
                let text = joined(&blocks_of_sse(&response.bytes().await.unwrap()), false);
                (status, text == answer_to(&question, 1))
            })
        })
        .collect();
    for call in calls {
        assert_eq!(call.await.unwrap(), (200, true));
    }
    assert_eq!(
        gate.most(),
        N_CALLS,
        "the calls' messages reached the store at most {} at a time",
        gate.most()
    );
    for i in 0..N_CALLS {
        let messages = gate
            .replay(&format!("new{i}"))
            .unwrap()
            .into_iter()
            .filter(|record| matches!(record.event, SessionEvent::Message(_)))
            .count();
        assert_eq!(messages, 1, "session new{i}");
    }
}
