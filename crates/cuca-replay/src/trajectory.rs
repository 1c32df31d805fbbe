//! `ReplayTrajectory` and its turns: recorded records segmented at each Latency-then-TokenUsage pair.

use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use cuca_events::{
    AgentResponseStream, Message, MessageContentBlock, PluginError, SessionEvent, TokenUsage,
    UnifiedResponse,
};

use crate::config::ReplayConfig;
use crate::stream::ReplayStream;

#[cfg(test)]
mod tests;

/// What one load retained, computed once at load: a loaded trajectory never grows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayUsage {
    /// Records the trajectory holds.
    pub records: usize,
    /// The [`ReplayConfig::max_records`] the load ran under.
    pub max_records: usize,
    /// Content blocks across all turns.
    pub blocks: usize,
    /// Turns, the incomplete final turn included.
    pub turns: usize,
    /// Whether `records` reached [`ReplayConfig::warn_at`]; always false without a
    /// `warn_fraction`. It is a field to read: no message is injected anywhere.
    pub near_cap: bool,
}

/// The terminator of a complete turn: the Latency-then-TokenUsage pair, as one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplayCompletion {
    /// The recorded wall time of the call, from [`SessionEvent::Latency`].
    pub duration_ms: u64,
    /// Prompt tokens, from [`SessionEvent::TokenUsage`].
    pub prompt_tokens: u64,
    /// Completion tokens, from [`SessionEvent::TokenUsage`].
    pub completion_tokens: u64,
}

/// A record of a turn that is neither content nor its terminator.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplayNote {
    /// A [`SessionEvent::ModelSwap`]: the session switched models here.
    ModelSwap {
        /// The model before.
        from: String,
        /// The model after.
        to: String,
        /// Why, in words.
        reason: String,
    },
    /// A [`SessionEvent::Fork`] audit record: a branch was taken from this session.
    Fork {
        /// The point the branch was taken at.
        from_point: String,
        /// The branch's session id.
        to_session: String,
    },
    /// A [`SessionEvent::Latency`] not immediately followed by a
    /// [`SessionEvent::TokenUsage`]. It does not close the turn: only the pair does, because
    /// `SessionLogPlugin::on_response_complete` always appends both. A lone Latency is what a
    /// TokenUsage append that failed, or a prefix cut between the two, leaves behind.
    UnpairedLatency {
        /// The recorded wall time.
        duration_ms: u64,
    },
    /// A [`SessionEvent::TokenUsage`] not immediately preceded by a
    /// [`SessionEvent::Latency`]. It does not close the turn, for the same reason.
    UnpairedTokenUsage {
        /// Prompt tokens.
        prompt_tokens: u64,
        /// Completion tokens.
        completion_tokens: u64,
    },
}

/// One turn: every record from just after the previous terminator through its own.
///
/// Each record's event was moved into exactly one of the turn's lists, so the turn owns its
/// text and the source records are gone (see [`crate::SessionReplay`] on memory).
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayTurn {
    system_prompts: Vec<String>,
    messages: Vec<Message>,
    blocks: Arc<Vec<MessageContentBlock>>,
    notes: Vec<ReplayNote>,
    completion: Option<ReplayCompletion>,
    /// The call-metadata records of the turn, where the recording has them (see
    /// [`crate::call`]); kept out of the seed's lists so they change none of them.
    pub(crate) call: crate::call::CallMetadata,
    first_sequence: u64,
    last_sequence: u64,
    n_records: usize,
}

impl ReplayTurn {
    /// The text of every [`SessionEvent::SystemPrompt`] record, in order.
    pub fn system_prompts(&self) -> &[String] {
        &self.system_prompts
    }

    /// Every [`SessionEvent::Message`] record's message, in order.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The recorded answer: Reasoning, Output, ToolCall and ToolResult records as
    /// Thinking, Text, ToolCall and ToolResult blocks, in order. A ToolResult block has no
    /// field for the recorded stdout, stderr and exit code; read those from
    /// `SessionBackend::replay`.
    pub fn blocks(&self) -> &[MessageContentBlock] {
        &self.blocks
    }

    /// The Latency-then-TokenUsage pair that closed the turn; `None` for a final turn the
    /// recording never closed.
    pub fn completion(&self) -> Option<ReplayCompletion> {
        self.completion
    }

    /// Model swaps, fork audits and unpaired Latency or TokenUsage records, in order.
    pub fn notes(&self) -> &[ReplayNote] {
        &self.notes
    }

    /// The sequence numbers of the turn's first and last records. Backends store records
    /// as given, so a range may span sequence numbers the recording skipped.
    pub fn sequence_range(&self) -> RangeInclusive<u64> {
        self.first_sequence..=self.last_sequence
    }

