//! Calls summed into totals, by day, week, month, session or model, priced by one table.

use std::collections::BTreeMap;

use crate::calls::{Call, Counted};
use crate::price::Usage;
use crate::table::PriceTable;

/// What a report's rows are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupBy {
    /// One row per UTC day (`2026-12-02`).
    Day,
    /// One row per week, named by its Monday (UTC).
    Week,
    /// One row per UTC month (`2026-12`).
    Month,
    /// One row per session.
    Session,
    /// One row per model.
    Model,
}

/// Token counts and cost of a set of calls.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    /// Every kind summed.
    pub usage: Usage,
    /// The calls counted.
    pub n_calls: u64,
    /// USD of the calls whose model the table prices.
    pub cost: f64,
    /// Calls whose model the table does not price (their cost is unknown, never 0).
    pub n_unpriced: u64,
    /// The tokens of those calls.
    pub unpriced_tokens: u64,
    /// Calls recorded with only the folded prompt/completion pair, priced as uncached input.
    pub n_folded: u64,
    /// Calls whose cost is the provider's own figure rather than the table's. Always 0 from
    /// session records, which hold no provider cost; kept so a row says where a cost came
    /// from wherever it is used.
    pub n_provider_cost: u64,
}

impl Totals {
    /// The cost when every call was priced; `None` ("unknown") when at least one was not.
    pub fn known_cost(&self) -> Option<f64> {
        (self.n_unpriced == 0).then_some(self.cost)
    }

    /// Adds one call, priced by `table`.
    pub fn add_call(&mut self, call: &Call, table: &PriceTable) {
        self.usage.add(&call.usage);
        self.n_calls += 1;
        if call.counted == Counted::Folded {
            self.n_folded += 1;
        }
        match price_of(call, table) {
            Some(cost) => self.cost += cost,
            None => {
                self.n_unpriced += 1;
                self.unpriced_tokens = self.unpriced_tokens.saturating_add(call.usage.total());
            }
        }
    }

    /// Adds another set's totals.
    pub fn add(&mut self, other: &Totals) {
        self.usage.add(&other.usage);
        self.n_calls += other.n_calls;
        self.cost += other.cost;
        self.n_unpriced += other.n_unpriced;
        self.unpriced_tokens = self.unpriced_tokens.saturating_add(other.unpriced_tokens);
        self.n_folded += other.n_folded;
        self.n_provider_cost += other.n_provider_cost;
    }
}

/// One call's cost in USD by `table`; `None` when the table does not know its model. A call
/// that counted no token costs nothing whatever its model (a call cut short before any
/// usage, which names no model either).
pub fn price_of(call: &Call, table: &PriceTable) -> Option<f64> {
    if call.usage.total() == 0 {
        return Some(0.0);
    }
    table
        .price(&call.model)
        .map(|price| price.cost(&call.usage).total())
}

/// One row of a report: its key, its totals, and the same per model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    /// The day, week, month, session or model the row sums.
    pub key: String,
    /// The row's totals.
    pub totals: Totals,
    /// The row's totals per model, by model name (an unnamed model is `""`).
    pub models: BTreeMap<String, Totals>,
}

/// Calls summed by one key, with grand totals. Memory grows with the number of rows and
/// models, never with the number of calls.
#[derive(Debug, Clone)]
pub struct Report {
    by: GroupBy,
    since: Option<String>,
    until: Option<String>,
    rows: BTreeMap<String, Row>,
    totals: Totals,
}

impl Report {
    /// An empty report by `by`, counting only calls whose UTC day is within `since..=until`
    /// (`YYYY-MM-DD`, either end open).
    pub fn new(by: GroupBy, since: Option<String>, until: Option<String>) -> Report {
        Report {
            by,
            since,
            until,
            rows: BTreeMap::new(),
            totals: Totals::default(),
        }
    }

