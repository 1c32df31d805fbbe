//! `cuca-view`: a local, read-only web viewer for what cuca records.
//!
//! It serves server-rendered HTML pages for the session directories it is given (the list of
//! sessions, each session's turns as a conversation, its forks, and its new records as they
//! arrive), for a call log (calls in flight, failures, latency per model) and for a directory of
//! assembled journal runs. Pages are built on the server with [`maud`], which escapes every
//! interpolated string, and served with a strict Content-Security-Policy; the one script and
//! the one stylesheet are embedded in the binary, so the viewer works offline. A session page
//! can also be saved as one file that opens with no server and no network
//! ([`standalone::write_session`], `cuca export --format html`).
//!
//! ```no_run
//! # async fn docs() -> std::io::Result<()> {
//! // Needs a directory of .cslog files; serves until the process is stopped.
//! let config = cuca_view::ViewConfig::new(vec!["fixtures/sessions".into()]);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! println!("http://{}/", listener.local_addr()?);
//! axum::serve(listener, cuca_view::router(config)).await
//! # }
//! ```
//!
//! # Memory and time
//!
//! A session page reads records only until it has the turns it shows (one page of turns):
//! reading stops at the page's last turn ([`sessions::page`]). Its summary header, pager
//! totals, sorted turns and timeline come from the session's [`index`]: one read of the whole
//! session keeping a few numbers per turn and no text, cached for the sessions read most
//! recently and extended from where its read stopped when a file grows. The index also keeps one read mark per page of
//! turns, so a deep page is read from its mark, not from the session's start. A live poll
//! ([`sessions::live_poll`]) reads on from the read mark its page's previous poll stopped at,
//! so it costs what was appended since, and its answer is bounded in records and in bytes
//! (each record clipped to [`sessions::MAX_LIVE_RECORD_BYTES`], the answer to about
//! [`sessions::MAX_LIVE_BYTES`]). The list verifies every session in full, once per request.
//! A search ([`search`]) reads every session again.
//!
//! # What it does not do
//!
//! It never writes: there is no route that changes a recording, and every route answers only
//! `GET`. It reads through the library crates' public APIs (`FileBackend`, the call-log reader,
//! the journal's record reader) and holds no format knowledge of its own. It does not replay a
//! session as a stream (that is `cuca replay`); it shows what was recorded.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::sync::Arc;

mod assets;
pub mod calls;
pub mod compare;
mod cost;
pub mod diffs;
mod error;
pub mod index;
mod marks;
mod pages;
mod routes;
pub mod runs;
pub mod search;
pub mod sessions;
pub mod standalone;
pub mod timeline;

pub use error::ViewError;

/// What the viewer shows: session directories, a call log, a directory of journal runs.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ViewConfig {
    /// Directories of `.cslog` session files; a session is named by its id within its
    /// directory (the first directory that holds an id wins).
    pub session_dirs: Vec<PathBuf>,
    /// Stores that are not directories (a PostgreSQL database a fleet records into), each
    /// with the words that name it (never a password), searched after the directories.
    pub session_stores: Vec<(String, std::sync::Arc<dyn cuca_events::SessionBackend>)>,
    /// The workspace object stores of the stores that are not directories, by the same name
    /// as in [`ViewConfig::session_stores`] (a directory's are beside it): where a turn's
    /// file diffs are read from ([`ViewConfig::with_store_objects`]).
    pub store_objects: Vec<(String, diffs::Objects)>,
    /// The call log file (`calls.jsonl`) to summarise, if any.
    pub call_log: Option<PathBuf>,
    /// A directory of journal runs (`{run}/replay.json.gz`), if any.
    pub runs_dir: Option<PathBuf>,
}

impl ViewConfig {
    /// A viewer over these session directories, with no call log and no journal runs.
    pub fn new(session_dirs: Vec<PathBuf>) -> Self {
        ViewConfig {
            session_dirs,
            session_stores: Vec::new(),
            store_objects: Vec::new(),
            call_log: None,
            runs_dir: None,
        }
    }

    /// Shows the sessions of `backend` too, named `name` (where it is, for the page and
    /// errors: never a password).
    pub fn with_store(
        mut self,
        name: impl Into<String>,
        backend: std::sync::Arc<dyn cuca_events::SessionBackend>,
    ) -> Self {
        self.session_stores.push((name.into(), backend));
        self
    }

    /// Reads the file diffs of the sessions of the store named `name` (as given to
    /// [`ViewConfig::with_store`]) from `objects`: a PostgreSQL store keeps its workspace
    /// objects in the database, which the caller opens.
    pub fn with_store_objects(
        mut self,
        name: impl Into<String>,
        objects: std::sync::Arc<dyn cuca_workspace::ObjectStore>,
    ) -> Self {
        self.store_objects
            .push((name.into(), diffs::Objects(objects)));
        self
    }

    /// Shows the call log at `path` too.
    pub fn with_call_log(mut self, path: impl Into<PathBuf>) -> Self {
        self.call_log = Some(path.into());
        self
    }

    /// Shows the journal runs under `dir` too.
    pub fn with_runs_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.runs_dir = Some(dir.into());
        self
    }
}

/// The viewer's routes, ready for `axum::serve`. Every route is `GET`; see the crate docs.
pub fn router(config: ViewConfig) -> axum::Router {
    routes::router(Arc::new(config))
}
