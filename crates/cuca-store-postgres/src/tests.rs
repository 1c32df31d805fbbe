//! Unit tests that need no server: config parsing, names, and the unreachable-server error.

use cuca_events::{PluginError, SessionBackend};

use super::{Error, PostgresBackend, PostgresConfig, DEFAULT_CONNECT_TIMEOUT};

#[test]
fn a_url_parses_and_describes_its_host_without_the_password() {
    let config = PostgresConfig::new("postgres://alice:s3cret@db.example:6543/fleet").unwrap();
    assert_eq!(config.describe(), "db.example:6543/fleet");
    assert_eq!(config.schema(), "cuca");
    assert_eq!(
        config.pg.get_connect_timeout(),
        Some(&DEFAULT_CONNECT_TIMEOUT)
    );
    assert!(!format!("{config:?}").contains("s3cret"));
}

#[test]
fn a_key_value_string_parses_too() {
    let config = PostgresConfig::new("host=/tmp/pgsock port=5433 dbname=cuca user=x").unwrap();
    assert_eq!(config.describe(), "/tmp/pgsock:5433/cuca");
}

#[test]
fn the_url_to_type_again_keeps_everything_but_the_password() {
    let config = PostgresConfig::new("postgres://alice:s3cret@db.example:6543/fleet").unwrap();
    let url = config.url_without_password();
    assert_eq!(url, "postgres://alice@db.example:6543/fleet");
    let again = PostgresConfig::new(&url).unwrap();
    assert_eq!(again.describe(), config.describe());
    let socket =
        PostgresConfig::new("host='/tmp/pg sock' port=5433 dbname=cuca user=x password=s3cret")
            .unwrap();
    let url = socket.url_without_password();
    assert_eq!(url, "postgres://x@%2Ftmp%2Fpg%20sock:5433/cuca");
    assert!(!url.contains("s3cret"));
    assert_eq!(
        PostgresConfig::new(&url).unwrap().describe(),
        "/tmp/pg sock:5433/cuca"
    );
}

#[test]
fn a_bad_url_is_a_validation_error() {
    for url in ["postgres://host:notaport/db", "dbname=cuca"] {
        let error = PostgresConfig::new(url).unwrap_err();
        assert!(
            matches!(&error, PluginError::Validation { schema, .. } if schema == "PostgresConfig::url"),
            "{url}: {error:?}"
        );
    }
}

#[test]
fn schema_names_are_checked() {
    let config = PostgresConfig::new("postgres://h/db").unwrap();
    assert_eq!(
        config.clone().with_schema("fleet_2").unwrap().schema(),
        "fleet_2"
    );
    for bad in [
        "",
        "Fleet",
        "2fleet",
        "pg_x",
        "a-b",
        "a\"b",
        &"x".repeat(64),
    ] {
        let error = config.clone().with_schema(bad).unwrap_err();
        assert!(
            matches!(&error, PluginError::Validation { schema, .. } if schema == "PostgresConfig::schema"),
            "{bad:?}: {error:?}"
        );
    }
}

#[test]
fn throwaway_schemas_are_unique_and_valid() {
    let config = PostgresConfig::new("postgres://h/db").unwrap();
    let a = config.clone().with_throwaway_schema();
    let b = config.with_throwaway_schema();
    assert_ne!(a.schema(), b.schema());
    assert!(a.validate().is_ok(), "{}", a.schema());
    assert!(a.drop_schema_on_drop);
    assert_eq!(
        a.application_name(),
        Some(format!("cuca-store-postgres {}", a.schema()).as_str())
    );
}

/// "when the database is unreachable, a clear PluginError::Backend { backend: "postgres", … }
/// naming the host"
#[test]
fn an_unreachable_server_is_a_backend_error_naming_the_host() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://postgres@127.0.0.1:{port}/cuca");
    let error = PostgresBackend::connect(url.as_str()).unwrap_err();
    let PluginError::Backend {
        backend,
        message,
        source,
    } = &error
    else {
        panic!("expected a Backend error, got {error:?}");
    };
    assert_eq!(backend, "postgres");
    let host = format!("127.0.0.1:{port}/cuca");
    assert!(message.contains(&host), "{message}");
    // The cause a person acts on, not only the driver's "error connecting to server".
    assert!(message.to_lowercase().contains("refused"), "{message}");
    let typed = source
        .as_ref()
        .and_then(|source| source.downcast_ref::<Error>());
    assert!(
        matches!(typed, Some(Error::Unreachable { host: named, .. }) if *named == host),
        "{typed:?}"
    );
    assert_eq!(error.to_string(), format!("postgres backend: {message}"));
}

#[test]
fn the_backend_is_named_postgres_in_messages() {
    // The name is a constant of the type; checked through a failed connect's error instead of
    // a live backend so this test needs no server.
    let error: PluginError = Error::WorkerGone {
        host: "h:1/db".into(),
    }
    .into();
    assert_eq!(
        error.to_string(),
        "postgres backend: the connection thread for h:1/db has stopped"
    );
    // Keeps the trait in scope for the doc reader: PostgresBackend implements it.
    fn assert_backend<T: SessionBackend>() {}
    assert_backend::<PostgresBackend>();
}

#[test]
fn a_password_file_line_matches_like_libpq() {
    let text = "# comment\nother:5432:*:alice:wrong\ndb.example:6543:fleet:alice:s3cr\\:et\n*:*:*:*:fallback\n";
    let want = |host, port, db, user| super::config::pgpass_lookup(text, [host, port, db, user]);
    assert_eq!(
        want("db.example", "6543", "fleet", "alice").as_deref(),
        Some("s3cr:et")
    );
    assert_eq!(
        want("db.example", "5432", "fleet", "alice").as_deref(),
        Some("fallback")
    );
    assert_eq!(
        super::config::pgpass_lookup("h:1:d:u\n", ["h", "1", "d", "u"]),
        None
    );
}

#[test]
fn pipelined_is_asked_for_and_commit_is_the_default() {
    let config = PostgresConfig::new("postgres://h/db").unwrap();
    assert_eq!(config.durability(), super::Durability::Commit);
    let config = config.with_durability(super::Durability::Pipelined);
    assert_eq!(config.durability(), super::Durability::Pipelined);
}
