//! Recorded sessions as traces: one trace per model call, its `chat` span the root, grouped by `session.id`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use cuca_events::{
    fork_parent, parse_point_id, Message, MessageContentBlock, SessionBackend, SessionEvent,
};
use cuca_replay::{ReplayNote, ReplayTurn, SessionReplay};
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, Span};

use crate::calls::{CallKey, Calls};
use crate::content;
use crate::conventions as c;
use crate::ids;
use crate::span::SpanBuilder;
use crate::workspace::{self, Outside};
use crate::{Error, ExportOptions};

/// The most links a fork's first call carries to the calls it copied: the OpenTelemetry
/// SDKs' default span-link limit, which collectors and backends are built around. A fork of
/// a longer session links the calls nearest its fork point, and says how many it copied in
/// `cuca.fork.inherited_calls`.
pub const MAX_INHERITED_LINKS: usize = 128;

/// The spans of one session, and what was sent, linked or skipped, and why.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct SessionSpans {
    /// One span per model call the session made itself and that has ended, in recorded
    /// order, each the root of its own trace, and one per shell command it recorded
    /// ([`SessionSpans::n_commands`]); empty for a session with no records or one left out
    /// by [`ExportOptions::since_ms`].
    pub spans: Vec<Span>,
    /// Records the session holds.
    pub n_records: usize,
    /// Turns that are model calls (records that sent or got something back), of every kind
    /// below.
    pub n_turns: usize,
    /// Calls sent: `spans.len()`.
    pub n_calls: usize,
    /// Calls a fork copied from its parent: not sent again (their own session sends them),
    /// linked from the fork's first call of its own.
    pub n_inherited: usize,
    /// The unfinished turn where a fork cut its parent mid-call: no call the fork made.
    pub n_cut_off: usize,
    /// The session's own unfinished final turn (a call in flight, or one a crash left
    /// open): not sent, because a backend that keeps the first copy of a span id would never
    /// show its end; the export after it ends sends it.
    pub n_in_flight: usize,
    /// Calls sent that the call log also holds: one span each, with the call log's fields.
    pub n_merged: usize,
    /// Shell commands sent, each a `shell` span in `spans` (a child of the call whose answer
    /// came before it); a fork's copied commands are its parent's to send.
    pub n_commands: usize,
    /// Whether [`ExportOptions::since_ms`] left the session out.
    pub skipped_by_since: bool,
}

/// What the first pass over the records keeps: the clock of each sequence, and which
/// sequences are notes, neither of which [`SessionReplay`]'s turns carry.
#[derive(Default)]
struct Clock {
    by_sequence: HashMap<u64, u64>,
    /// The sequences of Fork audit and ModelSwap records: notes, which a session writes
    /// without making a call (a fork taken from it, a swap between calls).
    notes: HashSet<u64>,
    last_ms: u64,
    n_records: usize,
    /// The workspace's records (snapshots, shell commands), which [`SessionReplay`]'s turns
    /// pass over, in order.
    outside: Vec<Outside>,
}

impl Clock {
    fn at(&self, sequence: u64) -> u64 {
        self.by_sequence
            .get(&sequence)
            .copied()
            .unwrap_or(self.last_ms)
    }

    /// The last sequence of `range` that is not a note: the last record the turn's call
    /// wrote. A Fork audit record written after a fork's cut (a fork taken from the fork)
    /// does not make the cut turn a call of the fork's own.
    fn last_written(&self, range: &std::ops::RangeInclusive<u64>) -> u64 {
        let mut last = *range.end();
        while last > *range.start() && self.notes.contains(&last) {
            last -= 1;
        }
        last
    }
}

/// Builds the spans of `session_id` from `backend`.
///
/// The records are read twice through the backend's public API: once for each record's
/// timestamp, and once through [`SessionReplay`], whose segmentation into turns (at each
/// Latency-then-TokenUsage pair) is the one definition of a model call cuca has. A session
/// the backend does not know has no records and yields no spans.
///
/// Only calls the session made itself and that have ended are sent, each once and final: a
/// fork's copied prefix is its parent's (linked, see [`SessionSpans::n_inherited`]), the turn
/// a fork cut is no call, and a call still in flight waits for the next export.
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
    export(backend, session_id, options, None)
}

