//! Serving a stored record: `Accept-Encoding` negotiation and the `GET /runs/{id}/replay` route.
//!
//! A record is stored gzipped (`replay.json.gz`) and served as opaque bytes. The seed's rule is
//! "a browser is handed the stored bytes verbatim; a gzip-unaware client is handed them
//! decoded", and "the negotiation keys on the request header rather than on the stored bytes,
//! because the workspace HTTP client is built without gzip support while browsers always
//! advertise it". [`negotiate`] is that helper; [`router`] mounts it over a runs directory.
//!
//! What this module does not do: it never parses a record (the bytes are opaque, so a record in
//! a format this build cannot read still downloads), never re-compresses, and never answers
//! `406 Not Acceptable` — identity is always available, because decoding is always possible.

use std::io::Read;
use std::path::{Component, Path as FsPath, PathBuf};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::header::{ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, VARY};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use flate2::read::GzDecoder;
use tokio_stream::wrappers::ReceiverStream;

/// The file a run's record is stored under, at the root of the run directory.
pub const RECORD_FILE_NAME: &str = "replay.json.gz";

/// How many decoded bytes one body chunk carries when a record is served decoded.
///
/// 64 KiB matches hyper's default write buffer, so a chunk is one socket write and the decoder
/// never runs far ahead of the client: at most [`DECODE_QUEUE_CHUNKS`] chunks are in flight.
const DECODE_CHUNK_BYTES: usize = 64 * 1024;

/// How many decoded chunks may wait for a slow client before the decoder blocks.
///
/// Bounded so serving a large record decoded to a stalled client costs a fixed 256 KiB, not the
/// whole decoded document.
const DECODE_QUEUE_CHUNKS: usize = 4;

/// The longest run id the route accepts, in bytes: one file-name component on every common
/// file system.
pub const MAX_RUN_ID_BYTES: usize = 255;

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
/// use cuca_journal::serve::accepts_gzip;
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

/// Builds the response for a stored gzip record, negotiated on the request's headers.
///
/// A client that [accepts gzip](accepts_gzip) gets `stored_gzip` byte for byte with
/// `Content-Encoding: gzip`; any other client gets the decoded JSON, streamed in 64 KiB chunks
/// from a blocking thread so a large record is never held decoded in memory. Both carry
/// `Content-Type: application/json` and `Vary: Accept-Encoding` (the same URL answers with two
/// representations, and a cache must not hand one client the other's).
///
/// The stored bytes are not checked before they are sent: a decoded response whose stored bytes
/// turn out not to be gzip ends with the body aborted mid-stream (the client sees a truncated
/// chunked body, never a complete-looking wrong one), and the failure is logged.
///
/// Call it from inside a tokio runtime (any axum handler is): the decoded branch spawns its
/// decoder with `tokio::task::spawn_blocking`.
pub fn negotiate(stored_gzip: Bytes, request_headers: &HeaderMap) -> Response {
    let joined = join_accept_encoding(request_headers);
    let mut response = if accepts_gzip(joined.as_deref()) {
        let mut response = Response::new(Body::from(stored_gzip.clone()));
        response
            .headers_mut()
            .insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        response
            .headers_mut()
            .insert(CONTENT_LENGTH, HeaderValue::from(stored_gzip.len()));
        response
    } else {
        Response::new(decoded_body(stored_gzip))
    };
    let headers = response.headers_mut();
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

/// A body that decodes `stored_gzip` chunk by chunk on a blocking thread.
fn decoded_body(stored_gzip: Bytes) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(DECODE_QUEUE_CHUNKS);
    tokio::task::spawn_blocking(move || {
        let mut decoder = GzDecoder::new(stored_gzip.as_ref());
        loop {
            let mut chunk = vec![0_u8; DECODE_CHUNK_BYTES];
            match read_full(&mut decoder, &mut chunk) {
                Ok(0) => return,
                Ok(n) => {
                    chunk.truncate(n);
                    if tx.blocking_send(Ok(Bytes::from(chunk))).is_err() {
                        // The client went away; nobody is left to decode for.
                        return;
                    }
                }
                Err(err) => {
                    tracing::warn!(error = %err, "stored record is not valid gzip; aborting the decoded response");
                    // Ignored: if the receiver is gone the response is already over.
                    let _ = tx.blocking_send(Err(err));
                    return;
                }
            }
        }
    });
    Body::from_stream(ReceiverStream::new(rx))
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

/// Why a run id was refused by [`validate_run_id`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunIdError {
    /// The id is empty.
    Empty,
    /// The id is longer than [`MAX_RUN_ID_BYTES`].
    TooLong,
    /// The id is `.` or `..`, which name a directory other than a run's own.
    DotSegment,
    /// The id contains a path separator (`/` or `\`), so it would name a path, not a run.
    Separator,
    /// The id contains NUL or another control character.
    ControlCharacter,
    /// The id would be read as an absolute path or a drive prefix on this platform.
    NotRelative,
}

