//! The call-log page's figures, from the call log's own reader.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use cuca_calllog::Record;

use crate::error::ViewError;

/// How many of the newest failures the page lists one by one.
pub const RECENT_FAILURES: usize = 20;

/// What the call-log page shows.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct CallsSummary {
    /// The file read.
    pub path: PathBuf,
    /// Rows read (start and end rows).
    pub n_rows: usize,
    /// Lines the reader skipped (not rows), and whether the last line was torn.
    pub n_skipped: usize,
    /// Whether the file ended in an unterminated (torn) row.
    pub torn_tail: bool,
    /// Calls with a start row and no end row, oldest first.
    pub in_flight: Vec<InFlight>,
    /// Failed end rows by HTTP status (0 where no response came back), most frequent first.
    pub failures_by_status: Vec<(u16, usize)>,
    /// The newest failed end rows, newest first.
    pub recent_failures: Vec<Failure>,
    /// Latency and counts per model, by model name.
    pub per_model: Vec<ModelStats>,
}

/// A call still in flight.
#[derive(Debug, Clone, PartialEq)]
pub struct InFlight {
    /// The attempt id that pairs its rows.
    pub id: String,
    /// The model asked for.
    pub model: String,
    /// The run it belongs to.
    pub run: String,
    /// The start row's timestamp as written.
    pub started: String,
    /// Seconds since it started, when the timestamp parses.
    pub age_s: Option<u64>,
}

/// A failed call.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The end row's timestamp as written.
    pub ts: String,
    /// The session it was recorded in (the row's `node`); empty when the caller named none.
    pub session: String,
    /// The model asked for.
    pub model: String,
    /// The HTTP status (0 when none came back).
    pub status: u16,
    /// Who ended it (`cancelled`, `deadline`, …), when not its own path.
    pub ended: String,
    /// The clipped error.
    pub error: String,
}

/// Latency and counts of one model's ended calls.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelStats {
    /// The model asked for.
    pub model: String,
    /// Ended calls.
    pub calls: usize,
    /// Of which failed.
    pub failures: usize,
    /// Nearest-rank percentiles of `ms` over ended calls: p50, p90, p99.
    pub p50_ms: Option<u64>,
    /// See [`ModelStats::p50_ms`].
    pub p90_ms: Option<u64>,
    /// See [`ModelStats::p50_ms`].
    pub p99_ms: Option<u64>,
}

/// Whether an end row records a failed call: an HTTP error, an error text, or a call that
/// something other than its own path ended.
fn is_failure(row: &Record) -> bool {
    !row.is_start() && (row.status >= 400 || !row.error.is_empty() || !row.ended.is_empty())
}

/// The `q`-quantile (0..=1) of sorted `values`, nearest rank.
fn percentile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// Reads the call log at `path` and summarises it as of `now`.
pub fn summarise(path: &Path, now: SystemTime) -> Result<CallsSummary, ViewError> {
    let mut summary = CallsSummary {
        path: path.to_owned(),
        ..CallsSummary::default()
    };
    if !path.exists() {
        // No call has been recorded there yet: an empty page, not an error.
        return Ok(summary);
    }
    let report =
        cuca_calllog::read_rows(path).map_err(|error| ViewError::CallLog(error.to_string()))?;
    summary.n_rows = report.rows.len();
    summary.n_skipped = report.skipped.len();
    summary.torn_tail = report.torn_tail.is_some();
    let rows = report.rows;

    summary.in_flight = cuca_calllog::in_flight(&rows)
        .into_iter()
        .map(|row| InFlight {
            id: row.id.clone(),
            model: row.model.clone(),
            run: row.run.clone(),
            started: row.ts.clone(),
            age_s: humantime::parse_rfc3339_weak(&row.ts)
                .ok()
                .and_then(|at| now.duration_since(at).ok())
                .map(|age| age.as_secs()),
        })
        .collect();

    let mut by_status: BTreeMap<u16, usize> = BTreeMap::new();
    let mut latencies: BTreeMap<String, (Vec<u64>, usize)> = BTreeMap::new();
    for row in rows.iter().filter(|row| !row.is_start()) {
        let failed = is_failure(row);
        let entry = latencies.entry(row.model.clone()).or_default();
        entry.0.push(row.ms);
        if failed {
            entry.1 += 1;
            *by_status.entry(row.status).or_default() += 1;
        }
    }
    let mut failures_by_status: Vec<(u16, usize)> = by_status.into_iter().collect();
    failures_by_status.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    summary.failures_by_status = failures_by_status;
    summary.recent_failures = rows
        .iter()
        .rev()
        .filter(|row| is_failure(row))
        .take(RECENT_FAILURES)
        .map(|row| Failure {
            ts: row.ts.clone(),
            session: row.node.clone(),
            model: row.model.clone(),
            status: row.status,
            ended: row.ended.clone(),
            error: row.error.clone(),
        })
        .collect();
    summary.per_model = latencies
        .into_iter()
        .map(|(model, (mut ms, failures))| {
            ms.sort_unstable();
            ModelStats {
                model,
                calls: ms.len(),
                failures,
                p50_ms: percentile(&ms, 0.50),
                p90_ms: percentile(&ms, 0.90),
                p99_ms: percentile(&ms, 0.99),
            }
        })
        .collect();
    Ok(summary)
}

