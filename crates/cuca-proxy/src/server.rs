//! `Proxy`: the axum router, its shared state, and the handlers that route each call.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use cuca_calllog::CallLog;
use cuca_events::SessionBackend;
use cuca_replay::SessionReplay;
use serde_json::json;
use tokio::sync::watch;

use crate::chain;
use crate::config::{Mode, ProxyConfig, MODELS_MAX_BYTES, MODELS_TIMEOUT};
use crate::conversations::{Conversations, Placed};
use crate::error::ProxyError;
use crate::matching::Matching;
use crate::record::{self, root_cause, upstream_headers, Recording};
use crate::replay::{self, Lookup};
use crate::session::{self, Slots};
use crate::wire::ApiError;
use cuca_wire::{Format, WireRequest};

/// How long the proxy waits to open a connection to the upstream. Generation itself has no
/// bound here: the caller decides how long it waits, and hanging up cancels the call.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What every handler shares.
pub(crate) struct Shared {
    pub(crate) config: ProxyConfig,
    pub(crate) replay: replay::Loads,
    pub(crate) slots: Slots,
    /// The conversations of each session in use (issue 30).
    pub(crate) conversations: Conversations,
    /// The recorded turns replay has served, per conversation.
    pub(crate) served: replay::Served,
    /// What replay compares, and what it ignores.
    pub(crate) matching: Matching,
    /// Fork mode's branches: the conversation a diverging call was recorded in instead of
    /// each recorded conversation, so the calls after it continue the branch.
    pub(crate) branches: std::sync::Mutex<std::collections::HashMap<String, String>>,
    /// The store, for fork mode's forks.
    pub(crate) backend: Arc<dyn SessionBackend>,
    pub(crate) http: reqwest::Client,
    /// The upstream's model-call URL of each format (`{upstream}/v1/chat/completions`,
    /// `…/v1/messages`, `…/v1/responses`), in [`Format::ALL`] order; empty in replay mode.
    pub(crate) call_urls: Vec<(Format, reqwest::Url)>,
    /// `{upstream}/v1/messages/count_tokens`; `None` in replay mode.
    pub(crate) count_tokens_url: Option<reqwest::Url>,
    /// `{upstream}/v1/models`; `None` in replay mode.
    pub(crate) models_url: Option<reqwest::Url>,
    /// The upstream's base URL as given, for messages.
    pub(crate) upstream_base: String,
    pub(crate) call_log: CallLog,
    /// The call log's `run` for every call this proxy forwards.
    pub(crate) run_id: String,
    /// Set when a shutdown begins: new calls are refused with a 503 from then on.
    pub(crate) closing: AtomicBool,
    /// Set to `true` when the shutdown's grace is over: every call still in flight ends now
    /// and closes its turn ([`cut`]).
    pub(crate) cut: watch::Sender<bool>,
}

/// The call-log sentence of a call the proxy ended because it was shutting down.
pub(crate) const SHUT_DOWN: &str = "the proxy shut down";

/// Resolves once the shutdown's grace is over (never, while the proxy runs).
pub(crate) async fn cut(shutdown: &mut watch::Receiver<bool>) {
    if shutdown.wait_for(|cut| *cut).await.is_err() {
        // The proxy itself is gone: nothing will ever say "cut".
        std::future::pending::<()>().await;
    }
}

/// The OpenAI-compatible recording and replaying proxy. See the crate docs.
#[derive(Clone)]
pub struct Proxy {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("config", &self.shared.config)
            .field("run_id", &self.shared.run_id)
            .finish()
    }
}

