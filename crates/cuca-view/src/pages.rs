//! The HTML of every page. `maud` escapes every interpolated string, so recorded text is
//! always text, never markup; nothing here uses `PreEscaped` on recorded data.

use std::time::{Duration, UNIX_EPOCH};

use cuca_events::{Message, MessageContentBlock, SessionEvent};
use cuca_journal::record::RecordSummary;
use maud::{html, Markup, DOCTYPE};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

pub(crate) mod journal;
pub(crate) mod timeline;
pub(crate) mod workspace;

use crate::assets::{SCRIPT_PATH, STYLE_PATH};
use crate::calls::CallsSummary;
use crate::calls::{CallFilter, CallRow, CallTable};
use crate::index::{SessionIndex, SortKey};
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

pub(crate) fn run_href(id: &str) -> String {
    format!("/runs/{}", utf8_percent_encode(id, SEGMENT))
}

/// Where a session page's links go: the viewer's routes, or, for a page saved as one file
/// ([`crate::standalone`]), anchors within the page only (there is no server to ask), other
/// sessions named but not linked.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Links<'a> {
    /// Served by the viewer: every route is there.
    Server,
    /// One file of `session`, opened with no server: only `#…` anchors lead anywhere.
    Offline {
        /// The session the file holds.
        session: &'a str,
    },
}

impl Links<'_> {
    /// Whether the viewer's routes (timeline, sorted turns, comparison, other pages) exist.
    pub(crate) fn served(self) -> bool {
        matches!(self, Links::Server)
    }

    /// A session's page; offline only the file's own session has one (its top).
    fn session(self, id: &str) -> Option<String> {
        match self {
            Links::Server => Some(session_href(id)),
            Links::Offline { session } => (id == session).then(|| "#top".to_owned()),
        }
    }

    /// A point's record; offline only the file's own session's points, by their anchors.
    fn point(self, point: &str) -> Option<String> {
        match self {
            Links::Server => Some(point_href(point)),
            Links::Offline { session } => point
                .strip_prefix(session)
                .and_then(|rest| rest.strip_prefix(':'))
                .and_then(|sequence| sequence.parse::<u64>().ok())
                .map(|sequence| format!("#p-{sequence}")),
        }
    }

    /// A fork's comparison with its parent: a server page only.
    fn compare(self, fork: &str) -> Option<String> {
        self.served().then(|| compare_href(fork))
    }

    /// Turn `number` of `session` scrolled to `anchor`: its page, or offline the anchor.
    fn turn(self, session: &str, number: usize, anchor: &str) -> String {
        match self {
            Links::Server => format!("{}?turn={number}#{anchor}", session_href(session)),
            Links::Offline { .. } => format!("#{anchor}"),
        }
    }
}

