//! A fork against its parent: the records they share from the start, the
//! first that differs, and both tails side by side with what each cost.
//!
//! The rule is `cuca diff`'s (`crates/cuca-cli/src/sessions/diff.rs`), kept the same so the
//! page and the command agree: the two sessions are read in lockstep, each on its own
//! thread, records compared by event; the parent's audit record of the fork taken for the
//! other side is skipped; neither session is held whole.

use std::collections::BTreeSet;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use cuca_events::{PluginError, SessionBackend, SessionEvent};

use crate::error::ViewError;
use crate::sessions::{self, clip, RecordView};
use crate::ViewConfig;

/// Most records of each tail the page shows; the totals count the whole tail.
pub const MAX_TAIL_SHOWN: usize = 2_000;

/// Text each tail shows at most, as a turn's budget ([`sessions::MAX_TURN_TEXT_BYTES`]).
const TAIL_TEXT_BYTES: usize = sessions::MAX_TURN_TEXT_BYTES;

/// What one tail holds and cost.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Tail {
    /// The session.
    pub session: String,
    /// Its first records after the shared ones (at most [`MAX_TAIL_SHOWN`], text clipped).
    pub records: Vec<RecordView>,
    /// Records after the shared ones.
    pub n_records: u64,
    /// Prompt tokens over the tail.
    pub prompt_tokens: u64,
    /// Completion tokens over the tail.
    pub completion_tokens: u64,
    /// Call wall time over the tail, milliseconds.
    pub duration_ms: u64,
    /// Bytes of text clipped from the records shown.
    pub clipped_bytes: u64,
    /// Sequences of the records shown whose text was clipped: such a record is never called
    /// equal to the other side's, since the text left out may differ.
    pub clipped: BTreeSet<u64>,
    /// The models the tail's calls were made with.
    pub models: Models,
}

/// The models one side's calls were made with: the first a call asked for (a `CallRequest`
/// naming one) and the first that answered (`CallFinish`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Models {
    /// The first model a call asked for by name.
    pub requested: Option<String>,
    /// The first model that answered.
    pub answered: Option<String>,
}

impl Models {
    /// Notes the model `event` names, if it is the first of its kind.
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

    /// This side's models, falling back to `shared`'s (the last ones of the shared records)
    /// where the tail made no call of its own.
    fn or(&self, shared: &Models) -> Models {
        Models {
            requested: self.requested.clone().or_else(|| shared.requested.clone()),
            answered: self.answered.clone().or_else(|| shared.answered.clone()),
        }
    }
}

impl Tail {
    fn take(&mut self, mut record: RecordView, budget: &mut usize) {
        self.n_records += 1;
        self.models.see(&record.event, true);
        match record.event {
            SessionEvent::TokenUsage {
                prompt_tokens,
                completion_tokens,
            } => {
                self.prompt_tokens += prompt_tokens;
                self.completion_tokens += completion_tokens;
            }
            SessionEvent::Latency { duration_ms } => self.duration_ms += duration_ms,
            _ => {}
        }
        if self.records.len() < MAX_TAIL_SHOWN {
            let clipped = clip::clip_event(&mut record.event, budget);
            if clipped > 0 {
                self.clipped.insert(record.sequence);
            }
            self.clipped_bytes += clipped;
            self.records.push(record);
        }
    }
}

/// Two sessions compared.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Comparison {
    /// Records both start with.
    pub common: u64,
    /// The parent's (left) tail, from its first divergent record.
    pub left: Tail,
    /// The fork's (right) tail.
    pub right: Tail,
    /// The last models the shared records name.
    pub shared_models: Models,
}

