//! `cuca journal`: assemble a collected tree's journal, salvage a journal, summarise a record.

use std::io::Write;
use std::path::{Path, PathBuf};

use cuca::journal::assemble::{AssembleError, AssembleReport, Outcome};
use cuca::journal::record::{read_record, RecordError};
use serde_json::json;

use crate::error::CliError;
use crate::term::line;
use crate::ui;

/// The `cuca journal` subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum JournalCommand {
    /// Fold TREE/.cuca/replay.ndjson into RUN_DIR/replay.json.gz (the journal is removed on success).
    Assemble {
        /// The collected tree holding `.cuca/replay.ndjson`.
        tree: PathBuf,
        /// The run directory the record is written into (created if missing).
        run_dir: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Assemble the journal at JOURNAL into RUN_DIR, leaving the journal untouched.
    Salvage {
        /// The journal file (`replay.ndjson`).
        journal: PathBuf,
        /// The run directory the record is written into (created if missing).
        run_dir: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Summarise a `replay.json.gz`: outcome, agents, pool sizes, entries by kind.
    Show {
        /// The record file.
        record: PathBuf,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs one `cuca journal` subcommand.
pub(crate) fn run(command: JournalCommand) -> Result<(), CliError> {
    match command {
        JournalCommand::Assemble {
            tree,
            run_dir,
            json,
        } => assemble(&tree, &run_dir, json),
        JournalCommand::Salvage {
            journal,
            run_dir,
            json,
        } => salvage(&journal, &run_dir, json),
        JournalCommand::Show { record, json } => show(&record, json),
    }
}

fn outcome_words(outcome: &Outcome) -> String {
    match outcome {
        Outcome::CorruptJournal {
            last_complete_seq,
            line,
            reason,
        } => format!(
            "corrupt_journal at line {line} ({}); last complete seq {}",
            self::line(reason),
            last_complete_seq.map_or_else(|| "none".to_owned(), |seq| seq.to_string())
        ),
        Outcome::WriteFailed { stop_reason } => {
            format!("write_failed ({})", stop_reason.as_str())
        }
        other => other.kind().to_owned(),
    }
}

fn assemble_error(error: AssembleError) -> CliError {
    // Every refusal and host failure is exit 1: the journal exists and was read, and it is
    // either damaged where a record would be wrong, in another format, or the disk failed.
    CliError::Failed(format!("no record written: {error}"))
}

fn print_report(report: &AssembleReport, as_json: bool) -> Result<(), CliError> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if as_json {
        let row = json!({
            "artifact": report.artifact,
            "outcome": report.outcome,
            "session": report.session_id,
            "entries": report.n_entries,
            "last_seq": report.last_seq,
            "entries_by_kind": report.entries_by_kind,
            "messages": report.n_messages,
            "toolsets": report.n_toolsets,
            "texts": report.n_texts,
            "clips": report.n_clips,
            "agents": report.n_agents,
            "terminated": report.terminated,
            "journal_bytes": report.journal_bytes,
            "artifact_bytes": report.artifact_bytes,
            "journal_removed": report.journal_removed,
        });
        writeln!(out, "{row}")?;
    } else {
        writeln!(
            out,
            "wrote {} ({} bytes from a {}-byte journal)",
            report.artifact.display(),
            report.artifact_bytes,
            report.journal_bytes
        )?;
        writeln!(out, "session: {}", line(&report.session_id))?;
        writeln!(out, "outcome: {}", outcome_words(&report.outcome))?;
        writeln!(
            out,
            "entries: {}{}",
            report.n_entries,
            kinds_words(&report.entries_by_kind)
        )?;
        writeln!(
            out,
            "pools: {}, {}, {}, {}; {}",
            ui::count(report.n_messages, "message", "messages"),
            ui::count(report.n_toolsets, "toolset", "toolsets"),
            ui::count(report.n_texts, "text", "texts"),
            ui::count(report.n_clips, "clip", "clips"),
            ui::count(report.n_agents as u64, "agent", "agents")
        )?;
    }
    out.flush()?;
    if report.outcome != Outcome::Complete {
        ui::warn(&format!(
            "the record says the capture did not complete: {}",
            outcome_words(&report.outcome)
        ));
    }
    Ok(())
}

fn kinds_words(kinds: &std::collections::BTreeMap<String, u64>) -> String {
    if kinds.is_empty() {
        return String::new();
    }
    let words: Vec<String> = kinds
        .iter()
        .map(|(k, n)| format!("{} {n}", line(k)))
        .collect();
    format!(" ({})", words.join(", "))
}

fn require_dir(dir: &Path, what: &str) -> Result<(), CliError> {
    if dir.is_dir() {
        Ok(())
    } else {
        Err(CliError::Usage(format!(
            "{what} {} is not a directory",
            dir.display()
        )))
    }
}

fn assemble(tree: &Path, run_dir: &Path, as_json: bool) -> Result<(), CliError> {
    require_dir(tree, "collected tree")?;
    let spinner = ui::spinner("assembling");
    let result = cuca::journal::assemble(tree, run_dir);
    spinner.finish_and_clear();
    match result.map_err(assemble_error)? {
        Some(report) => print_report(&report, as_json),
        None => Err(CliError::Usage(format!(
            "{} holds no journal ({}/{}); nothing to assemble",
            tree.display(),
            cuca::journal::format::DEFAULT_JOURNAL_DIR,
            cuca::journal::format::JOURNAL_FILE_NAME
        ))),
    }
}

fn salvage(journal: &Path, run_dir: &Path, as_json: bool) -> Result<(), CliError> {
    if !journal.is_file() {
        return Err(CliError::Usage(format!(
            "journal {} is not a file",
            journal.display()
        )));
    }
    // The library's `salvage` swallows its failures by design (the run it serves is already
    // failing); here a person is asking, so the reason is the one line printed.
    let spinner = ui::spinner("salvaging");
    let result = cuca::journal::salvage::try_salvage(journal, run_dir);
    spinner.finish_and_clear();
    match result {
        Ok(Some(report)) => print_report(&report, as_json),
        Ok(None) => Err(CliError::Usage(format!(
            "journal {} is not a file",
            journal.display()
        ))),
        Err(error) => Err(CliError::Failed(format!(
            "salvage of {} wrote no record: {error}",
            journal.display()
        ))),
    }
}

fn show(record: &Path, as_json: bool) -> Result<(), CliError> {
    let summary = read_record(record).map_err(|error| match error {
        RecordError::Io { .. } => CliError::Usage(error.to_string()),
        other => CliError::Failed(other.to_string()),
    })?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if as_json {
        let row = json!({
            "format_version": summary.format_version,
            "session": summary.session_id,
            "routing_key": summary.routing_key,
            "recorder": summary.recorder,
            "outcome": summary.outcome,
            "seed": summary.seed,
            "agents": summary.agents,
            "messages": summary.n_messages,
            "toolsets": summary.n_toolsets,
            "texts": summary.n_texts,
            "clips": summary.n_clips,
            "entries": summary.n_entries,
            "entries_by_kind": summary.entries_by_kind,
            "last_seq": summary.last_seq,
        });
        writeln!(out, "{row}")?;
    } else {
        writeln!(
            out,
            "record {} (format {})",
            record.display(),
            summary.format_version
        )?;
        writeln!(out, "session: {}", line(&summary.session_id))?;
        if let Some(key) = &summary.routing_key {
            writeln!(out, "routing key: {}", line(key))?;
        }
        writeln!(
            out,
            "recorder: {}{}",
            line(&summary.recorder.version),
            summary
                .recorder
                .commit
                .as_ref()
                .map_or_else(String::new, |c| format!(" ({})", line(c)))
        )?;
        writeln!(out, "outcome: {}", outcome_words(&summary.outcome))?;
        writeln!(out, "agents: {}", summary.agents.len())?;
        for agent in &summary.agents {
            let origin = serde_json::to_string(&agent.origin).unwrap_or_default();
            let status = serde_json::to_value(agent.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_else(|| format!("{:?}", agent.status));
            writeln!(
                out,
                "  {} ({}, profile {}) {}{} origin {}",
                line(&agent.id),
                line(&agent.profile_name),
                line(&agent.profile_id.to_string()),
                line(&status),
                agent.ceiling.as_ref().map_or_else(String::new, |c| format!(
                    ", stopped by {}",
                    line(&c.to_string())
                )),
                line(&origin)
            )?;
        }
        writeln!(
            out,
            "pools: {}, {}, {}, {}",
            ui::count(summary.n_messages as u64, "message", "messages"),
            ui::count(summary.n_toolsets as u64, "toolset", "toolsets"),
            ui::count(summary.n_texts as u64, "text", "texts"),
            ui::count(summary.n_clips as u64, "clip", "clips")
        )?;
        writeln!(
            out,
            "entries: {}{}",
            summary.n_entries,
            kinds_words(&summary.entries_by_kind)
        )?;
    }
    out.flush()?;
    Ok(())
}