/// `text` as a link to `href`, or as plain text (still named) where there is nowhere to go.
fn link(href: Option<String>, class: Option<&str>, id: Option<&str>, text: &str) -> Markup {
    html! {
        @if let Some(href) = href { a class=[class] id=[id] href=(href) { (text) } }
        @else { span class=[class] id=[id] { (text) } }
    }
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
                    span.search-box {
                        input #search .search type="search" placeholder="Search every session" aria-label="Search every session";
                        label.muted { input #search-re type="checkbox"; " regex" }
                    }
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
    format!("{} {}", thousands(n), if n == 1 { one } else { many })
}

/// A count with thousands separators: `12,392`, read at a glance.
pub(crate) fn thousands(n: impl Into<u64>) -> String {
    let digits = n.into().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
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
                        th { "Session" }
                        th title="What cuca verify says of the file's bytes; failed calls are the Errors column" { "File" }
                        th.num { "Records" } th.num { "Turns" } th.num { "Errors" } th.num { "Duration" }
                        th { "Models" } th.num { "Tokens in / out" } th { "Last activity" } th { "Forked from" }
                    } }
                    tbody {
                        @for row in rows {
                            tr data-filter=(format!("{} {}", row.id, row.status.word())) {
                                td.id { a.session-link href=(session_href(&row.id)) { (row.id) } }
                                td { (status_cell(&row.status)) }
                                td.num { (thousands(row.n_records)) }
                                td.num { (thousands(row.n_turns)) }
                                td.num.errors { @if row.n_errors > 0 { span.error { (thousands(row.n_errors)) } } @else { "0" } }
                                td.num.when { @if let (Some(first), Some(last)) = (row.first_activity_ms, row.last_activity_ms) { (duration_words(last.saturating_sub(first))) } @else { "—" } }
                                td.models { @for (i, model) in row.models.iter().enumerate() { @if i > 0 { ", " } code { (model) } } }
                                td.num { (thousands(row.prompt_tokens)) " / " (thousands(row.completion_tokens)) }
                                td.when { (when(row.last_activity_ms)) }
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
        span class=(class) { (status.file_words()) }
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
    /// The 0-based index of the page's first turn.
    pub(crate) first_turn: usize,
    /// The session's turns, without their text.
    pub(crate) index: &'a SessionIndex,
    /// The session's failed calls from the call log, oldest first.
    pub(crate) failures: &'a [CallRow],
    /// The directory the session lives in, for the `cuca fork DIR POINT` command.
    pub(crate) dir: String,
    /// Where the page's links go.
    pub(crate) links: Links<'a>,
    /// Where its turns' file diffs are read from.
    pub(crate) diffs: crate::diffs::Diffs,
}

/// The fork tree as nested lists, the page's own session in bold; a branch links to its
/// comparison with its parent.
fn tree_list(node: &ForkNode, current: &str, links: Links<'_>) -> Markup {
    html! {
        li {
            @if node.id == current { strong.current { (node.id) } }
            @else { (link(links.session(&node.id), Some("tree-link"), None, &node.id)) }
            @if let Some(point) = &node.point {
                span.muted { " at " } (link(links.point(point), None, None, point))
                @if let Some(href) = links.compare(&node.id) {
                    " " a.compare-link href=(href) { "compare with parent" }
                }
            }
            @if !node.children.is_empty() {
                ul { @for child in &node.children { (tree_list(child, current, links)) } }
            }
        }
    }
}

/// The href of a fork's comparison with its parent.
pub(crate) fn compare_href(fork: &str) -> String {
    format!("/compare/{}", utf8_percent_encode(fork, SEGMENT))
}

/// The href of `first` and `others` (at most the compare page's cap) compared side by side
/// with their parent.
pub(crate) fn compare_all_href<'a>(first: &str, others: impl Iterator<Item = &'a str>) -> String {
    let mut href = compare_href(first);
    for (i, other) in others.take(crate::compare::MAX_COMPARED - 1).enumerate() {
        href.push(if i == 0 { '?' } else { '&' });
        href.push_str("and=");
        href.push_str(&utf8_percent_encode(other, SEGMENT).to_string());
    }
    href
}

/// The href of the page holding turn `number` (from 1), scrolled to it.
fn turn_href(session: &str, number: usize) -> String {
    format!("{}?turn={number}#turn-{number}", session_href(session))
}

/// A button that copies `text` (the script does it; without it the text is still shown).
fn copy_button(text: &str, label: &str) -> Markup {
    html! { button.copy type="button" data-copy=(text) title=(text) { (label) } }
}

/// How far apart (ms) a call-log row's times and a turn's record times may be and still be the
/// same call: both clocks are the recording machine's, the row's to the millisecond.
const SAME_CALL_SLACK_MS: u64 = 50;

/// The turn (its number) that recorded the failed call `failure`, when one did: a call cut
/// short mid-stream has its records in the session (ending in a `CallIncomplete`) and a
/// call-log row, one call, shown once in its turn. It is the turn whose time overlaps the
/// row's, one with an error of its own first. A call that failed before the upstream
/// answered left no record and has no turn.
fn failure_turn(index: &SessionIndex, failure: &CallRow) -> Option<usize> {
    let (start, end) = (failure.start_ms()?, failure.end_ms?);
    let overlaps = |t: &&crate::index::TurnStat| {
        t.start_ms <= end.saturating_add(SAME_CALL_SLACK_MS)
            && t.end_ms.saturating_add(SAME_CALL_SLACK_MS) >= start
    };
    // Turns are in start order: only those starting before the row ends can overlap it.
    let before = index
        .turns
        .partition_point(|t| t.start_ms <= end.saturating_add(SAME_CALL_SLACK_MS));
    let candidates = index.turns.get(..before).unwrap_or_default();
    // The latest few are enough: a call overlaps the turns around its own time.
    let overlapping: Vec<&crate::index::TurnStat> =
        candidates.iter().rev().take(64).filter(overlaps).collect();
    overlapping
        .iter()
        .find(|t| t.error.is_some())
        .or(overlapping.first())
        .map(|t| t.number)
}

/// Where a failed call from the call log goes: after the turns that started before it.
fn failure_slot(index: &SessionIndex, failure: &CallRow) -> usize {
    let start = failure.start_ms().unwrap_or(0);
    index
        .turns
        .iter()
        .take_while(|t| t.start_ms <= start)
        .count()
}

/// Errors in page order: (the turn number whose page shows it, its anchor).
pub(crate) fn error_marks(context: &SessionContext<'_>) -> Vec<(usize, String)> {
    let n_turns = context.index.turns.len().max(1);
    let with_failure: std::collections::BTreeSet<usize> = context
        .failures
        .iter()
        .filter_map(|f| failure_turn(context.index, f))
        .collect();
    // One mark a call: a turn with an error of its own or a failed call-log row of its own
    // is one error, and a row with no turn is one more.
    let mut marks: Vec<(usize, u8, String)> = context
        .index
        .turns
        .iter()
        .filter(|t| t.error.is_some() || with_failure.contains(&t.number))
        .map(|t| (t.number, 1, format!("turn-{}", t.number)))
        .collect();
    for failure in context.failures {
        if failure_turn(context.index, failure).is_some() {
            continue;
        }
        let slot = failure_slot(context.index, failure);
        marks.push(((slot + 1).min(n_turns), 0, format!("call-{}", failure.id)));
    }
    marks.sort();
    marks
        .into_iter()
        .map(|(turn, _, anchor)| (turn, anchor))
        .collect()
}

fn duration_words(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms} ms");
    }
    humantime::format_duration(Duration::from_millis(ms - ms % 1000)).to_string()
}

