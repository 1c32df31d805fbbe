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

use crate::assemble::{assemble_with, AssembleOptions, AssembleReport};
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

/// The fallible body of [`salvage`]; `Ok(None)` when there is no journal to salvage.
fn try_salvage(journal_path: &Path, run_dir: &Path) -> Result<Option<AssembleReport>, String> {
    match std::fs::metadata(journal_path) {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => return Err("the journal path is not a file".to_owned()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            tracing::info!(journal = %journal_path.display(), "no journal to salvage");
            return Ok(None);
        }
        Err(err) => return Err(format!("stat {}: {err}", journal_path.display())),
    }
    std::fs::create_dir_all(run_dir)
        .map_err(|err| format!("create run directory {}: {err}", run_dir.display()))?;
    // Beside the output, like assembly's own scratch: the one volume known to have room.
    let scratch = tempfile::Builder::new()
        .prefix(".cuca-salvage-")
        .tempdir_in(run_dir)
        .map_err(|err| format!("create scratch tree in {}: {err}", run_dir.display()))?;
    let journal_dir = scratch.path().join(DEFAULT_JOURNAL_DIR);
    std::fs::create_dir_all(&journal_dir)
        .map_err(|err| format!("create {}: {err}", journal_dir.display()))?;
    let copy = journal_dir.join(JOURNAL_FILE_NAME);
    std::fs::copy(journal_path, &copy).map_err(|err| {
        format!(
            "copy {} to {}: {err}",
            journal_path.display(),
            copy.display()
        )
    })?;
    let report = assemble_with(scratch.path(), run_dir, &AssembleOptions::default())
        .map_err(|err| err.to_string())?;
    if let Err(err) = scratch.close() {
        // The record is written; a scratch tree left behind is untidy, not a failure.
        tracing::warn!(run_dir = %run_dir.display(), error = %err, "salvage scratch tree could not be removed");
    }
    Ok(report)
}

#[cfg(test)]
mod tests;