    /// How many records the turn was built from, its terminator included.
    pub fn n_records(&self) -> usize {
        self.n_records
    }

    /// Whether the turn closed on a Latency-then-TokenUsage pair.
    pub fn is_complete(&self) -> bool {
        self.completion.is_some()
    }

    /// The turn's blocks as the stream a live provider turn returns.
    ///
    /// The stream is always ready: it never sleeps, never returns `Poll::Pending` and never
    /// yields `Err`. Nothing routes it through a plugin.
    pub fn stream(&self) -> AgentResponseStream {
        Box::pin(ReplayStream::new(Arc::clone(&self.blocks)))
    }

    /// The aggregated [`UnifiedResponse`] code written against `on_response_complete`
    /// expects. No record holds the model or the provider, so the caller names them.
    ///
    /// `finish_reason`, `usage`, `prompt_cache_usage` and `call_id` are `None` because the
    /// recording never held them; a turn with no completion reports zero tokens and zero
    /// duration.
    pub fn response(
        &self,
        model: impl Into<String>,
        provider: impl Into<String>,
    ) -> UnifiedResponse {
        let completion = self.completion.unwrap_or_default();
        UnifiedResponse {
            model: model.into(),
            provider: provider.into(),
            content: self.blocks.to_vec(),
            finish_reason: None,
            token_usage: TokenUsage {
                prompt_tokens: completion.prompt_tokens,
                completion_tokens: completion.completion_tokens,
            },
            usage: None,
            prompt_cache_usage: None,
            duration: Duration::from_millis(completion.duration_ms),
            call_id: None,
        }
    }
}

/// A loaded session: its turns, and what the load retained.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayTrajectory {
    session_id: String,
    turns: Vec<ReplayTurn>,
    usage: ReplayUsage,
}

impl ReplayTrajectory {
    /// The session the trajectory was loaded from.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The number of turns, the incomplete final turn included; [`ReplayUsage::records`]
    /// counts records.
    pub fn len(&self) -> usize {
        self.turns.len()
    }

    /// Whether the trajectory has no turns, which is the same as having no records.
    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }

    /// What the load retained, computed once at load.
    pub fn usage(&self) -> ReplayUsage {
        self.usage
    }

    /// Every turn, in recorded order.
    pub fn turns(&self) -> &[ReplayTurn] {
        &self.turns
    }

    /// The turn at `turn_idx`, if there is one.
    pub fn turn(&self, turn_idx: usize) -> Option<&ReplayTurn> {
        self.turns.get(turn_idx)
    }

    /// Turn `turn_idx`'s blocks as the [`AgentResponseStream`] a live provider turn returns.
    ///
    /// Refuses an index past the last turn with [`PluginError::Validation`]; the stream
    /// itself never fails.
    pub fn stream_turn(&self, turn_idx: usize) -> Result<AgentResponseStream, PluginError> {
        match self.turns.get(turn_idx) {
            Some(turn) => Ok(turn.stream()),
            None => Err(PluginError::validation(
                "turn_idx",
                format!(
                    "session {:?} has {} turns, so turn {turn_idx} does not exist",
                    self.session_id,
                    self.turns.len()
                ),
            )),
        }
    }
}

/// The turn being filled while the records are consumed.
#[derive(Default)]
struct TurnBuilder {
    system_prompts: Vec<String>,
    messages: Vec<Message>,
    blocks: Vec<MessageContentBlock>,
    notes: Vec<ReplayNote>,
    call: crate::call::CallMetadata,
    first_sequence: Option<u64>,
    last_sequence: u64,
    n_records: usize,
    /// A Latency seen as the most recent record, waiting to learn whether a TokenUsage
    /// follows. Its sequence is already in the range and counted.
    pending_latency: Option<u64>,
    /// Where each of the turn's blocks so far, while they are all tool results and no
    /// `CallRequest` has come, would stand among its messages: `messages.len()` when it came.
    tool_results_at: Vec<usize>,
}

/// Whether `event` records the workspace or the shell rather than the model's call
/// ([`SessionEvent::WorkspaceSnapshot`], [`SessionEvent::ShellCommand`]): a replay of the
/// model's half passes over it, since no turn's request or answer holds it.
pub(crate) fn is_workspace_side(event: &SessionEvent) -> bool {
    matches!(
        event,
        SessionEvent::WorkspaceSnapshot { .. } | SessionEvent::ShellCommand { .. }
    )
}

impl TurnBuilder {
    fn take_record(&mut self, sequence: u64) {
        self.first_sequence.get_or_insert(sequence);
        self.last_sequence = sequence;
        self.n_records += 1;
    }

    /// Files a pending Latency as a note: the record after it was not its TokenUsage.
    fn settle_latency(&mut self) {
        if let Some(duration_ms) = self.pending_latency.take() {
            self.notes.push(ReplayNote::UnpairedLatency { duration_ms });
        }
    }

