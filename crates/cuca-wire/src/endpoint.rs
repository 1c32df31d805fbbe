//! A model server's base URL, checked and joined with a route under `/v1`, once for the
//! client (its server) and the proxy (its upstream).

use url::Url;

/// Why a base URL is not one cuca can send model calls to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BaseUrlError {
    /// The text does not parse as a URL.
    #[error("{reason}; a base url looks like {example}")]
    Unparsable {
        /// The parser's words.
        reason: String,
        /// What a base URL looks like where it is asked for (`http://127.0.0.1:1234`).
        example: &'static str,
    },
    /// The scheme is not `http` or `https`.
    #[error("the scheme is {scheme:?}; only http and https are spoken")]
    Scheme {
        /// The scheme given.
        scheme: String,
    },
    /// The URL names no host.
    #[error("it names no host")]
    NoHost,
    /// The URL carries a query or a fragment, which no route under it would keep.
    #[error("a base url carries no query or fragment")]
    QueryOrFragment,
}

/// The URL of route `tail` (`"chat/completions"`) of the server at `base`: `{base}/v1/{tail}`,
/// or `{base}/{tail}` when `base` already ends in `/v1`, or `base` itself when it already ends
/// in `/{tail}` (a base given as the full route). `example` is what a base URL looks like
/// where it is asked for, quoted when `base` does not parse.
///
/// ```
/// let url = cuca_wire::api_url("http://127.0.0.1:8080/v1/", "messages", "http://127.0.0.1:8080").unwrap();
/// assert_eq!(url.as_str(), "http://127.0.0.1:8080/v1/messages");
/// let err = cuca_wire::api_url("ftp://host", "models", "http://127.0.0.1:8080").unwrap_err();
/// assert_eq!(err.to_string(), "the scheme is \"ftp\"; only http and https are spoken");
/// ```
pub fn api_url(base: &str, tail: &str, example: &'static str) -> Result<Url, BaseUrlError> {
    let mut url = Url::parse(base.trim()).map_err(|e| BaseUrlError::Unparsable {
        reason: e.to_string(),
        example,
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(BaseUrlError::Scheme {
            scheme: url.scheme().to_owned(),
        });
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(BaseUrlError::NoHost);
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(BaseUrlError::QueryOrFragment);
    }
    let path = url.path().trim_end_matches('/').to_owned();
    let path = if path.ends_with(&format!("/{tail}")) {
        path
    } else if path.ends_with("/v1") {
        format!("{path}/{tail}")
    } else {
        format!("{path}/v1/{tail}")
    };
    url.set_path(&path);
    Ok(url)
}
