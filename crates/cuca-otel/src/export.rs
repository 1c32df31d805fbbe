//! OTLP/HTTP: spans into one `ExportTraceServiceRequest`, protobuf, gzip, `POST {endpoint}/v1/traces`.

use std::io::Write;
use std::time::Duration;

use flate2::write::GzEncoder;
use flate2::Compression;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{any_value, InstrumentationScope};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;

use crate::conventions as c;
use crate::span::kv;
use crate::Error;

/// The path OTLP/HTTP collectors take traces on.
pub const TRACES_PATH: &str = "/v1/traces";

/// The most spans one request carries. Collectors refuse bodies over a size limit (gRPC's
/// default message limit is 4 MiB, and HTTP receivers have their own), and a span with opt-in
/// content can hold a whole conversation; 512 spans without content is a few hundred KiB, and
/// a thousand-turn session still goes in two requests.
pub const MAX_SPANS_PER_REQUEST: usize = 512;

/// How long one request may take before it is given up on: long enough for a collector on
/// another continent to take a large gzip body, short enough that a hung collector does not
/// hold an export (or the live exporter's queue) for minutes.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The most bytes of a collector's answer that are read. An OTLP response is a few bytes (an
/// empty `ExportTraceServiceResponse`, or a partial success with a count and a message), and an
/// error status needs only the start of its body for [`Error::Status`]'s message; 64 KiB holds
/// either with room to spare, and stops a collector (or anything at its address) that answers
/// with an endless body from filling memory: the rest is never read, and the connection is
/// dropped.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// The URL traces go to: `endpoint` as given when it already ends in `/v1/traces` (the
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` form), else `endpoint` with `/v1/traces` appended
/// (the `OTEL_EXPORTER_OTLP_ENDPOINT` form, e.g. `http://localhost:4318`).
///
/// ```
/// use cuca_otel::traces_url;
/// assert_eq!(traces_url("http://localhost:4318"), "http://localhost:4318/v1/traces");
/// assert_eq!(traces_url("http://localhost:4318/"), "http://localhost:4318/v1/traces");
/// assert_eq!(traces_url("http://c:4318/v1/traces"), "http://c:4318/v1/traces");
/// ```
pub fn traces_url(endpoint: &str) -> String {
    let trimmed = endpoint.trim_end_matches('/');
    if trimmed.ends_with(TRACES_PATH) {
        trimmed.to_owned()
    } else {
        format!("{trimmed}{TRACES_PATH}")
    }
}

/// One request holding `spans` under a resource named `service_name` (and, where given,
/// `openinference.project.name` = `project`: the Phoenix project the spans land in) and the
/// `cuca-otel` instrumentation scope.
pub fn build_request(
    service_name: &str,
    project: Option<&str>,
    spans: Vec<Span>,
) -> ExportTraceServiceRequest {
    let mut attributes = vec![kv(
        c::SERVICE_NAME,
        any_value::Value::StringValue(service_name.to_owned()),
    )];
    if let Some(project) = project {
        attributes.push(kv(
            c::OPENINFERENCE_PROJECT_NAME,
            any_value::Value::StringValue(project.to_owned()),
        ));
    }
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes,
                ..Resource::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: env!("CARGO_PKG_NAME").to_owned(),
                    version: env!("CARGO_PKG_VERSION").to_owned(),
                    ..InstrumentationScope::default()
                }),
                spans,
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    }
}

/// The request as a gzip-compressed protobuf body.
pub fn encode_gzip(request: &ExportTraceServiceRequest) -> Result<Vec<u8>, Error> {
    let plain = request.encode_to_vec();
    let mut encoder = GzEncoder::new(
        Vec::with_capacity(plain.len() / 4 + 64),
        Compression::fast(),
    );
    encoder
        .write_all(&plain)
        .and_then(|()| encoder.finish())
        .map_err(|source| Error::Compress { source })
}

/// What a collector said about the requests one [`Exporter::send`] made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SendReport {
    /// Requests posted (all answered 2xx, or `send` returned an error).
    pub requests: usize,
    /// Spans sent.
    pub spans: usize,
    /// Spans the collector said it rejected (OTLP partial success).
    pub rejected: u64,
}

