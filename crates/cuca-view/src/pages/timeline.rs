//! The timeline page: an SVG waterfall (geometry in attributes, so the strict CSP that
//! forbids inline style still draws it) and the same calls as a table, in start order, a page
//! at a time.
//!
//! The drawing covers the whole run (or the window asked for): a lane with fewer calls than
//! the plot has columns draws each call as a bar; a denser one is drawn one column at a time,
//! each column as tall as the share of its time spent in calls, red when one of them failed,
//! linking to a window of the timeline around it where the calls are drawn one by one.

use maud::{html, Markup};

use super::{duration_words, opt, plural, session_href, thousands, turn_href, when};
use crate::index::TurnStat;
use crate::timeline::Lane;

/// A call's start to the millisecond: calls a few ms apart are told apart.
fn when_ms(ms: u64) -> String {
    humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
        .to_string()
}

/// The drawing's width in SVG units; the page scales it to fit.
const WIDTH: u64 = 1000;
/// One lane's height.
const LANE: u64 = 26;
/// The room on the left for a lane's name.
const LABEL: u64 = 180;
/// The plot's width: one column a unit, what the aggregated drawing resolves.
const PLOT: u64 = WIDTH - LABEL;
/// A lane with more calls than this is drawn by columns: past it, bars of at least one unit
/// would cover each other and the lane would read as one solid bar.
const MAX_BARS: usize = (PLOT / 2) as usize;
/// Calls a page of the table lists; the pager reaches every other one.
pub(crate) const ROWS_PER_PAGE: usize = 100;
/// Axis ticks between the two ends.
const TICKS: u64 = 4;
/// Columns on each side of an aggregated column that its window link shows too, for context.
const ZOOM_CONTEXT: u64 = 4;

/// What the page was asked for: a window of the run (ms since the epoch; the whole run when
/// absent) and the page of the table.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct View {
    pub(crate) from: Option<u64>,
    pub(crate) to: Option<u64>,
    pub(crate) page: usize,
}

/// One column of an aggregated lane.
#[derive(Debug, Default, Clone)]
struct Column {
    n_calls: u64,
    n_errors: u64,
    busy_ms: u64,
    first_turn: Option<usize>,
    last_turn: usize,
}

