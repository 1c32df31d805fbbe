//! `cuca verify DIR [SESSION…]`: scan session files and report damage.

use std::io::Write;
use std::path::Path;

use cuca::store_file::{ScanReport, Verdict};
use cuca::SessionBackend;
use serde_json::json;

use super::{open_dir, recovered_line, scan_session, stdout, verdict_word, PROGRESS_MIN_SESSIONS};
use crate::error::CliError;
use crate::ui;

fn report_json(session: &str, report: &ScanReport) -> serde_json::Value {
    let (refused_at, refused_reason) = match &report.verdict {
        Verdict::Refused { offset, reason } => (Some(*offset), Some(reason.clone())),
        _ => (None, None),
    };
    json!({
        "session": session,
        "path": report.path,
        "verdict": verdict_word(&report.verdict),
        "records": report.records.len(),
        "bytes": report.file_len,
        "skipped": report.skipped.iter().map(|frame| json!({
            "offset": frame.offset,
            "len": frame.len,
            "reason": frame.reason.to_string(),
        })).collect::<Vec<_>>(),
        "torn_tail_bytes": report.torn_tail_bytes,
        "refused_at": refused_at,
        "refused_reason": refused_reason,
    })
}

/// `cuca verify DIR [SESSION…]`.
pub(crate) fn verify(dir: &Path, named: &[String], as_json: bool) -> Result<(), CliError> {
    let backend = open_dir(dir)?;
    let ids = if named.is_empty() {
        backend.sessions()?
    } else {
        // Every name is checked before any scan, so a typo fails fast and alone.
        for session in named {
            let path = backend.session_path(session)?;
            if !path.is_file() && !backend.compacted_path(session)?.is_file() {
                return Err(CliError::Usage(format!(
                    "session {session:?} not found in {} (no file {})",
                    dir.display(),
                    path.display()
                )));
            }
        }
        named.to_vec()
    };
    let bar = ui::progress(ids.len() as u64, "verifying");
    if ids.len() < PROGRESS_MIN_SESSIONS {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let mut out = stdout();
    let (mut clean, mut recovered, mut refused, mut n_records, mut n_bytes) = (0, 0, 0, 0, 0);
    for session in &ids {
        bar.set_message(format!("verifying {session}"));
        let report = scan_session(&backend, session)?;
        bar.inc(1);
        n_records += report.records.len();
        n_bytes += report.file_len;
        match &report.verdict {
            Verdict::Clean => clean += 1,
            Verdict::Recovered => {
                recovered += 1;
                bar.suspend(|| ui::warn(&recovered_line(session, &report)));
            }
            _ => refused += 1,
        }
        if as_json {
            writeln!(out, "{}", report_json(session, &report))?;
            continue;
        }
        writeln!(
            out,
            "{session}: {} ({} records, {} bytes)",
            verdict_word(&report.verdict),
            report.records.len(),
            report.file_len
        )?;
        for frame in &report.skipped {
            writeln!(
                out,
                "  skipped frame at byte {} ({} bytes): {}",
                frame.offset, frame.len, frame.reason
            )?;
        }
        if report.torn_tail_bytes > 0 {
            writeln!(
                out,
                "  torn tail: {} bytes at byte {}",
                report.torn_tail_bytes,
                report.file_len - report.torn_tail_bytes
            )?;
        }
        if let Verdict::Refused { offset, reason } = &report.verdict {
            writeln!(out, "  refused at byte {offset}: {reason}")?;
        }
    }
    bar.finish_and_clear();
    if !as_json {
        writeln!(
            out,
            "{} sessions, {n_records} records, {n_bytes} bytes: {clean} clean, {recovered} recovered (loadable, nothing lost), {refused} refused",
            ids.len()
        )?;
    }
    out.flush()?;
    if refused > 0 {
        return Err(CliError::Failed(format!(
            "{refused} of {} sessions in {} are damaged where a load refuses (see the lines above)",
            ids.len(),
            dir.display()
        )));
    }
    Ok(())
}
