//! `cuca replay DIR SESSION`: the turns, streamed part by part through `cuca-replay`'s
//! `TurnSplitter`, so a session of any length replays in the memory of one record.
//!
//! Two passes: the first scans and checks the whole session (damage, the point, the turn
//! asked for) and counts it, before anything is printed; the second prints. A full human
//! replay needs each turn's outline (its range and whether it completed) before the turn's
//! lines, so a third reader runs ahead of the printer on another thread and hands the
//! outlines over through a small bounded channel.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::Write;
use std::ops::ControlFlow;
use std::sync::mpsc::{sync_channel, Receiver};

use cuca::replay::{SessionOutline, TurnOutline, TurnPart, TurnSplitter};
use cuca::{
    parse_point_id, Message, MessageContentBlock, PluginError, ReplayNote, SessionBackend,
    SessionEvent,
};
use serde_json::json;

use super::{count, each_record, first_pass, stdout};
use crate::error::CliError;
use crate::store::Store;
use crate::term::{line, text};

/// Continuation lines of a multi-line text sit under its label's text.
const INDENT: &str = "    ";

/// How far the outline reader may run ahead of the printer, in turns.
const LOOKAHEAD_TURNS: usize = 64;

/// How many tool results' process details wait for their block at most. The splitter holds
/// a request's tool results until it knows whether they are the request's messages or the
/// answer's blocks, so a detail may wait that long; a request with more results than this
/// prints the oldest ones without their exit status rather than growing without bound.
const MAX_WAITING_DETAILS: usize = 256;

/// What a `ToolResult` record says about the process beyond its content block: the exit
/// status and the streams, where the recorder had them.
#[derive(Debug, Default)]
struct ToolDetail {
    exit_code: Option<i32>,
    stdout: Option<String>,
    stderr: Option<String>,
}

/// Details of tool results read but not yet printed, by tool call id, oldest first.
#[derive(Debug, Default)]
struct WaitingDetails(VecDeque<(String, ToolDetail)>);

impl WaitingDetails {
    /// Keeps what `event` says beyond its content block, when it is a tool result that says
    /// anything more.
    fn note(&mut self, event: &SessionEvent) {
        if let SessionEvent::ToolResult {
            tool_call_id,
            exit_code,
            stdout,
            stderr,
            ..
        } = event
        {
            if exit_code.is_none() && stdout.is_none() && stderr.is_none() {
                return;
            }
            if self.0.len() == MAX_WAITING_DETAILS {
                self.0.pop_front();
            }
            self.0.push_back((
                tool_call_id.clone(),
                ToolDetail {
                    exit_code: *exit_code,
                    stdout: stdout.clone(),
                    stderr: stderr.clone(),
                },
            ));
        }
    }

    /// The detail of the result `part` hands over, if it is one a record carried detail for.
    fn take_for(&mut self, part: &TurnPart) -> Option<ToolDetail> {
        let id = match part {
            TurnPart::Block(MessageContentBlock::ToolResult { tool_call_id, .. }) => tool_call_id,
            TurnPart::Message(Message { content, .. }) => match content.as_slice() {
                [MessageContentBlock::ToolResult { tool_call_id, .. }] => tool_call_id,
                _ => return None,
            },
            _ => return None,
        };
        let at = self.0.iter().position(|(waiting, _)| waiting == id)?;
        self.0.remove(at).map(|(_, detail)| detail)
    }
}

