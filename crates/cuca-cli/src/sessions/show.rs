//! `cuca show DIR SESSION`: the records, one line each, or their per-kind counts.

use std::io::Write;
use std::path::Path;

use cuca::{Message, SessionEvent};
use serde_json::json;

use super::{format_ms, kinds_line, load_records, open_dir, stdout, PREVIEW_CHARS};
use crate::error::CliError;

/// A one-line, clipped rendering of `text`: newlines and tabs are escaped.
fn clip(text: &str) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == PREVIEW_CHARS {
            out.push('…');
            break;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    format!("\"{out}\"")
}

fn message_preview(message: &Message) -> String {
    format!("{}: {}", message.role.as_str(), clip(&message.text()))
}

/// What `cuca show` prints after the kind.
fn preview(event: &SessionEvent) -> String {
    match event {
        SessionEvent::SystemPrompt { text }
        | SessionEvent::Reasoning { text }
        | SessionEvent::Output { text } => clip(text),
        SessionEvent::Message(message) => message_preview(message),
        SessionEvent::ToolCall {
            id,
            name,
            arguments,
        } => format!("{name} ({id}) {}", clip(arguments)),
        SessionEvent::ToolResult {
            tool_call_id,
            content,
            is_error,
            exit_code,
            ..
        } => {
            let status = if *is_error { "error" } else { "ok" };
            let exit = exit_code.map_or_else(String::new, |code| format!(", exit {code}"));
            format!("{tool_call_id} {status}{exit} {}", clip(content))
        }
        SessionEvent::Latency { duration_ms } => format!("{duration_ms} ms"),
        SessionEvent::TokenUsage {
            prompt_tokens,
            completion_tokens,
        } => format!("{prompt_tokens} prompt, {completion_tokens} completion tokens"),
        SessionEvent::ModelSwap { from, to, reason } => {
            format!("{from} -> {to}: {}", clip(reason))
        }
        SessionEvent::Fork {
            from_point,
            to_session,
        } => format!("at {from_point} -> {to_session}"),
        _ => String::new(),
    }
}

/// `cuca show DIR SESSION`.
pub(crate) fn show(dir: &Path, session: &str, kinds: bool, as_json: bool) -> Result<(), CliError> {
    let backend = open_dir(dir)?;
    let records = load_records(&backend, session)?;
    let mut out = stdout();
    if kinds {
        if as_json {
            let mut counts = serde_json::Map::new();
            for kind in SessionEvent::KINDS {
                let n = records.iter().filter(|r| r.event.kind() == kind).count();
                if n > 0 {
                    counts.insert(kind.to_owned(), n.into());
                }
            }
            let row = json!({"session": session, "records": records.len(), "kinds": counts});
            writeln!(out, "{row}")?;
        } else {
            writeln!(
                out,
                "{session}: {} records: {}",
                records.len(),
                kinds_line(&records)
            )?;
        }
    } else {
        for record in &records {
            if as_json {
                let line = serde_json::to_string(record)
                    .map_err(|error| CliError::Failed(format!("encode record: {error}")))?;
                writeln!(out, "{line}")?;
            } else {
                writeln!(
                    out,
                    "{:>6}  {}  {:<12}  {}",
                    record.sequence,
                    format_ms(record.timestamp_ms),
                    record.event.kind(),
                    preview(&record.event)
                )?;
            }
        }
    }
    out.flush()?;
    Ok(())
}
