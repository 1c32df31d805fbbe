//! `OtelPlugin`: the live exporter, a `CucaPlugin` that queues a span per call and a worker that batches them to a collector.
//!
//! A plugin rather than a `tracing` layer through `tracing-opentelemetry`: the plugin hooks
//! are where cuca hands over the request, the aggregated response and the error as typed
//! values, so every GenAI attribute is read from a field (model, finish reason, token
//! counts) instead of being parsed back out of log events; it needs no global subscriber,
//! so an application that already installs its own `tracing` stack keeps it; and the
//! client's plugin contract already promises that `on_response_complete` and `on_error`
//! cannot fail or abort a call, which is the promise this exporter must keep.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use cuca_events::{CucaPlugin, Message, PluginError, Role, UnifiedRequest, UnifiedResponse};
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, Span};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::content;
use crate::conventions as c;
use crate::export::{Exporter, DEFAULT_REQUEST_TIMEOUT, MAX_SPANS_PER_REQUEST};
use crate::ids;
use crate::span::SpanBuilder;
use crate::Error;

/// How the live exporter queues, batches and sends.
///
/// The fields are public so a struct literal works; [`LiveConfig::validate`] re-checks one
/// and [`OtelPlugin::new`] calls it.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveConfig {
    /// The collector (see [`crate::traces_url`]).
    pub endpoint: String,
    /// The resource's `service.name`.
    pub service_name: String,
    /// The resource's `openinference.project.name`: the Phoenix project the spans land in
    /// (`None`: Phoenix's `default`).
    pub project: Option<String>,
    /// `gen_ai.provider.name` for every span; `None` takes the response's provider.
    pub provider: Option<String>,
    /// The most spans waiting to be sent; a span that finds the queue full is dropped and
    /// counted, never waited for.
    pub queue_capacity: usize,
    /// The most spans one request carries.
    pub max_batch: usize,
    /// How long the first span of a batch waits for others before the batch is sent.
    pub flush_interval: Duration,
    /// How long one request may take.
    pub request_timeout: Duration,
    /// How long [`OtelPlugin::shutdown`] waits for the worker to send what is queued; what
    /// is still queued or in flight then is dropped and counted
    /// ([`LiveStats::dropped_at_shutdown`]).
    pub shutdown_timeout: Duration,
    /// Whether to send the messages and answers (the conventions' opt-in content
    /// attributes). Off unless asked for: prompts are the person's own data.
    pub with_content: bool,
}

impl LiveConfig {
    /// The default [`LiveConfig::queue_capacity`]: 2,048 spans. A span without content is
    /// well under a KiB, so a full queue holds about a megabyte, and a collector down for a
    /// minute costs an agent making thirty calls a second nothing but counted drops.
    pub const DEFAULT_QUEUE_CAPACITY: usize = 2_048;
    /// The default [`LiveConfig::max_batch`]: 256 spans a request.
    pub const DEFAULT_MAX_BATCH: usize = 256;
    /// The default [`LiveConfig::flush_interval`]: one second, so a call shows up in the
    /// collector about a second after it ends, while a busy agent's calls share requests.
    pub const DEFAULT_FLUSH_INTERVAL: Duration = Duration::from_secs(1);
    /// The default [`LiveConfig::shutdown_timeout`]: five seconds. Enough for a reachable
    /// collector to take a full queue (eight requests of 256 spans, each a few hundred KiB),
    /// and a bound on how long a program's exit waits for one that hangs (unbounded, a full
    /// queue against a hung collector held the exit for eight request timeouts, 88–95 s).
    pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

    /// A validated config for `endpoint` with the defaults, `service.name` `cuca`, and no
    /// content.
    ///
    /// # Errors
    ///
    /// [`Error::Endpoint`] for an endpoint that is not an `http`/`https` URL.
    pub fn new(endpoint: impl Into<String>) -> Result<LiveConfig, Error> {
        let config = LiveConfig {
            endpoint: endpoint.into(),
            service_name: "cuca".to_owned(),
            project: None,
            provider: None,
            queue_capacity: LiveConfig::DEFAULT_QUEUE_CAPACITY,
            max_batch: LiveConfig::DEFAULT_MAX_BATCH,
            flush_interval: LiveConfig::DEFAULT_FLUSH_INTERVAL,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            shutdown_timeout: LiveConfig::DEFAULT_SHUTDOWN_TIMEOUT,
            with_content: false,
        };
        config.validate()?;
        Ok(config)
    }

