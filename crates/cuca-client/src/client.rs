//! `CucaClient` and its builder: the plugin pipeline around one streamed call.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use cuca_calllog::CallLog;
use cuca_events::{
    AgentResponseStream, CucaPlugin, MessageContentBlock, PluginError, UnifiedRequest,
    UnifiedResponse,
};
use tokio::time::Instant;

use crate::attempt::{self, AttemptEnd, AttemptRecord, AttemptShape, CallerDeadline, ErrorSource};
use crate::config::{RetryPolicy, Timeouts};
use crate::conn::{ConnTrace, TimedResolver, TraceLayer};
use crate::endpoint::{ApiKey, ProviderEndpoint};
use crate::error::ClientError;
use cuca_wire::chat::{request_body, ChatStreamDecoder, MaxTokensField};
use cuca_wire::StreamSummary;

/// Builds a [`CucaClient`]; [`CucaClientBuilder::build`] validates everything.
#[derive(Default)]
pub struct CucaClientBuilder {
    endpoint: ProviderEndpoint,
    base_url: Option<String>,
    model: Option<String>,
    api_key: Option<ApiKey>,
    plugins: Vec<Arc<dyn CucaPlugin>>,
    timeouts: Timeouts,
    retry: RetryPolicy,
    /// `None`: the process-global call log, looked up at each call.
    call_log: Option<CallLog>,
}

impl fmt::Debug for CucaClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CucaClientBuilder")
            .field("endpoint", &self.endpoint)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .field("plugins", &plugin_names(&self.plugins))
            .field("timeouts", &self.timeouts)
            .field("retry", &self.retry)
            .field("call_log", &self.call_log)
            .finish()
    }
}

impl CucaClientBuilder {
    /// Which kind of server the client talks to (default [`ProviderEndpoint::LlamaCpp`]).
    pub fn with_provider(mut self, endpoint: ProviderEndpoint) -> Self {
        self.endpoint = endpoint;
        self
    }

