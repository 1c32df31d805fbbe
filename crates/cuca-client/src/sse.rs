//! A server-sent-events line decoder that accepts bytes split at any boundary.
//!
//! It follows the WHATWG event-stream rules a chat-completions client needs: `\n`, `\r\n`
//! and a lone `\r` end a line; a line starting with `:` is a comment (keep-alive); `data:`
//! lines accumulate (joined by `\n`) until a blank line dispatches the event; `event:` names
//! it; `id:` and `retry:` are ignored. Two leniencies for real servers: llama.cpp has sent
//! mid-stream failures as an `error: {…}` line, which is dispatched at once as an `error`
//! event, and data left without its closing blank line at the end of the body is still
//! dispatched.

use crate::error::ClientError;

/// One dispatched event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The event type (`"message"` unless the server named one).
    pub event: &'a str,
    /// The data lines, joined by `\n`.
    pub data: &'a str,
}

/// Turns arbitrary byte chunks into [`SseEvent`]s.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes received but not yet ended by a line terminator.
    buf: Vec<u8>,
    /// How far into `buf` a terminator has already been searched for, so a long line fed
    /// one byte at a time is scanned once, not once per byte.
    scanned: usize,
    /// The current event's data.
    data: String,
    /// Whether a `data:` line arrived for the current event (an empty one counts).
    has_data: bool,
    /// The current event's type, empty for the default.
    event: String,
    /// Bytes consumed so far, for error offsets.
    offset: u64,
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        SseDecoder::default()
    }

    /// Feeds the next bytes, calling `on_event` for every event they complete.
    pub fn feed<F>(&mut self, bytes: &[u8], on_event: &mut F) -> Result<(), ClientError>
    where
        F: FnMut(SseEvent<'_>) -> Result<(), ClientError>,
    {
        self.buf.extend_from_slice(bytes);
        self.drain_lines(false, on_event)
    }

    /// Ends the stream: a last unterminated line is taken as a line, and a pending event
    /// is dispatched.
    pub fn finish<F>(&mut self, on_event: &mut F) -> Result<(), ClientError>
    where
        F: FnMut(SseEvent<'_>) -> Result<(), ClientError>,
    {
        self.drain_lines(true, on_event)?;
        if !self.buf.is_empty() {
            let line = std::mem::take(&mut self.buf);
            self.line(&line, on_event)?;
        }
        self.scanned = 0;
        self.dispatch(on_event)
    }

    fn drain_lines<F>(&mut self, at_end: bool, on_event: &mut F) -> Result<(), ClientError>
    where
        F: FnMut(SseEvent<'_>) -> Result<(), ClientError>,
    {
        let buf = std::mem::take(&mut self.buf);
        let mut start = 0;
        let mut i = self.scanned;
        let mut waiting_at = None;
        while let Some(found) = buf[i..].iter().position(|&b| b == b'\n' || b == b'\r') {
            let pos = i + found;
            let end = if buf[pos] == b'\n' {
                pos + 1
            } else if pos + 1 < buf.len() {
                if buf[pos + 1] == b'\n' {
                    pos + 2
                } else {
                    pos + 1
                }
            } else if at_end {
                pos + 1
            } else {
                // A `\r` as the last byte may be the first half of `\r\n`: wait for more.
                waiting_at = Some(pos);
                break;
            };
            if let Err(error) = self.line(&buf[start..pos], on_event) {
                self.buf = buf;
                return Err(error);
            }
            self.offset += (end - start) as u64;
            start = end;
            i = end;
        }
        let mut rest = buf;
        rest.drain(..start);
        self.scanned = match waiting_at {
            Some(pos) => pos - start,
            None => rest.len(),
        };
        self.buf = rest;
        Ok(())
    }

    fn line<F>(&mut self, line: &[u8], on_event: &mut F) -> Result<(), ClientError>
    where
        F: FnMut(SseEvent<'_>) -> Result<(), ClientError>,
    {
        if line.is_empty() {
            return self.dispatch(on_event);
        }
        if line[0] == b':' {
            return Ok(());
        }
        let line = std::str::from_utf8(line).map_err(|e| ClientError::Decode {
            message: format!(
                "the event stream is not UTF-8 at byte {}",
                self.offset + e.valid_up_to() as u64
            ),
        })?;
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => {
                self.event.clear();
                self.event.push_str(value);
            }
            "error" => {
                on_event(SseEvent {
                    event: "error",
                    data: value,
                })?;
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch<F>(&mut self, on_event: &mut F) -> Result<(), ClientError>
    where
        F: FnMut(SseEvent<'_>) -> Result<(), ClientError>,
    {
        let result = if self.has_data {
            on_event(SseEvent {
                event: if self.event.is_empty() {
                    "message"
                } else {
                    &self.event
                },
                data: &self.data,
            })
        } else {
            Ok(())
        };
        self.data.clear();
        self.event.clear();
        self.has_data = false;
        result
    }
}

#[cfg(test)]
mod tests;
