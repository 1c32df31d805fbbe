//! Finds a source's transcripts and imports each into its session, resuming where the last
//! import stopped.

use std::collections::HashSet;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use cuca_events::{SessionBackend, SessionEvent};
use serde_json::{json, Value};

use crate::claude_code::ClaudeCode;
use crate::codex::Codex;
use crate::error::ImportError;
use crate::lines::{Line, Lines};
use crate::report::{Finding, FindingKind, ImportReport, SessionOutcome};
use crate::translate::{Emit, Out, Side, Translate};
use crate::writer::{key_hash, SessionWriter, IMPORT_WIRE, MESSAGES_WIRE};

/// The longest transcript line read, in bytes. Claude Code writes a pasted image into its
/// line as base64, so a line of several megabytes is ordinary; 64 MiB leaves room for many
/// while keeping one line (and its parsed form) the most an import holds in memory.
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 << 20;

/// How deep below the directory given transcripts are looked for: Claude Code's sub-agent
/// files are three levels down (`<project>/<session>/subagents/`), Codex's rollouts three
/// (`YYYY/MM/DD/`); the margin allows a directory one level up.
const MAX_DEPTH: usize = 6;

/// The agents whose transcripts can be imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Source {
    /// Claude Code: `~/.claude/projects/<dir>/<session-uuid>.jsonl`, sub-agents in
    /// `<session-uuid>/subagents/agent-<id>.jsonl`.
    ClaudeCode,
    /// Codex: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`.
    Codex,
}

impl Source {
    /// The source's name, which also starts every session id it imports.
    pub fn name(self) -> &'static str {
        match self {
            Source::ClaudeCode => "claude-code",
            Source::Codex => "codex",
        }
    }

    /// Where the agent keeps its transcripts, below the home directory.
    pub fn default_dir(self, home: &Path) -> PathBuf {
        match self {
            Source::ClaudeCode => home.join(".claude").join("projects"),
            Source::Codex => home.join(".codex").join("sessions"),
        }
    }
}

/// A transcript file and the session it becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transcript {
    /// The file.
    pub path: PathBuf,
    /// The cuca session id: `{source}-{transcript session id}`, and for a Claude Code
    /// sub-agent file `{parent}-agent-{agent id}`.
    pub session: String,
    /// The session it is a sub-agent of.
    pub parent: Option<String>,
}

/// The transcripts below `dir` (or `dir` itself, a file), parents before sub-agents, each
/// group in path order; a directory below that cannot be read is a finding.
pub fn transcripts(
    source: Source,
    dir: &Path,
    report: &mut ImportReport,
) -> Result<Vec<Transcript>, ImportError> {
    let mut files = Vec::new();
    if dir.is_file() {
        files.push(dir.to_path_buf());
    } else {
        let top = std::fs::read_dir(dir).map_err(|source| ImportError::Dir {
            path: dir.to_path_buf(),
            source,
        })?;
        walk(top, 1, &mut files, report);
    }
    let mut out: Vec<Transcript> = files
        .into_iter()
        .map(|path| transcript(source, path))
        .collect();
    out.sort_by(|a, b| (a.parent.is_some(), &a.path).cmp(&(b.parent.is_some(), &b.path)));
    Ok(out)
}

fn walk(
    entries: std::fs::ReadDir,
    depth: usize,
    files: &mut Vec<PathBuf>,
    report: &mut ImportReport,
) {
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() && depth < MAX_DEPTH {
            match std::fs::read_dir(&path) {
                Ok(inner) => walk(inner, depth + 1, files, report),
                Err(error) => report.findings.push(Finding {
                    file: path,
                    line: None,
                    kind: FindingKind::Io,
                    message: format!("cannot read the directory: {error}"),
                }),
            }
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "jsonl") {
            files.push(path);
        }
    }
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn transcript(source: Source, path: PathBuf) -> Transcript {
    let name = stem(&path);
    match source {
        Source::ClaudeCode => {
            let parent_dir = path.parent();
            let in_subagents = parent_dir
                .and_then(Path::file_name)
                .is_some_and(|n| n == "subagents");
            if in_subagents {
                let session = parent_dir
                    .and_then(Path::parent)
                    .and_then(Path::file_name)
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let parent = format!("claude-code-{session}");
                let agent = name.strip_prefix("agent-").unwrap_or(&name);
                Transcript {
                    session: format!("{parent}-agent-{agent}"),
                    parent: Some(parent),
                    path,
                }
            } else {
                Transcript {
                    session: format!("claude-code-{name}"),
                    parent: None,
                    path,
                }
            }
        }
        Source::Codex => {
            // `rollout-2025-09-12T10-11-12-<uuid>`: the uuid is Codex's session id.
            let id = match name.strip_prefix("rollout-") {
                Some(rest) if rest.len() > 36 && rest.is_char_boundary(rest.len() - 36) => {
                    rest[rest.len() - 36..].to_string()
                }
                _ => name,
            };
            Transcript {
                session: format!("codex-{id}"),
                parent: None,
                path,
            }
        }
    }
}