impl std::fmt::Display for RunIdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Empty => "run id is empty",
            Self::TooLong => "run id is longer than 255 bytes",
            Self::DotSegment => "run id is a dot segment",
            Self::Separator => "run id contains a path separator",
            Self::ControlCharacter => "run id contains a control character",
            Self::NotRelative => "run id is not a single relative path component",
        })
    }
}

impl std::error::Error for RunIdError {}

/// Checks that `id` (already percent-decoded) names exactly one directory entry of a runs
/// directory, so `runs_dir.join(id)` can never leave it.
///
/// ```
/// use cuca_journal::serve::{validate_run_id, RunIdError};
/// assert_eq!(validate_run_id("run-2024-01-01_a.b"), Ok(()));
/// assert_eq!(validate_run_id("../../etc"), Err(RunIdError::Separator));
/// assert_eq!(validate_run_id(".."), Err(RunIdError::DotSegment));
/// ```
pub fn validate_run_id(id: &str) -> Result<(), RunIdError> {
    if id.is_empty() {
        return Err(RunIdError::Empty);
    }
    if id.len() > MAX_RUN_ID_BYTES {
        return Err(RunIdError::TooLong);
    }
    if id == "." || id == ".." {
        return Err(RunIdError::DotSegment);
    }
    if id.contains(['/', '\\']) {
        return Err(RunIdError::Separator);
    }
    if id.chars().any(char::is_control) {
        return Err(RunIdError::ControlCharacter);
    }
    // The checks above already rule out everything `Path` could read as more than one normal
    // component on Unix; this one is the belt for platforms with drive prefixes (`C:`).
    let mut components = FsPath::new(id).components();
    match (components.next(), components.next()) {
        (Some(Component::Normal(_)), None) => Ok(()),
        _ => Err(RunIdError::NotRelative),
    }
}

/// The state of the replay route: the directory holding one subdirectory per run.
#[derive(Debug, Clone)]
struct RunsDir(Arc<PathBuf>);

/// An axum router answering `GET /runs/{id}/replay` from `runs_dir/{id}/replay.json.gz`.
///
/// * a run id that fails [`validate_run_id`] after percent-decoding (`..%2F..%2Fetc`, `%00`) is
///   `400 Bad Request`, and no file is touched;
/// * a run with no record (or no such run) is `404 Not Found`;
/// * otherwise the stored bytes go through [`negotiate`]; the answer is never `406`.
///
/// `HEAD` is answered too (axum derives it from `GET`). The file is read whole on a blocking
/// thread: the stored record is the compressed form, and serving it verbatim needs it whole
/// anyway. Symbolic links inside `runs_dir` are followed, since the runs directory is the
/// operator's own tree; what the id validation guarantees is that a request cannot name a
/// path outside it.
///
/// ```no_run
/// # async fn docs() -> std::io::Result<()> {
/// // Needs a runs directory on disk and a free port.
/// let app = cuca_journal::serve::router("/var/lib/cuca/runs");
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// axum::serve(listener, app).await
/// # }
/// ```
pub fn router(runs_dir: impl Into<PathBuf>) -> Router {
    Router::new()
        .route("/runs/{id}/replay", get(replay))
        .with_state(RunsDir(Arc::new(runs_dir.into())))
}

/// The handler behind `GET /runs/{id}/replay`.
async fn replay(
    State(RunsDir(runs_dir)): State<RunsDir>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Response {
    let id = match id {
        Ok(Path(id)) => id,
        // A segment that does not percent-decode to UTF-8 is no run id this server wrote.
        Err(rejection) => return (StatusCode::BAD_REQUEST, rejection.body_text()).into_response(),
    };
    if let Err(err) = validate_run_id(&id) {
        return (StatusCode::BAD_REQUEST, err.to_string()).into_response();
    }
    let path = runs_dir.join(&id).join(RECORD_FILE_NAME);
    let read = tokio::task::spawn_blocking(move || std::fs::read(&path)).await;
    match read {
        Ok(Ok(bytes)) => negotiate(Bytes::from(bytes), &headers),
        Ok(Err(err))
            if matches!(
                err.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            (StatusCode::NOT_FOUND, format!("run {id:?} has no record")).into_response()
        }
        Ok(Err(err)) => {
            tracing::error!(run = %id, error = %err, "reading a stored record failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("reading the record of run {id:?} failed"),
            )
                .into_response()
        }
        Err(err) => {
            tracing::error!(run = %id, error = %err, "the record reader task failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

#[cfg(test)]
mod tests;
