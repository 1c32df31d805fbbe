//! What every format's replay encoder shares: the most text one event carries, and the cut of
//! a long text into pieces of it.

/// The most bytes of text one streamed event carries. A recorded block longer than this (a
/// non-streamed answer is one block) goes out in several deltas, as a provider streams it, so
/// a stream holds one event of at most this much text at a time, however long the turn.
pub const MAX_EVENT_TEXT: usize = 64 * 1024;

/// The next piece of `text` from `offset`, at most [`MAX_EVENT_TEXT`] bytes cut at a
/// character boundary, and whether it is the last.
pub(crate) fn piece(text: &str, offset: usize) -> (&str, bool) {
    let mut end = offset.saturating_add(MAX_EVENT_TEXT).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (text.get(offset..end).unwrap_or_default(), end >= text.len())
}
