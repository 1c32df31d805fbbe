//! What a turn and a session cost, in the words the pages show.

use cuca_cost::{CallReader, Totals};

use crate::sessions::RecordView;

/// The cost of the call a turn's records hold, priced by the configured table, in words
/// (`$0.006457`, `cost unknown`); `None` when the records close no call.
pub(crate) fn turn_words(records: &[RecordView]) -> Option<String> {
    let table = cuca_cost::configured().ok()?;
    let mut reader = CallReader::default();
    let mut totals = Totals::default();
    for record in records {
        if let Some(call) = reader.see(record.sequence, record.timestamp_ms, &record.event) {
            totals.add_call(&call, table);
        }
    }
    (totals.n_calls > 0).then(|| words(&totals))
}

/// A sum in words: `$0.006457`; `$0.01 + unknown` when some calls' models have no price;
/// `unknown` when none has.
pub(crate) fn words(totals: &Totals) -> String {
    match totals.known_cost() {
        Some(cost) => format!("${cost:.6}"),
        None if totals.n_unpriced < totals.n_calls => format!("${:.6} + unknown", totals.cost),
        None => "unknown".to_owned(),
    }
}

/// Which table priced the page's figures, with its date.
pub(crate) fn priced_by() -> String {
    match cuca_cost::configured() {
        Ok(table) => format!("priced by {}", table.source()),
        Err(error) => error.to_string(),
    }
}
