//! Every header the proxy reads or writes by name: cuca's own `x-cuca-*` headers, and which of
//! a caller's and an upstream's headers cross the proxy.

use axum::http::{header, HeaderMap};

/// The request header that names a call's session, and the response header that says which
/// session a call was recorded in (or replayed from).
pub const SESSION_HEADER: &str = "x-cuca-session";

/// The response header with the point (`"{session}:{sequence}"`) of the first record the call
/// wrote, or, replayed, of the first record of the turn it was served from.
pub const POINT_HEADER: &str = "x-cuca-point";

/// The request header that names the conversation of its session a call belongs to, for a
/// caller that knows its conversations: the call is recorded in (and replayed from) the
/// session `{session}:conv:{name}`, and no placement by content happens.
pub const CONVERSATION_HEADER: &str = "x-cuca-conversation";

/// The response header with the number (from 1, as `cuca replay --turn` counts) of the
/// recorded turn a replayed answer came from.
pub const TURN_HEADER: &str = "x-cuca-turn";

/// The response header on a replayed answer whose recorded call is marked incomplete (cut
/// short, a record that could not be written): why, as recorded. Such a call is served only
/// when no whole call was recorded at its position, and never without saying so.
pub const INCOMPLETE_HEADER: &str = "x-cuca-incomplete";

/// The response header of a call fork mode recorded in a new branch: the point of the
/// recording it branched from.
pub const FORKED_FROM_HEADER: &str = "x-cuca-forked-from";

/// The response header that says a cuca proxy answered (`1`), on the probe and on a 404, so a
/// base URL pointed at the wrong port is easy to tell.
pub(crate) const PROXY_HEADER: &str = "x-cuca-proxy";

/// Request headers that describe one connection, not the call, and are never forwarded.
/// `accept-encoding` is dropped so the upstream answers uncompressed: the answer is decoded
/// as it passes, and the caller gets it byte for byte as the upstream wrote it.
const REQUEST_HOP_HEADERS: [&str; 11] = [
    "host",
    "content-length",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "accept-encoding",
];

/// Response headers that describe the upstream connection; the proxy frames its own.
const RESPONSE_HOP_HEADERS: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "content-length",
    "trailer",
    "upgrade",
];

/// The caller's headers as they go upstream: all of them, `Authorization` and Anthropic's
/// `x-api-key` included (marked sensitive so no debug output of the request shows them), less
/// hop-by-hop headers and cuca's own.
pub(crate) fn upstream_headers(caller: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(caller.len());
    for (name, value) in caller {
        let lower = name.as_str();
        if REQUEST_HOP_HEADERS.contains(&lower) || lower.starts_with("x-cuca-") {
            continue;
        }
        let mut value = value.clone();
        if name == header::AUTHORIZATION || lower == "x-api-key" || lower == "api-key" {
            value.set_sensitive(true);
        }
        out.append(name.clone(), value);
    }
    out
}

/// The upstream's response headers as they go back to the caller: all of them less those
/// that describe the upstream connection.
pub(crate) fn caller_headers(upstream: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(upstream.len() + 2);
    for (name, value) in upstream {
        if !RESPONSE_HOP_HEADERS.contains(&name.as_str()) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}
