//! The HTML of every page. `maud` escapes every interpolated string, so recorded text is
//! always text, never markup; nothing here uses `PreEscaped` on recorded data.

use std::time::{Duration, UNIX_EPOCH};

use cuca_events::{Message, MessageContentBlock, SessionEvent};
use cuca_journal::record::RecordSummary;
use maud::{html, Markup, DOCTYPE};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use crate::assets::{SCRIPT_PATH, STYLE_PATH};
use crate::calls::CallsSummary;
use crate::runs::RunRow;
use crate::sessions::{ForkNode, Page, RecordView, SessionSummary, Status, TurnView};

/// Everything but unreserved characters is escaped in a path segment, `:` included, so an id
/// never reads as a scheme or a port.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The href of a session page (its first page, or the page holding turn `turn`).
pub(crate) fn session_href(id: &str) -> String {
    format!("/sessions/{}", utf8_percent_encode(id, SEGMENT))
}

/// The href of a point (`session:sequence`): it redirects to the turn that holds it.
pub(crate) fn point_href(point: &str) -> String {
    format!("/points/{}", utf8_percent_encode(point, SEGMENT))
}

fn run_href(id: &str) -> String {
    format!("/runs/{}", utf8_percent_encode(id, SEGMENT))
}

/// The frame every page shares: the navigation, the stylesheet and the script.
pub(crate) fn layout(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · cuca view" }
                link rel="stylesheet" href=(STYLE_PATH);
                script src=(SCRIPT_PATH) defer {}
            }
            body {
                header.top {
                    span.brand { "cuca view" }
                    a href="/" { "Sessions" }
                    a href="/calls" { "Call log" }
                    a href="/runs" { "Journal runs" }
                }
                main { (body) }
            }
        }
    }
}

/// A page that says what went wrong.
pub(crate) fn error_page(status: u16, message: &str) -> Markup {
    layout(
        "error",
        html! {
            h1.error { "Error " (status) }
            p.error { (message) }
            p { a href="/" { "Back to the sessions" } }
        },
    )
}

