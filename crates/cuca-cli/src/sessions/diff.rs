//! `cuca diff DIR A B`: where two sessions part (a fork and its parent, a rerun and its
//! recording) — the records they share from the start, the first that differs, then both
//! tails side by side.

use std::io::Write;
use std::sync::mpsc::Receiver;

use cuca::{PluginError, SessionBackend, SessionEvent, SessionRecord};
use serde_json::json;

use super::show::preview;
use super::stdout;
use crate::error::CliError;
use crate::store::Store;
use crate::term::line;
use crate::ui;

/// The bytes of a joined run's text kept for its preview: more than the widest terminal
/// shows of one side, so a run of any length previews in bounded memory.
const MAX_PREVIEW_BYTES: usize = 4096;

/// Between the two sides of a row.
const SEPARATOR: &str = " | ";

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

/// `text` cut to `width` characters, with `…` as its last when cut.
fn clip_to(text: &str, width: usize) -> String {
    match text.char_indices().nth(width.saturating_sub(1)) {
        Some((cut, _)) if text.chars().count() > width => format!("{}…", &text[..cut]),
        _ => text.to_owned(),
    }
}

/// The text a streamed record adds to its run, and the run's kind; `None` for a record that
/// is not streamed.
fn streamed(event: &SessionEvent) -> Option<(&'static str, &str)> {
    match event {
        SessionEvent::Output { text } => Some(("Output", text)),
        SessionEvent::Reasoning { text } => Some(("Reasoning", text)),
        _ => None,
    }
}

/// FNV-1a, 64 bits: a run's text is compared by length and digest, fed piece by piece, so a
/// run of any length is compared without being kept.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv(mut digest: u64, bytes: &[u8]) -> u64 {
    for byte in bytes {
        digest ^= u64::from(*byte);
        digest = digest.wrapping_mul(FNV_PRIME);
    }
    digest
}

/// What makes two rows equal: the record's event, or a run's kind and text.
#[derive(Debug, PartialEq)]
enum Key {
    Event(SessionEvent),
    Run {
        kind: &'static str,
        bytes: usize,
        digest: u64,
    },
}

/// One row of a tail in the text table: a record, or consecutive streamed records of one
/// kind (an answer's tokens) joined into the one text they stream, as `replay` joins them.
#[derive(Debug)]
struct Entry {
    first: u64,
    records: u64,
    kind: &'static str,
    preview: String,
    key: Key,
}

impl Entry {
    /// `   12 Output ×29 "The tool returned: ALPHA"`, cut to `width` characters.
    fn cell(&self, width: usize) -> String {
        let kind = if self.records > 1 {
            format!("{} ×{}", self.kind, self.records)
        } else {
            self.kind.to_owned()
        };
        clip_to(
            &format!("{:>5} {:<12} {}", self.first, kind, self.preview),
            width,
        )
    }
}

/// A streamed run being joined: its kind, first record, record count, the start of its text
/// (up to [`MAX_PREVIEW_BYTES`]) and the length and digest of all of it.
#[derive(Debug, Clone)]
struct Run {
    kind: &'static str,
    first: u64,
    records: u64,
    preview: String,
    bytes: usize,
    digest: u64,
}

impl Run {
    fn new(kind: &'static str, first: u64) -> Run {
        Run {
            kind,
            first,
            records: 0,
            preview: String::new(),
            bytes: 0,
            digest: FNV_OFFSET,
        }
    }

    fn add(&mut self, text: &str) {
        self.records += 1;
        self.bytes += text.len();
        self.digest = fnv(self.digest, text.as_bytes());
        for c in text.chars() {
            if self.preview.len() + c.len_utf8() > MAX_PREVIEW_BYTES {
                break;
            }
            self.preview.push(c);
        }
    }

    fn entry(self) -> Entry {
        Entry {
            first: self.first,
            records: self.records,
            kind: self.kind,
            preview: format!("\"{}\"", line(&self.preview)),
            key: Key::Run {
                kind: self.kind,
                bytes: self.bytes,
                digest: self.digest,
            },
        }
    }
}

/// One session's tail, read entry by entry, with what it cost.
struct Side<'r> {
    records: &'r Receiver<SessionRecord>,
    next: Option<SessionRecord>,
    /// The shared start of the streamed run the first difference is in: the tail's first row
    /// is that whole run, not the part of it after the shared records.
    seed: Option<Run>,
    totals: Totals,
}

