//! Trace and span ids derived from what a record already names, so an export is idempotent.
//!
//! OTLP ids are random in live instrumentation; here they are the leading bytes of a SHA-256
//! over a domain tag and the record's own identity (session id and sequence, run and attempt
//! id, call id). Exporting the same session twice therefore sends the same ids, and a
//! backend that keys spans by id stores them once. The domain tags keep a session named
//! `"x"` and a run named `"x"` in different traces, and the `v1` in them is the promise:
//! changing a derivation changes every id ever exported, so it gets a new tag.

use sha2::{Digest, Sha256};

/// A 16-byte OTLP trace id.
pub type TraceId = [u8; 16];
/// An 8-byte OTLP span id.
pub type SpanId = [u8; 8];

/// The SHA-256 of `tag` and `parts`, each followed by a NUL so `("ab", "c")` and
/// `("a", "bc")` differ.
fn digest(tag: &str, parts: &[&[u8]]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(tag.as_bytes());
    hasher.update([0u8]);
    for part in parts {
        hasher.update(part);
        hasher.update([0u8]);
    }
    hasher.finalize().into()
}

/// The first `N` bytes of `bytes`; an all-zero id is invalid in OTLP, so that one (2^-64
/// likely) outcome is nudged to a valid id rather than sent.
fn leading<const N: usize>(bytes: &[u8; 32]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&bytes[..N]);
    if out.iter().all(|b| *b == 0) {
        out[N - 1] = 1;
    }
    out
}

/// The trace of one model call a session recorded: the turn whose first record has sequence
/// `first_sequence`. Every call is a trace of its own, as a natively traced agent's calls are,
/// and `session.id` groups a session's traces; a trace per session would need a root span
/// that changes each time the session grows, which a backend that keeps the first copy of a
/// span id (Phoenix) never updates.
pub fn turn_trace_id(session_id: &str, first_sequence: u64) -> TraceId {
    leading(&digest(
        "cuca-otel/v1/turn-trace",
        &[session_id.as_bytes(), &first_sequence.to_be_bytes()],
    ))
}

/// The span of the turn (model call) whose first record has sequence `first_sequence`.
pub fn turn_span_id(session_id: &str, first_sequence: u64) -> SpanId {
    leading(&digest(
        "cuca-otel/v1/turn",
        &[session_id.as_bytes(), &first_sequence.to_be_bytes()],
    ))
}

/// The span of the shell command a session recorded at `sequence`.
pub fn shell_span_id(session_id: &str, sequence: u64) -> SpanId {
    leading(&digest(
        "cuca-otel/v1/shell",
        &[session_id.as_bytes(), &sequence.to_be_bytes()],
    ))
}

/// The trace of a shell command that no call's answer came before (the agent ran it before
/// its first call): a trace of its own, as a call's is, grouped by `session.id`.
pub fn shell_trace_id(session_id: &str, sequence: u64) -> TraceId {
    leading(&digest(
        "cuca-otel/v1/shell-trace",
        &[session_id.as_bytes(), &sequence.to_be_bytes()],
    ))
}

/// The trace of one call in the call log (a trace per call, for the reason
/// [`turn_trace_id`] gives), named by its run and its first attempt's row id.
pub fn call_trace_id(run: &str, first_attempt_id: &str) -> TraceId {
    leading(&digest(
        "cuca-otel/v1/call-trace",
        &[run.as_bytes(), first_attempt_id.as_bytes()],
    ))
}

/// The span of one call in the call log, named by its run and its first attempt's row id.
pub fn call_span_id(run: &str, first_attempt_id: &str) -> SpanId {
    leading(&digest(
        "cuca-otel/v1/call",
        &[run.as_bytes(), first_attempt_id.as_bytes()],
    ))
}

/// The span of one attempt in the call log, named by its run and row id.
pub fn attempt_span_id(run: &str, attempt_id: &str) -> SpanId {
    leading(&digest(
        "cuca-otel/v1/attempt",
        &[run.as_bytes(), attempt_id.as_bytes()],
    ))
}

/// The span of one call the live exporter saw, named by the client's call id.
pub fn live_call_span_id(call_id: &str) -> SpanId {
    leading(&digest("cuca-otel/v1/live-call", &[call_id.as_bytes()]))
}

/// The trace of a live call, named by its call id.
pub fn live_call_trace_id(call_id: &str) -> TraceId {
    leading(&digest(
        "cuca-otel/v1/live-call-trace",
        &[call_id.as_bytes()],
    ))
}

#[cfg(test)]
mod tests;