fn when(ms: Option<u64>) -> String {
    match ms {
        Some(ms) => {
            let at = UNIX_EPOCH + Duration::from_millis(ms);
            humantime::format_rfc3339_seconds(at).to_string()
        }
        None => "—".to_owned(),
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The sessions list.
pub(crate) fn sessions(rows: &[SessionSummary]) -> Markup {
    layout(
        "Sessions",
        html! {
            h1 { "Sessions" }
            @if rows.is_empty() {
                p.muted { "No sessions in the viewer's directories yet." }
            } @else {
                input #filter .filter type="search" placeholder="Filter by id or status" aria-label="Filter sessions";
                table #sessions {
                    thead { tr {
                        th { "Session" } th { "Status" } th.num { "Records" } th.num { "Turns" }
                        th.num { "Tokens in / out" } th { "Last activity" } th { "Forked from" }
                    } }
                    tbody {
                        @for row in rows {
                            tr data-filter=(format!("{} {}", row.id, row.status.word())) {
                                td.id { a.session-link href=(session_href(&row.id)) { (row.id) } }
                                td { (status_cell(&row.status)) }
                                td.num { (row.n_records) }
                                td.num { (row.n_turns) }
                                td.num { (row.prompt_tokens) " / " (row.completion_tokens) }
                                td { (when(row.last_activity_ms)) }
                                td.id {
                                    @if let Some((parent, point)) = &row.parent {
                                        a href=(point_href(point)) { (point) }
                                        @let _ = parent;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        },
    )
}

fn status_cell(status: &Status) -> Markup {
    let class = format!("status-{}", status.word());
    html! {
        span class=(class) { (status.word()) }
        @match status {
            Status::Refused { offset, reason } => { span.muted { " at byte " (offset) ": " (reason) } }
            Status::Unreadable { reason } => { span.muted { " " (reason) } }
            _ => {}
        }
    }
}

/// What a session page knows besides its turns.
pub(crate) struct SessionContext<'a> {
    pub(crate) parent: Option<(String, String)>,
    pub(crate) children: &'a [(String, String)],
    pub(crate) tree: &'a ForkNode,
    pub(crate) first_turn: usize,
}

/// The fork tree as nested lists, the page's own session in bold.
fn tree_list(node: &ForkNode, current: &str) -> Markup {
    html! {
        li {
            @if node.id == current { strong.current { (node.id) } }
            @else { a.tree-link href=(session_href(&node.id)) { (node.id) } }
            @if let Some(point) = &node.point { span.muted { " at " } a href=(point_href(point)) { (point) } }
            @if !node.children.is_empty() {
                ul { @for child in &node.children { (tree_list(child, current)) } }
            }
        }
    }
}

/// A session: its place in the fork tree, then one page of its turns.
pub(crate) fn session(page: &Page, context: &SessionContext<'_>) -> Markup {
    let session = &page.session;
    let last_page = !page.more;
    html! {
        h1 { "Session " code { (session) } }
        section.tree #forks {
            @if let Some((parent, point)) = &context.parent {
                p { "Branch of " a #parent-link href=(session_href(parent)) { (parent) }
                    ", cut at " a href=(point_href(point)) { (point) } "." }
            }
            @if !context.children.is_empty() {
                p { (plural(context.children.len() as u64, "fork", "forks")) " of this session:" }
                ul {
                    @for (child, point) in context.children {
                        li { a.child-link href=(session_href(child)) { (child) }
                             span.muted { " at " } a href=(point_href(point)) { (point) } }
                    }
                }
            }
            @if context.parent.is_some() || !context.children.is_empty() {
                details #fork-tree open {
                    summary { "Fork tree" }
                    ul { (tree_list(context.tree, session)) }
                }
            }
        }
        (pager(session, context.first_turn, page.turns.len(), page.more))
        @if page.turns.is_empty() {
            p.muted { "No records on this page." }
        }
        @for turn in &page.turns {
            (turn_box(session, turn))
        }
        @if last_page {
            div #live data-session=(session) data-after=(page.last_sequence().map(|s| s.to_string()).unwrap_or_default()) {}
            p #live-status {}
        }
        (pager(session, context.first_turn, page.turns.len(), page.more))
    }
}

fn pager(session: &str, first_turn: usize, n_turns: usize, more: bool) -> Markup {
    let href = |turn: usize| format!("{}?turn={turn}", session_href(session));
    html! {
        nav.pager {
            @if first_turn > 0 {
                a.prev href=(href(first_turn.saturating_sub(crate::sessions::TURNS_PER_PAGE))) { "← earlier turns" }
            }
            span.muted {
                @if n_turns > 0 { "turns " (first_turn + 1) "–" (first_turn + n_turns) }
            }
            @if more {
                a.next href=(href(first_turn + n_turns)) { "later turns →" }
            }
        }
    }
}

/// Consecutive records of the same streamed kind, shown as one text (a model streams its
/// reasoning and answer as many small blocks, one record each).
fn groups(records: &[RecordView]) -> Vec<&[RecordView]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=records.len() {
        let split = i == records.len() || !same_stream(&records[i - 1].event, &records[i].event);
        if split {
            out.push(&records[start..i]);
            start = i;
        }
    }
    out
}

fn same_stream(a: &SessionEvent, b: &SessionEvent) -> bool {
    matches!(
        (a, b),
        (
            SessionEvent::Reasoning { .. },
            SessionEvent::Reasoning { .. }
        ) | (SessionEvent::Output { .. }, SessionEvent::Output { .. })
    )
}

fn turn_box(session: &str, turn: &TurnView) -> Markup {
    let latency = turn.records.iter().find_map(|r| match r.event {
        SessionEvent::Latency { duration_ms } => Some(duration_ms),
        _ => None,
    });
    let tokens = turn.records.iter().find_map(|r| match r.event {
        SessionEvent::TokenUsage {
            prompt_tokens,
            completion_tokens,
        } => Some((prompt_tokens, completion_tokens)),
        _ => None,
    });
    let call_model = turn.records.iter().find_map(|r| match &r.event {
        SessionEvent::CallRequest { model, .. } if !model.is_empty() => Some(model.as_str()),
        _ => None,
    });
    let finish = turn.records.iter().find_map(|r| match &r.event {
        SessionEvent::CallFinish { finish_reason, .. } => {
            Some(finish_reason.as_deref().unwrap_or("cut short"))
        }
        _ => None,
    });
    let anchor = format!("turn-{}", turn.turn_idx);
    // Seed 001 makes the records after the last pair a final turn; when they are only notes
    // (a fork audit, a model swap) no call is open, so they are shown as notes, not as a call
    // that never finished.
    let notes_only = !turn.complete
        && turn.records.iter().all(|r| {
            matches!(
                r.event,
                SessionEvent::Fork { .. } | SessionEvent::ModelSwap { .. }
            )
        });
    html! {
        section.turn id=(anchor) {
            div.turn-head {
                @if notes_only {
                    strong { "Notes after turn " (turn.turn_idx) }
                } @else {
                    strong { "Turn " (turn.turn_idx + 1) }
                }
                @if let Some(ms) = latency { span { (ms) " ms" } }
                @if let Some((prompt, completion)) = tokens {
                    span { (prompt) " prompt / " (completion) " completion tokens" }
                }
                @if let Some(model) = call_model { span { code { (model) } } }
                @if let Some(finish) = finish { span { "finish: " (finish) } }
                @if !turn.complete && !notes_only { span.pill { "unfinished" } }
                a.anchor href=(format!("{}?turn={}#{}", session_href(session), turn.turn_idx, anchor)) { "link" }
            }
            @for group in groups(&turn.records) {
                (record_group(group))
            }
            @if turn.clipped.any() {
                (clipped_note(session, &turn.clipped))
            }
        }
    }
}

/// The note under a turn the page clipped: how much it left out, and where to read it whole.
fn clipped_note(session: &str, clipped: &crate::sessions::Clipped) -> Markup {
    let mut parts = Vec::new();
    if clipped.bytes > 0 {
        parts.push(plural(clipped.bytes, "more byte", "more bytes"));
    }
    if clipped.records > 0 {
        parts.push(plural(clipped.records, "more record", "more records"));
    }
    html! {
        p.clipped {
            "… " (parts.join(" and ")) " not shown (a page shows at most "
            (crate::sessions::MAX_TURN_TEXT_BYTES / 1024) " KiB of a turn's text and "
            (crate::sessions::MAX_TURN_RECORDS) " of its records); "
            code { "cuca show DIR " (session) " --json" } " prints every record whole."
        }
    }
}

/// Anchors for every record of a group, so a deep link to any point lands on its text.
fn anchors(group: &[RecordView]) -> Markup {
    html! { @for r in group { span.point id=(format!("p-{}", r.sequence)) {} } }
}

fn record_group(group: &[RecordView]) -> Markup {
    let Some(first) = group.first() else {
        return html! {};
    };
    let seq_label = if group.len() == 1 {
        format!("#{}", first.sequence)
    } else {
        format!(
            "#{}–#{}",
            first.sequence,
            group.last().map_or(first.sequence, |r| r.sequence)
        )
    };
    let joined = |pick: fn(&SessionEvent) -> Option<&str>| -> String {
        group.iter().filter_map(|r| pick(&r.event)).collect()
    };
    match &first.event {
        SessionEvent::SystemPrompt { text } => html! {
            div.rec.system { (anchors(group)) div.who { "system · " (seq_label) } div.text { (text) } }
        },
        SessionEvent::Message(message) => message_block(message, group, &seq_label),
        SessionEvent::Reasoning { .. } => {
            let text = joined(|e| match e {
                SessionEvent::Reasoning { text } => Some(text),
                _ => None,
            });
            html! {
                div.rec.reasoning-rec { (anchors(group))
                    details.reasoning {
                        summary { "reasoning · " (seq_label) " · " (plural(text.chars().count() as u64, "character", "characters")) }
                        div.text { (text) }
                    }
                }
            }
        }
        SessionEvent::Output { .. } => {
            let text = joined(|e| match e {
                SessionEvent::Output { text } => Some(text),
                _ => None,
            });
            html! { div.rec.output { (anchors(group)) div.who { "assistant output · " (seq_label) } div.text { (text) } } }
        }
        SessionEvent::ToolCall {
            id,
            name,
            arguments,
        } => html! {
            div.rec.tool-call { (anchors(group))
                div.who { "tool call · " (seq_label) }
                div { code { (name) } span.muted { " id " (id) } }
                pre { (pretty_json(arguments)) }
            }
        },
        SessionEvent::ToolResult {
            tool_call_id,
            content,
            is_error,
            ..
        } => html! {
            div.rec.tool-result { (anchors(group))
                div.who { "tool result · " (seq_label) @if *is_error { span.error { " · error" } } }
                div.muted { "for call " (tool_call_id) }
                pre { (content) }
            }
        },
        SessionEvent::Latency { duration_ms } => html! {
            div.rec.meta { (anchors(group)) "latency " (duration_ms) " ms · " (seq_label) }
        },
        SessionEvent::TokenUsage {
            prompt_tokens,
            completion_tokens,
        } => html! {
            div.rec.meta { (anchors(group)) "tokens " (prompt_tokens) " prompt / " (completion_tokens) " completion · " (seq_label) }
        },
        SessionEvent::ModelSwap { from, to, reason } => html! {
            div.rec.note { (anchors(group)) div.who { "note: model swap · " (seq_label) }
                div.text { (from) " → " (to) ": " (reason) } }
        },
        SessionEvent::Fork {
            from_point,
            to_session,
        } => html! {
            div.rec.note { (anchors(group)) div.who { "note: fork · " (seq_label) }
                div { "Branch " a.fork-link href=(session_href(to_session)) { (to_session) }
                      " was taken at " a href=(point_href(from_point)) { (from_point) } "." } }
        },
        SessionEvent::CallRequest {
            model,
            parameters,
            tools,
            messages,
        } => html! {
            div.rec.call-request { (anchors(group))
                div.who { "call · " (seq_label) }
                div { "model " code { @if model.is_empty() { "(the server's default)" } @else { (model) } }
                      " · " (plural(*messages, "message", "messages")) " sent" }
                @if parameters.as_str() != "{}" { div.muted { "parameters" } pre { (pretty_json(parameters)) } }
                @if tools.as_str() != "[]" {
                    details.tools { summary { "tools offered" } pre { (pretty_json(tools)) } }
                }
            }
        },
        SessionEvent::CallFinish {
            finish_reason,
            model,
        } => html! {
            div.rec.meta.call-finish { (anchors(group))
                "finish reason " code { (finish_reason.as_deref().unwrap_or("none (the stream was cut short)")) }
                " · answered by " code { (model) } " · " (seq_label) }
        },
        SessionEvent::CallIncomplete { reason } => html! {
            div.rec.note.call-incomplete { (anchors(group))
                div.who { "incomplete call · " (seq_label) }
                div { "This call's records do not hold its whole answer: " (reason) } }
        },
        SessionEvent::CallWire { format, wire } => html! {
            div.rec.meta.call-wire { (anchors(group))
                details { summary { "wire format " code { (format) } " · " (seq_label) }
                    pre { (pretty_json(wire)) } } }
        },
        other => html! {
            div.rec.meta { (anchors(group)) div.who { (other.kind()) " · " (seq_label) } pre { (format!("{other:?}")) } }
        },
    }
}

fn message_block(message: &Message, group: &[RecordView], seq_label: &str) -> Markup {
    let role = message.role.as_str();
    html! {
        div class=(format!("rec message role-{role}")) { (anchors(group))
            div.who { (role) " · " (seq_label) }
            @for block in &message.content {
                @match block {
                    MessageContentBlock::Text { text } => { div.text { (text) } }
                    MessageContentBlock::Thinking { thinking } => {
                        details.reasoning { summary { "reasoning" } div.text { (thinking) } }
                    }
                    MessageContentBlock::ToolCall { id, name, arguments } => {
                        div { "tool call " code { (name) } span.muted { " id " (id) } }
                        pre { (pretty_json(arguments)) }
                    }
                    MessageContentBlock::ToolResult { tool_call_id, content, is_error } => {
                        div.muted { "tool result for " (tool_call_id) @if *is_error { " (error)" } }
                        pre { (content) }
                    }
                    MessageContentBlock::ImageBase64 { media_type, data } => {
                        div.muted { "image " (media_type) ", " (plural(data.len() as u64, "byte", "bytes")) " of base64 (not shown)" }
                    }
                }
            }
        }
    }
}

/// Tool-call arguments pretty-printed when they are JSON, verbatim when not.
fn pretty_json(arguments: &str) -> String {
    serde_json::from_str::<serde_json::Value>(arguments)
        .ok()
        .and_then(|value| serde_json::to_string_pretty(&value).ok())
        .unwrap_or_else(|| arguments.to_owned())
}

/// The call-log page.
pub(crate) fn calls(summary: &CallsSummary) -> Markup {
    layout(
        "Call log",
        html! {
            h1 { "Call log" }
            p.muted { code { (summary.path.display().to_string()) } " · "
                (plural(summary.n_rows as u64, "row", "rows"))
                @if summary.n_skipped > 0 { " · " (plural(summary.n_skipped as u64, "line", "lines")) " skipped" }
                @if summary.torn_tail { " · a torn last row was skipped" } }
            h2 { "In flight" }
            @if summary.in_flight.is_empty() { p.muted { "No call is in flight." } } @else {
                table #in-flight { thead { tr { th { "Call" } th { "Model" } th { "Run" } th { "Started" } th.num { "Age" } } }
                    tbody { @for call in &summary.in_flight { tr {
                        td { code { (call.id) } } td { (call.model) } td { (call.run) } td { (call.started) }
                        td.num { @if let Some(age) = call.age_s { (humantime::format_duration(Duration::from_secs(age)).to_string()) } @else { "—" } }
                    } } } }
            }
            h2 { "Failures by status" }
            @if summary.failures_by_status.is_empty() { p.muted { "No failed call." } } @else {
                table #failures-by-status { thead { tr { th { "Status" } th.num { "Calls" } } }
                    tbody { @for (status, n) in &summary.failures_by_status { tr {
                        td { @if *status == 0 { "no response" } @else { (status) } } td.num { (n) } } } } }
                h2 { "Recent failures" }
                table #recent-failures { thead { tr { th { "When" } th { "Model" } th.num { "Status" } th { "Ended" } th { "Error" } } }
                    tbody { @for f in &summary.recent_failures { tr {
                        td { (f.ts) } td { (f.model) } td.num { (f.status) } td { (f.ended) } td { (f.error) } } } } }
            }
            h2 { "Latency per model" }
            @if summary.per_model.is_empty() { p.muted { "No call has ended." } } @else {
                table #per-model { thead { tr { th { "Model" } th.num { "Calls" } th.num { "Failed" } th.num { "p50 ms" } th.num { "p90 ms" } th.num { "p99 ms" } } }
                    tbody { @for m in &summary.per_model { tr {
                        td { (m.model) } td.num { (m.calls) } td.num { (m.failures) }
                        td.num { (opt(m.p50_ms)) } td.num { (opt(m.p90_ms)) } td.num { (opt(m.p99_ms)) } } } } }
            }
        },
    )
}

