//! `GET /runs/{id}/replay` over a real loopback server: negotiation and run-id validation.
//!
//! "The record is stored gzipped at the run tree's root ... and served at GET /runs/{id}/replay,
//! content-negotiated on the request's Accept-Encoding. A browser is handed the stored bytes
//! verbatim; a gzip-unaware client is handed them decoded."
// Helpers outside `#[test]` functions unwrap too: a failure there is a failed test.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;

use flate2::write::GzEncoder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Starts the replay router over `runs_dir` on an ephemeral loopback port.
async fn start(runs_dir: &Path) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = cuca_serve::router(runs_dir);
    tokio::spawn(async move {
        cuca_serve::serve(listener, app, cuca_serve::ServeLimits::default())
            .await
            .unwrap();
    });
    addr
}

/// Writes `json` gzipped as the record of run `id`; returns the stored bytes.
fn store(runs_dir: &Path, id: &str, json: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(json).unwrap();
    let gz = enc.finish().unwrap();
    std::fs::create_dir_all(runs_dir.join(id)).unwrap();
    std::fs::write(runs_dir.join(id).join("replay.json.gz"), &gz).unwrap();
    gz
}

/// One raw HTTP/1.1 exchange: the request target is sent exactly as given, never normalised.
async fn raw_get(addr: SocketAddr, target: &str, extra_headers: &str) -> (u16, String, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{extra_headers}\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8(raw[..split].to_vec()).unwrap();
    let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head, raw[split + 4..].to_vec())
}

fn sample_record() -> Vec<u8> {
    let entries: Vec<String> = (0..2000)
        .map(|seq| format!(r#"{{"seq":{seq},"kind":"clock","elapsedMs":{seq}}}"#))
        .collect();
    format!(
        r#"{{"formatVersion":1,"sessionId":"s","entries":[{}]}}"#,
        entries.join(",")
    )
    .into_bytes()
}

#[tokio::test]
async fn browser_gets_the_stored_bytes_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let json = sample_record();
    let stored = store(dir.path(), "run-1", &json);
    let addr = start(dir.path()).await;

    let response = reqwest::Client::new()
        .get(format!("http://{addr}/runs/run-1/replay"))
        .header("accept-encoding", "gzip, deflate, br")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-encoding"], "gzip");
    assert_eq!(response.headers()["content-type"], "application/json");
    assert_eq!(response.headers()["vary"], "accept-encoding");
    // The workspace reqwest has no gzip feature, so these are the bytes on the wire.
    let body = response.bytes().await.unwrap();
    assert_eq!(body.as_ref(), stored.as_slice());
}

#[tokio::test]
async fn gzip_unaware_client_gets_valid_json() {
    let dir = tempfile::tempdir().unwrap();
    let json = sample_record();
    store(dir.path(), "run-1", &json);
    let addr = start(dir.path()).await;

    // reqwest without its gzip feature sends no Accept-Encoding at all.
    let response = reqwest::get(format!("http://{addr}/runs/run-1/replay"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("content-encoding").is_none());
    let body = response.bytes().await.unwrap();
    assert_eq!(body.as_ref(), json.as_slice());
    let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(value["formatVersion"], 1);
    assert_eq!(value["entries"].as_array().unwrap().len(), 2000);
}

#[tokio::test]
async fn gzip_refused_by_q_zero_is_served_decoded_never_406() {
    let dir = tempfile::tempdir().unwrap();
    let json = sample_record();
    store(dir.path(), "r", &json);
    let addr = start(dir.path()).await;

    for header in ["gzip;q=0, *", "identity", "identity;q=0, gzip;q=0"] {
        let response = reqwest::Client::new()
            .get(format!("http://{addr}/runs/r/replay"))
            .header("accept-encoding", header)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{header}");
        assert!(
            response.headers().get("content-encoding").is_none(),
            "{header}"
        );
        assert_eq!(response.bytes().await.unwrap().as_ref(), json.as_slice());
    }
}

#[tokio::test]
async fn a_run_with_no_record_is_404() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("empty-run")).unwrap();
    std::fs::write(dir.path().join("a-file"), b"x").unwrap();
    let addr = start(dir.path()).await;
    for target in [
        "/runs/empty-run/replay",
        "/runs/no-such-run/replay",
        "/runs/a-file/replay",
    ] {
        let (status, _, _) = raw_get(addr, target, "").await;
        assert_eq!(status, 404, "{target}");
    }
}

#[tokio::test]
async fn traversal_attempts_never_reach_a_file_outside_the_runs_directory() {
    // A record planted outside the runs directory, where `..%2F` would lead.
    let outer = tempfile::tempdir().unwrap();
    let secret = b"{\"secret\":true}";
    store(outer.path(), "etc", secret);
    let runs_dir = outer.path().join("runs");
    std::fs::create_dir_all(&runs_dir).unwrap();
    let addr = start(&runs_dir).await;

    for target in [
        "/runs/..%2Fetc/replay",
        "/runs/..%2F..%2Fetc/replay",
        "/runs/%2E%2E%2Fetc/replay",
        "/runs/../etc/replay",
        "/runs/..%5Cetc/replay",
        "/runs/%2Fetc/replay",
        "/runs/etc%00/replay",
        "/runs/%2E%2E/replay",
        "/runs/%FF/replay",
    ] {
        let (status, _, body) = raw_get(addr, target, "Accept-Encoding: identity\r\n").await;
        assert!(status == 400 || status == 404, "{target} answered {status}");
        assert!(
            !body.windows(6).any(|w| w == b"secret"),
            "{target} leaked the outside file"
        );
    }
    // The same file is reachable when it is inside the runs directory, so the refusals above
    // are the validation at work, not a broken route.
    store(&runs_dir, "etc", secret);
    let response = reqwest::get(format!("http://{addr}/runs/etc/replay"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.bytes().await.unwrap().as_ref(), secret);
}
