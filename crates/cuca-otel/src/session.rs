//! Recorded sessions as traces: one trace per session, a root span, and one `chat` span per turn.

use std::collections::HashMap;
use std::sync::Arc;

use cuca_events::{fork_parent, Message, MessageContentBlock, SessionBackend};
use cuca_replay::{ReplayNote, ReplayTurn, SessionReplay};
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, Span};

use crate::content;
use crate::conventions as c;
use crate::ids;
use crate::span::SpanBuilder;
use crate::{Error, ExportOptions};

/// The spans of one session, and what they were built from.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct SessionSpans {
    /// The root span first, then one span per turn in recorded order; empty for a session
    /// with no records or one left out by [`ExportOptions::since_ms`].
    pub spans: Vec<Span>,
    /// Records the session holds.
    pub n_records: usize,
    /// Turns (model calls), the unfinished final turn included.
    pub n_turns: usize,
    /// Whether [`ExportOptions::since_ms`] left the session out.
    pub skipped_by_since: bool,
}

/// What the first pass over the records keeps: the clock of each sequence, which
/// [`SessionReplay`]'s turns do not carry.
#[derive(Default)]
struct Clock {
    by_sequence: HashMap<u64, u64>,
    first_ms: Option<u64>,
    last_ms: u64,
    n_records: usize,
}

impl Clock {
    fn at(&self, sequence: u64) -> u64 {
        self.by_sequence
            .get(&sequence)
            .copied()
            .unwrap_or(self.last_ms)
    }
}

/// Builds the spans of `session_id` from `backend`.
///
/// The records are read twice through the backend's public API: once for each record's
/// timestamp, and once through [`SessionReplay`], whose segmentation into turns (at each
/// Latency-then-TokenUsage pair) is the one definition of a model call cuca has. A session
/// the backend does not know has no records and yields no spans.
///
/// # Errors
///
/// [`Error::Session`] when the backend or the replay refuses the session (damage a load
/// refuses, a session over replay's caps).
pub fn session_spans(
    backend: Arc<dyn SessionBackend>,
    session_id: &str,
    options: &ExportOptions,
) -> Result<SessionSpans, Error> {
    let session_error = |source| Error::Session {
        session: session_id.to_owned(),
        source,
    };
    let mut clock = Clock::default();
    backend
        .replay_each(session_id, &mut |record| {
            clock
                .by_sequence
                .insert(record.sequence, record.timestamp_ms);
            clock.first_ms.get_or_insert(record.timestamp_ms);
            clock.last_ms = clock.last_ms.max(record.timestamp_ms);
            clock.n_records += 1;
            Ok(())
        })
        .map_err(session_error)?;
    let Some(first_ms) = clock.first_ms else {
        return Ok(SessionSpans::default());
    };
    if options.since_ms.is_some_and(|since| clock.last_ms < since) {
        return Ok(SessionSpans {
            n_records: clock.n_records,
            skipped_by_since: true,
            ..SessionSpans::default()
        });
    }
    let trajectory = SessionReplay::new(backend)
        .load(session_id)
        .map_err(session_error)?;

    let trace = ids::session_trace_id(session_id);
    let root_id = ids::session_root_span_id(session_id);
    let mut spans = Vec::with_capacity(trajectory.len() + 1);
    let mut root = SpanBuilder::new(
        trace,
        root_id,
        None,
        format!("session {session_id}"),
        SpanKind::Internal,
    )
    .times_ms(first_ms, clock.last_ms)
    .str(c::CUCA_SESSION_ID, session_id)
    .str(c::GEN_AI_CONVERSATION_ID, session_id)
    .int(c::CUCA_SESSION_RECORDS, clock.n_records as u64);
    if let Some((parent, point)) = fork_parent(session_id) {
        // A branch links to the session it was taken from, whose trace the same export (or an
        // earlier one) sent under the parent's derived ids.
        root = root.str(c::CUCA_SESSION_FORKED_FROM, point).link(
            ids::session_trace_id(parent),
            ids::session_root_span_id(parent),
        );
    }

    let mut model: Option<String> = None;
    let mut conversation: Vec<&Message> = Vec::new();
    let mut turn_spans = Vec::with_capacity(trajectory.len());
    for (turn_idx, turn) in trajectory.turns().iter().enumerate() {
        let notes_only = turn.messages().is_empty()
            && turn.blocks().is_empty()
            && turn.system_prompts().is_empty()
            && turn.completion().is_none();
        if notes_only {
            // A stretch of records that sent nothing and got nothing back (a Fork audit
            // record appended after the last call, a model swap between calls) is not a model
            // call: its notes belong to the session.
            let at = clock.at(*turn.sequence_range().start());
            root = note_events(root, turn, at, &mut model);
            continue;
        }
        conversation.extend(turn.messages());
        turn_spans.push(turn_span(
            TurnContext {
                session_id,
                trace,
                root_id,
                turn_idx,
                clock: &clock,
                conversation: &conversation,
                options,
            },
            turn,
            &mut model,
        ));
    }
    let n_turns = turn_spans.len();
    spans.push(root.int(c::CUCA_SESSION_TURNS, n_turns as u64).build());
    spans.extend(turn_spans);
    Ok(SessionSpans {
        spans,
        n_records: clock.n_records,
        n_turns,
        skipped_by_since: false,
    })
}

