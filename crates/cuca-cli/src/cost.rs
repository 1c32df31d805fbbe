//! `cuca cost STORE [--by day|week|month|session|model] [--since DATE] [--until DATE] [--json]
//! [--prices FILE]`: what the recorded calls cost, with the cache split, in ccusage's shape.

use std::io::Write;
use std::path::PathBuf;

use cuca::{fork_parent, SessionBackend};
use cuca_cost::{parse_day, CallReader, GroupBy, PriceTable, Report, Totals};
use serde_json::{json, Map, Value};

use crate::error::CliError;
use crate::store::StoreArg;
use crate::ui;

/// `cuca cost`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct CostArgs {
    /// A directory of `.cslog` files, or a PostgreSQL URL (`postgres://…`).
    #[arg(value_name = "STORE")]
    store: StoreArg,
    /// What a row sums: `day`, `week` (named by its Monday), `month` (UTC), `session` or
    /// `model`.
    #[arg(long, value_enum, default_value_t = By::Day)]
    by: By,
    /// Only calls on or after this UTC day (`YYYY-MM-DD` or `YYYYMMDD`).
    #[arg(long, value_name = "DATE")]
    since: Option<String>,
    /// Only calls on or before this UTC day (`YYYY-MM-DD` or `YYYYMMDD`).
    #[arg(long, value_name = "DATE")]
    until: Option<String>,
    /// One JSON object shaped like ccusage's `--json` report.
    #[arg(long)]
    json: bool,
    /// A price list in LiteLLM's `model_prices_and_context_window.json` format instead of the
    /// bundled snapshot (or `CUCA_PRICES`).
    #[arg(long, value_name = "FILE")]
    prices: Option<PathBuf>,
}

/// The rows `--by` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum By {
    Day,
    Week,
    Month,
    Session,
    Model,
}

impl By {
    fn group(self) -> GroupBy {
        match self {
            By::Day => GroupBy::Day,
            By::Week => GroupBy::Week,
            By::Month => GroupBy::Month,
            By::Session => GroupBy::Session,
            By::Model => GroupBy::Model,
        }
    }

    /// ccusage's name for the list of rows and for a row's key.
    fn names(self) -> (&'static str, &'static str) {
        match self {
            By::Day => ("daily", "date"),
            By::Week => ("weekly", "week"),
            By::Month => ("monthly", "month"),
            By::Session => ("sessions", "sessionId"),
            By::Model => ("models", "model"),
        }
    }
}

/// The table `--prices` names, else the configured one (`CUCA_PRICES`, else the bundled
/// snapshot).
pub(crate) fn table(
    prices: Option<&PathBuf>,
) -> Result<std::borrow::Cow<'static, PriceTable>, CliError> {
    match prices {
        Some(path) => PriceTable::from_file(path)
            .map(std::borrow::Cow::Owned)
            .map_err(|e| CliError::Usage(e.to_string())),
        None => cuca_cost::configured()
            .map(std::borrow::Cow::Borrowed)
            .map_err(|e| CliError::Failed(e.to_string())),
    }
}

fn day_arg(flag: &str, text: Option<&str>) -> Result<Option<String>, CliError> {
    text.map(|text| {
        parse_day(text).ok_or_else(|| {
            CliError::Usage(format!(
                "{flag} {text:?} is not a date (YYYY-MM-DD or YYYYMMDD)"
            ))
        })
    })
    .transpose()
}

/// The sequence up to which a fork's records are its parent's (the fork point's), so a
/// call is counted once, in the session that made it.
pub(crate) fn inherited_until(session: &str) -> Option<u64> {
    let (_, point) = fork_parent(session)?;
    point.rsplit_once(':')?.1.parse().ok()
}

