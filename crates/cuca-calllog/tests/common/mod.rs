//! Helpers shared by the integration tests: a log in a temp dir with a collecting warn sink.

// Test helpers, so unwrapping is how they fail the test.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cuca_calllog::{CallLog, SilenceScope, WarnSink};

/// The lines a log warned with.
#[derive(Clone, Default)]
pub struct Warnings(pub Arc<Mutex<Vec<String>>>);

impl Warnings {
    /// A sink that collects into this.
    pub fn sink(&self) -> WarnSink {
        let lines = Arc::clone(&self.0);
        Arc::new(move |line: &str| lines.lock().unwrap().push(line.to_owned()))
    }

    /// The lines collected so far.
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// A log writing to `path`, warning into the returned collector, in a silence scope of its
/// own (a test that breaks it must not silence the other tests of its binary).
pub fn log_at(path: &Path) -> (CallLog, Warnings) {
    let warnings = Warnings::default();
    let log = CallLog::builder()
        .path(Some(path.to_path_buf()))
        .warn_sink(warnings.sink())
        .silence_scope(SilenceScope::new())
        .build();
    (log, warnings)
}

/// Every file under `dir`, recursively, relative to it.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            found.push(path.strip_prefix(dir).unwrap().to_path_buf());
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            }
        }
    }
    found.sort();
    found
}
