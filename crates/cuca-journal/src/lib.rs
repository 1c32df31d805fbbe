//! The capture journal of a multi-agent run, its host assembly into replay.json.gz, and serving
//!
//! Being built: see the issue tracker.
#![forbid(unsafe_code)]