    /// The server's base URL (`http://127.0.0.1:1234`); `/v1/chat/completions` is appended,
    /// or only `/chat/completions` when the URL already ends in `/v1`.
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = Some(base_url.into());
        self
    }

    /// The model asked for when a request names none. Without one, llama.cpp answers with
    /// the model it has loaded.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The API key, sent as `Authorization: Bearer …`. For [`ProviderEndpoint::OpenAi`] it
    /// defaults to `OPENAI_API_KEY`; other endpoints send a key only when given one here.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(ApiKey::new(key));
        self
    }

    /// Applies `CUCA_BASE_URL` and `CUCA_MODEL` where they are set and not empty: the two
    /// variables every cuca program honours to point at another server.
    pub fn with_env(mut self) -> Self {
        if let Some(url) = env_nonempty("CUCA_BASE_URL") {
            self.base_url = Some(url);
        }
        if let Some(model) = env_nonempty("CUCA_MODEL") {
            self.model = Some(model);
        }
        self
    }

    /// Adds a plugin. Plugins run in registration order on every hook.
    pub fn register_plugin(mut self, plugin: Arc<dyn CucaPlugin>) -> Self {
        self.plugins.push(plugin);
        self
    }

    /// All four timeouts at once.
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// The per-attempt connection timeout.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.timeouts.connect = timeout;
        self
    }

    /// The time allowed from sending until the first content block.
    pub fn with_first_token_timeout(mut self, timeout: Duration) -> Self {
        self.timeouts.first_token = timeout;
        self
    }

    /// The longest silence allowed between reads after the first block.
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.timeouts.idle = timeout;
        self
    }

    /// The time allowed for a whole call, retries included.
    pub fn with_total_timeout(mut self, timeout: Duration) -> Self {
        self.timeouts.total = timeout;
        self
    }

    /// The retry policy (default [`RetryPolicy::default`]).
    pub fn with_retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The call log every attempt writes its start and end rows to.
    ///
    /// Without one, the client writes to the process-global log
    /// ([`cuca_calllog::global`]), looked up at each call so a later [`cuca_calllog::open`]
    /// is honoured: `logs/calls.jsonl` under the state root, moved or turned off by
    /// `CUCA_CALL_LOG`. A test hands in `CallLog::builder().path(Some(tmp)).build()`, or
    /// [`CallLog::off`] for none.
    pub fn with_call_log(mut self, log: CallLog) -> Self {
        self.call_log = Some(log);
        self
    }

    /// Validates the settings and builds the client.
    pub fn build(self) -> Result<CucaClient, ClientError> {
        self.timeouts.validate()?;
        self.retry.validate()?;
        let base_url = match self
            .base_url
            .or(self.endpoint.default_base_url().map(str::to_owned))
        {
            Some(url) => url,
            None => {
                return Err(ClientError::InvalidBaseUrl {
                    url: String::new(),
                    message: format!(
                        "{} has no default base url; call with_base_url or set CUCA_BASE_URL",
                        self.endpoint
                    ),
                })
            }
        };
        let url = chat_completions_url(&base_url)?;
        let api_key = match (self.api_key, self.endpoint) {
            (Some(key), _) => Some(key),
            (None, ProviderEndpoint::OpenAi) => match env_nonempty("OPENAI_API_KEY") {
                Some(key) => Some(ApiKey::new(key)),
                None => {
                    return Err(ClientError::MissingApiKey {
                        endpoint: self.endpoint.to_string(),
                        message: "set OPENAI_API_KEY or call with_api_key".into(),
                    })
                }
            },
            (None, _) => None,
        };
        let conn_trace = Arc::new(ConnTrace::default());
        let http = reqwest::Client::builder()
            .connect_timeout(self.timeouts.connect)
            // Each streamed event is a small write; Nagle's algorithm would hold them back.
            .tcp_nodelay(true)
            // The call log's `conn_reused`, `dns_ms` and `connect_ms`: every connection the
            // pool opens is timed and filed for the response that first comes over it.
            .connector_layer(TraceLayer(Arc::clone(&conn_trace)))
            .dns_resolver(Arc::new(TimedResolver))
            .build()
            .map_err(|source| ClientError::HttpClient { source })?;
        Ok(CucaClient {
            inner: Arc::new(Inner {
                endpoint: self.endpoint,
                base_url: base_url.trim_end_matches('/').to_owned(),
                url,
                model: self.model.unwrap_or_default(),
                api_key,
                plugins: self.plugins,
                timeouts: self.timeouts,
                retry: self.retry,
                http,
                run_id: format!("{:08x}", rand::random::<u32>()),
                call_log: self.call_log,
                conn_trace,
            }),
        })
    }
}

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// `{base}/v1/chat/completions` (see [`cuca_wire::api_url`]).
fn chat_completions_url(base_url: &str) -> Result<reqwest::Url, ClientError> {
    cuca_wire::api_url(base_url, "chat/completions", "http://127.0.0.1:1234").map_err(|e| {
        ClientError::InvalidBaseUrl {
            url: base_url.to_owned(),
            message: e.to_string(),
        }
    })
}

fn plugin_names(plugins: &[Arc<dyn CucaPlugin>]) -> Vec<String> {
    plugins.iter().map(|p| p.name().to_owned()).collect()
}

/// The shared state of a client and every stream it returns.
pub(crate) struct Inner {
    pub(crate) endpoint: ProviderEndpoint,
    /// The base URL as given (for messages).
    pub(crate) base_url: String,
    /// `{base}/v1/chat/completions`.
    pub(crate) url: reqwest::Url,
    pub(crate) model: String,
    pub(crate) api_key: Option<ApiKey>,
    pub(crate) plugins: Vec<Arc<dyn CucaPlugin>>,
    pub(crate) timeouts: Timeouts,
    pub(crate) retry: RetryPolicy,
    pub(crate) http: reqwest::Client,
    /// Filled into `metadata.run` of requests that name no run.
    pub(crate) run_id: String,
    /// The call log given to the builder; `None` is the process-global one.
    pub(crate) call_log: Option<CallLog>,
    /// The connections the pool opened, for the call log's `conn_reused`.
    pub(crate) conn_trace: Arc<ConnTrace>,
}