/// A content block in words, for a block of the answer and a block of a message alike:
/// `tool call: NAME (ID) ARGUMENTS`, `tool result: ID ok|error[, exit status N]: CONTENT`
/// (then the process's stderr and stdout on lines of their own, where recorded and not
/// already the content), `reasoning: TEXT`, `output: TEXT`, `image: TYPE, N bytes of base64`.
fn block_words(block: &MessageContentBlock, detail: Option<&ToolDetail>) -> String {
    match block {
        MessageContentBlock::Text { text: body } => format!("output: {}", text(body, INDENT)),
        MessageContentBlock::Thinking { thinking } => {
            format!("reasoning: {}", text(thinking, INDENT))
        }
        MessageContentBlock::ToolCall {
            id,
            name,
            arguments,
        } => format!(
            "tool call: {} ({}) {}",
            line(name),
            line(id),
            text(arguments, INDENT)
        ),
        MessageContentBlock::ToolResult {
            tool_call_id,
            content,
            is_error,
        } => {
            let mut words = format!(
                "tool result: {} {}",
                line(tool_call_id),
                if *is_error { "error" } else { "ok" }
            );
            // An exit status of 0 beside "ok" says nothing more; any other is the news.
            if let Some(code) = detail
                .and_then(|d| d.exit_code)
                .filter(|code| *code != 0 || *is_error)
            {
                words.push_str(&format!(", exit status {code}"));
            }
            words.push_str(&format!(": {}", text(content, INDENT)));
            for (name, stream) in [
                ("stderr", detail.and_then(|d| d.stderr.as_deref())),
                ("stdout", detail.and_then(|d| d.stdout.as_deref())),
            ] {
                if let Some(stream) = stream.filter(|s| !s.is_empty() && !content.contains(*s)) {
                    words.push_str(&format!("\n{INDENT}{name}: {}", text(stream, INDENT)));
                }
            }
            words
        }
        MessageContentBlock::ImageBase64 { media_type, data } => {
            format!(
                "image: {}, {} bytes of base64",
                line(media_type),
                data.len()
            )
        }
    }
}

