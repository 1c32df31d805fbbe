//! `Attempt`: the drop guard that makes sure every start row gets an end row.

use std::time::{Duration, Instant};

use crate::record::{Ended, Record};
use crate::{CallLog, ResponseBody};

/// One attempt in flight: its start row is written, and this guard writes its end row.
///
/// Every start row gets a row under it — that is the law [`Record::ended`] exists to keep.
/// The path that owns the call writes the end row with [`Attempt::finish`]; a path that gives
/// up says why with [`Attempt::end`]; and a guard dropped with neither (a `?` that returned
/// early, a future the caller dropped, a panic unwinding) writes an end row whose `ended` is
/// the word set by [`Attempt::on_drop`], [`Ended::Abandoned`] unless told otherwise.
///
/// The end row always carries the start row's `id`, `run`, `tag`, `node`, `model` and
/// `attempt` (filled in where the caller left them empty), so a reader filtering by run
/// never has to pair rows first, and `ms` (the time since [`CallLog::start`] when the caller
/// left it zero).
///
/// ```
/// use cuca_calllog::{CallLog, Ended, Record};
/// # let dir = tempfile::tempdir().unwrap();
/// let log = CallLog::builder().path(Some(dir.path().join("calls.jsonl"))).build();
///
/// // A call that comes back: the owning path writes the end row.
/// let call = log.start(Record { run: "r1".into(), model: "m".into(), ..Default::default() });
/// call.finish(Record { status: 200, finish: "stop".into(), ..Default::default() });
///
/// // A streamed call: while the response is awaited, dropping the future means the caller
/// // cancelled it.
/// let mut call = log.start(Record { run: "r1".into(), model: "m".into(), ..Default::default() });
/// call.on_drop(Ended::Cancelled);
/// drop(call); // writes {"ended":"cancelled",...}
///
/// let report = cuca_calllog::read_rows(dir.path().join("calls.jsonl")).unwrap();
/// assert_eq!(report.rows.len(), 4);
/// assert_eq!(report.rows[3].ended, "cancelled");
/// assert!(cuca_calllog::in_flight(&report.rows).is_empty());
/// ```
#[derive(Debug)]
#[must_use = "dropping an Attempt at once writes an `abandoned` end row"]
pub struct Attempt {
    log: CallLog,
    template: Record,
    started: Instant,
    on_drop: Ended,
    done: bool,
}

impl Attempt {
    pub(crate) fn new(log: CallLog, template: Record, started: Instant) -> Attempt {
        Attempt {
            log,
            template,
            started,
            on_drop: Ended::Abandoned,
            done: false,
        }
    }

    /// The id pairing this attempt's two rows.
    pub fn id(&self) -> &str {
        &self.template.id
    }

    /// The time since the start row was written.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The word a drop writes into [`Record::ended`] if nothing else wrote the end row. Set
    /// it as the call changes state: [`Ended::Cancelled`] while a future the caller may drop
    /// is awaiting the server, back to [`Ended::Abandoned`] once control is the owner's again.
    pub fn on_drop(&mut self, word: Ended) {
        self.on_drop = word;
    }

    /// What is known so far about this attempt, for the end row nobody on the path wrote.
    ///
    /// It starts as the start row's identity and request shape (`id`, `run`, `tag`, `node`,
    /// `model`, `effort`, `effort_pin`, `max_tokens`, `messages`, `tools`, `stream`,
    /// `attempt`, `relaxed`, `lane`). Fields the owning path sets here as the call goes on
    /// (the status once headers arrive, `ttft_ms` at the first token, `conn_reused`) are on
    /// the row a drop or [`Attempt::end`] writes, so a call the caller abandoned still says
    /// how far it got. [`Attempt::finish`] writes its own row and does not read them.
    pub fn known(&mut self) -> &mut Record {
        &mut self.template
    }

    /// Writes the end row the owning path assembled: the identity of the start row fills
    /// what `record` leaves empty, [`Record::phase`] is cleared, and `ms` is the elapsed time
    /// when zero. [`Record::ended`] is kept as given (normally empty).
    pub fn finish(mut self, record: Record) {
        self.done = true;
        let row = self.end_row(record);
        self.log.append(row);
    }

    /// [`Attempt::finish`] with the response body in a [`ResponseBody`]: under the bodies pin
    /// it is the row's `response_body`, whole, written without being copied into the row.
    pub fn finish_with_response(mut self, record: Record, body: ResponseBody) {
        self.done = true;
        let row = self.end_row(record);
        self.log.append_with_response(row, Some(body));
    }

    /// Writes an end row that says who closed the attempt and why (`hopped` when a retry
    /// begins, `deadline` on the client's timeout, ...), with what was [`Attempt::known`].
    pub fn end(mut self, word: Ended) {
        self.done = true;
        let row = self.known_row(word);
        self.log.append(row);
    }

    fn known_row(&self, word: Ended) -> Record {
        let mut row = self.template.clone();
        row.ts = String::new();
        row.ended = word.as_str().to_owned();
        row.ms = 0;
        self.end_row(row)
    }

    fn end_row(&self, mut record: Record) -> Record {
        let template = &self.template;
        record.phase = String::new();
        fill(&mut record.id, &template.id);
        fill(&mut record.run, &template.run);
        fill(&mut record.tag, &template.tag);
        fill(&mut record.node, &template.node);
        fill(&mut record.model, &template.model);
        if record.attempt == 0 {
            record.attempt = template.attempt;
        }
        if record.ms == 0 {
            record.ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        }
        record
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        let row = self.known_row(self.on_drop);
        self.log.append(row);
    }
}

fn fill(field: &mut String, from: &str) {
    if field.is_empty() {
        field.push_str(from);
    }
}