impl Inner {
    /// The call log this call's attempts write to.
    pub(crate) fn call_log(&self) -> CallLog {
        match &self.call_log {
            Some(log) => log.clone(),
            None => cuca_calllog::global(),
        }
    }
}

/// An OpenAI-compatible streaming client whose plugins see every request, streamed block
/// and completion.
///
/// Cloning is cheap and shares the connection pool and the plugins.
#[derive(Clone)]
pub struct CucaClient {
    inner: Arc<Inner>,
}

impl fmt::Debug for CucaClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &self.inner;
        f.debug_struct("CucaClient")
            .field("endpoint", &inner.endpoint)
            .field("url", &inner.url.as_str())
            .field("model", &inner.model)
            .field("api_key", &inner.api_key)
            .field("plugins", &plugin_names(&inner.plugins))
            .field("timeouts", &inner.timeouts)
            .field("retry", &inner.retry)
            .field("call_log", &inner.call_log)
            .finish()
    }
}

impl CucaClient {
    /// A builder with the defaults: llama.cpp at `http://127.0.0.1:1234`, no plugins,
    /// [`Timeouts::default`], [`RetryPolicy::default`].
    pub fn builder() -> CucaClientBuilder {
        CucaClientBuilder::default()
    }

    /// The endpoint kind.
    pub fn endpoint(&self) -> ProviderEndpoint {
        self.inner.endpoint
    }

    /// The URL every call posts to (`{base}/v1/chat/completions`).
    pub fn url(&self) -> &str {
        self.inner.url.as_str()
    }

    /// The model asked for when a request names none (empty: the server's choice).
    pub fn model(&self) -> &str {
        &self.inner.model
    }

    /// Streams one call's blocks, each after every plugin's `on_stream_chunk` saw it.
    ///
    /// Nothing is sent until the stream is first polled. Then: a `call_id` is minted into
    /// `request.metadata.call_id`, the client's model fills an empty `request.model`, the
    /// `on_request` hooks run in registration order, and the request is posted with
    /// `stream: true` and `stream_options.include_usage: true`. After the last block the
    /// `on_response_complete` hooks see the aggregated response (their failures are logged,
    /// not returned); a failure anywhere else ends the stream with that error, after the
    /// `on_error` hooks saw it. Dropping the stream cancels the HTTP request.
    pub fn generate_stream(&self, request: UnifiedRequest) -> AgentResponseStream {
        self.stream_turn(Turn::new(Arc::clone(&self.inner), request))
    }

    /// [`CucaClient::generate_stream`] with a deadline of the caller's own.
    ///
    /// The call ends at `deadline` (or at the client's total timeout, whichever is first)
    /// with [`PluginError::Timeout`] whose phase is "answer by the caller's deadline", and
    /// the call log's end row says `ended: "deadline"`, `applied: "caller"`. A caller that
    /// also wraps the stream in its own `tokio::time::timeout` for the same instant gets the
    /// same row when that fires first: a drop at or after the stated deadline is written as
    /// `deadline`, and only a drop before it as `cancelled`.
    pub fn generate_stream_by(
        &self,
        request: UnifiedRequest,
        deadline: impl Into<Instant>,
    ) -> AgentResponseStream {
        let mut turn = Turn::new(Arc::clone(&self.inner), request);
        turn.caller_deadline = Some(deadline.into());
        self.stream_turn(turn)
    }

    fn stream_turn(&self, turn: Turn) -> AgentResponseStream {
        // Boxed so that `unfold` moves a pointer, not the whole turn, on every block.
        let turn = Box::new(turn);
        Box::pin(futures::stream::unfold(turn, |mut turn| async move {
            turn.next_block().await.map(|item| (item, turn))
        }))
    }

    /// Runs one call to its end and returns the aggregated response: the same value the
    /// `on_response_complete` hooks saw.
    pub async fn generate(&self, request: UnifiedRequest) -> Result<UnifiedResponse, PluginError> {
        self.run_turn(Turn::new(Arc::clone(&self.inner), request))
            .await
    }

