//! `cuca replay DIR SESSION`: the turns through `SessionReplay`.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use cuca::store_file::Verdict;
use cuca::{parse_point_id, MessageContentBlock, ReplayNote, ReplayTurn, SessionReplay};
use serde_json::json;

use super::{open_dir, recovered_line, scan_session, stdout};
use crate::error::CliError;
use crate::ui;

/// Consecutive blocks of one kind joined: a streamed answer arrives as many small blocks.
fn joined_blocks(blocks: &[MessageContentBlock]) -> Vec<(&'static str, String)> {
    let mut runs: Vec<(&'static str, String)> = Vec::new();
    for block in blocks {
        let (label, text) = match block {
            MessageContentBlock::Thinking { thinking } => ("reasoning", thinking.clone()),
            MessageContentBlock::Text { text } => ("output", text.clone()),
            MessageContentBlock::ToolCall {
                id,
                name,
                arguments,
            } => ("tool call", format!("{name} ({id}) {arguments}")),
            MessageContentBlock::ToolResult {
                tool_call_id,
                content,
                is_error,
            } => (
                "tool result",
                format!(
                    "{tool_call_id} {}: {content}",
                    if *is_error { "error" } else { "ok" }
                ),
            ),
            other => ("block", other.kind().to_owned()),
        };
        match runs.last_mut() {
            Some((last, joined)) if *last == label && matches!(label, "reasoning" | "output") => {
                joined.push_str(&text)
            }
            _ => runs.push((label, text)),
        }
    }
    runs
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
            format!("model swap {from} -> {to}: {reason}")
        }
        ReplayNote::Fork {
            from_point,
            to_session,
        } => format!("fork at {from_point} -> {to_session}"),
        ReplayNote::UnpairedLatency { duration_ms } => {
            format!("latency {duration_ms} ms with no token usage after it")
        }
        ReplayNote::UnpairedTokenUsage {
            prompt_tokens,
            completion_tokens,
        } => format!(
            "token usage ({prompt_tokens} prompt, {completion_tokens} completion) with no latency before it"
        ),
        other => format!("{other:?}"),
    }
}

fn write_turn(
    out: &mut impl Write,
    turn_idx: usize,
    turn: &ReplayTurn,
    as_json: bool,
) -> Result<(), CliError> {
    let range = turn.sequence_range();
    if as_json {
        let completion = turn.completion().map(|c| {
            json!({"duration_ms": c.duration_ms, "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens})
        });
        let row = json!({
            "turn": turn_idx,
            "first_sequence": range.start(),
            "last_sequence": range.end(),
            "records": turn.n_records(),
            "complete": turn.is_complete(),
            "system_prompts": turn.system_prompts(),
            "messages": turn.messages(),
            "blocks": turn.blocks(),
            "completion": completion,
            "notes": turn.notes().iter().map(note_json).collect::<Vec<_>>(),
        });
        writeln!(out, "{row}")?;
        return Ok(());
    }
    let state = if turn.is_complete() {
        "complete"
    } else {
        "incomplete: no Latency/TokenUsage pair closes it"
    };
    writeln!(
        out,
        "Turn {turn_idx} (records {}..={}, {state})",
        range.start(),
        range.end()
    )?;
    for prompt in turn.system_prompts() {
        writeln!(out, "  system: {prompt}")?;
    }
    for message in turn.messages() {
        writeln!(out, "  {}: {}", message.role.as_str(), message.text())?;
    }
    for (label, text) in joined_blocks(turn.blocks()) {
        writeln!(out, "  {label}: {text}")?;
    }
    if let Some(c) = turn.completion() {
        writeln!(
            out,
            "  completion: {} ms, {} prompt tokens, {} completion tokens",
            c.duration_ms, c.prompt_tokens, c.completion_tokens
        )?;
    }
    for note in turn.notes() {
        writeln!(out, "  note: {}", note_words(note))?;
    }
    Ok(())
}

/// `cuca replay DIR SESSION [--turn N] [--at POINT]`.
pub(crate) fn replay(
    dir: &Path,
    session: &str,
    turn: Option<usize>,
    at: Option<&str>,
    as_json: bool,
) -> Result<(), CliError> {
    let backend = open_dir(dir)?;
    // Scan first: a missing session is a usage error (a backend replays it as empty), and a
    // recovered file gets its warning line.
    let report = scan_session(&backend, session)?;
    if report.verdict == Verdict::Recovered {
        ui::warn(&recovered_line(session, &report));
    }
    if !report.is_loadable() {
        // `into_records` turns the refused verdict into the error naming file and offset.
        return report.into_records().map(drop).map_err(CliError::from);
    }
    drop(report);
    let replay = SessionReplay::new(Arc::new(backend));
    let trajectory = match at {
        Some(point) => {
            let (point_session, _) = parse_point_id(point)?;
            if point_session != session {
                return Err(CliError::Usage(format!(
                    "--at {point:?} is a point of session {point_session:?}, not of {session:?}"
                )));
            }
            replay.load_at_point(point)?
        }
        None => replay.load(session)?,
    };
    let mut out = stdout();
    if !as_json {
        let usage = trajectory.usage();
        writeln!(
            out,
            "Session {session:?}: {} turns, {} records, {} blocks{}",
            usage.turns,
            usage.records,
            usage.blocks,
            at.map_or_else(String::new, |point| format!(" (prefix through {point})"))
        )?;
    }
    match turn {
        Some(turn_idx) => {
            let Some(one) = trajectory.turn(turn_idx) else {
                return Err(CliError::Usage(format!(
                    "session {session:?} has {} turns, so turn {turn_idx} does not exist (turns count from 0)",
                    trajectory.len()
                )));
            };
            write_turn(&mut out, turn_idx, one, as_json)?;
        }
        None => {
            for (turn_idx, one) in trajectory.turns().iter().enumerate() {
                write_turn(&mut out, turn_idx, one, as_json)?;
            }
        }
    }
    out.flush()?;
    Ok(())
}
