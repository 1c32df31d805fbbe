//! The llama-server event streams the clients bench serves, and the minimal reader it floors on.
//!
//! Every stream is cut from the byte-exact transcript `fixtures/llama-server/stream-basic.body`:
//! its own role, content, finish, usage and
//! `[DONE]` events, never hand-written JSON, so every client parses what llama-server sends.

use std::borrow::Cow;

/// The body of one real llama-server streamed answer: a role chunk, 12 content chunks, a
/// finish chunk, a usage chunk and `data: [DONE]`, each event ending in a blank line.
pub const STREAM_BASIC: &[u8] = include_bytes!("../../../fixtures/llama-server/stream-basic.body");

/// What marks a content event in llama-server's chunks (the delta holds only `content`).
const CONTENT_DELTA: &[u8] = b"\"delta\":{\"content\":\"";

/// The events of `body`, each with its terminating blank line (`\n\n`), byte-exact; bytes
/// after the last blank line (an unterminated event) are left out.
pub fn events(body: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    while let Some(end) = memchr::memmem::find(&body[start..], b"\n\n") {
        out.push(&body[start..start + end + 2]);
        start += end + 2;
    }
    out
}

/// Whether `event` is a chunk whose delta carries answer text.
pub fn is_content_event(event: &[u8]) -> bool {
    memchr::memmem::find(event, CONTENT_DELTA).is_some()
}

/// A long answer built from [`STREAM_BASIC`]: its events before the first content event (the
/// role chunk), then `n_content` content events taken cyclically from its own, then its
/// events after the last content event (finish, usage, `[DONE]`).
pub fn long_stream(n_content: usize) -> Vec<u8> {
    let all = events(STREAM_BASIC);
    let first = all.iter().position(|e| is_content_event(e)).unwrap_or(0);
    let last = all
        .iter()
        .rposition(|e| is_content_event(e))
        .map_or(first, |i| i + 1);
    let content: Vec<&[u8]> = all[first..last]
        .iter()
        .copied()
        .filter(|e| is_content_event(e))
        .collect();
    let mut body = Vec::new();
    for event in &all[..first] {
        body.extend_from_slice(event);
    }
    for event in content.iter().cycle().take(n_content) {
        body.extend_from_slice(event);
    }
    for event in &all[last..] {
        body.extend_from_slice(event);
    }
    body
}

/// How a response body is cut into HTTP/1.1 chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// One HTTP chunk per server-sent event, as llama-server sends a stream.
    PerEvent,
    /// Chunks of this many bytes, cut anywhere (an event may span two).
    Coalesced(usize),
}

/// A whole HTTP/1.1 response carrying `body` chunked as `framing` says, with the headers of
/// `fixtures/llama-server/stream-basic.headers` except `Connection: close` in place of
/// keep-alive (the bench's server answers one request per connection).
pub fn chunked_response(body: &[u8], framing: Framing) -> Vec<u8> {
    let mut out = b"HTTP/1.1 200 OK\r\nServer: llama.cpp\r\nAccess-Control-Allow-Origin: \r\nX-Accel-Buffering: no\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".to_vec();
    let pieces: Vec<&[u8]> = match framing {
        Framing::PerEvent => events(body),
        Framing::Coalesced(size) => body.chunks(size.max(1)).collect(),
    };
    for piece in pieces {
        out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        out.extend_from_slice(piece);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// The leanest reader that yields what a chat client yields: events split at blank lines,
/// `data: ` stripped, each chunk parsed by `serde_json` into borrowed structs holding only
/// the delta's content, every non-empty content copied out as an owned text. No reasoning or
/// tool calls, no usage, no plugins, no call log: the floor for a Rust chat-stream client
/// that parses JSON, to show what a full client adds on top of it.
#[derive(Debug, Default)]
pub struct MinimalReader {
    pending: Vec<u8>,
    /// The texts read so far, in order.
    pub texts: Vec<String>,
}

#[derive(serde::Deserialize)]
struct MinimalChunk<'a> {
    #[serde(borrow, default)]
    choices: Vec<MinimalChoice<'a>>,
}

#[derive(serde::Deserialize)]
struct MinimalChoice<'a> {
    #[serde(borrow)]
    delta: Option<MinimalDelta<'a>>,
}

#[derive(serde::Deserialize)]
struct MinimalDelta<'a> {
    #[serde(borrow)]
    content: Option<Cow<'a, str>>,
}

impl MinimalReader {
    /// Takes the next bytes of the body, reading every event they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), serde_json::Error> {
        self.pending.extend_from_slice(bytes);
        let mut start = 0;
        let mut result = Ok(());
        while let Some(end) = memchr::memmem::find(&self.pending[start..], b"\n\n") {
            let event = &self.pending[start..start + end];
            start += end + 2;
            let Some(data) = event.strip_prefix(b"data: ") else {
                continue;
            };
            if data == b"[DONE]" {
                continue;
            }
            match serde_json::from_slice::<MinimalChunk<'_>>(data) {
                Ok(chunk) => {
                    for choice in chunk.choices {
                        if let Some(text) = choice.delta.and_then(|d| d.content) {
                            if !text.is_empty() {
                                self.texts.push(text.into_owned());
                            }
                        }
                    }
                }
                Err(error) => {
                    result = Err(error);
                    break;
                }
            }
        }
        self.pending.drain(..start);
        result
    }
}