    fn finish(mut self, completion: Option<ReplayCompletion>) -> Option<ReplayTurn> {
        self.settle_latency();
        let first_sequence = self.first_sequence?;
        // A turn far smaller than the one before it gives back the room it was started with,
        // so a turn never holds room for more than twice its blocks (rounded up), as with
        // `Vec`'s own doubling.
        if self.blocks.capacity() / 2 > self.blocks.len() {
            self.blocks.shrink_to_fit();
        }
        Some(ReplayTurn {
            system_prompts: self.system_prompts,
            messages: self.messages,
            blocks: Arc::new(self.blocks),
            notes: self.notes,
            completion,
            call: self.call,
            first_sequence,
            last_sequence: self.last_sequence,
            n_records: self.n_records,
        })
    }
}

/// Consumes `records` into turns, moving each event into its turn, and checks the caps: a
/// [`Segmenter`] fed from a `Vec`, for the tests that segment records they built.
#[cfg(test)]
pub(crate) fn segment(
    session_id: String,
    records: Vec<cuca_events::SessionRecord>,
    config: &ReplayConfig,
) -> Result<ReplayTrajectory, PluginError> {
    let mut segmenter = Segmenter::new(session_id, config);
    for record in records {
        segmenter.push(record.sequence, record.event);
    }
    segmenter.finish()
}

/// Segments records into turns as they arrive, one at a time, moving each event into its
/// turn; [`Segmenter::finish`] checks the caps and hands over the trajectory.
///
/// It never refuses mid-way: the first problem it meets (a turn over
/// [`ReplayConfig::max_turn_blocks`], an event it does not know, more records than
/// [`ReplayConfig::max_records`]) stops the building and frees what was built, and every
/// later record is only counted. So a load's error is the one it was before records arrived
/// one by one: the backend's own error first (the backend reads on to the end), then the
/// record cap with the session's exact record count (what to raise the cap to), then the
/// first segmentation refusal; and memory stays bounded by the cap however long the session.
pub(crate) struct Segmenter<'c> {
    session_id: String,
    config: &'c ReplayConfig,
    turns: Vec<ReplayTurn>,
    turn: TurnBuilder,
    n_records: usize,
    n_blocks: usize,
    /// The first segmentation refusal; once set (or once `n_records` passes the cap),
    /// records are counted, not kept.
    refusal: Option<PluginError>,
}

impl<'c> Segmenter<'c> {
    pub(crate) fn new(session_id: String, config: &'c ReplayConfig) -> Self {
        Segmenter {
            session_id,
            config,
            turns: Vec::new(),
            turn: TurnBuilder::default(),
            n_records: 0,
            n_blocks: 0,
            refusal: None,
        }
    }

    /// Takes the next record, in session order.
    pub(crate) fn push(&mut self, sequence: u64, event: SessionEvent) {
        self.n_records += 1;
        if self.refusal.is_some() {
            return;
        }
        if self.n_records > self.config.max_records {
            // Nothing of a refused load is handed out: free it now, not at the end.
            self.stop_building();
            return;
        }
        if let Err(refusal) = self.segment(sequence, event) {
            self.stop_building();
            self.refusal = Some(refusal);
        }
    }

    fn stop_building(&mut self) {
        self.turns = Vec::new();
        self.turn = TurnBuilder::default();
    }