/// Imports every transcript of `source` below `dir` into `backend`.
///
/// Each transcript's session gets only the lines after the ones an earlier import read
/// (its resume marker says how far, and a fingerprint of that part); usage a call already
/// counted in another line or transcript is written as zero (the dedup ccusage does).
/// Lines that cannot be read are in the report, with file and line.
pub fn import(
    backend: &dyn SessionBackend,
    source: Source,
    dir: &Path,
    max_line_bytes: usize,
) -> Result<ImportReport, ImportError> {
    let mut report = ImportReport::default();
    let files = transcripts(source, dir, &mut report)?;
    let mut memory = seen_keys(backend, source)?;
    for file in &files {
        report.files += 1;
        let children: Vec<String> = files
            .iter()
            .filter(|f| f.parent.as_deref() == Some(file.session.as_str()))
            .map(|f| f.session.clone())
            .collect();
        import_file(
            backend,
            source,
            file,
            &children,
            max_line_bytes,
            &mut memory,
            &mut report,
        )?;
    }
    Ok(report)
}

/// What an import remembers across transcripts.
struct Memory {
    /// The hashes of the call keys seen (counted) so far.
    seen: HashSet<u64>,
    /// The sessions the store holds, listed once at the start (a listing per transcript would
    /// make an import of thousands of transcripts quadratic) and grown as sessions are made.
    known: HashSet<String>,
}

/// The store's sessions, and the call keys those of `source` already hold.
fn seen_keys(backend: &dyn SessionBackend, source: Source) -> Result<Memory, ImportError> {
    let mut seen = HashSet::new();
    let prefix = format!("{}-", source.name());
    let sessions = backend.sessions().map_err(|source| ImportError::Store {
        session: String::new(),
        source,
    })?;
    for session in sessions.iter().filter(|s| s.starts_with(&prefix)) {
        backend
            .replay_each(session, &mut |record| {
                if let SessionEvent::CallWire { format, wire } = &record.event {
                    if format == MESSAGES_WIRE {
                        if let Ok(value) = serde_json::from_str::<Value>(wire) {
                            if let Some(key) = value["dedup_key"].as_str() {
                                seen.insert(key_hash(key));
                            }
                        }
                    }
                }
                Ok(())
            })
            .map_err(|source| ImportError::Store {
                session: session.clone(),
                source,
            })?;
    }
    Ok(Memory {
        seen,
        known: sessions.into_iter().collect(),
    })
}

pub(crate) fn link(kind: &str, session: &str) -> SessionEvent {
    SessionEvent::CallWire {
        format: IMPORT_WIRE.into(),
        wire: json!({ "kind": kind, "session": session }).to_string(),
    }
}

/// Writes the link both ways: in the child, its parent; in the parent (if it exists), the
/// child.
fn link_parent(
    backend: &dyn SessionBackend,
    known: &HashSet<String>,
    child: &mut SessionWriter,
    parent: &str,
    ts: u64,
) -> Result<(), ImportError> {
    child.other(backend, ts, link("parent", parent))?;
    let (mut parent_writer, parent_existing) =
        SessionWriter::open(backend, parent, known.contains(parent))?;
    // The parent names its sub-agents when it is imported; this is for one that came later.
    if parent_existing.has_records && !parent_existing.children.contains(&child.id) {
        let at = parent_writer.last_ts;
        parent_writer.other(backend, at, link("child", &child.id))?;
    }
    Ok(())
}

