//! `cuca verify DIR [SESSION…]`: scan session files and report damage.

use std::io::Write;

use cuca::replay::{
    Ambiguity, AmbiguityCheck, PartialRequest, PartialRequestCheck, PartialRequestKind,
};
use cuca::store_file::{ScanSummary, SkimmedRecord, Verdict};
use cuca::SessionEvent;
use serde_json::json;

use super::{
    count, missing, recovered_line, require_session, skim_row, stdout, stored_row, Scanned,
};
use crate::error::CliError;
use crate::store::Store;
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
        Scanned::Stored {
            n_records,
            bytes,
            refused,
        } => json!({
            "session": session,
            "verdict": scanned.verdict_word(),
            "records": n_records,
            "bytes": bytes,
            "refused_reason": refused,
        }),
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
        Scanned::Stored { refused, .. } => {
            if let Some(reason) = refused {
                writeln!(out, "  refused: {}", line(reason))?;
            }
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

/// One line per pair of calls a replay cannot tell apart, so a session that cannot be
/// replayed says so instead of being called clean.
fn write_ambiguities(out: &mut impl Write, ambiguities: &[Ambiguity]) -> Result<(), CliError> {
    for ambiguity in ambiguities {
        writeln!(out, "  not replayable: {ambiguity}")?;
    }
    Ok(())
}

/// One line per request cut while it was written and never closed: one a call joined cannot
/// be replayed; one at the end is said as a call not recorded in full.
fn write_partial_requests(
    out: &mut impl Write,
    partial: &[PartialRequest],
) -> Result<(), CliError> {
    for request in partial {
        match request.why {
            PartialRequestKind::AtEnd => writeln!(out, "  partial request: {request}")?,
            _ => writeln!(out, "  not replayable: {request}")?,
        }
    }
    Ok(())
}

/// What a session's call records say about the calls themselves, beside the file's verdict:
/// a file can be clean while a call in it was cut short or could not be written whole, or
/// hold two requests a replay cannot tell apart, or a request cut while it was written.
#[derive(Debug, Default)]
struct Calls {
    /// The calls' positions and digests, for the replayability check.
    positions: AmbiguityCheck,
    /// The turns' request records, for requests cut while they were written.
    partial: PartialRequestCheck,
    /// Calls with a `CallIncomplete` record: their records do not hold the whole call.
    incomplete: u64,
    /// A `CallRequest` with no `CallFinish` after it, at the end of the session.
    open_at_end: bool,
    /// The current call has been counted as incomplete already (it may carry several marks).
    counted: bool,
}

impl Calls {
    /// A skimmed record of a file: its text left out but for what the checks read.
    fn see_skimmed(&mut self, record: &SkimmedRecord<'_>) {
        let sequence = record.sequence;
        match record.kind() {
            "RequestDigest" => self.see(
                sequence,
                &SessionEvent::RequestDigest {
                    sha256: record.request_digest().unwrap_or_default().to_owned(),
                },
            ),
            // The text borrowed from the read buffer, not copied into an event.
            "SystemPrompt" => record.each_text(|_, _, text| {
                self.partial.observe_system_prompt(sequence, text);
            }),
            _ => self.see(sequence, &record.hollow_event()),
        }
    }

    fn see(&mut self, sequence: u64, event: &SessionEvent) {
        self.partial.observe(sequence, event);
        let kind = event.kind();
        if matches!(kind, "CallRequest" | "RequestDigest") {
            self.positions.observe(event);
        }
        match kind {
            "CallIncomplete" if !self.counted => {
                self.incomplete += 1;
                self.counted = true;
            }
            "CallRequest" => {
                self.open_at_end = true;
                self.counted = false;
            }
            "CallFinish" => self.open_at_end = false,
            _ => {}
        }
    }

    fn write(&self, out: &mut impl Write) -> Result<(), CliError> {
        if self.incomplete > 0 {
            writeln!(
                out,
                "  incomplete: {} not recorded in full (cut short, or a record could not be written); `cuca replay` says why",
                count(self.incomplete, "call", "calls")
            )?;
        }
        if self.open_at_end {
            writeln!(
                out,
                "  open call at the end: a CallRequest with no CallFinish after it (a call in flight now, or its recorder stopped mid-call; cuca proxy closes it before the session's next call)"
            )?;
        }
        Ok(())
    }
}

/// `cuca verify DIR [SESSION…]`.
pub(crate) fn verify(store: &Store, named: &[String], as_json: bool) -> Result<(), CliError> {
    let all = store.backend().sessions()?;
    let ids = if named.is_empty() {
        all
    } else {
        // Every name is checked before any scan, so a typo fails fast and alone.
        for session in named {
            match store.file() {
                Some(backend) => require_session(backend, session)?,
                None if all.binary_search(session).is_err() => {
                    return Err(missing(store.describe(), session, |_| false))
                }
                None => {}
            }
        }
        named.to_vec()
    };
    let sizes = store.stored_bytes()?;
    let bar = ui::progress(ids.len() as u64, "verifying");
    let mut out = stdout();
    let (mut clean, mut recovered, mut refused, mut n_records, mut n_bytes) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut n_incomplete = 0u64;
    let mut not_replayable = 0u64;
    for session in &ids {
        bar.set_message(format!("verifying {}", line(session)));
        // Records are counted by the scan and kept by no one: memory is one read chunk,
        // whatever the session's length.
        let mut calls = Calls::default();
        let scanned = match store.file() {
            Some(backend) => skim_row(backend, session, &mut |record| calls.see_skimmed(record))?,
            None => {
                let bytes = sizes.as_ref().and_then(|sizes| sizes.get(session)).copied();
                stored_row(
                    store.backend(),
                    session,
                    bytes.unwrap_or(0),
                    &mut |record| {
                        calls.see(record.sequence, &record.event);
                    },
                )
            }
        };
        let ambiguities = std::mem::take(&mut calls.positions).finish();
        let partial = std::mem::take(&mut calls.partial).finish();
        let partial_at_end = partial
            .iter()
            .filter(|p| p.why == PartialRequestKind::AtEnd)
            .count() as u64;
        n_incomplete += calls.incomplete + u64::from(calls.open_at_end) + partial_at_end;
        let replayable = ambiguities.is_empty() && partial_at_end == partial.len() as u64;
        if !replayable {
            not_replayable += 1;
        }
        bar.inc(1);
        n_records += scanned.n_records();
        n_bytes += scanned.file_len();
        match &scanned {
            Scanned::Read(summary) if summary.verdict == Verdict::Clean => clean += 1,
            Scanned::Stored { refused: None, .. } => clean += 1,
            Scanned::Read(summary) if summary.verdict == Verdict::Recovered => {
                recovered += 1;
                bar.suspend(|| ui::warn(&recovered_line(session, summary)));
            }
            _ => refused += 1,
        }
        if as_json {
            let mut report = report_json(session, &scanned);
            report["incomplete_calls"] = json!(calls.incomplete);
            report["open_call_at_end"] = json!(calls.open_at_end);
            report["replayable"] = json!(replayable);
            report["partial_requests"] = partial
                .iter()
                .map(|p| {
                    json!({
                        "first_sequence": p.first_sequence,
                        "records": p.n_records,
                        "joined_call_sequence": match p.why {
                            PartialRequestKind::Joined { call_sequence } => Some(call_sequence),
                            _ => None,
                        },
                        "why": p.to_string(),
                    })
                })
                .collect();
            report["ambiguities"] = ambiguities
                .iter()
                .map(|a| {
                    json!({
                        "first_call": a.first_call,
                        "later_call": a.later_call,
                        "messages": a.messages,
                        "why": a.to_string(),
                    })
                })
                .collect();
            writeln!(out, "{report}")?;
        } else {
            write_report(&mut out, session, &scanned)?;
            calls.write(&mut out)?;
            write_ambiguities(&mut out, &ambiguities)?;
            write_partial_requests(&mut out, &partial)?;
        }
    }
    bar.finish_and_clear();
    if !as_json {
        writeln!(
            out,
            "{}, {}, {n_bytes} bytes: {clean} clean, {recovered} recovered (loadable), {refused} refused{}{}",
            count(ids.len() as u64, "session", "sessions"),
            count(n_records, "record", "records"),
            if n_incomplete == 0 {
                String::new()
            } else {
                format!(
                    "; {} not recorded in full (see the lines above)",
                    count(n_incomplete, "call", "calls")
                )
            },
            if not_replayable == 0 {
                String::new()
            } else {
                format!(
                    "; {} not replayable (see the lines above)",
                    count(not_replayable, "session", "sessions")
                )
            },
        )?;
    }
    out.flush()?;
    if refused > 0 {
        return Err(CliError::Failed(format!(
            "{refused} of {} in {} {} damaged where a load refuses (see the lines above)",
            count(ids.len() as u64, "session", "sessions"),
            store.describe(),
            if refused == 1 { "is" } else { "are" }
        )));
    }
    if not_replayable > 0 {
        return Err(CliError::Failed(format!(
            "{not_replayable} of {} in {} cannot be replayed call by call: two different requests at one conversation position, or a request cut while it was written that a call joined (see the lines above)",
            count(ids.len() as u64, "session", "sessions"),
            store.describe(),
        )));
    }
    Ok(())
}
