//! Turn by turn without a trajectory: a session's turns handed over part by part as the
//! records arrive, so a reader of a session of any length holds one record at a time.

use std::ops::ControlFlow;

use cuca_events::{Message, MessageContentBlock, PluginError, SessionEvent};

use crate::trajectory::{ReplayCompletion, ReplayNote};
use crate::SessionReplay;

/// One part of a turn, in record order, as [`SessionReplay::each_turn`] and
/// [`TurnSplitter`] hand it over.
///
/// Every turn is `Start`, then its parts in the order their records were appended, then
/// `End`. The segmentation is [`SessionReplay::load`]'s: the same turns, each part the same
/// value the loaded [`crate::ReplayTurn`] would hold.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TurnPart {
    /// A turn begins with the record whose sequence is `first_sequence`.
    Start {
        /// The turn's index, from 0.
        turn: usize,
        /// The sequence of its first record.
        first_sequence: u64,
    },
    /// A [`SessionEvent::SystemPrompt`]'s text.
    SystemPrompt(String),
    /// A [`SessionEvent::Message`].
    Message(Message),
    /// A content block: Reasoning, Output, ToolCall or ToolResult, as replay streams it.
    Block(MessageContentBlock),
    /// A record that is neither content nor the terminator (a model swap, a fork audit, an
    /// unpaired Latency or TokenUsage).
    Note(ReplayNote),
    /// A [`SessionEvent::CallRequest`] or [`SessionEvent::CallFinish`]: the call metadata a
    /// session log writes when asked (what a loaded turn keeps apart as
    /// [`crate::ReplayTurn::call`]). It is in no other part and no count, as in a load.
    Call(SessionEvent),
    /// The turn ends: what it held, counted.
    End(TurnOutline),
}

/// What one turn held, counted: the turn without its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TurnOutline {
    /// The turn's index, from 0.
    pub turn: usize,
    /// The sequence of its first record.
    pub first_sequence: u64,
    /// The sequence of its last record.
    pub last_sequence: u64,
    /// Records in the turn, the terminator included.
    pub records: usize,
    /// SystemPrompt records.
    pub system_prompts: usize,
    /// Message records.
    pub messages: usize,
    /// Content blocks.
    pub blocks: usize,
    /// Notes of every kind.
    pub notes: usize,
    /// Notes that are audit records ([`ReplayNote::Fork`], [`ReplayNote::ModelSwap`]).
    pub audit_notes: usize,
    /// The Latency-then-TokenUsage pair that closed it; `None` for the open final turn.
    pub completion: Option<ReplayCompletion>,
}

impl TurnOutline {
    /// Whether a Latency-then-TokenUsage pair closed the turn.
    pub fn is_complete(&self) -> bool {
        self.completion.is_some()
    }

    /// Whether the turn holds audit notes and nothing else: what a fork of a finished
    /// session, or a model swap after its last call, leaves after the last pair. Such a turn
    /// is bookkeeping, not a call that never finished.
    pub fn holds_only_notes(&self) -> bool {
        self.completion.is_none() && self.audit_notes > 0 && self.audit_notes == self.records
    }
}

/// What a whole visit saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SessionOutline {
    /// Records visited.
    pub records: usize,
    /// Turns, the open final turn included.
    pub turns: usize,
    /// Content blocks across all turns.
    pub blocks: usize,
    /// Whether the visitor stopped the visit before the end.
    pub stopped: bool,
}

/// Segments records into [`TurnPart`]s as they are pushed, with [`SessionReplay::load`]'s
/// rule, keeping nothing of them: memory is one pending Latency and the turn's counts.
///
/// ```
/// use cuca_events::SessionEvent;
/// use cuca_replay::{TurnPart, TurnSplitter};
///
/// let mut ends = Vec::new();
/// let mut splitter = TurnSplitter::new("demo", |part| {
///     if let TurnPart::End(outline) = part {
///         ends.push((outline.turn, outline.records, outline.is_complete()));
///     }
///     Ok(std::ops::ControlFlow::Continue(()))
/// });
/// splitter.push(0, SessionEvent::Output { text: "noted".into() })?;
/// splitter.push(1, SessionEvent::Latency { duration_ms: 412 })?;
/// splitter.push(2, SessionEvent::TokenUsage { prompt_tokens: 31, completion_tokens: 2 })?;
/// splitter.push(3, SessionEvent::Output { text: "Lisbon".into() })?;
/// let outline = splitter.finish()?;
/// assert_eq!((outline.records, outline.turns, outline.blocks), (4, 2, 2));
/// assert_eq!(ends, [(0, 3, true), (1, 1, false)]);
/// # Ok::<(), cuca_events::PluginError>(())
/// ```
pub struct TurnSplitter<F> {
    session_id: String,
    visit: F,
    turn: Option<TurnOutline>,
    /// A Latency that was the most recent record, waiting to learn whether a TokenUsage
    /// follows.
    pending_latency: Option<u64>,
    outline: SessionOutline,
    /// Tool results that may be the request's (they came before any answer block and before
    /// the turn's `CallRequest`), and the messages after them, held in order until the turn
    /// says which: a `CallRequest` makes the results tool messages (as a load files them), an
    /// answer block or the turn's end leaves them blocks. Bounded by one request's records.
    held: Vec<TurnPart>,
    /// How many of `held` are tool results.
    held_results: usize,
    /// Whether the turn's `CallRequest` has come.
    call_seen: bool,
}

