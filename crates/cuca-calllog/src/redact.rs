//! `redact_error`: a provider's own sentence for [`Record::error`](crate::Record::error), with
//! every stretch that quotes the request replaced by a marker.
//!
//! The provider's own sentence is kept, clipped by `clip_error` (ending in its ellipsis),
//! with every stretch that quotes the request — its message text, tool arguments, any header
//! value, the key — replaced by a marker. Servers quote what they were sent: a
//! real llama-server answers a message without `role` with `Failed to parse messages: Missing
//! 'role' in message: {"content":"…"}`, and an upstream that echoes its headers echoes the
//! key. The provider's words around the quote (`exceeds the available context size (2048
//! tokens)`) are what a reader of the log needs, so those are kept.
//!
//! # How a quote is found
//!
//! A quote is found by its runs of [`MIN_QUOTED_BYTES`] bytes, not by whole values: every
//! 8-byte window of the message that is also an 8-byte window of something the request
//! carried is covered, and each maximal covered stretch (widened to whole characters) becomes
//! one [`QUOTE_MARKER`]. That catches, with one rule, a value quoted whole, a value the server
//! cut (llama.cpp clips what it echoes), a value quoted from its middle, a tool call's
//! arguments re-serialised with other spacing, and a key inside `Bearer …`. An 8-byte window
//! is exactly one `u64`, so the comparison is exact (no hash can collide into a leak), and the
//! work is one pass over the message and one over the request's text: linear, whatever the
//! sizes (a 16 MiB request is read once, the message indexed once).
//!
//! What the request carried, for this purpose ([`Quoted`]): every string value in its JSON
//! body, read by a lenient lexer so a truncated or broken body still yields its strings, in
//! each form a server may echo it — as written, decoded, re-escaped the way `serde_json` and
//! nlohmann's `dump()` escape, escaped to ASCII the way Python's `json.dumps` does, and with
//! its whitespace collapsed (a plain-text error body is read with its whitespace collapsed);
//! every header value, whole (its token and its key are runs of the whole value); any other
//! text a caller adds. A body that is not JSON at all is taken whole as one text.
//!
//! Left out on purpose, because they are the grammar of the request rather than anyone's text
//! and a server names them in its own sentence: object keys (`"messages"` is 8 bytes, and
//! "Failed to parse messages" must survive), and the wire's own vocabulary
//! ([`WIRE_WORDS`]: roles, content types, `application/json`). Strings shorter than
//! [`MIN_QUOTED_BYTES`] cannot be told from the server's words and are not looked for.

use std::borrow::Cow;
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use crate::record::clip_error;

/// What replaces each stretch of a provider's message that quotes what was sent (or, where a
/// writer adds it, the answer so far).
///
/// Square brackets, because no server writes them around its own words, and one plain word
/// that says what was there without naming more of it. A request that itself contains this
/// text gets it back in the marker; that is the one way quoted text can sit beside a marker.
pub const QUOTE_MARKER: &str = "[quoted]";

/// The shortest run of request text [`redact_error`] looks for, in bytes.
///
/// Eight, because a shorter run is one of the server's own words as often as a quote: a
/// message text "a" or "user" would eat the sentence around it. Eight bytes is also the
/// length of the guarantee for keys (an upstream echoing a key never leaves any 8+ byte
/// run of it), and it is exactly one `u64`, which makes the comparison exact and cheap. A
/// run of a prompt that happens to equal eight bytes of the server's own sentence costs the
/// row those few words, never a leak. Strings shorter than this are not looked for.
pub const MIN_QUOTED_BYTES: usize = 8;

/// The most bytes of a message [`redact_error`] reads; past it the message is cut (at a
/// character) and ends in `…`.
///
/// The row keeps [`MAX_ERROR_CHARS`](crate::MAX_ERROR_CHARS) characters, so a longer message
/// matters only through the quotes that a marker folds away, and a message this long is an
/// HTML page or a dump. The bound keeps the message's index (one entry per byte) small.
pub const MAX_REDACTED_BYTES: usize = 256 * 1024;

/// Request strings that are the OpenAI wire's own vocabulary, never a person's text, and so
/// are not looked for: a server names them in its own sentence ("assistant message must…",
/// "Content-Type must be application/json"). Only those of [`MIN_QUOTED_BYTES`] or more
/// matter.
pub const WIRE_WORDS: &[&str] = &[
    "assistant",
    "developer",
    "function",
    "tool_calls",
    "image_url",
    "input_audio",
    "input_text",
    "output_text",
    "json_object",
    "json_schema",
    "required",
    "application/json",
    "text/event-stream",
];