/// The summary header: models, tokens, duration, start and end, turns, errors, forks.
fn summary(session: &str, context: &SessionContext<'_>, marks: &[(usize, String)]) -> Markup {
    let index = context.index;
    let duration = match (index.start_ms, index.end_ms) {
        (Some(start), Some(end)) => duration_words(end.saturating_sub(start)),
        _ => "—".to_owned(),
    };
    html! {
        dl #summary .summary {
            div { dt { "Models" } dd #summary-models {
                @if index.models.is_empty() { span.muted { "not recorded" } }
                @for (i, model) in index.models.iter().enumerate() { @if i > 0 { ", " } code { (model) } } } }
            div { dt { "Tokens in / out" } dd #summary-tokens {
                (thousands(index.prompt_tokens())) " / " (thousands(index.completion_tokens())) } }
            @if let Some(cost) = index.cost().filter(|c| c.n_calls > 0) {
                div { dt { "Cost (USD)" } dd #summary-cost title=(crate::cost::priced_by()) {
                    (crate::cost::words(&cost)) } }
            }
            div { dt { "Duration" } dd #summary-duration { (duration) } }
            div { dt { "Start" } dd #summary-start { (when(index.start_ms)) } }
            div { dt { "End" } dd #summary-end { (when(index.end_ms)) } }
            div { dt { "Turns" } dd #summary-turns { (thousands(index.turns.len() as u64)) " · " (plural(index.n_records, "record", "records")) } }
            div { dt { "Errors" } dd #summary-errors {
                (thousands(marks.len() as u64))
                @if let Some((turn, anchor)) = marks.first() {
                    " · " a href=(context.links.turn(session, *turn, anchor)) { "first" }
                } } }
            div { dt { "Forks" } dd #summary-forks { (thousands(context.children.len() as u64)) } }
        }
        @if context.links.served() { (views(session, context)) }
    }
}

/// Links to the session's other views, which only the viewer's server has.
fn views(session: &str, context: &SessionContext<'_>) -> Markup {
    html! {
        nav.views {
            a #timeline-link href=(format!("{}/timeline", session_href(session))) { "Timeline" }
            a #slowest-link href=(format!("{}/turns?sort=latency", session_href(session))) { "Turns by latency" }
            a #tokens-link href=(format!("{}/turns?sort=tokens", session_href(session))) { "Turns by tokens" }
            @if context.parent.is_some() {
                a #compare-link href=(compare_href(session)) { "Compare with parent" }
            }
        }
    }
}

/// A session: its summary, its place in the fork tree, then one page of its turns with the
/// failed calls of the call log at their place.
pub(crate) fn session(page: &Page, context: &SessionContext<'_>) -> Markup {
    let session = &page.session;
    let last_page = !page.more;
    let marks = error_marks(context);
    // A final block of notes (a fork audit) is shown after the turns but is not a turn: the
    // pager and the failures' places count calls only.
    let n_shown = page.turns.iter().filter(|t| !t.is_notes()).count();
    let page_first = context.first_turn + 1;
    let page_last = context.first_turn + n_shown;
    let n_turns = context.index.turns.len();
    html! {
        (session_top(session, context, &marks))
        (pager(session, context.first_turn, n_shown, n_turns, &marks, page_last))
        @if page.turns.is_empty() {
            p.muted { "No records on this page." }
        }
        (turns_with_failures(session, &page.turns, context))
        @if last_page {
            (failures_after(context, page_first.max(page_last)))
            div #live data-session=(session) data-after=(page.last_sequence().map(|s| s.to_string()).unwrap_or_default())
                data-next-turn=(n_turns + 1) data-first-turn=(context.first_turn)
                data-per-page=(crate::sessions::TURNS_PER_PAGE) data-records=(context.index.n_records)
                data-prompt=(context.index.prompt_tokens()) data-completion=(context.index.completion_tokens())
                data-errors=(marks.len()) {}
            p #live-status {}
        }
        (pager(session, context.first_turn, n_shown, n_turns, &marks, page_last))
    }
}

/// The session page's top: its id, the summary header, its place in the fork tree.
pub(crate) fn session_top(
    session: &str,
    context: &SessionContext<'_>,
    marks: &[(usize, String)],
) -> Markup {
    let links = context.links;
    html! {
        h1 #top { "Session " code #session-id { (session) } " " (copy_button(session, "copy id")) }
        (summary(session, context, marks))
        section.tree #forks {
            @if let Some((parent, point)) = &context.parent {
                p { "Branch of " (link(links.session(parent), None, Some("parent-link"), parent))
                    ", cut at " (link(links.point(point), None, None, point)) "." }
            }
            p #fork-list-head hidden[context.children.is_empty()] { (plural(context.children.len() as u64, "fork", "forks")) " of this session:" }
            ul #fork-list {
                @for (child, point) in context.children {
                    li { (link(links.session(child), Some("child-link"), None, child))
                         span.muted { " at " } (link(links.point(point), None, None, point))
                         @if let Some(href) = links.compare(child) { " " a.compare-link href=(href) { "compare" } } }
                }
            }
            @if let [first, rest @ ..] = context.children {
                @if !rest.is_empty() && links.compare(&first.0).is_some() {
                    p { a #compare-all href=(compare_all_href(&first.0, rest.iter().map(|(child, _)| child.as_str()))) {
                        "Compare " (rest.len().min(crate::compare::MAX_COMPARED - 1) + 1) " forks side by side" } }
                }
            }
            @if context.parent.is_some() || !context.children.is_empty() {
                details #fork-tree open {
                    summary { "Fork tree" }
                    ul { (tree_list(context.tree, session, links)) }
                }
            }
        }
    }
}

/// Failed calls that recorded no turn: each gets a box of its own, at its place.
fn turnless_failures<'a>(context: &'a SessionContext<'_>) -> impl Iterator<Item = &'a CallRow> {
    context
        .failures
        .iter()
        .filter(|f| failure_turn(context.index, f).is_none())
}

/// `turns`, each after the turnless failed calls that came just before it.
pub(crate) fn turns_with_failures(
    session: &str,
    turns: &[TurnView],
    context: &SessionContext<'_>,
) -> Markup {
    html! {
        @for turn in turns {
            @for failure in turnless_failures(context).filter(|f| failure_slot(context.index, f) == turn.turn_idx) {
                (failed_call(failure))
            }
            (turn_box(session, turn, context))
        }
    }
}

/// The turnless failed calls after the turns shown, when the last shown is turn `last` (from 1).
pub(crate) fn failures_after(context: &SessionContext<'_>, last: usize) -> Markup {
    html! {
        @for failure in turnless_failures(context).filter(|f| failure_slot(context.index, f) >= last) {
            (failed_call(failure))
        }
    }
}

/// A call the call log says failed, where it happened in the session.
fn failed_call(failure: &CallRow) -> Markup {
    html! {
        section.failed-call id=(format!("call-{}", failure.id)) {
            div.turn-head {
                strong { "Failed call" }
                span.badge.error { (status_words(failure.status)) }
                span { (failure.ms) " ms" }
                @if !failure.model.is_empty() { span { code { (failure.model) } } }
                span.muted { (failure.ts) }
            }
            div.rec { div.who { "call log · " (failure.id) } div.text { (failure.error) } }
        }
    }
}

/// A call-log status as people read it: "no response" where none came back (the log writes 0).
fn status_words(status: u16) -> String {
    if status == 0 {
        "no response".to_owned()
    } else {
        format!("HTTP {status}")
    }
}

