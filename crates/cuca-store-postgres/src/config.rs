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
    pub(crate) durability: Durability,
}

/// When an append returns, and so what an acknowledged record means.
///
/// PostgreSQL decides what a commit survives (`synchronous_commit`, `fsync`): with its
/// defaults a committed transaction survives a crash of the server and of its machine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Durability {
    /// Every append returns after the transaction holding its record committed; an `Ok` is
    /// a stored record. One round trip and one commit per append (appends from other threads
    /// wait their turn on the one connection).
    #[default]
    Commit,
    /// A call's records between its messages and its `TokenUsage` — the streamed blocks
    /// (`Reasoning`, `Output`, `ToolCall`) and the call's bookkeeping (`CallRequest`,
    /// `CallFinish`, `CallIncomplete`, `CallWire`, `Latency`) — of a session this backend has
    /// appended to before return as soon as they are queued, in order, for the connection
    /// thread, which writes everything queued in one statement and one commit. Every other
    /// record (`SystemPrompt`, `Message`, `ToolResult`: what a writer counts to know what is
    /// recorded; `TokenUsage`, the record that closes a turn; anything newer) returns only
    /// after it **and every record of its session queued before it** committed. It goes
    /// ahead of other sessions' queued records, which nobody waits for: a session's first
    /// message does not wait for fifty other sessions' streams. So a queued record's `Ok`
    /// means "accepted, in order": it is stored when the next waiting append of its session
    /// (or a replay of its session, or any fork or listing through this backend) returns
    /// `Ok`, and a call whose `TokenUsage` is acknowledged is stored whole. A record that is accepted but then not
    /// stored (the server went away, or another writer took its sequence) makes the session's
    /// next append fail with [`crate::Error::NotStored`] naming every record lost, and nothing
    /// is stored in the session after the hole until that error was returned. A sequence at
    /// or below the last one this backend appended is still refused at once with
    /// [`PluginError::SequenceTaken`]; one taken meanwhile by another process is learnt late,
    /// as `NotStored`. Records still queued when the backend is dropped are written first; a
    /// process killed with records queued loses those (never one whose session's later
    /// waiting append was acknowledged).
    ///
    /// What the disk holds when: a batch of queued records only (nobody waits on it) commits
    /// with `synchronous_commit = off` for its transaction, so it is visible at once but the
    /// server may still lose it in a crash for a fraction of a second; a batch holding a
    /// waiting record commits with the server's own setting (by default waiting for the
    /// log to reach the disk), and as PostgreSQL's log is flushed up to a point, that flush
    /// makes every batch committed before it durable too. The connection thread keeps the
    /// records of every batch committed without waiting until such a flush; if the
    /// connection breaks in between (the server may have crashed and lost them), it sends
    /// them again first on the new connection, where a record whose exact bytes are stored
    /// counts as stored and a missing one is stored again, in a statement that waits for
    /// its commit, before it answers anything else. So a waiting record's `Ok` and a
    /// replay still come after every record of their session queued before them is
    /// durable, and a fork or listing through this backend after every record queued before
    /// it. At most 4,096 records (16 MiB) are kept; a batch that would
    /// keep more waits for its commit.
    Pipelined,
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
    ///
    /// As for libpq: a string without a user takes `PGUSER`, else the OS user (`USER`); a
    /// string without a password takes `PGPASSWORD`, else the first matching line of the
    /// password file (`PGPASSFILE`, default `~/.pgpass`, ignored when group or others may read
    /// it). The password is never printed: [`PostgresConfig::describe`] and `Debug` leave it
    /// out.
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
        if pg.get_user().is_none() {
            // libpq's default: PGUSER, else the operating-system user.
            if let Some(user) = env_value("PGUSER").or_else(|| env_value("USER")) {
                pg.user(&user);
            }
        }
        if pg.get_password().is_none() {
            if let Some(password) = password_from_env(&pg) {
                pg.password(password);
            }
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
            durability: Durability::Commit,
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

    /// When appends return ([`Durability::Commit`] unless told otherwise).
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// When appends return.
    pub fn durability(&self) -> Durability {
        self.durability
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

    /// The connection as a URL to type again, never with the password:
    /// `postgres://user@host:port/dbname` (the user as it was resolved, from the string,
    /// `PGUSER` or `USER`; a socket directory percent-encoded, as libpq reads it). A command
    /// line that prints "look at it with …" prints this; the password comes, as before, from
    /// `PGPASSWORD` or `~/.pgpass`, or is added by hand.
    pub fn url_without_password(&self) -> String {
        let ports = self.pg.get_ports();
        let hosts: Vec<String> = self
            .pg
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(idx, host)| {
                let port = ports.get(idx).or(ports.first()).copied().unwrap_or(5432);
                let name = match host {
                    Host::Tcp(name) => url_escape(name),
                    Host::Unix(dir) => url_escape(&dir.display().to_string()),
                };
                format!("{name}:{port}")
            })
            .collect();
        let user = self
            .pg
            .get_user()
            .map_or_else(String::new, |user| format!("{}@", url_escape(user)));
        let db = self
            .pg
            .get_dbname()
            .map_or_else(String::new, |db| format!("/{}", url_escape(db)));
        format!("postgres://{user}{}{db}", hosts.join(","))
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

/// `text` with every byte but a URL's unreserved ones (letters, digits, `-._~`)
/// percent-encoded, so a user, host or database name reads back as itself.
fn url_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            escaped.push(char::from(byte));
        } else {
            escaped.push_str(&format!("%{byte:02X}"));
        }
    }
    escaped
}

fn env_value(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

/// The password libpq would use when the connection string has none: `PGPASSWORD`, else the
/// first matching line of the password file (`PGPASSFILE`, default `~/.pgpass`).
fn password_from_env(pg: &postgres::Config) -> Option<String> {
    if let Some(password) = env_value("PGPASSWORD") {
        return Some(password);
    }
    let file = env_value("PGPASSFILE")
        .map(std::path::PathBuf::from)
        .or_else(|| env_value("HOME").map(|home| std::path::Path::new(&home).join(".pgpass")))?;
    let text = read_password_file(&file)?;
    let host = match pg.get_hosts().first()? {
        Host::Tcp(name) => name.clone(),
        // libpq matches a socket in the default directory as "localhost".
        Host::Unix(_) => "localhost".to_owned(),
    };
    let port = pg.get_ports().first().copied().unwrap_or(5432).to_string();
    let user = pg.get_user()?;
    let db = pg.get_dbname().unwrap_or(user);
    pgpass_lookup(&text, [host.as_str(), port.as_str(), db, user])
}

/// The password file's text, unless group or others may read it: libpq ignores such a file
/// (a password readable by other users is no secret), and so does this.
fn read_password_file(path: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let metadata = std::fs::metadata(path).ok()?;
    if !metadata.is_file() || metadata.permissions().mode() & 0o077 != 0 {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// The password of the first `hostname:port:database:username:password` line matching
/// `wanted` (host, port, database, user); `*` matches anything, `\` escapes `:` and `\`.
pub(crate) fn pgpass_lookup(text: &str, wanted: [&str; 4]) -> Option<String> {
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut fields = Vec::with_capacity(5);
        let mut field = String::new();
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => field.extend(chars.next()),
                ':' if fields.len() < 4 => fields.push(std::mem::take(&mut field)),
                other => field.push(other),
            }
        }
        fields.push(field);
        if fields.len() != 5 {
            continue;
        }
        let matches = fields
            .iter()
            .zip(wanted)
            .all(|(pattern, value)| pattern == "*" || pattern == value);
        if matches {
            return fields.pop();
        }
    }
    None
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