/// `{base}/v1/{tail}`, or `{base}/{tail}` when the base already ends in `/v1`.
fn upstream_url(base: &str, tail: &str) -> Result<reqwest::Url, ProxyError> {
    let invalid = |message: String| ProxyError::InvalidUpstream {
        url: base.to_owned(),
        message,
    };
    let mut url = reqwest::Url::parse(base.trim())
        .map_err(|e| invalid(format!("{e}; an upstream looks like http://127.0.0.1:8080")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid(format!(
            "the scheme is {:?}; only http and https are spoken",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("it names no host".into()));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid(
            "an upstream url carries no query or fragment".into(),
        ));
    }
    let path = url.path().trim_end_matches('/').to_owned();
    let path = if path.ends_with("/v1") {
        format!("{path}/{tail}")
    } else {
        format!("{path}/v1/{tail}")
    };
    url.set_path(&path);
    Ok(url)
}

impl Proxy {
    /// A proxy recording into (and replaying from) `backend`, writing call-log rows to the
    /// process-global call log. Validates `config` and the upstream URL.
    pub fn new(config: ProxyConfig, backend: Arc<dyn SessionBackend>) -> Result<Self, ProxyError> {
        Self::with_call_log(config, backend, cuca_calllog::global())
    }

    /// As [`Proxy::new`], writing call-log rows to `call_log` (a test hands in its own).
    pub fn with_call_log(
        config: ProxyConfig,
        backend: Arc<dyn SessionBackend>,
        call_log: CallLog,
    ) -> Result<Self, ProxyError> {
        config.validate()?;
        let (call_urls, count_tokens_url, models_url, upstream_base) =
            match (&config.upstream, config.mode) {
                (Some(base), mode) if mode.forwards() => (
                    Format::ALL
                        .into_iter()
                        .map(|format| {
                            let tail = format.path().trim_start_matches("/v1/");
                            upstream_url(base, tail).map(|url| (format, url))
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                    Some(upstream_url(base, "messages/count_tokens")?),
                    Some(upstream_url(base, "models")?),
                    base.trim_end_matches('/').to_owned(),
                ),
                _ => (Vec::new(), None, None, String::new()),
            };
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            // Each streamed event is a small write; Nagle's algorithm would hold them back.
            .tcp_nodelay(true)
            // A redirect is the upstream's answer to the caller, not the proxy's to follow.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|source| ProxyError::HttpClient { source })?;
        let slots = Slots::new(Arc::clone(&backend), config.max_sessions);
        let conversations = Conversations::new(Arc::clone(&backend));
        Ok(Proxy {
            shared: Arc::new(Shared {
                replay: replay::Loads::new(
                    SessionReplay::new(Arc::clone(&backend)),
                    Matching::new(&config.ignore, config.compare_parameters)?,
                ),
                slots,
                conversations,
                served: replay::Served::default(),
                matching: Matching::new(&config.ignore, config.compare_parameters)?,
                branches: std::sync::Mutex::default(),
                backend,
                http,
                call_urls,
                count_tokens_url,
                models_url,
                upstream_base,
                call_log,
                run_id: format!("{:08x}", rand::random::<u32>()),
                closing: AtomicBool::new(false),
                cut: watch::Sender::new(false),
                config,
            }),
        })
    }

    /// The config the proxy runs under.
    pub fn config(&self) -> &ProxyConfig {
        &self.shared.config
    }

    /// The call log's `run` on every row this proxy writes.
    pub fn run_id(&self) -> &str {
        &self.shared.run_id
    }

    /// Waits until no call is being recorded in `session`: the writer is free, so every
    /// record of the calls before is in the store. A graceful shutdown waits on it, and so
    /// does a test that reads a session after its caller hung up.
    pub async fn settled(&self, session: &str) {
        // A session's calls are recorded in its conversations, each with its own writer.
        let ids =
            crate::conversations::ids_of(session, |id| self.shared.slots.existing(id).is_some());
        for id in ids {
            if let Some(slot) = self.shared.slots.existing(&id) {
                drop(slot.lock.lock().await);
            }
        }
    }

    /// Waits until no call is being recorded in any session: every record of every call is
    /// in the store.
    pub async fn settled_all(&self) {
        for slot in self.shared.slots.all() {
            drop(slot.lock.lock().await);
        }
    }

    /// How many calls are in flight now: sessions whose writer a call holds.
    pub fn in_flight(&self) -> usize {
        self.shared
            .slots
            .all()
            .iter()
            .filter(|slot| slot.lock.try_lock().is_err())
            .count()
    }

    /// The routes, each also under `/s/{session}`: a model call in each wire format
    /// (`POST /v1/chat/completions`, `POST /v1/messages`, `POST /v1/responses`, a query
    /// string such as `?beta=true` allowed and forwarded), `POST /v1/messages/count_tokens`,
    /// `GET /v1/models`, and `HEAD /` / `GET /`, the connectivity probe some agents send
    /// first (200). Anything else is a 404 in OpenAI's shape.
    pub fn router(&self) -> Router {
        let mut router = Router::new();
        for format in Format::ALL {
            let in_default = move |State(shared): State<Arc<Shared>>,
                                   uri: Uri,
                                   headers: HeaderMap,
                                   body: Body| async move {
                model_call(shared, format, None, uri, headers, body).await
            };
            let in_session = move |State(shared): State<Arc<Shared>>,
                                   Path(session): Path<String>,
                                   uri: Uri,
                                   headers: HeaderMap,
                                   body: Body| async move {
                model_call(shared, format, Some(session), uri, headers, body).await
            };
            router = router.route(format.path(), post(in_default)).route(
                &format!("/s/{{session}}{}", format.path()),
                post(in_session),
            );
        }
        router
            .route("/v1/messages/count_tokens", post(count_tokens_default))
            .route(
                "/s/{session}/v1/messages/count_tokens",
                post(count_tokens_in_session),
            )
            .route("/", get(probe).head(probe))
            .route("/s/{session}", get(probe).head(probe))
            .route("/s/{session}/", get(probe).head(probe))
            .route("/v1/models", get(models))
            .route("/s/{session}/v1/models", get(models))
            .fallback(no_route)
            .method_not_allowed_fallback(wrong_method)
            .with_state(Arc::clone(&self.shared))
    }

    /// Serves the router on `listener` until `shutdown` resolves, then shuts down gracefully.
    ///
    /// Callers are served through `cuca_serve`'s accept loop under the config's header-read
    /// and idle timeouts and connection cap, with its `Host`/`Origin` rules
    /// ([`cuca_serve::LocalOrigin`]) for the listener's address. When `shutdown` resolves,
    /// nothing new is accepted and new calls get a 503; calls in flight run on for
    /// [`ProxyConfig::shutdown_grace`], then the ones left are ended: each closes its turn as
    /// a cut call and its call-log row says the proxy shut down. This returns once every
    /// recording has written its last record.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), ProxyError> {
        let local = listener.local_addr();
        let addr = local
            .as_ref()
            .map_or_else(|_| "the listener".to_owned(), ToString::to_string);
        let local = local.map_err(|source| ProxyError::Serve {
            addr: addr.clone(),
            source,
        })?;
        let config = &self.shared.config;
        let limits = cuca_serve::ServeLimits::new(
            config.header_read_timeout,
            config.idle_timeout,
            config.max_connections,
        );
        let router = cuca_serve::LocalOrigin::for_address(local).layer(self.router(), refused);
        let served = cuca_serve::serve_with_shutdown(listener, router, limits, shutdown).await;
        self.shared.closing.store(true, Ordering::SeqCst);
        let grace = self.shared.config.shutdown_grace;
        if tokio::time::timeout(grace, self.settled_all())
            .await
            .is_err()
        {
            self.shared.cut.send_replace(true);
            self.settled_all().await;
        }
        served.map_err(|source| ProxyError::Serve { addr, source })
    }
}

/// A request the `Host`/`Origin` rules refused, in OpenAI's error shape.
fn refused(refusal: cuca_serve::Refusal) -> Response {
    let code = if refusal.status == StatusCode::FORBIDDEN {
        "cuca_cross_site_origin"
    } else {
        "cuca_wrong_host"
    };
    ApiError::new(
        refusal.status,
        "invalid_request_error",
        code,
        refusal.message,
    )
    .into_response()
}

/// `HEAD /` and `GET /`: the connectivity probe (Claude Code sends one before its first call).
async fn probe() -> Response {
    let mut response = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "cuca proxy\n",
    )
        .into_response();
    response.headers_mut().insert(
        HeaderName::from_static("x-cuca-proxy"),
        HeaderValue::from_static("1"),
    );
    response
}

/// Reads the body whole, refusing more than the configured bound before reading it where
/// the caller declared its length, and as soon as it passes the bound where not.
async fn read_body(shared: &Shared, headers: &HeaderMap, body: Body) -> Result<Bytes, ApiError> {
    let max = shared.config.max_body_bytes;
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            "cuca_request_too_large",
            format!("the request body is over the proxy's limit of {max} bytes"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let timeout = shared.config.body_read_timeout;
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, max)).await {
        Ok(read) => read.map_err(|_| too_large()),
        Err(_) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "invalid_request_error",
            "cuca_body_timeout",
            format!(
                "the request body did not arrive within the proxy's {} s",
                timeout.as_secs_f64()
            ),
        )),
    }
}

