//! Content-addressed blobs in the sessions' database: where a fleet keeps the objects its
//! sessions name (workspace snapshots' trees and files), so any machine that can read a
//! session can restore what it names. The blobs are opaque here: the caller addresses and
//! compresses them (`cuca-workspace`), this only stores bytes under an id, once.

use std::sync::Mutex;

use cuca_events::PluginError;
use postgres::Client;

use crate::config::IntoPostgresConfig;
use crate::error::Error;
use crate::schema::connect;

/// The most bytes one object may hold; `put` refuses more (PostgreSQL's `bytea` takes up to
/// 1 GiB, and a larger value would be refused by the server after it was sent whole).
pub const MAX_OBJECT_BYTES: usize = 512 * 1024 * 1024;

/// Blobs by id in the `cuca_objects` table of a schema (migration 5). Safe to share between
/// threads: the one connection is taken in turn; a broken connection is opened again once
/// per call (each call is safe to repeat: storing an id twice keeps the first bytes).
pub struct PostgresObjects {
    config: crate::PostgresConfig,
    host: String,
    client: Mutex<Option<Client>>,
}

impl std::fmt::Debug for PostgresObjects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresObjects")
            .field("host", &self.host)
            .field("schema", &self.config.schema)
            .finish_non_exhaustive()
    }
}

impl PostgresObjects {
    /// Connects, creates the schema if needed and applies pending migrations, as
    /// [`crate::PostgresBackend::connect`] does for the same configuration. A throwaway
    /// schema's drop is the backend's to do, never this store's.
    pub fn connect(config: impl IntoPostgresConfig) -> Result<Self, PluginError> {
        let mut config = config.into_config()?;
        config.drop_schema_on_drop = false;
        let host = config.describe();
        let objects = PostgresObjects {
            config,
            host,
            client: Mutex::new(None),
        };
        let client = objects.open()?;
        *objects.lock() = Some(client);
        Ok(objects)
    }

    /// Whether `id` is stored.
    pub fn has(&self, id: &str) -> Result<bool, PluginError> {
        self.run("has object", |client| {
            client
                .query_opt("SELECT 1 FROM cuca_objects WHERE id = $1", &[&id])
                .map(|row| row.is_some())
        })
    }

    /// Stores `bytes` under `id`; an id stored already keeps its bytes (the id is their
    /// address, so they are the same).
    pub fn put(&self, id: &str, bytes: &[u8]) -> Result<(), PluginError> {
        if bytes.len() > MAX_OBJECT_BYTES {
            return Err(PluginError::Validation {
                schema: "object".into(),
                message: format!(
                    "object {id} holds {} bytes; at most {MAX_OBJECT_BYTES} are stored in one",
                    bytes.len()
                ),
            });
        }
        self.run("store object", |client| {
            client
                .execute(
                    "INSERT INTO cuca_objects (id, bytes) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
                    &[&id, &bytes],
                )
                .map(drop)
        })
    }

    /// The bytes stored under `id`, or `None`.
    pub fn get(&self, id: &str) -> Result<Option<Vec<u8>>, PluginError> {
        self.run("read object", |client| {
            client
                .query_opt("SELECT bytes FROM cuca_objects WHERE id = $1", &[&id])
                .map(|row| row.map(|row| row.get::<_, Vec<u8>>(0)))
        })
    }

    /// `postgres HOST/DB schema S`, for messages (no password).
    pub fn describe(&self) -> String {
        format!("postgres {} schema {}", self.host, self.config.schema)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Client>> {
        self.client
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn open(&self) -> Result<Client, PluginError> {
        Ok(connect(&self.config, &self.host)?)
    }

    /// Runs `op` on the connection, opening a new one when there is none or it broke, and
    /// once more on a new one when it broke during `op`.
    fn run<T>(
        &self,
        operation: &'static str,
        op: impl Fn(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, PluginError> {
        let mut slot = self.lock();
        let mut retried = false;
        loop {
            let client = match slot.take() {
                Some(client) if !client.is_closed() => client,
                _ => self.open()?,
            };
            let client = slot.insert(client);
            match op(client) {
                Ok(value) => return Ok(value),
                Err(source) => {
                    let broken = crate::worker::broken(&source, client);
                    if broken {
                        *slot = None;
                        if !retried {
                            retried = true;
                            continue;
                        }
                    }
                    return Err(Error::Query {
                        operation,
                        host: self.host.clone(),
                        source,
                    }
                    .into());
                }
            }
        }
    }
}
