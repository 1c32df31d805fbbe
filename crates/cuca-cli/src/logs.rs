//! `cuca logs`: the call log read back through `cuca_calllog` (rows, in-flight calls, runs).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use cuca::calllog::{self, Env, Record};
use serde_json::json;

use crate::error::CliError;
use crate::term::line;
use crate::ui;

/// The options of `cuca logs`.
#[derive(Debug, clap::Args)]
pub(crate) struct LogsArgs {
    /// Print where the call log is (from CUCA_CALL_LOG, CUCA_HOME, XDG_STATE_HOME, HOME) and stop.
    #[arg(long)]
    path: bool,
    /// Read this file instead of the resolved call log.
    #[arg(long, value_name = "PATH")]
    file: Option<PathBuf>,
    /// Only rows of this run id.
    #[arg(long, value_name = "ID")]
    run: Option<String>,
    /// List the calls in flight (start rows with no end row) and stop.
    #[arg(long, conflicts_with = "failed")]
    in_flight: bool,
    /// List the failed calls (an HTTP status of 400 or more, or an error) and stop.
    #[arg(long)]
    failed: bool,
    /// Only rows written within this long before now (`90s`, `15m`, `2h`, `1day`).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    since: Option<std::time::Duration>,
    /// JSON output: one object per listed call, or one summary object.
    #[arg(long)]
    json: bool,
}

/// Whether an end row records a failed call.
fn is_failure(row: &Record) -> bool {
    !row.is_start() && (row.status >= 400 || !row.error.is_empty())
}

/// The `q`-quantile (0..=1) of sorted `values`, nearest-rank.
fn percentile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

fn resolved_path(args: &LogsArgs) -> Result<Option<PathBuf>, CliError> {
    if let Some(file) = &args.file {
        return Ok(Some(file.clone()));
    }
    Ok(Env::from_process().path_for(None))
}

fn row_line(row: &Record) -> String {
    // Every field comes from a file anyone could have written: shown, never obeyed.
    let mut parts = vec![line(&row.ts).to_string(), format!("id={}", line(&row.id))];
    for (name, value) in [
        ("run", &row.run),
        ("tag", &row.tag),
        ("model", &row.model),
        ("ended", &row.ended),
        ("finish", &row.finish),
    ] {
        if !value.is_empty() {
            parts.push(format!("{name}={}", line(value)));
        }
    }
    if row.status != 0 {
        parts.push(format!("status={}", row.status));
    }
    if row.ms != 0 {
        parts.push(format!("ms={}", row.ms));
    }
    if row.attempt != 0 {
        parts.push(format!("attempt={}", row.attempt));
    }
    if !row.error.is_empty() {
        parts.push(format!("error={:?}", row.error));
    }
    parts.join("  ")
}

/// The session column of a failed call: `session NAME`, or `session -` when the row names
/// none (a call made through the client, not the proxy).
fn session_cell(row: &Record) -> String {
    if row.node.is_empty() {
        "session -".to_owned()
    } else {
        format!("session {}", line(&row.node))
    }
}

fn age_words(row: &Record, now: SystemTime) -> String {
    humantime::parse_rfc3339_weak(&row.ts)
        .ok()
        .and_then(|at| now.duration_since(at).ok())
        .map_or_else(String::new, |age| {
            format!(
                "  ({} ago)",
                humantime::format_duration(std::time::Duration::from_secs(age.as_secs()))
            )
        })
}