/// Whether a `Content-Type` is JSON: `application/json` or any `…+json`, parameters aside.
fn is_json(content_type: Option<&HeaderValue>) -> bool {
    let Some(value) = content_type.and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or("").trim();
    let essence = essence.to_ascii_lowercase();
    essence == "application/json"
        || essence
            .strip_prefix("application/")
            .is_some_and(|sub| sub.ends_with("+json"))
}

/// Refuses what a web page could send without a CORS preflight: a model call is JSON, and
/// `text/plain`, a form or a multipart body is a cross-site page's, never an SDK's (the
/// OpenAI SDKs send `application/json`).
fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    if is_json(headers.get(header::CONTENT_TYPE)) {
        return Ok(());
    }
    let sent = headers.get(header::CONTENT_TYPE).map_or_else(
        || "none".to_owned(),
        |v| format!("{:?}", v.to_str().unwrap_or("?")),
    );
    Err(ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "invalid_request_error",
        "cuca_not_json",
        format!(
            "the request's Content-Type is {sent}; send the chat request as JSON with \
             Content-Type: application/json"
        ),
    ))
}

/// The 503 of a call that arrives while the proxy shuts down.
pub(crate) fn shutting_down(session: &str) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "server_error",
        "cuca_shutting_down",
        "the proxy is shutting down; retry against the next one",
    )
    .in_session(session)
}

