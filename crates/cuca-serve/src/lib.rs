//! Serving assembled session records over HTTP: `GET /runs/{id}/replay`, bounded against slow
//! and hostile clients
//!
//! A record (`replay.json.gz`, written by `cuca_journal::assemble`) is served as opaque bytes,
//! content-negotiated on the request's `Accept-Encoding`: a browser gets the stored gzip bytes
//! verbatim, a gzip-unaware client gets them decoded ([`negotiate`], [`negotiate_file`]).
//! [`router`] mounts that over a runs directory; [`serve`] runs any axum router with a
//! header-read timeout, an idle timeout and a connection cap ([`ServeLimits`]), streaming every
//! file a chunk at a time as the client reads. [`LocalOrigin`] is the `Host` and `Origin` rule
//! every cuca server on loopback adds, so no web page reaches it by DNS rebinding or a
//! cross-site request.
//!
//! ```
//! use axum::http::HeaderMap;
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // A gzip-aware client gets the stored bytes as they are.
//! let mut headers = HeaderMap::new();
//! headers.insert("accept-encoding", "gzip".parse().unwrap());
//! let response = cuca_serve::negotiate(axum::body::Bytes::from_static(b"\x1f\x8b..."), &headers);
//! assert_eq!(response.headers()["content-encoding"], "gzip");
//! assert!(cuca_serve::accepts_gzip(Some("gzip, br")));
//! assert!(!cuca_serve::accepts_gzip(None));
//! # }
//! ```
//!
//! What this crate does not do: it never parses a record (a record in a format this build
//! cannot read still downloads), never re-compresses, never answers `406`, never reads a record
//! whole into memory, and never opens anything but a regular file. It knows `cuca-journal` only
//! for the record's file name. Capture and assembly live in `cuca-journal`, which compiles no web
//! server.
#![forbid(unsafe_code)]

mod guard;
mod negotiate;
mod route;
mod server;

pub use guard::{LocalOrigin, Refusal};
pub use negotiate::{accepts_gzip, negotiate, negotiate_file};
pub use route::{router, validate_run_id, RunIdError, MAX_RUN_ID_BYTES, RECORD_FILE_NAME};
pub use server::{serve, serve_with_shutdown, ServeLimits};