fn pager(
    session: &str,
    first_turn: usize,
    n_shown: usize,
    n_turns: usize,
    marks: &[(usize, String)],
    page_last: usize,
) -> Markup {
    let per = crate::sessions::TURNS_PER_PAGE;
    let href = |number: usize| format!("{}?turn={number}", session_href(session));
    let pages = n_turns.div_ceil(per).max(1);
    let this_page = first_turn / per + 1;
    let last_first = (pages - 1) * per + 1;
    let next_error = marks.iter().find(|(turn, _)| *turn > page_last);
    html! {
        nav.pager {
            @if first_turn > 0 {
                a.first href=(href(1)) { "« first" }
                a.prev href=(href(first_turn + 1 - per.min(first_turn))) { "← earlier" }
            }
            span.muted.page-of {
                "page " (thousands(this_page as u64)) " of " (thousands(pages as u64))
                @if n_shown > 0 { " · turns " (thousands((first_turn + 1) as u64)) "–" (thousands((first_turn + n_shown) as u64)) " of " (thousands(n_turns as u64)) }
            }
            @if this_page < pages {
                a.next href=(href(first_turn + n_shown + 1)) { "later →" }
                a.last href=(href(last_first)) { "last »" }
            }
            span.goto {
                label { "turn " input.goto-turn type="number" min="1" max=(n_turns.max(1)) data-session-href=(session_href(session)) aria-label="Go to turn"; }
                button.goto-button type="button" { "go" }
            }
            @if let Some((turn, anchor)) = next_error {
                a.next-error href=(format!("{}#{anchor}", href(*turn))) { "next error ↓" }
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

/// The time of day a record was made, to the millisecond (the full date is its title).
fn clock(ms: u64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(ms);
    let full = humantime::format_rfc3339_millis(at).to_string();
    full.get(11..23).map_or(full.clone(), str::to_owned)
}

fn turn_box(session: &str, turn: &TurnView, context: &SessionContext<'_>) -> Markup {
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
    let mut errors: Vec<String> = turn
        .records
        .iter()
        .filter_map(|r| crate::index::error_of(&r.event))
        .collect();
    let number = turn.turn_idx + 1;
    // The call log's rows for this very call: shown in the turn, one error with its own.
    let logged: Vec<&CallRow> = context
        .failures
        .iter()
        .filter(|f| failure_turn(context.index, f) == Some(number))
        .collect();
    if errors.is_empty() {
        errors.extend(logged.iter().map(|f| f.error.clone()).take(1));
    }
    errors.truncate(1);
    let incomplete = turn
        .records
        .iter()
        .any(|r| matches!(r.event, SessionEvent::CallIncomplete { .. }));
    let tokens = tokens.filter(|(prompt, completion)| {
        crate::index::tokens_known(true, incomplete, prompt + completion)
    });
    // Seed 001 makes the records after the last pair a final turn; when they are only notes
    // (a fork audit, a model swap) no call is open, so they are shown as notes, not as a call
    // that never finished, and not counted as a turn.
    let notes_only = turn.is_notes();
    let anchor = if notes_only {
        "notes-after".to_owned()
    } else {
        format!("turn-{number}")
    };
    let stat = context.index.turns.get(turn.turn_idx);
    let started = stat
        .map(|t| t.start_ms)
        .or_else(|| turn.records.first().map(|r| r.timestamp_ms));
    let outside = workspace::turn_summary(&turn.records);
    let last_point = turn
        .records
        .last()
        .map(|r| format!("{session}:{}", r.sequence));
    html! {
        section.turn id=(anchor) data-complete=(if turn.complete { "true" } else { "false" })
            data-errored=(if errors.is_empty() { "no" } else { "yes" }) {
            div.turn-head {
                @if notes_only {
                    strong { "Notes after turn " (turn.turn_idx) }
                } @else {
                    strong { "Turn " (number) }
                }
                @if let Some(ms) = started {
                    time.at title=(when(Some(ms))) { (clock(ms)) }
                }
                @if let Some(ms) = latency { span.latency { (thousands(ms)) " ms" } }
                @if let Some((prompt, completion)) = tokens {
                    span.tokens { (thousands(prompt)) " prompt / " (thousands(completion)) " completion tokens" }
                    @if let Some(cost) = crate::cost::turn_words(&turn.records) {
                        span.cost title=(crate::cost::priced_by()) { (cost) }
                    }
                }
                @if let Some(model) = call_model { span { code { (model) } } }
                @if let Some(words) = &outside { span.workspace-summary title="recorded before this call: the workspace's changes since the previous call, and the shell commands run after its answer" { (words) } }
                @if let Some(finish) = finish { span { "finish: " (finish) } }
                @if !turn.complete && !notes_only { span.pill { "unfinished" } }
                // One badge a call: the call log's status when it has the call, else "error".
                @if let Some(error) = errors.first() {
                    span.badge.error title=(error) {
                        @if let Some(failure) = logged.first() { (status_words(failure.status)) } @else { "error" }
                    }
                }
                @if let Some(point) = &last_point {
                    span.copies {
                        (copy_button(point, "copy point"))
                        (copy_button(&format!("cuca fork {} {point}", context.dir), "copy fork command"))
                    }
                }
                a.anchor href=(context.links.turn(session, number, &anchor)) { "link" }
            }
            @for group in groups(&turn.records) {
                @if group.iter().all(|r| turn.echoes.contains(&r.sequence)) {
                    (echo_group(group, context.links))
                } @else if matches!(group[0].event, SessionEvent::WorkspaceSnapshot { .. }) {
                    @let source = workspace::DiffSource {
                        diffs: &context.diffs,
                        before: context.index.snapshot_before(group[0].sequence).or_else(|| {
                            // The session's first snapshot: counted against a sibling's, perhaps.
                            let first = context.index.snapshots.first().map(|s| s.sequence);
                            (first == Some(group[0].sequence))
                                .then(|| context.diffs.base_of_first(&group[0].event))
                                .flatten()
                        }),
                    };
                    (workspace::snapshot_box(&group[0], Some(&source)))
                } @else if tokens.is_none() && matches!(group[0].event, SessionEvent::TokenUsage { .. }) {
                    div.rec.meta { (anchors(group)) "tokens not known (the call was cut short) · #" (group[0].sequence) }
                } @else {
                    (record_group(group, context.links))
                }
            }
            @for failure in &logged {
                div.rec.note.call-log-failure id=(format!("call-{}", failure.id)) {
                    div.who { "call log · " (failure.id) " · " (status_words(failure.status)) " · " (failure.ms) " ms" }
                    div.text { (failure.error) }
                }
            }
            @if turn.clipped.any() {
                (clipped_note(session, &turn.clipped))
            }
        }
    }
}

/// A record that repeats the turn before, folded: still there (and its anchor still lands),
/// read once.
fn echo_group(group: &[RecordView], links: Links<'_>) -> Markup {
    let what = match group.first().map(|r| &r.event) {
        Some(SessionEvent::SystemPrompt { .. }) => "system prompt, as in the turn before",
        _ => "the previous answer, sent back with this request",
    };
    html! {
        div.rec.echo { (anchors(group))
            details.echo { summary { (what) " · #" (group.first().map_or(0, |r| r.sequence)) " (shown once, above)" }
                (record_group(group, links)) }
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

fn record_group(group: &[RecordView], links: Links<'_>) -> Markup {
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
            stdout,
            stderr,
            exit_code,
        } => html! {
            div.rec.tool-result { (anchors(group))
                div.who { "tool result · " (seq_label) @if *is_error { " " span.badge.error { "error" } } }
                div { span.muted { "for call " (tool_call_id) }
                    @if let Some(code) = exit_code {
                        " · " span class=(if *code == 0 { "exit-code status-clean" } else { "exit-code error" }) { "exit code " (code) }
                    } }
                pre.content { (content) }
                @if let Some(out) = stdout { details.stream.stdout open { summary { "stdout · " (plural(out.len() as u64, "byte", "bytes")) } pre { (out) } } }
                @if let Some(err) = stderr { details.stream.stderr open { summary { "stderr · " (plural(err.len() as u64, "byte", "bytes")) } pre { (err) } } }
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
                div { "Branch " (link(links.session(to_session), Some("fork-link"), None, to_session))
                      " was taken at " (link(links.point(from_point), None, None, from_point)) "." } }
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
        SessionEvent::RequestDigest { sha256 } => html! {
            div.rec.meta.request-digest { (anchors(group))
                div.who { "request digest · " (seq_label) " · " code { (sha256) } } }
        },
        SessionEvent::TokenDetail(detail) => html! {
            div.rec.meta.token-detail { (anchors(group))
                div.who { "tokens · " (seq_label) " · " (detail.to_string()) } }
        },
        SessionEvent::WorkspaceSnapshot { .. } => workspace::snapshot_box(first, None),
        SessionEvent::ShellCommand { .. } => workspace::command_box(first),
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

/// The call-log page: what is in flight, failures, latency per model, and the calls one by
/// one with their sessions, filtered by run, session, model and status.
pub(crate) fn calls(summary: &CallsSummary, table: &CallTable, filter: &CallFilter) -> Markup {
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
                        td { code { (call.id) } } td { (call.model) } td { (call.run) } td.when { (call.started) }
                        td.num { @if let Some(age) = call.age_s { (humantime::format_duration(Duration::from_secs(age)).to_string()) } @else { "—" } }
                    } } } }
            }
            h2 { "Failures by status" }
            @if summary.failures_by_status.is_empty() { p.muted { "No failed call." } } @else {
                table #failures-by-status { thead { tr { th { "Status" } th.num { "Calls" } } }
                    tbody { @for (status, n) in &summary.failures_by_status { tr {
                        td { (status_text(*status)) } td.num { (thousands(*n as u64)) } } } } }
                h2 { "Recent failures" }
                table #recent-failures { thead { tr { th { "When" } th { "Session" } th { "Model" } th.num { "Status" } th { "Ended" } th { "Error" } } }
                    tbody { @for f in &summary.recent_failures { tr {
                        td.when { (f.ts) }
                        td.id { @if f.session.is_empty() { span.muted { "—" } } @else { a.session-link href=(session_href(&f.session)) { (f.session) } } }
                        td { (f.model) } td.num { (status_text(f.status)) } td { (f.ended) } td { (f.error) } } } } }
            }
            (call_table(table, filter))
            h2 { "Latency per model" }
            @if summary.per_model.is_empty() { p.muted { "No call has ended." } } @else {
                table #per-model { thead { tr { th { "Model" } th.num { "Calls" } th.num { "Failed" } th.num { "p50 ms" } th.num { "p90 ms" } th.num { "p99 ms" } } }
                    tbody { @for m in &summary.per_model { tr {
                        td { (m.model) } td.num { (thousands(m.calls as u64)) } td.num { (thousands(m.failures as u64)) }
                        td.num { (opt(m.p50_ms)) } td.num { (opt(m.p90_ms)) } td.num { (opt(m.p99_ms)) } } } } }
            }
        },
    )
}