/// A model call in `format`: every refusal in that format's error shape.
async fn model_call(
    shared: Arc<Shared>,
    format: Format,
    from_path: Option<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match route_call(shared, format, from_path, uri, headers, body).await {
        Ok(response) => response,
        Err(error) => error.in_format(format).into_response(),
    }
}

async fn route_call(
    shared: Arc<Shared>,
    format: Format,
    from_path: Option<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let session = session::choose(from_path, &headers, &shared.config.default_session)?;
    require_json(&headers).map_err(|e| e.in_session(&session))?;
    if shared.closing.load(Ordering::SeqCst) {
        return Err(shutting_down(&session));
    }
    let body = read_body(&shared, &headers, body)
        .await
        .map_err(|e| e.in_session(&session))?;
    let mut request = format.parse_request(&body);
    // A Responses call that names the answer it continues is in that answer's conversation.
    let mut continued = None;
    if let Ok(parsed) = &mut request {
        continued = chain::continue_previous(&shared, &session, parsed).await?;
    }
    let query = uri.query().map(str::to_owned);
    // A caller that names its conversation is placed there, by no content rule.
    let named = session::named_conversation(&headers, &session)?;
    if named.is_some() {
        continued = named.clone();
    }
    match shared.config.mode {
        Mode::Replay => {
            let request = request.map_err(|message| bad_request(&session, message))?;
            match load_and_lookup(&shared, &session, named.as_deref(), &request).await? {
                (Lookup::Found(turn, turn_idx), conversation) => Ok(replay::render(
                    &turn,
                    turn_idx,
                    &conversation,
                    &request,
                    format,
                )),
                (Lookup::Diverged(error) | Lookup::NotRecorded(error), _) => Err(error),
            }
        }
        Mode::Record => {
            let (conversation, recording) = match continued.take() {
                Some(conversation) => {
                    let recording = recording(&shared, &conversation).await?;
                    (conversation, recording)
                }
                None => {
                    let placed = place(&shared, &session, request.as_ref().ok()).await?;
                    let recording = placed_recording(&shared, &session, &placed).await?;
                    (placed.id, recording)
                }
            };
            Ok(record::forward(
                shared,
                format,
                query,
                conversation,
                headers,
                body,
                request,
                recording,
            )
            .await)
        }
        Mode::Fork => fork_mode(shared, format, query, session, headers, body, request).await,
        Mode::Auto => {
            // The writer is taken before the lookup, so a call recorded meanwhile on the same
            // conversation cannot slip between the two.
            let (conversation, recording) = match continued.take() {
                Some(conversation) => {
                    let recording = recording(&shared, &conversation).await?;
                    (conversation, recording)
                }
                None => {
                    let placed = place(&shared, &session, request.as_ref().ok()).await?;
                    let recording = placed_recording(&shared, &session, &placed).await?;
                    (placed.id, recording)
                }
            };
            if let Ok(parsed) = &request {
                match load_and_lookup(&shared, &session, named.as_deref(), parsed).await? {
                    (Lookup::Found(turn, turn_idx), replayed_from) => {
                        return Ok(replay::render(
                            &turn,
                            turn_idx,
                            &replayed_from,
                            parsed,
                            format,
                        ));
                    }
                    (Lookup::Diverged(error), _) => return Err(error),
                    (Lookup::NotRecorded(_), _) => {}
                }
            }
            Ok(record::forward(
                shared,
                format,
                query,
                conversation,
                headers,
                body,
                request,
                recording,
            )
            .await)
        }
    }
}