    /// Files one record's event into the turn being built.
    fn segment(&mut self, sequence: u64, event: SessionEvent) -> Result<(), PluginError> {
        if is_workspace_side(&event) {
            return Ok(());
        }
        let turn = &mut self.turn;
        turn.take_record(sequence);
        if let SessionEvent::TokenUsage {
            prompt_tokens,
            completion_tokens,
        } = event
        {
            if let Some(duration_ms) = turn.pending_latency.take() {
                let completion = ReplayCompletion {
                    duration_ms,
                    prompt_tokens,
                    completion_tokens,
                };
                // A session's turns tend to share one shape, so the next turn starts with room
                // for as many blocks as this one had: that saves the doublings of its `Vec`,
                // which cost a load of the seed's turns (74 blocks each) 5% of its instructions.
                let next = TurnBuilder {
                    blocks: Vec::with_capacity(turn.blocks.len()),
                    ..TurnBuilder::default()
                };
                self.turns
                    .extend(std::mem::replace(turn, next).finish(Some(completion)));
            } else {
                turn.notes.push(ReplayNote::UnpairedTokenUsage {
                    prompt_tokens,
                    completion_tokens,
                });
            }
            return Ok(());
        }
        turn.settle_latency();
        let block = match event {
            SessionEvent::SystemPrompt { text } => {
                turn.system_prompts.push(text);
                None
            }
            SessionEvent::Message(message) => {
                turn.messages.push(message);
                None
            }
            SessionEvent::Reasoning { text } => {
                Some(MessageContentBlock::Thinking { thinking: text })
            }
            SessionEvent::Output { text } => Some(MessageContentBlock::Text { text }),
            SessionEvent::ToolCall {
                id,
                name,
                arguments,
            } => Some(MessageContentBlock::ToolCall {
                id,
                name,
                arguments,
            }),
            // stdout, stderr and exit_code have no field in the block; they stay in the
            // backend for a caller that reads the raw records.
            SessionEvent::ToolResult {
                tool_call_id,
                content,
                is_error,
                ..
            } => Some(MessageContentBlock::ToolResult {
                tool_call_id,
                content,
                is_error,
            }),
            SessionEvent::Latency { duration_ms } => {
                turn.pending_latency = Some(duration_ms);
                None
            }
            SessionEvent::ModelSwap { from, to, reason } => {
                turn.notes.push(ReplayNote::ModelSwap { from, to, reason });
                None
            }
            SessionEvent::Fork {
                from_point,
                to_session,
            } => {
                turn.notes.push(ReplayNote::Fork {
                    from_point,
                    to_session,
                });
                None
            }
            // Handled above; kept so this match stays exhaustive over the known variants.
            SessionEvent::TokenUsage { .. } => None,
            event @ SessionEvent::CallRequest { .. } => {
                // Tool results recorded among a request's records (a session log asked for
                // them) are the request's tool messages, in the places they were sent.
                if !turn.tool_results_at.is_empty()
                    && turn.tool_results_at.len() == turn.blocks.len()
                {
                    let at = std::mem::take(&mut turn.tool_results_at);
                    // They are messages now, not blocks of the answer.
                    self.n_blocks = self.n_blocks.saturating_sub(at.len());
                    for (offset, (index, block)) in
                        at.into_iter().zip(turn.blocks.drain(..)).enumerate()
                    {
                        turn.messages.insert(
                            (index + offset).min(turn.messages.len()),
                            Message {
                                role: cuca_events::Role::Tool,
                                content: vec![block],
                            },
                        );
                    }
                }
                turn.tool_results_at.clear();
                turn.call.take(event);
                None
            }
            event @ (SessionEvent::CallFinish { .. }
            | SessionEvent::CallIncomplete { .. }
            | SessionEvent::CallWire { .. }
            | SessionEvent::RequestDigest { .. }
            | SessionEvent::TokenDetail(_)) => {
                turn.call.take(event);
                None
            }
            // `SessionEvent` is non-exhaustive: a variant added after this crate was written
            // is refused rather than dropped, since every record must land in a turn.
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
        if let Some(block) = block {
            let is_request_side = turn.call.request().is_none()
                && turn.tool_results_at.len() == turn.blocks.len()
                && matches!(block, MessageContentBlock::ToolResult { .. });
            if is_request_side {
                turn.tool_results_at.push(turn.messages.len());
            } else {
                turn.tool_results_at.clear();
            }
            if turn.blocks.len() >= self.config.max_turn_blocks {
                let session_id = &self.session_id;
                return Err(PluginError::validation(
                    "ReplayConfig::max_turn_blocks",
                    format!(
                        "turn {} of session {session_id:?} passes the cap of {} blocks at record {session_id}:{sequence}; nothing was loaded — raise the cap",
                        self.turns.len(),
                        self.config.max_turn_blocks
                    ),
                ));
            }
            turn.blocks.push(block);
            self.n_blocks += 1;
        }
        Ok(())
    }

    /// The trajectory, or the load's refusal: the record cap first, then the first
    /// segmentation refusal.
    pub(crate) fn finish(self) -> Result<ReplayTrajectory, PluginError> {
        let Segmenter {
            session_id,
            config,
            mut turns,
            turn,
            n_records,
            n_blocks,
            refusal,
        } = self;
        if n_records > config.max_records {
            return Err(PluginError::validation(
                "ReplayConfig::max_records",
                format!(
                    "session {session_id:?} has {n_records} records, over the cap of {}; nothing was loaded, because a shortened trajectory is a wrong fixture — raise the cap or load a prefix",
                    config.max_records
                ),
            ));
        }
        if let Some(refusal) = refusal {
            return Err(refusal);
        }
        // Records after the last pair form one final, incomplete turn: never merged, never
        // dropped.
        turns.extend(turn.finish(None));
        let usage = ReplayUsage {
            records: n_records,
            max_records: config.max_records,
            blocks: n_blocks,
            turns: turns.len(),
            near_cap: config.warn_at().is_some_and(|at| n_records >= at),
        };
        Ok(ReplayTrajectory {
            session_id,
            turns,
            usage,
        })
    }
}
