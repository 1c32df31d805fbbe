//! The cuca command-line tool: inspect, verify, fork, replay, export, logs, journals, serve
//!
//! Being built: see the issue tracker.
#![forbid(unsafe_code)]
