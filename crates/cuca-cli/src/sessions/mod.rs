//! The session commands, one module per command (sessions, show, replay, fork, verify,
//! compact, export, import), and what they share. A directory store is read through
//! `FileBackend`'s own scans (damage reported byte by byte); any other store (PostgreSQL)
//! through the `SessionBackend` trait, where a session either loads or is refused whole.

use std::io::BufWriter;
use std::ops::ControlFlow;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use cuca::store_file::{ScanSummary, SkimmedRecord, Verdict};
use cuca::{FileBackend, PluginError, ReplayedRecord, SessionBackend, SessionEvent, SessionRecord};

use crate::error::CliError;
use crate::store::Store;
use crate::ui;
use crate::ui::count;

mod compact;
mod diff;
mod export;
mod export_html;
mod fork;
mod import;
mod list;
mod outside;
mod replay;
mod show;
mod verify;

pub(crate) use compact::compact;
pub(crate) use diff::diff;
pub(crate) use export::{export, ExportTo};
pub(crate) use fork::fork;
pub(crate) use import::import;
pub(crate) use list::{list, SortBy};
pub(crate) use replay::replay;
pub(crate) use show::show;
pub(crate) use verify::verify;

/// How many characters of a record's text `cuca show` prints.
const PREVIEW_CHARS: usize = 60;

/// The per-kind counts of `records`, in format order, zero counts left out:
/// `"SystemPrompt 1, Message 1, Reasoning 72, Output 2, Latency 1, TokenUsage 1"`.
pub fn kinds_line(records: &[SessionRecord]) -> String {
    let mut counts = [0u64; SessionEvent::KINDS.len()];
    for record in records {
        counts[record.event.kind_index()] += 1;
    }
    kinds_words(&counts)
}

