//! The `GET /runs/{id}/replay` route: run-id validation, regular files only, streamed answers.

use std::fs::File;
use std::io::ErrorKind;
use std::path::{Component, Path as FsPath, PathBuf};
use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::negotiate::negotiate_file;

/// The file a run's record is stored under, at the root of the run directory.
pub use cuca_journal::format::RECORD_FILE_NAME;

/// The longest run id the route accepts, in bytes: one file-name component on every common
/// file system.
pub const MAX_RUN_ID_BYTES: usize = 255;

/// Why a run id was refused by [`validate_run_id`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunIdError {
    /// The id is empty.
    Empty,
    /// The id is longer than [`MAX_RUN_ID_BYTES`].
    TooLong,
    /// The id is `.` or `..`, which name a directory other than a run's own.
    DotSegment,
    /// The id contains a path separator (`/` or `\`), so it would name a path, not a run.
    Separator,
    /// The id contains NUL or another control character.
    ControlCharacter,
    /// The id would be read as an absolute path or a drive prefix on this platform.
    NotRelative,
}

impl std::fmt::Display for RunIdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Empty => "run id is empty",
            Self::TooLong => "run id is longer than 255 bytes",
            Self::DotSegment => "run id is a dot segment",
            Self::Separator => "run id contains a path separator",
            Self::ControlCharacter => "run id contains a control character",
            Self::NotRelative => "run id is not a single relative path component",
        })
    }
}

impl std::error::Error for RunIdError {}

/// Checks that `id` (already percent-decoded) names exactly one directory entry of a runs
/// directory, so `runs_dir.join(id)` can never leave it.
///
/// ```
/// use cuca_serve::{validate_run_id, RunIdError};
/// assert_eq!(validate_run_id("run-2024-01-01_a.b"), Ok(()));
/// assert_eq!(validate_run_id("../../etc"), Err(RunIdError::Separator));
/// assert_eq!(validate_run_id(".."), Err(RunIdError::DotSegment));
/// ```
pub fn validate_run_id(id: &str) -> Result<(), RunIdError> {
    if id.is_empty() {
        return Err(RunIdError::Empty);
    }
    if id.len() > MAX_RUN_ID_BYTES {
        return Err(RunIdError::TooLong);
    }
    if id == "." || id == ".." {
        return Err(RunIdError::DotSegment);
    }
    if id.contains(['/', '\\']) {
        return Err(RunIdError::Separator);
    }
    if id.chars().any(char::is_control) {
        return Err(RunIdError::ControlCharacter);
    }
    // The checks above already rule out everything `Path` could read as more than one normal
    // component on Unix; this one is the belt for platforms with drive prefixes (`C:`).
    let mut components = FsPath::new(id).components();
    match (components.next(), components.next()) {
        (Some(Component::Normal(_)), None) => Ok(()),
        _ => Err(RunIdError::NotRelative),
    }
}

/// The state of the replay route: the directory holding one subdirectory per run.
#[derive(Debug, Clone)]
struct RunsDir(Arc<PathBuf>);

/// An axum router answering `GET /runs/{id}/replay` from `runs_dir/{id}/replay.json.gz`.
///
/// * a run id that fails [`validate_run_id`] after percent-decoding (`..%2F..%2Fetc`, `%00`) is
///   `400 Bad Request`, and no file is touched;
/// * a run with no record (or no such run) is `404 Not Found`;
/// * a record path that is not a regular file (a directory, a FIFO, a socket, a device) is
///   `500` naming the run, answered without opening it, so a FIFO cannot hang the request;
/// * otherwise the file goes through [`crate::negotiate_file`], streamed a chunk at a time as the
///   client reads; the answer is never `406`.
///
/// `HEAD` is answered too (axum derives it from `GET`). Symbolic links inside `runs_dir` are
/// followed, since the runs directory is the operator's own tree; what the id validation
/// guarantees is that a request cannot name a path outside it. Serve it with [`crate::serve`],
/// which bounds slow clients.
///
/// ```no_run
/// # async fn docs() -> std::io::Result<()> {
/// // Needs a runs directory on disk and a free port.
/// let app = cuca_serve::router("/var/lib/cuca/runs");
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// cuca_serve::serve(listener, app, cuca_serve::ServeLimits::default()).await
/// # }
/// ```
pub fn router(runs_dir: impl Into<PathBuf>) -> Router {
    Router::new()
        .route("/runs/{id}/replay", get(replay))
        .with_state(RunsDir(Arc::new(runs_dir.into())))
}

/// Why a record could not be opened for serving.
enum OpenError {
    /// No record at that path (or no such run).
    Missing,
    /// Something other than a regular file sits where the record should be.
    NotRegular,
    /// Any other I/O failure.
    Io(std::io::Error),
}

/// Opens the record at `path` if it is a regular file, with its length.
///
/// The type is checked before opening — opening a FIFO for reading blocks until a writer
/// appears — and again on the open handle, so what is served is what was checked. (A FIFO
/// swapped in between the two would still block this one blocking thread until a writer comes;
/// the runs directory is the operator's own tree, so that takes an operator racing the server.)
fn open_record(path: &FsPath) -> Result<(File, u64), OpenError> {
    let meta = std::fs::metadata(path).map_err(|err| match err.kind() {
        ErrorKind::NotFound | ErrorKind::NotADirectory => OpenError::Missing,
        _ => OpenError::Io(err),
    })?;
    if !meta.is_file() {
        return Err(OpenError::NotRegular);
    }
    let file = File::open(path).map_err(|err| match err.kind() {
        ErrorKind::NotFound => OpenError::Missing,
        _ => OpenError::Io(err),
    })?;
    let meta = file.metadata().map_err(OpenError::Io)?;
    if !meta.is_file() {
        return Err(OpenError::NotRegular);
    }
    Ok((file, meta.len()))
}

/// The handler behind `GET /runs/{id}/replay`.
async fn replay(
    State(RunsDir(runs_dir)): State<RunsDir>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Response {
    let id = match id {
        Ok(Path(id)) => id,
        // A segment that does not percent-decode to UTF-8 is no run id this server wrote.
        Err(rejection) => return (StatusCode::BAD_REQUEST, rejection.body_text()).into_response(),
    };
    if let Err(err) = validate_run_id(&id) {
        return (StatusCode::BAD_REQUEST, err.to_string()).into_response();
    }
    let path = runs_dir.join(&id).join(RECORD_FILE_NAME);
    let opened = tokio::task::spawn_blocking(move || open_record(&path)).await;
    match opened {
        Ok(Ok((file, len))) => negotiate_file(file, len, &headers),
        Ok(Err(OpenError::Missing)) => {
            (StatusCode::NOT_FOUND, format!("run {id:?} has no record")).into_response()
        }
        Ok(Err(OpenError::NotRegular)) => {
            tracing::error!(run = %id, "the record path is not a regular file; not served");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the record of run {id:?} is not a regular file"),
            )
                .into_response()
        }
        Ok(Err(OpenError::Io(err))) => {
            tracing::error!(run = %id, error = %err, "reading a stored record failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("reading the record of run {id:?} failed"),
            )
                .into_response()
        }
        Err(err) => {
            tracing::error!(run = %id, error = %err, "the record reader task failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

#[cfg(test)]
mod tests;