/// What a request carried, for [`redact_error`] to find quoted in a provider's message.
///
/// It borrows: build it when an error is about to be written, from the body and headers that
/// were sent, and nothing is copied until then.
///
/// ```
/// use cuca_calllog::{redact_error, Quoted};
/// let body = br#"{"messages":[{"content":"my card is 4111-1111-1111-1111"}]}"#;
/// let quoted = Quoted::new().body(body).header(b"Bearer sk-live-0123456789");
/// let message = r#"Missing 'role' in message: {"content":"my card is 4111-1111-1111-1111"}"#;
/// assert_eq!(
///     redact_error(message, &quoted),
///     r#"Missing 'role' in message: {"content":"[quoted]"}"#
/// );
/// assert_eq!(
///     redact_error("bad key: Bearer sk-live-0123456789", &quoted),
///     "bad key: [quoted]"
/// );
/// ```
#[derive(Debug, Clone, Default)]
pub struct Quoted<'a> {
    bodies: Vec<&'a [u8]>,
    texts: Vec<&'a [u8]>,
}

impl<'a> Quoted<'a> {
    /// Nothing quoted yet.
    pub fn new() -> Quoted<'a> {
        Quoted::default()
    }

    /// A request body as it was sent: its string values are looked for (a JSON body, whole
    /// or broken), or the whole body when it is not JSON.
    pub fn body(mut self, body: &'a [u8]) -> Quoted<'a> {
        self.bodies.push(body);
        self
    }

    /// A header value as it was sent (`Authorization`'s whole value, `api-key`, any other).
    pub fn header(mut self, value: &'a [u8]) -> Quoted<'a> {
        self.texts.push(value);
        self
    }

    /// Any other text the request carried, looked for as it is and JSON-escaped.
    pub fn text(mut self, text: &'a str) -> Quoted<'a> {
        self.texts.push(text.as_bytes());
        self
    }

    /// Feeds every form of every string the request carried to `scan`.
    fn scan_into(&self, scan: &mut Scan) {
        let mut forms = Forms::default();
        for text in &self.texts {
            forms.header(text, scan);
        }
        for body in &self.bodies {
            let first = body.iter().find(|b| !b.is_ascii_whitespace());
            if matches!(first, Some(b'{' | b'[')) {
                for_each_value_literal(body, |literal| forms.literal(literal, scan));
            } else {
                forms.header(body, scan);
            }
            if scan.done() {
                return;
            }
        }
    }
}

/// A provider's message for [`Record::error`](crate::Record::error): every stretch that
/// quotes what `quoted` holds replaced by [`QUOTE_MARKER`], then clipped by [`clip_error`].
///
/// After it, no run of [`MIN_QUOTED_BYTES`] bytes of any string the request carried (in any
/// of the forms [`Quoted`] lists) is left between markers. A message longer than
/// [`MAX_REDACTED_BYTES`] is cut first and ends in `…`.
pub fn redact_error(message: &str, quoted: &Quoted<'_>) -> String {
    let (message, cut) = bounded(message.trim());
    let mut redacted = redact(message, quoted);
    if cut {
        redacted.push('…');
    }
    clip_error(&redacted)
}

/// `message` cut to [`MAX_REDACTED_BYTES`] at a character boundary, and whether it was cut.
fn bounded(message: &str) -> (&str, bool) {
    if message.len() <= MAX_REDACTED_BYTES {
        return (message, false);
    }
    let mut end = MAX_REDACTED_BYTES;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    (&message[..end], true)
}

fn redact(message: &str, quoted: &Quoted<'_>) -> String {
    let bytes = message.as_bytes();
    if bytes.len() < MIN_QUOTED_BYTES {
        return message.to_owned();
    }
    let mut scan = Scan::of(bytes);
    quoted.scan_into(&mut scan);
    if scan.found.is_empty() {
        return message.to_owned();
    }
    // Each window whose run was found covers its bytes; a difference array makes that linear.
    let mut depth = vec![0i32; bytes.len() + 1];
    for (start, window) in windows(bytes) {
        if scan.found.contains(&window) {
            depth[start] += 1;
            depth[start + MIN_QUOTED_BYTES] -= 1;
        }
    }
    let mut covered = Vec::with_capacity(bytes.len());
    let mut level = 0;
    for step in &depth[..bytes.len()] {
        level += step;
        covered.push(level > 0);
    }
    // A character with any byte covered is covered whole, so no character is ever cut, and
    // each maximal covered stretch becomes one marker.
    let mut out = String::with_capacity(message.len());
    let mut in_quote = false;
    for (at, c) in message.char_indices() {
        if covered[at..at + c.len_utf8()].contains(&true) {
            if !in_quote {
                out.push_str(QUOTE_MARKER);
                in_quote = true;
            }
        } else {
            in_quote = false;
            out.push(c);
        }
    }
    out
}

/// Every window of [`MIN_QUOTED_BYTES`] bytes of `bytes` as a `u64`, with where it starts.
fn windows(bytes: &[u8]) -> impl Iterator<Item = (usize, u64)> + '_ {
    bytes
        .windows(MIN_QUOTED_BYTES)
        .enumerate()
        .map(|(start, window)| (start, window_value(window)))
}

fn window_value(window: &[u8]) -> u64 {
    let mut value = [0u8; MIN_QUOTED_BYTES];
    value.copy_from_slice(window);
    u64::from_le_bytes(value)
}

/// A hasher for windows, which are already well-mixed `u64`s once multiplied: SipHash's
/// defence against chosen keys buys nothing here (a collision costs a probe, never a wrong
/// answer, since the set compares whole windows) and cost most of a long scan.
#[derive(Default)]
struct WindowHasher(u64);

impl Hasher for WindowHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.write_u64(u64::from(*byte));
        }
    }

    fn write_u64(&mut self, value: u64) {
        let mixed = (self.0 ^ value).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        // Fold the high half down: hashbrown takes buckets from the low bits.
        self.0 = mixed ^ (mixed >> 29);
    }
}

