//! Journal run pages in plain words: outcomes, origins and statuses as sentences, not Rust's
//! `Debug` text, and each entry's content on its own page.

use cuca_journal::format::{AgentOrigin, AgentStatus, Input, StoredBlock, StoredMessage};
use cuca_journal::Outcome;
use maud::{html, Markup};

use super::{plural, run_href};
use crate::runs::EntryView;

/// A run's outcome in words.
pub(crate) fn outcome_words(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Complete => "complete: the journal ended with its closing line".to_owned(),
        Outcome::SessionKilled => {
            "session killed: capture stopped with no closing line; every entry read is kept"
                .to_owned()
        }
        Outcome::CorruptJournal {
            last_complete_seq,
            line,
            reason,
        } => format!(
            "corrupt journal: damage at line {line} ({reason}); {}",
            match last_complete_seq {
                Some(seq) => format!("entries up to seq {seq} are kept"),
                None => "no entry was kept".to_owned(),
            }
        ),
        Outcome::WriteFailed { stop_reason } => format!(
            "write failed: the journal writer stopped ({})",
            stop_reason.as_str().replace('_', " ")
        ),
        Outcome::ByteCeiling => "byte ceiling: the journal reached its size limit".to_owned(),
        _ => outcome.kind().replace('_', " "),
    }
}

/// Where an agent came from, in words.
pub(crate) fn origin_words(origin: &AgentOrigin) -> String {
    match origin {
        AgentOrigin::Root => "the root agent".to_owned(),
        AgentOrigin::Spawn { parent, position } => {
            format!("spawned by {parent} at step {position} of its loop")
        }
        AgentOrigin::Succession {
            predecessor,
            position,
        } => format!("succeeded {predecessor} (link {position} of the chain)"),
        AgentOrigin::IssueAttempt { issue, dispatch } => {
            format!("dispatch {dispatch} of issue {issue}")
        }
        AgentOrigin::Reviewer {
            issue,
            round,
            position,
        } => format!("reviewer {} of issue {issue}, round {round}", position + 1),
        AgentOrigin::Merge { issue, merge } => format!("merge {merge} of issue {issue}"),
    }
}

/// An agent's status, in words.
pub(crate) fn status_words(status: AgentStatus, ceiling: Option<&str>) -> String {
    match status {
        AgentStatus::Started => "started, not ended".to_owned(),
        AgentStatus::Completed => "completed".to_owned(),
        AgentStatus::Failed => "failed".to_owned(),
        AgentStatus::Cancelled => "cancelled".to_owned(),
        AgentStatus::Stopped => match ceiling {
            Some(ceiling) => format!("stopped by its {} ceiling", ceiling.replace('_', " ")),
            None => "stopped by a ceiling".to_owned(),
        },
    }
}

/// The href of one entry's page.
pub(crate) fn entry_href(run: &str, seq: u64) -> String {
    format!("{}/entries/{seq}", run_href(run))
}

fn text(view: &EntryView, index: u64) -> &str {
    view.texts
        .get(&index)
        .map_or("(not in the record)", String::as_str)
}

fn message(view: &EntryView, index: u64, stored: Option<&StoredMessage>) -> Markup {
    let Some(message) = stored else {
        return html! { div.rec.muted { "message " (index) " is not in the record" } };
    };
    let role = message.role.as_str();
    html! {
        div class=(format!("rec message role-{role}")) {
            div.who { (role) " · message " (index) }
            @for block in &message.content {
                @match block {
                    StoredBlock::Text { text } => { div.text { (text) } }
                    StoredBlock::Thinking { thinking } => { details.reasoning { summary { "reasoning" } div.text { (thinking) } } }
                    StoredBlock::ToolCall { id, name, arguments } => {
                        div { "tool call " code { (name) } span.muted { " id " (id) } }
                        pre { (super::pretty_json(text(view, *arguments))) }
                    }
                    StoredBlock::ToolResult { tool_call_id, content, is_error } => {
                        div.muted { "tool result for " (tool_call_id) @if *is_error { " (error)" } }
                        pre { (text(view, *content)) }
                    }
                    StoredBlock::Image { media_type, size } => { div.muted { "image " (media_type) ", " (plural(*size, "byte", "bytes")) } }
                }
            }
        }
    }
}

fn messages(view: &EntryView, indices: &[u64]) -> Markup {
    html! { @for index in indices { (message(view, *index, view.messages.get(index))) } }
}

/// One entry's page.
pub(crate) fn entry(run: &str, view: &EntryView) -> Markup {
    let e = &view.entry;
    html! {
        h1 { "Run " a href=(run_href(run)) { code { (run) } } ", entry " (e.seq) }
        p #entry-head { "seq " (e.seq) " · agent " code { (e.agent) } " · " (e.input.kind().replace('_', " ")) }
        section #entry-content {
            @match &e.input {
                Input::Shell(shell) => {
                    p { "Command " code #command { (shell.command) } " in " code { (shell.cwd) } }
                    p #exit-status { @match shell.exit_status { Some(code) => { "exit status " (code) } None => { "ended by a signal (no exit status)" } } }
                    h2 { "stdout" } pre #stdout { (text(view, shell.stdout)) }
                    h2 { "stderr" } pre #stderr { (text(view, shell.stderr)) }
                }
                Input::ModelIo(io) => {
                    p #latency { "model " code { (io.request.model) } " · " (io.latency_ms) " ms" }
                    h2 { "Request" } div #request { (messages(view, &io.request.messages)) }
                    h2 { "Response" }
                    p.muted { "answered by " code { (io.response.model) } " (" (io.response.provider) ") · finish "
                        (io.response.finish_reason.clone().unwrap_or_else(|| "not reported".into())) " · "
                        (io.response.prompt_tokens) " prompt / " (io.response.completion_tokens) " completion tokens" }
                    div #response { (message(view, io.response.message, view.messages.get(&io.response.message))) }
                }
                Input::ModelError(error) => {
                    p #model-error .error { "the call failed: " (crate::runs::error_class_words(error.class))
                        @if let Some(status) = error.status { " · HTTP " (status) }
                        @if let Some(detail) = &error.detail { " · " (detail) } }
                    h2 { "Request" } div #request { (messages(view, &error.request.messages)) }
                }
                Input::ToolResult(tool) => {
                    p #tool { "Tool " code #tool-name { (tool.name) } span.muted { " · call " (tool.call_id) } }
                    p #tool-status class=(if tool.is_error { "error" } else { "status-clean" }) {
                        @if tool.is_error { "the tool reported failure" } @else { "the tool succeeded" } }
                    h2 { "Arguments" } pre #arguments { (super::pretty_json(text(view, tool.arguments))) }
                    h2 { "Output" } pre #output { (text(view, tool.output)) }
                }
                _ => {
                    pre #entry-json { (serde_json::to_string_pretty(e).unwrap_or_default()) }
                }
            }
        }
    }
}
