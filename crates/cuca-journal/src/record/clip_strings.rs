//! A reader that clips every JSON string in a stream to its first bytes, so reading a summary of
//! a record costs memory bounded by the clip, however long a field is.
//!
//! serde_json buffers each string it deserializes whole: a record with a 1 GiB `buildPrompt`
//! cost `cuca journal show` 2.1 GB. Clipping in the byte stream, before serde sees it, bounds
//! every string at once (keys, ids, texts) while leaving the JSON valid: a string is only cut
//! before an unescaped character boundary, never inside an escape or between the two halves of
//! a surrogate pair, and a cut string ends in `…`.

use std::io::{self, BufRead, Read};

/// The UTF-8 bytes of `…` and the closing quote, written where a string was cut.
const CUT_MARK: &[u8] = "…\"".as_bytes();

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    /// After a backslash.
    Backslash,
    /// Inside `\uXXXX`: hex digits left and the value so far.
    Unicode {
        left: u8,
        value: u32,
    },
}

/// Clips every JSON string read through it to at most `max` bytes of content (plus `…`).
#[derive(Debug)]
pub(crate) struct ClipStrings<R> {
    inner: R,
    state: Clipper,
}

/// The byte-level state of [`ClipStrings`].
#[derive(Debug)]
struct Clipper {
    max: usize,
    in_string: bool,
    skipping: bool,
    escape: Escape,
    /// The last escape emitted was a high surrogate (`\uD800`–`\uDBFF`): its low half must
    /// follow before a cut.
    high_surrogate: bool,
    len: usize,
    pending: Vec<u8>,
}

impl<R: BufRead> ClipStrings<R> {
    pub(crate) fn new(inner: R, max: usize) -> Self {
        ClipStrings {
            inner,
            state: Clipper::new(max),
        }
    }
}

impl Clipper {
    fn new(max: usize) -> Self {
        Clipper {
            max,
            in_string: false,
            skipping: false,
            escape: Escape::None,
            high_surrogate: false,
            len: 0,
            pending: Vec::new(),
        }
    }

    /// Feeds one input byte; what it emits goes to `pending`.
    fn step(&mut self, byte: u8) {
        if !self.in_string {
            if byte == b'"' {
                self.in_string = true;
                self.skipping = false;
                self.escape = Escape::None;
                self.high_surrogate = false;
                self.len = 0;
            }
            self.pending.push(byte);
            return;
        }
        if self.skipping {
            match self.escape {
                Escape::None if byte == b'\\' => self.escape = Escape::Backslash,
                Escape::None if byte == b'"' => {
                    self.in_string = false;
                    self.pending.extend_from_slice(CUT_MARK);
                }
                // Any escaped character, `u` included: its hex digits are plain characters.
                _ => self.escape = Escape::None,
            }
            return;
        }
        match self.escape {
            Escape::Backslash => {
                self.escape = if byte == b'u' {
                    Escape::Unicode { left: 4, value: 0 }
                } else {
                    self.high_surrogate = false;
                    Escape::None
                };
            }
            Escape::Unicode { left, value } => {
                let digit = char::from(byte).to_digit(16).unwrap_or(0);
                let value = value * 16 + digit;
                self.escape = if left > 1 {
                    Escape::Unicode {
                        left: left - 1,
                        value,
                    }
                } else {
                    self.high_surrogate = (0xD800..=0xDBFF).contains(&value);
                    Escape::None
                };
            }
            Escape::None => {
                if byte == b'"' {
                    self.in_string = false;
                    self.pending.push(byte);
                    return;
                }
                let continuation = byte & 0xC0 == 0x80;
                let pairs_a_surrogate = self.high_surrogate && byte == b'\\';
                if self.len >= self.max && !continuation && !pairs_a_surrogate {
                    self.skipping = true;
                    self.step(byte);
                    return;
                }
                if byte == b'\\' {
                    self.escape = Escape::Backslash;
                } else {
                    self.high_surrogate = false;
                }
            }
        }
        self.len += 1;
        self.pending.push(byte);
    }
}

impl<R: BufRead> Read for ClipStrings<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let state = &mut self.state;
        loop {
            if !state.pending.is_empty() {
                let n = state.pending.len().min(buf.len());
                buf[..n].copy_from_slice(&state.pending[..n]);
                state.pending.drain(..n);
                return Ok(n);
            }
            let input = self.inner.fill_buf()?;
            if input.is_empty() {
                return Ok(0);
            }
            // Feed until enough is emitted to fill `buf` or the chunk is used up; bytes skipped
            // inside a clipped string emit nothing, and the loop goes on to the next chunk.
            let mut used = 0;
            for &byte in input {
                used += 1;
                state.step(byte);
                if state.pending.len() >= buf.len() {
                    break;
                }
            }
            self.inner.consume(used);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clip(json: &str, max: usize) -> String {
        let mut out = String::new();
        ClipStrings::new(json.as_bytes(), max)
            .read_to_string(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn long_strings_are_cut_with_an_ellipsis_and_short_ones_pass_untouched() {
        assert_eq!(
            clip(r#"{"a":"abcdef","b":"xy"}"#, 3),
            r#"{"a":"abc…","b":"xy"}"#
        );
        assert_eq!(clip(r#"{"abc":"abc"}"#, 3), r#"{"abc":"abc"}"#);
        assert_eq!(
            clip(r#"[1, true, null, "x"]"#, 0),
            r#"[1, true, null, "…"]"#
        );
    }

    #[test]
    fn a_cut_never_splits_an_escape_a_character_or_a_surrogate_pair() {
        let cases = [
            (r#"["ab\"cd\\ef"]"#, 3),
            (r#"["a\u00e9\u00e9\u00e9"]"#, 2),
            (r#"["a\ud83d\ude00\ud83d\ude00"]"#, 2),
            ("[\"aééééé\"]", 2),
            (r#"["\\\\\\\\\\"]"#, 1),
        ];
        for (json, max) in cases {
            let out = clip(json, max);
            let value: Vec<String> = serde_json::from_str(&out)
                .unwrap_or_else(|e| panic!("{json} clipped to {out}: {e}"));
            let original: Vec<String> = serde_json::from_str(json).unwrap();
            let kept = value[0].trim_end_matches('…');
            assert!(original[0].starts_with(kept), "{json} -> {out}");
            assert!(value[0].ends_with('…'), "{json} -> {out}");
        }
    }

    #[test]
    fn a_gigantic_string_reads_back_as_its_first_bytes() {
        let json = format!(r#"{{"k":"{}","n":1}}"#, "x".repeat(1 << 20));
        let value: serde_json::Value =
            serde_json::from_reader(ClipStrings::new(json.as_bytes(), 16)).unwrap();
        assert_eq!(value["k"], format!("{}…", "x".repeat(16)));
        assert_eq!(value["n"], 1);
    }
}
