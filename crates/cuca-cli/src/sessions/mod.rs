//! The session commands over a `FileBackend` directory, one module per command (sessions,
//! show, replay, fork, verify, compact, export, import), and what they share.

use std::io::BufWriter;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use cuca::store_file::{ScanReport, Verdict};
use cuca::{parse_point_id, FileBackend, SessionEvent, SessionRecord};

use crate::error::CliError;
use crate::ui;

mod compact;
mod export;
mod fork;
mod import;
mod list;
mod replay;
mod show;
mod verify;

pub(crate) use compact::compact;
pub(crate) use export::export;
pub(crate) use fork::fork;
pub(crate) use import::import;
pub(crate) use list::list;
pub(crate) use replay::replay;
pub(crate) use show::show;
pub(crate) use verify::verify;

/// How many characters of a record's text `cuca show` prints.
const PREVIEW_CHARS: usize = 60;

/// Sessions at or above this count get a progress bar in `cuca verify` (on a terminal):
/// scanning a handful of files takes well under a second.
const PROGRESS_MIN_SESSIONS: usize = 8;

/// The per-kind counts of `records`, in format order, zero counts left out:
/// `"SystemPrompt 1, Message 1, Reasoning 72, Output 2, Latency 1, TokenUsage 1"`.
pub fn kinds_line(records: &[SessionRecord]) -> String {
    let mut counts = [0u64; SessionEvent::KINDS.len()];
    for record in records {
        counts[record.event.kind_index()] += 1;
    }
    SessionEvent::KINDS
        .iter()
        .zip(counts)
        .filter(|(_, n)| *n > 0)
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The parent session and point a fork id names, `("demo", "demo:1")` for
/// `"demo:fork:demo:1:0"`; `None` when `session_id` is not a fork id.
///
/// A fork id is `{session}:fork:{point}:{n}` with `{point}` = `{session}:{sequence}`, and the
/// parent may itself be a fork (and contain `:fork:`), so every `:fork:` is tried as the split
/// until the parts agree.
pub fn fork_parent(session_id: &str) -> Option<(&str, &str)> {
    let (rest, n) = session_id.rsplit_once(':')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    const MARK: &str = ":fork:";
    let mut from = 0;
    while let Some(found) = rest[from..].find(MARK) {
        let at = from + found;
        let parent = &rest[..at];
        let point = &rest[at + MARK.len()..];
        if let Ok((point_session, _)) = parse_point_id(point) {
            if point_session == parent {
                return Some((parent, point));
            }
        }
        from = at + 1;
    }
    None
}

/// `2026-11-29T17:23:41.123Z` for a record's `timestamp_ms`; the raw number when the instant
/// is past what RFC 3339 can write (year 9999).
pub(crate) fn format_ms(ms: u64) -> String {
    // 9999-12-31T23:59:59.999Z: humantime's formatter does not write five-digit years.
    const MAX_RFC3339_MS: u64 = 253_402_300_799_999;
    if ms > MAX_RFC3339_MS {
        return format!("{ms} ms");
    }
    match UNIX_EPOCH.checked_add(Duration::from_millis(ms)) {
        Some(time) => humantime::format_rfc3339_millis(time).to_string(),
        None => format!("{ms} ms"),
    }
}

/// A backend over `dir`, which must exist: `FileBackend::new` would create it, and a typo in
/// a directory name must not read as an empty store.
pub(crate) fn open_dir(dir: &Path) -> Result<FileBackend, CliError> {
    match std::fs::metadata(dir) {
        Ok(metadata) if metadata.is_dir() => Ok(FileBackend::new(dir)?),
        Ok(_) => Err(CliError::Usage(format!(
            "{} is not a directory; give the directory that holds the .cslog files",
            dir.display()
        ))),
        Err(error) => Err(CliError::Usage(format!(
            "directory {} cannot be read: {error}",
            dir.display()
        ))),
    }
}

/// The scan of a session that must exist in `backend`.
fn scan_session(backend: &FileBackend, session: &str) -> Result<ScanReport, CliError> {
    backend.verify(session).map_err(|error| match error {
        cuca::PluginError::NotFound { .. } => CliError::Usage(format!(
            "session {session:?} not found in {} (`cuca sessions {}` lists them)",
            backend.dir().display(),
            backend.dir().display()
        )),
        other => other.into(),
    })
}

/// The records a load of `session` returns, with a warning line when damage was recovered.
fn load_records(backend: &FileBackend, session: &str) -> Result<Vec<SessionRecord>, CliError> {
    let report = scan_session(backend, session)?;
    if report.verdict == Verdict::Recovered {
        ui::warn(&recovered_line(session, &report));
    }
    Ok(report.into_records()?)
}

fn recovered_line(session: &str, report: &ScanReport) -> String {
    format!(
        "session {session:?} was damaged but nothing recorded was lost: {}",
        damage_words(report)
    )
}

fn damage_words(report: &ScanReport) -> String {
    let mut parts = Vec::new();
    for frame in &report.skipped {
        parts.push(format!(
            "skipped frame at byte {} ({} bytes: {})",
            frame.offset, frame.len, frame.reason
        ));
    }
    if report.torn_tail_bytes > 0 {
        parts.push(format!(
            "torn tail of {} bytes at byte {}",
            report.torn_tail_bytes,
            report.file_len - report.torn_tail_bytes
        ));
    }
    parts.join("; ")
}

fn stdout() -> BufWriter<std::io::StdoutLock<'static>> {
    BufWriter::new(std::io::stdout().lock())
}

fn verdict_word(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::Clean => "clean",
        Verdict::Recovered => "recovered",
        Verdict::Refused { .. } => "refused",
        _ => "unknown",
    }
}
