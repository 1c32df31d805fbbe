//! The session commands over a `FileBackend` directory: sessions, show, replay, fork, verify,
//! export, import.

use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use cuca::store_file::{ScanReport, Verdict};
use cuca::{
    parse_point_id, FileBackend, Message, MessageContentBlock, ReplayNote, ReplayTurn,
    SessionBackend, SessionEvent, SessionRecord, SessionReplay,
};
use serde_json::json;

use crate::error::CliError;
use crate::ui;

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
    let unlisted = report.skipped_runs - report.skipped.len() as u64;
    if unlisted > 0 {
        parts.push(format!("{unlisted} more skipped runs"));
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

/// A one-line, clipped rendering of `text`: newlines and tabs are escaped.
fn clip(text: &str) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == PREVIEW_CHARS {
            out.push('…');
            break;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    format!("\"{out}\"")
}

fn message_preview(message: &Message) -> String {
    format!("{}: {}", message.role.as_str(), clip(&message.text()))
}

/// What `cuca show` prints after the kind.
fn preview(event: &SessionEvent) -> String {
    match event {
        SessionEvent::SystemPrompt { text }
        | SessionEvent::Reasoning { text }
        | SessionEvent::Output { text } => clip(text),
        SessionEvent::Message(message) => message_preview(message),
        SessionEvent::ToolCall {
            id,
            name,
            arguments,
        } => format!("{name} ({id}) {}", clip(arguments)),
        SessionEvent::ToolResult {
            tool_call_id,
            content,
            is_error,
            exit_code,
            ..
        } => {
            let status = if *is_error { "error" } else { "ok" };
            let exit = exit_code.map_or_else(String::new, |code| format!(", exit {code}"));
            format!("{tool_call_id} {status}{exit} {}", clip(content))
        }
        SessionEvent::Latency { duration_ms } => format!("{duration_ms} ms"),
        SessionEvent::TokenUsage {
            prompt_tokens,
            completion_tokens,
        } => format!("{prompt_tokens} prompt, {completion_tokens} completion tokens"),
        SessionEvent::ModelSwap { from, to, reason } => {
            format!("{from} -> {to}: {}", clip(reason))
        }
        SessionEvent::Fork {
            from_point,
            to_session,
        } => format!("at {from_point} -> {to_session}"),
        _ => String::new(),
    }
}

/// `cuca show DIR SESSION`.
pub(crate) fn show(dir: &Path, session: &str, kinds: bool, as_json: bool) -> Result<(), CliError> {
    let backend = open_dir(dir)?;
    let records = load_records(&backend, session)?;
    let mut out = stdout();
    if kinds {
        if as_json {
            let mut counts = serde_json::Map::new();
            for kind in SessionEvent::KINDS {
                let n = records.iter().filter(|r| r.event.kind() == kind).count();
                if n > 0 {
                    counts.insert(kind.to_owned(), n.into());
                }
            }
            let row = json!({"session": session, "records": records.len(), "kinds": counts});
            writeln!(out, "{row}")?;
        } else {
            writeln!(
                out,
                "{session}: {} records: {}",
                records.len(),
                kinds_line(&records)
            )?;
        }
    } else {
        for record in &records {
            if as_json {
                let line = serde_json::to_string(record)
                    .map_err(|error| CliError::Failed(format!("encode record: {error}")))?;
                writeln!(out, "{line}")?;
            } else {
                writeln!(
                    out,
                    "{:>6}  {}  {:<12}  {}",
                    record.sequence,
                    format_ms(record.timestamp_ms),
                    record.event.kind(),
                    preview(&record.event)
                )?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// Consecutive blocks of one kind joined: a streamed answer arrives as many small blocks.
fn joined_blocks(blocks: &[MessageContentBlock]) -> Vec<(&'static str, String)> {
    let mut runs: Vec<(&'static str, String)> = Vec::new();
    for block in blocks {
        let (label, text) = match block {
            MessageContentBlock::Thinking { thinking } => ("reasoning", thinking.clone()),
            MessageContentBlock::Text { text } => ("output", text.clone()),
            MessageContentBlock::ToolCall {
                id,
                name,
                arguments,
            } => ("tool call", format!("{name} ({id}) {arguments}")),
            MessageContentBlock::ToolResult {
                tool_call_id,
                content,
                is_error,
            } => (
                "tool result",
                format!(
                    "{tool_call_id} {}: {content}",
                    if *is_error { "error" } else { "ok" }
                ),
            ),
            other => ("block", other.kind().to_owned()),
        };
        match runs.last_mut() {
            Some((last, joined)) if *last == label && matches!(label, "reasoning" | "output") => {
                joined.push_str(&text)
            }
            _ => runs.push((label, text)),
        }
    }
    runs
}

fn note_json(note: &ReplayNote) -> serde_json::Value {
    match note {
        ReplayNote::ModelSwap { from, to, reason } => {
            json!({"kind": "ModelSwap", "from": from, "to": to, "reason": reason})
        }
        ReplayNote::Fork {
            from_point,
            to_session,
        } => json!({"kind": "Fork", "from_point": from_point, "to_session": to_session}),
        ReplayNote::UnpairedLatency { duration_ms } => {
            json!({"kind": "UnpairedLatency", "duration_ms": duration_ms})
        }
        ReplayNote::UnpairedTokenUsage {
            prompt_tokens,
            completion_tokens,
        } => {
            json!({"kind": "UnpairedTokenUsage", "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens})
        }
        other => json!({"kind": format!("{other:?}")}),
    }
}

fn note_words(note: &ReplayNote) -> String {
    match note {
        ReplayNote::ModelSwap { from, to, reason } => {
            format!("model swap {from} -> {to}: {reason}")
        }
        ReplayNote::Fork {
            from_point,
            to_session,
        } => format!("fork at {from_point} -> {to_session}"),
        ReplayNote::UnpairedLatency { duration_ms } => {
            format!("latency {duration_ms} ms with no token usage after it")
        }
        ReplayNote::UnpairedTokenUsage {
            prompt_tokens,
            completion_tokens,
        } => format!(
            "token usage ({prompt_tokens} prompt, {completion_tokens} completion) with no latency before it"
        ),
        other => format!("{other:?}"),
    }
}

fn write_turn(
    out: &mut impl Write,
    turn_idx: usize,
    turn: &ReplayTurn,
    as_json: bool,
) -> Result<(), CliError> {
    let range = turn.sequence_range();
    if as_json {
        let completion = turn.completion().map(|c| {
            json!({"duration_ms": c.duration_ms, "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens})
        });
        let row = json!({
            "turn": turn_idx,
            "first_sequence": range.start(),
            "last_sequence": range.end(),
            "records": turn.n_records(),
            "complete": turn.is_complete(),
            "system_prompts": turn.system_prompts(),
            "messages": turn.messages(),
            "blocks": turn.blocks(),
            "completion": completion,
            "notes": turn.notes().iter().map(note_json).collect::<Vec<_>>(),
        });
        writeln!(out, "{row}")?;
        return Ok(());
    }
    let state = if turn.is_complete() {
        "complete"
    } else {
        "incomplete: no Latency/TokenUsage pair closes it"
    };
    writeln!(
        out,
        "Turn {turn_idx} (records {}..={}, {state})",
        range.start(),
        range.end()
    )?;
    for prompt in turn.system_prompts() {
        writeln!(out, "  system: {prompt}")?;
    }
    for message in turn.messages() {
        writeln!(out, "  {}: {}", message.role.as_str(), message.text())?;
    }
    for (label, text) in joined_blocks(turn.blocks()) {
        writeln!(out, "  {label}: {text}")?;
    }
    if let Some(c) = turn.completion() {
        writeln!(
            out,
            "  completion: {} ms, {} prompt tokens, {} completion tokens",
            c.duration_ms, c.prompt_tokens, c.completion_tokens
        )?;
    }
    for note in turn.notes() {
        writeln!(out, "  note: {}", note_words(note))?;
    }
    Ok(())
}

/// `cuca replay DIR SESSION [--turn N] [--at POINT]`.
pub(crate) fn replay(
    dir: &Path,
    session: &str,
    turn: Option<usize>,
    at: Option<&str>,
    as_json: bool,
) -> Result<(), CliError> {
    let backend = open_dir(dir)?;
    // Scan first: a missing session is a usage error (a backend replays it as empty), and a
    // recovered file gets its warning line.
    let report = scan_session(&backend, session)?;
    if report.verdict == Verdict::Recovered {
        ui::warn(&recovered_line(session, &report));
    }
    if !report.is_loadable() {
        // `into_records` turns the refused verdict into the error naming file and offset.
        return report.into_records().map(drop).map_err(CliError::from);
    }
    drop(report);
    let replay = SessionReplay::new(Arc::new(backend));
    let trajectory = match at {
        Some(point) => {
            let (point_session, _) = parse_point_id(point)?;
            if point_session != session {
                return Err(CliError::Usage(format!(
                    "--at {point:?} is a point of session {point_session:?}, not of {session:?}"
                )));
            }
            replay.load_at_point(point)?
        }
        None => replay.load(session)?,
    };
    let mut out = stdout();
    if !as_json {
        let usage = trajectory.usage();
        writeln!(
            out,
            "Session {session:?}: {} turns, {} records, {} blocks{}",
            usage.turns,
            usage.records,
            usage.blocks,
            at.map_or_else(String::new, |point| format!(" (prefix through {point})"))
        )?;
    }
    match turn {
        Some(turn_idx) => {
            let Some(one) = trajectory.turn(turn_idx) else {
                return Err(CliError::Usage(format!(
                    "session {session:?} has {} turns, so turn {turn_idx} does not exist (turns count from 0)",
                    trajectory.len()
                )));
            };
            write_turn(&mut out, turn_idx, one, as_json)?;
        }
        None => {
            for (turn_idx, one) in trajectory.turns().iter().enumerate() {
                write_turn(&mut out, turn_idx, one, as_json)?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// `cuca fork DIR POINT_ID`.
pub(crate) fn fork(dir: &Path, point_id: &str, as_json: bool) -> Result<(), CliError> {
    let (session, _) = parse_point_id(point_id)?;
    let backend = open_dir(dir)?;
    // A missing session is named as such before the backend is asked to fork it.
    scan_session(&backend, session)?;
    let new_id = backend.fork(session, point_id)?;
    let mut out = stdout();
    if as_json {
        writeln!(
            out,
            "{}",
            json!({"session": new_id, "from_point": point_id})
        )?;
    } else {
        writeln!(out, "{new_id}")?;
    }
    out.flush()?;
    Ok(())
}

/// The skipped runs and the findings of a report, one line each, capped as the report is.
fn report_lines(report: &ScanReport) -> Vec<String> {
    let mut lines = Vec::new();
    for run in &report.skipped {
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
    let unlisted = report.skipped_runs - report.skipped.len() as u64;
    if unlisted > 0 {
        lines.push(format!(
            "and {unlisted} more skipped runs ({} frames, {} bytes in all)",
            report.skipped_frames, report.skipped_bytes
        ));
    }
    for finding in &report.findings {
        lines.push(format!("finding: {finding}"));
    }
    let unlisted = report.findings_total - report.findings.len() as u64;
    if unlisted > 0 {
        lines.push(format!("and {unlisted} more findings"));
    }
    lines
}

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
            "frames": frame.frames,
            "reason": frame.reason.to_string(),
        })).collect::<Vec<_>>(),
        "skipped_runs": report.skipped_runs,
        "skipped_frames": report.skipped_frames,
        "findings": report.findings.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "findings_total": report.findings_total,
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
        for line in report_lines(&report) {
            writeln!(out, "  {line}")?;
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

/// `cuca export DIR SESSION --format jsonl`.
pub(crate) fn export(dir: &Path, session: &str) -> Result<(), CliError> {
    let backend = open_dir(dir)?;
    let records = load_records(&backend, session)?;
    let mut out = stdout();
    for record in &records {
        let line = serde_json::to_string(record)
            .map_err(|error| CliError::Failed(format!("encode record: {error}")))?;
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}

/// Reads a JSON Lines export whole, before anything is written. Its sequences must be those
/// of one session as the session log numbers it — 0, 1, 2, … in order — so an out-of-order,
/// duplicated or gapped line is refused, naming the first one.
fn read_jsonl(file: &Path) -> Result<Vec<SessionRecord>, CliError> {
    let reader: Box<dyn BufRead> = if file == Path::new("-") {
        Box::new(std::io::stdin().lock())
    } else {
        let opened = std::fs::File::open(file)
            .map_err(|error| CliError::Usage(format!("cannot open {}: {error}", file.display())))?;
        Box::new(std::io::BufReader::new(opened))
    };
    let mut records = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line =
            line.map_err(|error| CliError::Failed(format!("read {}: {error}", file.display())))?;
        if line.trim().is_empty() {
            continue;
        }
        let record: SessionRecord = serde_json::from_str(&line).map_err(|error| {
            CliError::Failed(format!(
                "{} line {}: not a SessionRecord: {error}",
                file.display(),
                i + 1
            ))
        })?;
        check_import_sequence(file, i + 1, records.len() as u64, record.sequence)?;
        records.push(record);
    }
    Ok(records)
}

/// The refusal of a line whose sequence is not `expected`, the number of records before it.
fn check_import_sequence(
    file: &Path,
    line: usize,
    expected: u64,
    sequence: u64,
) -> Result<(), CliError> {
    let what = if sequence == expected {
        return Ok(());
    } else if sequence < expected {
        // The lines before held 0..expected, so this one repeats one of them.
        format!("sequence {sequence} again (out of order or duplicated)")
    } else if expected == 0 {
        format!("sequence {sequence} first")
    } else if sequence == expected + 1 {
        format!(
            "sequence {sequence} after {} (sequence {expected} is missing)",
            expected - 1
        )
    } else {
        format!(
            "sequence {sequence} after {} (sequences {expected} to {} are missing)",
            expected - 1,
            sequence - 1
        )
    };
    Err(CliError::Failed(format!(
        "{} line {line}: {what}; import takes one session's records in order, numbered 0, 1, 2, … without gaps, as `cuca export` writes them",
        file.display()
    )))
}

/// `cuca import FILE.jsonl DIR SESSION`.
pub(crate) fn import(
    file: &Path,
    dir: &Path,
    session: &str,
    as_json: bool,
) -> Result<(), CliError> {
    // The id and the target are checked before the file is read, and the file is read whole
    // before anything is written: a refused import leaves no session behind.
    let backend = FileBackend::new(dir)?;
    let path: PathBuf = backend.session_path(session)?;
    let packed = backend.compacted_path(session)?;
    if std::fs::symlink_metadata(&path).is_ok() || std::fs::symlink_metadata(&packed).is_ok() {
        return Err(CliError::Usage(format!(
            "session {session:?} already exists in {} ({}); import writes new sessions only",
            dir.display(),
            path.display()
        )));
    }
    let records = read_jsonl(file)?;
    let n_records = records.len();
    // The check above is for a quick answer; this one is atomic: the file is made only if
    // no session of that id exists, and stays locked by this backend while it is filled.
    if !backend.create_session(session)? {
        return Err(CliError::Usage(format!(
            "session {session:?} already exists in {} ({}): another writer created it while the input was read; import writes new sessions only",
            dir.display(),
            path.display()
        )));
    }
    for record in records {
        backend.append(SessionRecord {
            session_id: session.to_owned(),
            ..record
        })?;
    }
    let bytes = backend.bytes_on_disk(session)?;
    let mut out = stdout();
    if as_json {
        writeln!(
            out,
            "{}",
            json!({"session": session, "records": n_records, "bytes": bytes})
        )?;
    } else {
        writeln!(
            out,
            "imported {n_records} records into session {session:?} ({bytes} bytes, {})",
            path.display()
        )?;
    }
    out.flush()?;
    Ok(())
}

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
    if ids.len() < PROGRESS_MIN_SESSIONS {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let mut out = stdout();
    let (mut before, mut after, mut n_compacted) = (0u64, 0u64, 0usize);
    for session in &ids {
        bar.set_message(format!("compacting {session}"));
        let compaction = backend.compact(session)?;
        bar.inc(1);
        if !compaction.already_compacted {
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
                    "path": compaction.path,
                })
            )?;
        } else if compaction.already_compacted {
            writeln!(
                out,
                "{session}: compacted already ({} records, {} bytes)",
                compaction.records, compaction.bytes_after
            )?;
        } else {
            writeln!(
                out,
                "{session}: {} records, {} -> {} bytes ({:.2}x)",
                compaction.records,
                compaction.bytes_before,
                compaction.bytes_after,
                ratio(compaction.bytes_after, compaction.bytes_before)
            )?;
        }
    }
    bar.finish_and_clear();
    if !as_json {
        writeln!(
            out,
            "{n_compacted} of {} sessions compacted: {before} -> {after} bytes ({:.2}x)",
            ids.len(),
            ratio(after, before)
        )?;
    }
    out.flush()?;
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
