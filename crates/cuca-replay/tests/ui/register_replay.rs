//! Passing a SessionReplay where an `Arc<dyn CucaPlugin>` is expected does not compile.

use std::sync::Arc;

use cuca_replay::SessionReplay;
use cuca_store_mem::InMemoryBackend;

/// Stands in for `CucaClientBuilder::register_plugin`, which takes this exact type.
fn register_plugin(_: std::sync::Arc<dyn cuca_events::CucaPlugin>) {}

fn main() {
    let replay = Arc::new(SessionReplay::new(Arc::new(InMemoryBackend::new())));
    register_plugin(replay);
}
