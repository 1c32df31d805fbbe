//! The timeline page: an SVG waterfall (geometry in attributes, so the strict CSP that
//! forbids inline style still draws it) and the same calls as a table, in start order.

use maud::{html, Markup};

use super::{plural, session_href, turn_href, when};

/// A call's start to the millisecond: calls a few ms apart are told apart.
fn when_ms(ms: u64) -> String {
    humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
        .to_string()
}
use crate::timeline::Lane;

/// The drawing's width in SVG units; the page scales it to fit.
const WIDTH: u64 = 1000;
/// One lane's height.
const LANE: u64 = 26;
/// The room on the left for a lane's name.
const LABEL: u64 = 180;
/// Most calls the table under the drawing lists.
const MAX_ROWS: usize = 500;

/// The page.
pub(crate) fn page(session: &str, lanes: &[Lane]) -> Markup {
    let starts = lanes
        .iter()
        .flat_map(|l| l.calls.iter().map(|c| c.start_ms));
    let ends = lanes.iter().flat_map(|l| l.calls.iter().map(|c| c.end_ms));
    let t0 = starts.min().unwrap_or(0);
    let t1 = ends.max().unwrap_or(t0).max(t0 + 1);
    let span = t1 - t0;
    let plot = WIDTH - LABEL;
    let x = |ms: u64| LABEL + (ms.saturating_sub(t0)).saturating_mul(plot) / span;
    let height = LANE * lanes.len() as u64 + 24;
    let mut rows: Vec<(&Lane, &crate::index::TurnStat)> = lanes
        .iter()
        .flat_map(|lane| lane.calls.iter().map(move |call| (lane, call)))
        .collect();
    rows.sort_by_key(|(lane, call)| (call.start_ms, lane.session.clone(), call.number));
    html! {
        h1 { "Timeline of " a href=(session_href(session)) { code { (session) } } }
        p.muted { (plural(lanes.len() as u64, "conversation", "conversations")) " · "
            (when(Some(t0))) " to " (when(Some(t1))) " · " (super::duration_words(span)) }
        svg #timeline .timeline xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {WIDTH} {height}")) role="img" aria-label="calls over time" {
            @for (i, lane) in lanes.iter().enumerate() {
                @let y = LANE * i as u64;
                g.lane data-session=(lane.session) {
                    text x="4" y=(y + 17) { (lane.session) }
                    line.lane-line x1=(LABEL) x2=(WIDTH) y1=(y + LANE / 2) y2=(y + LANE / 2) {}
                    @for call in &lane.calls {
                        a href=(turn_href(&lane.session, call.number)) {
                            rect class=(if call.error.is_some() { "bar error" } else { "bar" })
                                data-turn=(call.number)
                                x=(x(call.start_ms)) y=(y + 4)
                                width=((x(call.end_ms).saturating_sub(x(call.start_ms))).max(2)) height=(LANE - 8) {
                                title { (lane.session) " · turn " (call.number) " · " (super::opt(call.latency_ms)) " ms" }
                            }
                        }
                    }
                }
            }
            text.axis x=(LABEL) y=(height - 6) { "0 s" }
            text.axis x=(WIDTH - 4) y=(height - 6) text-anchor="end" { (super::duration_words(span)) }
        }
        @for lane in lanes.iter().filter(|l| l.n_left_out > 0) {
            p.muted { (lane.session) ": " (plural(lane.n_left_out as u64, "later call", "later calls")) " not drawn." }
        }
        h2 { "Calls in start order" }
        table #timeline-calls {
            thead { tr { th { "Conversation" } th.num { "Turn" } th { "Started" } th.num { "ms" } th.num { "Tokens in / out" } } }
            tbody {
                @for (lane, call) in rows.iter().take(MAX_ROWS) {
                    tr data-session=(lane.session) {
                        td.id { a href=(session_href(&lane.session)) { (lane.session) } }
                        td.num { a href=(turn_href(&lane.session, call.number)) { (call.number) } }
                        td { (when_ms(call.start_ms)) }
                        td.num { (super::opt(call.latency_ms)) }
                        td.num { @if call.tokens_known { (call.prompt_tokens) " / " (call.completion_tokens) } }
                    }
                }
            }
        }
        @if rows.len() > MAX_ROWS { p.muted { "The first " (MAX_ROWS) " of " (rows.len()) " calls." } }
    }
}