/// [`session_spans`], with each call the call log also holds claimed from `calls`: the
/// session's span is then the call's one span (its token counts the session's, once) with
/// the call log's fields on it, and [`Calls::spans`] leaves the call out.
///
/// A call-log call is the session's call when its row's `node` is the session id (what
/// `cuca proxy` writes), the model and message count agree, and its start and end are within
/// [`crate::MATCH_SLACK_MS`] of the turn's; the nearest such call is taken.
///
/// # Errors
///
/// As [`session_spans`].
pub fn session_spans_with_calls(
    backend: Arc<dyn SessionBackend>,
    session_id: &str,
    options: &ExportOptions,
    calls: &mut Calls<'_>,
) -> Result<SessionSpans, Error> {
    export(backend, session_id, options, Some(calls))
}

/// The session a fork id was taken from and the sequence of its fork point.
fn fork_point(session_id: &str) -> Option<(&str, u64)> {
    let (parent, point) = fork_parent(session_id)?;
    let (_, sequence) = parse_point_id(point).ok()?;
    Some((parent, sequence))
}

/// The session that recorded the turn ending at `last_sequence` of `session_id`: up the
/// chain of forks while the turn lies within each one's copied prefix. Its span ids are the
/// ones that session's own export sends, so a link to them resolves.
fn owner_of(session_id: &str, last_sequence: u64) -> &str {
    let mut owner = session_id;
    while let Some((parent, point)) = fork_point(owner) {
        if last_sequence > point {
            break;
        }
        owner = parent;
    }
    owner
}

fn export(
    backend: Arc<dyn SessionBackend>,
    session_id: &str,
    options: &ExportOptions,
    mut calls: Option<&mut Calls<'_>>,
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
            if matches!(
                record.event,
                SessionEvent::Fork { .. } | SessionEvent::ModelSwap { .. }
            ) {
                clock.notes.insert(record.sequence);
            }
            clock.last_ms = clock.last_ms.max(record.timestamp_ms);
            clock.n_records += 1;
            if workspace::is_outside(&record.event) {
                clock.outside.push(Outside {
                    sequence: record.sequence,
                    at_ms: record.timestamp_ms,
                    event: record.event,
                });
            }
            Ok(())
        })
        .map_err(session_error)?;
    if clock.n_records == 0 {
        return Ok(SessionSpans::default());
    }
    let mut out = SessionSpans {
        n_records: clock.n_records,
        ..SessionSpans::default()
    };
    if options.since_ms.is_some_and(|since| clock.last_ms < since) {
        out.skipped_by_since = true;
        return Ok(out);
    }
    let trajectory = SessionReplay::new(backend)
        .load(session_id)
        .map_err(session_error)?;

    let fork = fork_point(session_id);
    let forked_from = fork_parent(session_id).map(|(_, point)| point);
    // The calls a fork copied, as (trace, span) of the spans their own session sent.
    let mut inherited: Vec<(ids::TraceId, ids::SpanId)> = Vec::new();
    let mut model: Option<String> = None;
    let mut conversation: Vec<&Message> = Vec::new();
    // The workspace's records not yet placed, and the last ended call's (trace, span): the
    // parent of the shell commands its answer asked for.
    let mut outside = clock.outside.iter().peekable();
    let mut previous_call: Option<(ids::TraceId, ids::SpanId)> = None;
    let copied = |sequence: u64| fork.is_some_and(|(_, point)| sequence <= point);
    for (turn_idx, turn) in trajectory.turns().iter().enumerate() {
        // The records before this turn's first: the commands the previous answer's tools
        // ran, sent as spans, and the snapshots this turn's request reflects.
        let mut snapshots: Vec<&Outside> = Vec::new();
        while let Some(record) = outside.next_if(|r| r.sequence < *turn.sequence_range().start()) {
            if copied(record.sequence) {
                continue;
            }
            if let Some(span) = workspace::shell_span(session_id, record, previous_call, options) {
                out.n_commands += 1;
                out.spans.push(span);
            } else {
                snapshots.push(record);
            }
        }
        let notes_only = turn.messages().is_empty()
            && turn.blocks().is_empty()
            && turn.system_prompts().is_empty()
            && turn.completion().is_none();
        // The conversation and the model carry across every turn, copied or not: a fork's
        // own call was sent the whole conversation, under the model its swaps chose.
        conversation.extend(turn.messages());
        if notes_only {
            // A stretch of records that sent nothing and got nothing back (a Fork audit
            // record appended after the last call, a model swap between calls) is not a model
            // call, and no span is stretched to hold it.
            apply_swaps(turn, &mut model);
            continue;
        }
        out.n_turns += 1;
        let range = turn.sequence_range();
        let (first, last) = (*range.start(), *range.end());
        // A turn the fork copied is its parent's, and so is the turn it cut, even when a
        // note was written after the cut: only a record of a call makes it the fork's own.
        if fork.is_some_and(|(_, point)| clock.last_written(&range) <= point) {
            apply_swaps(turn, &mut model);
            if turn.completion().is_some() {
                out.n_inherited += 1;
                let owner = owner_of(session_id, last);
                let ids = (
                    ids::turn_trace_id(owner, first),
                    ids::turn_span_id(owner, first),
                );
                inherited.push(ids);
                previous_call = Some(ids);
            } else {
                out.n_cut_off += 1;
            }
            continue;
        }
        if turn.completion().is_none() {
            apply_swaps(turn, &mut model);
            out.n_in_flight += 1;
            continue;
        }
        let links = if out.n_calls == 0 {
            Some((
                out.n_inherited,
                &inherited[inherited.len().saturating_sub(MAX_INHERITED_LINKS)..],
            ))
        } else {
            None
        };
        let (span, merged) = turn_span(
            TurnContext {
                session_id,
                turn_idx,
                clock: &clock,
                conversation: &conversation,
                options,
                forked_from,
                links,
                calls: calls.as_deref_mut(),
                snapshots: &snapshots,
            },
            turn,
            &mut model,
        );
        out.n_calls += 1;
        out.n_merged += usize::from(merged);
        out.spans.push(span);
        previous_call = Some((
            ids::turn_trace_id(session_id, first),
            ids::turn_span_id(session_id, first),
        ));
    }
    // Commands after the last call (the agent's last steps, or before a call still in
    // flight): children of the last call that ended.
    for record in outside.filter(|r| !copied(r.sequence)) {
        if let Some(span) = workspace::shell_span(session_id, record, previous_call, options) {
            out.n_commands += 1;
            out.spans.push(span);
        }
    }
    Ok(out)
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
struct TurnContext<'a, 'c> {
    session_id: &'a str,
    turn_idx: usize,
    clock: &'a Clock,
    conversation: &'a [&'a Message],
    options: &'a ExportOptions,
    /// The fork point, on every span of a fork.
    forked_from: Option<&'a str>,
    /// On a fork's first call of its own: how many calls it copied, and links to the last
    /// [`MAX_INHERITED_LINKS`] of them.
    links: Option<(usize, &'a [(ids::TraceId, ids::SpanId)])>,
    calls: Option<&'a mut Calls<'c>>,
    /// The workspace snapshots recorded before the call: its file changes.
    snapshots: &'a [&'a Outside],
}

