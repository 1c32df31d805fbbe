//! `cuca verify DIR [SESSION…]`: scan session files and report damage.

use std::io::Write;
use std::path::Path;

use cuca::store_file::{ScanSummary, Verdict};
use cuca::SessionBackend;
use serde_json::json;

use super::{
    count, open_dir, recovered_line, require_session, skim_row, stdout, Scanned,
    PROGRESS_MIN_SESSIONS,
};
use crate::error::CliError;
use crate::term::line;
use crate::ui;

fn report_json(session: &str, scanned: &Scanned) -> serde_json::Value {
    match scanned {
        Scanned::Read(summary) => {
            let (refused_at, refused_reason) = match &summary.verdict {
                Verdict::Refused { offset, reason } => (Some(*offset), Some(reason.clone())),
                _ => (None, None),
            };
            json!({
                "session": session,
                "path": summary.path,
                "verdict": scanned.verdict_word(),
                "records": summary.n_records,
                "bytes": summary.file_len,
                "skipped": summary.skipped.iter().map(|frame| json!({
                    "offset": frame.offset,
                    "len": frame.len,
                    "frames": frame.frames,
                    "reason": frame.reason.to_string(),
                })).collect::<Vec<_>>(),
                "skipped_runs": summary.skipped_runs,
                "skipped_frames": summary.skipped_frames,
                "findings": summary.findings.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "findings_total": summary.findings_total,
                "torn_tail_bytes": summary.torn_tail_bytes,
                "refused_at": refused_at,
                "refused_reason": refused_reason,
            })
        }
        Scanned::Unreadable {
            path,
            n_records,
            reason,
        } => json!({
            "session": session,
            "path": path,
            "verdict": "refused",
            "records": n_records,
            "bytes": 0,
            "skipped": [],
            "skipped_runs": 0,
            "skipped_frames": 0,
            "findings": [],
            "findings_total": 0,
            "torn_tail_bytes": 0,
            "refused_at": null,
            "refused_reason": reason,
        }),
    }
}

fn write_report(out: &mut impl Write, session: &str, scanned: &Scanned) -> Result<(), CliError> {
    writeln!(
        out,
        "{}: {} ({}, {} bytes)",
        line(session),
        scanned.verdict_word(),
        count(scanned.n_records(), "record", "records"),
        scanned.file_len()
    )?;
    let summary = match scanned {
        Scanned::Read(summary) => summary,
        Scanned::Unreadable { reason, .. } => {
            writeln!(out, "  refused: cannot be read through: {}", line(reason))?;
            return Ok(());
        }
    };
    for report_line in report_lines(summary) {
        writeln!(out, "  {}", line(&report_line))?;
    }
    if summary.torn_tail_bytes > 0 {
        writeln!(
            out,
            "  torn tail: {} bytes at byte {} (a crash mid-append, or a copy cut short)",
            summary.torn_tail_bytes,
            summary.file_len - summary.torn_tail_bytes
        )?;
    }
    if let Verdict::Refused { offset, reason } = &summary.verdict {
        writeln!(out, "  refused at byte {offset}: {}", line(reason))?;
    }
    Ok(())
}

/// The skipped runs and the findings of a scan, one line each, capped as the scan is.
fn report_lines(summary: &ScanSummary) -> Vec<String> {
    let mut lines = Vec::new();
    for run in &summary.skipped {
        lines.push(if run.frames == 1 {
            format!(
                "skipped frame at byte {} ({} bytes): {}",
                run.offset, run.len, run.reason
            )
        } else {
            format!(
                "skipped {} frames at byte {} ({} bytes; the first: {})",
                run.frames, run.offset, run.len, run.reason
            )
        });
    }
    let unlisted = summary.skipped_runs - summary.skipped.len() as u64;
    if unlisted > 0 {
        lines.push(format!(
            "and {unlisted} more skipped runs ({} frames, {} bytes in all)",
            summary.skipped_frames, summary.skipped_bytes
        ));
    }
    for finding in &summary.findings {
        lines.push(format!("finding: {finding}"));
    }
    let unlisted = summary.findings_total - summary.findings.len() as u64;
    if unlisted > 0 {
        lines.push(format!("and {unlisted} more findings"));
    }
    lines
}

/// `cuca verify DIR [SESSION…]`.
pub(crate) fn verify(dir: &Path, named: &[String], as_json: bool) -> Result<(), CliError> {
    let backend = open_dir(dir)?;
    let ids = if named.is_empty() {
        backend.sessions()?
    } else {
        // Every name is checked before any scan, so a typo fails fast and alone.
        for session in named {
            require_session(&backend, session)?;
        }
        named.to_vec()
    };
    let bar = ui::progress(ids.len() as u64, "verifying");
    if ids.len() < PROGRESS_MIN_SESSIONS {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let mut out = stdout();
    let (mut clean, mut recovered, mut refused, mut n_records, mut n_bytes) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    for session in &ids {
        bar.set_message(format!("verifying {}", line(session)));
        // Records are counted by the scan and kept by no one: memory is one read chunk,
        // whatever the session's length.
        let scanned = skim_row(&backend, session)?;
        bar.inc(1);
        n_records += scanned.n_records();
        n_bytes += scanned.file_len();
        match &scanned {
            Scanned::Read(summary) if summary.verdict == Verdict::Clean => clean += 1,
            Scanned::Read(summary) if summary.verdict == Verdict::Recovered => {
                recovered += 1;
                bar.suspend(|| ui::warn(&recovered_line(session, summary)));
            }
            _ => refused += 1,
        }
        if as_json {
            writeln!(out, "{}", report_json(session, &scanned))?;
        } else {
            write_report(&mut out, session, &scanned)?;
        }
    }
    bar.finish_and_clear();
    if !as_json {
        writeln!(
            out,
            "{}, {}, {n_bytes} bytes: {clean} clean, {recovered} recovered (loadable), {refused} refused",
            count(ids.len() as u64, "session", "sessions"),
            count(n_records, "record", "records"),
        )?;
    }
    out.flush()?;
    if refused > 0 {
        return Err(CliError::Failed(format!(
            "{refused} of {} in {} {} damaged where a load refuses (see the lines above)",
            count(ids.len() as u64, "session", "sessions"),
            dir.display(),
            if refused == 1 { "is" } else { "are" }
        )));
    }
    Ok(())
}