fn note_json(note: &ReplayNote) -> serde_json::Value {
    match note {
        ReplayNote::ModelSwap { from, to, reason } => {
            json!({"kind": "ModelSwap", "from": from, "to": to, "reason": reason})
        }
        ReplayNote::Fork {
            from_point,
            to_session,
        } => json!({"kind": "Fork", "from_point": from_point, "to_session": to_session}),
        ReplayNote::UnpairedLatency { duration_ms } => {
            json!({"kind": "UnpairedLatency", "duration_ms": duration_ms})
        }
        ReplayNote::UnpairedTokenUsage {
            prompt_tokens,
            completion_tokens,
        } => {
            json!({"kind": "UnpairedTokenUsage", "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens})
        }
        other => json!({"kind": format!("{other:?}")}),
    }
}

fn note_words(note: &ReplayNote) -> String {
    match note {
        ReplayNote::ModelSwap { from, to, reason } => {
            format!("model swap {} -> {}: {}", line(from), line(to), line(reason))
        }
        ReplayNote::Fork {
            from_point,
            to_session,
        } => format!("fork at {} -> {}", line(from_point), line(to_session)),
        ReplayNote::UnpairedLatency { duration_ms } => {
            format!("latency {duration_ms} ms with no token usage after it")
        }
        ReplayNote::UnpairedTokenUsage {
            prompt_tokens,
            completion_tokens,
        } => format!(
            "token usage ({prompt_tokens} prompt, {completion_tokens} completion) with no latency before it"
        ),
        other => line(&format!("{other:?}")).to_string(),
    }
}

/// What the first pass learnt.
struct Plan {
    outline: SessionOutline,
    /// The outline of the turn `--turn` asked for.
    selected: Option<TurnOutline>,
    /// The final turn, when it holds only audit notes (a fork of a finished session): shown
    /// as notes after the last turn, not as a call that never finished.
    notes_after: Option<TurnOutline>,
}

impl Plan {
    /// Turns shown as turns: the final notes-only turn is not one.
    fn shown_turns(&self) -> usize {
        self.outline.turns - usize::from(self.notes_after.is_some())
    }

    fn is_notes_after(&self, outline: &TurnOutline) -> bool {
        self.notes_after
            .is_some_and(|notes| notes.turn == outline.turn)
    }
}

/// Pass 1: the whole session scanned and checked, its turns counted, through `through`.
fn plan(
    store: &Store,
    session: &str,
    through: Option<u64>,
    turn: Option<usize>,
) -> Result<Plan, CliError> {
    let (mut selected, mut last) = (None, None);
    let mut splitter = TurnSplitter::new(session, |part| {
        if let TurnPart::End(outline) = part {
            if Some(outline.turn) == turn {
                selected = Some(outline);
            }
            last = Some(outline);
        }
        Ok(ControlFlow::Continue(()))
    });
    let mut found = false;
    first_pass(store, session, &mut |record| {
        if found {
            return Ok(());
        }
        found = through == Some(record.sequence());
        // The plan needs the turns' outlines, which the event's kind and numbers decide:
        // the hollow event (no text) segments as the whole one does and allocates nothing.
        splitter.push(record.sequence(), record.hollow_event())
    })?;
    if let (Some(sequence), false) = (through, found) {
        return Err(CliError::Usage(format!(
            "no record of session {session:?} has sequence {sequence}, so there is no point {}",
            line(&format!("{session}:{sequence}"))
        )));
    }
    let outline = splitter.finish()?;
    let notes_after = last.filter(|last| last.holds_only_notes() && last.turn > 0);
    Ok(Plan {
        outline,
        selected,
        notes_after,
    })
}

/// The human rendering, fed part by part.
struct Human<'o, W: Write> {
    out: &'o mut W,
    /// The label of a reasoning or output run whose line is still open: consecutive blocks
    /// of one kind are one streamed answer, printed as one line.
    open_run: Option<&'static str>,
}

impl<W: Write> Human<'_, W> {
    fn close_run(&mut self) -> std::io::Result<()> {
        if self.open_run.take().is_some() {
            writeln!(self.out)?;
        }
        Ok(())
    }

    fn start(&mut self, outline: &TurnOutline, plan: &Plan) -> std::io::Result<()> {
        self.close_run()?;
        let range = format!("{}..={}", outline.first_sequence, outline.last_sequence);
        if plan.is_notes_after(outline) {
            // The notes block's 0-based index is the count of turns before it, so it is also
            // the 1-based number of the last turn.
            return writeln!(
                self.out,
                "Notes after turn {} (records {range})",
                outline.turn
            );
        }
        let state = if outline.is_complete() {
            "complete"
        } else {
            "incomplete: no Latency/TokenUsage pair closes it"
        };
        // Turns are numbered from 1 in every output, as the viewer and `cuca grep` number them.
        writeln!(
            self.out,
            "Turn {} (records {range}, {state})",
            outline.turn + 1
        )
    }

    /// A message: its role and text, then every other block (tool calls with their names,
    /// ids and arguments, tool results with their content and error flag) on a line of its
    /// own under it; a message of no text starts with its first block.
    fn message(&mut self, message: &Message, detail: Option<&ToolDetail>) -> std::io::Result<()> {
        let body = message.text();
        let mut items = Vec::new();
        if !body.is_empty() {
            items.push(text(&body, INDENT).to_string());
        }
        for block in &message.content {
            if !matches!(block, MessageContentBlock::Text { .. }) {
                items.push(block_words(block, detail));
            }
        }
        write!(self.out, "  {}:", line(message.role.as_str()))?;
        match items.split_first() {
            None => writeln!(self.out, " "),
            Some((first, rest)) => {
                writeln!(self.out, " {first}")?;
                for item in rest {
                    writeln!(self.out, "{INDENT}{item}")?;
                }
                Ok(())
            }
        }
    }

    fn part(&mut self, part: TurnPart, detail: Option<ToolDetail>) -> std::io::Result<()> {
        let (label, body) = match part {
            TurnPart::Call(event) if is_outside(&event) => {
                self.close_run()?;
                return write!(self.out, "{}", super::outside::words(&event));
            }
            TurnPart::SystemPrompt(prompt) => {
                self.close_run()?;
                return writeln!(self.out, "  system: {}", text(&prompt, INDENT));
            }
            TurnPart::Message(message) => {
                self.close_run()?;
                return self.message(&message, detail.as_ref());
            }
            TurnPart::Note(note) => {
                self.close_run()?;
                return writeln!(self.out, "  note: {}", note_words(&note));
            }
            TurnPart::Call(SessionEvent::CallRequest {
                model,
                parameters,
                tools,
                messages,
            }) => {
                self.close_run()?;
                let model = if model.is_empty() {
                    "the server's default".to_owned()
                } else {
                    model
                };
                return writeln!(
                    self.out,
                    "  call: model {}, {messages} messages sent, parameters {}, tools {}",
                    line(&model),
                    line(&parameters),
                    line(&tools)
                );
            }
            TurnPart::Call(SessionEvent::CallFinish {
                finish_reason,
                model,
            }) => {
                self.close_run()?;
                return writeln!(
                    self.out,
                    "  finished: {} (answered by {})",
                    line(
                        finish_reason
                            .as_deref()
                            .unwrap_or("no reason given: the stream was cut short")
                    ),
                    line(&model)
                );
            }
            TurnPart::Call(SessionEvent::CallIncomplete { reason }) => {
                self.close_run()?;
                return writeln!(self.out, "  incomplete: {}", line(&reason));
            }
            TurnPart::Call(SessionEvent::CallWire { format, wire }) => {
                self.close_run()?;
                return writeln!(self.out, "  wire ({}): {}", line(&format), line(&wire));
            }
            TurnPart::Block(block) => match block {
                MessageContentBlock::Thinking { thinking } => ("reasoning", thinking),
                MessageContentBlock::Text { text } => ("output", text),
                other => {
                    self.close_run()?;
                    return writeln!(self.out, "  {}", block_words(&other, detail.as_ref()));
                }
            },
            _ => return Ok(()),
        };
        if self.open_run != Some(label) {
            self.close_run()?;
            write!(self.out, "  {label}: ")?;
            self.open_run = Some(label);
        }
        write!(self.out, "{}", text(&body, INDENT))
    }

    fn end(&mut self, outline: &TurnOutline) -> std::io::Result<()> {
        self.close_run()?;
        if let Some(c) = outline.completion {
            writeln!(
                self.out,
                "  completion: {} ms, {}, {}",
                c.duration_ms,
                count(c.prompt_tokens, "prompt token", "prompt tokens"),
                count(c.completion_tokens, "completion token", "completion tokens")
            )?;
        }
        Ok(())
    }
}