    /// Adds one call of `session`, priced by `table`; a call outside the dates is left out.
    pub fn add(&mut self, session: &str, call: &Call, table: &PriceTable) {
        let day = utc_day(call.timestamp_ms);
        if self
            .since
            .as_deref()
            .is_some_and(|since| day.as_str() < since)
            || self
                .until
                .as_deref()
                .is_some_and(|until| day.as_str() > until)
        {
            return;
        }
        let key = match self.by {
            GroupBy::Day => day,
            GroupBy::Week => week_of(call.timestamp_ms),
            GroupBy::Month => day[..7].to_owned(),
            GroupBy::Session => session.to_owned(),
            GroupBy::Model => call.model.clone(),
        };
        let row = self.rows.entry(key).or_insert_with_key(|key| Row {
            key: key.clone(),
            ..Row::default()
        });
        row.totals.add_call(call, table);
        row.models
            .entry(call.model.clone())
            .or_default()
            .add_call(call, table);
        self.totals.add_call(call, table);
    }

    /// What the rows are.
    pub fn by(&self) -> GroupBy {
        self.by
    }

    /// The rows in key order (days, weeks and months oldest first).
    pub fn rows(&self) -> impl Iterator<Item = &Row> {
        self.rows.values()
    }

    /// Every counted call summed.
    pub fn totals(&self) -> &Totals {
        &self.totals
    }
}

/// Milliseconds since the epoch as a UTC day, `YYYY-MM-DD`.
pub fn utc_day(timestamp_ms: u64) -> String {
    let (y, m, d) = civil_from_days(days_of(timestamp_ms));
    format!("{y:04}-{m:02}-{d:02}")
}

/// The Monday (UTC) of the week `timestamp_ms` falls in, `YYYY-MM-DD`.
fn week_of(timestamp_ms: u64) -> String {
    let days = days_of(timestamp_ms);
    // 1970-01-01 was a Thursday: three days after a Monday.
    let monday = days - (days + 3).rem_euclid(7);
    let (y, m, d) = civil_from_days(monday);
    format!("{y:04}-{m:02}-{d:02}")
}

fn days_of(timestamp_ms: u64) -> i64 {
    i64::try_from(timestamp_ms / 86_400_000).unwrap_or(i64::MAX / 2)
}

/// Howard Hinnant's `civil_from_days`: the proleptic Gregorian date of a day count since
/// 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    // Both are small by construction (1..=31, 1..=12).
    (
        y,
        u32::try_from(m).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    )
}

/// Reads a date as `cuca cost --since` takes it, `YYYY-MM-DD` or `YYYYMMDD` (ccusage's
/// form), into `YYYY-MM-DD`; `None` when it is neither.
pub fn parse_day(text: &str) -> Option<String> {
    let digits: String = text.chars().filter(|c| *c != '-').collect();
    let dashed = text.contains('-');
    if digits.len() != 8 || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    if dashed && (text.len() != 10 || &text[4..5] != "-" || &text[7..8] != "-") {
        return None;
    }
    let month: u32 = digits[4..6].parse().ok()?;
    let day: u32 = digits[6..8].parse().ok()?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    Some(format!(
        "{}-{}-{}",
        &digits[..4],
        &digits[4..6],
        &digits[6..8]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_weeks_and_months_are_utc() {
        // 2026-12-02 18:00 UTC, a Wednesday.
        let ms = 1_796_234_400_000;
        assert_eq!(utc_day(ms), "2026-12-02");
        assert_eq!(week_of(ms), "2026-11-30");
        assert_eq!(utc_day(0), "1970-01-01");
        assert_eq!(week_of(0), "1969-12-29");
        assert_eq!(utc_day(951_782_400_000), "2000-02-29");
    }

    #[test]
    fn dates_read_in_both_forms_and_nothing_else() {
        assert_eq!(parse_day("2026-12-02").as_deref(), Some("2026-12-02"));
        assert_eq!(parse_day("20261202").as_deref(), Some("2026-12-02"));
        assert_eq!(parse_day("2026-13-02"), None);
        assert_eq!(parse_day("2026-1-202"), None);
        assert_eq!(parse_day("yesterday"), None);
    }
}
