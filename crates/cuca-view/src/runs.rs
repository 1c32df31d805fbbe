//! The journal-runs pages, from the journal's streaming record reader.

use std::path::Path;

use cuca_journal::record::{read_record, RecordSummary};

use crate::error::ViewError;

/// The file a run directory holds its assembled record in (what `cuca journal assemble`
/// writes and `cuca serve` serves).
pub const RECORD_FILE: &str = "replay.json.gz";

/// One row of the runs list: a run id and its summary, or why it could not be read.
#[derive(Debug)]
pub struct RunRow {
    /// The run's directory name.
    pub id: String,
    /// What its record holds, or the reader's refusal in words.
    pub summary: Result<RecordSummary, String>,
}

/// Every run under `dir` that has a record, by id.
pub fn list(dir: &Path) -> Result<Vec<RunRow>, ViewError> {
    let entries = std::fs::read_dir(dir).map_err(|error| ViewError::Run {
        run: dir.display().to_string(),
        reason: error.to_string(),
    })?;
    let mut rows = Vec::new();
    for entry in entries.flatten() {
        let Ok(id) = entry.file_name().into_string() else {
            continue;
        };
        let Some(record) = record_of(&entry.path()) else {
            continue;
        };
        rows.push(RunRow {
            summary: read_record(&record).map_err(|error| error.to_string()),
            id,
        });
    }
    rows.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(rows)
}

/// The record file of the run directory `run`, when `run` is a real directory (not a symlink)
/// holding a regular file of that name.
///
/// A symlinked run directory is refused as a symlinked session file is: following it would
/// show a record from anywhere on the disk under the runs directory's name. Regular files
/// only: a FIFO or a device named like a record would hang the read.
fn record_of(run: &Path) -> Option<std::path::PathBuf> {
    if !std::fs::symlink_metadata(run).is_ok_and(|m| m.is_dir()) {
        return None;
    }
    let record = run.join(RECORD_FILE);
    std::fs::symlink_metadata(&record)
        .is_ok_and(|m| m.is_file())
        .then_some(record)
}

/// The summary of run `id` under `dir`.
pub fn show(dir: &Path, id: &str) -> Result<RecordSummary, ViewError> {
    // A run id is one directory name: nothing that could climb out of the runs directory.
    if id.is_empty() || id == "." || id == ".." || id.contains(['/', '\\', '\0']) {
        return Err(ViewError::UnknownRun { run: id.to_owned() });
    }
    let Some(record) = record_of(&dir.join(id)) else {
        return Err(ViewError::UnknownRun { run: id.to_owned() });
    };
    read_record(&record).map_err(|error| ViewError::Run {
        run: id.to_owned(),
        reason: error.to_string(),
    })
}
