//! `cuca show DIR SESSION`: the records, one line each, or their per-kind counts.

use std::io::Write;
use std::ops::ControlFlow;

use cuca::{Message, SessionEvent};
use serde_json::json;

use super::{
    count, each_record, first_pass, format_ms, kinds_words, stdout, write_json_line, PREVIEW_CHARS,
};
use crate::error::CliError;
use crate::store::Store;
use crate::term::line;

/// A one-line, clipped rendering of `text`: its first characters, every control character
/// (newlines and tabs included) escaped.
fn quoted_preview(text: &str) -> String {
    format!("\"{}\"", clipped(text))
}

/// `text` cut to [`PREVIEW_CHARS`], made printable, with `…` when cut; JSON shown as itself.
fn clipped(text: &str) -> String {
    let head: String = text.chars().take(PREVIEW_CHARS).collect();
    let more = if text.chars().nth(PREVIEW_CHARS).is_some() {
        "…"
    } else {
        ""
    };
    format!("{}{more}", line(&head))
}

fn message_preview(message: &Message) -> String {
    format!(
        "{}: {}",
        line(message.role.as_str()),
        quoted_preview(&message.text())
    )
}

/// What `cuca show` prints after the kind.
pub(crate) fn preview(event: &SessionEvent) -> String {
    match event {
        SessionEvent::SystemPrompt { text }
        | SessionEvent::Reasoning { text }
        | SessionEvent::Output { text } => quoted_preview(text),
        SessionEvent::Message(message) => message_preview(message),
        SessionEvent::ToolCall {
            id,
            name,
            arguments,
        } => format!(
            "{} ({}) {}",
            line(name),
            line(id),
            quoted_preview(arguments)
        ),
        SessionEvent::ToolResult {
            tool_call_id,
            content,
            is_error,
            exit_code,
            ..
        } => {
            let status = if *is_error { "error" } else { "ok" };
            let exit = exit_code.map_or_else(String::new, |code| format!(", exit {code}"));
            format!(
                "{} {status}{exit} {}",
                line(tool_call_id),
                quoted_preview(content)
            )
        }
        SessionEvent::Latency { duration_ms } => format!("{duration_ms} ms"),
        SessionEvent::TokenUsage {
            prompt_tokens,
            completion_tokens,
        } => format!("{prompt_tokens} prompt, {completion_tokens} completion tokens"),
        SessionEvent::ModelSwap { from, to, reason } => {
            format!("{} -> {}: {}", line(from), line(to), quoted_preview(reason))
        }
        SessionEvent::Fork {
            from_point,
            to_session,
        } => format!("at {} -> {}", line(from_point), line(to_session)),
        SessionEvent::CallRequest {
            model,
            parameters,
            tools,
            messages,
        } => {
            let model = if model.is_empty() {
                "the server's default"
            } else {
                model
            };
            let n_tools =
                serde_json::from_str::<Vec<serde_json::Value>>(tools).map_or(0, |t| t.len());
            format!(
                "{} with {messages} messages, {n_tools} tools, parameters {}",
                line(model),
                clipped(parameters)
            )
        }
        SessionEvent::CallFinish {
            finish_reason,
            model,
        } => format!(
            "{} by {}",
            line(
                finish_reason
                    .as_deref()
                    .unwrap_or("no finish reason (cut short)")
            ),
            line(model)
        ),
        SessionEvent::CallIncomplete { reason } => quoted_preview(reason),
        SessionEvent::CallWire { format, wire } => format!("{} {}", line(format), clipped(wire)),
        SessionEvent::RequestDigest { sha256 } => format!("sha256 {sha256}"),
        SessionEvent::TokenDetail(detail) => detail.to_string(),
        // A kind added after this command was written still gets its line, without a preview.
        _ => String::new(),
    }
}

/// `cuca show DIR SESSION`: a first pass checks the session (and counts its kinds), a
/// second prints it record by record; nothing is kept, so any length prints.
pub(crate) fn show(
    store: &Store,
    session: &str,
    kinds: bool,
    as_json: bool,
) -> Result<(), CliError> {
    let mut counts = [0u64; SessionEvent::KINDS.len()];
    let n_records = first_pass(store, session, &mut |record| {
        counts[record.kind_index()] += 1;
        Ok(())
    })?;
    let mut out = stdout();
    if kinds {
        if as_json {
            let mut by_kind = serde_json::Map::new();
            for (kind, n) in SessionEvent::KINDS.iter().zip(counts) {
                if n > 0 {
                    by_kind.insert((*kind).to_owned(), n.into());
                }
            }
            let row = json!({"session": session, "records": n_records, "kinds": by_kind});
            writeln!(out, "{row}")?;
        } else {
            writeln!(
                out,
                "{}: {}: {}",
                line(session),
                count(n_records, "record", "records"),
                kinds_words(&counts)
            )?;
        }
        out.flush()?;
        return Ok(());
    }
    each_record(store.backend(), session, n_records, &mut |record| {
        if as_json {
            write_json_line(&mut out, &record)?;
            Ok(ControlFlow::Continue(()))
        } else {
            writeln!(
                out,
                "{:>6}  {}  {:<12}  {}",
                record.sequence,
                format_ms(record.timestamp_ms),
                record.event.kind(),
                preview(&record.event)
            )?;
            Ok(ControlFlow::Continue(()))
        }
    })?;
    out.flush()?;
    Ok(())
}