fn opt(value: Option<u64>) -> String {
    value.map_or_else(|| "—".to_owned(), |v| v.to_string())
}

/// The journal runs list.
pub(crate) fn runs(rows: &[RunRow]) -> Markup {
    layout(
        "Journal runs",
        html! {
            h1 { "Journal runs" }
            @if rows.is_empty() { p.muted { "No assembled run (replay.json.gz) in the runs directory." } } @else {
                table #runs { thead { tr { th { "Run" } th { "Session" } th { "Outcome" } th.num { "Agents" } th.num { "Entries" } } }
                    tbody { @for row in rows { tr {
                        td { a.run-link href=(run_href(&row.id)) { (row.id) } }
                        @match &row.summary {
                            Ok(s) => {
                                td { (s.session_id) } td { (s.outcome.kind()) }
                                td.num { (s.agents.len()) } td.num { (s.n_entries) }
                            }
                            Err(reason) => { td.error colspan="4" { (reason) } }
                        }
                    } } } }
            }
        },
    )
}

/// One journal run: identity, outcome (the damage report), agents, inputs by kind.
pub(crate) fn run(id: &str, s: &RecordSummary) -> Markup {
    layout(
        id,
        html! {
            h1 { "Run " code { (id) } }
            p { "Session " code { (s.session_id) }
                @if let Some(key) = &s.routing_key { " · routing key " code { (key) } } }
            h2 { "Outcome" }
            p #outcome class=(if s.outcome.kind() == "complete" { "status-clean" } else { "status-refused" }) {
                (s.outcome.kind()) }
            @if s.outcome.kind() != "complete" { pre #damage { (format!("{:#?}", s.outcome)) } }
            h2 { "Agents" }
            table #agents { thead { tr { th { "Agent" } th { "Profile" } th { "Origin" } th { "Status" } th { "Ceiling" } } }
                tbody { @for a in &s.agents { tr {
                    td { code { (a.id) } } td { (a.profile_name) span.muted { " " (a.profile_id) } }
                    td { (format!("{:?}", a.origin)) } td { (format!("{:?}", a.status)) }
                    td { (a.ceiling.clone().unwrap_or_default()) } } } } }
            h2 { "Inputs" }
            p.muted { (plural(s.n_entries, "entry", "entries"))
                @if let Some(last) = s.last_seq { ", the last at seq " (last) } "; pools: "
                (plural(s.n_messages, "message", "messages")) ", " (plural(s.n_toolsets, "toolset", "toolsets")) ", "
                (plural(s.n_texts, "text", "texts")) ", " (plural(s.n_clips, "clip", "clips")) "." }
            table #entries { thead { tr { th { "Kind" } th.num { "Entries" } } }
                tbody { @for (kind, n) in &s.entries_by_kind { tr { td { (kind) } td.num { (n) } } } } }
            h2 { "Timeline" }
            @if s.timeline.is_empty() { p.muted { "No input was recorded." } } @else {
                @if (s.timeline.len() as u64) < s.n_entries {
                    p.muted { "The first " (s.timeline.len()) " of " (s.n_entries) " entries." }
                }
                table #timeline { thead { tr { th.num { "Seq" } th { "Agent" } th { "Input" } } }
                    tbody { @for e in &s.timeline { tr { td.num { (e.seq) } td { code { (e.agent) } } td { (e.kind) } } } } }
            }
        },
    )
}

