//! `PostgresConfig`: where the server is and which schema holds the sessions.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cuca_events::PluginError;
use postgres::config::Host;

/// How a [`crate::PostgresBackend`] reaches its database.
///
/// Built from a libpq-style URL (`postgres://user@host:port/dbname`) or key-value string
/// (`host=… port=… dbname=…`); anything the `postgres` crate accepts there works.
#[derive(Debug, Clone)]
pub struct PostgresConfig {
    pub(crate) pg: postgres::Config,
    pub(crate) schema: String,
    pub(crate) drop_schema_on_drop: bool,
}

/// The schema a backend uses unless told otherwise.
///
/// A schema of its own keeps cuca's two tables and one sequence out of `public`, so an
/// application database can host them without name clashes.
pub const DEFAULT_SCHEMA: &str = "cuca";

/// How long a connection attempt may take when the URL does not say (`connect_timeout=`).
///
/// Without a bound, a host that drops packets holds every append for the kernel's TCP timeout
/// (minutes); five seconds is long for a loopback or LAN server and short for a person.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// PostgreSQL's identifier limit (`NAMEDATALEN - 1`); a longer name would be silently cut.
const MAX_SCHEMA_LEN: usize = 63;

impl PostgresConfig {
    /// Parses a URL or key-value connection string; the schema is [`DEFAULT_SCHEMA`].
    pub fn new(url: &str) -> Result<Self, PluginError> {
        let mut pg: postgres::Config = url.parse().map_err(|error| {
            PluginError::validation(
                "PostgresConfig::url",
                format!("cannot parse the connection string ({error}); expected e.g. postgres://postgres@127.0.0.1:54329/cuca"),
            )
        })?;
        if pg.get_hosts().is_empty() {
            return Err(PluginError::validation(
                "PostgresConfig::url",
                "the connection string names no host; add one, e.g. postgres://postgres@127.0.0.1:54329/cuca",
            ));
        }
        if pg.get_connect_timeout().is_none() {
            pg.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
        }
        if pg.get_application_name().is_none() {
            pg.application_name("cuca-store-postgres");
        }
        let config = PostgresConfig {
            pg,
            schema: DEFAULT_SCHEMA.to_owned(),
            drop_schema_on_drop: false,
        };
        config.validate()?;
        Ok(config)
    }

    /// Keeps the sessions in `schema` (created if missing): one schema per fleet, per tenant or
    /// per environment. A name is lowercase ASCII letters, digits and `_`, not starting with a
    /// digit, at most 63 bytes.
    pub fn with_schema(mut self, schema: &str) -> Result<Self, PluginError> {
        self.schema = schema.to_owned();
        self.validate()?;
        Ok(self)
    }

    /// Keeps the sessions in a schema of a fresh, unique name that is dropped, with everything
    /// in it, when the backend is dropped: for tests and benchmarks that share one server.
    pub fn with_throwaway_schema(mut self) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|elapsed| elapsed.as_nanos())
            .unwrap_or(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        self.schema = format!("cuca_tmp_{}_{nanos}_{n}", std::process::id());
        self.drop_schema_on_drop = true;
        // Tells the backend apart in pg_stat_activity, which the reconnect tests rely on.
        let name = format!("cuca-store-postgres {}", self.schema);
        self.pg.application_name(&name);
        self
    }

    /// The schema holding the sessions.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The `application_name` the backend's connection reports to the server.
    pub fn application_name(&self) -> Option<&str> {
        self.pg.get_application_name()
    }

    /// Where the server is, for messages: `host:port/dbname`, never the password.
    pub fn describe(&self) -> String {
        let ports = self.pg.get_ports();
        let hosts: Vec<String> = self
            .pg
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(idx, host)| {
                // One port applies to every host; otherwise the nth port goes with the nth host.
                let port = ports.get(idx).or(ports.first()).copied().unwrap_or(5432);
                match host {
                    Host::Tcp(name) => format!("{name}:{port}"),
                    Host::Unix(dir) => format!("{}:{port}", dir.display()),
                }
            })
            .collect();
        let db = self
            .pg
            .get_dbname()
            .or(self.pg.get_user())
            .unwrap_or("postgres");
        format!("{}/{db}", hosts.join(","))
    }

    /// Checks the schema name; [`PostgresConfig::new`] and [`PostgresConfig::with_schema`]
    /// already call it.
    pub fn validate(&self) -> Result<(), PluginError> {
        let schema = &self.schema;
        let well_formed = !schema.is_empty()
            && schema.len() <= MAX_SCHEMA_LEN
            && !schema.starts_with(|c: char| c.is_ascii_digit())
            && !schema.starts_with("pg_")
            && schema
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !well_formed {
            return Err(PluginError::validation(
                "PostgresConfig::schema",
                format!("{schema:?} is not a schema name cuca uses: lowercase ASCII letters, digits and '_', not starting with a digit or \"pg_\", at most {MAX_SCHEMA_LEN} bytes"),
            ));
        }
        Ok(())
    }
}

/// What [`crate::PostgresBackend::connect`] takes: a URL (`&str`, `String`) or a
/// [`PostgresConfig`].
pub trait IntoPostgresConfig {
    /// The config, or why the input is not one.
    fn into_config(self) -> Result<PostgresConfig, PluginError>;
}

impl IntoPostgresConfig for PostgresConfig {
    fn into_config(self) -> Result<PostgresConfig, PluginError> {
        self.validate()?;
        Ok(self)
    }
}

impl IntoPostgresConfig for &str {
    fn into_config(self) -> Result<PostgresConfig, PluginError> {
        PostgresConfig::new(self)
    }
}

impl IntoPostgresConfig for String {
    fn into_config(self) -> Result<PostgresConfig, PluginError> {
        PostgresConfig::new(&self)
    }
}

impl IntoPostgresConfig for &String {
    fn into_config(self) -> Result<PostgresConfig, PluginError> {
        PostgresConfig::new(self)
    }
}
