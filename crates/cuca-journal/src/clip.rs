//! Tail-keeping clips: the two payload ceilings and the char-boundary-safe cut.

/// The ceiling of one recorded subprocess stream (a shell or git stdout or stderr).
///
/// A recorded stream is what a process printed, of which the shell tool shows the model only
/// the last 16 KiB; twice that keeps everything the model could have seen plus context.
pub const STREAM_CLIP_BYTES: usize = 32 * 1024;

/// The ceiling of one recorded tool payload (a tool output or arguments).
///
/// Sized at the filesystem tool's own whole-file cap, so a payload the model was shown in full
/// is recorded in full, and a clip in the tool pool means the tool layer had clipped it too.
pub const TOOL_CLIP_BYTES: usize = 256 * 1024;

/// The ceiling of a short free-text field (an error's detail, the cancel file's content).
///
/// These are explanations, not payloads the loop branched on byte by byte; 4 KiB holds any
/// provider's error body worth reading without letting one stuffed error fill the journal.
pub const DETAIL_CLIP_BYTES: usize = 4 * 1024;

/// The last at most `max` bytes of `text`, cut forward to the next character boundary.
///
/// Keeps the tail because that is where a process prints its verdict (the same rule the shell
/// tool's own output cap follows). The result is never longer than `max` and is at most 3
/// bytes shorter than it when a multi-byte character straddles the cut.
pub fn clip_tail(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[cfg(test)]
mod tests;