type Windows = HashSet<u64, BuildHasherDefault<WindowHasher>>;

/// The message's windows, and which of them the request's text was seen to hold.
struct Scan {
    /// Windows of the message not yet seen in the request.
    wanted: Windows,
    /// Windows of the message seen in the request.
    found: Windows,
    /// A bit per [`Scan::slot`]: a cheap first test, since nearly every window of a long
    /// request is not in a short message.
    filter: Vec<u64>,
}

/// Bits in [`Scan::filter`] as a power of two: 2^20 bits is 128 KiB, sparse for a message
/// of [`MAX_REDACTED_BYTES`].
const FILTER_BITS: u32 = 20;

impl Scan {
    fn of(message: &[u8]) -> Scan {
        let wanted: Windows = windows(message).map(|(_, window)| window).collect();
        let mut filter = vec![0u64; 1 << (FILTER_BITS - 6)];
        for window in &wanted {
            let slot = Scan::slot(*window);
            filter[slot >> 6] |= 1 << (slot & 63);
        }
        Scan {
            wanted,
            found: Windows::default(),
            filter,
        }
    }

    fn slot(window: u64) -> usize {
        // Fibonacci hashing: the top bits of a multiply spread neighbouring byte patterns.
        (window.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - FILTER_BITS)) as usize
    }

    /// Every message window is already found: nothing left to look for.
    fn done(&self) -> bool {
        self.wanted.is_empty()
    }

    /// Looks at every window of one form of one request string.
    fn feed(&mut self, text: &[u8]) {
        if text.len() < MIN_QUOTED_BYTES || self.done() {
            return;
        }
        let (first, rest) = text.split_at(MIN_QUOTED_BYTES);
        let mut window = window_value(first);
        self.look(window);
        for byte in rest {
            // Little-endian: the oldest byte is the low one, shifted out first.
            window = (window >> 8) | (u64::from(*byte) << 56);
            self.look(window);
        }
    }

    #[inline]
    fn look(&mut self, window: u64) {
        let slot = Scan::slot(window);
        if self.filter[slot >> 6] & (1 << (slot & 63)) != 0 && self.wanted.remove(&window) {
            self.found.insert(window);
        }
    }
}

/// Scratch space for the forms of one string, reused from string to string.
#[derive(Default)]
struct Forms {
    decoded: Vec<u8>,
    form: String,
}

impl Forms {
    /// A header value or other text: as it is, and JSON-escaped.
    fn header(&mut self, text: &[u8], scan: &mut Scan) {
        let text = String::from_utf8_lossy(text);
        if WIRE_WORDS.contains(&text.as_ref()) {
            return;
        }
        scan.feed(text.as_bytes());
        self.escaped_forms(&text, None, scan);
    }

    /// A string literal of a JSON body, as written between its quotes.
    fn literal(&mut self, literal: &[u8], scan: &mut Scan) {
        // Without a backslash the literal is its own decoding: no copy of a long prompt.
        let decoded = if literal.contains(&b'\\') {
            self.decoded.clear();
            unescape(literal, &mut self.decoded);
            Cow::Owned(String::from_utf8_lossy(&self.decoded).into_owned())
        } else {
            String::from_utf8_lossy(literal)
        };
        if WIRE_WORDS.contains(&decoded.as_ref()) {
            return;
        }
        scan.feed(literal);
        if decoded.as_bytes() != literal {
            scan.feed(decoded.as_bytes());
        }
        self.escaped_forms(&decoded, Some(literal), scan);
    }

