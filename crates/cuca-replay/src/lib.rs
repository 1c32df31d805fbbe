//! SessionReplay: a recorded trajectory streamed back as a live turn, with no network
//!
//! Being built: see the issue tracker.
#![forbid(unsafe_code)]