    /// [`CucaClient::generate`] with a deadline of the caller's own; see
    /// [`CucaClient::generate_stream_by`].
    pub async fn generate_by(
        &self,
        request: UnifiedRequest,
        deadline: impl Into<Instant>,
    ) -> Result<UnifiedResponse, PluginError> {
        let mut turn = Turn::new(Arc::clone(&self.inner), request);
        turn.caller_deadline = Some(deadline.into());
        self.run_turn(turn).await
    }

    async fn run_turn(&self, mut turn: Turn) -> Result<UnifiedResponse, PluginError> {
        while let Some(item) = turn.next_block().await {
            item?;
        }
        turn.response.take().ok_or_else(|| PluginError::Transport {
            url: self.inner.url.to_string(),
            message: "the call ended without a response".into(),
            source: None,
        })
    }
}

/// How long the client waits, after `[DONE]`, for the body's end. A server ends the body
/// right after its last event (llama-server writes the terminating chunk straight after
/// `[DONE]`), so this is only ever spent on a server that holds the body open; then the
/// connection is closed instead of pooled, and the next call opens a new one.
const DRAIN_WAIT: Duration = Duration::from_millis(250);

/// The most bytes read after `[DONE]` while waiting for the body's end: a server that keeps
/// sending after it is not going to end soon.
const DRAIN_BYTES: usize = 64 * 1024;

/// Reads what is left of a finished stream's body, by `deadline`, so that hyper sees its end
/// and returns the connection to the pool. Whatever comes is ignored (the decoder ignores
/// anything after `[DONE]` too); a body that does not end in time is dropped, which closes
/// its connection.
async fn drain(mut http: reqwest::Response, deadline: Instant) {
    let mut seen = 0;
    while seen <= DRAIN_BYTES {
        match tokio::time::timeout_at(deadline, http.chunk()).await {
            Ok(Ok(Some(rest))) => seen += rest.len(),
            Ok(Ok(None) | Err(_)) | Err(_) => return,
        }
    }
}

/// One call in flight: the state [`CucaClient::generate_stream`] polls.
struct Turn {
    inner: Arc<Inner>,
    request: UnifiedRequest,
    call_id: String,
    prepared: bool,
    finished: bool,
    body: Option<Bytes>,
    started: Instant,
    /// A deadline the caller stated ([`CucaClient::generate_stream_by`]).
    caller_deadline: Option<Instant>,
    http: Option<reqwest::Response>,
    /// The one timer every read of the body waits on (see [`Turn::read`]).
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    attempt: Option<AttemptRecord>,
    decoder: ChatStreamDecoder,
    /// Decoded blocks not yet handed out.
    pending: VecDeque<MessageContentBlock>,
    /// Scratch space the decoder pushes into, reused across reads.
    decoded: Vec<MessageContentBlock>,
    /// Blocks handed out, for the aggregated response.
    content: Vec<MessageContentBlock>,
    first_block_decoded: bool,
    summary: Option<StreamSummary>,
    response: Option<UnifiedResponse>,
}

impl Turn {
    fn new(inner: Arc<Inner>, request: UnifiedRequest) -> Self {
        Turn {
            inner,
            request,
            call_id: String::new(),
            prepared: false,
            finished: false,
            body: None,
            started: Instant::now(),
            caller_deadline: None,
            http: None,
            timer: None,
            attempt: None,
            decoder: ChatStreamDecoder::new(),
            pending: VecDeque::new(),
            decoded: Vec::new(),
            content: Vec::new(),
            first_block_decoded: false,
            summary: None,
            response: None,
        }
    }

    fn url(&self) -> &str {
        self.inner.url.as_str()
    }

    async fn next_block(&mut self) -> Option<Result<MessageContentBlock, PluginError>> {
        if self.finished {
            return None;
        }
        match self.step().await {
            Ok(Some(block)) => Some(Ok(block)),
            Ok(None) => {
                self.finished = true;
                None
            }
            Err(error) => {
                self.finished = true;
                // Dropping the response closes the connection: the server stops generating.
                self.http = None;
                self.fail(&error).await;
                Some(Err(error))
            }
        }
    }

