//! `cuca compact DIR [SESSION…]`: gzip finished sessions.

use std::io::Write;
use std::path::Path;

use cuca::SessionBackend;
use serde_json::json;

use super::{count, open_dir, stdout};
use crate::error::CliError;
use crate::term::line;
use crate::ui;

/// `cuca compact DIR [SESSION…]`: gzips finished sessions into `{id}.cslog.gz`.
pub(crate) fn compact(dir: &Path, named: &[String], as_json: bool) -> Result<(), CliError> {
    let backend = open_dir(dir)?;
    let ids = if named.is_empty() {
        backend.sessions()?
    } else {
        for session in named {
            if !backend.session_path(session)?.is_file()
                && !backend.compacted_path(session)?.is_file()
            {
                return Err(CliError::Usage(format!(
                    "session {session:?} not found in {} (`cuca sessions {}` lists them)",
                    dir.display(),
                    dir.display()
                )));
            }
        }
        named.to_vec()
    };
    let bar = ui::progress(ids.len() as u64, "compacting");
    let mut out = stdout();
    let (mut before, mut after, mut n_compacted) = (0u64, 0u64, 0usize);
    let (mut refused, mut kept) = (0usize, 0usize);
    for session in &ids {
        bar.set_message(format!("compacting {}", line(session)));
        // One session refused (damaged, held by a writer) is reported on its line and the
        // rest are still compacted: the summary and the exit code say it.
        let compaction = match backend.compact_if_smaller(session) {
            Ok(compaction) => compaction,
            Err(error) => {
                bar.inc(1);
                refused += 1;
                let why = error.to_string();
                if as_json {
                    writeln!(out, "{}", json!({"session": session, "refused": why}))?;
                } else {
                    writeln!(out, "{}: refused: {}", line(session), line(&why))?;
                }
                continue;
            }
        };
        bar.inc(1);
        if compaction.kept_live {
            kept += 1;
        } else if !compaction.already_compacted {
            n_compacted += 1;
            before += compaction.bytes_before;
            after += compaction.bytes_after;
        }
        if as_json {
            writeln!(
                out,
                "{}",
                json!({
                    "session": session,
                    "records": compaction.records,
                    "bytes_before": compaction.bytes_before,
                    "bytes_after": compaction.bytes_after,
                    "already_compacted": compaction.already_compacted,
                    "kept_live": compaction.kept_live,
                    "path": compaction.path,
                })
            )?;
        } else if compaction.kept_live {
            writeln!(
                out,
                "{}: left as it is: gzip would grow it from {} to {} bytes",
                line(session),
                compaction.bytes_before,
                compaction.bytes_after
            )?;
        } else if compaction.already_compacted {
            writeln!(
                out,
                "{}: compacted already ({}, {} bytes)",
                line(session),
                count(compaction.records as u64, "record", "records"),
                compaction.bytes_after
            )?;
        } else {
            writeln!(
                out,
                "{}: {}, {} -> {} bytes ({:.2}x)",
                line(session),
                count(compaction.records as u64, "record", "records"),
                compaction.bytes_before,
                compaction.bytes_after,
                ratio(compaction.bytes_after, compaction.bytes_before)
            )?;
        }
    }
    bar.finish_and_clear();
    if !as_json {
        let left = if kept > 0 {
            format!(", {kept} left as they are (gzip would grow them)")
        } else {
            String::new()
        };
        writeln!(
            out,
            "{n_compacted} of {} compacted{left}, {refused} refused: {before} -> {after} bytes ({:.2}x)",
            count(ids.len() as u64, "session", "sessions"),
            ratio(after, before)
        )?;
    }
    out.flush()?;
    if refused > 0 {
        return Err(CliError::Failed(format!(
            "{refused} of {} in {} not compacted (see the lines above)",
            count(ids.len() as u64, "session", "sessions"),
            dir.display()
        )));
    }
    Ok(())
}

/// `part / whole`, and 1 for an empty whole.
fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        1.0
    } else {
        part as f64 / whole as f64
    }
}