/// One ended turn as a `chat` span, the root of its own trace; and whether the call log's
/// call was merged into it. `model` carries the session's current model across turns: a
/// recording names a model only where it switched (`ModelSwap`), and the switch holds from
/// its turn on.
fn turn_span(
    cx: TurnContext<'_, '_>,
    turn: &ReplayTurn,
    model: &mut Option<String>,
) -> (Span, bool) {
    let range = turn.sequence_range();
    let (first, last) = (*range.start(), *range.end());
    // The span ends with the turn's own closing record (its TokenUsage), never a later one
    // such as a Fork audit record, and starts the recorded Latency before it: the Latency is
    // measured from sending to the end of the stream.
    let end_ms = cx.clock.at(last);
    let completion = turn.completion();
    let start_ms = completion.map_or(end_ms, |done| end_ms.saturating_sub(done.duration_ms));

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
    let trace = ids::turn_trace_id(cx.session_id, first);
    let span_id = ids::turn_span_id(cx.session_id, first);
    let mut span = SpanBuilder::new(trace, span_id, None, name, SpanKind::Client)
        .times_ms(start_ms, end_ms)
        .str(c::OPENINFERENCE_SPAN_KIND, c::KIND_LLM)
        .str(c::SESSION_ID, cx.session_id)
        .str(c::GEN_AI_OPERATION_NAME, c::OPERATION_CHAT)
        .str(c::GEN_AI_CONVERSATION_ID, cx.session_id);
    if let Some(provider) = cx.options.provider.as_deref() {
        span = span.str(c::GEN_AI_PROVIDER_NAME, provider);
        // The name before 1.37 is the old convention the opt-in asks not to send.
        if !crate::span::latest_from_env() {
            span = span.str(c::GEN_AI_SYSTEM, provider);
        }
    }
    if let Some(model) = requested.as_deref() {
        span = span.str(c::GEN_AI_REQUEST_MODEL, model);
    }
    if let Some(served) = call
        .served_model()
        .filter(|m| !m.is_empty())
        .or(requested.as_deref())
    {
        span = span.str(c::LLM_MODEL_NAME, served);
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
        // A closing TokenUsage of 0 and 0 is what a recorder writes when it learnt no counts
        // (a call cut short before the usage came, a server that reports none): unknown, so
        // left off, rather than 0 tokens a backend would sum and average.
        if done.prompt_tokens != 0 || done.completion_tokens != 0 {
            span = span
                .int(c::GEN_AI_USAGE_INPUT_TOKENS, done.prompt_tokens)
                .int(c::GEN_AI_USAGE_OUTPUT_TOKENS, done.completion_tokens);
            span =
                crate::span::openinference_tokens(span, done.prompt_tokens, done.completion_tokens);
        }
        if let Some(detail) = call.tokens() {
            let priced = call
                .served_model()
                .filter(|m| !m.is_empty())
                .or(requested.as_deref())
                .unwrap_or_default();
            span = crate::span::token_detail(span, detail, priced, crate::span::latest_from_env());
        }
        span = span.int(c::CUCA_DURATION_MS, done.duration_ms);
    }
    let n_tool_calls = turn
        .blocks()
        .iter()
        .filter(|b| matches!(b, MessageContentBlock::ToolCall { .. }))
        .count();
    span = span
        .int(c::CUCA_TURN_NUMBER, cx.turn_idx as u64 + 1)
        .int(c::CUCA_SEQUENCE_FIRST, first)
        .int(c::CUCA_SEQUENCE_LAST, last)
        .int(c::CUCA_BLOCKS, turn.blocks().len() as u64)
        .int_nonzero(c::CUCA_TOOL_CALLS, n_tool_calls as u64);
    if let Some(point) = cx.forked_from {
        span = span.str(c::CUCA_SESSION_FORKED_FROM, point);
    }
    if let Some((n_inherited, links)) = cx.links.filter(|(n, _)| *n > 0) {
        span = span.int(c::CUCA_FORK_INHERITED_CALLS, n_inherited as u64);
        for (trace, id) in links {
            span = span.link(*trace, *id, "inherited_call");
        }
    }
    // The notes are events at the call's start, inside the span: a Fork audit record that
    // opened this turn was written when the branch was taken, which may be hours before the
    // call.
    span = note_events(span, turn, start_ms, model);
    span = workspace::file_events(span, cx.snapshots, start_ms, end_ms);
    let mut merged = false;
    if let Some(calls) = cx.calls {
        let key = CallKey {
            node: cx.session_id,
            model: call.request().map(|r| r.model.as_str()),
            messages: call.request().map(|r| r.messages),
            start_ms,
            end_ms,
        };
        if let Some(claimed) = calls.claim(&key) {
            span = claimed.apply(span);
            merged = true;
        }
    }
    if cx.options.with_content {
        if !turn.system_prompts().is_empty() {
            span = span.str(
                c::GEN_AI_SYSTEM_INSTRUCTIONS,
                content::system_instructions(turn.system_prompts()),
            );
        }
        let input = content::input_messages(cx.conversation.iter().copied());
        let output = content::output_messages(turn.blocks(), call.finish_reason());
        // What the trace's root shows in a session view: this call's new input (the
        // question, or the tools' results of a tool loop's step) and the answer, as text
        // where they are text; the whole conversation stays in `gen_ai.input.messages`.
        let (value, mime) = content::new_input(cx.conversation);
        span = span
            .str(c::INPUT_VALUE, value)
            .str(c::INPUT_MIME_TYPE, mime);
        // The tools the request offered, where its `CallRequest` recorded them, as a native
        // OpenInference instrumentor sends them.
        if let Some(request) = call.request() {
            for (i, schema) in content::tool_schemas(&request.tools)
                .into_iter()
                .enumerate()
            {
                span = span.str(
                    &format!("{}.{i}.tool.json_schema", c::LLM_TOOLS_PREFIX),
                    schema,
                );
            }
        }
        let (value, mime) = content::output_value(turn.blocks(), &output);
        span = span
            .str(c::OUTPUT_VALUE, value)
            .str(c::OUTPUT_MIME_TYPE, mime)
            .str(c::GEN_AI_INPUT_MESSAGES, input)
            .str(c::GEN_AI_OUTPUT_MESSAGES, output);
    }
    // A call whose records say it was cut short did not end well, whatever its closing
    // records say: an error, with the reason as its message, so a backend's error filter
    // finds it. Every other ended call did end well.
    span = match call.incomplete() {
        Some(reason) => span
            .str(c::CUCA_CALL_INCOMPLETE, reason)
            .str(c::ERROR_TYPE, c::ERROR_TYPE_INCOMPLETE)
            .error(reason),
        None => span.ok(),
    };
    (span.build(), merged)
}

#[cfg(test)]
mod tests;
