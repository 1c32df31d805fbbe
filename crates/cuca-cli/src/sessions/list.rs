//! `cuca sessions DIR`: one row per session, widths from the rows, most recent first.

use std::collections::HashMap;
use std::io::Write;

use cuca::{conversation_parent, SessionEvent};
use serde_json::json;

use super::{count, fork_parent, format_ms, scan_row, stdout, stored_row, Scanned};
use crate::error::CliError;
use crate::store::Store;
use crate::term::line;
use crate::ui;

/// How `cuca sessions` orders its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum SortBy {
    /// Most recent last record first; sessions with no record last.
    Activity,
    /// By session id.
    Name,
}

/// What one row says, gathered in one pass over the session's records.
struct Row {
    id: String,
    scanned: Scanned,
    first_ms: Option<u64>,
    last_ms: Option<u64>,
    forks_taken: Vec<String>,
    compacted: bool,
    /// The file's bytes on disk; `None` in a database, which does not tell it per session.
    bytes_on_disk: Option<u64>,
    /// Calls that went wrong: the session's `CallIncomplete` records (cut short, not recorded
    /// whole) and the call log's failed calls in it (a refusal or an upstream that did not
    /// answer never became a record).
    errors: u64,
    /// The models that answered (`CallFinish`), else were asked for (`CallRequest`), the
    /// latest last; at most [`MAX_MODELS`] kept.
    models: Vec<String>,
    /// The calls the session made (a fork's own, after its fork point), priced.
    cost: cuca_cost::Totals,
}

/// Models a row names at most; past them it says how many more.
const MAX_MODELS: usize = 4;

impl Row {
    fn status(&self) -> String {
        if self.compacted {
            format!("{}, gz", self.scanned.verdict_word())
        } else {
            self.scanned.verdict_word().to_owned()
        }
    }

    fn forks(&self) -> String {
        let mut forks = Vec::new();
        if let Some((parent, point)) = fork_parent(&self.id) {
            if is_shown_as_chain(&self.id) {
                // The chain in the id column names the parent already.
                let sequence = point[parent.len()..].trim_start_matches(':');
                forks.push(format!("forked at {sequence}"));
            } else {
                forks.push(format!("forked from {}", line(point)));
            }
        }
        if !self.forks_taken.is_empty() {
            forks.push(format!("{} taken", self.forks_taken.len()));
        }
        if forks.is_empty() {
            "-".to_owned()
        } else {
            forks.join(", ")
        }
    }
}

/// One session's row; `sizes` is [`Store::stored_bytes`], read once for every row.
fn scan(
    store: &Store,
    id: &str,
    sizes: Option<&HashMap<String, u64>>,
    failed_calls: &HashMap<String, u64>,
    table: &cuca_cost::PriceTable,
) -> Result<Row, CliError> {
    let mut cost = cuca_cost::Totals::default();
    let mut calls = cuca_cost::CallReader::default();
    let inherited = crate::cost::inherited_until(id);
    let (mut first_ms, mut last_ms, mut forks_taken) = (None, None, Vec::new());
    let mut errors = failed_calls.get(id).copied().unwrap_or(0);
    let (mut models, mut more_models) = (Vec::<String>::new(), 0usize);
    let mut note_model = |model: &str| {
        if model.is_empty() {
            return;
        }
        if let Some(at) = models.iter().position(|seen| seen == model) {
            let seen = models.remove(at);
            models.push(seen);
        } else if models.len() < MAX_MODELS {
            models.push(model.to_owned());
        } else {
            more_models += 1;
        }
    };
    let mut see = |record: cuca::ReplayedRecord<'_>| {
        first_ms.get_or_insert(record.timestamp_ms);
        last_ms = Some(record.timestamp_ms);
        if inherited.is_none_or(|until| record.sequence > until) {
            if let Some(call) = calls.see(record.sequence, record.timestamp_ms, &record.event) {
                cost.add_call(&call, table);
            }
        }
        match record.event {
            SessionEvent::Fork { to_session, .. } => forks_taken.push(to_session),
            SessionEvent::CallIncomplete { .. } => errors += 1,
            SessionEvent::CallRequest { model, .. } | SessionEvent::CallFinish { model, .. } => {
                note_model(&model)
            }
            _ => {}
        }
    };
    let (scanned, compacted, bytes_on_disk) = match store.file() {
        Some(backend) => (
            scan_row(backend, id, &mut see)?,
            backend.is_compacted(id)?,
            Some(backend.bytes_on_disk(id)?),
        ),
        None => {
            let bytes = sizes.and_then(|sizes| sizes.get(id)).copied().unwrap_or(0);
            (
                stored_row(store.backend(), id, bytes, &mut see),
                false,
                None,
            )
        }
    };
    if more_models > 0 {
        models.push(format!("+{more_models} more"));
    }
    Ok(Row {
        id: id.to_owned(),
        scanned,
        first_ms,
        last_ms,
        forks_taken,
        compacted,
        bytes_on_disk,
        errors,
        models,
        cost,
    })
}

