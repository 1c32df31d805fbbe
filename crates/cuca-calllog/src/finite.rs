//! Taking a number JSON cannot spell off a row, and naming it in words on the row instead.
//!
//! A row is never lost over a value: the wait controller's `+Inf` when it holds no
//! alternative lane would otherwise cost the whole row, and a row that vanishes is a call
//! that reads as in flight forever.

use crate::Record;

/// Replaces every non-finite float on `record` with zero (so it is omitted) and appends one
/// sentence to [`Record::note`] naming each field and the value it held.
pub(crate) fn take_non_finite(record: &mut Record) {
    let mut named: Vec<String> = Vec::new();
    for (field, value) in [
        ("retry_after", &mut record.retry_after),
        ("waste_usd", &mut record.waste_usd),
        ("wait_s", &mut record.wait_s),
        ("cost_s", &mut record.cost_s),
        ("cost", &mut record.cost),
    ] {
        if !value.is_finite() {
            named.push(format!("{field} was {}", spell(*value)));
            *value = 0.0;
        }
    }
    if named.is_empty() {
        return;
    }
    let sentence = format!(
        "{}, which JSON cannot spell: taken off the row",
        named.join(" and ")
    );
    if record.note.is_empty() {
        record.note = sentence;
    } else {
        record.note.push_str("; ");
        record.note.push_str(&sentence);
    }
}

fn spell(value: f64) -> &'static str {
    if value.is_nan() {
        "NaN"
    } else if value > 0.0 {
        "+Inf"
    } else {
        "-Inf"
    }
}
