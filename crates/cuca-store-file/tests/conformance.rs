//! The shared SessionBackend conformance suite, run against FileBackend over a fresh temp dir.

use std::sync::Arc;

use cuca_store_file::FileBackend;

/// A backend over its own temp dir; the dir is leaked so it outlives the `Arc<dyn
/// SessionBackend>` the suite holds (a test process's temp dirs are few and small).
fn fresh() -> Arc<FileBackend> {
    let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("temp dir: {error}"));
    let dir = Box::leak(Box::new(dir));
    Arc::new(FileBackend::new(dir.path()).unwrap_or_else(|error| panic!("backend: {error}")))
}

cuca_testkit::conformance_tests!(fresh);
