//! A loopback OTLP/HTTP receiver the tests start themselves: it takes `POST /v1/traces`,
//! checks the headers, un-gzips and decodes the body with `opentelemetry-proto`, and keeps
//! every request; plus attribute helpers that read the decoded spans.
// Each test binary uses part of this module; a receiver that cannot bind should stop the
// test at once, so unwrap is the right reaction in test support.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;
use cuca_otel::opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use cuca_otel::opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use cuca_otel::opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

/// What the receiver got: each request's decoded message and its raw (un-gzipped) bytes.
#[derive(Clone, Default)]
pub struct Received {
    pub requests: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
    pub raw: Arc<Mutex<Vec<Vec<u8>>>>,
    /// The status to answer with; 200 when unset.
    pub status: Arc<Mutex<Option<u16>>>,
}

impl Received {
    /// Every span of every request, in arrival order.
    pub fn spans(&self) -> Vec<Span> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .flat_map(|r| r.resource_spans.iter())
            .flat_map(|rs| rs.scope_spans.iter())
            .flat_map(|ss| ss.spans.iter().cloned())
            .collect()
    }
}

async fn traces(
    State(received): State<Received>,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    assert_eq!(headers["content-type"], "application/x-protobuf");
    assert_eq!(headers["content-encoding"], "gzip");
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(body.as_ref())
        .read_to_end(&mut plain)
        .unwrap();
    let request = ExportTraceServiceRequest::decode(plain.as_slice()).unwrap();
    received.raw.lock().unwrap().push(plain);
    received.requests.lock().unwrap().push(request);
    let status = received.status.lock().unwrap().unwrap_or(200);
    if status != 200 {
        return (StatusCode::from_u16(status).unwrap(), "collector says no").into_response();
    }
    let answer = ExportTraceServiceResponse::default().encode_to_vec();
    ([("content-type", "application/x-protobuf")], answer).into_response()
}

/// Starts the receiver on `127.0.0.1:0`; returns its base URL (`http://127.0.0.1:PORT`).
pub async fn start_receiver() -> (String, Received) {
    let received = Received::default();
    let app = Router::new()
        .route("/v1/traces", post(traces))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

/// A URL where nothing listens: a port bound and released, so a connection is refused.
pub async fn down_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    url
}

fn value<'a>(span: &'a Span, key: &str) -> Option<&'a any_value::Value> {
    attr(&span.attributes, key)
}

pub fn attr<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

pub fn has(span: &Span, key: &str) -> bool {
    value(span, key).is_some()
}

pub fn str_attr<'a>(span: &'a Span, key: &str) -> &'a str {
    match value(span, key) {
        Some(any_value::Value::StringValue(s)) => s,
        other => panic!("span {:?}: {key} is {other:?}, not a string", span.name),
    }
}

pub fn int_attr(span: &Span, key: &str) -> i64 {
    match value(span, key) {
        Some(any_value::Value::IntValue(i)) => *i,
        other => panic!("span {:?}: {key} is {other:?}, not an int", span.name),
    }
}

pub fn bool_attr(span: &Span, key: &str) -> bool {
    match value(span, key) {
        Some(any_value::Value::BoolValue(b)) => *b,
        other => panic!("span {:?}: {key} is {other:?}, not a bool", span.name),
    }
}

pub fn str_array_attr(span: &Span, key: &str) -> Vec<String> {
    match value(span, key) {
        Some(any_value::Value::ArrayValue(array)) => array
            .values
            .iter()
            .map(|v| match &v.value {
                Some(any_value::Value::StringValue(s)) => s.clone(),
                other => panic!("{key} holds {other:?}"),
            })
            .collect(),
        other => panic!("span {:?}: {key} is {other:?}, not an array", span.name),
    }
}

/// The keys of every attribute of `span`.
pub fn keys(span: &Span) -> Vec<&str> {
    span.attributes.iter().map(|kv| kv.key.as_str()).collect()
}