/// Fork mode (issue 31 item 3): what matches the recording is replayed; a call that diverges
/// from its conversation is forwarded live and recorded in a branch of it — a fork at the last
/// call that matched (`SessionBackend::fork`, so the audit record and the id follow seed 000),
/// or a new conversation when none did — and the calls after it continue that branch.
async fn fork_mode(
    shared: Arc<Shared>,
    format: Format,
    query: Option<String>,
    session: String,
    headers: HeaderMap,
    body: Bytes,
    request: Result<WireRequest, String>,
) -> Result<Response, ApiError> {
    let Ok(parsed) = &request else {
        let recording = recording(&shared, &session).await?;
        return Ok(record::forward(
            shared, format, query, session, headers, body, request, recording,
        )
        .await);
    };
    let diverged_in = match load_and_lookup(&shared, &session, None, parsed).await? {
        (Lookup::Found(turn, turn_idx), replayed_from) => {
            return Ok(replay::render(
                &turn,
                turn_idx,
                &replayed_from,
                parsed,
                format,
            ));
        }
        (Lookup::NotRecorded(_), _) => None,
        (Lookup::Diverged(_), conversation) => Some(conversation),
    };
    let Some(original) = diverged_in else {
        let placed = place(&shared, &session, Some(parsed)).await?;
        let recording = placed_recording(&shared, &session, &placed).await?;
        return Ok(record::forward(
            shared, format, query, placed.id, headers, body, request, recording,
        )
        .await);
    };
    // The branch this proxy already made of the conversation, followed to its newest.
    let mut target = original.clone();
    loop {
        let next = shared
            .branches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&target)
            .cloned();
        match next {
            Some(next) if next != target => target = next,
            _ => break,
        }
    }
    let mut forked_from = None;
    let mut diverged = None;
    let trajectory = shared.replay.index(&target).await.map_err(|message| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "cuca_replay_failed",
            message,
        )
        .in_session(&target)
    })?;
    // The recorded conversation diverged already; a branch of it may answer, be continued,
    // or diverge in turn.
    let branch_needed = target == original
        || match replay::lookup(
            &trajectory,
            &target,
            parsed,
            &shared.served.of(&target),
            &shared.matching,
        )
        .await?
        {
            Lookup::Found(turn, turn_idx) => {
                shared.served.mark(&target, turn_idx);
                return Ok(replay::render(&turn, turn_idx, &target, parsed, format));
            }
            Lookup::NotRecorded(_) => false,
            Lookup::Diverged(_) => true,
        };
    if branch_needed {
        let matched = replay::matched_turns(&trajectory, parsed, &shared.matching);
        let branch = match matched.checked_sub(1).map(|t| &trajectory.turns()[t]) {
            Some(last) => {
                let point = format!("{target}:{}", last.sequence_range().end());
                let backend = Arc::clone(&shared.backend);
                let (from, at) = (target.clone(), point.clone());
                let forked = tokio::task::spawn_blocking(move || backend.fork(&from, &at))
                    .await
                    .map_err(|join| join.to_string())
                    .and_then(|forked| forked.map_err(|e| e.to_string()));
                let fork = forked.map_err(|message| {
                    ApiError::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "server_error",
                        "cuca_fork_failed",
                        format!("cannot fork session {target:?} at {point}: {message}"),
                    )
                    .in_session(&target)
                })?;
                forked_from = Some(point);
                fork
            }
            None => {
                shared
                    .conversations
                    .begin(&session, &parsed.unified)
                    .await?
            }
        };
        tracing::info!(from = %target, to = %branch, "the call diverges from the recording; recording it live in a branch");
        diverged = Some(match &forked_from {
            Some(point) => format!(
                "diverged from the recording of {target} after {point}: forwarded live and recorded in its fork {branch}"
            ),
            None => format!(
                "diverged from the recording of {target} at its first call: forwarded live and recorded in the new conversation {branch}"
            ),
        });
        shared
            .branches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(target.clone(), branch.clone());
        target = branch;
    }
    let mut recording = recording(&shared, &target).await?;
    recording.note = diverged;
    let mut response = record::forward(
        shared, format, query, target, headers, body, request, recording,
    )
    .await;
    if let Some(value) = forked_from.and_then(|point| HeaderValue::from_str(&point).ok()) {
        response
            .headers_mut()
            .insert(HeaderName::from_static(FORKED_FROM_HEADER), value);
    }
    Ok(response)
}