/// One ended call as the call-log table and a session page show it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CallRow {
    /// The attempt id.
    pub id: String,
    /// The run.
    pub run: String,
    /// The session the call was recorded in (the row's `node`, as `cuca proxy` writes it);
    /// empty when the caller named none.
    pub session: String,
    /// The model asked for.
    pub model: String,
    /// The HTTP status (0 when none came back).
    pub status: u16,
    /// Its wall time, milliseconds.
    pub ms: u64,
    /// The end row's timestamp as written.
    pub ts: String,
    /// The end row's time, milliseconds since the Unix epoch, when it parses.
    pub end_ms: Option<u64>,
    /// Whether it failed ([`is_failure`]'s rule: an HTTP error, an error text, or ended by
    /// something other than its own path).
    pub failed: bool,
    /// The error text, or who ended it.
    pub error: String,
}

impl CallRow {
    fn of(row: &Record) -> CallRow {
        CallRow {
            id: row.id.clone(),
            run: row.run.clone(),
            session: row.node.clone(),
            model: row.model.clone(),
            status: row.status,
            ms: row.ms,
            ts: row.ts.clone(),
            end_ms: humantime::parse_rfc3339_weak(&row.ts)
                .ok()
                .and_then(|at| at.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as u64),
            failed: is_failure(row),
            error: if row.error.is_empty() {
                row.ended.clone()
            } else {
                row.error.clone()
            },
        }
    }

    /// When the call started: its end less its wall time.
    pub fn start_ms(&self) -> Option<u64> {
        self.end_ms.map(|end| end.saturating_sub(self.ms))
    }
}

/// Which calls the call-log table lists; an empty field matches every call.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize)]
#[non_exhaustive]
pub struct CallFilter {
    /// The run.
    #[serde(default)]
    pub run: String,
    /// The session (the row's `node`).
    #[serde(default)]
    pub session: String,
    /// The model asked for.
    #[serde(default)]
    pub model: String,
    /// `failed`, `ok`, or an HTTP status.
    #[serde(default)]
    pub status: String,
}

impl CallFilter {
    fn keeps(&self, row: &CallRow) -> bool {
        let status = match self.status.as_str() {
            "" => true,
            "failed" => row.failed,
            "ok" => !row.failed,
            code => code.parse::<u16>().is_ok_and(|code| code == row.status),
        };
        status
            && (self.run.is_empty() || self.run == row.run)
            && (self.session.is_empty() || self.session == row.session)
            && (self.model.is_empty() || self.model == row.model)
    }
}

/// How many rows the call-log table lists: the newest, the count says how many matched.
pub const MAX_CALL_ROWS: usize = 500;

/// The call-log table: ended calls matching `filter`, newest first (at most
/// [`MAX_CALL_ROWS`]), how many matched, and the values each filter can take.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct CallTable {
    /// The rows shown.
    pub rows: Vec<CallRow>,
    /// Rows that matched, shown or not.
    pub n_matched: usize,
    /// Every run, session and model in the log, sorted, for the filter menus.
    pub runs: Vec<String>,
    /// See [`CallTable::runs`].
    pub sessions: Vec<String>,
    /// See [`CallTable::runs`].
    pub models: Vec<String>,
}

fn ended_rows(path: &Path) -> Result<Vec<CallRow>, ViewError> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let report =
        cuca_calllog::read_rows(path).map_err(|error| ViewError::CallLog(error.to_string()))?;
    Ok(report
        .rows
        .iter()
        .filter(|row| !row.is_start())
        .map(CallRow::of)
        .collect())
}

/// Reads the call log at `path` into its table under `filter`.
pub fn table(path: &Path, filter: &CallFilter) -> Result<CallTable, ViewError> {
    let all = ended_rows(path)?;
    let mut table = CallTable::default();
    let mut runs = std::collections::BTreeSet::new();
    let mut sessions = std::collections::BTreeSet::new();
    let mut models = std::collections::BTreeSet::new();
    for row in all.iter().rev() {
        runs.insert(row.run.clone());
        sessions.insert(row.session.clone());
        models.insert(row.model.clone());
        if filter.keeps(row) {
            table.n_matched += 1;
            if table.rows.len() < MAX_CALL_ROWS {
                table.rows.push(row.clone());
            }
        }
    }
    table.runs = runs.into_iter().filter(|s| !s.is_empty()).collect();
    table.sessions = sessions.into_iter().filter(|s| !s.is_empty()).collect();
    table.models = models.into_iter().filter(|s| !s.is_empty()).collect();
    Ok(table)
}

/// The failed calls recorded for `session` (rows whose `node` is the session), oldest first:
/// what a session page shows at the place they happened. A call that failed
/// before the upstream answered left no record in the session, so only the call log knows it.
pub fn failures_of(path: &Path, session: &str) -> Result<Vec<CallRow>, ViewError> {
    Ok(ended_rows(path)?
        .into_iter()
        .filter(|row| row.failed && row.session == session)
        .collect())
}
