//! One way to name a store on every command line that takes one: a directory of `.cslog`
//! files, or a PostgreSQL connection string (`postgres://…`, `postgresql://…`, or libpq's
//! `host=… dbname=…` key-value form), with `--schema` for the schema it keeps its sessions in.
//!
//! The argument is parsed once ([`StoreArg`]), and opened once ([`Store`]); commands that
//! read a directory's files through `FileBackend`'s own scans ask [`Store::file`], and read any
//! other store through the `SessionBackend` trait ([`Store::backend`]).

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use cuca::{FileBackend, SessionBackend};

use crate::error::CliError;

/// A store as typed: a directory, or a PostgreSQL connection string.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum StoreArg {
    /// A directory of `.cslog` files.
    Dir(PathBuf),
    /// A PostgreSQL connection string, password included as typed: never print it, print
    /// [`StoreArg::describe`].
    Postgres(String),
}

/// Never the password: a connection string is shown as where it points.
impl std::fmt::Debug for StoreArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreArg::Dir(dir) => f.debug_tuple("Dir").field(dir).finish(),
            StoreArg::Postgres(_) => f
                .debug_tuple("Postgres")
                .field(&self.describe(None))
                .finish(),
        }
    }
}

impl FromStr for StoreArg {
    type Err = std::convert::Infallible;

    /// Never fails: what is not a connection string is a directory, checked when opened.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(if is_connection_string(text) {
            StoreArg::Postgres(text.to_owned())
        } else {
            StoreArg::Dir(PathBuf::from(text))
        })
    }
}

/// `postgres://…`, `postgresql://…`, or a libpq key-value string (`host=… dbname=…`: its
/// first word is `key=`) that is not an existing directory.
fn is_connection_string(text: &str) -> bool {
    if text.starts_with("postgres://") || text.starts_with("postgresql://") {
        return true;
    }
    let first = text.split_whitespace().next().unwrap_or("");
    let key_value = first.split_once('=').is_some_and(|(key, _)| {
        !key.is_empty() && key.chars().all(|c| c.is_ascii_lowercase() || c == '_')
    });
    key_value && !Path::new(text).is_dir()
}

impl StoreArg {
    /// Where the store is, for messages: the directory, or `postgres host:port/db` and the
    /// schema — never a password.
    pub(crate) fn describe(&self, schema: Option<&str>) -> String {
        match self {
            StoreArg::Dir(dir) => dir.display().to_string(),
            StoreArg::Postgres(url) => describe_postgres(url, schema),
        }
    }

    /// The directory, for a command that works on `.cslog` files only (`compact`, `repair`):
    /// a database is a usage error naming it (never its password) and saying `why` the
    /// command has nothing to do there; so is `--schema` with a directory.
    pub(crate) fn directory_only(
        &self,
        schema: Option<&str>,
        command: &str,
        why: &str,
    ) -> Result<&Path, CliError> {
        match self {
            StoreArg::Dir(dir) if schema.is_some() => Err(CliError::Usage(format!(
                "--schema names a PostgreSQL schema; {} is a directory",
                dir.display()
            ))),
            StoreArg::Dir(dir) => Ok(dir),
            StoreArg::Postgres(_) => Err(CliError::Usage(format!(
                "cuca {command} works on a directory of .cslog files, and {} is a PostgreSQL store: {why}",
                self.describe(schema)
            ))),
        }
    }

    /// Opens the store. A directory must exist unless `create` (a typo must not read as an
    /// empty store); a database is connected to and migrated, its schema created if missing.
    pub(crate) fn open(&self, schema: Option<&str>, create: bool) -> Result<Store, CliError> {
        self.open_with(schema, create, false)
    }

    /// [`StoreArg::open`] for a recorder: a PostgreSQL store pipelines streamed blocks
    /// (`Durability::Pipelined`: a call is stored whole when its closing record is).
    pub(crate) fn open_for_recording(&self, schema: Option<&str>) -> Result<Store, CliError> {
        self.open_with(schema, true, true)
    }