fn opt(value: Option<u64>) -> String {
    value.map_or_else(|| "—".to_owned(), thousands)
}

/// A call-log status in a table: the code, or "no response" where none came back (the log
/// writes 0).
fn status_text(status: u16) -> String {
    if status == 0 {
        "no response".to_owned()
    } else {
        status.to_string()
    }
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
///
/// A failed entry (a command's exit status other than 0, a failed model call, a tool's
/// reported failure; `failures`, by seq) is marked failed on the timeline, with why.
pub(crate) fn run(
    id: &str,
    s: &RecordSummary,
    failures: &std::collections::BTreeMap<u64, String>,
) -> Markup {
    layout(
        id,
        html! {
            h1 { "Run " code { (id) } }
            p { "Session " code { (s.session_id) }
                @if let Some(key) = &s.routing_key { " · routing key " code { (key) } } }
            h2 { "Outcome" }
            p #outcome class=(if s.outcome.kind() == "complete" { "status-clean" } else { "status-refused" }) {
                (journal::outcome_words(&s.outcome)) }
            h2 { "Agents" }
            table #agents { thead { tr { th { "Agent" } th { "Profile" } th { "Origin" } th { "Status" } th { "Ceiling" } } }
                tbody { @for a in &s.agents { tr {
                    td { code { (a.id) } } td { (a.profile_name) span.muted { " " (a.profile_id) } }
                    td { (journal::origin_words(&a.origin)) } td { (journal::status_words(a.status, a.ceiling.as_deref())) }
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
                table #timeline { thead { tr { th.num { "Seq" } th { "Agent" } th { "Input" } th {} } }
                    tbody { @for e in &s.timeline { @let failed = failures.get(&e.seq);
                        tr class=[failed.map(|_| "failed")] {
                        td.num { (e.seq) } td { code { (e.agent) } }
                        td { (e.kind.replace('_', " "))
                            @if let Some(why) = failed { " " span.badge.error.entry-failed { "failed · " (why) } } }
                        td { a.entry-link href=(journal::entry_href(id, e.seq)) { "content" } } } } } }
            }
        },
    )
}

/// The JSON a live poll answers with: each record's kind, sequence and text as one string.
///
/// Besides the text, each record says what the page needs to place it as a reload would:
/// `at` (its time), `role` for a message, `latency_ms` and `tokens` for the records that close
/// a turn, `error` when it is one, `clipped` (bytes left out) when its text was cut to
/// [`crate::sessions::MAX_LIVE_RECORD_BYTES`]. `forks` lists the session's forks (id, point, its page
/// and its comparison) so a fork made while the page is open appears.
pub(crate) fn live_json(
    batch: &crate::sessions::LiveBatch,
    forks: &[(String, String)],
) -> serde_json::Value {
    let items: Vec<serde_json::Value> = batch
        .records
        .iter()
        .map(|live| {
            let r = &live.record;
            let mut item = serde_json::json!({
                "sequence": r.sequence,
                "kind": r.event.kind(),
                "text": event_text(&r.event),
                "at": clock(r.timestamp_ms),
            });
            match &r.event {
                SessionEvent::Message(message) => {
                    item["role"] = message.role.as_str().into();
                }
                SessionEvent::Latency { duration_ms } => item["latency_ms"] = (*duration_ms).into(),
                // Zero counts are what a recorder closes a call cut short with: not known, so
                // the turn's head leaves them off, as a reload does.
                SessionEvent::TokenUsage {
                    prompt_tokens,
                    completion_tokens,
                } if prompt_tokens + completion_tokens > 0 => {
                    item["prompt_tokens"] = (*prompt_tokens).into();
                    item["completion_tokens"] = (*completion_tokens).into();
                    item["tokens"] = format!(
                        "{} prompt / {} completion tokens",
                        thousands(*prompt_tokens),
                        thousands(*completion_tokens)
                    )
                    .into();
                }
                _ => {}
            }
            if let Some(error) = crate::index::error_of(&r.event) {
                item["error"] = error.into();
            }
            if live.clipped_bytes > 0 {
                item["clipped"] = live.clipped_bytes.into();
            }
            item
        })
        .collect();
    let forks: Vec<serde_json::Value> = forks
        .iter()
        .map(|(id, point)| {
            serde_json::json!({
                "id": id, "point": point,
                "href": session_href(id), "point_href": point_href(point), "compare_href": compare_href(id),
            })
        })
        .collect();
    serde_json::json!({ "records": items, "full": batch.full, "forks": forks })
}

/// One line of text for a record, for the live view.
fn event_text(event: &SessionEvent) -> String {
    match event {
        SessionEvent::SystemPrompt { text }
        | SessionEvent::Reasoning { text }
        | SessionEvent::Output { text } => text.clone(),
        SessionEvent::Message(message) => message.text(),
        SessionEvent::ToolCall {
            name, arguments, ..
        } => format!("{name}({arguments})"),
        SessionEvent::ToolResult { content, .. } => content.clone(),
        SessionEvent::Latency { duration_ms } => format!("{duration_ms} ms"),
        SessionEvent::TokenUsage {
            prompt_tokens: 0,
            completion_tokens: 0,
        } => "tokens not known".to_owned(),
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
        SessionEvent::RequestDigest { sha256 } => {
            format!("request digest {}", sha256.get(..12).unwrap_or(sha256))
        }
        SessionEvent::TokenDetail(detail) => format!("tokens: {detail}"),
        SessionEvent::WorkspaceSnapshot { changes, .. } => {
            let paths: Vec<&str> = changes.iter().take(10).map(|c| c.path.as_str()).collect();
            format!(
                "workspace: {} changed{}{}",
                plural(changes.len() as u64, "file", "files"),
                if paths.is_empty() { "" } else { ": " },
                paths.join(", ")
            )
        }
        SessionEvent::ShellCommand {
            command,
            exit_status,
            duration_ms,
            ..
        } => match exit_status {
            Some(code) => format!("$ {command} (exit {code}, {duration_ms} ms)"),
            None => format!("$ {command} (did not run)"),
        },
        other => format!("{other:?}"),
    }
}

/// Every turn of a session sorted by latency or tokens, a page at a time, each linking to the
/// turn: the slowest turn of a 12,392-turn session is one click away.
pub(crate) fn sorted_turns(
    session: &str,
    index: &SessionIndex,
    key: SortKey,
    page: usize,
) -> Markup {
    let per = crate::sessions::TURNS_PER_PAGE;
    let sorted = index.sorted_by(key);
    let pages = sorted.len().div_ceil(per).max(1);
    let page = page.min(pages);
    let href = |key: SortKey, page: usize| {
        format!(
            "{}/turns?sort={}&page={page}",
            session_href(session),
            key.word()
        )
    };
    html! {
        h1 { "Turns of " a href=(session_href(session)) { code { (session) } } " by " (key.word()) }
        nav.views {
            @for other in [SortKey::Latency, SortKey::Tokens] {
                @if other == key { strong { "by " (other.word()) } } @else { a href=(href(other, 1)) { "by " (other.word()) } }
            }
        }
        table #sorted-turns {
            thead { tr { th.num { "Turn" } th { "Started" } th.num { "Latency ms" } th.num { "Tokens in / out" } th { "Model" } th { "Error" } } }
            tbody {
                @for turn in sorted.iter().skip((page - 1) * per).take(per) {
                    tr {
                        td.num { a.turn-link href=(turn_href(session, turn.number)) { (turn.number) } }
                        td { (when(Some(turn.start_ms))) }
                        td.num { (opt(turn.latency_ms)) }
                        td.num { @if turn.tokens_known { (thousands(turn.prompt_tokens)) " / " (thousands(turn.completion_tokens)) } }
                        td { @if let Some(model) = &turn.model { code { (model) } } }
                        td.error { (turn.error.clone().unwrap_or_default()) }
                    }
                }
            }
        }
        nav.pager {
            @if page > 1 { a.prev href=(href(key, page - 1)) { "← before" } }
            span.muted { "page " (page) " of " (pages) " · " (plural(sorted.len() as u64, "turn", "turns")) }
            @if page < pages { a.next href=(href(key, page + 1)) { "after →" } }
        }
    }
}