/// Posts spans to one collector.
#[derive(Debug, Clone)]
pub struct Exporter {
    client: reqwest::Client,
    url: String,
    service_name: String,
    project: Option<String>,
}

impl Exporter {
    /// An exporter for `endpoint` (see [`traces_url`]) whose requests name `service_name`,
    /// each bounded by `timeout`.
    ///
    /// # Errors
    ///
    /// [`Error::Endpoint`] for a URL that is not `http` or `https`, or that does not parse;
    /// [`Error::Client`] when the HTTP client cannot be built.
    pub fn new(endpoint: &str, service_name: &str, timeout: Duration) -> Result<Exporter, Error> {
        let url = traces_url(endpoint);
        let parsed = reqwest::Url::parse(&url).map_err(|error| Error::Endpoint {
            endpoint: endpoint.to_owned(),
            message: error.to_string(),
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(Error::Endpoint {
                endpoint: endpoint.to_owned(),
                message: format!("scheme {:?} is not http or https", parsed.scheme()),
            });
        }
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|source| Error::Client { source })?;
        Ok(Exporter {
            client,
            url,
            service_name: service_name.to_owned(),
            project: None,
        })
    }

    /// Names the project the spans belong to: the resource attribute
    /// `openinference.project.name`, which Phoenix files spans under (the `default` project
    /// without it). Other backends keep it as a resource attribute.
    pub fn with_project(mut self, project: impl Into<String>) -> Exporter {
        self.project = Some(project.into());
        self
    }

    /// The URL requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Sends `spans` in requests of at most [`MAX_SPANS_PER_REQUEST`], in order, stopping at
    /// the first request that fails. There is no retry: an export is idempotent, so running it
    /// again is the retry, and the live exporter counts what it could not send.
    ///
    /// # Errors
    ///
    /// [`Error::Send`] when a request does not reach the collector, [`Error::Status`] when the
    /// collector answers with a status other than 2xx.
    pub async fn send(&self, spans: Vec<Span>) -> Result<SendReport, Error> {
        let mut report = SendReport::default();
        let mut spans = spans.into_iter().peekable();
        while spans.peek().is_some() {
            let batch: Vec<Span> = spans.by_ref().take(MAX_SPANS_PER_REQUEST).collect();
            let n = batch.len();
            report.rejected += self.post(batch).await?;
            report.requests += 1;
            report.spans += n;
        }
        Ok(report)
    }

    /// Posts one request; returns the spans the collector said it rejected.
    async fn post(&self, spans: Vec<Span>) -> Result<u64, Error> {
        let body = encode_gzip(&build_request(
            &self.service_name,
            self.project.as_deref(),
            spans,
        ))?;
        let response = self
            .client
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/x-protobuf")
            .header(reqwest::header::CONTENT_ENCODING, "gzip")
            .body(body)
            .send()
            .await
            .map_err(|source| Error::Send {
                url: self.url.clone(),
                source,
            })?;
        let status = response.status();
        let bytes = self.read_capped(response).await?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            let message: String = text.chars().take(300).collect();
            return Err(Error::Status {
                url: self.url.clone(),
                status: status.as_u16(),
                message,
            });
        }
        // A collector may answer 200 with a partial success naming spans it dropped; a body
        // that is not the protobuf response (some proxies answer with nothing or JSON, and a
        // body cut at the cap is none) is taken as full success, which is what its 2xx says.
        Ok(ExportTraceServiceResponse::decode(bytes.as_ref())
            .ok()
            .and_then(|r| r.partial_success)
            .map_or(0, |p| u64::try_from(p.rejected_spans).unwrap_or(0)))
    }

    /// The answer's body, at most [`MAX_RESPONSE_BYTES`] of it: reading stops there and the
    /// response (with its connection) is dropped unread.
    async fn read_capped(&self, mut response: reqwest::Response) -> Result<Vec<u8>, Error> {
        let mut bytes = Vec::new();
        while bytes.len() < MAX_RESPONSE_BYTES {
            let chunk = response.chunk().await.map_err(|source| Error::Send {
                url: self.url.clone(),
                source,
            })?;
            let Some(chunk) = chunk else {
                break;
            };
            let room = MAX_RESPONSE_BYTES - bytes.len();
            bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
        }
        Ok(bytes)
    }
}