/// Takes the model a [`ReplayNote::ModelSwap`] in `turn` switched to.
fn apply_swaps(turn: &ReplayTurn, model: &mut Option<String>) {
    for note in turn.notes() {
        if let ReplayNote::ModelSwap { to, .. } = note {
            *model = Some(to.clone());
        }
    }
}

/// `turn`'s model swaps and fork audits as span events at `at_ms`, and the model the last
/// swap switched to.
fn note_events(
    mut span: SpanBuilder,
    turn: &ReplayTurn,
    at_ms: u64,
    model: &mut Option<String>,
) -> SpanBuilder {
    apply_swaps(turn, model);
    for note in turn.notes() {
        match note {
            ReplayNote::ModelSwap { from, to, reason } => {
                span = span.event(
                    c::EVENT_MODEL_SWAP,
                    at_ms,
                    &[
                        ("cuca.model.from", from),
                        ("cuca.model.to", to),
                        ("cuca.reason", reason),
                    ],
                );
            }
            ReplayNote::Fork {
                from_point,
                to_session,
            } => {
                span = span.event(
                    c::EVENT_FORK,
                    at_ms,
                    &[
                        ("cuca.fork.from_point", from_point),
                        ("cuca.fork.to_session", to_session),
                    ],
                );
            }
            // Unpaired Latency/TokenUsage records, and notes added later, carry no event.
            _ => {}
        }
    }
    span
}

/// What a turn's span needs from its session.
struct TurnContext<'a> {
    session_id: &'a str,
    trace: ids::TraceId,
    root_id: ids::SpanId,
    turn_idx: usize,
    clock: &'a Clock,
    conversation: &'a [&'a Message],
    options: &'a ExportOptions,
}

