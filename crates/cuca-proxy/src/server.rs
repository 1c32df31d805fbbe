//! `Proxy`: the router and its handlers — a call's intake (its session, its body, what it
//! continues) handed to its mode, and the routes that are not model calls.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use cuca_calllog::CallLog;
use cuca_events::SessionBackend;
use serde_json::json;

use crate::call::Call;
use crate::chain;
use crate::config::ProxyConfig;
use crate::error::ProxyError;
use crate::headers::{upstream_headers, PROXY_HEADER};
use crate::modes;
use crate::refusal::{bad_request, shutting_down, ApiError};
use crate::session;
use crate::state::Shared;
use cuca_wire::Format;

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
        Ok(Proxy {
            shared: Arc::new(Shared::new(config, backend, call_log)?),
        })
    }

    /// Watches a workspace: each recorded call is preceded in its session by a snapshot of
    /// it, and `POST /cuca/shell` records the shell commands run there. Set once; `false`
    /// when a workspace was watched already.
    pub fn watch_workspace(&self, watch: crate::workspace::WorkspaceWatch) -> bool {
        self.shared.workspace.set(watch).is_ok()
    }

    /// Reads every request with `aliases` applied before it is placed, compared or recorded
    /// (the bytes forwarded upstream are the caller's), and every answer replayed from the
    /// recording with them the other way round: a replay or fork run's restored copy of the
    /// workspace read as the recorded workspace, and the recorded workspace's paths in a
    /// replayed tool call as the copy's. Set once; `false` when set already.
    pub fn read_requests_with(&self, aliases: crate::aliases::Aliases) -> bool {
        let reversed = aliases.reversed();
        let set = self.shared.aliases.set(aliases).is_ok();
        set && self.shared.answer_aliases.set(reversed).is_ok()
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

    /// What replay served and refused in each session a call came in on, and in each of
    /// `sessions` (one no call asked for has every recorded call unconsumed): for every
    /// recorded call whether a request consumed it, and the calls refused. `cuca run
    /// --strict` and `cuca proxy --strict` fail on it (`crate::strict`).
    pub async fn replay_report(&self, sessions: &[String]) -> crate::strict::ReplayReport {
        crate::strict::report(&self.shared, sessions).await
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
            .route("/cuca/shell", post(crate::shell_route::shell))
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
        HeaderName::from_static(PROXY_HEADER),
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

/// A model call in `format`: every refusal in that format's error shape.
async fn model_call(
    shared: Arc<Shared>,
    format: Format,
    from_path: Option<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match take_in(shared, format, from_path, uri, headers, body).await {
        Ok(response) => response,
        Err(error) => error.in_format(format).into_response(),
    }
}

/// A model call taken in: its session, its body read within the bounds, its request read
/// and completed from the recording where it continues an answer, then answered by its mode.
async fn take_in(
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
    let (mut request, mut read) = read_request(&shared, format, &body);
    // A Responses call that names the answer it continues is in that answer's conversation.
    let mut continued = None;
    if let Ok(parsed) = &mut request {
        continued = chain::continue_previous(&shared, &session, parsed).await?;
        if continued.is_some() {
            // The recorded messages before it now sit among those read: none is taken as
            // read, so every one is redacted and keyed where it now stands.
            read = crate::memo::RequestRead::default();
        }
    }
    // A caller that names its conversation is placed there, by no content rule.
    let named = session::named_conversation(&headers, &session)?;
    if named.is_some() {
        continued = named.clone();
    }
    // Redacted once, here, before anything is placed, recorded or compared.
    let redacted = match (&shared.redaction, &mut request) {
        (Some(rules), Ok(parsed)) => {
            let mut counts = crate::redaction::redact_request(rules, parsed, read.n_messages());
            counts.merge(read.counts());
            counts
        }
        _ => cuca_redact::Counts::new(),
    };
    let call = Call {
        redacted,
        read,
        format,
        session,
        query: uri.query().map(str::to_owned),
        headers,
        body,
        request,
        continued,
        named,
    };
    modes::answer(shared, call).await
}

/// Reads a call's body as a request of `format`. Messages read before (an agent sends its
/// whole conversation every call) are handed back as read, redacted and keyed then. Not
/// async: the memo's reader holds its lock while it reads.
fn read_request(
    shared: &Shared,
    format: Format,
    body: &Bytes,
) -> (
    Result<cuca_wire::WireRequest, String>,
    crate::memo::RequestRead,
) {
    let reader = shared.memo.reader();
    let request = match shared.aliases.get() {
        Some(aliases) => format.parse_request_with(&aliases.apply(body), &reader),
        None => format.parse_request_with(body, &reader),
    };
    (request, reader.finish())
}

/// `GET /v1/models`: the upstream's list, forwarded; in replay mode, one model named
/// `cuca-replay`, since nothing may reach the network.
async fn models(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let Some(url) = shared.upstream.models_url.clone() else {
        let body = json!({"object": "list", "data": [
            {"id": "cuca-replay", "object": "model", "created": 0, "owned_by": "cuca"}
        ]});
        return (
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response();
    };
    let request = shared
        .upstream
        .http
        .get(url)
        .headers(upstream_headers(&headers));
    shared.upstream.fetch_small(request, "model list").await
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
        let Some(mut url) = shared.upstream.count_tokens_url.clone() else {
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
            .upstream
            .http
            .post(url)
            .headers(upstream_headers(&headers))
            .body(body);
        Ok::<Response, ApiError>(shared.upstream.fetch_small(request, "token count").await)
    };
    match answer.await {
        Ok(response) => response,
        Err(error) => error.in_format(format).into_response(),
    }
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
    let path = uri.path();
    let mut response = if let Some(at) = path.find("/v1/v1/") {
        // A base URL given with `/v1` to an SDK that adds `/v1` itself (the Anthropic SDKs,
        // Claude Code): say what to set, not only that nothing is here.
        let base = &path[..at];
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found_error",
            "cuca_doubled_v1",
            format!(
                "no route {method} {path}: the base URL ends in /v1 and the client added another; \
                 Anthropic SDKs and Claude Code take ANTHROPIC_BASE_URL=http://HOST:PORT{base} (no /v1), \
                 OpenAI SDKs take http://HOST:PORT{base}/v1"
            ),
        )
        .in_format(if path.ends_with("/messages") || path.contains("/messages/") {
            Format::Messages
        } else {
            Format::Chat
        })
        .into_response()
    } else {
        no_such_route(&method, path)
    };
    // Say which proxy answered, so a base URL pointed at the wrong port is easy to tell.
    response.headers_mut().insert(
        HeaderName::from_static(PROXY_HEADER),
        HeaderValue::from_static("1"),
    );
    response
}

/// The 404 of a path the proxy does not serve, listing those it does.
fn no_such_route(method: &Method, path: &str) -> Response {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found_error",
        "cuca_no_route",
        format!(
            "no route {method} {path}; the proxy serves POST /v1/chat/completions, /v1/messages, /v1/messages/count_tokens and /v1/responses, GET /v1/models, and HEAD or GET /, also under /s/{{session}}"
        ),
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ANTHROPIC_BASE_URL` set with `/v1`, as people set it for OpenAI SDKs: the doubled
    /// prefix is answered in Anthropic's shape with what to set instead.
    #[tokio::test]
    async fn a_doubled_v1_prefix_says_what_to_set() {
        let uri: Uri = "/s/demo/v1/v1/messages".parse().unwrap();
        let response = no_route(Method::POST, uri).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["type"], "error", "Anthropic's shape: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("ANTHROPIC_BASE_URL=http://HOST:PORT/s/demo (no /v1)"),
            "{message}"
        );
    }

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
