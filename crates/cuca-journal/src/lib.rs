//! The capture journal of a multi-agent run, its host assembly into replay.json.gz, and serving
//!
//! Being built: see the issue tracker. The journal's line format is [`format`] (and
//! `docs/journal-format.md`).
#![forbid(unsafe_code)]

// Capture side.
pub mod format;

// Host side.
pub mod serve;