/// One turn as a `chat` span. `model` carries the session's current model across turns: a
/// recording names a model only where it switched (`ModelSwap`), and the switch holds from
/// its turn on.
fn turn_span(cx: TurnContext<'_>, turn: &ReplayTurn, model: &mut Option<String>) -> Span {
    let range = turn.sequence_range();
    let (first, last) = (*range.start(), *range.end());
    let first_ms = cx.clock.at(first);
    let end_ms = cx.clock.at(last);
    let completion = turn.completion();
    // The Latency record measures from sending to the end of the stream, and it is written
    // with the TokenUsage that closes the turn: the call started that long before the end.
    // An unfinished turn only has its records' own clock.
    let start_ms = completion.map_or(first_ms, |done| end_ms.saturating_sub(done.duration_ms));

    // A swap recorded in this turn came before its call: it names the call's model.
    apply_swaps(turn, model);
    // A recording with call metadata (`SessionLogPlugin::with_call_metadata`, what `cuca
    // proxy` writes) names each call's model itself; it holds for this call only.
    let call = turn.call();
    let requested = call
        .request()
        .map(|request| request.model.as_str())
        .filter(|m| !m.is_empty())
        .map(str::to_owned)
        .or_else(|| model.clone());
    let name = match requested.as_deref() {
        Some(model) => format!("{} {model}", c::OPERATION_CHAT),
        None => c::OPERATION_CHAT.to_owned(),
    };
    let span_id = ids::turn_span_id(cx.session_id, first);
    let mut span = SpanBuilder::new(cx.trace, span_id, Some(cx.root_id), name, SpanKind::Client)
        .times_ms(start_ms, end_ms)
        .str(c::GEN_AI_OPERATION_NAME, c::OPERATION_CHAT)
        .str(c::GEN_AI_CONVERSATION_ID, cx.session_id);
    if let Some(provider) = cx.options.provider.as_deref() {
        span = span
            .str(c::GEN_AI_PROVIDER_NAME, provider)
            .str(c::GEN_AI_SYSTEM, provider);
    }
    if let Some(model) = requested.as_deref() {
        span = span.str(c::GEN_AI_REQUEST_MODEL, model);
    }
    if let Some(request) = call.request() {
        // The parameters are the JSON object the session log recorded; the ones the
        // conventions name become attributes.
        if let Ok(serde_json::Value::Object(parameters)) =
            serde_json::from_str::<serde_json::Value>(&request.parameters)
        {
            // The proxy records the caller's own keys: a newer client sends
            // `max_completion_tokens` alone.
            if let Some(max_tokens) = ["max_tokens", "max_completion_tokens"]
                .iter()
                .find_map(|key| parameters.get(*key).and_then(|v| v.as_u64()))
            {
                span = span.int(c::GEN_AI_REQUEST_MAX_TOKENS, max_tokens);
            }
            if let Some(temperature) = parameters.get("temperature").and_then(|v| v.as_f64()) {
                span = span.float(c::GEN_AI_REQUEST_TEMPERATURE, temperature);
            }
        }
    }
    if let Some(served) = call.served_model().filter(|m| !m.is_empty()) {
        span = span.str(c::GEN_AI_RESPONSE_MODEL, served);
    }
    if let Some(reason) = call.finish_reason() {
        span = span.str_array(c::GEN_AI_RESPONSE_FINISH_REASONS, &[reason]);
    }
    if let Some(done) = completion {
        span = span
            .int(c::GEN_AI_USAGE_INPUT_TOKENS, done.prompt_tokens)
            .int(c::GEN_AI_USAGE_OUTPUT_TOKENS, done.completion_tokens)
            .int(c::CUCA_DURATION_MS, done.duration_ms);
    }
    let n_tool_calls = turn
        .blocks()
        .iter()
        .filter(|b| matches!(b, MessageContentBlock::ToolCall { .. }))
        .count();
    span = span
        .int(c::CUCA_TURN_INDEX, cx.turn_idx as u64)
        .int(c::CUCA_SEQUENCE_FIRST, first)
        .int(c::CUCA_SEQUENCE_LAST, last)
        .bool(c::CUCA_TURN_COMPLETE, completion.is_some())
        .int(c::CUCA_BLOCKS, turn.blocks().len() as u64)
        .int_nonzero(c::CUCA_TOOL_CALLS, n_tool_calls as u64);
    if let Some(reason) = call.incomplete() {
        span = span.str(c::CUCA_CALL_INCOMPLETE, reason);
    }
    span = note_events(span, turn, first_ms, model);
    if cx.options.with_content {
        if !turn.system_prompts().is_empty() {
            span = span.str(
                c::GEN_AI_SYSTEM_INSTRUCTIONS,
                content::system_instructions(turn.system_prompts()),
            );
        }
        span = span
            .str(
                c::GEN_AI_INPUT_MESSAGES,
                content::input_messages(cx.conversation.iter().copied()),
            )
            .str(
                c::GEN_AI_OUTPUT_MESSAGES,
                content::output_messages(turn.blocks(), None),
            );
    }
    span.build()
}

#[cfg(test)]
mod tests;
