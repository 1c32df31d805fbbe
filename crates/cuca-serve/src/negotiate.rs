//! `Accept-Encoding` negotiation: the stored gzip bytes verbatim, or decoded, streamed either way.
//!
//! A record is stored gzipped (`replay.json.gz`) and served as opaque bytes. The seed's rule is
//! "a browser is handed the stored bytes verbatim; a gzip-unaware client is handed them
//! decoded", and "the negotiation keys on the request header rather than on the stored bytes,
//! because the workspace HTTP client is built without gzip support while browsers always
//! advertise it". [`negotiate`] is that helper over bytes in memory; [`negotiate_file`] the same
//! over an open record file, which [`crate::router`] uses so a record is never read whole.
//!
//! What this module does not do: it never parses a record (the bytes are opaque, so a record in
//! a format this build cannot read still downloads), never re-compresses, and never answers
//! `406 Not Acceptable` — identity is always available, because decoding is always possible.

use std::fs::File;
use std::io::{BufReader, Read};

use axum::body::{Body, Bytes};
use axum::http::header::{ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, VARY};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::Response;
use flate2::read::GzDecoder;

/// How many bytes one body chunk carries, verbatim or decoded.
///
/// 64 KiB matches hyper's default write buffer, so a chunk is one socket write. The next chunk
/// is read only when hyper asks for it, that is when the client has taken the previous one: a
/// client that stops reading costs one chunk plus hyper's bounded buffer, never the record.
const CHUNK_BYTES: usize = 64 * 1024;

/// Whether a request's `Accept-Encoding` lets the stored gzip bytes go out verbatim.
///
/// `header` is every `Accept-Encoding` value of the request joined with `,` (or `None` when the
/// request carries none). The rules, from RFC 9110 §12.5.3:
///
/// * `gzip` (or its alias `x-gzip`) with a q-value above zero accepts gzip; `gzip;q=0` is a
///   refusal even when `*` is also listed, because the specific entry outranks the wildcard;
/// * `*` with a q-value above zero accepts gzip when gzip is not named;
/// * when `identity` is named with a q-value strictly above gzip's, the client prefers the
///   decoded bytes and gets them; on a tie the stored bytes win, since they cost nothing to send;
/// * an element with a malformed q-value is ignored, as if it were not listed.
///
/// A request with no `Accept-Encoding` at all is served decoded. RFC 9110 would allow any coding
/// there, but the clients that omit the header are exactly the gzip-unaware ones the seed names
/// (the workspace HTTP client, `curl` without `--compressed`), and handing them gzip would give
/// them bytes they cannot read.
///
/// ```
/// use cuca_serve::accepts_gzip;
/// assert!(accepts_gzip(Some("gzip, deflate, br")));
/// assert!(accepts_gzip(Some("*")));
/// assert!(!accepts_gzip(Some("gzip;q=0, *")));
/// assert!(!accepts_gzip(Some("identity")));
/// assert!(!accepts_gzip(None));
/// ```
pub fn accepts_gzip(header: Option<&str>) -> bool {
    let Some(header) = header else {
        return false;
    };
    let mut gzip: Option<f32> = None;
    let mut star: Option<f32> = None;
    let mut identity: Option<f32> = None;
    for element in header.split(',') {
        let mut parts = element.split(';');
        let coding = parts.next().unwrap_or("").trim();
        if coding.is_empty() {
            continue;
        }
        let Some(q) = parse_q(parts) else {
            continue;
        };
        let slot = if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
            &mut gzip
        } else if coding == "*" {
            &mut star
        } else if coding.eq_ignore_ascii_case("identity") {
            &mut identity
        } else {
            continue;
        };
        // A coding listed twice keeps its most favourable weight; RFC 9110 leaves the case open
        // and a client that names gzip at all with q > 0 is one that can decode it.
        *slot = Some(slot.map_or(q, |old: f32| old.max(q)));
    }
    let q_gzip = match (gzip, star) {
        (Some(q), _) => q,
        (None, Some(q)) => q,
        (None, None) => 0.0,
    };
    if q_gzip <= 0.0 {
        return false;
    }
    identity.is_none_or(|q_identity| q_gzip >= q_identity)
}

