//! The shared SessionBackend conformance suite, run unchanged against PostgresBackend.
//!
//! Compiled in when `CUCA_PG_URL` or `CI` is set (see build.rs); each check gets a backend in
//! a schema of its own, so checks never see each other's sessions.

mod common;

#[cfg(cuca_pg_tests)]
mod against_postgres {
    use std::sync::Arc;

    use super::common;

    fn fresh() -> Arc<dyn cuca_events::SessionBackend> {
        match common::url() {
            Some(url) => Arc::new(common::backend(&url)),
            None => panic!("the suite was compiled for a server but CUCA_PG_URL is gone"),
        }
    }

    cuca_testkit::conformance_tests!(fresh);

    /// The same suite with `Durability::Pipelined`: a backend alone on its schema keeps the
    /// contract exactly (a refused sequence is refused at once).
    mod pipelined {
        use std::sync::Arc;

        use super::common;

        fn fresh() -> Arc<dyn cuca_events::SessionBackend> {
            match common::url() {
                Some(url) => Arc::new(
                    cuca_store_postgres::PostgresBackend::connect(
                        common::throwaway(&url)
                            .with_durability(cuca_store_postgres::Durability::Pipelined),
                    )
                    .unwrap_or_else(|error| panic!("cannot use CUCA_PG_URL={url:?}: {error}")),
                ),
                None => panic!("the suite was compiled for a server but CUCA_PG_URL is gone"),
            }
        }

        cuca_testkit::conformance_tests!(fresh);
    }
}

/// Without `CUCA_PG_URL` and `CI` the suite is not compiled; this says so in the test output.
#[cfg(not(cuca_pg_tests))]
#[test]
fn conformance_suite_skipped_without_a_server() {
    assert_eq!(common::url(), None);
}
