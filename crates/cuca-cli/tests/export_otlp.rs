//! `cuca export-otlp` against a loopback OTLP/HTTP receiver the test starts: the committed
//! fixture sessions arrive as decoded `opentelemetry-proto` spans.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Read;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use axum::Router;
use common::{cuca, fixtures_dir};
use cuca::otel::opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

type Received = Arc<Mutex<Vec<ExportTraceServiceRequest>>>;

async fn traces(State(received): State<Received>, body: Bytes) -> &'static str {
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(body.as_ref())
        .read_to_end(&mut plain)
        .unwrap();
    received
        .lock()
        .unwrap()
        .push(ExportTraceServiceRequest::decode(plain.as_slice()).unwrap());
    ""
}

async fn receiver() -> (String, Received) {
    let received = Received::default();
    let app = Router::new()
        .route("/v1/traces", post(traces))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_otlp_sends_the_fixture_sessions_as_traces() {
    let (url, received) = receiver().await;
    let dir = fixtures_dir();
    let output = tokio::task::spawn_blocking(move || {
        cuca()
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .args(["export-otlp", "--endpoint", &url, "--json", "--sessions"])
            .arg(&dir)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["sessions"], 2);
    assert_eq!(summary["turns"], 3);
    assert_eq!(summary["spans"], 5);
    assert_eq!(summary["with_content"], false);

    let requests = received.lock().unwrap();
    let names: Vec<String> = requests
        .iter()
        .flat_map(|r| &r.resource_spans)
        .flat_map(|rs| &rs.scope_spans)
        .flat_map(|ss| &ss.spans)
        .map(|s| s.name.clone())
        .collect();
    assert_eq!(
        names,
        ["session demo", "chat", "chat", "session reasoning", "chat"]
    );
}

#[test]
fn export_otlp_with_nothing_to_export_is_a_usage_error() {
    let output = cuca()
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .args(["export-otlp", "--endpoint", "http://127.0.0.1:4318"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--sessions DIR, --calls FILE"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_otlp_sends_a_call_log_with_a_call_in_flight() {
    use cuca::calllog::{CallLog, Record, PHASE_START};
    let (url, received) = receiver().await;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    let log = CallLog::builder().path(Some(path.clone())).build();
    let row = |id: &str, phase: &str, ts: &str| Record {
        id: id.into(),
        run: "r1".into(),
        model: "qwen3".into(),
        phase: phase.into(),
        ts: ts.into(),
        attempt: 1,
        ..Record::default()
    };
    log.append(row("a1", PHASE_START, "2026-11-30T10:00:00.000Z"));
    log.append(Record {
        status: 200,
        finish: "stop".into(),
        ..row("a1", "", "2026-11-30T10:00:01.000Z")
    });
    log.append(row("b1", PHASE_START, "2026-11-30T10:00:02.000Z"));
    log.close();
    let output = tokio::task::spawn_blocking(move || {
        cuca()
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .args(["export-otlp", "--endpoint", &url, "--json", "--calls"])
            .arg(&path)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["runs"], 1);
    assert_eq!(summary["calls"], 2);
    assert_eq!(summary["in_flight"], 1);
    // A root, and a call span with one attempt span for each call.
    assert_eq!(summary["spans"], 5);
    let n: usize = received
        .lock()
        .unwrap()
        .iter()
        .flat_map(|r| &r.resource_spans)
        .flat_map(|rs| &rs.scope_spans)
        .map(|ss| ss.spans.len())
        .sum();
    assert_eq!(n, 5);
}
