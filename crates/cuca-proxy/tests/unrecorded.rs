//! What an answered call leaves out of its recording is never said only on stderr: a body
//! cuca cannot read (not UTF-8, nested past the reader's limit) is answered and said in its
//! call-log row and in its session, and a wire record the store refuses still leaves the
//! call's `CallIncomplete`.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use cuca_calllog::CallLog;
use cuca_events::{BackendGauge, PluginError, SessionBackend, SessionEvent, SessionRecord};
use cuca_proxy::{Mode, Proxy, ProxyConfig};
use cuca_store_file::FileBackend;
use support::{client, fixture, request};

/// A hand-made upstream that answers every call 200 with the recorded stream of its format,
/// whatever the body: the upstream reads bytes the proxy cannot, and answers them.
async fn answering_upstream() -> String {
    let answer = |name: &'static str| {
        move || async move {
            Response::builder()
                .status(200)
                .header("Content-Type", "text/event-stream")
                .body(Body::from(fixture(&format!("{name}.body"))))
                .unwrap()
        }
    };
    let app = Router::new()
        .route("/v1/chat/completions", post(answer("stream-basic")))
        .route("/v1/messages", post(answer("messages-stream")));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// A recording proxy over `backend`, its call log in `dir`.
async fn start(upstream: &str, backend: Arc<dyn SessionBackend>, dir: &Path) -> (String, Proxy) {
    let config = ProxyConfig::new(Mode::Record, Some(upstream.to_owned())).unwrap();
    let log = CallLog::builder()
        .path(Some(dir.join("calls.jsonl")))
        .build();
    let proxy = Proxy::with_call_log(config, backend, log).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let serving = proxy.clone();
    tokio::spawn(async move {
        serving
            .serve(listener, std::future::pending::<()>())
            .await
            .unwrap();
    });
    (url, proxy)
}

/// The call log's end rows, in order.
fn end_rows(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("calls.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .filter(|row: &serde_json::Value| row.get("phase").is_none())
        .collect()
}

async fn post_body(url: &str, body: Vec<u8>) -> u16 {
    let response = client().post(url).body(body).send().await.unwrap();
    let status = response.status().as_u16();
    response.bytes().await.unwrap();
    status
}

/// A chat request whose user message is nested `depth` arrays deep in a field the proxy
/// reads.
fn nested(depth: usize) -> Vec<u8> {
    format!(
        r#"{{"model":"tiny","stream":true,"messages":[{{"role":"user","content":[{{"type":"text","text":"Go deep","x":{}1{}}}]}}]}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    )
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answered_call_whose_body_cannot_be_read_is_said_in_its_row_and_its_session() {
    let upstream = answering_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn SessionBackend> =
        Arc::new(FileBackend::new(dir.path().join("sessions")).unwrap());
    let (url, proxy) = start(&upstream, Arc::clone(&backend), dir.path()).await;
    let chat = |session: &str| format!("{url}/s/{session}/v1/chat/completions");

    // The session exists: one call recorded whole.
    assert_eq!(post_body(&chat("s"), request("stream-basic")).await, 200);
    proxy.settled("s").await;
    let n_recorded = backend.replay("s").unwrap().len();

    let not_utf8 = String::from_utf8(request("stream-basic"))
        .unwrap()
        .replace("Lisbon", "Lisb\u{1}n")
        .into_bytes()
        .into_iter()
        .map(|b| if b == 1 { 0xFF } else { b })
        .collect::<Vec<u8>>();
    assert!(std::str::from_utf8(&not_utf8).is_err());
    let unread = [not_utf8, nested(200)];
    for body in &unread {
        assert_eq!(post_body(&chat("s"), body.clone()).await, 200);
        proxy.settled("s").await;
    }
    let rows = end_rows(dir.path());
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["error"], serde_json::Value::Null, "{rows:?}");
    for row in &rows[1..] {
        let error = row["error"].as_str().unwrap_or_default();
        assert!(
            error.starts_with("the session does not hold this call in full: the body is not a request cuca can read"),
            "{rows:?}"
        );
        assert_eq!(row["status"], 200);
    }

    // Each is a turn of its own in the session: its CallIncomplete and closing records.
    let records = backend.replay("s").unwrap();
    let kinds: Vec<&str> = records[n_recorded..]
        .iter()
        .map(|r| r.event.kind())
        .collect();
    let note = ["CallIncomplete", "CallFinish", "Latency", "TokenUsage"];
    assert_eq!(kinds, [note, note].concat());
    let SessionEvent::CallIncomplete { reason } = &records[n_recorded].event else {
        panic!("{:?}", records[n_recorded]);
    };
    assert!(
        reason.starts_with(
            "the body is not a request cuca can read, so nothing of the call was recorded"
        ),
        "{reason}"
    );

    // A session with no records is not made for it: the row says it.
    assert_eq!(post_body(&chat("fresh"), unread[0].clone()).await, 200);
    proxy.settled("fresh").await;
    assert_eq!(backend.replay("fresh").unwrap(), []);
    let rows = end_rows(dir.path());
    assert!(rows[3]["error"]
        .as_str()
        .unwrap_or_default()
        .contains("the body is not a request cuca can read"));
}

/// A file store that refuses every `CallWire` record, as it refuses one past its frame limit.
#[derive(Debug)]
struct NoWire(FileBackend);

impl SessionBackend for NoWire {
    fn name(&self) -> &str {
        "no-wire"
    }

    fn append(&self, record: SessionRecord) -> Result<(), PluginError> {
        if let SessionEvent::CallWire { wire, .. } = &record.event {
            return Err(PluginError::CapacityExceeded {
                resource: "frame".into(),
                cap: 32 << 20,
                message: format!(
                    "a record of {} bytes is longer than a frame may be",
                    wire.len()
                ),
            });
        }
        self.0.append(record)
    }

    fn replay(&self, session_id: &str) -> Result<Vec<SessionRecord>, PluginError> {
        self.0.replay(session_id)
    }

    fn fork(&self, session_id: &str, point_id: &str) -> Result<String, PluginError> {
        self.0.fork(session_id, point_id)
    }

    fn sessions(&self) -> Result<Vec<String>, PluginError> {
        self.0.sessions()
    }

    fn gauge(&self) -> BackendGauge {
        self.0.gauge()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wire_record_the_store_refuses_still_leaves_the_call_s_incomplete_mark() {
    let upstream = answering_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn SessionBackend> = Arc::new(NoWire(
        FileBackend::new(dir.path().join("sessions")).unwrap(),
    ));
    let (url, proxy) = start(&upstream, Arc::clone(&backend), dir.path()).await;
    let status = post_body(
        &format!("{url}/s/w/v1/messages"),
        fixture("messages-stream.request.json"),
    )
    .await;
    assert_eq!(status, 200);
    proxy.settled("w").await;
    let records = backend.replay("w").unwrap();
    let kinds: Vec<&str> = records.iter().map(|r| r.event.kind()).collect();
    assert!(!kinds.contains(&"CallWire"), "{kinds:?}");
    assert_eq!(
        kinds[kinds.len() - 5..],
        [
            "CallIncomplete",
            "CallFinish",
            "TokenDetail",
            "Latency",
            "TokenUsage"
        ],
        "{kinds:?}"
    );
    let SessionEvent::CallIncomplete { reason } = &records[kinds.len() - 5].event else {
        unreachable!()
    };
    assert!(
        reason.starts_with("the call's wire fields could not be recorded"),
        "{reason}"
    );
    let rows = end_rows(dir.path());
    assert!(rows[0]["error"]
        .as_str()
        .unwrap_or_default()
        .contains("the call's wire fields could not be recorded"));
}