/// The JSON rendering: one object per turn, with the keys in the order serde_json's map
/// writes them (sorted), so a turn reads as it did when it was built whole. Blocks are
/// written as they arrive; the few system prompts, messages and notes wait for the end.
#[derive(Default)]
struct Json {
    system_prompts: Vec<serde_json::Value>,
    messages: Vec<serde_json::Value>,
    notes: Vec<serde_json::Value>,
    /// The turn's CallRequest / CallFinish records, written as `"call"` only when there are
    /// any (a session recorded without call metadata keeps its exact JSON).
    calls: Vec<serde_json::Value>,
    /// The workspace snapshots before the turn's call, written as `"workspace"` only when
    /// there are any, as `"call"` is.
    workspace: Vec<serde_json::Value>,
    /// The shell commands before the turn's call, written as `"shell"` likewise.
    shell: Vec<serde_json::Value>,
    n_blocks: usize,
}

fn encode(value: &impl serde::Serialize) -> Result<String, CliError> {
    serde_json::to_string(value).map_err(|error| CliError::Failed(format!("encode turn: {error}")))
}

impl Json {
    fn start(&mut self, out: &mut impl Write) -> Result<(), CliError> {
        *self = Json::default();
        out.write_all(b"{\"blocks\":[")?;
        Ok(())
    }

