//! A transcript read line by line, each line capped, every byte consumed fingerprinted.

use std::io::{self, BufRead};

use sha2::{Digest, Sha256};

/// One line as [`Lines::next_line`] hands it over.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A line ended by `\n`, its bytes (without the newline) in the caller's buffer.
    Complete,
    /// A line ended by `\n` but longer than the cap: its bytes were read and dropped.
    TooLong {
        /// Its length in bytes, without the newline.
        len: u64,
    },
    /// The end of the file came before a newline: the bytes are in the caller's buffer but
    /// not yet counted as read (a transcript being written ends like this).
    Unterminated,
}

/// Reads lines of at most `cap` bytes, counting line numbers and byte offsets and hashing
/// every byte of every line it has counted as read.
pub(crate) struct Lines<R> {
    reader: R,
    cap: usize,
    /// The 1-based number of the line the next call returns.
    pub(crate) next_line_no: u64,
    /// Bytes counted as read: the offset the next line starts at.
    pub(crate) offset: u64,
    hasher: Sha256,
}

impl<R: BufRead> Lines<R> {
    pub(crate) fn new(reader: R, cap: usize) -> Self {
        Lines {
            reader,
            cap,
            next_line_no: 1,
            offset: 0,
            hasher: Sha256::new(),
        }
    }

    /// Reads, hashes and counts the first `bytes` bytes and `lines` lines without handing
    /// them over; false when the file is shorter.
    pub(crate) fn skip(&mut self, bytes: u64, lines: u64) -> io::Result<bool> {
        let mut left = bytes;
        while left > 0 {
            let chunk = self.reader.fill_buf()?;
            if chunk.is_empty() {
                return Ok(false);
            }
            let take = chunk.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            self.hasher.update(&chunk[..take]);
            self.reader.consume(take);
            left -= take as u64;
        }
        self.offset = bytes;
        self.next_line_no = lines.saturating_add(1);
        Ok(true)
    }

    /// The SHA-256 of every byte counted as read so far, as hex.
    pub(crate) fn digest(&self) -> String {
        hex(&self.hasher.clone().finalize())
    }

    /// Counts an [`Line::Unterminated`] line as read after all (it parsed).
    pub(crate) fn accept_unterminated(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
        self.offset += bytes.len() as u64;
        self.next_line_no += 1;
    }

    /// The next line into `buf` (cleared first); `None` at the end of the file.
    pub(crate) fn next_line(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<Line>> {
        buf.clear();
        let mut len: u64 = 0;
        let mut too_long = false;
        loop {
            let chunk = self.reader.fill_buf()?;
            if chunk.is_empty() {
                if len == 0 {
                    return Ok(None);
                }
                if too_long {
                    // Hashed and counted already: an over-long unterminated tail is reported
                    // like any over-long line.
                    self.offset += len;
                    self.next_line_no += 1;
                    return Ok(Some(Line::TooLong { len }));
                }
                return Ok(Some(Line::Unterminated));
            }
            let (take, ends) = match chunk.iter().position(|&b| b == b'\n') {
                Some(at) => (at + 1, true),
                None => (chunk.len(), false),
            };
            let content = if ends {
                &chunk[..take - 1]
            } else {
                &chunk[..take]
            };
            if !too_long && buf.len() + content.len() > self.cap {
                too_long = true;
                // The part already buffered is hashed below with the rest; drop it.
                self.hasher.update(&buf[..]);
                buf.clear();
            }
            if too_long {
                self.hasher.update(&chunk[..take]);
            } else {
                buf.extend_from_slice(content);
            }
            len += content.len() as u64;
            self.reader.consume(take);
            if ends {
                if too_long {
                    self.offset += len + 1;
                    self.next_line_no += 1;
                    return Ok(Some(Line::TooLong { len }));
                }
                self.hasher.update(&buf[..]);
                self.hasher.update(b"\n");
                self.offset += len + 1;
                self.next_line_no += 1;
                return Ok(Some(Line::Complete));
            }
        }
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}
