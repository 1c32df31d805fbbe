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

use crate::config::{Mode, ProxyConfig, MODELS_MAX_BYTES, MODELS_TIMEOUT};
use crate::error::ProxyError;
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
    pub(crate) http: reqwest::Client,
    /// `{upstream}/v1/chat/completions`; `None` in replay mode.
    pub(crate) chat_url: Option<reqwest::Url>,
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
        let (chat_url, models_url, upstream_base) = match (&config.upstream, config.mode) {
            (Some(base), mode) if mode.forwards() => (
                Some(upstream_url(base, "chat/completions")?),
                Some(upstream_url(base, "models")?),
                base.trim_end_matches('/').to_owned(),
            ),
            _ => (None, None, String::new()),
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
        Ok(Proxy {
            shared: Arc::new(Shared {
                replay: replay::Loads::new(SessionReplay::new(backend)),
                slots,
                http,
                chat_url,
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
        if let Some(slot) = self.shared.slots.existing(session) {
            drop(slot.lock.lock().await);
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

    /// The routes: `POST /v1/chat/completions`, `GET /v1/models`, and both again under
    /// `/s/{session}`; anything else is an OpenAI-shaped 404.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/v1/chat/completions", post(chat_default))
            .route("/s/{session}/v1/chat/completions", post(chat_in_session))
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

async fn chat_default(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    chat(shared, None, headers, body).await
}

async fn chat_in_session(
    State(shared): State<Arc<Shared>>,
    Path(session): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    chat(shared, Some(session), headers, body).await
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

async fn chat(
    shared: Arc<Shared>,
    from_path: Option<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match route_chat(shared, from_path, headers, body).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

async fn route_chat(
    shared: Arc<Shared>,
    from_path: Option<String>,
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
    let format = Format::Chat;
    let request = format.parse_request(&body);
    match shared.config.mode {
        Mode::Replay => {
            let request = request.map_err(|message| bad_request(&session, message))?;
            match load_and_lookup(&shared, &session, &request).await? {
                Lookup::Found(turn, turn_idx) => {
                    Ok(replay::render(&turn, turn_idx, &session, &request, format))
                }
                Lookup::Diverged(error) | Lookup::NotRecorded(error) => Err(error),
            }
        }
        Mode::Record => {
            let recording = recording(&shared, &session).await?;
            Ok(record::forward(shared, format, session, headers, body, request, recording).await)
        }
        Mode::Auto => {
            // The writer is taken before the lookup, so a call recorded meanwhile on the same
            // session cannot slip between the two.
            let recording = recording(&shared, &session).await?;
            if let Ok(parsed) = &request {
                match load_and_lookup(&shared, &session, parsed).await? {
                    Lookup::Found(turn, turn_idx) => {
                        return Ok(replay::render(&turn, turn_idx, &session, parsed, format));
                    }
                    Lookup::Diverged(error) => return Err(error),
                    Lookup::NotRecorded(_) => {}
                }
            }
            Ok(record::forward(shared, format, session, headers, body, request, recording).await)
        }
    }
}

async fn recording(shared: &Shared, session: &str) -> Result<Recording, ApiError> {
    let slot = shared.slots.get(session)?;
    let guard = Arc::clone(&slot.lock).lock_owned().await;
    // A call that waited for its session's writer through the start of a shutdown must not
    // start a recording the shutdown is no longer waiting for.
    if shared.closing.load(Ordering::SeqCst) {
        return Err(shutting_down(session));
    }
    slot.prepare(session).await?;
    Ok(Recording {
        slot,
        _guard: guard,
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
    request: &WireRequest,
) -> Result<Lookup, ApiError> {
    let trajectory = shared.replay.load(session).await.map_err(|message| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "cuca_replay_failed",
            message,
        )
        .in_session(session)
    })?;
    Ok(replay::lookup(&trajectory, session, &request.unified))
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
    match tokio::time::timeout(MODELS_TIMEOUT, fetch_models(&shared, url, &headers)).await {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => error.into_response(),
        Err(_) => ApiError::new(
            StatusCode::BAD_GATEWAY,
            "upstream_error",
            "cuca_upstream_timeout",
            format!(
                "the upstream {} did not send its model list within the proxy's {} s",
                shared.upstream_base,
                MODELS_TIMEOUT.as_secs()
            ),
        )
        .into_response(),
    }
}

/// The upstream's model list, read up to [`MODELS_MAX_BYTES`] (a longer one is a 502, and
/// the rest is never read).
async fn fetch_models(
    shared: &Shared,
    url: reqwest::Url,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let answer = shared
        .http
        .get(url)
        .headers(upstream_headers(headers))
        .send()
        .await;
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
            format!(
                "the upstream's model list is over the proxy's limit of {MODELS_MAX_BYTES} bytes"
            ),
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
                    format!(
                        "the upstream's model list broke off: {}",
                        root_cause(&error)
                    ),
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
            "{} does not take {method}; chat completions are POSTed, the model list is a GET",
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
            "no route {method} {}; the proxy serves POST /v1/chat/completions and GET /v1/models, also under /s/{{session}}",
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