/// The response header of a call fork mode recorded in a new branch: the point of the
/// recording it branched from.
pub const FORKED_FROM_HEADER: &str = "x-cuca-forked-from";

/// The conversation of session `session` a call is recorded in (issue 30); a body that is
/// not a request of the format is forwarded and recorded nowhere, under the base session.
async fn place(
    shared: &Shared,
    session: &str,
    request: Option<&WireRequest>,
) -> Result<Placed, ApiError> {
    match request {
        Some(request) => shared.conversations.place(session, &request.unified).await,
        None => Ok(Placed {
            id: session.to_owned(),
            new: false,
        }),
    }
}

/// The writer of a placed call: a call that begins its conversation carries the base session,
/// so the recorder can place it again if another process began the same id first.
async fn placed_recording(
    shared: &Shared,
    base: &str,
    placed: &Placed,
) -> Result<Recording, ApiError> {
    let mut recording = writer(shared, &placed.id, !placed.new).await?;
    if placed.new {
        recording.begins = Some(base.to_owned());
    }
    Ok(recording)
}

async fn recording(shared: &Shared, session: &str) -> Result<Recording, ApiError> {
    writer(shared, session, true).await
}

/// The session's writer, prepared for a call. `close_open`: whether a call found open in the
/// session is closed first (one a killed proxy left). A call that begins a conversation does
/// not: the session is empty, unless another process began it a moment ago and is recording
/// its first call right now — which is not to be closed under it (the call is placed again).
pub(crate) async fn writer(
    shared: &Shared,
    session: &str,
    close_open: bool,
) -> Result<Recording, ApiError> {
    let slot = shared.slots.get(session)?;
    let guard = Arc::clone(&slot.lock).lock_owned().await;
    // A call that waited for its session's writer through the start of a shutdown must not
    // start a recording the shutdown is no longer waiting for.
    if shared.closing.load(Ordering::SeqCst) {
        return Err(shutting_down(session));
    }
    let unrecordable = slot
        .prepare(session, shared.config.answer_unrecorded, close_open)
        .await?;
    Ok(Recording {
        slot,
        _guard: guard,
        note: None,
        unrecordable,
        begins: None,
    })
}

