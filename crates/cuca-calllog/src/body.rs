//! `ResponseBody`: a response captured for a row as it streams in, held once, already escaped.

/// A response body on its way into [`Record::response_body`](crate::Record::response_body),
/// captured piece by piece as the bytes arrive (bodies pin only).
///
/// The seed keeps the bodies "whole and unclipped", and a response can be tens of mebibytes.
/// Collected into a `String` and then serialized with the row, it would be held twice (and
/// briefly three times). This holds it once, as the JSON string content it will be on the
/// line, and [`Attempt::finish_with_response`](crate::Attempt::finish_with_response) writes
/// it in the row's one `write` without copying it again. Bytes that are not UTF-8 become
/// U+FFFD, as `String::from_utf8_lossy` would make them, also when a character is split
/// between two pieces.
///
/// ```
/// use cuca_calllog::ResponseBody;
/// let mut body = ResponseBody::new();
/// body.push("data: {\"content\":\"caf".as_bytes());
/// body.push(&"é\"}\n\n".as_bytes()[..1]); // half of the é
/// body.push(&"é\"}\n\n".as_bytes()[1..]);
/// assert_eq!(body.len(), 27);
/// ```
#[derive(Debug, Default, Clone)]
pub struct ResponseBody {
    /// The JSON string content, without the quotes.
    escaped: Vec<u8>,
    /// The start of a character split at the end of the last piece (at most 3 bytes).
    pending: Vec<u8>,
    /// Raw bytes pushed.
    len: u64,
}

impl ResponseBody {
    /// An empty body.
    pub fn new() -> ResponseBody {
        ResponseBody::default()
    }

    /// Appends the next bytes of the response.
    pub fn push(&mut self, bytes: &[u8]) {
        self.len += bytes.len() as u64;
        if self.pending.is_empty() {
            let rest = self.push_valid(bytes);
            self.pending.extend_from_slice(rest);
        } else {
            // A character was split between pieces: decode it with this piece (a copy of one
            // network read, and only when a split happened).
            let mut joined = std::mem::take(&mut self.pending);
            joined.extend_from_slice(bytes);
            let rest = self.push_valid(&joined).to_vec();
            self.pending = rest;
        }
    }

    /// Raw bytes pushed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The escaped content, with a character left incomplete at the end as U+FFFD.
    pub(crate) fn into_escaped(mut self) -> Vec<u8> {
        if !self.pending.is_empty() {
            self.pending.clear();
            self.escape("\u{FFFD}");
        }
        self.escaped
    }

    /// Decodes and escapes what of `bytes` is complete; returns an incomplete tail (the start
    /// of a character the next piece finishes).
    fn push_valid<'b>(&mut self, mut bytes: &'b [u8]) -> &'b [u8] {
        loop {
            match std::str::from_utf8(bytes) {
                Ok(text) => {
                    self.escape(text);
                    return &[];
                }
                Err(error) => {
                    let (valid, after) = bytes.split_at(error.valid_up_to());
                    // Checked by from_utf8 just now.
                    self.escape(std::str::from_utf8(valid).unwrap_or_default());
                    match error.error_len() {
                        None => return after,
                        Some(bad) => {
                            self.escape("\u{FFFD}");
                            bytes = &after[bad..];
                        }
                    }
                }
            }
        }
    }

    fn escape(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        // serde_json's own escaping, so the line reads back exactly as a serialized row; the
        // quotes it writes around the string are left out.
        let mut quoted = Vec::with_capacity(text.len() + 2);
        if serde_json::to_writer(&mut quoted, text).is_ok() && quoted.len() >= 2 {
            self.escaped.extend_from_slice(&quoted[1..quoted.len() - 1]);
        }
    }
}
