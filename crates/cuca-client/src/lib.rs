//! CucaClient: an OpenAI-compatible streaming client whose plugins see every request, block and completion
//!
//! Being built: see the issue tracker.
#![forbid(unsafe_code)]