fn bad_request(session: &str, message: String) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        "cuca_invalid_request",
        message,
    )
    .in_session(session)
}

/// Loads the session (one load shared by every caller of it meanwhile, see
/// [`replay::Loads`]) and places the request in it.
async fn load_and_lookup(
    shared: &Arc<Shared>,
    session: &str,
    named: Option<&str>,
    request: &WireRequest,
) -> Result<(Lookup, String), ApiError> {
    let loaded = match named {
        Some(conversation) => shared
            .replay
            .index(conversation)
            .await
            .map(|trajectory| vec![(conversation.to_owned(), trajectory)]),
        None => shared.replay.index_conversations(session).await,
    };
    let trajectory = loaded.map_err(|message| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "cuca_replay_failed",
            message,
        )
        .in_session(session)
    })?;
    let (lookup, conversation) =
        replay::lookup_conversations(&trajectory, request, &shared.served, &shared.matching)
            .await?;
    Ok((lookup, conversation))
}

/// `GET /v1/models`: the upstream's list, forwarded; in replay mode, one model named
/// `cuca-replay`, since nothing may reach the network.
async fn models(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let Some(url) = shared.models_url.clone() else {
        let body = json!({"object": "list", "data": [
            {"id": "cuca-replay", "object": "model", "created": 0, "owned_by": "cuca"}
        ]});
        return (
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response();
    };
    let request = shared.http.get(url).headers(upstream_headers(&headers));
    fetch_small(&shared, request, "model list").await
}

async fn count_tokens_default(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    count_tokens(shared, None, uri, headers, body).await
}

async fn count_tokens_in_session(
    State(shared): State<Arc<Shared>>,
    Path(session): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    count_tokens(shared, Some(session), uri, headers, body).await
}

/// `POST /v1/messages/count_tokens`: not a model call, so nothing is recorded. Forwarded to
/// the upstream when there is one (its answer as it is); in replay mode, where nothing may
/// reach the network, `cuca_wire::messages::estimate_input_tokens`'s estimate.
async fn count_tokens(
    shared: Arc<Shared>,
    from_path: Option<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let format = Format::Messages;
    let answer = async {
        let session = session::choose(from_path, &headers, &shared.config.default_session)?;
        require_json(&headers).map_err(|e| e.in_session(&session))?;
        let body = read_body(&shared, &headers, body)
            .await
            .map_err(|e| e.in_session(&session))?;
        let Some(mut url) = shared.count_tokens_url.clone() else {
            let request = format
                .parse_request(&body)
                .map_err(|message| bad_request(&session, message))?;
            let estimate = cuca_wire::messages::estimate_input_tokens(&request);
            return Ok((
                [(header::CONTENT_TYPE, "application/json")],
                cuca_wire::messages::count_tokens_body(estimate).to_string(),
            )
                .into_response());
        };
        url.set_query(uri.query());
        let request = shared
            .http
            .post(url)
            .headers(upstream_headers(&headers))
            .body(body);
        Ok::<Response, ApiError>(fetch_small(&shared, request, "token count").await)
    };
    match answer.await {
        Ok(response) => response,
        Err(error) => error.in_format(format).into_response(),
    }
}

/// A small upstream answer (the model list, a token count) forwarded whole, within
/// [`MODELS_TIMEOUT`] and up to [`MODELS_MAX_BYTES`]; a refusal is a 502 naming `what`.
async fn fetch_small(shared: &Shared, request: reqwest::RequestBuilder, what: &str) -> Response {
    match tokio::time::timeout(MODELS_TIMEOUT, fetch_bounded(shared, request, what)).await {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => error.into_response(),
        Err(_) => ApiError::new(
            StatusCode::BAD_GATEWAY,
            "upstream_error",
            "cuca_upstream_timeout",
            format!(
                "the upstream {} did not send its {what} within the proxy's {} s",
                shared.upstream_base,
                MODELS_TIMEOUT.as_secs()
            ),
        )
        .into_response(),
    }
}

/// The upstream's answer, read up to [`MODELS_MAX_BYTES`] (a longer one is a 502, and the
/// rest is never read).
async fn fetch_bounded(
    shared: &Shared,
    request: reqwest::RequestBuilder,
    what: &str,
) -> Result<Response, ApiError> {
    let answer = request.send().await;
    let mut upstream = answer.map_err(|error| {
        ApiError::new(
            StatusCode::BAD_GATEWAY,
            "upstream_error",
            "cuca_upstream_unreachable",
            format!(
                "the upstream {} did not answer: {}",
                shared.upstream_base,
                root_cause(&error)
            ),
        )
    })?;
    let too_long = || {
        ApiError::new(
            StatusCode::BAD_GATEWAY,
            "upstream_error",
            "cuca_upstream_too_large",
            format!("the upstream's {what} is over the proxy's limit of {MODELS_MAX_BYTES} bytes"),
        )
    };
    if upstream
        .content_length()
        .is_some_and(|n| n > MODELS_MAX_BYTES as u64)
    {
        return Err(too_long());
    }
    let status = upstream.status();
    let content_type = upstream.headers().get(header::CONTENT_TYPE).cloned();
    let mut body = Vec::new();
    loop {
        match upstream.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > MODELS_MAX_BYTES {
                    return Err(too_long());
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(error) => {
                return Err(ApiError::new(
                    StatusCode::BAD_GATEWAY,
                    "upstream_error",
                    "cuca_upstream_broken",
                    format!("the upstream's {what} broke off: {}", root_cause(&error)),
                ))
            }
        }
    }
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    if let Some(content_type) = content_type {
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, content_type);
    }
    Ok(response)
}