impl Side<'_> {
    fn take(&mut self) -> Option<SessionRecord> {
        let record = self.next.take()?;
        self.next = self.records.recv().ok();
        self.totals.add(Some(&record));
        Some(record)
    }

    /// The next row: one record, or a run of streamed records joined.
    fn entry(&mut self) -> Option<Entry> {
        let mut run = match self.seed.take() {
            Some(seed) => seed,
            None => {
                let record = self.take()?;
                let Some((kind, text)) = streamed(&record.event) else {
                    return Some(Entry {
                        first: record.sequence,
                        records: 1,
                        kind: record.event.kind(),
                        preview: line(&preview(&record.event)).to_string(),
                        key: Key::Event(record.event),
                    });
                };
                let mut run = Run::new(kind, record.sequence);
                run.add(text);
                run
            }
        };
        while let Some(next) = &self.next {
            match streamed(&next.event) {
                Some((kind, text)) if kind == run.kind => run.add(text),
                _ => break,
            }
            self.take();
        }
        Some(run.entry())
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

/// The models a side's calls were made with: the first a call asked for by name
/// (`CallRequest`) and the first that answered (`CallFinish`) — the viewer's compare page
/// reads them the same way.
#[derive(Default, Clone)]
struct Models {
    requested: Option<String>,
    answered: Option<String>,
}

impl Models {
    /// Notes the model `event` names; `first_only`: keep the first of each kind (a tail), else
    /// the last (the shared records, whose last call is where the tails part).
    fn see(&mut self, event: &SessionEvent, first_only: bool) {
        let (slot, model) = match event {
            SessionEvent::CallRequest { model, .. } if !model.is_empty() => {
                (&mut self.requested, model)
            }
            SessionEvent::CallFinish { model, .. } if !model.is_empty() => {
                (&mut self.answered, model)
            }
            _ => return,
        };
        if slot.is_none() || !first_only {
            *slot = Some(model.clone());
        }
    }

    fn or(&self, shared: &Models) -> Models {
        Models {
            requested: self.requested.clone().or_else(|| shared.requested.clone()),
            answered: self.answered.clone().or_else(|| shared.answered.clone()),
        }
    }
}

/// The two sides' models when the second's calls were made with another model than the
/// first's: the requested models when both name one, else those that answered.
fn model_switch(a: &Models, b: &Models, shared: &Models) -> Option<(String, String)> {
    let (a, b) = (a.or(shared), b.or(shared));
    let pair = match (a.requested, b.requested) {
        (Some(x), Some(y)) => (x, y),
        _ => (a.answered?, b.answered?),
    };
    (pair.0 != pair.1).then_some(pair)
}

/// What one tail cost so far.
#[derive(Default)]
struct Totals {
    records: u64,
    prompt: u64,
    completion: u64,
    ms: u64,
    models: Models,
}

impl Totals {
    fn add(&mut self, record: Option<&SessionRecord>) {
        let Some(record) = record else { return };
        self.records += 1;
        self.models.see(&record.event, true);
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
    // The streamed run the shared records end in, as each side numbers it.
    let mut shared_run: Option<(Run, u64)> = None;
    let mut shared_models = Models::default();
    let (mut x, mut y) = (left.recv().ok(), right.recv().ok());
    while let (Some(p), Some(q)) = (&x, &y) {
        if p.event != q.event {
            break;
        }
        common += 1;
        shared_models.see(&p.event, false);
        shared_run = match (streamed(&p.event), shared_run.take()) {
            (Some((kind, text)), Some((mut run, first_b))) if run.kind == kind => {
                run.add(text);
                Some((run, first_b))
            }
            (Some((kind, text)), _) => {
                let mut run = Run::new(kind, p.sequence);
                run.add(text);
                Some((run, q.sequence))
            }
            (None, _) => None,
        };
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
            (Some(p), Some(q)) => {
                writeln!(
                    out,
                    "first difference: {}:{} {} against {}:{} {}",
                    line(a),
                    p.sequence,
                    p.event.kind(),
                    line(b),
                    q.sequence,
                    q.event.kind()
                )?;
                // Where in the two records, in context: a long prompt that differs late
                // shows the line that differs, not two identical beginnings.
                if let Some(at) = cuca_proxy::FirstDifference::of_events(&p.event, &q.event) {
                    writeln!(
                        out,
                        "  at {}, character {}:\n    {}: {}\n    {}: {}",
                        at.path,
                        at.offset,
                        line(a),
                        line(&at.expected),
                        line(b),
                        line(&at.got)
                    )?;
                }
            }
            (Some(_), None) => writeln!(out, "{} ends there; {} goes on", line(b), line(a))?,
            (None, Some(_)) => writeln!(out, "{} ends there; {} goes on", line(a), line(b))?,
        }
    }
    let (left_totals, right_totals) = if as_json {
        let (mut left_totals, mut right_totals) = (Totals::default(), Totals::default());
        while x.is_some() || y.is_some() {
            left_totals.add(x.as_ref());
            right_totals.add(y.as_ref());
            writeln!(out, "{}", json!({"a": x, "b": y}))?;
            x = x.and_then(|_| left.recv().ok());
            y = y.and_then(|_| right.recv().ok());
        }
        (left_totals, right_totals)
    } else {
        let seeds = shared_run.map(|(run, first_b)| {
            let mut b = run.clone();
            b.first = first_b;
            (run, b)
        });
        table(out, (a, b), (x, y), (left, right), seeds)?
    };
    let switch = model_switch(&left_totals.models, &right_totals.models, &shared_models);
    if let (Some((from, to)), false) = (&switch, as_json) {
        writeln!(
            out,
            "model switch: {} asked for {}, {} for {}",
            line(a),
            line(from),
            line(b),
            line(to)
        )?;
    }
    for (id, side, t) in [(a, "a_tail", &left_totals), (b, "b_tail", &right_totals)] {
        if as_json {
            let models = t.models.or(&shared_models);
            let model = models.requested.or(models.answered);
            writeln!(
                out,
                "{}",
                json!({side: {"session": id, "records": t.records, "prompt_tokens": t.prompt, "completion_tokens": t.completion, "duration_ms": t.ms, "model": model, "model_switched": switch.is_some()}})
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

/// The text tails side by side, as wide as the terminal (`ui::columns`): a row per record,
/// streamed runs joined (the run the first difference is in from its start, shared records
/// included), and rows whose two sides are equal dimmed on a colour terminal so
/// the difference stands out. Returns what each tail cost.
fn table(
    out: &mut dyn Write,
    (a, b): (&str, &str),
    (x, y): (Option<SessionRecord>, Option<SessionRecord>),
    (left, right): (&Receiver<SessionRecord>, &Receiver<SessionRecord>),
    seeds: Option<(Run, Run)>,
) -> Result<(Totals, Totals), CliError> {
    let side = ui::columns().saturating_sub(SEPARATOR.len()) / 2;
    let (dim, undim) = if ui::stdout_color() {
        ("\x1b[2m", "\x1b[0m")
    } else {
        ("", "")
    };
    let pad = |text: String| {
        let n = text.chars().count();
        format!("{text}{}", " ".repeat(side.saturating_sub(n)))
    };
    writeln!(
        out,
        "{}{SEPARATOR}{}",
        pad(clip_to(&line(a).to_string(), side)),
        clip_to(&line(b).to_string(), side)
    )?;
    let (seed_a, seed_b) = seeds.unzip();
    let mut left = Side {
        records: left,
        next: x,
        seed: seed_a,
        totals: Totals::default(),
    };
    let mut right = Side {
        records: right,
        next: y,
        seed: seed_b,
        totals: Totals::default(),
    };
    loop {
        let (p, q) = (left.entry(), right.entry());
        if p.is_none() && q.is_none() {
            break;
        }
        let equal = matches!((&p, &q), (Some(p), Some(q)) if p.key == q.key);
        let row = format!(
            "{}{SEPARATOR}{}",
            pad(p.map_or_else(String::new, |p| p.cell(side))),
            q.map_or_else(String::new, |q| q.cell(side))
        );
        if equal {
            writeln!(out, "{dim}{}{undim}", row.trim_end())?;
        } else {
            writeln!(out, "{}", row.trim_end())?;
        }
    }
    Ok((left.totals, right.totals))
}
