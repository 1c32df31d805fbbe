//! `LocalOrigin`: the `Host` and `Origin` rules that keep web pages out of a loopback server.
//!
//! A server on `127.0.0.1` is reachable from every page the user's browser opens. Two doors
//! lead in. **DNS rebinding**: a page at `evil.example` re-points its name at `127.0.0.1` and
//! reads the server as its own origin; the browser still sends `Host: evil.example:PORT`, so a
//! loopback server answers only `Host`s that name loopback. **Cross-site requests**: a page
//! may POST a CORS-simple request (`text/plain`, a form) to any address without a preflight;
//! the browser sends its `Origin`, so a request whose `Origin` is another site is refused.

use std::net::SocketAddr;

use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;

/// The loopback host names a `Host` or `Origin` may carry, as browsers and HTTP clients write
/// them (lowercase; IPv6 in brackets).
const LOOPBACK_HOSTS: [&str; 3] = ["127.0.0.1", "localhost", "[::1]"];

/// Why a request was refused, for the server to answer in its own shape (OpenAI's error JSON
/// on the proxy, text on the viewer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `421 Misdirected Request` for a `Host` that is not this server's, `403 Forbidden` for
    /// a cross-site `Origin`.
    pub status: StatusCode,
    /// A sentence naming the header, its value and the rule.
    pub message: String,
}

impl Refusal {
    /// The refusal as plain text, the viewer's way of answering an error.
    pub fn text(self) -> Response {
        let mut response = Response::new(axum::body::Body::from(format!("{}\n", self.message)));
        *response.status_mut() = self.status;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        response
    }
}

/// The `Host` and `Origin` rules for a server listening on one address.
///
/// On a loopback address only `Host: 127.0.0.1:PORT`, `localhost:PORT` and `[::1]:PORT` are
/// answered, with the server's own port (every HTTP client writes the port when it is not 80,
/// so the bare name is accepted only on port 80). A request with no `Host` at all is not a
/// browser's (browsers always send one) and is answered. On any other address (the user asked
/// for `--listen 0.0.0.0:PORT`) every `Host` is answered: the names the server is reached by
/// are not known, and [`LocalOrigin::is_open`] tells the caller to warn that there is no
/// authentication. On either, a request that carries an `Origin` is answered only when that
/// origin is loopback or the server itself (its authority is the request's `Host`); `Origin:
/// null` (a sandboxed frame, a `file:` page) is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalOrigin {
    port: u16,
    loopback_only: bool,
}

impl LocalOrigin {
    /// The rules for a server listening on `address` (the listener's actual address, so port
    /// 0 has become the port in use).
    pub fn for_address(address: SocketAddr) -> Self {
        LocalOrigin {
            port: address.port(),
            loopback_only: address.ip().is_loopback(),
        }
    }

    /// Whether any `Host` is answered: the server listens beyond loopback, so anyone who can
    /// reach the address can use it.
    pub fn is_open(&self) -> bool {
        !self.loopback_only
    }

    /// Checks a request's headers against the rules.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let host = match headers.get(header::HOST) {
            None => None,
            Some(value) => Some(value.to_str().map_err(|_| Refusal {
                status: StatusCode::MISDIRECTED_REQUEST,
                message: "the Host header is not visible ASCII".into(),
            })?),
        };
        if let Some(host) = host {
            if self.loopback_only && !self.is_loopback_authority(host, true) {
                return Err(Refusal {
                    status: StatusCode::MISDIRECTED_REQUEST,
                    message: format!(
                        "Host {host:?} is not this server: it listens on loopback and answers \
                         only 127.0.0.1:{port}, localhost:{port} and [::1]:{port} (a page \
                         that re-points its own name at 127.0.0.1 is refused)",
                        port = self.port
                    ),
                });
            }
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if !self.origin_allowed(origin, host) {
                return Err(Refusal {
                    status: StatusCode::FORBIDDEN,
                    message: format!(
                        "Origin {origin:?} is another site: this server answers requests from \
                         loopback pages and its own pages only"
                    ),
                });
            }
        }
        Ok(())
    }

    /// Adds the rules to `router`: a refused request is answered by `refuse` and never
    /// reaches a route.
    pub fn layer(self, router: Router, refuse: fn(Refusal) -> Response) -> Router {
        router.layer(axum::middleware::from_fn(
            move |request: Request, next: Next| {
                let checked = self.check(request.headers());
                async move {
                    match checked {
                        Ok(()) => next.run(request).await,
                        Err(refusal) => refuse(refusal),
                    }
                }
            },
        ))
    }

    /// `authority` is a loopback host, with this server's port (`same_port`) or any.
    fn is_loopback_authority(&self, authority: &str, same_port: bool) -> bool {
        let authority = authority.to_ascii_lowercase();
        let (name, port) = split_port(&authority);
        if !LOOPBACK_HOSTS.contains(&name) {
            return false;
        }
        if !same_port {
            return true;
        }
        match port {
            Some(port) => port.parse::<u16>().ok() == Some(self.port),
            None => self.port == 80,
        }
    }

    fn origin_allowed(&self, origin: &str, host: Option<&str>) -> bool {
        let Some((scheme, authority)) = origin.split_once("://") else {
            // `null` and anything else that is no origin.
            return false;
        };
        if !matches!(scheme, "http" | "https") || authority.contains('/') {
            return false;
        }
        // Another loopback port is another program of the same user's, not a web page.
        self.is_loopback_authority(authority, false)
            || host.is_some_and(|host| host.eq_ignore_ascii_case(authority))
    }
}

