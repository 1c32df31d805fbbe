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
