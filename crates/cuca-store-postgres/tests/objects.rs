//! `PostgresObjects`: blobs by id in the sessions' database, shared by every process on the
//! schema, each stored once.

// A failed step is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use cuca_store_postgres::{PostgresConfig, PostgresObjects};

fn on_schema(url: &str, schema: &str) -> PostgresObjects {
    PostgresObjects::connect(
        PostgresConfig::new(url)
            .unwrap()
            .with_schema(schema)
            .unwrap(),
    )
    .unwrap()
}

#[test]
fn objects_are_stored_once_by_id_and_read_back_by_another_process_on_the_schema() {
    let Some(url) = common::url() else { return };
    // The backend owns the throwaway schema (dropped with it); the objects share it.
    let backend = common::backend(&url);
    let one = on_schema(&url, backend.schema());
    let other = on_schema(&url, backend.schema());
    let id = "sha256:0123";
    assert!(!one.has(id).unwrap());
    assert_eq!(one.get(id).unwrap(), None);
    one.put(id, b"first bytes").unwrap();
    // Stored again under the same id: the first bytes stay (the id is their address).
    other.put(id, b"other bytes").unwrap();
    assert!(other.has(id).unwrap());
    assert_eq!(other.get(id).unwrap().as_deref(), Some(&b"first bytes"[..]));
    assert_eq!(one.get(id).unwrap().as_deref(), Some(&b"first bytes"[..]));
    // Bytes of every value, the empty object included.
    let all: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    one.put("sha256:all", &all).unwrap();
    one.put("sha256:empty", b"").unwrap();
    assert_eq!(other.get("sha256:all").unwrap().unwrap(), all);
    assert_eq!(other.get("sha256:empty").unwrap().unwrap(), b"");
    assert!(
        one.describe().contains(backend.schema()),
        "{}",
        one.describe()
    );
}

#[test]
fn a_broken_connection_is_opened_again_for_the_next_call() {
    let Some(url) = common::url() else { return };
    let backend = common::backend(&url);
    // A name of its own, so that only this store's connection is ended.
    let name = format!("cuca-objects-reconnect-{}", std::process::id());
    let separator = if url.contains('?') { '&' } else { '?' };
    let named = format!("{url}{separator}application_name={name}");
    let config = PostgresConfig::new(&named)
        .unwrap()
        .with_schema(backend.schema())
        .unwrap();
    let objects = PostgresObjects::connect(config).unwrap();
    objects.put("sha256:before", b"x").unwrap();
    // Its connection is ended from outside, as a server restart or an administrator would.
    let mut admin = common::admin(&url);
    let ended = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
            &[&name],
        )
        .unwrap();
    assert!(
        !ended.is_empty(),
        "no connection of the objects store was found"
    );
    assert_eq!(
        objects.get("sha256:before").unwrap().as_deref(),
        Some(&b"x"[..])
    );
}