/// `host:port` split at the port's colon (not an IPv6 address's).
fn split_port(authority: &str) -> (&str, Option<&str>) {
    match authority.rfind(':') {
        Some(at) if !authority[at..].contains(']') => {
            (&authority[..at], Some(&authority[at + 1..]))
        }
        _ => (authority, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    fn loopback() -> LocalOrigin {
        LocalOrigin::for_address("127.0.0.1:4000".parse().unwrap())
    }

    #[test]
    fn a_loopback_server_answers_loopback_hosts_with_its_port_only() {
        let guard = loopback();
        assert!(!guard.is_open());
        for host in [
            "127.0.0.1:4000",
            "localhost:4000",
            "LOCALHOST:4000",
            "[::1]:4000",
        ] {
            let mut map = HeaderMap::new();
            map.insert("host", HeaderValue::from_str(host).unwrap());
            assert_eq!(guard.check(&map), Ok(()), "{host}");
        }
        assert_eq!(guard.check(&HeaderMap::new()), Ok(()));
        // "a web page can read sessions through DNS rebinding"
        for host in [
            "evil.example:4000",
            "127.0.0.1:4001",
            "localhost",
            "127.0.0.1",
            "localhost.evil.example:4000",
        ] {
            let mut map = HeaderMap::new();
            map.insert("host", HeaderValue::from_str(host).unwrap());
            let refusal = guard.check(&map).unwrap_err();
            assert_eq!(refusal.status, StatusCode::MISDIRECTED_REQUEST, "{host}");
            assert!(refusal.message.contains(host), "{}", refusal.message);
        }
    }

    #[test]
    fn port_80_is_answered_without_the_port_as_clients_send_it() {
        let guard = LocalOrigin::for_address("127.0.0.1:80".parse().unwrap());
        assert_eq!(guard.check(&headers(&[("host", "localhost")])), Ok(()));
        assert_eq!(guard.check(&headers(&[("host", "localhost:80")])), Ok(()));
    }

    #[test]
    fn a_cross_site_origin_is_refused_and_a_loopback_or_own_one_answered() {
        let guard = loopback();
        // "a CORS-simple cross-site text/plain POST is forwarded and recorded"
        let refusal = guard
            .check(&headers(&[
                ("host", "127.0.0.1:4000"),
                ("origin", "https://evil.example"),
            ]))
            .unwrap_err();
        assert_eq!(refusal.status, StatusCode::FORBIDDEN);
        assert!(refusal.message.contains("evil.example"));
        for origin in ["null", "file://", "http://127.0.0.1.evil.example"] {
            let mut map = headers(&[("host", "127.0.0.1:4000")]);
            map.insert("origin", HeaderValue::from_str(origin).unwrap());
            assert!(guard.check(&map).is_err(), "{origin}");
        }
        for origin in [
            "http://127.0.0.1:4000",
            "http://localhost:8080",
            "http://[::1]:5173",
        ] {
            let mut map = headers(&[("host", "127.0.0.1:4000")]);
            map.insert("origin", HeaderValue::from_str(origin).unwrap());
            assert_eq!(guard.check(&map), Ok(()), "{origin}");
        }
    }

    #[test]
    fn a_server_listening_beyond_loopback_answers_any_host_but_no_other_site() {
        let guard = LocalOrigin::for_address("0.0.0.0:4000".parse().unwrap());
        assert!(guard.is_open());
        assert_eq!(guard.check(&headers(&[("host", "box.lan:4000")])), Ok(()));
        assert_eq!(
            guard.check(&headers(&[
                ("host", "box.lan:4000"),
                ("origin", "http://box.lan:4000")
            ])),
            Ok(())
        );
        assert_eq!(
            guard
                .check(&headers(&[
                    ("host", "box.lan:4000"),
                    ("origin", "https://evil.example")
                ]))
                .unwrap_err()
                .status,
            StatusCode::FORBIDDEN
        );
    }
}