    /// Re-checks the config: an `http`/`https` endpoint, a queue and batch of at least one.
    ///
    /// # Errors
    ///
    /// [`Error::Endpoint`] naming what is wrong.
    pub fn validate(&self) -> Result<(), Error> {
        let invalid = |message: &str| Error::Endpoint {
            endpoint: self.endpoint.clone(),
            message: message.to_owned(),
        };
        if self.queue_capacity == 0 {
            return Err(invalid("queue_capacity must be at least 1"));
        }
        if self.max_batch == 0 || self.max_batch > MAX_SPANS_PER_REQUEST {
            return Err(invalid(&format!(
                "max_batch must be from 1 to {MAX_SPANS_PER_REQUEST} (one request a batch)"
            )));
        }
        Exporter::new(&self.endpoint, &self.service_name, self.request_timeout).map(|_| ())
    }
}

/// What the live exporter did, counted since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LiveStats {
    /// Spans put on the queue.
    pub queued: u64,
    /// Spans a collector accepted.
    pub exported: u64,
    /// Spans dropped because the queue was full or the exporter was shut down.
    pub dropped_queue_full: u64,
    /// Spans dropped because their request failed (collector down, refused, timed out).
    pub dropped_send_failed: u64,
    /// Spans still queued or in flight when [`OtelPlugin::shutdown`]'s bound
    /// ([`LiveConfig::shutdown_timeout`]) ran out.
    pub dropped_at_shutdown: u64,
    /// Requests that failed.
    pub failed_requests: u64,
    /// Calls whose request was seen but whose end never was, forgotten to keep the table of
    /// calls in flight bounded (a caller that drops a stream ends it with neither hook).
    pub unmatched: u64,
}

#[derive(Debug, Default)]
struct Counters {
    queued: AtomicU64,
    exported: AtomicU64,
    dropped_queue_full: AtomicU64,
    dropped_send_failed: AtomicU64,
    dropped_at_shutdown: AtomicU64,
    failed_requests: AtomicU64,
    unmatched: AtomicU64,
    /// Names spans of calls that carry no call id.
    anonymous: AtomicU64,
}

impl Counters {
    fn stats(&self) -> LiveStats {
        LiveStats {
            queued: self.queued.load(Ordering::Relaxed),
            exported: self.exported.load(Ordering::Relaxed),
            dropped_queue_full: self.dropped_queue_full.load(Ordering::Relaxed),
            dropped_send_failed: self.dropped_send_failed.load(Ordering::Relaxed),
            dropped_at_shutdown: self.dropped_at_shutdown.load(Ordering::Relaxed),
            failed_requests: self.failed_requests.load(Ordering::Relaxed),
            unmatched: self.unmatched.load(Ordering::Relaxed),
        }
    }
}

/// A call between its `on_request` and its end.
#[derive(Debug)]
struct Pending {
    start_ms: u64,
    model: String,
    max_tokens: Option<u32>,
    temperature: Option<f32>,
    run: String,
    tag: String,
    node: String,
    agent: String,
    /// The messages, kept only with content on.
    messages: Vec<Message>,
    /// The tools offered, as `llm.tools.{i}.tool.json_schema` values, kept only with
    /// content on.
    tools: Vec<String>,
}

impl Pending {
    fn from_request(request: &UnifiedRequest, start_ms: u64, with_content: bool) -> Pending {
        let metadata = &request.metadata;
        Pending {
            start_ms,
            model: request.model.clone(),
            max_tokens: request.max_tokens,
            temperature: request.temperature,
            run: metadata.run.clone().unwrap_or_default(),
            tag: metadata.tag.clone().unwrap_or_default(),
            node: metadata.node.clone().unwrap_or_default(),
            agent: metadata.agent.clone().unwrap_or_default(),
            messages: if with_content {
                request.messages.clone()
            } else {
                Vec::new()
            },
            tools: if with_content {
                content::tool_definition_schemas(&request.tools)
            } else {
                Vec::new()
            },
        }
    }
}

