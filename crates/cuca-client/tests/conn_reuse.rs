//! `conn_reused`, `dns_ms` and `connect_ms` (seed 003), against a real keep-alive
//! HTTP server (axum over hyper) on loopback serving a real llama-server transcript.
//!
//! Seed 003: "ConnReused is whether this attempt rode a connection the pool already had ...
//! FALSE IS WRITTEN OUT ... DNSms, ConnectMs and TLSms are the three parts of opening one ...
//! and every one of them is absent on a reused connection because none of them happened."

// Helpers outside #[test] functions unwrap too: a broken fixture should stop the test.
#![allow(clippy::unwrap_used)]

mod support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, State};
use axum::http::header::{CONNECTION, CONTENT_TYPE};
use axum::http::Response;
use axum::routing::post;
use axum::Router;
use cuca_calllog::{read_rows, CallLog, Record};
use cuca_client::{CucaClient, RetryPolicy};
use cuca_events::{Message, UnifiedRequest};
use futures::StreamExt;

#[derive(Clone)]
struct Served {
    /// The client address of every request, in order: one port per connection.
    peers: Arc<Mutex<Vec<SocketAddr>>>,
    /// Answer with `Connection: close`, so hyper closes every connection after its response.
    close: bool,
    /// Send the transcript as a chunked stream of events, as llama-server does, rather than
    /// with a `Content-Length`.
    chunked: bool,
    /// Write the terminating chunk this long after `[DONE]`, in a write of its own.
    end_after: Option<std::time::Duration>,
}

async fn completions(
    State(served): State<Served>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    _body: Bytes,
) -> Response<Body> {
    served.peers.lock().unwrap().push(peer);
    let mut response = Response::builder().header(CONTENT_TYPE, "text/event-stream");
    if served.close {
        response = response.header(CONNECTION, "close");
    }
    if !served.chunked {
        return response.body(Body::from(support::STREAM_BASIC)).unwrap();
    }
    // One HTTP chunk per event, the `[DONE]` event last, then the terminating chunk.
    let events: Vec<Result<Bytes, std::io::Error>> = support::STREAM_BASIC
        .split_inclusive(|&b| b == b'\n')
        .map(|line| Ok(Bytes::copy_from_slice(line)))
        .collect();
    let end_after = served.end_after;
    // The server's own pace (not a synchronisation): the body ends a moment after its last
    // event, in a separate write, so the client has already decoded `[DONE]` by then.
    let end = futures::stream::once(async move {
        if let Some(wait) = end_after {
            tokio::time::sleep(wait).await;
        }
        Ok::<_, std::io::Error>(Bytes::new())
    });
    response
        .body(Body::from_stream(futures::stream::iter(events).chain(end)))
        .unwrap()
}

/// Starts the server; returns its port and the peers it saw.
async fn serve(close: bool, chunked: bool) -> (u16, Arc<Mutex<Vec<SocketAddr>>>) {
    serve_ending(close, chunked, None).await
}

async fn serve_ending(
    close: bool,
    chunked: bool,
    end_after: Option<std::time::Duration>,
) -> (u16, Arc<Mutex<Vec<SocketAddr>>>) {
    let served = Served {
        peers: Arc::default(),
        close,
        chunked,
        end_after,
    };
    let peers = Arc::clone(&served.peers);
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(served);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    (port, peers)
}

/// Two calls in a row through one client; returns the two end rows.
async fn two_calls(base_url: &str) -> (Record, Record) {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("calls.jsonl");
    let log = CallLog::builder().path(Some(path.clone())).build();
    let client = CucaClient::builder()
        .with_base_url(base_url)
        .with_model("tiny")
        .with_retry_policy(RetryPolicy::none())
        .with_call_log(log)
        .build()
        .unwrap();
    for _ in 0..2 {
        let response = client
            .generate(UnifiedRequest::new(vec![Message::user("noted?")]))
            .await
            .unwrap();
        assert!(response.text().starts_with("phas temporal"));
    }
    let rows = read_rows(&path).unwrap().rows;
    assert_eq!(rows.len(), 4, "{rows:#?}");
    for start in [&rows[0], &rows[2]] {
        assert_eq!(start.phase, "start");
        assert_eq!(start.conn_reused, None, "nothing is known before sending");
    }
    (rows[1].clone(), rows[3].clone())
}

