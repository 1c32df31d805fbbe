//! OTLP export of what cuca recorded: sessions and call-log rows as OpenTelemetry traces with
//! the GenAI semantic conventions, in a batch ([`session_spans`], [`call_spans`],
//! [`Exporter`]) and live from a running client ([`OtelPlugin`]).
//!
//! Teams that run more than one machine look at LLM calls in Jaeger, Tempo, Langfuse or
//! Phoenix, fed by an OpenTelemetry collector. This crate turns cuca's records into what those
//! tools read:
//!
//! * every **model call** is a trace of its own, its `chat` span the root (kind CLIENT,
//!   `openinference.span.kind` `LLM`), as a natively traced call is, and `session.id` groups
//!   a session's (or a run's) traces, as Phoenix's Sessions tab reads them;
//! * a **session**'s calls carry `gen_ai.operation.name`, `gen_ai.conversation.id`, the
//!   token counts, the call's recorded time, and the model and finish reason where the
//!   recording names them; a fork sends only the calls it made itself and links the ones it
//!   copied ([`session_spans`]);
//! * a **call log**'s calls carry the requested and served model, token counts, finish
//!   reasons, HTTP status and `error.type`, with one child span per attempt on the wire; a
//!   call a session also holds is sent once, as the session's span
//!   ([`session_spans_with_calls`]).
//!
//! * what an agent did **outside the model** (`cuca run` records it): each shell command is
//!   a `shell` span (its exit status the span's status, `process.command_line`,
//!   `process.working_directory`, `process.exit.code`), a child of the call whose answer
//!   came before it; each file a workspace snapshot says changed is a `cuca.file_change`
//!   event on the span of the call whose request saw it ([`MAX_FILE_EVENTS`]).
//!
//! A span is sent once, final: a call still in flight is counted and left for the next
//! export, because a backend that keeps the first copy of a span id (Phoenix does) would
//! never show its end. Ids are derived, not random: from the session id and the turn's first
//! sequence (or the run and the attempt's row id), so exporting the same records twice sends
//! the same ids and a backend keeps one copy. Message content is sent only when asked
//! ([`ExportOptions::with_content`]), as the conventions' opt-in
//! `gen_ai.input.messages`/`gen_ai.output.messages`/`gen_ai.system_instructions`.
//! `docs/otel.md` has the whole mapping table.
//!
//! ```
//! use std::sync::Arc;
//! use cuca_otel::{session_spans, ExportOptions};
//! use cuca_store_mem::InMemoryBackend;
//!
//! let backend = Arc::new(InMemoryBackend::new());
//! cuca_testkit::append_all(backend.as_ref(), &cuca_testkit::demo_turn("demo", 0));
//!
//! let export = session_spans(backend.clone(), "demo", &ExportOptions::default())?;
//! let names: Vec<&str> = export.spans.iter().map(|s| s.name.as_str()).collect();
//! assert_eq!(names, ["chat"]);
//! let turn = &export.spans[0];
//! assert!(turn.parent_span_id.is_empty(), "a call is the root of its trace");
//! assert!(turn.attributes.iter().any(|kv| kv.key == "gen_ai.usage.input_tokens"));
//! assert!(turn.attributes.iter().any(|kv| kv.key == "session.id"));
//! // No content unless asked for.
//! assert!(!turn.attributes.iter().any(|kv| kv.key == "gen_ai.input.messages"));
//!
//! // The same session exported again has the same ids.
//! let again = session_spans(backend, "demo", &ExportOptions::default())?;
//! assert_eq!(again.spans[0].span_id, turn.span_id);
//! # Ok::<(), cuca_otel::Error>(())
//! ```
//!
//! Sending needs a collector (here one on the default OTLP/HTTP port):
//!
//! ```no_run
//! # async fn docs(spans: Vec<opentelemetry_proto::tonic::trace::v1::Span>) -> Result<(), cuca_otel::Error> {
//! use cuca_otel::{Exporter, DEFAULT_REQUEST_TIMEOUT};
//! let exporter = Exporter::new("http://127.0.0.1:4318", "cuca", DEFAULT_REQUEST_TIMEOUT)?
//!     .with_project("my-agent");
//! let report = exporter.send(spans).await?;
//! println!("{} spans in {} requests", report.spans, report.requests);
//! # Ok(()) }
//! ```
//!
//! # Why protobuf messages and not the SDK's exporter
//!
//! The batch export builds `ExportTraceServiceRequest`s with `opentelemetry-proto`'s prost
//! types and posts them itself (reqwest, gzip by flate2), rather than feeding
//! `opentelemetry_sdk` spans through `opentelemetry-otlp`'s `SpanExporter`. Three reasons:
//! the ids must be the derived ones, and the SDK's tracer mints its own (a fixed id means
//! hand-building `SpanData` anyway, with none of the SDK's machinery left in use); the span
//! times are the recorded ones, not the clock at export; and the message a collector
//! receives is then exactly the one the tests decode and check, field by field, with the
//! same `opentelemetry-proto` types. The same encoder serves the live exporter, so both
//! paths send identical shapes, and its queue can count every span it drops, which the
//! SDK's batch processor does not expose.
//!
//! The live exporter is a [`cuca_events::CucaPlugin`] rather than a `tracing` layer through
//! `tracing-opentelemetry`: the hooks hand over the request, the response and the error as
//! typed values, it needs no global subscriber, and the plugin contract already keeps its
//! failures out of the call (see [`OtelPlugin`]).
//!
//! # What it does not do
//!
//! It does not send metrics or logs, and does not speak OTLP/gRPC (collectors take
//! OTLP/HTTP on 4318 by default). It does not retry a failed request: a batch export is
//! idempotent, so running it again is the retry, and the live exporter counts what it drops
//! rather than holding it. It never sends content unless asked. It knows no store: sessions
//! are read through the [`cuca_events::SessionBackend`] trait and [`cuca_replay`], call-log
//! rows through [`cuca_calllog::read_rows`]'s records.
#![forbid(unsafe_code)]

mod calls;
mod content;
pub mod conventions;
mod error;
mod export;
pub mod ids;
mod live;
mod session;
mod span;
mod workspace;

pub use calls::{call_spans, CallSpans, Calls, MATCH_SLACK_MS};
pub use error::Error;
pub use export::{
    build_request, encode_gzip, traces_url, Exporter, SendReport, DEFAULT_REQUEST_TIMEOUT,
    MAX_RESPONSE_BYTES, MAX_SPANS_PER_REQUEST, TRACES_PATH,
};
pub use live::{LiveConfig, LiveStats, LiveWorker, OtelPlugin};
pub use session::{session_spans, session_spans_with_calls, SessionSpans, MAX_INHERITED_LINKS};
pub use workspace::MAX_FILE_EVENTS;

/// Re-exported so callers name the same message types this crate builds.
pub use opentelemetry_proto;

/// What a batch export includes and how it labels it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportOptions {
    /// Send the messages, system prompts and answers (sessions), and the recorded bodies
    /// (call-log rows written under the bodies pin). Off by default: prompts are the
    /// person's own data, and the conventions make these attributes opt-in.
    pub with_content: bool,
    /// `gen_ai.provider.name` (and `gen_ai.system`) for every call; neither a session nor a
    /// call-log row records the provider, so it is left off unless named here.
    pub provider: Option<String>,
    /// Only what happened at or after this time, in milliseconds since the epoch: sessions
    /// whose last record is at or after it (whole), call-log rows written at or after it.
    pub since_ms: Option<u64>,
}