async fn wrong_method(method: Method, uri: Uri) -> Response {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "invalid_request_error",
        "cuca_method_not_allowed",
        format!(
            "{} does not take {method}; model calls are POSTed, the model list is a GET",
            uri.path()
        ),
    )
    .into_response()
}

async fn no_route(method: Method, uri: Uri) -> Response {
    let mut response = ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found_error",
        "cuca_no_route",
        format!(
            "no route {method} {}; the proxy serves POST /v1/chat/completions, /v1/messages, /v1/messages/count_tokens and /v1/responses, GET /v1/models, and HEAD or GET /, also under /s/{{session}}",
            uri.path()
        ),
    )
    .into_response();
    // Say which proxy answered, so a base URL pointed at the wrong port is easy to tell.
    response.headers_mut().insert(
        HeaderName::from_static("x-cuca-proxy"),
        HeaderValue::from_static("1"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_application_json_or_a_json_suffix_and_nothing_a_page_can_send_unasked() {
        let json = |v: &'static str| is_json(Some(&HeaderValue::from_static(v)));
        for yes in [
            "application/json",
            "Application/JSON",
            "application/json; charset=utf-8",
            "application/vnd.api+json",
        ] {
            assert!(json(yes), "{yes}");
        }
        for no in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "text/json+plain",
            "",
        ] {
            assert!(!json(no), "{no}");
        }
        assert!(!is_json(None));
        let refused = require_json(&HeaderMap::new()).unwrap_err();
        assert_eq!(refused.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert!(refused.message.contains("Content-Type: application/json"));
    }
}