/// The JSON a live poll answers with: each record's kind, sequence and text as one string.
pub(crate) fn live_json(records: &[RecordView], full: bool) -> serde_json::Value {
    let items: Vec<serde_json::Value> = records
        .iter()
        .map(|r| {
            serde_json::json!({
                "sequence": r.sequence,
                "kind": r.event.kind(),
                "text": event_text(&r.event),
            })
        })
        .collect();
    serde_json::json!({ "records": items, "full": full })
}

/// One line of text for a record, for the live view.
fn event_text(event: &SessionEvent) -> String {
    match event {
        SessionEvent::SystemPrompt { text }
        | SessionEvent::Reasoning { text }
        | SessionEvent::Output { text } => text.clone(),
        SessionEvent::Message(message) => format!("{}: {}", message.role.as_str(), message.text()),
        SessionEvent::ToolCall {
            name, arguments, ..
        } => format!("{name}({arguments})"),
        SessionEvent::ToolResult { content, .. } => content.clone(),
        SessionEvent::Latency { duration_ms } => format!("{duration_ms} ms"),
        SessionEvent::TokenUsage {
            prompt_tokens,
            completion_tokens,
        } => format!("{prompt_tokens} prompt / {completion_tokens} completion tokens"),
        SessionEvent::ModelSwap { from, to, reason } => format!("{from} → {to}: {reason}"),
        SessionEvent::Fork {
            from_point,
            to_session,
        } => format!("branch {to_session} at {from_point}"),
        SessionEvent::CallRequest {
            model, messages, ..
        } => format!("call to {model} with {messages} messages"),
        SessionEvent::CallFinish {
            finish_reason,
            model,
        } => format!(
            "finished ({}) by {model}",
            finish_reason.as_deref().unwrap_or("cut short")
        ),
        SessionEvent::CallIncomplete { reason } => format!("incomplete: {reason}"),
        SessionEvent::CallWire { format, .. } => format!("{format} wire fields"),
        other => format!("{other:?}"),
    }
}