/// What makes two groups of a comparison equal: a streamed run's kind and joined text (the
/// same answer streamed in other pieces is the same answer), or a lone record's event.
#[derive(PartialEq)]
enum GroupKey<'a> {
    Run(&'static str, String),
    One(&'a SessionEvent),
}

fn group_key(group: &[RecordView]) -> Option<GroupKey<'_>> {
    let first = group.first()?;
    let joined = |pick: fn(&SessionEvent) -> Option<&str>| -> String {
        group.iter().filter_map(|r| pick(&r.event)).collect()
    };
    Some(match &first.event {
        SessionEvent::Output { .. } => GroupKey::Run(
            "output",
            joined(|e| match e {
                SessionEvent::Output { text } => Some(text),
                _ => None,
            }),
        ),
        SessionEvent::Reasoning { .. } => GroupKey::Run(
            "reasoning",
            joined(|e| match e {
                SessionEvent::Reasoning { text } => Some(text),
                _ => None,
            }),
        ),
        other => GroupKey::One(other),
    })
}

/// For each group of both tails, whether the group in the same place on the other side is
/// the same: the rule `cuca diff` dims its equal rows by. A group with clipped text is never
/// equal, since the text left out may differ.
fn equal_groups(
    (left, right): (&crate::compare::Tail, &crate::compare::Tail),
    (a, b): (&[&[RecordView]], &[&[RecordView]]),
) -> Vec<bool> {
    let clipped = |tail: &crate::compare::Tail, group: &[RecordView]| {
        group.iter().any(|r| tail.clipped.contains(&r.sequence))
    };
    a.iter()
        .zip(b.iter())
        .map(|(p, q)| {
            !clipped(left, p)
                && !clipped(right, q)
                && group_key(p).is_some_and(|k| Some(k) == group_key(q))
        })
        .collect()
}

