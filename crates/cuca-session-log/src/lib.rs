//! SessionLogPlugin: records every request, streamed block and completion as SessionEvents
//!
//! Being built: see the issue tracker.
#![forbid(unsafe_code)]
