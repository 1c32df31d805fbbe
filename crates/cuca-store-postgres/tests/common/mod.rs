//! Finds the test server: `CUCA_PG_URL`, or a loud failure under `CI`, or a printed skip.

#![allow(dead_code)] // Each test binary uses a different part of this module.

use cuca_store_postgres::{PostgresBackend, PostgresConfig};

/// The URL of the test server, or `None` (with the reason printed) when the tests may skip.
///
/// They skip only when `CUCA_PG_URL` and `CI` are both unset; under `CI` a missing URL fails.
pub(crate) fn url() -> Option<String> {
    let set = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
    match (set("CUCA_PG_URL"), set("CI")) {
        (Some(url), _) => Some(url),
        (None, Some(_)) => panic!(
            "CI is set but CUCA_PG_URL is not: start a server with `bash .ci/postgres.sh start env` and `. ./env`"
        ),
        (None, None) => {
            eprintln!(
                "skipped: CUCA_PG_URL is unset (and CI is unset); run `bash .ci/postgres.sh start` and export the URL it prints to run the PostgreSQL tests"
            );
            None
        }
    }
}

/// A config for `url` in a fresh schema of its own, dropped with the backend.
pub(crate) fn throwaway(url: &str) -> PostgresConfig {
    match PostgresConfig::new(url) {
        Ok(config) => config.with_throwaway_schema(),
        Err(error) => panic!("CUCA_PG_URL={url:?} is not a connection string: {error}"),
    }
}

/// A backend on the test server in a fresh schema; panics loudly when the server is unreachable.
pub(crate) fn backend(url: &str) -> PostgresBackend {
    match PostgresBackend::connect(throwaway(url)) {
        Ok(backend) => backend,
        Err(error) => panic!("cannot use the test server CUCA_PG_URL={url:?}: {error}"),
    }
}

/// A plain client on the test server, for looking under the backend (never inside a tokio
/// runtime: the sync client starts one of its own).
pub(crate) fn admin(url: &str) -> postgres::Client {
    match postgres::Client::connect(url, postgres::NoTls) {
        Ok(client) => client,
        Err(error) => panic!("cannot connect to CUCA_PG_URL={url:?}: {error}"),
    }
}
