//! The shared SessionBackend conformance suite, run against InMemoryBackend.

use std::sync::Arc;

use cuca_store_mem::InMemoryBackend;

cuca_testkit::conformance_tests!(|| Arc::new(InMemoryBackend::new()));
