//! The snippet of a hit: the match and a little of the text around it, on one line.

use std::ops::Range;

use crate::{CONTEXT_BYTES, MAX_MATCH_BYTES};

/// The part of `text` a hit shows around the match at `found`, and the match's range in it:
/// up to [`CONTEXT_BYTES`] either side, stopping at a line end, the match clipped to
/// [`MAX_MATCH_BYTES`], and `…` on a side where text was left out.
pub(crate) fn clip(text: &str, found: Range<usize>) -> (String, Range<usize>) {
    let match_end = floor(text, found.end.min(found.start + MAX_MATCH_BYTES));
    let mut start = floor(text, found.start.saturating_sub(CONTEXT_BYTES));
    if let Some(newline) = text[start..found.start].rfind('\n') {
        start += newline + 1;
    }
    let mut end = ceil(text, (match_end + CONTEXT_BYTES).min(text.len()));
    if let Some(newline) = text[match_end..end].find('\n') {
        end = match_end + newline;
    }
    // A match clipped at its end runs on: no context after it, the `…` says so.
    if match_end < found.end {
        end = match_end;
    }
    let mut snippet = String::with_capacity(end - start + 6);
    if start > 0 {
        snippet.push('…');
    }
    let prefix = snippet.len();
    snippet.push_str(&text[start..end]);
    if end < text.len() {
        snippet.push('…');
    }
    (
        snippet,
        found.start - start + prefix..match_end - start + prefix,
    )
}

/// The largest char boundary at or below `at`.
fn floor(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The smallest char boundary at or above `at`.
fn ceil(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}