fn tail_column(tail: &crate::compare::Tail, groups: &[&[RecordView]], equal: &[bool]) -> Markup {
    html! {
        div.side {
            h2 { a href=(session_href(&tail.session)) { code { (tail.session) } } }
            p.muted.tail-totals { (plural(tail.n_records, "record", "records")) " after the shared ones · "
                (tail.prompt_tokens) " prompt / " (tail.completion_tokens) " completion tokens · "
                (tail.duration_ms) " ms" }
            @if tail.records.is_empty() { p.muted { "Nothing after the shared records." } }
            @for (i, group) in groups.iter().enumerate() {
                @if equal.get(i).copied().unwrap_or(false) {
                    div.same title="The same on both sides" { (record_group(group, Links::Server)) }
                } @else {
                    (record_group(group, Links::Server))
                }
            }
            @if (tail.records.len() as u64) < tail.n_records || tail.clipped_bytes > 0 {
                p.clipped { "The first " (tail.records.len()) " records shown"
                    @if tail.clipped_bytes > 0 { ", " (plural(tail.clipped_bytes, "byte", "bytes")) " of text clipped" }
                    "; " code { "cuca diff DIR " (tail.session) " …" } " prints every record." }
            }
        }
    }
}

/// A fork against its parent: the shared prefix, the first divergent record, the model
/// switch when there is one, both tails with the records equal on both sides dimmed.
pub(crate) fn compare(c: &crate::compare::Comparison) -> Markup {
    let (l, r) = (&c.left, &c.right);
    let (left_groups, right_groups) = (groups(&l.records), groups(&r.records));
    let equal = equal_groups((l, r), (&left_groups, &right_groups));
    let n_equal: usize = left_groups
        .iter()
        .zip(&equal)
        .filter(|(_, same)| **same)
        .map(|(g, _)| g.len())
        .sum();
    html! {
        h1 { "Compare " code { (r.session) } " with " code { (l.session) } }
        p #common { "They share their first " (plural(c.common, "record", "records")) "." }
        p #first-difference {
            @match (l.records.first(), r.records.first()) {
                (None, None) => { "No difference." }
                (Some(p), Some(q)) => { "First difference: " a href=(point_href(&format!("{}:{}", l.session, p.sequence))) { (l.session) ":" (p.sequence) }
                    " " (p.event.kind()) " against " a href=(point_href(&format!("{}:{}", r.session, q.sequence))) { (r.session) ":" (q.sequence) } " " (q.event.kind()) "." }
                (Some(_), None) => { (r.session) " ends there; " (l.session) " goes on." }
                (None, Some(_)) => { (l.session) " ends there; " (r.session) " goes on." }
            }
        }
        @if let Some((from, to)) = c.model_switch() {
            p #model-switch { "model switched: " code { (from) } " → " code { (to) } }
        }
        @if n_equal > 0 {
            p #equal-tail .muted { (plural(n_equal as u64, "record", "records"))
                " of " (l.session) "'s tail after the difference are the same on both sides (dimmed, marked =)." }
        }
        div.compare #tails { (tail_column(l, &left_groups, &equal)) (tail_column(r, &right_groups, &equal)) }
    }
}

/// Several sessions, each against the same one: a compare of one is [`compare`]; of more, a
/// row per session (what it shares, the model it switched to, what its tail cost) and the
/// tails side by side.
pub(crate) fn compare_many(cs: &[crate::compare::Comparison]) -> Markup {
    let [first, ..] = cs else {
        return html! { p { "Nothing to compare." } };
    };
    if cs.len() == 1 {
        return compare(first);
    }
    let base = &first.left.session;
    // The page's style sheet has a grid for each count up to the cap (no inline style: the
    // page's CSP allows none).
    let columns = format!("compare cols-{}", cs.len());
    html! {
        h1 { (cs.len()) " sessions compared with " code { (base) } }
        table #compared {
            thead { tr { th { "session" } th { "shared records" } th { "model" } th { "records after" }
                th { "tokens in" } th { "tokens out" } th { "ms" } } }
            tbody {
                @for c in cs {
                    tr {
                        td { a href=(session_href(&c.right.session)) { code { (c.right.session) } } }
                        td { (c.common) }
                        td.model-switch {
                            @match c.model_switch() {
                                Some((from, to)) => { "model switched: " code { (from) } " → " code { (to) } }
                                None => { "the same" }
                            }
                        }
                        td { (c.right.n_records) }
                        td { (c.right.prompt_tokens) }
                        td { (c.right.completion_tokens) }
                        td { (c.right.duration_ms) }
                    }
                }
            }
        }
        div #tails class=(columns) {
            @for c in cs {
                @let groups = groups(&c.right.records);
                (tail_column(&c.right, &groups, &[]))
            }
        }
    }
}