    fn open_with(
        &self,
        schema: Option<&str>,
        create: bool,
        recording: bool,
    ) -> Result<Store, CliError> {
        match self {
            StoreArg::Dir(dir) => {
                if schema.is_some() {
                    return Err(CliError::Usage(format!(
                        "--schema names a PostgreSQL schema; {} is a directory",
                        dir.display()
                    )));
                }
                if !create {
                    match std::fs::metadata(dir) {
                        Ok(metadata) if metadata.is_dir() => {}
                        Ok(_) => {
                            return Err(CliError::Usage(format!(
                            "{} is not a directory; give the directory that holds the .cslog files",
                            dir.display()
                        )))
                        }
                        Err(error) => {
                            return Err(CliError::Usage(format!(
                                "directory {} cannot be read: {error}",
                                dir.display()
                            )))
                        }
                    }
                }
                if !create {
                    holds_cuca_data(dir)?;
                }
                let backend = FileBackend::new(dir).map_err(|error| {
                    CliError::Usage(format!("sessions directory {}: {error}", dir.display()))
                })?;
                let backend = Arc::new(backend);
                Ok(Store {
                    backend: Arc::clone(&backend) as Arc<dyn SessionBackend>,
                    file: Some(backend),
                    #[cfg(feature = "postgres")]
                    postgres: None,
                    description: dir.display().to_string(),
                    typed: dir.display().to_string(),
                })
            }
            StoreArg::Postgres(url) => open_postgres(url, schema, recording),
        }
    }
}

/// Refuses a directory that holds files but no cuca data (`/etc`, a typo that names the
/// project instead of its sessions): reading it as an empty store would say "0 sessions"
/// (or, to `cuca grep`, "nothing matched") about a directory that was never one. An empty
/// directory is a store with nothing recorded yet; any entry with `.cslog` in its name (a
/// session, compacted or live, or one kept aside by a repair) makes it a store.
fn holds_cuca_data(dir: &Path) -> Result<(), CliError> {
    let entries = std::fs::read_dir(dir).map_err(|error| {
        CliError::Usage(format!(
            "directory {} cannot be read: {error}",
            dir.display()
        ))
    })?;
    let mut others = 0u64;
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().contains(".cslog") {
            return Ok(());
        }
        others += 1;
    }
    if others == 0 {
        return Ok(());
    }
    Err(CliError::Usage(format!(
        "{} is not a store: none of its {} is a session (`.cslog` file); give the directory cuca records into (`cuca proxy --store DIR`, `cuca run --store DIR`)",
        dir.display(),
        crate::ui::count(others, "entry", "entries")
    )))
}

/// An open store.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    backend: Arc<dyn SessionBackend>,
    file: Option<Arc<FileBackend>>,
    /// The database store, when this is one: it sizes its sessions in one query.
    #[cfg(feature = "postgres")]
    postgres: Option<Arc<cuca::PostgresBackend>>,
    description: String,
    /// The store as a command line names it again (no password).
    typed: String,
}

impl Store {
    /// The store through the trait every store implements.
    pub(crate) fn backend(&self) -> &dyn SessionBackend {
        &*self.backend
    }

    /// The store, shared (a proxy, a viewer, an exporter hold it).
    pub(crate) fn shared(&self) -> Arc<dyn SessionBackend> {
        Arc::clone(&self.backend)
    }

    /// The directory store, when this is one: its scans report damage byte by byte.
    pub(crate) fn file(&self) -> Option<&FileBackend> {
        self.file.as_deref()
    }

    /// Where the store is, for messages (never a password).
    pub(crate) fn describe(&self) -> &str {
        &self.description
    }

    /// The store as the arguments of a command to type next (`cuca replay {this} SESSION`):
    /// the directory, or the database's URL without its password and `--schema NAME`.
    pub(crate) fn command_form(&self) -> &str {
        &self.typed
    }