impl Comparison {
    /// The parent's model and the fork's, when the fork's calls were made with another
    /// model: the requested models compared when both sides name one, else the models that
    /// answered. A side whose tail made no call counts with the shared records' last model.
    pub fn model_switch(&self) -> Option<(String, String)> {
        let left = self.left.models.or(&self.shared_models);
        let right = self.right.models.or(&self.shared_models);
        let pair = match (left.requested, right.requested) {
            (Some(a), Some(b)) => (a, b),
            _ => (left.answered?, right.answered?),
        };
        (pair.0 != pair.1).then_some(pair)
    }
}

fn feed(
    backend: &dyn SessionBackend,
    session: &str,
    other: &str,
    tx: &SyncSender<RecordView>,
) -> Result<(), PluginError> {
    backend.replay_each(session, &mut |record| {
        if matches!(&record.event, SessionEvent::Fork { to_session, .. } if to_session == other) {
            return Ok(());
        }
        tx.send(RecordView::from(record))
            .map_err(|_| PluginError::validation("compare", "the comparison stopped"))
    })
}

/// Most sessions the compare page sets side by side against one.
pub const MAX_COMPARED: usize = 8;

// `view.css` has a grid for each count of columns up to eight (`.compare.cols-8`).
const _: () = assert!(MAX_COMPARED == 8);

/// Compares each of `forks` (at most [`MAX_COMPARED`] are read) with `base`, in order.
pub fn compare_many(
    config: &ViewConfig,
    base: &str,
    forks: &[String],
) -> Result<Vec<Comparison>, ViewError> {
    forks
        .iter()
        .take(MAX_COMPARED)
        .map(|fork| compare(config, base, fork))
        .collect()
}

/// Compares `left` (the parent) with `right` (the fork).
pub fn compare(config: &ViewConfig, left: &str, right: &str) -> Result<Comparison, ViewError> {
    let left_backend = sessions::locate(config, left)?;
    let right_backend = sessions::locate(config, right)?;
    let (left_tx, left_rx) = sync_channel::<RecordView>(64);
    let (right_tx, right_rx) = sync_channel::<RecordView>(64);
    std::thread::scope(|scope| {
        let (lb, rb) = (&left_backend, &right_backend);
        let readers = [
            scope.spawn(move || feed(lb, left, right, &left_tx)),
            scope.spawn(move || feed(rb, right, left, &right_tx)),
        ];
        let comparison = lockstep(left, right, &left_rx, &right_rx);
        drop((left_rx, right_rx));
        for reader in readers {
            match reader.join() {
                Ok(Err(error)) if !error.to_string().contains("the comparison stopped") => {
                    return Err(ViewError::Store(error));
                }
                Ok(_) => {}
                Err(_) => {
                    return Err(ViewError::Store(PluginError::validation(
                        "compare",
                        "a session reader stopped",
                    )))
                }
            }
        }
        Ok(comparison)
    })
}

fn lockstep(
    left: &str,
    right: &str,
    left_rx: &Receiver<RecordView>,
    right_rx: &Receiver<RecordView>,
) -> Comparison {
    let mut comparison = Comparison {
        left: Tail {
            session: left.to_owned(),
            ..Tail::default()
        },
        right: Tail {
            session: right.to_owned(),
            ..Tail::default()
        },
        ..Comparison::default()
    };
    let (mut x, mut y) = (left_rx.recv().ok(), right_rx.recv().ok());
    while let (Some(p), Some(q)) = (&x, &y) {
        if p.event != q.event {
            break;
        }
        comparison.common += 1;
        comparison.shared_models.see(&p.event, false);
        x = left_rx.recv().ok();
        y = right_rx.recv().ok();
    }
    let (mut left_budget, mut right_budget) = (TAIL_TEXT_BYTES, TAIL_TEXT_BYTES);
    if let Some(first) = x {
        comparison.left.take(first, &mut left_budget);
        for record in left_rx.iter() {
            comparison.left.take(record, &mut left_budget);
        }
    }
    if let Some(first) = y {
        comparison.right.take(first, &mut right_budget);
        for record in right_rx.iter() {
            comparison.right.take(record, &mut right_budget);
        }
    }
    comparison
}