fn import_file(
    backend: &dyn SessionBackend,
    source: Source,
    file: &Transcript,
    children: &[String],
    max_line_bytes: usize,
    memory: &mut Memory,
    report: &mut ImportReport,
) -> Result<(), ImportError> {
    let finding = |line: Option<u64>, kind: FindingKind, message: String| Finding {
        file: file.path.clone(),
        line,
        kind,
        message,
    };
    let (mut main, existing) =
        SessionWriter::open(backend, &file.session, memory.known.contains(&file.session))?;
    if existing.has_records && existing.marker.is_none() {
        report.findings.push(finding(
            None,
            FindingKind::Foreign,
            format!(
                "session \"{}\" exists and was not written by an import; not imported",
                file.session
            ),
        ));
        return Ok(());
    }
    let opened = File::open(&file.path);
    let mut lines = match opened {
        Ok(f) => Lines::new(BufReader::with_capacity(1 << 16, f), max_line_bytes),
        Err(error) => {
            report.findings.push(finding(
                None,
                FindingKind::Io,
                format!("cannot open: {error}"),
            ));
            return Ok(());
        }
    };
    let mut translator: Box<dyn Translate> = match source {
        Source::ClaudeCode => Box::new(ClaudeCode::new(file.parent.is_some(), stem(&file.path))),
        Source::Codex => Box::new(Codex::default()),
    };
    let io_finding = |error: std::io::Error| (FindingKind::Io, format!("read failed: {error}"));
    let mut start_offset = 0;
    if let Some(marker) = &existing.marker {
        let bytes = marker["bytes"].as_u64().unwrap_or(0);
        let count = marker["lines"].as_u64().unwrap_or(0);
        let same = match lines.skip(bytes, count) {
            Ok(true) => marker["sha256"].as_str() == Some(lines.digest().as_str()),
            Ok(false) => false,
            Err(error) => {
                let (kind, message) = io_finding(error);
                report.findings.push(finding(None, kind, message));
                return Ok(());
            }
        };
        if !same {
            report.findings.push(finding(
                None,
                FindingKind::Changed,
                format!(
                    "the first {bytes} bytes differ from what session \"{}\" was imported from (rewritten or truncated); not imported again",
                    file.session
                ),
            ));
            return Ok(());
        }
        translator.restore(&marker["state"]);
        start_offset = bytes;
    }
    // A new sub-agent session names its parent first, at its first line's time.
    let mut pending_parent = if main.new { file.parent.clone() } else { None };
    let mut side: Option<SessionWriter> = None;
    let mut buf = Vec::new();
    let mut emits = Vec::new();
    loop {
        let line = match lines.next_line(&mut buf) {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(error) => {
                let (kind, message) = io_finding(error);
                report
                    .findings
                    .push(finding(Some(lines.next_line_no), kind, message));
                break;
            }
        };
        let line_no = match line {
            Line::Complete => lines.next_line_no - 1,
            Line::TooLong { len } => {
                report.findings.push(finding(
                    Some(lines.next_line_no - 1),
                    FindingKind::TooLong,
                    format!("the line is {len} bytes, over the {max_line_bytes}-byte cap; skipped"),
                ));
                continue;
            }
            Line::Unterminated => lines.next_line_no,
        };
        let value = match serde_json::from_slice::<Value>(&buf) {
            Ok(value) => value,
            Err(error) if line == Line::Unterminated => {
                report.findings.push(finding(
                    Some(line_no),
                    FindingKind::Incomplete,
                    format!("the last line has no newline and does not parse yet ({error}); left for the next import"),
                ));
                break;
            }
            Err(error) => {
                report.findings.push(finding(
                    Some(line_no),
                    FindingKind::Unreadable,
                    format!("not JSON: {error}"),
                ));
                continue;
            }
        };
        if line == Line::Unterminated {
            lines.accept_unterminated(&buf);
        }
        emits.clear();
        if let Err(why) = translator.line(value, report, &mut emits) {
            report
                .findings
                .push(finding(Some(line_no), FindingKind::Unreadable, why));
            continue;
        }
        for Emit { side: to, ts, out } in emits.drain(..) {
            if let Some(parent) = pending_parent.take() {
                link_parent(backend, &memory.known, &mut main, &parent, ts)?;
            }
            let writer = match to {
                Side::Main => &mut main,
                Side::Sidechain => match &mut side {
                    Some(writer) => writer,
                    None => {
                        let id = format!("{}-sidechain", file.session);
                        let (mut writer, _) =
                            SessionWriter::open(backend, &id, memory.known.contains(&id))?;
                        if writer.new {
                            writer.other(backend, ts, link("parent", &file.session))?;
                            main.other(backend, ts, link("child", &id))?;
                        }
                        side.insert(writer)
                    }
                },
            };
            match out {
                Out::Input(event) => writer.input(backend, ts, event)?,
                Out::Answer(event) => writer.answer(backend, ts, event)?,
                Out::Other(event) => writer.other(backend, ts, event)?,
                Out::CallLine(call) => writer.call_line(backend, &mut memory.seen, ts, call)?,
                Out::CallDone(call) => writer.call_done(backend, ts, call)?,
            }
        }
    }
    if lines.offset != start_offset || existing.marker.is_none() {
        if let Some(parent) = pending_parent.take() {
            let ts = main.last_ts;
            link_parent(backend, &memory.known, &mut main, &parent, ts)?;
        }
        let marker = json!({
            "source": source.name(),
            "file": file.path.display().to_string(),
            "bytes": lines.offset,
            "lines": lines.next_line_no - 1,
            "sha256": lines.digest(),
            "state": translator.state(),
        });
        if let Some(writer) = &mut side {
            writer.finish(backend, marker.clone(), Vec::new())?;
        }
        let links = children
            .iter()
            .filter(|child| !existing.children.contains(*child))
            .map(|child| link("child", child))
            .collect();
        main.finish(backend, marker, links)?;
    }
    for writer in [Some(&main), side.as_ref()].into_iter().flatten() {
        if writer.appended > 0 {
            memory.known.insert(writer.id.clone());
        }
        report.sessions.push(SessionOutcome {
            session: writer.id.clone(),
            file: file.path.clone(),
            new: writer.new,
            records: writer.appended,
            parent: if writer.id == main.id {
                file.parent.clone()
            } else {
                Some(main.id.clone())
            },
        });
    }
    Ok(())
}
