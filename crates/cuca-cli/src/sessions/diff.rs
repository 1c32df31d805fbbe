//! `cuca diff DIR A B`: where two sessions part (a fork and its parent, a rerun and its
//! recording) — the records they share from the start, the first that differs, then both
//! tails side by side.

use std::io::Write;

use cuca::{PluginError, SessionBackend, SessionEvent, SessionRecord};
use serde_json::json;

use super::show::preview;
use super::stdout;
use crate::error::CliError;
use crate::store::Store;
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

/// Reads `session`'s records into `tx` one at a time, less the audit record of a fork taken
/// for `other`, on its own thread: the two sessions are compared in lockstep, and neither is
/// held whole (the session commands keep no session in memory).
fn feed(
    backend: &dyn SessionBackend,
    session: &str,
    other: &str,
    tx: &std::sync::mpsc::SyncSender<SessionRecord>,
) -> Result<(), PluginError> {
    backend.replay_each(session, &mut |record| {
        if matches!(&record.event, SessionEvent::Fork { to_session, .. } if to_session == other) {
            return Ok(());
        }
        tx.send(record.into_owned())
            .map_err(|_| PluginError::validation("diff", "the comparison stopped"))
    })
}

/// What one tail cost so far.
#[derive(Default)]
struct Totals {
    records: u64,
    prompt: u64,
    completion: u64,
    ms: u64,
}

impl Totals {
    fn add(&mut self, record: Option<&SessionRecord>) {
        let Some(record) = record else { return };
        self.records += 1;
        let (prompt, completion, ms) = totals(std::slice::from_ref(record));
        self.prompt += prompt;
        self.completion += completion;
        self.ms += ms;
    }
}

/// `cuca diff DIR A B [--json]`: text, or JSON Lines — a head object (`a`, `b`, `common`),
/// one `{"a": record|null, "b": record|null}` line per pair of tail records, and a closing
/// object with each tail's totals.
pub(crate) fn diff(store: &Store, a: &str, b: &str, as_json: bool) -> Result<(), CliError> {
    let backend = store.backend();
    for id in [a, b] {
        if backend
            .replay_each(id, &mut |_| {
                Err(PluginError::validation("diff", "one is enough"))
            })
            .is_ok()
        {
            return Err(CliError::Usage(format!(
                "session {id:?} has no records in {}",
                store.describe()
            )));
        }
    }
    let mut out = stdout();
    let (left_tx, left) = std::sync::mpsc::sync_channel::<SessionRecord>(64);
    let (right_tx, right) = std::sync::mpsc::sync_channel::<SessionRecord>(64);
    std::thread::scope(|scope| -> Result<(), CliError> {
        // Each reader owns its sender, so its channel closes when it has read its session.
        let readers = [
            scope.spawn(move || feed(backend, a, b, &left_tx)),
            scope.spawn(move || feed(backend, b, a, &right_tx)),
        ];
        let compared = compare(&mut out, a, b, as_json, &left, &right);
        // Stop the readers (a reader blocked on a full channel sees it closed).
        drop((left, right));
        for reader in readers {
            match reader.join() {
                Ok(Ok(())) => {}
                // A reader stopped because the comparison was over is no failure; one that
                // could not read its session is, unless the comparison failed first.
                Ok(Err(error))
                    if compared.is_ok()
                        && !error.to_string().contains("the comparison stopped") =>
                {
                    return Err(error.into());
                }
                Ok(Err(_)) => {}
                Err(_) => return Err(CliError::Failed("a session reader stopped".into())),
            }
        }
        compared
    })?;
    out.flush()?;
    Ok(())
}

fn compare(
    out: &mut dyn Write,
    a: &str,
    b: &str,
    as_json: bool,
    left: &std::sync::mpsc::Receiver<SessionRecord>,
    right: &std::sync::mpsc::Receiver<SessionRecord>,
) -> Result<(), CliError> {
    let mut common = 0u64;
    let (mut x, mut y) = (left.recv().ok(), right.recv().ok());
    while let (Some(p), Some(q)) = (&x, &y) {
        if p.event != q.event {
            break;
        }
        common += 1;
        x = left.recv().ok();
        y = right.recv().ok();
    }
    if as_json {
        writeln!(out, "{}", json!({"a": a, "b": b, "common": common}))?;
    } else {
        writeln!(
            out,
            "{} and {} share their first {} records",
            line(a),
            line(b),
            common
        )?;
        match (&x, &y) {
            (None, None) => {
                writeln!(out, "no difference")?;
                return Ok(());
            }
            (Some(p), Some(q)) => writeln!(
                out,
                "first difference: {}:{} {} against {}:{} {}",
                line(a),
                p.sequence,
                p.event.kind(),
                line(b),
                q.sequence,
                q.event.kind()
            )?,
            (Some(_), None) => writeln!(out, "{} ends there; {} goes on", line(b), line(a))?,
            (None, Some(_)) => writeln!(out, "{} ends there; {} goes on", line(a), line(b))?,
        }
        writeln!(out, "{:<w$} | {}", line(a), line(b), w = SIDE_CHARS + 1)?;
    }
    let (mut left_totals, mut right_totals) = (Totals::default(), Totals::default());
    while x.is_some() || y.is_some() {
        left_totals.add(x.as_ref());
        right_totals.add(y.as_ref());
        if as_json {
            writeln!(out, "{}", json!({"a": x, "b": y}))?;
        } else {
            writeln!(
                out,
                "{:<w$} | {}",
                cell(x.as_ref()),
                cell(y.as_ref()),
                w = SIDE_CHARS + 1
            )?;
        }
        x = x.and_then(|_| left.recv().ok());
        y = y.and_then(|_| right.recv().ok());
    }
    for (id, side, t) in [(a, "a_tail", &left_totals), (b, "b_tail", &right_totals)] {
        if as_json {
            writeln!(
                out,
                "{}",
                json!({side: {"session": id, "records": t.records, "prompt_tokens": t.prompt, "completion_tokens": t.completion, "duration_ms": t.ms}})
            )?;
        } else {
            writeln!(
                out,
                "{}: {} records after the shared ones, {} prompt / {} completion tokens, {} ms",
                line(id),
                t.records,
                t.prompt,
                t.completion,
                t.ms
            )?;
        }
    }
    Ok(())
}
