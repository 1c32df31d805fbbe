//! Test-only support for cuca's reliability tests: the payloads a crash-test child writes and
//! its parent checks, the damaged-`.cslog` corpus and its expected verdicts, the fuzz targets,
//! and a counting allocator that bounds what one fuzz input makes a reader allocate.
//!
//! The tests themselves live in `tests/` (crash, damage, full disk, concurrency, fuzz, bad
//! input) and the child process the crash tests kill is `src/bin/cuca-reliability-child.rs`.
//! `docs/reliability.md` says what they prove and records the figures.
//!
//! ```
//! use cuca_reliability::{fuzz, payload};
//!
//! // A payload is a pure function of its sequence, so a reader can check every byte.
//! assert_eq!(payload::session_text(7), payload::session_text(7));
//! assert_ne!(payload::session_text(7), payload::session_text(8));
//! // A fuzz target never panics, whatever the bytes.
//! fuzz::cslog_reader(b"CUCASLOG\x01\x05garbage\x00");
//! fuzz::sse_decoder(b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n");
//! ```
//!
//! # What it does not do
//!
//! It is not a library for users (`publish = false`): nothing here is part of cuca's API. It
//! does not mount file systems or need root on its own; the full-disk tests try an
//! unprivileged user namespace and say which simulation they ran.

pub mod alloc;
pub mod corpus;
pub mod fuzz;
pub mod payload;

/// The child binary's ack line: `ack <n>`; `None` for any other line.
pub fn parse_ack(line: &str) -> Option<u64> {
    line.strip_prefix("ack ")?.trim().parse().ok()
}

#[cfg(test)]
mod tests;
