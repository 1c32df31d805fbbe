//! Where a store keeps the workspace objects its sessions' snapshots name: beside a directory
//! store (`STORE/.cuca-workspace/objects`), and in the database itself for a PostgreSQL store
//! (`cuca_objects`, content-addressed), so that every machine of a fleet restores what any of
//! them recorded.

use std::sync::Arc;

use cuca_workspace::{DirObjects, ObjectStore};

use crate::error::CliError;
use crate::store::{Store, StoreArg};

/// The object store of `store` (opened from `arg`).
pub(crate) fn objects_for(arg: &StoreArg, store: &Store) -> Result<Arc<dyn ObjectStore>, CliError> {
    match arg {
        StoreArg::Dir(dir) => Ok(Arc::new(DirObjects::beside(dir))),
        StoreArg::Postgres(url) => in_database(url, store),
    }
}

#[cfg(feature = "postgres")]
fn in_database(url: &str, store: &Store) -> Result<Arc<dyn ObjectStore>, CliError> {
    let Some(backend) = store.postgres() else {
        return Err(CliError::Failed(format!(
            "{} is not an open PostgreSQL store",
            store.describe()
        )));
    };
    let config = cuca::PostgresConfig::new(url)
        .and_then(|config| config.with_schema(backend.schema()))
        .map_err(|error| CliError::Usage(error.to_string()))?;
    let objects = cuca::store_postgres::PostgresObjects::connect(config).map_err(|error| {
        CliError::Failed(format!(
            "workspace objects of {}: {error}",
            store.describe()
        ))
    })?;
    Ok(Arc::new(InDatabase(objects)))
}

#[cfg(not(feature = "postgres"))]
fn in_database(_url: &str, _store: &Store) -> Result<Arc<dyn ObjectStore>, CliError> {
    Err(CliError::Usage(
        "this cuca was built without PostgreSQL support (cuca-cli's `postgres` feature); give a directory"
            .into(),
    ))
}

/// [`ObjectStore`] over the database's `cuca_objects`.
#[cfg(feature = "postgres")]
struct InDatabase(cuca::store_postgres::PostgresObjects);

#[cfg(feature = "postgres")]
impl InDatabase {
    fn failed(&self, error: &cuca::PluginError) -> cuca_workspace::WorkspaceError {
        cuca_workspace::WorkspaceError::Store {
            store: self.0.describe(),
            message: error.to_string(),
        }
    }
}

#[cfg(feature = "postgres")]
impl ObjectStore for InDatabase {
    fn has(&self, id: &cuca_workspace::ObjectId) -> Result<bool, cuca_workspace::WorkspaceError> {
        self.0
            .has(&id.to_string())
            .map_err(|error| self.failed(&error))
    }

    fn put(
        &self,
        id: &cuca_workspace::ObjectId,
        compressed: &[u8],
    ) -> Result<(), cuca_workspace::WorkspaceError> {
        self.0
            .put(&id.to_string(), compressed)
            .map_err(|error| self.failed(&error))
    }

    fn get(
        &self,
        id: &cuca_workspace::ObjectId,
    ) -> Result<Option<Vec<u8>>, cuca_workspace::WorkspaceError> {
        self.0
            .get(&id.to_string())
            .map_err(|error| self.failed(&error))
    }

    fn describe(&self) -> String {
        self.0.describe()
    }
}
