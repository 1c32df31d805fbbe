//! `cuca sessions DIR`: one row per session.

use std::io::Write;
use std::path::Path;

use cuca::{SessionBackend, SessionEvent};
use serde_json::json;

use super::{
    fork_parent, format_ms, open_dir, scan_session, stdout, verdict_word, PROGRESS_MIN_SESSIONS,
};
use crate::error::CliError;
use crate::ui;

/// `cuca sessions DIR`.
pub(crate) fn list(dir: &Path, as_json: bool) -> Result<(), CliError> {
    let backend = open_dir(dir)?;
    let ids = backend.sessions()?;
    let mut out = stdout();
    if !as_json {
        writeln!(
            out,
            "{:<28} {:>8} {:>10}  {:<24}  {:<24}  {:<9}  forks",
            "SESSION", "RECORDS", "BYTES", "FIRST", "LAST", "STATUS"
        )?;
    }
    let bar = ui::progress(ids.len() as u64, "scanning");
    if ids.len() < PROGRESS_MIN_SESSIONS {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    for id in &ids {
        let report = scan_session(&backend, id)?;
        bar.inc(1);
        let first = report.records.first().map(|r| r.timestamp_ms);
        let last = report.records.last().map(|r| r.timestamp_ms);
        let forks_taken: Vec<&str> = report
            .records
            .iter()
            .filter_map(|record| match &record.event {
                SessionEvent::Fork { to_session, .. } => Some(to_session.as_str()),
                _ => None,
            })
            .collect();
        let parent = fork_parent(id);
        let compacted = backend.is_compacted(id)?;
        if as_json {
            let row = json!({
                "session": id,
                "records": report.records.len(),
                "bytes": report.file_len,
                "first_ms": first,
                "last_ms": last,
                "first": first.map(format_ms),
                "last": last.map(format_ms),
                "status": verdict_word(&report.verdict),
                "compacted": compacted,
                "bytes_on_disk": backend.bytes_on_disk(id)?,
                "forked_from": parent.map(|(_, point)| point),
                "forks": forks_taken,
            });
            writeln!(out, "{row}")?;
        } else {
            let mut forks = Vec::new();
            if let Some((_, point)) = parent {
                forks.push(format!("forked from {point}"));
            }
            if !forks_taken.is_empty() {
                forks.push(format!("{} taken", forks_taken.len()));
            }
            let forks = if forks.is_empty() {
                "-".to_owned()
            } else {
                forks.join(", ")
            };
            writeln!(
                out,
                "{:<28} {:>8} {:>10}  {:<24}  {:<24}  {:<9}  {forks}",
                id,
                report.records.len(),
                report.file_len,
                first.map_or_else(|| "-".to_owned(), format_ms),
                last.map_or_else(|| "-".to_owned(), format_ms),
                if compacted {
                    format!("{}, gz", verdict_word(&report.verdict))
                } else {
                    verdict_word(&report.verdict).to_owned()
                },
            )?;
        }
    }
    bar.finish_and_clear();
    if !as_json {
        writeln!(out, "{} sessions in {}", ids.len(), dir.display())?;
    }
    out.flush()?;
    Ok(())
}