/// The failed calls of this machine's call log (an HTTP status of 400 or more, or an error),
/// counted by the session the proxy recorded them for; none when there is no call log.
fn failed_calls() -> HashMap<String, u64> {
    let mut counts = HashMap::new();
    let Some(path) = cuca::calllog::Env::from_process().path_for(None) else {
        return counts;
    };
    // The listing is about sessions: a call log that cannot be read is `cuca logs`'s to
    // report, and leaves the column at what the sessions hold.
    let Ok(report) = cuca::calllog::read_rows(&path) else {
        return counts;
    };
    for row in report.rows {
        if !row.is_start() && !row.node.is_empty() && (row.status >= 400 || !row.error.is_empty()) {
            *counts.entry(row.node).or_insert(0) += 1;
        }
    }
    counts
}

/// The span between a session's first and last record in its two largest units (`1h 6m`,
/// `6m 34s`, `12s`, `340ms`); `-` with no record.
fn duration_words(row: &Row) -> String {
    match (row.first_ms, row.last_ms) {
        (Some(first), Some(last)) => compact_duration(last.saturating_sub(first)),
        _ => "-".to_owned(),
    }
}

/// `ms` in its two largest units, a column's width whatever the span.
pub(crate) fn compact_duration(ms: u64) -> String {
    if ms < 1_000 {
        return format!("{ms}ms");
    }
    const UNITS: [(&str, u64); 5] = [
        ("y", 365 * 86_400),
        ("d", 86_400),
        ("h", 3_600),
        ("m", 60),
        ("s", 1),
    ];
    let mut left = ms / 1_000;
    let mut parts = Vec::new();
    for (name, seconds) in UNITS {
        let n = left / seconds;
        if n > 0 || !parts.is_empty() {
            parts.push(format!("{n}{name}"));
            left -= n * seconds;
        }
        if parts.len() == 2 {
            break;
        }
    }
    parts.join(" ")
}

/// `cuca sessions DIR [--sort activity|name] [--last]`.
/// Ids longer than this are shown in the table by their fork chain: a fork id repeats its
/// parent's id twice, so ten forks deep from a UUID it is about 47 KB.
const MAX_SHOWN_ID_CHARS: usize = 100;

/// Whether the table shows `id` as its fork chain rather than whole.
fn is_shown_as_chain(id: &str) -> bool {
    id.chars().count() > MAX_SHOWN_ID_CHARS && fork_parent(id).is_some()
}