/// `cuca logs`.
pub(crate) fn run(args: &LogsArgs) -> Result<(), CliError> {
    let path = resolved_path(args)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let Some(path) = path else {
        if args.path {
            writeln!(out, "off")?;
            out.flush()?;
            return Ok(());
        }
        // The real cause, not a guess: switched off, no state root, or a test binary.
        let reason = Env::from_process()
            .off_reason(None)
            .map_or_else(|| "no path".to_owned(), |reason| reason.to_string());
        return Err(CliError::Usage(format!(
            "the call log is off ({reason}); --file PATH reads a log anywhere"
        )));
    };
    if args.path {
        writeln!(out, "{}", path.display())?;
        out.flush()?;
        return Ok(());
    }
    let rows = read(&path, args.file.is_some())?;
    let now = SystemTime::now();
    let rows: Vec<Record> = rows
        .into_iter()
        .filter(|row| args.run.as_ref().is_none_or(|run| &row.run == run))
        .filter(|row| {
            args.since.is_none_or(|since| {
                let Some(cutoff) = now.checked_sub(since) else {
                    return true;
                };
                humantime::parse_rfc3339_weak(&row.ts).is_ok_and(|at| at >= cutoff)
            })
        })
        .collect();
    if args.in_flight {
        for row in calllog::in_flight(&rows) {
            if args.json {
                let line = serde_json::to_string(row)
                    .map_err(|error| CliError::Failed(format!("encode row: {error}")))?;
                writeln!(out, "{line}")?;
            } else {
                writeln!(out, "{}{}", row_line(row), age_words(row, now))?;
            }
        }
    } else if args.failed {
        let failed: Vec<&Record> = rows.iter().filter(|row| is_failure(row)).collect();
        // The session a call was recorded for (the row's `node`, as `cuca proxy` writes it),
        // in a column of its own: a failure is looked for by session.
        let width = failed
            .iter()
            .map(|row| session_cell(row).chars().count())
            .max()
            .unwrap_or(0);
        for row in failed {
            if args.json {
                let line = serde_json::to_string(row)
                    .map_err(|error| CliError::Failed(format!("encode row: {error}")))?;
                writeln!(out, "{line}")?;
            } else {
                let rest = row_line(row);
                let rest = rest
                    .strip_prefix(&line(&row.ts).to_string())
                    .unwrap_or(&rest);
                let status = if row.status == 0 { "  no response" } else { "" };
                writeln!(
                    out,
                    "{}  {:<width$}{rest}{status}",
                    line(&row.ts),
                    session_cell(row)
                )?;
            }
        }
    } else {
        summary(&mut out, &path, &rows, args.json, now)?;
    }
    out.flush()?;
    Ok(())
}

/// Reads the rows, warning about torn and skipped lines. A missing file is a usage error when
/// the person named it, and an empty log (nothing recorded yet) when it is the resolved path.
fn read(path: &Path, named: bool) -> Result<Vec<Record>, CliError> {
    if !path.exists() {
        if named {
            return Err(CliError::Usage(format!(
                "call log {} does not exist",
                path.display()
            )));
        }
        ui::warn(&format!(
            "no call log at {} yet: no model call has been recorded there",
            path.display()
        ));
        return Ok(Vec::new());
    }
    let report = calllog::read_rows(path).map_err(|error| CliError::Failed(error.to_string()))?;
    if let Some(torn) = report.torn_tail {
        ui::warn(&format!(
            "{}: an unterminated last line of {} bytes at byte {} was skipped (a row torn mid-write)",
            path.display(),
            torn.len,
            torn.offset
        ));
    }
    // A JSON object is not a row by being one: every row the writer appends has its `ts` and
    // `id`, so an object without them (a session export, another tool's JSON Lines) is a
    // line that is not a row, as an unparseable one is.
    let mut skipped: Vec<(u64, String)> = report
        .skipped
        .iter()
        .map(|skipped| (skipped.line, skipped.reason.clone()))
        .collect();
    let mut rows = Vec::with_capacity(report.rows.len());
    // `read_rows` numbers skipped lines but not rows, so such a line is named by file only.
    for row in report.rows {
        if row.ts.is_empty() || row.id.is_empty() {
            skipped.push((
                0,
                "a JSON object with no \"ts\" and \"id\", not a call-log row".into(),
            ));
        } else {
            rows.push(row);
        }
    }
    // A file that is not a call log at all (a binary, another format) would otherwise warn
    // once per line without bound.
    for (line_no, reason) in skipped.iter().take(MAX_SKIP_WARNINGS) {
        if *line_no > 0 {
            ui::warn(&format!(
                "{} line {line_no}: skipped, not a row: {reason}",
                path.display()
            ));
        } else {
            ui::warn(&format!("{}: skipped, not a row: {reason}", path.display()));
        }
    }
    if skipped.len() > MAX_SKIP_WARNINGS {
        ui::warn(&format!(
            "{}: {} more lines skipped, not rows (is this a call log?)",
            path.display(),
            skipped.len() - MAX_SKIP_WARNINGS
        ));
    }
    Ok(rows)
}

/// How many skipped lines get a warning line of their own.
const MAX_SKIP_WARNINGS: usize = 5;

#[derive(Default)]
struct RunTotals {
    calls: u64,
    prompt_tokens: u64,
    completion_tokens: u64,
    failures: u64,
    /// The sessions the run's calls were recorded for (rows' `node`), in first-seen order:
    /// a proxy's run id is a random hex word, its sessions are what a person knows it by.
    sessions: Vec<String>,
}

/// Sessions a run's line names at most; past them it says how many more.
const MAX_RUN_SESSIONS: usize = 3;