/// The page.
pub(crate) fn page(session: &str, lanes: &[Lane], view: View) -> Markup {
    let whole_t0 = lanes
        .iter()
        .flat_map(|l| l.calls().iter().map(|c| c.start_ms))
        .min()
        .unwrap_or(0);
    let whole_t1 = lanes
        .iter()
        .flat_map(|l| l.calls().iter().map(|c| c.end_ms))
        .max()
        .unwrap_or(whole_t0);
    let t0 = view.from.unwrap_or(whole_t0).max(whole_t0);
    let t1 = view.to.unwrap_or(whole_t1).min(whole_t1).max(t0 + 1);
    let windowed = t0 > whole_t0 || t1 < whole_t1.max(whole_t0 + 1);
    let span = t1 - t0;
    let x = |ms: u64| LABEL + (ms.clamp(t0, t1) - t0).saturating_mul(PLOT) / span;
    let in_window = |c: &TurnStat| c.end_ms >= t0 && c.start_ms <= t1;
    let height = LANE * lanes.len() as u64 + 24;
    let mut rows: Vec<(&Lane, &TurnStat)> = lanes
        .iter()
        .flat_map(|lane| {
            lane.calls()
                .iter()
                .filter(|c| in_window(c))
                .map(move |call| (lane, call))
        })
        .collect();
    rows.sort_by(|(la, a), (lb, b)| {
        (a.start_ms, &la.session, a.number).cmp(&(b.start_ms, &lb.session, b.number))
    });
    let pages = rows.len().div_ceil(ROWS_PER_PAGE).max(1);
    let page = view.page.clamp(1, pages);
    let base_href = format!("{}/timeline", session_href(session));
    let href = |from: Option<u64>, to: Option<u64>, page: usize| {
        let mut parts = Vec::new();
        if let (Some(from), Some(to)) = (from, to) {
            parts.push(format!("from={from}&to={to}"));
        }
        if page > 1 {
            parts.push(format!("page={page}"));
        }
        if parts.is_empty() {
            base_href.clone()
        } else {
            format!("{base_href}?{}", parts.join("&"))
        }
    };
    let window = windowed.then_some((t0, t1));
    let page_href = |page: usize| href(window.map(|w| w.0), window.map(|w| w.1), page);
    html! {
        h1 { "Timeline of " a href=(session_href(session)) { code { (session) } } }
        p.muted #timeline-span { (plural(lanes.len() as u64, "conversation", "conversations")) " · "
            (plural(rows.len() as u64, "call", "calls")) " · "
            (when(Some(t0))) " to " (when(Some(t1))) " · " (duration_words(span))
            @if windowed { " (a window of the run: " a #whole-run href=(href(None, None, 1)) { "the whole run" } ")" } }
        svg #timeline .timeline xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {WIDTH} {height}")) role="img" aria-label="calls over time" {
            @for (i, lane) in lanes.iter().enumerate() {
                @let y = LANE * i as u64;
                @let calls: Vec<&TurnStat> = lane.calls().iter().filter(|c| in_window(c)).collect();
                g.lane data-session=(lane.session) data-calls=(calls.len()) {
                    text x="4" y=(y + 17) { (lane.session) }
                    line.lane-line x1=(LABEL) x2=(WIDTH) y1=(y + LANE / 2) y2=(y + LANE / 2) {}
                    (outside_marks(lane, y, t0, t1, &x))
                    @if calls.len() <= MAX_BARS {
                        @for call in &calls {
                            a href=(turn_href(&lane.session, call.number)) {
                                rect class=(if call.error.is_some() { "bar error" } else { "bar" })
                                    data-turn=(call.number)
                                    x=(x(call.start_ms)) y=(y + 4)
                                    width=((x(call.end_ms).saturating_sub(x(call.start_ms))).max(1)) height=(LANE - 8) {
                                    title { (lane.session) " · turn " (thousands(call.number as u64)) " · " (opt(call.latency_ms)) " ms" }
                                }
                            }
                        }
                    } @else {
                        @for (col, column) in columns(&calls, t0, span).iter().enumerate() {
                            @if let Some(first) = column.first_turn {
                                @let col = col as u64;
                                // Time spent in calls over the column's time, as its height.
                                @let col_ms = (span / PLOT).max(1);
                                @let tall = ((LANE - 8) * column.busy_ms.min(col_ms) / col_ms).max(2);
                                @let from = t0 + span * col.saturating_sub(ZOOM_CONTEXT) / PLOT;
                                @let to = t0 + span * (col + 1 + ZOOM_CONTEXT).min(PLOT) / PLOT;
                                a href=(href(Some(from), Some(to), 1)) {
                                    rect class=(if column.n_errors > 0 { "bar column error" } else { "bar column" })
                                        data-first-turn=(first) data-last-turn=(column.last_turn)
                                        x=(LABEL + col) y=(y + 4 + (LANE - 8) - tall) width="1" height=(tall) {
                                        title { (lane.session) " · turns " (thousands(first as u64)) "–" (thousands(column.last_turn as u64))
                                            " · " (plural(column.n_calls, "call", "calls"))
                                            @if column.n_errors > 0 { " · " (plural(column.n_errors, "error", "errors")) } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @for tick in 0..=TICKS {
                @let at = LABEL + PLOT * tick / TICKS;
                @let anchor = if tick == 0 { "start" } else if tick == TICKS { "end" } else { "middle" };
                text.axis x=(at) y=(height - 6) text-anchor=(anchor) {
                    @if tick == 0 && !windowed { "0 s" } @else { (duration_words(span * tick / TICKS + (t0 - whole_t0))) }
                }
            }
        }
        @if lanes.iter().any(|l| l.calls().iter().filter(|c| in_window(c)).count() > MAX_BARS) {
            p.muted #timeline-density { "Calls are denser than the drawing: each column's height is the share of its time spent in calls, red where one failed; click a column to draw its calls one by one." }
        }
        h2 { "Calls in start order" }
        (pager(page, pages, rows.len(), &page_href))
        table #timeline-calls {
            thead { tr { th { "Conversation" } th.num { "Turn" } th { "Started" } th.num { "ms" } th.num { "Tokens in / out" } th { "Files · commands" } } }
            tbody {
                @for (lane, call) in rows.iter().skip((page - 1) * ROWS_PER_PAGE).take(ROWS_PER_PAGE) {
                    tr data-session=(lane.session) {
                        td.id { a href=(session_href(&lane.session)) { (lane.session) } }
                        td.num { a href=(turn_href(&lane.session, call.number)) { (thousands(call.number as u64)) } }
                        td.when { (when_ms(call.start_ms)) }
                        td.num { (opt(call.latency_ms)) }
                        td.num { @if call.tokens_known { (thousands(call.prompt_tokens)) " / " (thousands(call.completion_tokens)) } }
                        td.outside { (outside_words(call)) }
                    }
                }
            }
        }
        (pager(page, pages, rows.len(), &page_href))
    }
}

/// Most shell-command and snapshot marks one lane draws: past this many they would cover
/// each other as the bars do ([`MAX_BARS`]); the table still counts every call's.
const MAX_OUTSIDE_MARKS: usize = MAX_BARS;

/// What a call's turn recorded outside the model, in words for the table ("2 files · 1
/// command, 1 failed"); empty when nothing was.
fn outside_words(call: &TurnStat) -> String {
    let mut words = Vec::new();
    if call.n_files_changed > 0 {
        words.push(plural(call.n_files_changed, "file", "files"));
    }
    if call.n_commands > 0 {
        let mut run = plural(call.n_commands, "command", "commands");
        if call.n_failed_commands > 0 {
            run.push_str(&format!(", {} failed", call.n_failed_commands));
        }
        words.push(run);
    }
    words.join(" · ")
}

/// A lane's marks for what happened outside the model: each shell command a thin bar under
/// the calls from its start to its end (red when it failed), each snapshot that changed files
/// a dot over them, each linking to its record.
fn outside_marks(lane: &Lane, y: u64, t0: u64, t1: u64, x: &dyn Fn(u64) -> u64) -> Markup {
    let index = &lane.index;
    let commands: Vec<_> = index
        .commands
        .iter()
        .filter(|c| c.end_ms >= t0 && c.start_ms() <= t1)
        .take(MAX_OUTSIDE_MARKS)
        .collect();
    let snapshots: Vec<_> = index
        .snapshots
        .iter()
        .filter(|s| s.n_changes > 0 && s.at_ms >= t0 && s.at_ms <= t1)
        .take(MAX_OUTSIDE_MARKS)
        .collect();
    let point = |turn: usize, sequence: u64| {
        format!("{}?turn={turn}#p-{sequence}", session_href(&lane.session))
    };
    html! {
        @for command in &commands {
            a href=(point(command.turn, command.sequence)) {
                rect class=(if command.failed() { "command error" } else { "command" })
                    data-sequence=(command.sequence)
                    x=(x(command.start_ms())) y=(y + LANE - 4)
                    width=(x(command.end_ms).saturating_sub(x(command.start_ms())).max(2)) height="3" {
                    title { "shell command · turn " (thousands(command.turn as u64)) " · "
                        @match command.exit_status { Some(code) => { "exit " (code) } None => { "did not run" } }
                        " · " (duration_words(command.duration_ms)) }
                }
            }
        }
        @for snapshot in &snapshots {
            a href=(point(snapshot.turn, snapshot.sequence)) {
                circle.files data-sequence=(snapshot.sequence) cx=(x(snapshot.at_ms)) cy=(y + 3) r="2.5" {
                    title { (plural(snapshot.n_changes, "file changed", "files changed")) " before turn " (thousands(snapshot.turn as u64)) }
                }
            }
        }
    }
}

/// The table's pager: earlier, page N of M, later.
fn pager(page: usize, pages: usize, n_rows: usize, href: &dyn Fn(usize) -> String) -> Markup {
    let first_row = (page - 1) * ROWS_PER_PAGE;
    html! {
        nav.pager.timeline-pager {
            @if page > 1 { a.first href=(href(1)) { "« first" } a.prev href=(href(page - 1)) { "← earlier" } }
            span.muted.page-of { "page " (thousands(page as u64)) " of " (thousands(pages as u64))
                @if n_rows > 0 { " · calls " (thousands((first_row + 1) as u64)) "–" (thousands(n_rows.min(first_row + ROWS_PER_PAGE) as u64)) " of " (thousands(n_rows as u64)) } }
            @if page < pages { a.next href=(href(page + 1)) { "later →" } a.last href=(href(pages)) { "last »" } }
        }
    }
}

/// The calls of one lane folded into [`PLOT`] columns of `span / PLOT` ms from `t0`: how many
/// start in each, how many of those failed, and how many of each column's milliseconds some
/// call was running (a call's time spread over the columns it covers).
fn columns(calls: &[&TurnStat], t0: u64, span: u64) -> Vec<Column> {
    let mut out = vec![Column::default(); PLOT as usize];
    let col_of = |ms: u64| ((ms.saturating_sub(t0)).saturating_mul(PLOT) / span).min(PLOT - 1);
    let col_start = |col: u64| t0 + span * col / PLOT;
    for call in calls {
        let first = col_of(call.start_ms);
        if let Some(column) = out.get_mut(first as usize) {
            column.n_calls += 1;
            column.n_errors += u64::from(call.error.is_some());
            column.first_turn = Some(
                column
                    .first_turn
                    .map_or(call.number, |t| t.min(call.number)),
            );
            column.last_turn = column.last_turn.max(call.number);
        }
        for col in first..=col_of(call.end_ms) {
            let (from, to) = (col_start(col), col_start(col + 1));
            let overlap = call.end_ms.min(to).saturating_sub(call.start_ms.max(from));
            if let Some(column) = out.get_mut(col as usize) {
                column.busy_ms += overlap;
                // A column a call runs through shows it, and links to it, too.
                column.first_turn.get_or_insert(call.number);
                column.last_turn = column.last_turn.max(call.number);
            }
        }
    }
    out
}