    fn part(&mut self, out: &mut impl Write, part: TurnPart) -> Result<(), CliError> {
        match part {
            TurnPart::SystemPrompt(prompt) => self.system_prompts.push(prompt.into()),
            TurnPart::Message(message) => self.messages.push(json!(message)),
            TurnPart::Note(note) => self.notes.push(note_json(&note)),
            TurnPart::Call(event @ SessionEvent::WorkspaceSnapshot { .. }) => {
                self.workspace.push(super::outside::json(&event));
            }
            TurnPart::Call(event @ SessionEvent::ShellCommand { .. }) => {
                self.shell.push(super::outside::json(&event));
            }
            TurnPart::Call(event) => self.calls.push(json!(event)),
            TurnPart::Block(block) => {
                if self.n_blocks > 0 {
                    out.write_all(b",")?;
                }
                self.n_blocks += 1;
                out.write_all(encode(&block)?.as_bytes())?;
            }
            _ => {}
        }
        Ok(())
    }

    fn end(
        &mut self,
        out: &mut impl Write,
        outline: &TurnOutline,
        plan: &Plan,
    ) -> Result<(), CliError> {
        let completion = outline.completion.map(|c| {
            json!({"completion_tokens": c.completion_tokens, "duration_ms": c.duration_ms, "prompt_tokens": c.prompt_tokens})
        });
        out.write_all(b"]")?;
        if !self.calls.is_empty() {
            write!(out, ",\"call\":{}", encode(&self.calls)?)?;
        }
        write!(
            out,
            ",\"complete\":{},\"completion\":{},\"first_sequence\":{},\"last_sequence\":{},\"messages\":{},\"notes\":{},\"notes_only\":{},\"records\":{}",
            outline.is_complete(),
            encode(&completion)?,
            outline.first_sequence,
            outline.last_sequence,
            encode(&self.messages)?,
            encode(&self.notes)?,
            plan.is_notes_after(outline),
            outline.records,
        )?;
        if !self.shell.is_empty() {
            write!(out, ",\"shell\":{}", encode(&self.shell)?)?;
        }
        write!(
            out,
            ",\"system_prompts\":{},\"turn\":{}",
            encode(&self.system_prompts)?,
            // From 1; a notes-only block is no turn, so it has no number.
            if plan.is_notes_after(outline) {
                "null".to_owned()
            } else {
                (outline.turn + 1).to_string()
            }
        )?;
        if !self.workspace.is_empty() {
            write!(out, ",\"workspace\":{}", encode(&self.workspace)?)?;
        }
        writeln!(out, "}}")?;
        Ok(())
    }
}