fn summary(
    out: &mut impl Write,
    path: &Path,
    rows: &[Record],
    as_json: bool,
    now: SystemTime,
) -> Result<(), CliError> {
    let in_flight = calllog::in_flight(rows);
    let mut runs: BTreeMap<&str, RunTotals> = BTreeMap::new();
    for (run, calls) in calllog::calls_per_run(rows) {
        runs.entry(run).or_default().calls = calls;
    }
    let mut failures: BTreeMap<u16, u64> = BTreeMap::new();
    let mut ttft: Vec<u64> = Vec::new();
    for row in rows.iter().filter(|row| !row.is_start()) {
        let totals = runs.entry(row.run.as_str()).or_default();
        if !row.node.is_empty() && !totals.sessions.contains(&row.node) {
            totals.sessions.push(row.node.clone());
        }
        totals.prompt_tokens += row.prompt_tokens;
        totals.completion_tokens += row.completion_tokens;
        if is_failure(row) {
            totals.failures += 1;
            *failures.entry(row.status).or_insert(0) += 1;
        }
        if row.ttft_ms > 0 {
            ttft.push(row.ttft_ms);
        }
    }
    ttft.sort_unstable();
    let quantiles = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)];
    if as_json {
        let runs_json: Vec<_> = runs
            .iter()
            .map(|(run, t)| json!({"run": run, "sessions": t.sessions, "calls": t.calls, "prompt_tokens": t.prompt_tokens, "completion_tokens": t.completion_tokens, "failures": t.failures}))
            .collect();
        let failures_json: serde_json::Map<String, serde_json::Value> = failures
            .iter()
            .map(|(status, n)| (status.to_string(), (*n).into()))
            .collect();
        let mut ttft_json = serde_json::Map::new();
        for (name, q) in quantiles {
            ttft_json.insert(name.into(), percentile(&ttft, q).into());
        }
        let row = json!({
            "path": path,
            "rows": rows.len(),
            "in_flight": in_flight.len(),
            "runs": runs_json,
            "failures_by_status": failures_json,
            "ttft_ms": ttft_json,
        });
        writeln!(out, "{row}")?;
        return Ok(());
    }
    writeln!(
        out,
        "call log {}: {}",
        path.display(),
        ui::count(rows.len() as u64, "row", "rows")
    )?;
    writeln!(out, "in flight: {}", in_flight.len())?;
    for row in &in_flight {
        writeln!(out, "  {}{}", row_line(row), age_words(row, now))?;
    }
    writeln!(out, "runs: {}", runs.len())?;
    for (run, t) in &runs {
        let id = if run.is_empty() {
            "(no run id)".to_owned()
        } else {
            line(run).to_string()
        };
        // A run known by its sessions is named by them, its id after them.
        let name = if t.sessions.is_empty() {
            id
        } else {
            let mut shown: Vec<String> = t
                .sessions
                .iter()
                .take(MAX_RUN_SESSIONS)
                .map(|session| line(session).to_string())
                .collect();
            if t.sessions.len() > MAX_RUN_SESSIONS {
                shown.push(format!("{} more", t.sessions.len() - MAX_RUN_SESSIONS));
            }
            format!("{} (run {id})", shown.join(", "))
        };
        writeln!(
            out,
            "  {name}: {}, {} prompt + {} completion tokens, {} failed",
            ui::count(t.calls, "call", "calls"),
            ui::thousands(t.prompt_tokens),
            ui::thousands(t.completion_tokens),
            ui::thousands(t.failures)
        )?;
    }
    if failures.is_empty() {
        writeln!(out, "failures: none")?;
    } else {
        let words: Vec<String> = failures
            .iter()
            .map(|(status, n)| {
                if *status == 0 {
                    format!("no response {}", ui::thousands(*n))
                } else {
                    format!("{status} {}", ui::thousands(*n))
                }
            })
            .collect();
        writeln!(out, "failures by status: {}", words.join(", "))?;
    }
    if ttft.is_empty() {
        writeln!(out, "ttft: no streamed call with a first token")?;
    } else {
        let words: Vec<String> = quantiles
            .iter()
            .filter_map(|(name, q)| percentile(&ttft, *q).map(|v| format!("{name} {v} ms")))
            .collect();
        writeln!(
            out,
            "ttft over {}: {}",
            ui::count(ttft.len() as u64, "call", "calls"),
            words.join(", ")
        )?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) fn percentile_for_tests(sorted: &[u64], q: f64) -> Option<u64> {
    percentile(sorted, q)
}