/// Reads every session of `backend` one record at a time into `report`.
pub(crate) fn tally(
    backend: &dyn SessionBackend,
    table: &PriceTable,
    report: &mut Report,
) -> Result<(), CliError> {
    let ids = backend.sessions()?;
    let bar = ui::progress(ids.len() as u64, "pricing");
    for id in &ids {
        let inherited = inherited_until(id);
        let mut reader = CallReader::default();
        backend.replay_each(id, &mut |record| {
            if inherited.is_some_and(|until| record.sequence <= until) {
                return Ok(());
            }
            if let Some(call) = reader.see(record.sequence, record.timestamp_ms, &record.event) {
                report.add(id, &call, table);
            }
            Ok(())
        })?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(())
}

pub(crate) fn run(args: &CostArgs, schema: Option<&str>) -> Result<(), CliError> {
    let since = day_arg("--since", args.since.as_deref())?;
    let until = day_arg("--until", args.until.as_deref())?;
    let table = table(args.prices.as_ref())?;
    let store = args.store.open(schema, false)?;
    let mut report = Report::new(args.by.group(), since, until);
    tally(store.backend(), &table, &mut report)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if args.json {
        writeln!(out, "{}", report_json(&report, args.by, &table))?;
    } else {
        write_table(&mut out, &report, args.by, &table)?;
    }
    out.flush()?;
    Ok(())
}

/// A cost as JSON: the USD figure, or `null` when a call in it could not be priced.
fn cost_value(totals: &Totals) -> Value {
    totals.known_cost().map_or(Value::Null, Value::from)
}

/// ccusage's token fields, plus cuca's own: the cache writes by lifetime, reasoning, the
/// calls, and what could not be priced.
fn totals_json(totals: &Totals, cost_key: &str) -> Map<String, Value> {
    let usage = &totals.usage;
    let mut map = Map::new();
    map.insert("inputTokens".into(), usage.input.into());
    map.insert("outputTokens".into(), usage.output.into());
    map.insert(
        "cacheCreationTokens".into(),
        (usage.cache_write_5m + usage.cache_write_1h).into(),
    );
    map.insert("cacheReadTokens".into(), usage.cache_read.into());
    map.insert("totalTokens".into(), usage.total().into());
    map.insert(cost_key.into(), cost_value(totals));
    map.insert("cacheCreation5mTokens".into(), usage.cache_write_5m.into());
    map.insert("cacheCreation1hTokens".into(), usage.cache_write_1h.into());
    map.insert("reasoningTokens".into(), usage.reasoning.into());
    map.insert("calls".into(), totals.n_calls.into());
    map.insert("pricedCost".into(), totals.cost.into());
    map.insert("unpricedCalls".into(), totals.n_unpriced.into());
    map.insert("unpricedTokens".into(), totals.unpriced_tokens.into());
    map.insert("foldedCalls".into(), totals.n_folded.into());
    map
}

fn report_json(report: &Report, by: By, table: &PriceTable) -> Value {
    let (list, key) = by.names();
    let rows: Vec<Value> = report
        .rows()
        .map(|row| {
            let mut map = Map::new();
            map.insert(key.into(), row.key.clone().into());
            map.extend(totals_json(&row.totals, "totalCost"));
            map.insert(
                "modelsUsed".into(),
                row.models.keys().cloned().collect::<Vec<_>>().into(),
            );
            let breakdowns: Vec<Value> = row
                .models
                .iter()
                .map(|(model, totals)| {
                    let mut map = Map::new();
                    map.insert("modelName".into(), model.clone().into());
                    map.extend(totals_json(totals, "cost"));
                    Value::Object(map)
                })
                .collect();
            map.insert("modelBreakdowns".into(), breakdowns.into());
            Value::Object(map)
        })
        .collect();
    json!({
        list: rows,
        "totals": Value::Object(totals_json(report.totals(), "totalCost")),
        "pricedBy": table.source().to_string(),
    })
}

/// A cost in words: `$0.006457`, `unknown` when nothing in it was priced, and the priced
/// part plus `unknown` when only some was.
pub(crate) fn cost_words(totals: &Totals) -> String {
    match (totals.known_cost(), totals.n_unpriced < totals.n_calls) {
        (Some(cost), _) => format!("${cost:.6}"),
        (None, true) => format!("${:.6} + unknown", totals.cost),
        (None, false) => "unknown".to_owned(),
    }
}

fn write_table(
    out: &mut dyn Write,
    report: &Report,
    by: By,
    table: &PriceTable,
) -> Result<(), CliError> {
    let header = [
        match by {
            By::Day => "DATE",
            By::Week => "WEEK",
            By::Month => "MONTH",
            By::Session => "SESSION",
            By::Model => "MODEL",
        },
        "MODELS",
        "INPUT",
        "OUTPUT",
        "CACHE WRITE",
        "CACHE READ",
        "TOTAL TOKENS",
        "COST (USD)",
    ];
    let cells = |key: &str, models: String, totals: &Totals| -> [String; 8] {
        let usage = &totals.usage;
        [
            crate::term::line(key).to_string(),
            models,
            ui::thousands(usage.input),
            ui::thousands(usage.output),
            ui::thousands(usage.cache_write_5m + usage.cache_write_1h),
            ui::thousands(usage.cache_read),
            ui::thousands(usage.total()),
            cost_words(totals),
        ]
    };
    let mut rows: Vec<[String; 8]> = report
        .rows()
        .map(|row| {
            let models = row
                .models
                .keys()
                .map(|m| {
                    if m.is_empty() {
                        "(unnamed)"
                    } else {
                        m.as_str()
                    }
                })
                .collect::<Vec<_>>()
                .join(", ");
            cells(
                &row.key,
                crate::term::line(&models).to_string(),
                &row.totals,
            )
        })
        .collect();
    rows.push(cells("Total", String::new(), report.totals()));
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header = header.map(str::to_owned);
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            // Names left, numbers right.
            if i < 2 {
                line.push_str(&format!("{cell:<width$}"));
            } else {
                line.push_str(&format!("{cell:>width$}"));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    let totals = report.totals();
    writeln!(out, "priced by {}", table.source())?;
    if totals.n_unpriced > 0 {
        writeln!(
            out,
            "{} calls ({} tokens) are of models the table does not price: their cost is unknown, not 0",
            ui::thousands(totals.n_unpriced),
            ui::thousands(totals.unpriced_tokens)
        )?;
    }
    if totals.n_folded > 0 {
        writeln!(
            out,
            "{} calls were recorded before cuca kept every token kind: their prompt is priced as uncached input",
            ui::thousands(totals.n_folded)
        )?;
    }
    Ok(())
}
