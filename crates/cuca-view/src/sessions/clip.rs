//! How much of a turn a session page keeps: its text up to a byte budget, its records up to a count.
//!
//! A page shows [`TURNS_PER_PAGE`](super::TURNS_PER_PAGE) turns, but a turn has no size limit
//! of its own: a model that streamed for an hour, or one record of 32 MiB, is one turn. Kept
//! whole, a page of a 622 MB turn held 2.26 GB (the records, their joined text, its escaped
//! HTML). Clipped as each record is read, a page holds at most its turns' budgets plus the one
//! record being decoded, however long a turn is.

use cuca_events::{MessageContentBlock, SessionEvent};

/// The most bytes of recorded text (prompts, outputs, reasoning, tool arguments and results)
/// one turn keeps for its page: 256 KiB is a long answer read in a browser, and twenty turns of
/// it are a 5 MiB page. What is cut is counted and the page says how much, and where to read it
/// whole.
pub const MAX_TURN_TEXT_BYTES: usize = 256 * 1024;

/// The most bytes one label (an id, a name, a model) keeps, outside the turn's text budget so a
/// long answer never blanks the name of the tool call after it: real labels are a few dozen
/// bytes.
pub const MAX_LABEL_BYTES: usize = 1024;

/// The most records one turn keeps for its page. A streamed answer is one record a block, so a
/// long answer is thousands; past this many the rest of the turn is read (to find where it
/// ends) and counted, not kept, except the few records its header shows (latency, tokens,
/// finish), up to [`MAX_TAIL_RECORDS`] more.
pub const MAX_TURN_RECORDS: usize = 2_000;

/// Header records (latency, token usage, call finish) a turn keeps past [`MAX_TURN_RECORDS`],
/// so the header of a long turn still shows its numbers.
pub const MAX_TAIL_RECORDS: usize = 16;

/// What a page left out of one turn.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Clipped {
    /// Bytes of text cut from the records it kept.
    pub bytes: u64,
    /// Records it did not keep at all.
    pub records: u64,
}

impl Clipped {
    /// Whether anything was left out.
    pub fn any(&self) -> bool {
        self.bytes > 0 || self.records > 0
    }
}

/// Whether a turn that already keeps `kept` records keeps one more holding `event`.
pub(crate) fn keeps(kept: usize, event: &SessionEvent) -> bool {
    kept < MAX_TURN_RECORDS
        || (kept < MAX_TURN_RECORDS + MAX_TAIL_RECORDS
            && matches!(
                event,
                SessionEvent::Latency { .. }
                    | SessionEvent::TokenUsage { .. }
                    | SessionEvent::CallFinish { .. }
                    | SessionEvent::CallWire { .. }
            ))
}

/// Shortens `text` to at most `limit` bytes (at a character boundary) and gives the memory
/// back; returns the bytes cut.
fn clip_to(text: &mut String, limit: usize) -> u64 {
    if text.len() <= limit {
        return 0;
    }
    let mut cut = limit;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let removed = text.len() - cut;
    text.truncate(cut);
    // The decoded record may be 32 MiB; the page keeps only what it shows.
    text.shrink_to_fit();
    removed as u64
}

/// Shortens `text` to at most `limit` bytes by cutting its start (at a character boundary):
/// a stream's tail is kept for its end, where a command says what went wrong. Returns the
/// bytes cut.
fn clip_start(text: &mut String, limit: usize) -> u64 {
    if text.len() <= limit {
        return 0;
    }
    let mut cut = text.len() - limit;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    text.drain(..cut);
    text.shrink_to_fit();
    cut as u64
}

/// Shortens a label (a model's name, an id) to [`MAX_LABEL_BYTES`].
pub(crate) fn clip_label(text: &mut String) {
    clip_to(text, MAX_LABEL_BYTES);
}

/// Shortens a text field to what is left of the turn's `budget`, spending it; returns the bytes
/// cut.
fn clip_text(text: &mut String, budget: &mut usize) -> u64 {
    let removed = clip_to(text, *budget);
    *budget = budget.saturating_sub(text.len());
    removed
}

/// Clips every string of `event`: text fields against the turn's `budget`, labels to
/// [`MAX_LABEL_BYTES`] each; returns the bytes cut.
pub(crate) fn clip_event(event: &mut SessionEvent, budget: &mut usize) -> u64 {
    let mut cut = 0;
    let mut text = |s: &mut String, budget: &mut usize| cut += clip_text(s, budget);
    let label = |s: &mut String| clip_to(s, MAX_LABEL_BYTES);
    let mut labels = 0;
    match event {
        SessionEvent::SystemPrompt { text: t }
        | SessionEvent::Reasoning { text: t }
        | SessionEvent::Output { text: t } => text(t, budget),
        SessionEvent::Message(message) => {
            for block in &mut message.content {
                match block {
                    MessageContentBlock::Text { text: t } => text(t, budget),
                    MessageContentBlock::Thinking { thinking } => text(thinking, budget),
                    MessageContentBlock::ToolCall {
                        id,
                        name,
                        arguments,
                    } => {
                        labels += label(id) + label(name);
                        text(arguments, budget);
                    }
                    MessageContentBlock::ToolResult {
                        tool_call_id,
                        content,
                        ..
                    } => {
                        labels += label(tool_call_id);
                        text(content, budget);
                    }
                    MessageContentBlock::ImageBase64 { media_type, data } => {
                        labels += label(media_type);
                        text(data, budget);
                    }
                }
            }
        }
        SessionEvent::ToolCall {
            id,
            name,
            arguments,
        } => {
            labels += label(id) + label(name);
            text(arguments, budget);
        }
        SessionEvent::ToolResult {
            tool_call_id,
            content,
            stdout,
            stderr,
            ..
        } => {
            labels += label(tool_call_id);
            text(content, budget);
            for stream in [stdout, stderr].into_iter().flatten() {
                text(stream, budget);
            }
        }
        SessionEvent::ModelSwap { from, to, reason } => {
            labels += label(from) + label(to);
            text(reason, budget);
        }
        SessionEvent::Fork {
            from_point,
            to_session,
        } => labels += label(from_point) + label(to_session),
        SessionEvent::CallRequest {
            model,
            parameters,
            tools,
            ..
        } => {
            labels += label(model);
            text(parameters, budget);
            text(tools, budget);
        }
        SessionEvent::CallFinish {
            finish_reason,
            model,
        } => {
            labels += label(model);
            if let Some(reason) = finish_reason {
                labels += label(reason);
            }
        }
        SessionEvent::CallWire { format, wire } => {
            labels += label(format);
            text(wire, budget);
        }
        SessionEvent::ShellCommand {
            command,
            cwd,
            origin,
            stdout,
            stderr,
            ..
        } => {
            labels += label(cwd) + label(origin);
            text(command, budget);
            for stream in [stdout, stderr] {
                let removed = clip_start(&mut stream.tail, *budget);
                *budget = budget.saturating_sub(stream.tail.len());
                // What the page cut is cut from the tail's start: the record's own count of
                // what it left out grows by it, so the page says how much it shows.
                stream.cut += removed;
                cut += removed;
            }
        }
        _ => {}
    }
    cut + labels
}