/// A session id as the table shows it: whole when it is short; otherwise, for a fork, its
/// root and each fork step as `>{sequence}#{n}` (`{root} >1#0 >3#2`: forked at point 1, then
/// that branch at point 3), and for any other long id its head and tail around the number of
/// characters left out. `--json` and `--last` always print the whole id.
fn shown_id(id: &str) -> String {
    if id.chars().count() <= MAX_SHOWN_ID_CHARS {
        return line(id).to_string();
    }
    let mut steps = Vec::new();
    let mut current = id;
    while let Some((parent, point)) = fork_parent(current) {
        let sequence = point[parent.len()..].trim_start_matches(':');
        let n = current.rsplit_once(':').map_or("", |(_, n)| n);
        steps.push(format!(">{sequence}#{n}"));
        current = parent;
    }
    let root = if current.chars().count() <= MAX_SHOWN_ID_CHARS {
        line(current).to_string()
    } else {
        let chars: Vec<char> = current.chars().collect();
        let head: String = chars[..40].iter().collect();
        let tail: String = chars[chars.len() - 40..].iter().collect();
        format!(
            "{}…({} characters)…{}",
            line(&head),
            chars.len() - 80,
            line(&tail)
        )
    };
    steps.reverse();
    std::iter::once(root)
        .chain(steps)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The rows with each session's conversations (`{base}:conv:{n}`) right after their
/// base session, in conversation order; a group stands where its first member in the sort
/// stands (the most active one, sorted by activity).
fn grouped(rows: Vec<Row>) -> Vec<Row> {
    let ids: std::collections::HashSet<String> = rows.iter().map(|r| r.id.clone()).collect();
    let group_of = |id: &str| -> String {
        match conversation_parent(id) {
            Some((base, _)) if ids.contains(base) => base.to_owned(),
            _ => id.to_owned(),
        }
    };
    let mut order: Vec<String> = Vec::new();
    let mut members: std::collections::HashMap<String, Vec<(u64, Row)>> =
        std::collections::HashMap::new();
    for row in rows {
        let group = group_of(&row.id);
        let n = if group == row.id {
            0
        } else {
            conversation_parent(&row.id).map_or(0, |(_, n)| n)
        };
        if !members.contains_key(&group) {
            order.push(group.clone());
        }
        members.entry(group).or_default().push((n, row));
    }
    let mut out = Vec::new();
    for group in order {
        let mut rows = members.remove(&group).unwrap_or_default();
        rows.sort_by_key(|(n, _)| *n);
        out.extend(rows.into_iter().map(|(_, row)| row));
    }
    out
}

pub(crate) fn list(store: &Store, as_json: bool, sort: SortBy, last: bool) -> Result<(), CliError> {
    let ids = store.backend().sessions()?;
    let sizes = store.stored_bytes()?;
    let failed = failed_calls();
    let table = crate::cost::table(None)?;
    let bar = ui::progress(ids.len() as u64, "scanning");
    let mut rows = Vec::with_capacity(ids.len());
    for id in &ids {
        rows.push(scan(store, id, sizes.as_ref(), &failed, &table)?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    if sort == SortBy::Activity || last {
        // Newest first; `sessions()` is sorted by id, and the sort is stable, so ties and
        // sessions with no record keep id order.
        rows.sort_by_key(|row| std::cmp::Reverse(row.last_ms));
    }
    if !last {
        rows = grouped(rows);
    }
    let mut out = stdout();
    if last {
        let Some(row) = rows.iter().find(|row| row.last_ms.is_some()) else {
            return Err(CliError::Usage(format!(
                "{} holds no session with a record, so there is no most recent one",
                store.describe()
            )));
        };
        if as_json {
            writeln!(out, "{}", json!({"session": row.id}))?;
        } else {
            writeln!(out, "{}", line(&row.id))?;
        }
        out.flush()?;
        return Ok(());
    }
    if as_json {
        for row in &rows {
            let parent = fork_parent(&row.id);
            let value = json!({
                "session": row.id,
                "records": row.scanned.n_records(),
                "bytes": row.scanned.file_len(),
                "first_ms": row.first_ms,
                "last_ms": row.last_ms,
                "first": row.first_ms.map(format_ms),
                "last": row.last_ms.map(format_ms),
                "status": row.scanned.verdict_word(),
                "integrity": row.scanned.verdict_word(),
                "duration_ms": row.first_ms.zip(row.last_ms).map(|(first, last)| last.saturating_sub(first)),
                "models": row.models,
                "cost_usd": row.cost.known_cost(),
                "cost_unpriced_calls": row.cost.n_unpriced,
                "cost_priced_by": table.source().to_string(),
                "errors": row.errors,
                "compacted": row.compacted,
                "bytes_on_disk": row.bytes_on_disk,
                "forked_from": parent.map(|(_, point)| point),
                "conversation_of": conversation_parent(&row.id).map(|(base, _)| base),
                "forks": row.forks_taken,
            });
            writeln!(out, "{value}")?;
        }
        out.flush()?;
        return Ok(());
    }
    let cells: Vec<[String; 11]> = rows
        .iter()
        .map(|row| {
            [
                match conversation_parent(&row.id) {
                    // Under its base session, indented: one app's conversations together.
                    Some((base, _)) if rows.iter().any(|r| r.id == base) => {
                        format!("  {}", shown_id(&row.id))
                    }
                    _ => shown_id(&row.id),
                },
                ui::thousands(row.scanned.n_records()),
                ui::thousands(row.scanned.file_len()),
                row.first_ms.map_or_else(|| "-".to_owned(), format_ms),
                row.last_ms.map_or_else(|| "-".to_owned(), format_ms),
                duration_words(row),
                if row.models.is_empty() {
                    "-".to_owned()
                } else {
                    line(&row.models.join(", ")).to_string()
                },
                ui::thousands(row.errors),
                if row.cost.n_calls == 0 {
                    "-".to_owned()
                } else {
                    crate::cost::cost_words(&row.cost)
                },
                row.status(),
                row.forks(),
            ]
        })
        .collect();
    // INTEGRITY is the file's (or the stored rows') soundness, not how the calls went: that
    // is ERRORS.
    let header = [
        "SESSION",
        "RECORDS",
        "BYTES",
        "FIRST",
        "LAST",
        "DURATION",
        "MODEL",
        "ERRORS",
        "COST",
        "INTEGRITY",
        "FORKS",
    ];
    let mut widths = header.map(|h| h.chars().count());
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let write_row = |out: &mut dyn Write, cells: [&str; 11]| -> std::io::Result<()> {
        let [id, records, bytes, first, last, duration, model, errors, cost, status, forks] = cells;
        writeln!(
            out,
            "{id:<w0$}  {records:>w1$}  {bytes:>w2$}  {first:<w3$}  {last:<w4$}  {duration:<w5$}  {model:<w6$}  {errors:>w7$}  {cost:>w8$}  {status:<w9$}  {forks}",
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3],
            w4 = widths[4],
            w5 = widths[5],
            w6 = widths[6],
            w7 = widths[7],
            w8 = widths[8],
            w9 = widths[9],
        )
    };
    write_row(&mut out, header)?;
    for row in &cells {
        write_row(&mut out, row.each_ref().map(String::as_str))?;
    }
    writeln!(
        out,
        "costs priced by {}; {} in {}",
        table.source(),
        count(ids.len() as u64, "session", "sessions"),
        store.describe()
    )?;
    out.flush()?;
    Ok(())
}