    /// The forms a server that re-serialises `text` may write: `serde_json`'s (nlohmann's is
    /// the same), all-ASCII (Python's default), and with whitespace collapsed. A form equal
    /// to `written` (already fed) is skipped.
    fn escaped_forms(&mut self, text: &str, written: Option<&[u8]>, scan: &mut Scan) {
        // One pass for what decides the forms (the text can be a 16 MiB prompt).
        let (mut escapes, mut other_space, mut double_space, mut prev) = (false, false, false, 0);
        for byte in text.bytes() {
            escapes |= byte < 0x20 || byte == b'"' || byte == b'\\';
            other_space |= matches!(byte, b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
            double_space |= byte == b' ' && prev == b' ';
            prev = byte;
        }
        // Without a character JSON escapes, `serde_json`'s form is the text itself.
        if escapes {
            self.form.clear();
            escape_json(text, false, &mut self.form);
            if Some(self.form.as_bytes()) != written {
                scan.feed(self.form.as_bytes());
            }
        }
        if !text.is_ascii() {
            self.form.clear();
            escape_json(text, true, &mut self.form);
            scan.feed(self.form.as_bytes());
        }
        let other_space = other_space
            || (!text.is_ascii() && text.contains(|c: char| c.is_whitespace() && c != ' '));
        if other_space || double_space {
            self.form.clear();
            for (n, word) in text.split_whitespace().enumerate() {
                if n > 0 {
                    self.form.push(' ');
                }
                self.form.push_str(word);
            }
            scan.feed(self.form.as_bytes());
        }
    }
}

/// Calls `value` with the bytes between the quotes of every string literal in `body` that is
/// not an object key, lenient about everything else: a body cut off mid-string yields the
/// string's start, and a body that is not valid JSON still yields its strings.
fn for_each_value_literal(body: &[u8], mut value: impl FnMut(&[u8])) {
    let mut at = 0;
    while let Some(open) = body[at..].iter().position(|b| *b == b'"') {
        let start = at + open + 1;
        let mut end = start;
        while end < body.len() && body[end] != b'"' {
            // A backslash escapes the next byte, whatever it is.
            end += if body[end] == b'\\' { 2 } else { 1 };
        }
        let end = end.min(body.len());
        let literal = &body[start..end];
        let after = body[(end + 1).min(body.len())..]
            .iter()
            .find(|b| !b.is_ascii_whitespace());
        if after != Some(&b':') {
            value(literal);
        }
        at = end + 1;
        if at >= body.len() {
            return;
        }
    }
}

/// Decodes JSON escapes of `literal` into `out`, leniently: an escape that is not one is kept
/// as written, and a lone surrogate becomes U+FFFD.
fn unescape(literal: &[u8], out: &mut Vec<u8>) {
    let mut at = 0;
    while at < literal.len() {
        let byte = literal[at];
        if byte != b'\\' || at + 1 >= literal.len() {
            out.push(byte);
            at += 1;
            continue;
        }
        let simple = match literal[at + 1] {
            b'"' => Some(b'"'),
            b'\\' => Some(b'\\'),
            b'/' => Some(b'/'),
            b'b' => Some(0x08),
            b'f' => Some(0x0c),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            _ => None,
        };
        if let Some(simple) = simple {
            out.push(simple);
            at += 2;
            continue;
        }
        let Some(unit) = hex4(literal, at + 2).filter(|_| literal[at + 1] == b'u') else {
            out.push(byte);
            at += 1;
            continue;
        };
        at += 6;
        let code = if (0xD800..0xDC00).contains(&unit) {
            let low = (literal.get(at) == Some(&b'\\') && literal.get(at + 1) == Some(&b'u'))
                .then(|| hex4(literal, at + 2))
                .flatten()
                .filter(|low| (0xDC00..0xE000).contains(low));
            match low {
                Some(low) => {
                    at += 6;
                    0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                }
                None => 0xFFFD,
            }
        } else {
            unit
        };
        let c = char::from_u32(code).unwrap_or('\u{FFFD}');
        let mut buf = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    }
}

fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = std::str::from_utf8(bytes.get(at..at + 4)?).ok()?;
    u32::from_str_radix(digits, 16).ok()
}

/// `text` JSON-escaped without its quotes: `serde_json`'s escapes, and with `ascii` every
/// character past ASCII as `\uXXXX` (UTF-16, lowercase hex, as Python writes it).
fn escape_json(text: &str, ascii: bool, out: &mut String) {
    use std::fmt::Write;
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (ascii && !c.is_ascii()) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    // Writing to a String cannot fail.
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests;
