//! The proxy's own refusals: an error response in the caller's wire format, with its status,
//! and the refusals more than one room gives. Reading and writing the formats is `cuca_wire`'s.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use cuca_wire::{ErrorInfo, Format};
use serde_json::Value;

/// A refusal with its status, answered in the caller's wire format: OpenAI's
/// `{"error":{"message","type","param","code"}}` unless [`ApiError::in_format`] says the call
/// came in another (Anthropic's `{"type":"error","error":{…}}` on `/v1/messages`).
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) kind: &'static str,
    pub(crate) code: &'static str,
    pub(crate) message: String,
    /// The request field the error is about (`messages[3]`), where there is one.
    pub(crate) param: Option<String>,
    /// The session the error is about, echoed in `X-Cuca-Session` where known.
    pub(crate) session: Option<String>,
    /// The wire format whose error shape the body takes.
    pub(crate) format: Format,
    /// What a divergence adds, boxed: most refusals have none, and a `Result` with this
    /// error stays small.
    pub(crate) detail: Option<Box<Detail>>,
}

/// What a divergence adds to a refusal.
#[derive(Debug, Clone, Default)]
pub(crate) struct Detail {
    /// Where a request first differs from its recording: the body's `error.divergence`
    /// (path, offset, and the text around it on both sides).
    pub(crate) divergence: Option<Value>,
    /// The recorded call the request was found to differ from, as a point id
    /// (`{session}:{sequence}` of its first record), for a strict replay's report.
    pub(crate) point: Option<String>,
}

impl ApiError {
    pub(crate) fn new(
        status: StatusCode,
        kind: &'static str,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        ApiError {
            status,
            kind,
            code,
            message: message.into(),
            param: None,
            session: None,
            format: Format::Chat,
            detail: None,
        }
    }

    /// The error about the recorded call at `point`, where one is known.
    pub(crate) fn at_point(mut self, point: Option<String>) -> Self {
        self.detail.get_or_insert_default().point = point;
        self
    }

    /// The recorded call the error is about, where one is known.
    pub(crate) fn point(&self) -> Option<&str> {
        self.detail.as_ref()?.point.as_deref()
    }

    /// The first difference, as the body's `error.divergence` holds it, where one was found.
    pub(crate) fn divergence(&self) -> Option<&Value> {
        self.detail.as_ref()?.divergence.as_ref()
    }

    /// The error shaped for a caller of `format`.
    pub(crate) fn in_format(mut self, format: Format) -> Self {
        self.format = format;
        self
    }

    pub(crate) fn with_param(mut self, param: String) -> Self {
        self.param = Some(param);
        self
    }

    pub(crate) fn with_divergence(mut self, divergence: Value) -> Self {
        self.detail.get_or_insert_default().divergence = Some(divergence);
        self
    }

    pub(crate) fn in_session(mut self, session: &str) -> Self {
        self.session = Some(session.to_owned());
        self
    }

    /// The JSON body.
    pub(crate) fn body(&self) -> Value {
        let mut body = self.format.error_body(&ErrorInfo {
            status: self.status.as_u16(),
            kind: self.kind,
            code: self.code,
            message: &self.message,
            param: self.param.as_deref(),
        });
        if let (Some(divergence), Some(error)) = (
            self.divergence(),
            body.get_mut("error").and_then(Value::as_object_mut),
        ) {
            error.insert("divergence".to_owned(), Value::clone(divergence));
        }
        body
    }
}

/// The response header the Anthropic and OpenAI SDKs read before their own retry rules:
/// `false` makes them hand the error to the caller at once.
const SHOULD_RETRY_HEADER: &str = "x-should-retry";

impl ApiError {
    /// Whether asking again could get another answer. A divergence from the recording, a
    /// turn that was never recorded, a body the proxy cannot take: the same request gets the
    /// same refusal, so an SDK that retries it (the Anthropic SDK ten times over three
    /// minutes) only keeps its caller from learning why. A timeout, too many requests, or a
    /// server-side failure may pass.
    pub(crate) fn retryable(&self) -> bool {
        !self.status.is_client_error()
            || self.status == StatusCode::REQUEST_TIMEOUT
            || self.status == StatusCode::TOO_MANY_REQUESTS
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            self.body().to_string(),
        )
            .into_response();
        if !self.retryable() {
            response.headers_mut().insert(
                axum::http::HeaderName::from_static(SHOULD_RETRY_HEADER),
                HeaderValue::from_static("false"),
            );
        }
        if let Some(value) = self
            .session
            .as_deref()
            .and_then(|s| HeaderValue::from_str(s).ok())
        {
            response
                .headers_mut()
                .insert(crate::headers::SESSION_HEADER, value);
        }
        response
    }
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

/// A body that is not a request of its format, where the proxy must read it (replay).
pub(crate) fn bad_request(session: &str, message: String) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        "cuca_invalid_request",
        message,
    )
    .in_session(session)
}

/// A call that would have to be forwarded, to a proxy that has no upstream.
pub(crate) fn no_upstream(session: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found_error",
        "cuca_no_upstream",
        "the proxy runs in replay mode and forwards nothing",
    )
    .in_session(session)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "Tell every SDK not to retry a divergence": a 409, a 404 and a 400 say
    /// `x-should-retry: false`; a 503 (shutting down) and a 502 (the upstream) leave the
    /// SDK's own rules in charge.
    #[test]
    fn a_refusal_that_asking_again_cannot_change_tells_the_sdk_not_to_retry() {
        let says = |status: StatusCode| {
            ApiError::new(status, "x", "cuca_x", "m")
                .into_response()
                .headers()
                .get(SHOULD_RETRY_HEADER)
                .map(|v| v.to_str().unwrap_or_default().to_owned())
        };
        for status in [
            StatusCode::CONFLICT,
            StatusCode::NOT_FOUND,
            StatusCode::BAD_REQUEST,
            StatusCode::PAYLOAD_TOO_LARGE,
        ] {
            assert_eq!(says(status).as_deref(), Some("false"), "{status}");
        }
        for status in [
            StatusCode::SERVICE_UNAVAILABLE,
            StatusCode::BAD_GATEWAY,
            StatusCode::REQUEST_TIMEOUT,
            StatusCode::TOO_MANY_REQUESTS,
            StatusCode::INTERNAL_SERVER_ERROR,
        ] {
            assert_eq!(says(status), None, "{status}");
        }
    }
}