    /// The database store, when this is one: `cuca scrub` rewrites a session there in one
    /// transaction.
    #[cfg(feature = "postgres")]
    pub(crate) fn postgres(&self) -> Option<&cuca::PostgresBackend> {
        self.postgres.as_deref()
    }

    /// For a store that is not a directory, each session's size in bytes: for a database,
    /// the bytes of its stored records (what its `.cslog` would hold, less the frames'
    /// headers), every session in one query. `None` for a directory, whose scans measure its
    /// files.
    pub(crate) fn stored_bytes(
        &self,
    ) -> Result<Option<std::collections::HashMap<String, u64>>, CliError> {
        #[cfg(feature = "postgres")]
        if let Some(postgres) = &self.postgres {
            let sizes = postgres.session_sizes().map_err(|error| {
                CliError::Failed(format!("store {}: {error}", self.description))
            })?;
            return Ok(Some(sizes.into_iter().collect()));
        }
        Ok(None)
    }
}

#[cfg(feature = "postgres")]
fn describe_postgres(url: &str, schema: Option<&str>) -> String {
    match cuca::PostgresConfig::new(url) {
        Ok(config) => format!(
            "postgres {} schema {}",
            config.describe(),
            schema.unwrap_or(config.schema())
        ),
        Err(_) => "a PostgreSQL connection string that does not parse".to_owned(),
    }
}

#[cfg(feature = "postgres")]
fn open_postgres(url: &str, schema: Option<&str>, recording: bool) -> Result<Store, CliError> {
    use cuca::store_postgres::Durability;
    // The parse error never quotes the string: it may hold a password.
    let mut config =
        cuca::PostgresConfig::new(url).map_err(|error| CliError::Usage(error.to_string()))?;
    if let Some(schema) = schema {
        config = config
            .with_schema(schema)
            .map_err(|error| CliError::Usage(error.to_string()))?;
    }
    if recording {
        config = config.with_durability(Durability::Pipelined);
    }
    let description = format!("postgres {} schema {}", config.describe(), config.schema());
    let typed = format!(
        "{} --schema {}",
        config.url_without_password(),
        config.schema()
    );
    let backend = cuca::PostgresBackend::connect(config)
        .map_err(|error| CliError::Failed(format!("store {description}: {error}")))?;
    let backend = Arc::new(backend);
    Ok(Store {
        backend: Arc::clone(&backend) as Arc<dyn SessionBackend>,
        file: None,
        postgres: Some(backend),
        description,
        typed,
    })
}

#[cfg(not(feature = "postgres"))]
fn describe_postgres(_url: &str, _schema: Option<&str>) -> String {
    "a PostgreSQL store".to_owned()
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(_url: &str, _schema: Option<&str>, _recording: bool) -> Result<Store, CliError> {
    Err(CliError::Usage(
        "this cuca was built without PostgreSQL support (cuca-cli's `postgres` feature); give a directory"
            .into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_string_is_told_from_a_directory() {
        let parse = |text: &str| StoreArg::from_str(text).unwrap_or(StoreArg::Dir(PathBuf::new()));
        assert!(matches!(
            parse("postgres://u:pw@h/db"),
            StoreArg::Postgres(_)
        ));
        assert!(matches!(parse("postgresql://h/db"), StoreArg::Postgres(_)));
        assert!(matches!(
            parse("host=/tmp dbname=cuca"),
            StoreArg::Postgres(_)
        ));
        assert_eq!(parse("sessions"), StoreArg::Dir("sessions".into()));
        assert_eq!(parse("./a=b"), StoreArg::Dir("./a=b".into()));
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn the_password_is_never_described() {
        let store = StoreArg::from_str("postgres://alice:s3cret@db.example:6543/fleet")
            .unwrap_or(StoreArg::Dir(PathBuf::new()));
        let text = store.describe(Some("team"));
        assert_eq!(text, "postgres db.example:6543/fleet schema team");
        assert!(!format!("{store:?}").contains("s3cret"));
    }
}