/// [`kinds_line`] from per-kind counts indexed by `SessionEvent::kind_index`.
fn kinds_words(counts: &[u64; SessionEvent::KINDS.len()]) -> String {
    SessionEvent::KINDS
        .iter()
        .zip(counts.iter().copied())
        .filter(|(_, n)| *n > 0)
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The parent session and point a fork id names (the contract's rule, re-exported).
pub use cuca::fork_parent;

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

/// The usage error for a session `backend` does not hold.
fn not_found(backend: &FileBackend, session: &str) -> CliError {
    let exists = |id: &str| {
        backend.session_path(id).is_ok_and(|path| path.is_file())
            || backend.compacted_path(id).is_ok_and(|path| path.is_file())
    };
    missing(&backend.dir().display().to_string(), session, exists)
}

/// The usage error for a session the store `described` does not hold. A point id given as a
/// session (`demo:1`, where `demo` is a session: `exists` says) is told as a point, with the
/// commands that take one.
fn missing(described: &str, session: &str, exists: impl Fn(&str) -> bool) -> CliError {
    if let Ok((base, sequence)) = cuca::parse_point_id(session) {
        if exists(base) {
            let base_shown = crate::term::line(base);
            let point = crate::term::line(session);
            return CliError::Usage(format!(
                "{point} is a point (record {sequence} of session {base:?}), not a session: `cuca show STORE {base_shown}` shows the session, `cuca replay STORE {base_shown} --at {point}` the records through the point, `cuca fork STORE {point}` branches there"
            ));
        }
    }
    CliError::Usage(format!(
        "session {session:?} not found in {described} (`cuca sessions STORE` lists them)"
    ))
}

/// One record of a first pass: skimmed from a file (its text left in the read buffer), or
/// read whole from another store.
pub(crate) enum Seen<'r, 'a> {
    /// From a directory's scan.
    Skimmed(&'r SkimmedRecord<'a>),
    /// From any other store.
    Read(&'r ReplayedRecord<'a>),
}

impl Seen<'_, '_> {
    pub(crate) fn sequence(&self) -> u64 {
        match self {
            Seen::Skimmed(record) => record.sequence,
            Seen::Read(record) => record.sequence,
        }
    }

    pub(crate) fn kind_index(&self) -> usize {
        match self {
            Seen::Skimmed(record) => record.kind_index(),
            Seen::Read(record) => record.event.kind_index(),
        }
    }

    /// The event with its texts left out where the store allows (what segmenting needs).
    pub(crate) fn hollow_event(&self) -> SessionEvent {
        match self {
            Seen::Skimmed(record) => record.hollow_event(),
            Seen::Read(record) => record.event.clone(),
        }
    }
}

/// The first pass of a reading command over any store: every record of a session that must
/// exist to `visit`, before anything is printed; returns how many there are. A directory's
/// recovered damage gets its warning line and refused damage is the error naming its file
/// and offset; another store's session loads whole or is the store's error.
fn first_pass(
    store: &Store,
    session: &str,
    visit: &mut dyn FnMut(Seen<'_, '_>) -> Result<(), PluginError>,
) -> Result<u64, CliError> {
    if let Some(file) = store.file() {
        let summary = scan_checked(file, session, &mut |record| visit(Seen::Skimmed(&record)))?;
        return Ok(summary.n_records);
    }
    let mut n_records = 0u64;
    store.backend().replay_each(session, &mut |record| {
        n_records += 1;
        visit(Seen::Read(&record))
    })?;
    if n_records == 0 {
        let ids = store.backend().sessions().unwrap_or_default();
        return Err(missing(store.describe(), session, |id| {
            ids.iter().any(|known| known == id)
        }));
    }
    Ok(n_records)
}

/// Fails with a usage error unless `session` has a file (live or compacted) in `backend`.
fn require_session(backend: &FileBackend, session: &str) -> Result<(), CliError> {
    if backend.session_path(session)?.is_file() || backend.compacted_path(session)?.is_file() {
        Ok(())
    } else {
        Err(not_found(backend, session))
    }
}

/// Scans a session that must exist, handing each good record to `visit` with its text left
/// in the read buffer (a first pass checks and counts, so it allocates nothing per record):
/// a missing session is a usage error, any other failure is passed on.
fn scan_each(
    backend: &FileBackend,
    session: &str,
    visit: &mut dyn FnMut(SkimmedRecord<'_>) -> Result<(), PluginError>,
) -> Result<ScanSummary, CliError> {
    backend
        .skim_each(session, visit)
        .map_err(|error| match error {
            PluginError::NotFound { .. } => not_found(backend, session),
            other => other.into(),
        })
}

/// The first pass of a reading command: the whole session scanned, each record to `visit`,
/// before anything is printed. Recovered damage gets its warning line; a session a load
/// refuses is the error naming its file and offset, so the command prints nothing on stdout.
fn scan_checked(
    backend: &FileBackend,
    session: &str,
    visit: &mut dyn FnMut(SkimmedRecord<'_>) -> Result<(), PluginError>,
) -> Result<ScanSummary, CliError> {
    let summary = scan_each(backend, session, visit)?;
    match &summary.verdict {
        Verdict::Recovered => ui::warn(&recovered_line(session, &summary)),
        Verdict::Refused { offset, reason } => {
            return Err(PluginError::Corrupt {
                path: summary.path.clone(),
                offset: *offset,
                message: reason.clone(),
            }
            .into())
        }
        _ => {}
    }
    Ok(summary)
}

/// The second pass: the first `limit` records of `session` (what the first pass counted, so
/// records a live writer appends in between are left out) to `visit`, one at a time, until
/// it breaks.
fn each_record(
    backend: &dyn SessionBackend,
    session: &str,
    limit: u64,
    visit: &mut dyn FnMut(ReplayedRecord<'_>) -> Result<ControlFlow<()>, CliError>,
) -> Result<(), CliError> {
    let mut seen = 0u64;
    // The backend stops on any error from its visitor and hands back a `PluginError`: the
    // CLI's own error (a closed stdout) waits here, and the end of what is wanted stops the
    // read early with a placeholder error that is dropped.
    let mut failed: Option<CliError> = None;
    let mut done = false;
    let read = backend.replay_each(session, &mut |record| {
        if seen == limit {
            done = true;
            return Err(PluginError::validation(
                "limit",
                "the records counted were read",
            ));
        }
        seen += 1;
        match visit(record) {
            Ok(ControlFlow::Continue(())) => Ok(()),
            Ok(ControlFlow::Break(())) => {
                done = true;
                Err(PluginError::validation(
                    "limit",
                    "the visitor has what it wants",
                ))
            }
            Err(error) => {
                failed = Some(error);
                Err(PluginError::validation("visit", "stopped"))
            }
        }
    });
    if let Some(error) = failed {
        return Err(error);
    }
    match read {
        Err(_) if done => Ok(()),
        other => Ok(other?),
    }
}

/// One session's scan as a row of `verify` or `sessions`.
enum Scanned {
    /// The file was read to its end: the scan's findings.
    Read(ScanSummary),
    /// A session of a store that is not a directory: it loads whole (`refused: None`) or the
    /// store refuses it with the reason.
    Stored {
        /// Records read (all of them when it loaded).
        n_records: u64,
        /// The bytes of its stored records, as the store counts them ([`Store::stored_bytes`]).
        bytes: u64,
        /// Why the store refused it.
        refused: Option<String>,
    },
    /// The file could not be read through (a damaged gzip stream, an I/O error): a refused
    /// row, not a failure of the whole directory.
    Unreadable {
        /// The file that failed.
        path: std::path::PathBuf,
        /// Records read before it failed.
        n_records: u64,
        /// The error, in words.
        reason: String,
    },
}

impl Scanned {
    fn verdict_word(&self) -> &'static str {
        match self {
            Scanned::Read(summary) => verdict_word(&summary.verdict),
            Scanned::Stored { refused: None, .. } => "clean",
            Scanned::Stored { .. } | Scanned::Unreadable { .. } => "refused",
        }
    }

    fn n_records(&self) -> u64 {
        match self {
            Scanned::Read(summary) => summary.n_records,
            Scanned::Stored { n_records, .. } | Scanned::Unreadable { n_records, .. } => *n_records,
        }
    }

    fn file_len(&self) -> u64 {
        match self {
            Scanned::Read(summary) => summary.file_len,
            Scanned::Stored { bytes, .. } => *bytes,
            Scanned::Unreadable { .. } => 0,
        }
    }
}

/// Scans one session of a directory listing, each record to `visit`: a file that cannot be
/// read through is an [`Scanned::Unreadable`] row; a session that is not there is an error.
fn scan_row(
    backend: &FileBackend,
    session: &str,
    visit: &mut dyn FnMut(ReplayedRecord<'_>),
) -> Result<Scanned, CliError> {
    let mut n_records = 0u64;
    let result = backend.verify_each(session, &mut |record| {
        n_records += 1;
        visit(record);
        Ok(())
    });
    scanned(backend, session, result, n_records)
}

/// [`scan_row`] for a store that is not a directory: the session read whole through the
/// trait, each record to `visit`; a session the store refuses is a refused row. `bytes` is
/// its size as the store counts it.
fn stored_row(
    backend: &dyn SessionBackend,
    session: &str,
    bytes: u64,
    visit: &mut dyn FnMut(ReplayedRecord<'_>),
) -> Scanned {
    let mut n_records = 0u64;
    let result = backend.replay_each(session, &mut |record| {
        n_records += 1;
        visit(record);
        Ok(())
    });
    Scanned::Stored {
        n_records,
        bytes,
        refused: result.err().map(|error| error.to_string()),
    }
}

/// [`scan_row`] for a caller that only counts: the records are skimmed, their text left in
/// the read buffer, so a scan allocates nothing per record.
fn skim_row(
    backend: &FileBackend,
    session: &str,
    see: &mut dyn FnMut(&SkimmedRecord<'_>),
) -> Result<Scanned, CliError> {
    let mut n_records = 0u64;
    let result = backend.skim_each(session, &mut |record| {
        n_records += 1;
        see(&record);
        Ok(())
    });
    scanned(backend, session, result, n_records)
}

/// The row of a scan that ended with `result` after `n_records` good records.
fn scanned(
    backend: &FileBackend,
    session: &str,
    result: Result<ScanSummary, PluginError>,
    n_records: u64,
) -> Result<Scanned, CliError> {
    match result {
        Ok(summary) => Ok(Scanned::Read(summary)),
        Err(PluginError::NotFound { .. }) => Err(not_found(backend, session)),
        Err(error @ PluginError::Validation { .. }) => Err(error.into()),
        Err(error) => {
            let packed = backend.compacted_path(session)?;
            let path = if backend.session_path(session)?.is_file() || !packed.is_file() {
                backend.session_path(session)?
            } else {
                packed
            };
            Ok(Scanned::Unreadable {
                path,
                n_records,
                reason: error.to_string(),
            })
        }
    }
}

fn recovered_line(session: &str, summary: &ScanSummary) -> String {
    format!(
        "session {session:?} is damaged but loadable: {}",
        damage_words(summary)
    )
}

/// What the damage of a loadable file means, and no more than is known: skipped frames
/// whose neighbours continue the sequence lost nothing, but a torn tail is what a crash
/// mid-append leaves (no acknowledged record lost) and also what a copy cut short leaves
/// (everything after it lost), and the bytes cannot tell the two apart.
fn damage_words(summary: &ScanSummary) -> String {
    let mut parts = Vec::new();
    for frame in &summary.skipped {
        parts.push(format!(
            "skipped frame at byte {} ({} bytes: {}); {}",
            frame.offset,
            frame.len,
            frame.reason,
            skipped_meaning(summary, frame)
        ));
    }
    let unlisted = summary.skipped_runs - summary.skipped.len() as u64;
    if unlisted > 0 {
        parts.push(format!("{unlisted} more skipped runs"));
    }
    if summary.torn_tail_bytes > 0 {
        parts.push(format!(
            "torn tail of {} bytes at byte {}: if a crash mid-append left it, no acknowledged record was lost; if the file was cut short (a partial copy), records after byte {} are missing",
            summary.torn_tail_bytes,
            summary.file_len - summary.torn_tail_bytes,
            summary.file_len - summary.torn_tail_bytes
        ));
    }
    parts.join("; ")
}

/// What one skipped run of a loadable file means. The scan lets a file with a damaged run
/// load only when a record after the run continues the sequence across it, when the run holds
/// only sealed torn frames (appends that never completed), or, after the last record, when it
/// holds only sealed torn frames and zero bytes (v2) — or anything at all in a v1 file, whose
/// seal (a lone `0x00`) cannot be told from a damaged last frame (so the report never claims
/// the sequence "continues across" a run that nothing follows).
fn skipped_meaning(summary: &ScanSummary, frame: &cuca::store_file::SkippedFrame) -> &'static str {
    // A run ends at its last frame's terminator; when nothing but a torn tail follows that,
    // no good record comes after it.
    let end = frame.offset.saturating_add(frame.len).saturating_add(1);
    let last = end >= summary.file_len.saturating_sub(summary.torn_tail_bytes);
    if frame.sealed == frame.frames {
        "it holds only sealed torn frames: appends that never completed, so no acknowledged record is missing there"
    } else if !last {
        "the sequence continues across it, so no record is missing there"
    } else if summary.version == Some(cuca::store_file::VERSION_1) {
        "no record follows it, at the end of a v1 file: it is either an append torn and sealed (never acknowledged, nothing lost) or the last record, damaged and lost; v1 cannot tell which"
    } else {
        "no record follows it and it holds sealed torn frames and zero bytes: appends that never completed, or data a power cut kept from the disk (records written after the last sync may be lost there)"
    }
}

/// One record as a JSON line: the `SessionRecord` serde_json writes (a `ReplayedRecord`
/// has the same fields in the same order).
fn write_json_line(
    out: &mut impl std::io::Write,
    record: &ReplayedRecord<'_>,
) -> Result<(), CliError> {
    serde_json::to_writer(&mut *out, record).map_err(|error| {
        if error.is_io() {
            CliError::from(std::io::Error::from(error))
        } else {
            CliError::Failed(format!("encode record: {error}"))
        }
    })?;
    out.write_all(b"\n")?;
    Ok(())
}

pub(crate) fn stdout() -> BufWriter<std::io::StdoutLock<'static>> {
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