    async fn step(&mut self) -> Result<Option<MessageContentBlock>, PluginError> {
        if !self.prepared {
            self.prepare().await?;
        }
        loop {
            if let Some(block) = self.pending.pop_front() {
                for plugin in &self.inner.plugins {
                    if let Err(error) = plugin.on_stream_chunk(&block).await {
                        if let Some(record) = self.attempt.as_mut() {
                            record.error_source = ErrorSource::Plugin;
                        }
                        return Err(error);
                    }
                }
                self.content.push(block.clone());
                return Ok(Some(block));
            }
            if let Some(summary) = self.summary.take() {
                self.complete(summary).await;
                return Ok(None);
            }
            if self.http.is_none() {
                let response = self.send_with_retries().await?;
                self.http = Some(response);
            }
            self.read().await?;
        }
    }

    /// Mints the call id, fills defaults, runs `on_request` and encodes the body.
    async fn prepare(&mut self) -> Result<(), PluginError> {
        self.prepared = true;
        self.call_id = format!("{:016x}", rand::random::<u64>());
        self.request.metadata.call_id = Some(self.call_id.clone());
        if self.request.metadata.run.is_none() {
            self.request.metadata.run = Some(self.inner.run_id.clone());
        }
        if self.request.model.is_empty() {
            self.request.model = self.inner.model.clone();
        }
        for plugin in &self.inner.plugins {
            plugin.on_request(&mut self.request).await?;
        }
        if self.inner.endpoint == ProviderEndpoint::OpenAi && self.request.model.is_empty() {
            return Err(PluginError::validation(
                "UnifiedRequest::model",
                "the OpenAI API needs a model: set request.model, with_model or CUCA_MODEL",
            ));
        }
        let ceiling = match self.inner.endpoint {
            ProviderEndpoint::OpenAi => MaxTokensField::MaxCompletionTokens,
            _ => MaxTokensField::MaxTokens,
        };
        let body = request_body(&self.request, &self.request.model, ceiling).map_err(|e| {
            PluginError::validation("UnifiedRequest", format!("cannot encode as JSON: {e}"))
        })?;
        self.body = Some(Bytes::from(body));
        self.started = Instant::now();
        Ok(())
    }

    /// The total deadline, as `(instant, phase, timeout)`: the client's total timeout, or
    /// the caller's deadline when that is earlier.
    fn total_deadline(&self) -> (Instant, &'static str, Duration) {
        let total = self.inner.timeouts.total;
        let client = (self.started + total, "response", total);
        match self.caller() {
            Some(caller) => Self::earliest(
                client,
                (caller.at, attempt::CALLER_DEADLINE_PHASE, caller.after),
            ),
            None => client,
        }
    }

    fn caller(&self) -> Option<CallerDeadline> {
        self.caller_deadline.map(|at| CallerDeadline {
            at,
            after: at.saturating_duration_since(self.started),
        })
    }

