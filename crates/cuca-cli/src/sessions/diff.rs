//! `cuca diff DIR A B`: where two sessions part (a fork and its parent, a rerun and its
//! recording) — the records they share from the start, the first that differs, then both
//! tails side by side (issue 31 item 4).

use std::io::Write;
use std::path::Path;

use cuca::{SessionBackend, SessionEvent, SessionRecord};
use serde_json::json;

use super::show::preview;
use super::{open_dir, stdout};
use crate::error::CliError;
use crate::term::line;

/// How wide one side's preview is in the text table.
const SIDE_CHARS: usize = 48;

/// What a tail cost: its tokens and its calls' wall time.
fn totals(tail: &[SessionRecord]) -> (u64, u64, u64) {
    let (mut prompt, mut completion, mut ms) = (0, 0, 0);
    for record in tail {
        match record.event {
            SessionEvent::TokenUsage {
                prompt_tokens,
                completion_tokens,
            } => {
                prompt += prompt_tokens;
                completion += completion_tokens;
            }
            SessionEvent::Latency { duration_ms } => ms += duration_ms,
            _ => {}
        }
    }
    (prompt, completion, ms)
}

fn cell(record: Option<&SessionRecord>) -> String {
    match record {
        None => String::new(),
        Some(record) => {
            let text = format!(
                "{:>5} {:<12} {}",
                record.sequence,
                record.event.kind(),
                preview(&record.event)
            );
            let text = line(&text).to_string();
            match text.char_indices().nth(SIDE_CHARS) {
                Some((cut, _)) => format!("{}…", &text[..cut]),
                None => text,
            }
        }
    }
}

/// `cuca diff DIR A B [--json]`.
pub(crate) fn diff(dir: &Path, a: &str, b: &str, as_json: bool) -> Result<(), CliError> {
    let backend = open_dir(dir)?;
    // The audit record a parent got when the other session was forked from it says only
    // that: it is left out, so a fork and its parent part where their calls do.
    let audit_of = |records: Vec<SessionRecord>, other: &str| -> Vec<SessionRecord> {
        records
            .into_iter()
            .filter(|r| !matches!(&r.event, SessionEvent::Fork { to_session, .. } if to_session == other))
            .collect()
    };
    let left = audit_of(backend.replay(a)?, b);
    let right = audit_of(backend.replay(b)?, a);
    for (id, records) in [(a, &left), (b, &right)] {
        if records.is_empty() {
            return Err(CliError::Usage(format!(
                "session {id:?} has no records in {}",
                dir.display()
            )));
        }
    }
    let common = left
        .iter()
        .zip(&right)
        .take_while(|(x, y)| x.event == y.event)
        .count();
    let (left_tail, right_tail) = (&left[common..], &right[common..]);
    let mut out = stdout();
    if as_json {
        let side = |tail: &[SessionRecord]| {
            let (prompt, completion, ms) = totals(tail);
            json!({
                "records": tail,
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "duration_ms": ms,
            })
        };
        let value = json!({
            "a": a,
            "b": b,
            "common": common,
            "a_tail": side(left_tail),
            "b_tail": side(right_tail),
        });
        writeln!(out, "{value}")?;
        out.flush()?;
        return Ok(());
    }
    writeln!(
        out,
        "{} and {} share their first {} records",
        line(a),
        line(b),
        common
    )?;
    if left_tail.is_empty() && right_tail.is_empty() {
        writeln!(out, "no difference")?;
        out.flush()?;
        return Ok(());
    }
    match (left_tail.first(), right_tail.first()) {
        (Some(x), Some(y)) => writeln!(
            out,
            "first difference: {}:{} {} against {}:{} {}",
            line(a),
            x.sequence,
            x.event.kind(),
            line(b),
            y.sequence,
            y.event.kind()
        )?,
        (Some(_), None) => writeln!(out, "{} ends there; {} goes on", line(b), line(a))?,
        (None, _) => writeln!(out, "{} ends there; {} goes on", line(a), line(b))?,
    }
    writeln!(out, "{:<w$} | {}", line(a), line(b), w = SIDE_CHARS + 1)?;
    for i in 0..left_tail.len().max(right_tail.len()) {
        writeln!(
            out,
            "{:<w$} | {}",
            cell(left_tail.get(i)),
            cell(right_tail.get(i)),
            w = SIDE_CHARS + 1
        )?;
    }
    for (id, tail) in [(a, left_tail), (b, right_tail)] {
        let (prompt, completion, ms) = totals(tail);
        writeln!(
            out,
            "{}: {} records after the shared ones, {prompt} prompt / {completion} completion tokens, {ms} ms",
            line(id),
            tail.len()
        )?;
    }
    out.flush()?;
    Ok(())
}
