//! The upstream: the URL of each endpoint the proxy forwards to, the HTTP client that reaches
//! them, and the small answers (the model list, a token count) forwarded whole.

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use cuca_wire::Format;

use crate::config::{ProxyConfig, MODELS_MAX_BYTES, MODELS_TIMEOUT};
use crate::error::ProxyError;
use crate::refusal::ApiError;

/// How long the proxy waits to open a connection to the upstream. Generation itself has no
/// bound here: the caller decides how long it waits, and hanging up cancels the call.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where calls are forwarded, and the client that forwards them.
pub(crate) struct Upstream {
    pub(crate) http: reqwest::Client,
    /// The upstream's model-call URL of each format (`{upstream}/v1/chat/completions`,
    /// `…/v1/messages`, `…/v1/responses`), in [`Format::ALL`] order; empty in replay mode.
    call_urls: Vec<(Format, reqwest::Url)>,
    /// `{upstream}/v1/messages/count_tokens`; `None` in replay mode.
    pub(crate) count_tokens_url: Option<reqwest::Url>,
    /// `{upstream}/v1/models`; `None` in replay mode.
    pub(crate) models_url: Option<reqwest::Url>,
    /// The upstream's base URL as given, for messages.
    pub(crate) base: String,
}

impl Upstream {
    /// The endpoints of `config`'s upstream (none in a mode that forwards nothing), and the
    /// client. Refuses an upstream URL that cannot be used.
    pub(crate) fn new(config: &ProxyConfig) -> Result<Self, ProxyError> {
        let (call_urls, count_tokens_url, models_url, base) = match (&config.upstream, config.mode)
        {
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
        Ok(Upstream {
            http,
            call_urls,
            count_tokens_url,
            models_url,
            base,
        })
    }

    /// The model-call URL of `format`; `None` when the proxy forwards nothing.
    pub(crate) fn call_url(&self, format: Format) -> Option<reqwest::Url> {
        self.call_urls
            .iter()
            .find(|(f, _)| *f == format)
            .map(|(_, url)| url.clone())
    }

    /// A small upstream answer (the model list, a token count) forwarded whole, within
    /// [`MODELS_TIMEOUT`] and up to [`MODELS_MAX_BYTES`]; a refusal is a 502 naming `what`.
    pub(crate) async fn fetch_small(
        &self,
        request: reqwest::RequestBuilder,
        what: &str,
    ) -> Response {
        match tokio::time::timeout(MODELS_TIMEOUT, self.fetch_bounded(request, what)).await {
            Ok(Ok(response)) => response,
            Ok(Err(error)) => error.into_response(),
            Err(_) => ApiError::new(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                "cuca_upstream_timeout",
                format!(
                    "the upstream {} did not send its {what} within the proxy's {} s",
                    self.base,
                    MODELS_TIMEOUT.as_secs()
                ),
            )
            .into_response(),
        }
    }

    /// The upstream's answer, read up to [`MODELS_MAX_BYTES`] (a longer one is a 502, and the
    /// rest is never read).
    async fn fetch_bounded(
        &self,
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
                    self.base,
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
                    "the upstream's {what} is over the proxy's limit of {MODELS_MAX_BYTES} bytes"
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
}

/// `{base}/v1/{tail}`, or `{base}/{tail}` when the base already ends in `/v1`: the one
/// check and join of a base URL the client makes too.
fn upstream_url(base: &str, tail: &str) -> Result<reqwest::Url, ProxyError> {
    cuca_wire::api_url(base, tail, "http://127.0.0.1:8080").map_err(|error| {
        ProxyError::InvalidUpstream {
            url: base.to_owned(),
            message: error.to_string(),
        }
    })
}

/// The innermost cause of a transport error: "connection refused" rather than reqwest's
/// outer "error sending request".
pub(crate) fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}