    fn earliest(
        a: (Instant, &'static str, Duration),
        b: (Instant, &'static str, Duration),
    ) -> (Instant, &'static str, Duration) {
        if b.0 < a.0 {
            b
        } else {
            a
        }
    }

    async fn send_with_retries(&mut self) -> Result<reqwest::Response, PluginError> {
        let body = self.body.clone().unwrap_or_default();
        let shape = AttemptShape::of(&self.request, &body);
        let log = self.inner.call_log();
        let policy = self.inner.retry;
        let mut n = 0;
        loop {
            n += 1;
            let mut record =
                AttemptRecord::start(n, &self.call_id, &shape, &log, &body, self.caller());
            let first_token = self.inner.timeouts.first_token;
            let deadline = Self::earliest(
                self.total_deadline(),
                (record.sent_at + first_token, "first token", first_token),
            );
            match attempt::send(&self.inner, body.clone(), &mut record, deadline).await {
                Ok(response) => {
                    self.attempt = Some(record);
                    return Ok(response);
                }
                Err(failure) => {
                    let retries_left = n <= policy.max_retries;
                    let mut wait = policy.backoff(n);
                    if let Some(asked) = failure.retry_after {
                        wait = wait.max(asked);
                    }
                    let honourable = failure
                        .retry_after
                        .is_none_or(|asked| asked <= policy.max_retry_after);
                    let in_time = Instant::now() + wait < self.total_deadline().0;
                    if failure.retryable && retries_left && honourable && in_time {
                        record.end(AttemptEnd::Retrying(&failure.error, wait));
                        tokio::time::sleep(wait).await;
                        continue;
                    }
                    record.end(AttemptEnd::Failed(&failure.error));
                    return Err(failure.error);
                }
            }
        }
    }

    /// Reads the next piece of the body and decodes it.
    async fn read(&mut self) -> Result<(), PluginError> {
        let sent_at = self.attempt.as_ref().map_or(self.started, |a| a.sent_at);
        let timeouts = self.inner.timeouts;
        let first_token = (!self.first_block_decoded).then(|| {
            (
                sent_at + timeouts.first_token,
                "first token",
                timeouts.first_token,
            )
        });
        let total = self.total_deadline();
        let Some(http) = self.http.as_mut() else {
            return Ok(());
        };
        let url = self.inner.url.as_str();
        // One poll with no timer first: a piece already in hand needs no deadline at all.
        // A read that has to wait computes its deadline (one clock read), and waits on the
        // turn's one timer, which is re-armed only when it would fire late. A timer armed
        // for an earlier read's deadline (sooner than this one's) is left as it is, and if
        // it fires, it is moved on to this read's deadline then: once per idle period, not
        // once per piece. Creating and dropping a timer on every read (it registers and
        // deregisters in tokio's timer wheel) was about 5% of the client's cost per block,
        // see docs/performance.md.
        let timer = &mut self.timer;
        let waited = {
            let mut reading = std::pin::pin!(http.chunk());
            match std::future::poll_fn(|cx| Poll::Ready(reading.as_mut().poll(cx))).await {
                Poll::Ready(read) => Ok(read),
                Poll::Pending => {
                    let phase = first_token
                        .unwrap_or_else(|| (Instant::now() + timeouts.idle, "data", timeouts.idle));
                    let (at, phase, after) = Self::earliest(total, phase);
                    let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
                    if timer.deadline() > at {
                        timer.as_mut().reset(at);
                    }
                    std::future::poll_fn(|cx| {
                        if let Poll::Ready(read) = reading.as_mut().poll(cx) {
                            return Poll::Ready(Ok(read));
                        }
                        loop {
                            std::task::ready!(timer.as_mut().poll(cx));
                            if timer.deadline() >= at {
                                return Poll::Ready(Err(attempt::timeout(url, phase, after)));
                            }
                            // An earlier read's deadline passed; this read's has not.
                            timer.as_mut().reset(at);
                        }
                    })
                    .await
                }
            }
        };
        let chunk = match waited {
            Err(timed_out) => return Err(timed_out),
            Ok(Err(error)) => {
                let summary = self.decoder.summary();
                return Err(PluginError::Transport {
                    url: url.to_owned(),
                    message: format!(
                        "the connection broke mid-stream after {} events and {} blocks ({})",
                        summary.n_events,
                        self.content.len() + self.pending.len(),
                        attempt::root_cause(&error)
                    ),
                    source: Some(Box::new(error)),
                });
            }
            Ok(Ok(chunk)) => chunk,
        };
        let decoded = match chunk {
            Some(bytes) => {
                if let Some(record) = self.attempt.as_mut() {
                    record.capture(&bytes);
                }
                let fed = self.decoder.feed(&bytes, &mut self.decoded);
                fed.and_then(|()| {
                    if self.decoder.is_done() {
                        self.decoder.finish(&mut self.decoded).map(Some)
                    } else {
                        Ok(None)
                    }
                })
            }
            None => self.decoder.finish(&mut self.decoded).map(Some),
        };
        let summary = match decoded {
            Ok(summary) => summary,
            Err(error) => {
                if let (Some(record), Some(text)) =
                    (self.attempt.as_mut(), self.decoder.error_detail())
                {
                    record.error_source = ErrorSource::Stream {
                        text: text.to_owned(),
                        answer: answer_text(
                            self.content
                                .iter()
                                .chain(&self.pending)
                                .chain(&self.decoded),
                        ),
                    };
                }
                return Err(self.decode_error(error.into()));
            }
        };
        if !self.decoded.is_empty() && !self.first_block_decoded {
            self.first_block_decoded = true;
            if let Some(record) = self.attempt.as_mut() {
                record.set_ttft(record.sent_at.elapsed());
            }
        }
        self.pending.extend(self.decoded.drain(..));
        if let Some(summary) = summary {
            // The stream is over: release the connection before the last blocks are handed
            // out. After `[DONE]` the body has not ended yet (the terminating chunk follows);
            // reading it is what lets the connection go back to the pool for the next call.
            if let Some(http) = self.http.take() {
                let (at, _, _) = self.total_deadline();
                drain(http, at.min(Instant::now() + DRAIN_WAIT)).await;
            }
            self.summary = Some(summary);
        }
        Ok(())
    }

    fn decode_error(&self, error: ClientError) -> PluginError {
        let url = self.url().to_owned();
        match error {
            ClientError::StreamError { message } => PluginError::Provider {
                url,
                status: self.attempt.as_ref().and_then(|a| a.status).unwrap_or(200),
                message,
                retry_after_s: None,
            },
            ClientError::Truncated { .. } => PluginError::Transport {
                url,
                message: error.to_string(),
                source: None,
            },
            other => PluginError::Decode {
                url,
                message: other.to_string(),
            },
        }
    }

    async fn complete(&mut self, summary: StreamSummary) {
        if let Some(record) = self.attempt.as_mut() {
            let answered = self.content.iter().any(|block| match block {
                MessageContentBlock::Text { text } => !text.trim().is_empty(),
                MessageContentBlock::ToolCall { .. } => true,
                _ => false,
            });
            record.end(AttemptEnd::Finished {
                summary: &summary,
                answered,
            });
        }
        // Without a usage chunk, llama.cpp's timings still count the tokens.
        let token_usage = summary.token_usage();
        let model = summary
            .model
            .clone()
            .unwrap_or_else(|| self.request.model.clone());
        let response = UnifiedResponse {
            model,
            provider: self.inner.endpoint.provider_word().to_owned(),
            content: std::mem::take(&mut self.content),
            finish_reason: summary.finish_reason,
            token_usage,
            usage: summary.usage,
            prompt_cache_usage: summary.prompt_cache,
            duration: self.started.elapsed(),
            call_id: Some(self.call_id.clone()),
        };
        for plugin in &self.inner.plugins {
            if let Err(error) = plugin.on_response_complete(&response).await {
                // The seed: "A failure in on_response_complete is logged by the client and
                // does not abort the turn." The caller already holds every block.
                tracing::warn!(
                    plugin = plugin.name(),
                    call_id = %self.call_id,
                    %error,
                    "on_response_complete failed; the turn goes on"
                );
            }
        }
        self.response = Some(response);
    }

    async fn fail(&mut self, error: &PluginError) {
        if let Some(record) = self.attempt.as_mut() {
            record.end(AttemptEnd::Failed(error));
        }
        for plugin in &self.inner.plugins {
            if let Err(hook_error) = plugin.on_error(&self.request, error).await {
                tracing::warn!(
                    plugin = plugin.name(),
                    call_id = %self.call_id,
                    error = %hook_error,
                    "on_error failed"
                );
            }
        }
    }
}

/// The answer's text decoded so far, joined as it streamed (deltas without separators, so a
/// quote spanning two deltas is one run), for the redaction of an in-stream error that
/// quotes it.
fn answer_text<'b>(blocks: impl Iterator<Item = &'b MessageContentBlock>) -> String {
    let mut answer = String::new();
    for block in blocks {
        match block {
            MessageContentBlock::Text { text } => answer.push_str(text),
            MessageContentBlock::Thinking { thinking } => answer.push_str(thinking),
            MessageContentBlock::ToolCall { arguments, .. } => answer.push_str(arguments),
            _ => {}
        }
    }
    answer
}