fn raw_line(row: &Record) -> String {
    serde_json::to_string(row).unwrap()
}

#[tokio::test]
async fn a_keep_alive_server_gives_a_cold_first_call_and_a_reused_second() {
    let (port, peers) = serve(false, false).await;
    let (first, second) = two_calls(&format!("http://127.0.0.1:{port}")).await;
    // The server saw one connection carry both requests.
    let peers = peers.lock().unwrap().clone();
    assert_eq!(peers.len(), 2);
    assert_eq!(peers[0], peers[1], "both requests rode one connection");

    assert_eq!(first.conn_reused, Some(false), "{first:?}");
    assert!(first.connect_ms >= 1, "a measured connect: {first:?}");
    assert!(first.connect_ms <= first.ms, "{first:?}");
    assert_eq!(first.dns_ms, 0, "an IP literal needs no lookup");
    assert_eq!(first.tls_ms, 0, "plain http: no handshake");
    assert!(raw_line(&first).contains(r#""conn_reused":false"#));

    assert_eq!(second.conn_reused, Some(true), "{second:?}");
    assert_eq!((second.dns_ms, second.connect_ms, second.tls_ms), (0, 0, 0));
    let line = raw_line(&second);
    assert!(line.contains(r#""conn_reused":true"#), "{line}");
    assert!(
        !line.contains("connect_ms") && !line.contains("dns_ms"),
        "{line}"
    );
}

#[tokio::test]
async fn a_server_that_closes_every_connection_gives_false_both_times() {
    let (port, peers) = serve(true, false).await;
    let (first, second) = two_calls(&format!("http://127.0.0.1:{port}")).await;
    let peers = peers.lock().unwrap().clone();
    assert_ne!(peers[0], peers[1], "two connections");
    for row in [&first, &second] {
        assert_eq!(row.conn_reused, Some(false), "{row:?}");
        assert!(row.connect_ms >= 1, "{row:?}");
    }
}

#[tokio::test]
async fn a_name_is_looked_up_and_the_lookup_is_timed() {
    // "localhost" goes through the resolver; the lookup is the first of the three parts.
    let (port, _) = serve(false, false).await;
    let (first, second) = two_calls(&format!("http://localhost:{port}")).await;
    assert_eq!(first.conn_reused, Some(false), "{first:?}");
    assert!(first.dns_ms >= 1, "a measured lookup: {first:?}");
    assert!(first.connect_ms >= 1, "{first:?}");
    assert_eq!(second.conn_reused, Some(true), "{second:?}");
    assert_eq!((second.dns_ms, second.connect_ms), (0, 0));
}

#[tokio::test]
async fn a_chunked_event_stream_like_llama_servers_leaves_its_connection_in_the_pool() {
    // llama-server streams with chunked transfer encoding; the client stops decoding at
    // `[DONE]` and must still read the terminating chunk, or the connection cannot go back
    // to the pool and every turn opens a new one (`cargo xtask e2e` reads the second turn's
    // `conn_reused:true`).
    let (port, peers) = serve(false, true).await;
    let (first, second) = two_calls(&format!("http://127.0.0.1:{port}")).await;
    let peers = peers.lock().unwrap().clone();
    assert_eq!(peers[0], peers[1], "both requests rode one connection");
    assert_eq!(first.conn_reused, Some(false), "{first:?}");
    assert_eq!(second.conn_reused, Some(true), "{second:?}");
}

#[tokio::test]
async fn a_body_that_ends_a_moment_after_done_still_returns_its_connection_to_the_pool() {
    let (port, peers) = serve_ending(false, true, Some(std::time::Duration::from_millis(30))).await;
    let (first, second) = two_calls(&format!("http://127.0.0.1:{port}")).await;
    let peers = peers.lock().unwrap().clone();
    assert_eq!(peers[0], peers[1], "both requests rode one connection");
    assert_eq!(first.conn_reused, Some(false), "{first:?}");
    assert_eq!(second.conn_reused, Some(true), "{second:?}");
}
