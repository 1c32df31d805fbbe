//! Salvage: assembling the journal of a run that never reached artifact collection.
//!
//! "A hung or timed_out run never reaches artifact collection ... so the engine salvages the
//! journal before teardown." Only the journal is salvaged: copied into a scratch directory
//! shaped like a collected tree, then folded by the same assembly into the same run directory a
//! completed run's record is written into. "Every failure on this path is swallowed and the
//! absent artifact is the signal."
//!
//! What this module does not do: it never copies the implementation tree, never runs code
//! analysis, and never returns an error — the run it serves is already failing, and reporting
//! that failure accurately outranks the diagnostic.

use std::path::Path;

use crate::assemble::{
    assemble_file, create_run_dir, remove_if_created, AssembleError, AssembleOptions,
    AssembleReport,
};
use crate::format::{DEFAULT_JOURNAL_DIR, JOURNAL_FILE_NAME};

/// Salvages the journal at `journal_path` into `<run_dir>/replay.json.gz`.
///
/// Returns the assembly report when a record was written, `None` otherwise: no journal at that
/// path, a refused journal, any I/O failure, or even a panic inside assembly — each is logged
/// with `tracing` at `warn` and swallowed. The journal at `journal_path` is never modified or
/// removed (it is the container's copy; the scratch copy is what assembly consumes), and the
/// scratch tree is removed on every path. A journal with no terminating line yields a record
/// whose outcome is `session_killed`, which is what happened.
///
/// ```
/// let run_dir = tempfile::tempdir().unwrap();
/// let missing = run_dir.path().join("no-such-journal.ndjson");
/// assert!(cuca_journal::salvage::salvage(&missing, run_dir.path()).is_none());
/// ```
pub fn salvage(journal_path: &Path, run_dir: &Path) -> Option<AssembleReport> {
    // The panic guard is belt and braces: assembly returns errors rather than panicking on any
    // input, but this path must not be the thing that ends a failing run's reporting early.
    let outcome = std::panic::catch_unwind(|| try_salvage(journal_path, run_dir));
    match outcome {
        Ok(Ok(report)) => report,
        Ok(Err(reason)) => {
            tracing::warn!(journal = %journal_path.display(), run_dir = %run_dir.display(), %reason, "journal salvage failed; the run has no record");
            None
        }
        Err(_) => {
            tracing::warn!(journal = %journal_path.display(), run_dir = %run_dir.display(), "journal salvage panicked; the run has no record");
            None
        }
    }
}

/// [`salvage`] for a caller that wants the reason: `Ok(None)` when there is no journal at
/// `journal_path`, the error otherwise. The same guarantees hold: the journal is never modified,
/// the scratch tree is removed on every path, and a run directory this call created is removed
/// again when no record was written. Errors name `journal_path`, never the scratch copy.
pub fn try_salvage(
    journal_path: &Path,
    run_dir: &Path,
) -> Result<Option<AssembleReport>, AssembleError> {
    match std::fs::metadata(journal_path) {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => {
            return Err(AssembleError::Io {
                operation: "salvage",
                path: journal_path.to_owned(),
                source: std::io::Error::other("the journal path is not a regular file"),
            })
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            tracing::info!(journal = %journal_path.display(), "no journal to salvage");
            return Ok(None);
        }
        Err(source) => {
            return Err(AssembleError::Io {
                operation: "stat",
                path: journal_path.to_owned(),
                source,
            })
        }
    }
    let created = create_run_dir(run_dir)?;
    let result = salvage_into(journal_path, run_dir);
    if result.is_err() {
        // The scratch tree dropped inside `salvage_into`; the run directory is empty again.
        remove_if_created(run_dir, created);
    }
    result.map(Some)
}

fn salvage_into(journal_path: &Path, run_dir: &Path) -> Result<AssembleReport, AssembleError> {
    let io = |operation, path: &Path| {
        let path = path.to_owned();
        move |source| AssembleError::Io {
            operation,
            path,
            source,
        }
    };
    // Beside the output, like assembly's own scratch: the one volume known to have room.
    let scratch = tempfile::Builder::new()
        .prefix(".cuca-salvage-")
        .tempdir_in(run_dir)
        .map_err(io("create scratch tree in", run_dir))?;
    let journal_dir = scratch.path().join(DEFAULT_JOURNAL_DIR);
    std::fs::create_dir_all(&journal_dir).map_err(io("create scratch tree in", run_dir))?;
    let copy = journal_dir.join(JOURNAL_FILE_NAME);
    // The copy is what a dying container leaves behind; it is what assembly reads, but every
    // message names the journal the caller gave, which outlives the scratch tree.
    std::fs::copy(journal_path, &copy).map_err(io("copy", journal_path))?;
    let file = std::fs::File::open(&copy).map_err(io("open", journal_path))?;
    let report = assemble_file(file, journal_path, run_dir, &AssembleOptions::default())?;
    if let Err(err) = scratch.close() {
        // The record is written; a scratch tree left behind is untidy, not a failure.
        tracing::warn!(run_dir = %run_dir.display(), error = %err, "salvage scratch tree could not be removed");
    }
    // `journal_removed` stays false: the journal at `journal_path` is never touched.
    Ok(report)
}

#[cfg(test)]
mod tests;
