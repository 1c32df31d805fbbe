//! Recorded text made safe for a terminal: control characters shown, never obeyed.
//!
//! Everything a recording holds (model output, messages, tool results, session ids, journal
//! and call-log fields) is untrusted: an Output of `\e]0;TITLE\a\e[2J` would set the window
//! title and clear the screen of whoever replays it. Human output goes through [`line`] (one
//! line: every control character escaped) or [`text`] (a text block: newlines kept and
//! indented, everything else escaped). `--json` output is serde_json's, exact.

use std::fmt::{self, Display, Formatter, Write};

/// Whether `c` would do something to a terminal other than print: C0 and C1 controls and
/// DEL (`char::is_control`), and the bidirectional overrides and isolates, which reorder
/// what is shown after them.
fn is_unsafe(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Writes `c` as visible text: `\n`, `\t`, `\r`, `\e`, else `\x1b`-style or `\u{9b}`-style.
fn write_escaped(f: &mut impl Write, c: char) -> fmt::Result {
    match c {
        '\n' => f.write_str("\\n"),
        '\t' => f.write_str("\\t"),
        '\r' => f.write_str("\\r"),
        '\x1b' => f.write_str("\\e"),
        c if (c as u32) < 0x80 => write!(f, "\\x{:02x}", c as u32),
        c => write!(f, "\\u{{{:x}}}", c as u32),
    }
}

/// A one-line rendering of untrusted text; see [`line`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Line<'a>(&'a str);

/// `text` on one line: every control character (newlines and tabs included) written as an
/// escape, so an id or a field can neither drive the terminal nor start a line of its own.
pub(crate) fn line(text: &str) -> Line<'_> {
    Line(text)
}

impl Display for Line<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if !self.0.chars().any(is_unsafe) {
            return f.pad(self.0);
        }
        let mut escaped = String::with_capacity(self.0.len() + 8);
        for c in self.0.chars() {
            if is_unsafe(c) {
                write_escaped(&mut escaped, c)?;
            } else {
                escaped.push(c);
            }
        }
        // `pad` so widths (`{:<28}`) apply to what is shown.
        f.pad(&escaped)
    }
}

/// A block rendering of untrusted text; see [`text`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Text<'a> {
    text: &'a str,
    indent: &'a str,
}

/// `text` as a block: each newline starts a new line indented by `indent` (so a multi-line
/// answer stays under its label), tabs are kept, every other control character is escaped.
pub(crate) fn text<'a>(text: &'a str, indent: &'a str) -> Text<'a> {
    Text { text, indent }
}

impl Display for Text<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let mut start = 0;
        for (at, c) in self.text.char_indices() {
            if c == '\t' || !is_unsafe(c) {
                continue;
            }
            f.write_str(&self.text[start..at])?;
            if c == '\n' {
                f.write_char('\n')?;
                f.write_str(self.indent)?;
            } else {
                write_escaped(f, c)?;
            }
            start = at + c.len_utf8();
        }
        f.write_str(&self.text[start..])
    }
}

#[cfg(test)]
mod tests {
    use super::{line, text};

    #[test]
    fn escape_sequences_are_shown_not_obeyed() {
        let hostile = "\u{1b}]0;TITLE\u{7}\u{1b}[2J";
        assert_eq!(line(hostile).to_string(), "\\e]0;TITLE\\x07\\e[2J");
        assert_eq!(
            line("a\nb\tc\r\u{9b}1m\u{202e}x\u{7f}").to_string(),
            "a\\nb\\tc\\r\\u{9b}1m\\u{202e}x\\x7f"
        );
        assert_eq!(format!("{:<6}|", line("ab")), "ab    |");
        assert_eq!(
            text("one\ntwo\tcols\u{1b}[2J", "    ").to_string(),
            "one\n    two\tcols\\e[2J"
        );
        assert_eq!(line("plain, ünïcode").to_string(), "plain, ünïcode");
    }
}