/// The live exporter: register it on a `CucaClient` and every call's span goes to the
/// collector about [`LiveConfig::flush_interval`] after the call ends.
///
/// Its hooks never fail and never wait: `on_request` notes the call in a bounded table,
/// `on_response_complete` and `on_error` build the span and `try_send` it onto a bounded
/// queue. A full queue drops the span and counts it; a failed request drops its batch and
/// counts it; [`OtelPlugin::stats`] reads the counts and the worker logs one `tracing`
/// warning each time sending goes from working to failing.
#[derive(Debug)]
pub struct OtelPlugin {
    config: LiveConfig,
    counters: Arc<Counters>,
    sender: Mutex<Option<mpsc::Sender<Span>>>,
    pending: Mutex<HashMap<String, Pending>>,
    worker: tokio::sync::Mutex<Option<JoinHandle<()>>>,
}

/// The sending half of the live exporter: run it on a runtime ([`LiveWorker::run`]), or let
/// [`OtelPlugin::spawn`] do that.
#[derive(Debug)]
pub struct LiveWorker {
    receiver: mpsc::Receiver<Span>,
    exporter: Exporter,
    counters: Arc<Counters>,
    max_batch: usize,
    flush_interval: Duration,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `error.type` for a failed call: the HTTP status a provider answered with, else the
/// error's kind in one word.
fn error_type(error: &PluginError) -> String {
    match error {
        PluginError::Provider { status, .. } => status.to_string(),
        PluginError::Timeout { .. } => "timeout".to_owned(),
        PluginError::Transport { .. } => "transport".to_owned(),
        PluginError::Decode { .. } => "decode".to_owned(),
        PluginError::Validation { .. } => "validation".to_owned(),
        PluginError::Plugin { .. } => "plugin".to_owned(),
        PluginError::CapacityExceeded { .. } => "capacity_exceeded".to_owned(),
        _ => "_OTHER".to_owned(),
    }
}

impl OtelPlugin {
    /// The plugin and its worker, not yet running: run [`LiveWorker::run`] on a runtime.
    ///
    /// # Errors
    ///
    /// What [`LiveConfig::validate`] refuses, and [`Error::Client`].
    pub fn new(config: LiveConfig) -> Result<(OtelPlugin, LiveWorker), Error> {
        config.validate()?;
        let mut exporter = Exporter::new(
            &config.endpoint,
            &config.service_name,
            config.request_timeout,
        )?;
        if let Some(project) = &config.project {
            exporter = exporter.with_project(project.clone());
        }
        let (sender, receiver) = mpsc::channel(config.queue_capacity);
        let counters = Arc::new(Counters::default());
        let worker = LiveWorker {
            receiver,
            exporter,
            counters: Arc::clone(&counters),
            max_batch: config.max_batch,
            flush_interval: config.flush_interval,
        };
        let plugin = OtelPlugin {
            config,
            counters,
            sender: Mutex::new(Some(sender)),
            pending: Mutex::new(HashMap::new()),
            worker: tokio::sync::Mutex::new(None),
        };
        Ok((plugin, worker))
    }

    /// The plugin with its worker spawned on the current Tokio runtime.
    ///
    /// # Errors
    ///
    /// [`Error::Runtime`] outside a runtime, and what [`OtelPlugin::new`] refuses.
    pub fn spawn(config: LiveConfig) -> Result<OtelPlugin, Error> {
        let handle = tokio::runtime::Handle::try_current().map_err(|error| Error::Runtime {
            message: error.to_string(),
        })?;
        let (mut plugin, worker) = OtelPlugin::new(config)?;
        let join = handle.spawn(async move {
            worker.run().await;
        });
        *plugin.worker.get_mut() = Some(join);
        Ok(plugin)
    }

    /// The counts so far.
    pub fn stats(&self) -> LiveStats {
        self.counters.stats()
    }