/// Pass 2: the session's parts through `visit`, from the first `limit` records.
///
/// The workspace's records (`WorkspaceSnapshot`, `ShellCommand`), which the splitter passes
/// over because no turn's request or answer holds them, are handed to `visit` as
/// `TurnPart::Call(event)` right after the `Start` of the turn they come before: the files
/// and commands the previous answer's tools acted on, which this call's request reflects.
/// Those after the last turn are handed after it.
fn split(
    backend: &dyn SessionBackend,
    session: &str,
    limit: u64,
    visit: &mut dyn FnMut(TurnPart, Option<ToolDetail>) -> Result<ControlFlow<()>, CliError>,
) -> Result<(), CliError> {
    // The splitter's visitor speaks `PluginError`; the printer's own error waits here.
    let mut failed: Option<CliError> = None;
    // A tool result's exit status and streams are in its record, not in the block the
    // splitter hands over: kept here, by call id, until the block comes.
    let details = RefCell::new(WaitingDetails::default());
    let outside = RefCell::new(Outside::default());
    let mut hand = |part: TurnPart, detail: Option<ToolDetail>| match visit(part, detail) {
        Ok(flow) => Ok(flow),
        Err(error) => {
            failed = Some(error);
            Err(PluginError::validation("replay", "the printer stopped"))
        }
    };
    let mut splitter = TurnSplitter::new(session, |part| {
        let detail = details.borrow_mut().take_for(&part);
        let starts = matches!(part, TurnPart::Start { .. });
        let mut flow = hand(part, detail)?;
        if starts {
            for event in outside.borrow_mut().take() {
                if flow.is_continue() {
                    flow = hand(TurnPart::Call(event), None)?;
                }
            }
        }
        Ok(flow)
    });
    let result = each_record(backend, session, limit, &mut |record| {
        details.borrow_mut().note(&record.event);
        if is_outside(&record.event) {
            outside.borrow_mut().keep(record.event.clone());
        }
        splitter.push(record.sequence, record.event)?;
        Ok(if splitter.is_stopped() {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    })
    .and_then(|()| splitter.finish().map(drop).map_err(CliError::from));
    let result = result.and_then(|()| {
        // What the agent did after its last call: no turn follows to hold it.
        for event in outside.borrow_mut().take() {
            if hand(TurnPart::Call(event), None)
                .map_err(CliError::from)?
                .is_break()
            {
                break;
            }
        }
        Ok(())
    });
    match failed {
        Some(error) => Err(error),
        None => result,
    }
}

/// Whether `event` is one of the workspace's records, which [`split`] hands over itself.
fn is_outside(event: &SessionEvent) -> bool {
    matches!(
        event,
        SessionEvent::WorkspaceSnapshot { .. } | SessionEvent::ShellCommand { .. }
    )
}

/// Most workspace records kept for the turn they come before: an agent runs a few commands
/// between two calls; a script that ran thousands without a call keeps the last ones.
const MAX_OUTSIDE: usize = 1_024;

/// The workspace's records read since the last turn started, oldest first.
#[derive(Debug, Default)]
struct Outside(VecDeque<SessionEvent>);

impl Outside {
    fn keep(&mut self, event: SessionEvent) {
        if self.0.len() == MAX_OUTSIDE {
            self.0.pop_front();
        }
        self.0.push_back(event);
    }

    fn take(&mut self) -> VecDeque<SessionEvent> {
        std::mem::take(&mut self.0)
    }
}

/// The outline of each turn, in order, from a reader running ahead on another thread.
fn next_outline(outlines: &Receiver<TurnOutline>, turn: usize) -> Result<TurnOutline, CliError> {
    match outlines.recv() {
        Ok(outline) if outline.turn == turn => Ok(outline),
        _ => Err(CliError::Failed(format!(
            "the session changed while it was read: turn {turn} is not what the first read found"
        ))),
    }
}

/// `cuca replay DIR SESSION [--turn N] [--at POINT]`.
pub(crate) fn replay(
    store: &Store,
    session: &str,
    turn: Option<usize>,
    at: Option<&str>,
    as_json: bool,
) -> Result<(), CliError> {
    let backend = store.backend();
    let through = match at {
        Some(point) => {
            let (point_session, sequence) = parse_point_id(point)?;
            if point_session != session {
                return Err(CliError::Usage(format!(
                    "--at {point:?} is a point of session {point_session:?}, not of {session:?}"
                )));
            }
            Some(sequence)
        }
        None => None,
    };
    // `--turn N` counts from 1, as every output numbers turns; the splitter's index from 0.
    let turn_idx = match turn {
        Some(0) => {
            return Err(CliError::Usage(
                "there is no turn 0: turns count from 1 (--turn 1 is the first)".into(),
            ))
        }
        other => other.map(|n| n - 1),
    };
    let plan = plan(store, session, through, turn_idx)?;
    let selected = match turn {
        Some(n) => match plan
            .selected
            .filter(|outline| !plan.is_notes_after(outline))
        {
            Some(outline) => Some(outline),
            None => {
                return Err(CliError::Usage(format!(
                    "session {session:?} has {}, so turn {n} does not exist (turns count from 1)",
                    count(plan.shown_turns() as u64, "turn", "turns")
                )))
            }
        },
        None => None,
    };
    let limit = plan.outline.records as u64;
    let mut out = stdout();
    if !as_json {
        let notes = if plan.notes_after.is_some() {
            " and notes after them"
        } else {
            ""
        };
        writeln!(
            out,
            "Session {}: {}{notes}, {}, {}{}",
            line(&format!("{session:?}")),
            count(plan.shown_turns() as u64, "turn", "turns"),
            count(limit, "record", "records"),
            count(plan.outline.blocks as u64, "block", "blocks"),
            at.map_or_else(String::new, |point| format!(
                " (prefix through {})",
                line(point)
            ))
        )?;
    }
    // Which turn is being printed, if any: only the selected one with --turn.
    let wanted = |index: usize| selected.is_none_or(|outline| outline.turn == index);
    let mut printing = false;
    if as_json {
        let mut json = Json::default();
        split(backend, session, limit, &mut |part, _| {
            match part {
                TurnPart::Start { turn, .. } => {
                    printing = wanted(turn);
                    if printing {
                        json.start(&mut out)?;
                    }
                }
                TurnPart::End(outline) if printing => {
                    json.end(&mut out, &outline, &plan)?;
                    if selected.is_some() {
                        return Ok(ControlFlow::Break(()));
                    }
                }
                part if printing => json.part(&mut out, part)?,
                _ => {}
            }
            Ok(ControlFlow::Continue(()))
        })?;
    } else if let Some(outline) = selected {
        let mut human = Human {
            out: &mut out,
            open_run: None,
        };
        split(backend, session, limit, &mut |part, detail| {
            match part {
                TurnPart::Start { turn, .. } => {
                    printing = turn == outline.turn;
                    if printing {
                        human.start(&outline, &plan)?;
                    }
                }
                TurnPart::End(end) if printing => {
                    human.end(&end)?;
                    return Ok(ControlFlow::Break(()));
                }
                part if printing => human.part(part, detail)?,
                _ => {}
            }
            Ok(ControlFlow::Continue(()))
        })?;
    } else {
        std::thread::scope(|scope| -> Result<(), CliError> {
            let (send, outlines) = sync_channel::<TurnOutline>(LOOKAHEAD_TURNS);
            let ahead = scope.spawn(move || {
                split(backend, session, limit, &mut |part, _| {
                    if let TurnPart::End(outline) = part {
                        if send.send(outline).is_err() {
                            // The printer stopped (a closed stdout): so does the reader.
                            return Ok(ControlFlow::Break(()));
                        }
                    }
                    Ok(ControlFlow::Continue(()))
                })
            });
            let mut human = Human {
                out: &mut out,
                open_run: None,
            };
            let printed = split(backend, session, limit, &mut |part, detail| {
                match part {
                    TurnPart::Start { turn, .. } => {
                        let outline = next_outline(&outlines, turn)?;
                        human.start(&outline, &plan)?;
                    }
                    TurnPart::End(end) => human.end(&end)?,
                    part => human.part(part, detail)?,
                }
                Ok(ControlFlow::Continue(()))
            });
            drop(outlines);
            let ahead = ahead
                .join()
                .unwrap_or_else(|_| Err(CliError::Failed("the outline reader panicked".into())));
            printed.and(ahead)
        })?;
        if turn.is_none() && at.is_none() {
            write_conversations(&mut out, store, session)?;
        }
    }
    out.flush()?;
    Ok(())
}

/// After a whole base session, the other conversations it holds (a session holds
/// conversations, each its own session `{base}:conv:{n}`), each with the line that replays it.
fn write_conversations(out: &mut impl Write, store: &Store, session: &str) -> Result<(), CliError> {
    let mut conversations: Vec<(u64, String)> = store
        .backend()
        .sessions()?
        .into_iter()
        .filter_map(|id| match cuca::conversation_parent(&id) {
            Some((base, n)) if base == session => Some((n, id)),
            _ => None,
        })
        .collect();
    conversations.sort();
    if conversations.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "Session {} holds {} more {}: replay each on its own:",
        line(&format!("{session:?}")),
        conversations.len(),
        if conversations.len() == 1 {
            "conversation"
        } else {
            "conversations"
        }
    )?;
    for (_, id) in &conversations {
        writeln!(
            out,
            "  cuca replay {} {}",
            line(store.command_form()),
            line(id)
        )?;
    }
    Ok(())
}
