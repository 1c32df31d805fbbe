//! `cuca import claude-code|codex [DIR] --store STORE`: agent transcripts into sessions.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use cuca_import::{import, ImportReport, Source, DEFAULT_MAX_LINE_BYTES};

use crate::error::CliError;
use crate::store::StoreArg;
use crate::ui::count;

/// `cuca import`: a `cuca export` file into a new session, or an agent's transcripts.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct ImportArgs {
    #[command(subcommand)]
    pub(crate) agent: Option<Agent>,
    /// The `.jsonl` file `cuca export` wrote (`-` for stdin).
    #[arg(required = true)]
    pub(crate) file: Option<PathBuf>,
    /// A directory of `.cslog` files (created if missing), or a PostgreSQL URL.
    #[arg(value_name = "STORE", required = true)]
    pub(crate) store: Option<StoreArg>,
    /// The new session's id; every record is relabelled with it.
    #[arg(required = true)]
    pub(crate) session: Option<String>,
    /// Print a JSON summary.
    #[arg(long)]
    pub(crate) json: bool,
}

/// The agents whose transcripts `cuca import` reads.
#[derive(Debug, Subcommand)]
pub(crate) enum Agent {
    /// Claude Code's sessions (default DIR `~/.claude/projects`), sub-agents included.
    ClaudeCode(TranscriptArgs),
    /// Codex's rollout files (default DIR `~/.codex/sessions`).
    Codex(TranscriptArgs),
}

/// What both agents' imports take.
#[derive(Debug, Args)]
pub(crate) struct TranscriptArgs {
    /// The transcript directory (or one transcript file); the agent's own by default.
    #[arg(value_name = "DIR")]
    dir: Option<PathBuf>,
    /// A directory of `.cslog` files (created if missing), or a PostgreSQL URL.
    #[arg(long, value_name = "STORE")]
    store: StoreArg,
    /// The longest line read, in bytes; a longer one is reported and skipped.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_LINE_BYTES)]
    max_line_bytes: usize,
    /// Print a JSON summary.
    #[arg(long)]
    json: bool,
}

/// Runs `cuca import AGENT`: exit 0 when every line was read, 1 when any was not (each
/// named with its file and line on stderr).
pub(crate) fn run(agent: &Agent, schema: Option<&str>) -> Result<(), CliError> {
    let (source, args) = match agent {
        Agent::ClaudeCode(args) => (Source::ClaudeCode, args),
        Agent::Codex(args) => (Source::Codex, args),
    };
    let dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => {
            let home = std::env::var_os("HOME").ok_or_else(|| {
                CliError::Usage(format!(
                    "HOME is not set, so there is no default {} directory; name one",
                    source.name()
                ))
            })?;
            source.default_dir(Path::new(&home))
        }
    };
    if !dir.exists() {
        return Err(CliError::Usage(format!(
            "{} does not exist; name the {} transcript directory",
            dir.display(),
            source.name()
        )));
    }
    let store = args.store.open(schema, true)?;
    let report = import(store.backend(), source, &dir, args.max_line_bytes)
        .map_err(|error| CliError::Failed(error_chain(&error)))?;
    for finding in &report.findings {
        crate::ui::warn(&finding.to_string());
    }
    print_report(&report, &dir, args.json)?;
    if report.failed() {
        let n = report
            .findings
            .iter()
            .filter(|f| f.kind != cuca_import::FindingKind::Incomplete)
            .count();
        return Err(CliError::Failed(format!(
            "{} of {} could not be imported (listed above); everything else was",
            count(n as u64, "line or file", "lines or files"),
            dir.display()
        )));
    }
    Ok(())
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        cause = inner.source();
    }
    text
}

fn print_report(report: &ImportReport, dir: &Path, json: bool) -> Result<(), CliError> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let written = if json {
        let sessions: Vec<_> = report
            .sessions
            .iter()
            .map(|s| {
                serde_json::json!({
                    "session": s.session,
                    "file": s.file.display().to_string(),
                    "new": s.new,
                    "records": s.records,
                    "parent": s.parent,
                })
            })
            .collect();
        let findings: Vec<_> = report
            .findings
            .iter()
            .map(|f| {
                serde_json::json!({
                    "file": f.file.display().to_string(),
                    "line": f.line,
                    "kind": format!("{:?}", f.kind),
                    "message": f.message,
                })
            })
            .collect();
        let summary = serde_json::json!({
            "files": report.files,
            "records": report.records(),
            "sessions": sessions,
            "findings": findings,
            "skipped": report.skipped,
        });
        writeln!(out, "{summary}")
    } else {
        let changed = report.sessions.iter().filter(|s| s.records > 0).count();
        let path = dir.display().to_string();
        let read_new: std::collections::HashSet<&Path> = report
            .sessions
            .iter()
            .filter(|s| s.records > 0)
            .map(|s| s.file.as_path())
            .collect();
        writeln!(
            out,
            "{} in {}: {} appended to {} ({} new), {} up to date, {}",
            count(report.files, "transcript", "transcripts"),
            crate::term::line(&path),
            count(report.records(), "record", "records"),
            count(changed as u64, "session", "sessions"),
            report.sessions.iter().filter(|s| s.new).count(),
            count(
                report.files.saturating_sub(read_new.len() as u64),
                "transcript",
                "transcripts"
            ),
            count(report.findings.len() as u64, "finding", "findings"),
        )
    };
    written.map_err(|error| CliError::Failed(format!("write to stdout: {error}")))
}