fn calls_href(filter: &CallFilter) -> String {
    let mut parts = Vec::new();
    for (key, value) in [
        ("run", &filter.run),
        ("session", &filter.session),
        ("model", &filter.model),
        ("status", &filter.status),
    ] {
        if !value.is_empty() {
            parts.push(format!("{key}={}", utf8_percent_encode(value, SEGMENT)));
        }
    }
    if parts.is_empty() {
        "/calls#calls".to_owned()
    } else {
        format!("/calls?{}#calls", parts.join("&"))
    }
}

/// A filter menu: each value a link to the table filtered by it (the page's CSP allows no
/// form submission, so filters are links).
fn filter_menu(
    name: &str,
    values: &[String],
    current: &str,
    filter: &CallFilter,
    set: fn(&mut CallFilter, String),
) -> Markup {
    let with = |value: &str| {
        let mut one = filter.clone();
        set(&mut one, value.to_owned());
        calls_href(&one)
    };
    html! {
        span.filter-menu data-filter=(name) {
            (name) ": "
            @if current.is_empty() { strong { "all" } } @else { a href=(with("")) { "all" } }
            @for value in values {
                " · "
                @if value == current { strong { (value) } } @else { a.filter-value href=(with(value)) { (value) } }
            }
        }
    }
}

fn call_table(table: &CallTable, filter: &CallFilter) -> Markup {
    let statuses: Vec<String> = ["failed", "ok"].iter().map(|s| (*s).to_owned()).collect();
    html! {
        h2 #calls { "Calls" }
        div.filters {
            (filter_menu("run", &table.runs, &filter.run, filter, |f, v| f.run = v))
            (filter_menu("session", &table.sessions, &filter.session, filter, |f, v| f.session = v))
            (filter_menu("model", &table.models, &filter.model, filter, |f, v| f.model = v))
            (filter_menu("status", &statuses, &filter.status, filter, |f, v| f.status = v))
        }
        p.muted #calls-count { (plural(table.n_matched as u64, "call matches", "calls match"))
            @if table.rows.len() < table.n_matched { "; the newest " (table.rows.len()) " are listed" } }
        table #call-rows { thead { tr { th { "When" } th { "Run" } th { "Session" } th { "Model" } th.num { "Status" } th.num { "ms" } th { "Error" } } }
            tbody { @for row in &table.rows { tr class=(if row.failed { "failed" } else { "ok" }) {
                td.when { (row.ts) } td { (row.run) }
                td.id { @if !row.session.is_empty() { a.session-link href=(session_href(&row.session)) { (row.session) } } }
                td { (row.model) }
                td.num { @if row.failed { span.error { (status_text(row.status)) } } @else { (status_text(row.status)) } }
                td.num { (thousands(row.ms)) } td { (row.error) }
            } } } }
    }
}

/// The search results: each hit's session, turn, kind and snippet, the match marked, linking
/// to its point (the page and turn that hold the record, scrolled to it).
pub(crate) fn search(results: &crate::search::Results) -> Markup {
    layout(
        "Search",
        html! {
            h1 { "Search" }
            @if results.query.is_empty() {
                p.muted { "Type in the box above and press Enter: message text, outputs, tool names and arguments, tool results, models and errors, across every session." }
            } @else {
                p #search-summary .muted {
                    @if results.offset > 0 || results.limited {
                        "hits " (thousands((results.offset + 1) as u64)) "–" (thousands((results.offset + results.hits.len()) as u64))
                    } @else {
                        (plural(results.hits.len() as u64, "hit", "hits"))
                    }
                    " for " code { (results.query) }
                    @if results.regex { " (regular expression)" }
                    " in " (plural(results.sessions as u64, "session", "sessions")) ", "
                    (plural(results.records, "record", "records")) " read"
                    @if results.limited { "; more on the next page" }
                }
                (search_pager(results))
                table #search-hits {
                    thead { tr { th { "Session" } th.num { "Turn" } th { "Record" } th { "Text" } } }
                    tbody {
                        @for hit in &results.hits {
                            tr {
                                td.id { a href=(session_href(&hit.session_id)) { (hit.session_id) } }
                                td.num { (hit.turn) }
                                td { a.hit-link href=(point_href(&hit.point_id())) { (hit.kind) " #" (hit.sequence) }
                                    span.muted { " " (hit.role.unwrap_or("")) " " (hit.field) } }
                                td.snippet {
                                    @let (before, matched, after) = split_snippet(&hit.snippet, &hit.matched);
                                    (before) mark { (matched) } (after)
                                    @if hit.also_in_forks > 0 {
                                        " " span.pill.also-in-forks title="The forks copied this record from this session: it is listed once" {
                                            "also in " (plural(hit.also_in_forks as u64, "fork", "forks")) }
                                    }
                                }
                            }
                        }
                    }
                }
                (search_pager(results))
            }
        },
    )
}

/// Links to the search's page before and after this one.
fn search_pager(results: &crate::search::Results) -> Markup {
    let href = |offset: usize| {
        let mut href = format!("/search?q={}", utf8_percent_encode(&results.query, SEGMENT));
        if results.regex {
            href.push_str("&re=1");
        }
        if offset > 0 {
            href.push_str(&format!("&offset={offset}"));
        }
        href
    };
    let per = crate::search::MAX_HITS;
    html! {
        @if results.offset > 0 || results.limited {
            nav.pager.search-pager {
                @if results.offset > 0 { a.prev href=(href(results.offset.saturating_sub(per))) { "← earlier hits" } }
                @if results.limited { a.next href=(href(results.offset + results.hits.len())) { "next " (per) " hits →" } }
            }
        }
    }
}

/// A snippet cut around its match; the whole snippet unmarked when the range is not on
/// character boundaries.
fn split_snippet<'a>(
    snippet: &'a str,
    matched: &std::ops::Range<usize>,
) -> (&'a str, &'a str, &'a str) {
    match (
        snippet.get(..matched.start),
        snippet.get(matched.clone()),
        snippet.get(matched.end..),
    ) {
        (Some(before), Some(hit), Some(after)) => (before, hit, after),
        _ => (snippet, "", ""),
    }
}