/// Reads the q-value out of one element's parameters; `None` when it is malformed.
///
/// A missing `q` is 1. The grammar is `0[.ddd]` or `1[.000]`; anything else (a negative, a value
/// above one, four decimals, a word) makes the element malformed.
fn parse_q<'a>(params: impl Iterator<Item = &'a str>) -> Option<f32> {
    let mut q = 1.0_f32;
    for param in params {
        let Some((name, value)) = param.split_once('=') else {
            // A parameter without a value carries no weight; ignoring it is what a lenient
            // server does with an extension it does not know.
            continue;
        };
        if !name.trim().eq_ignore_ascii_case("q") {
            continue;
        }
        let value = value.trim();
        let (int, frac) = value.split_once('.').unwrap_or((value, ""));
        let valid = frac.len() <= 3
            && frac.bytes().all(|b| b.is_ascii_digit())
            && match int {
                "0" => true,
                "1" => frac.bytes().all(|b| b == b'0'),
                _ => false,
            };
        if !valid {
            return None;
        }
        q = value.parse().ok()?;
    }
    Some(q)
}

/// Builds the response for a stored gzip record held in memory, negotiated on the request's
/// headers.
///
/// A client that [accepts gzip](accepts_gzip) gets `stored_gzip` byte for byte with
/// `Content-Encoding: gzip`; any other client gets the decoded JSON, decoded chunk by chunk as
/// the client reads, so a large record is never held decoded in memory. Both carry
/// `Content-Type: application/json` and `Vary: Accept-Encoding` (the same URL answers with two
/// representations, and a cache must not hand one client the other's).
///
/// The stored bytes are not checked before they are sent: a decoded response whose stored bytes
/// turn out not to be gzip ends with the body aborted mid-stream (the client sees a truncated
/// chunked body, never a complete-looking wrong one), and the failure is logged.
///
/// Call it from inside a tokio runtime (any axum handler is): decoding runs on
/// `tokio::task::spawn_blocking`, one chunk at a time.
pub fn negotiate(stored_gzip: Bytes, request_headers: &HeaderMap) -> Response {
    if gzip_wanted(request_headers) {
        let len = stored_gzip.len() as u64;
        finish(Response::new(Body::from(stored_gzip)), Some(len))
    } else {
        let reader = std::io::Cursor::new(stored_gzip);
        finish(Response::new(chunked(GzDecoder::new(reader))), None)
    }
}

/// [`negotiate`] over an open record file of `len` bytes: the file is streamed to the socket,
/// verbatim or decoded, a chunk at a time as the client reads, and never read whole.
///
/// Exactly `len` bytes are sent verbatim (the `Content-Length` promised); a file that shrinks
/// meanwhile ends the body early, which the client sees as a truncated response.
pub fn negotiate_file(file: File, len: u64, request_headers: &HeaderMap) -> Response {
    if gzip_wanted(request_headers) {
        finish(Response::new(chunked(file.take(len))), Some(len))
    } else {
        let reader = BufReader::new(file.take(len));
        finish(Response::new(chunked(GzDecoder::new(reader))), None)
    }
}

fn gzip_wanted(headers: &HeaderMap) -> bool {
    accepts_gzip(join_accept_encoding(headers).as_deref())
}

/// Adds the headers every answer carries; `gzip_len` marks the verbatim representation.
fn finish(mut response: Response, gzip_len: Option<u64>) -> Response {
    let headers = response.headers_mut();
    if let Some(len) = gzip_len {
        headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    }
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(VARY, HeaderValue::from_static("accept-encoding"));
    response
}

/// Every `Accept-Encoding` value of a request joined with `,`, or `None` when there is none.
///
/// A value that is not visible ASCII is dropped, as if the client had not sent it.
fn join_accept_encoding(headers: &HeaderMap) -> Option<String> {
    let mut values = headers
        .get_all(ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .peekable();
    values.peek()?;
    Some(values.collect::<Vec<_>>().join(","))
}

/// A body read from `reader` one chunk per poll, each read on a blocking thread.
///
/// The reader is moved into the blocking task for one read and handed back, so no thread is
/// held while the client is slow: a stalled client costs its connection's buffers and this
/// reader's state, not a thread.
fn chunked<R: Read + Send + 'static>(reader: R) -> Body {
    let stream = futures_util::stream::unfold(Some(reader), |state| async move {
        let mut reader = state?;
        let step = tokio::task::spawn_blocking(move || {
            let mut chunk = vec![0_u8; CHUNK_BYTES];
            let read = read_full(&mut reader, &mut chunk).map(|n| {
                chunk.truncate(n);
                Bytes::from(chunk)
            });
            (reader, read)
        })
        .await;
        match step {
            Ok((_, Ok(chunk))) if chunk.is_empty() => None,
            Ok((reader, Ok(chunk))) => Some((Ok(chunk), Some(reader))),
            Ok((_, Err(err))) => {
                tracing::warn!(error = %err, "reading a stored record failed mid-body; aborting the response");
                Some((Err(err), None))
            }
            Err(err) => Some((Err(std::io::Error::other(err)), None)),
        }
    });
    Body::from_stream(stream)
}

/// Fills `buf` as far as the reader allows; returns how many bytes it holds (0 only at the end).
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests;
