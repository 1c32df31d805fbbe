//! `cuca repair DIR SESSION`: accepts a damaged session's loss deliberately, through
//! `FileBackend::repair` (a new file of the good records; the damaged one kept aside).

use std::io::{BufWriter, Write};
use std::path::Path;

use cuca::store_file::Repair;
use cuca::FileBackend;
use serde_json::json;

use crate::error::CliError;

/// How many dropped records `cuca repair` names one by one; the rest are counted.
const MAX_NAMED: usize = 20;

/// `cuca repair DIR SESSION`.
pub(crate) fn repair(dir: &Path, session: &str, as_json: bool) -> Result<(), CliError> {
    if !dir.is_dir() {
        return Err(CliError::Usage(format!(
            "{} is not a directory; give the directory that holds the .cslog files",
            dir.display()
        )));
    }
    let backend = FileBackend::new(dir)?;
    let repaired = backend.repair(session).map_err(|error| match error {
        cuca::PluginError::NotFound { .. } => CliError::Usage(format!(
            "session {session:?} not found in {} (`cuca sessions {}` lists them)",
            dir.display(),
            dir.display()
        )),
        other => other.into(),
    })?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    match (&repaired, as_json) {
        (None, true) => writeln!(out, "{}", json!({"session": session, "repaired": false}))?,
        (None, false) => writeln!(
            out,
            "{session}: clean, nothing to drop; the file is left as it is"
        )?,
        (Some(repair), true) => writeln!(out, "{}", repair_json(session, repair))?,
        (Some(repair), false) => {
            for line in repair_lines(session, repair) {
                writeln!(out, "{line}")?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// What `cuca repair` prints: what was kept, where the damaged file is, what was dropped.
fn repair_lines(session: &str, repair: &Repair) -> Vec<String> {
    let mut lines = vec![format!(
        "{session}: wrote {} with {} records; the damaged file is kept as {}",
        repair.path.display(),
        repair.records_kept,
        repair.kept_aside.display()
    )];
    for run in &repair.skipped {
        let frames = if run.frames == 1 {
            "1 damaged frame".to_owned()
        } else {
            format!("{} damaged frames", run.frames)
        };
        lines.push(format!(
            "  dropped {frames} at byte {} ({} bytes): {}",
            run.offset, run.len, run.reason
        ));
    }
    let unlisted = repair.skipped_runs - repair.skipped.len() as u64;
    if unlisted > 0 {
        lines.push(format!(
            "  and {unlisted} more damaged runs ({} frames, {} bytes in all)",
            repair.skipped_frames, repair.skipped_bytes
        ));
    }
    if repair.torn_tail_bytes > 0 {
        lines.push(format!(
            "  dropped a torn tail of {} bytes",
            repair.torn_tail_bytes
        ));
    }
    for dropped in repair.dropped_records.iter().take(MAX_NAMED) {
        lines.push(format!(
            "  dropped record {session}:{} (after sequence {}: a sequence must increase)",
            dropped.sequence, dropped.after
        ));
    }
    if repair.dropped_records.len() > MAX_NAMED {
        lines.push(format!(
            "  and {} more records whose sequence did not increase",
            repair.dropped_records.len() - MAX_NAMED
        ));
    }
    lines
}

fn repair_json(session: &str, repair: &Repair) -> serde_json::Value {
    json!({
        "session": session,
        "repaired": true,
        "path": repair.path,
        "kept_aside": repair.kept_aside,
        "records_kept": repair.records_kept,
        "skipped": repair.skipped.iter().map(|run| json!({
            "offset": run.offset,
            "len": run.len,
            "frames": run.frames,
            "reason": run.reason.to_string(),
        })).collect::<Vec<_>>(),
        "skipped_runs": repair.skipped_runs,
        "skipped_frames": repair.skipped_frames,
        "skipped_bytes": repair.skipped_bytes,
        "torn_tail_bytes": repair.torn_tail_bytes,
        "dropped_records": repair.dropped_records.iter().map(|dropped| json!({
            "sequence": dropped.sequence,
            "after": dropped.after,
        })).collect::<Vec<_>>(),
    })
}