impl<F> std::fmt::Debug for TurnSplitter<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnSplitter")
            .field("session_id", &self.session_id)
            .field("turn", &self.turn)
            .field("outline", &self.outline)
            .finish_non_exhaustive()
    }
}

impl<F> TurnSplitter<F>
where
    F: FnMut(TurnPart) -> Result<ControlFlow<()>, PluginError>,
{
    /// A splitter for `session_id` (named in errors) handing parts to `visit`. A visitor
    /// that returns `Break` stops the splitter: later pushes are ignored and
    /// [`SessionOutline::stopped`] says so.
    pub fn new(session_id: &str, visit: F) -> Self {
        TurnSplitter {
            session_id: session_id.to_owned(),
            visit,
            turn: None,
            pending_latency: None,
            outline: SessionOutline::default(),
            held: Vec::new(),
            held_results: 0,
            call_seen: false,
        }
    }

    /// Whether the visitor stopped the splitter.
    pub fn is_stopped(&self) -> bool {
        self.outline.stopped
    }

    fn hand(&mut self, part: TurnPart) -> Result<(), PluginError> {
        if self.outline.stopped {
            return Ok(());
        }
        if (self.visit)(part)?.is_break() {
            self.outline.stopped = true;
        }
        Ok(())
    }

    /// Takes the next record, in session order. Refuses an event this build does not know
    /// (as a load does): every record must land in a turn.
    pub fn push(&mut self, sequence: u64, event: SessionEvent) -> Result<(), PluginError> {
        if self.outline.stopped {
            return Ok(());
        }
        self.outline.records += 1;
        // The workspace's records say what the files and the shell did around the calls;
        // they belong to no turn of the model's, so they neither open nor join one.
        if crate::trajectory::is_workspace_side(&event) {
            return Ok(());
        }
        if self.turn.is_none() {
            let index = self.outline.turns;
            self.outline.turns += 1;
            self.turn = Some(TurnOutline {
                turn: index,
                first_sequence: sequence,
                last_sequence: sequence,
                records: 0,
                system_prompts: 0,
                messages: 0,
                blocks: 0,
                notes: 0,
                audit_notes: 0,
                completion: None,
            });
            self.hand(TurnPart::Start {
                turn: index,
                first_sequence: sequence,
            })?;
        }
        let Some(turn) = self.turn.as_mut() else {
            return Ok(());
        };
        turn.last_sequence = sequence;
        turn.records += 1;
        if let SessionEvent::TokenUsage {
            prompt_tokens,
            completion_tokens,
        } = event
        {
            if let Some(duration_ms) = self.pending_latency.take() {
                turn.completion = Some(ReplayCompletion {
                    duration_ms,
                    prompt_tokens,
                    completion_tokens,
                });
                return self.end_turn();
            }
            turn.notes += 1;
            return self.hand(TurnPart::Note(ReplayNote::UnpairedTokenUsage {
                prompt_tokens,
                completion_tokens,
            }));
        }
        self.settle_latency()?;
        let Some(turn) = self.turn.as_mut() else {
            return Ok(());
        };
        let part = match event {
            SessionEvent::SystemPrompt { text } => {
                turn.system_prompts += 1;
                TurnPart::SystemPrompt(text)
            }
            SessionEvent::Message(message) => {
                turn.messages += 1;
                TurnPart::Message(message)
            }
            SessionEvent::Reasoning { text } => {
                TurnPart::Block(MessageContentBlock::Thinking { thinking: text })
            }
            SessionEvent::Output { text } => TurnPart::Block(MessageContentBlock::Text { text }),
            SessionEvent::ToolCall {
                id,
                name,
                arguments,
            } => TurnPart::Block(MessageContentBlock::ToolCall {
                id,
                name,
                arguments,
            }),
            SessionEvent::ToolResult {
                tool_call_id,
                content,
                is_error,
                ..
            } => TurnPart::Block(MessageContentBlock::ToolResult {
                tool_call_id,
                content,
                is_error,
            }),
            SessionEvent::Latency { duration_ms } => {
                self.pending_latency = Some(duration_ms);
                return Ok(());
            }
            SessionEvent::ModelSwap { from, to, reason } => {
                turn.notes += 1;
                turn.audit_notes += 1;
                TurnPart::Note(ReplayNote::ModelSwap { from, to, reason })
            }
            SessionEvent::Fork {
                from_point,
                to_session,
            } => {
                turn.notes += 1;
                turn.audit_notes += 1;
                TurnPart::Note(ReplayNote::Fork {
                    from_point,
                    to_session,
                })
            }
            // Handled above; kept so this match stays exhaustive over the known variants.
            SessionEvent::TokenUsage { .. } => return Ok(()),
            event @ (SessionEvent::CallRequest { .. }
            | SessionEvent::CallFinish { .. }
            | SessionEvent::CallIncomplete { .. }
            | SessionEvent::CallWire { .. }
            | SessionEvent::RequestDigest { .. }
            | SessionEvent::TokenDetail(_)) => TurnPart::Call(event),
            other => {
                return Err(PluginError::validation(
                    "SessionEvent",
                    format!(
                        "record {}:{sequence} is a {} event, which this replay does not know; upgrade cuca-replay",
                        self.session_id,
                        other.kind()
                    ),
                ));
            }
        };
        match &part {
            TurnPart::Block(MessageContentBlock::ToolResult { .. })
                if !self.call_seen && turn.blocks == 0 =>
            {
                self.held.push(part);
                self.held_results += 1;
                return Ok(());
            }
            TurnPart::Message(_) if !self.held.is_empty() => {
                self.held.push(part);
                return Ok(());
            }
            TurnPart::Call(SessionEvent::CallRequest { .. }) => {
                self.call_seen = true;
                self.release(true)?;
            }
            TurnPart::Block(_) => self.release(false)?,
            _ => {}
        }
        if matches!(part, TurnPart::Block(_)) {
            if let Some(turn) = self.turn.as_mut() {
                turn.blocks += 1;
            }
            self.outline.blocks += 1;
        }
        self.hand(part)
    }

    /// Hands over what was held: the tool results as the request's tool messages
    /// (`as_messages`, a `CallRequest` came) or as answer blocks, the messages between them
    /// as they came.
    fn release(&mut self, as_messages: bool) -> Result<(), PluginError> {
        let held = std::mem::take(&mut self.held);
        let results = std::mem::take(&mut self.held_results);
        if let Some(turn) = self.turn.as_mut() {
            if as_messages {
                turn.messages += results;
            } else {
                turn.blocks += results;
            }
        }
        if !as_messages {
            self.outline.blocks += results;
        }
        for part in held {
            let part = match part {
                TurnPart::Block(block) if as_messages => TurnPart::Message(cuca_events::Message {
                    role: cuca_events::Role::Tool,
                    content: vec![block],
                }),
                other => other,
            };
            self.hand(part)?;
        }
        Ok(())
    }

    /// Hands over a pending Latency as a note: the record after it was not its TokenUsage.
    fn settle_latency(&mut self) -> Result<(), PluginError> {
        if let Some(duration_ms) = self.pending_latency.take() {
            if let Some(turn) = self.turn.as_mut() {
                turn.notes += 1;
            }
            self.hand(TurnPart::Note(ReplayNote::UnpairedLatency { duration_ms }))?;
        }
        Ok(())
    }

    fn end_turn(&mut self) -> Result<(), PluginError> {
        self.release(false)?;
        self.call_seen = false;
        match self.turn.take() {
            Some(outline) => self.hand(TurnPart::End(outline)),
            None => Ok(()),
        }
    }

    /// Ends the open final turn, if any (records after the last pair form one final,
    /// incomplete turn), and returns what the visit saw.
    pub fn finish(mut self) -> Result<SessionOutline, PluginError> {
        if !self.outline.stopped {
            self.settle_latency()?;
            self.end_turn()?;
        }
        Ok(self.outline)
    }
}

