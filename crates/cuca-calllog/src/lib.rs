//! The always-on JSONL call log: one row when a model call starts and one when it ends
//!
//! Being built: see the issue tracker.
#![forbid(unsafe_code)]