    /// Closes the queue: spans of calls that end afterwards are dropped and counted, and the
    /// worker sends what is queued and then stops.
    pub fn close(&self) {
        self.sender
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    /// Closes the queue and, when [`OtelPlugin::spawn`] started the worker, waits for it to
    /// send what was queued, at most [`LiveConfig::shutdown_timeout`]; then returns the final
    /// counts.
    ///
    /// Bounded in time: when the bound runs out the worker is stopped where it is (its
    /// request in flight abandoned), and every span queued that was neither exported nor
    /// already dropped is counted in [`LiveStats::dropped_at_shutdown`], so
    /// `queued == exported + dropped_send_failed + dropped_at_shutdown` afterwards.
    pub async fn shutdown(&self) -> LiveStats {
        self.close();
        if let Some(mut join) = self.worker.lock().await.take() {
            let bound = self.config.shutdown_timeout;
            if tokio::time::timeout(bound, &mut join).await.is_err() {
                join.abort();
                // Cancelled (or it finished meanwhile, or panicked): either way it counts no
                // more, so what is unaccounted for now is what it never sent.
                let _ = join.await;
                let stats = self.counters.stats();
                let open = stats
                    .queued
                    .saturating_sub(stats.exported)
                    .saturating_sub(stats.dropped_send_failed)
                    .saturating_sub(stats.dropped_at_shutdown);
                self.counters
                    .dropped_at_shutdown
                    .fetch_add(open, Ordering::Relaxed);
                tracing::warn!(
                    dropped = open,
                    ?bound,
                    "otlp export did not finish within its shutdown bound; the rest is dropped"
                );
            }
            // A worker that panicked has nothing more to send; its counts stand.
        }
        self.stats()
    }

    fn enqueue(&self, span: Span) {
        let sender = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        let sent = sender.as_ref().is_some_and(|s| s.try_send(span).is_ok());
        let counter = if sent {
            &self.counters.queued
        } else {
            &self.counters.dropped_queue_full
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn take_pending(&self, call_id: Option<&str>) -> Option<Pending> {
        let call_id = call_id?;
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(call_id)
    }

    /// The span's trace and id, from its call id: every call is a trace of its own, as a
    /// natively traced call is, grouped with its run's by `session.id`.
    fn identity(&self, call_id: Option<&str>) -> (ids::TraceId, ids::SpanId) {
        let call_id = match call_id {
            Some(id) => id.to_owned(),
            None => format!(
                "anonymous-{}-{}",
                now_ms(),
                self.counters.anonymous.fetch_add(1, Ordering::Relaxed)
            ),
        };
        (
            ids::live_call_trace_id(&call_id),
            ids::live_call_span_id(&call_id),
        )
    }

    fn call_span(
        &self,
        call_id: Option<&str>,
        pending: Option<&Pending>,
        model: &str,
        start_ms: u64,
        end_ms: u64,
    ) -> SpanBuilder {
        let (trace, id) = self.identity(call_id);
        let request_model = pending.map_or("", |p| p.model.as_str());
        let name_model = if request_model.is_empty() {
            model
        } else {
            request_model
        };
        let name = if name_model.is_empty() {
            c::OPERATION_CHAT.to_owned()
        } else {
            format!("{} {name_model}", c::OPERATION_CHAT)
        };
        let mut span = SpanBuilder::new(trace, id, None, name, SpanKind::Client)
            .times_ms(start_ms, end_ms)
            .str(c::OPENINFERENCE_SPAN_KIND, c::KIND_LLM)
            .str(c::GEN_AI_OPERATION_NAME, c::OPERATION_CHAT)
            .str_nonempty(c::GEN_AI_REQUEST_MODEL, request_model);
        if let Some(p) = pending {
            // The session a call belongs to: the node the caller named (a proxy names the
            // session there), else the run, which the client always fills in.
            if let Some(session) = [p.node.as_str(), p.run.as_str()]
                .into_iter()
                .find(|s| !s.is_empty())
            {
                span = span.str(c::SESSION_ID, session);
            }
            if let Some(max_tokens) = p.max_tokens {
                span = span.int(c::GEN_AI_REQUEST_MAX_TOKENS, u64::from(max_tokens));
            }
            if let Some(temperature) = p.temperature {
                span = span.float(c::GEN_AI_REQUEST_TEMPERATURE, f64::from(temperature));
            }
            span = span
                .str_nonempty(c::CUCA_RUN, &p.run)
                .str_nonempty(c::CUCA_TAG, &p.tag)
                .str_nonempty(c::CUCA_NODE, &p.node)
                .str_nonempty(c::GEN_AI_AGENT_NAME, &p.agent);
            if self.config.with_content {
                let system: Vec<String> = p
                    .messages
                    .iter()
                    .filter(|m| m.role == Role::System)
                    .map(Message::text)
                    .collect();
                if !system.is_empty() {
                    span = span.str(
                        c::GEN_AI_SYSTEM_INSTRUCTIONS,
                        content::system_instructions(&system),
                    );
                }
                span = span.str(
                    c::GEN_AI_INPUT_MESSAGES,
                    content::input_messages(p.messages.iter().filter(|m| m.role != Role::System)),
                );
                if !p.messages.is_empty() {
                    let messages: Vec<&Message> = p.messages.iter().collect();
                    let (value, mime) = content::new_input(&messages);
                    span = span
                        .str(c::INPUT_VALUE, value)
                        .str(c::INPUT_MIME_TYPE, mime);
                }
                for (i, schema) in p.tools.iter().enumerate() {
                    span = span.str(
                        &format!("{}.{i}.tool.json_schema", c::LLM_TOOLS_PREFIX),
                        schema.as_str(),
                    );
                }
            }
        }
        span
    }

    fn provider(&self, span: SpanBuilder, reported: &str) -> SpanBuilder {
        let provider = self.config.provider.as_deref().unwrap_or(reported);
        if provider.is_empty() {
            span
        } else {
            let span = span.str(c::GEN_AI_PROVIDER_NAME, provider);
            // The name before 1.37 is the old convention the opt-in asks not to send.
            if crate::span::latest_from_env() {
                span
            } else {
                span.str(c::GEN_AI_SYSTEM, provider)
            }
        }
    }
}

#[async_trait]
impl CucaPlugin for OtelPlugin {
    fn name(&self) -> &str {
        "cuca-otel"
    }

    async fn on_request(&self, request: &mut UnifiedRequest) -> Result<(), PluginError> {
        let Some(call_id) = request.metadata.call_id.clone() else {
            return Ok(());
        };
        let pending = Pending::from_request(request, now_ms(), self.config.with_content);
        let mut table = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if table.len() >= self.config.queue_capacity {
            // The oldest entry is a call whose end was never seen (its stream was dropped):
            // forget it rather than grow without bound.
            let oldest = table
                .iter()
                .min_by_key(|(_, p)| p.start_ms)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                table.remove(&oldest);
                self.counters.unmatched.fetch_add(1, Ordering::Relaxed);
            }
        }
        table.insert(call_id, pending);
        Ok(())
    }

    async fn on_response_complete(&self, response: &UnifiedResponse) -> Result<(), PluginError> {
        let call_id = response.call_id.as_deref();
        let pending = self.take_pending(call_id);
        let end_ms = now_ms();
        let duration_ms = u64::try_from(response.duration.as_millis()).unwrap_or(u64::MAX);
        let start_ms = pending
            .as_ref()
            .map_or(end_ms.saturating_sub(duration_ms), |p| p.start_ms);
        let mut span = self.call_span(call_id, pending.as_ref(), &response.model, start_ms, end_ms);
        span = self.provider(span, &response.provider);
        let usage = response.token_usage;
        span = span
            .str_nonempty(c::GEN_AI_RESPONSE_MODEL, &response.model)
            .str_nonempty(c::LLM_MODEL_NAME, &response.model);
        // 0 and 0 is a response that reported no usage: unknown, so left off.
        if usage.prompt_tokens != 0 || usage.completion_tokens != 0 {
            span = span
                .int(c::GEN_AI_USAGE_INPUT_TOKENS, usage.prompt_tokens)
                .int(c::GEN_AI_USAGE_OUTPUT_TOKENS, usage.completion_tokens);
            span = crate::span::openinference_tokens(
                span,
                usage.prompt_tokens,
                usage.completion_tokens,
            );
        }
        span = span.int(c::CUCA_DURATION_MS, duration_ms);
        if let Some(reason) = response.finish_reason.as_deref() {
            span = span.str_array(c::GEN_AI_RESPONSE_FINISH_REASONS, &[reason]);
        }
        if let Some(usage) = &response.usage {
            if let Some(reasoning) = usage.reasoning_tokens {
                span = span.int(c::CUCA_USAGE_REASONING_TOKENS, reasoning);
            }
            if let Some(cost) = usage.cost.filter(|c| c.is_finite()) {
                span = span.float(c::CUCA_COST, cost);
            }
        }
        if let Some(cache) = response.prompt_cache_usage {
            span = span.int(c::CUCA_USAGE_CACHED_TOKENS, cache.cached_tokens);
        }
        if let Some(usage) = response.usage.as_ref().filter(|u| !u.detail.is_empty()) {
            span = crate::span::token_detail(
                span,
                &usage.detail,
                &response.model,
                crate::span::latest_from_env(),
            );
        }
        if self.config.with_content {
            let output =
                content::output_messages(&response.content, response.finish_reason.as_deref());
            let (value, mime) = content::output_value(&response.content, &output);
            span = span
                .str(c::OUTPUT_VALUE, value)
                .str(c::OUTPUT_MIME_TYPE, mime)
                .str(c::GEN_AI_OUTPUT_MESSAGES, output);
        }
        // The hook runs once, when the call has ended with its whole answer: the span is
        // sent once, final, and ended well.
        self.enqueue(span.ok().build());
        Ok(())
    }

    async fn on_error(
        &self,
        request: &UnifiedRequest,
        error: &PluginError,
    ) -> Result<(), PluginError> {
        let call_id = request.metadata.call_id.as_deref();
        let end_ms = now_ms();
        // A call that failed before `on_request` ran (or carried no call id) is still
        // described by the request the error hook is handed.
        let pending = self
            .take_pending(call_id)
            .unwrap_or_else(|| Pending::from_request(request, end_ms, self.config.with_content));
        let mut span = self.call_span(
            call_id,
            Some(&pending),
            &request.model,
            pending.start_ms,
            end_ms,
        );
        span = self.provider(span, "");
        if let PluginError::Provider { status, .. } = error {
            span = span.int(c::HTTP_RESPONSE_STATUS_CODE, u64::from(*status));
        }
        span = span
            .str(c::ERROR_TYPE, error_type(error))
            .error(error.to_string());
        self.enqueue(span.build());
        Ok(())
    }
}

impl LiveWorker {
    /// Sends batches until the queue is closed ([`OtelPlugin::close`], or the plugin
    /// dropped) and empty; returns the final counts.
    pub async fn run(mut self) -> LiveStats {
        let mut failing = false;
        while let Some(first) = self.receiver.recv().await {
            let mut batch = vec![first];
            let deadline = tokio::time::Instant::now() + self.flush_interval;
            while batch.len() < self.max_batch {
                match tokio::time::timeout_at(deadline, self.receiver.recv()).await {
                    Ok(Some(span)) => batch.push(span),
                    // Closed (sent at once, then the outer loop ends) or the interval is up.
                    Ok(None) | Err(_) => break,
                }
            }
            let n = batch.len() as u64;
            match self.exporter.send(batch).await {
                Ok(report) => {
                    self.counters
                        .exported
                        .fetch_add(n.saturating_sub(report.rejected), Ordering::Relaxed);
                    self.counters
                        .dropped_send_failed
                        .fetch_add(report.rejected, Ordering::Relaxed);
                    if failing {
                        tracing::info!(url = self.exporter.url(), "otlp export works again");
                    }
                    failing = false;
                }
                Err(error) => {
                    self.counters
                        .dropped_send_failed
                        .fetch_add(n, Ordering::Relaxed);
                    self.counters
                        .failed_requests
                        .fetch_add(1, Ordering::Relaxed);
                    if !failing {
                        let stats = self.counters.stats();
                        tracing::warn!(
                            %error,
                            dropped = stats.dropped_send_failed,
                            "otlp export failed; spans are dropped and counted until it works again"
                        );
                    }
                    failing = true;
                }
            }
        }
        self.counters.stats()
    }
}