impl SessionReplay {
    /// Hands `session_id`'s turns to `visit` part by part, in record order, as the backend
    /// reads them: nothing of the session is kept, so memory does not grow with its length
    /// and [`crate::ReplayConfig`]'s caps, which bound what a load keeps, do not apply.
    ///
    /// Built on [`cuca_events::SessionBackend::replay_each`]: a backend that refuses a
    /// damaged session does so after handing over the parts before the damage, so a caller
    /// that must not act on a refused session checks it first (a `FileBackend` caller with
    /// `verify_each`). A visitor returning `Break` stops the read at once; later damage is
    /// then not reported.
    ///
    /// ```
    /// use std::ops::ControlFlow;
    /// use std::sync::Arc;
    /// use cuca_replay::{SessionReplay, TurnPart};
    /// use cuca_store_mem::InMemoryBackend;
    ///
    /// let backend = Arc::new(InMemoryBackend::new());
    /// let mut records = cuca_testkit::demo_turn("demo", 0);
    /// records.extend(cuca_testkit::demo_turn("demo", 7));
    /// cuca_testkit::append_all(backend.as_ref(), &records);
    ///
    /// // The second turn's blocks, reading no further than its end.
    /// let (mut blocks, mut turn) = (Vec::new(), 0);
    /// let outline = SessionReplay::new(backend).each_turn("demo", &mut |part| {
    ///     match part {
    ///         TurnPart::Start { turn: index, .. } => turn = index,
    ///         TurnPart::Block(block) if turn == 1 => blocks.push(block),
    ///         TurnPart::End(end) if end.turn == 1 => return Ok(ControlFlow::Break(())),
    ///         _ => {}
    ///     }
    ///     Ok(ControlFlow::Continue(()))
    /// })?;
    /// assert!(outline.stopped);
    /// assert_eq!(blocks.len(), 3);
    /// # Ok::<(), cuca_events::PluginError>(())
    /// ```
    pub fn each_turn(
        &self,
        session_id: &str,
        visit: &mut dyn FnMut(TurnPart) -> Result<ControlFlow<()>, PluginError>,
    ) -> Result<SessionOutline, PluginError> {
        self.split(session_id, None, visit)
    }

