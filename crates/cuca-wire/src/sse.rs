//! A server-sent-events line decoder that accepts bytes split at any boundary.
//!
//! It follows the WHATWG event-stream rules a chat-completions client needs: `\n`, `\r\n`
//! and a lone `\r` end a line; a line starting with `:` is a comment (keep-alive); `data:`
//! lines accumulate (joined by `\n`) until a blank line dispatches the event; `event:` names
//! it; `id:` and `retry:` are ignored. Two leniencies for real servers: llama.cpp has sent
//! mid-stream failures as an `error: {…}` line, which is dispatched at once as an `error`
//! event, and data left without its closing blank line at the end of the body is still
//! dispatched.

use crate::error::WireError;

/// The most bytes one line, or one event's joined data, may hold.
///
/// A chat-completions chunk is a few hundred bytes and a whole non-streamed answer a few
/// hundred kilobytes; 16 MiB is far past both, and bounds what a server that never ends a
/// line (or never ends an event) can make the client buffer.
pub const MAX_EVENT_BYTES: usize = 16 << 20;

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
    /// Bytes of a line not yet ended by a terminator (only the new bytes of each read are
    /// searched for one, so a long line fed a byte at a time is still scanned once).
    buf: Vec<u8>,
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
    ///
    /// Complete lines are decoded straight from `bytes`; only an unfinished last line is
    /// copied aside, so a large read costs one pass and no buffer shuffling.
    pub fn feed<F>(&mut self, bytes: &[u8], on_event: &mut F) -> Result<(), WireError>
    where
        F: FnMut(SseEvent<'_>) -> Result<(), WireError>,
    {
        let mut input = bytes;
        if self.buf.last() == Some(&b'\r') && input.first().is_some_and(|&b| b != b'\n') {
            // The `\r` that ended the last read was a whole line end after all (the next byte
            // is not the `\n` of a `\r\n`). Decode the pending bytes now: otherwise they wait
            // for the next terminator in a later read, and the events in them are dispatched
            // late, after lines the same bytes in one read would have reached only afterwards.
            // (Found by fuzzing: a stream split into one-byte reads saw `[DONE]` too late.)
            let pending = std::mem::take(&mut self.buf);
            let result = self.lines(&pending, true, on_event);
            self.buf = pending;
            self.buf.clear();
            result?;
        }
        if !self.buf.is_empty() {
            // Finish the pending line with the new bytes first.
            let Some(pos) = memchr::memchr2(b'\n', b'\r', input) else {
                self.buf.extend_from_slice(input);
                return self.check_pending();
            };
            let take = if input[pos] == b'\r' {
                match input.get(pos + 1) {
                    Some(b'\n') => pos + 2,
                    Some(_) => pos + 1,
                    None => {
                        // A `\r` as the last byte may be the first half of `\r\n`.
                        self.buf.extend_from_slice(input);
                        return self.check_pending();
                    }
                }
            } else {
                pos + 1
            };
            self.buf.extend_from_slice(&input[..take]);
            input = &input[take..];
            let pending = std::mem::take(&mut self.buf);
            // The pending bytes now end in a whole terminator, so all of them are consumed.
            let result = self.lines(&pending, true, on_event);
            self.buf = pending;
            self.buf.clear();
            result?;
        }
        let consumed = self.lines(input, false, on_event)?;
        self.buf.extend_from_slice(&input[consumed..]);
        self.check_pending()
    }

    /// Refuses an unfinished line longer than [`MAX_EVENT_BYTES`] instead of buffering it.
    fn check_pending(&self) -> Result<(), WireError> {
        if self.buf.len() > MAX_EVENT_BYTES {
            return Err(WireError::Decode {
                message: format!(
                    "a line of the event stream at byte {} runs past {MAX_EVENT_BYTES} bytes without ending",
                    self.offset
                ),
            });
        }
        Ok(())
    }

    /// Ends the stream: a last unterminated line is taken as a line, and a pending event
    /// is dispatched.
    pub fn finish<F>(&mut self, on_event: &mut F) -> Result<(), WireError>
    where
        F: FnMut(SseEvent<'_>) -> Result<(), WireError>,
    {
        let pending = std::mem::take(&mut self.buf);
        let consumed = self.lines(&pending, true, on_event)?;
        if consumed < pending.len() {
            self.line(&pending[consumed..], on_event)?;
        }
        self.dispatch(on_event)
    }

    /// Decodes the complete lines of `data` and returns how many bytes they took. With
    /// `cr_final`, a `\r` as the last byte ends a line; without, it waits for the next read.
    fn lines<F>(
        &mut self,
        data: &[u8],
        cr_final: bool,
        on_event: &mut F,
    ) -> Result<usize, WireError>
    where
        F: FnMut(SseEvent<'_>) -> Result<(), WireError>,
    {
        let mut start = 0;
        while let Some(found) = memchr::memchr2(b'\n', b'\r', &data[start..]) {
            let pos = start + found;
            let end = if data[pos] == b'\n' {
                pos + 1
            } else {
                match data.get(pos + 1) {
                    Some(b'\n') => pos + 2,
                    Some(_) => pos + 1,
                    None if cr_final => pos + 1,
                    None => break,
                }
            };
            self.line(&data[start..pos], on_event)?;
            self.offset += (end - start) as u64;
            start = end;
        }
        Ok(start)
    }

    fn line<F>(&mut self, line: &[u8], on_event: &mut F) -> Result<(), WireError>
    where
        F: FnMut(SseEvent<'_>) -> Result<(), WireError>,
    {
        if line.is_empty() {
            return self.dispatch(on_event);
        }
        if line[0] == b':' {
            return Ok(());
        }
        let line = std::str::from_utf8(line).map_err(|e| WireError::Decode {
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
                if self.data.len() + value.len() + 1 > MAX_EVENT_BYTES {
                    return Err(WireError::Decode {
                        message: format!(
                            "an event of the stream at byte {} carries more than {MAX_EVENT_BYTES} bytes of data",
                            self.offset
                        ),
                    });
                }
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

    fn dispatch<F>(&mut self, on_event: &mut F) -> Result<(), WireError>
    where
        F: FnMut(SseEvent<'_>) -> Result<(), WireError>,
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