    /// [`SessionReplay::each_turn`] over the prefix through the record whose sequence is
    /// `through_sequence`: the turns [`SessionReplay::load_prefix`] loads. Refuses with
    /// [`PluginError::Validation`] when no record has that sequence (after handing over the
    /// whole session, which the caller discards).
    pub fn each_turn_through(
        &self,
        session_id: &str,
        through_sequence: u64,
        visit: &mut dyn FnMut(TurnPart) -> Result<ControlFlow<()>, PluginError>,
    ) -> Result<SessionOutline, PluginError> {
        self.split(session_id, Some(through_sequence), visit)
    }

    fn split(
        &self,
        session_id: &str,
        through: Option<u64>,
        visit: &mut dyn FnMut(TurnPart) -> Result<ControlFlow<()>, PluginError>,
    ) -> Result<SessionOutline, PluginError> {
        let mut splitter = TurnSplitter::new(session_id, visit);
        let mut found = false;
        let mut n_records = 0usize;
        // The backend stops a read on any error from its visitor: stopping early raises one,
        // and this flag tells it apart from a real failure.
        let mut stopped_early = false;
        let read = self.backend.replay_each(session_id, &mut |record| {
            n_records += 1;
            if found {
                // Past the prefix: nothing more is wanted, and the read stops here.
                stopped_early = true;
                return Err(PluginError::validation("each_turn", "the prefix was read"));
            }
            found = through == Some(record.sequence);
            splitter.push(record.sequence, record.event)?;
            if splitter.is_stopped() {
                stopped_early = true;
                return Err(PluginError::validation(
                    "each_turn",
                    "stopped by the visitor",
                ));
            }
            Ok(())
        });
        match read {
            Ok(()) => {}
            Err(_) if stopped_early => {}
            Err(other) => return Err(other),
        }
        if let Some(sequence) = through {
            if !found {
                return Err(PluginError::validation(
                    "point_id",
                    format!(
                        "no record of session {session_id:?} ({n_records} records) has sequence {sequence}, so there is no prefix to load"
                    ),
                ));
            }
        }
        splitter.finish()
    }
}
