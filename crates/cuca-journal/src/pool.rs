//! Content addressing and the three intern tables (messages, toolsets, texts).
//!
//! The tables map a content address to the index it was given and hold nothing else: no body
//! stays in memory once its line is queued. Lines are appended to the caller's batch buffer in
//! the order they are interned, so a stored message's text references always precede it.

use std::collections::HashMap;
use std::io::{self, Write};

use cuca_events::{Message, MessageContentBlock, Role, ToolDefinition};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::clip::{clip_tail, TOOL_CLIP_BYTES};
use crate::format::{
    ClipRow, ContentId, JournalLine, MessageLine, Pool, StoredBlock, StoredMessage, ToolsetLine,
};

/// How many bytes of serde_json output are gathered before they are fed to the hash.
///
/// serde_json writes a value in many tiny pieces (a quote, a key, a comma); feeding each to
/// SHA-256 separately costs more than hashing them. 4 KiB on the stack keeps hashing a message
/// allocation-free and measured 2x faster than unbuffered on a 24 KB request.
const HASH_BUF_BYTES: usize = 4096;

/// Feeds serde_json's output into a SHA-256 through a small stack buffer.
struct HashWriter {
    hasher: Sha256,
    buf: [u8; HASH_BUF_BYTES],
    len: usize,
}

impl HashWriter {
    fn new() -> Self {
        HashWriter {
            hasher: Sha256::new(),
            buf: [0; HASH_BUF_BYTES],
            len: 0,
        }
    }

    fn finish(mut self) -> ContentId {
        self.hasher.update(&self.buf[..self.len]);
        finish(self.hasher)
    }
}

impl Write for HashWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.len + data.len() > HASH_BUF_BYTES {
            self.hasher.update(&self.buf[..self.len]);
            self.len = 0;
            if data.len() > HASH_BUF_BYTES {
                self.hasher.update(data);
                return Ok(data.len());
            }
        }
        self.buf[self.len..self.len + data.len()].copy_from_slice(data);
        self.len += data.len();
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn finish(hasher: Sha256) -> ContentId {
    let digest = hasher.finalize();
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    ContentId(id)
}

fn json_id<T: Serialize + ?Sized>(value: &T) -> ContentId {
    let mut writer = HashWriter::new();
    // Writing into a hasher cannot fail, and serde_json fails only on maps with non-string
    // keys, which none of these types has; a failure would still yield a stable (if partial)
    // address rather than a panic.
    let _ = serde_json::to_writer(&mut writer, value);
    writer.finish()
}

/// The same JSON as [`Message`] serializes to, over borrowed parts, so a response's blocks can
/// be addressed as the assistant message they become without cloning them.
#[derive(Serialize)]
struct MessageRef<'a> {
    role: Role,
    content: &'a [MessageContentBlock],
}

/// The content address of a message: SHA-256 over its compact JSON, exact image payloads
/// included, first 16 bytes.
pub fn message_id(message: &Message) -> ContentId {
    parts_id(message.role, &message.content)
}

/// [`message_id`] of a message given by its parts.
pub fn parts_id(role: Role, content: &[MessageContentBlock]) -> ContentId {
    json_id(&MessageRef { role, content })
}

/// The content address of an offered tool array.
pub fn toolset_id(tools: &[ToolDefinition]) -> ContentId {
    json_id(tools)
}

/// The content address of a text: SHA-256 over its UTF-8 bytes, first 16 bytes.
pub fn text_id(text: &str) -> ContentId {
    let mut hasher = Sha256::new();
    hasher.update(text.as_bytes());
    finish(hasher)
}

/// The decoded size of a base64 payload, without decoding it.
///
/// Whitespace is ignored and padding may be present or not; this is the figure the telemetry
/// stream records for the same image.
pub fn base64_decoded_len(data: &str) -> u64 {
    let mut symbols = 0u64;
    for byte in data.bytes() {
        match byte {
            b'=' | b' ' | b'\n' | b'\r' | b'\t' => {}
            _ => symbols += 1,
        }
    }
    let full = symbols / 4 * 3;
    match symbols % 4 {
        2 => full + 1,
        3 => full + 2,
        _ => full,
    }
}

/// How much of a text an entry holds: all of it, or the tail kept under a ceiling.
///
/// Part of the text pool's key, so a payload a shell stream clipped at 32 KiB and the same bytes
/// shown to the model in full as a tool output are two entries: "a payload the model was shown
/// in full is recorded in full".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kept {
    Whole,
    Tail(usize),
}

/// The three intern tables, plus how many entries of each were queued successfully.
#[derive(Debug, Default)]
pub(crate) struct Pools {
    messages: HashMap<ContentId, u64>,
    toolsets: HashMap<ContentId, u64>,
    texts: HashMap<(ContentId, Kept), u64>,
}

impl Pools {
    /// How many entries each table holds: (messages, toolsets, texts).
    pub(crate) fn counts(&self) -> (u64, u64, u64) {
        (
            self.messages.len() as u64,
            self.toolsets.len() as u64,
            self.texts.len() as u64,
        )
    }
}

/// Interns bodies into the tables, appending each new entry's line to `buf`.
///
/// Indices are minted here; the caller holds the recorder's lock for the whole of an entry's
/// interning and queueing, so minting and queueing are one critical section. If the batch is
/// then not queued, capture stops for good, so the tables never need rolling back.
pub(crate) struct Interner<'a> {
    pub(crate) pools: &'a mut Pools,
    pub(crate) buf: &'a mut Vec<u8>,
}

/// Appends one line (its JSON and a `\n`) to a batch buffer.
pub(crate) fn push_line(buf: &mut Vec<u8>, line: &JournalLine) -> Result<(), serde_json::Error> {
    serde_json::to_writer(&mut *buf, line)?;
    buf.push(b'\n');
    Ok(())
}

/// Appends a text line without copying the text into a [`crate::format::TextLine`] first: the bytes and key
/// order are exactly what serializing `JournalLine::Text` writes (a unit test holds them equal),
/// and texts are the pool's bulk, so the copy was the largest cost of interning one.
fn push_text_line(
    buf: &mut Vec<u8>,
    index: u64,
    id: ContentId,
    text: &str,
) -> Result<(), serde_json::Error> {
    buf.extend_from_slice(b"{\"line\":\"text\",\"index\":");
    buf.extend_from_slice(index.to_string().as_bytes());
    buf.extend_from_slice(b",\"id\":\"");
    buf.extend_from_slice(id.to_hex().as_bytes());
    buf.extend_from_slice(b"\",\"text\":");
    serde_json::to_writer(&mut *buf, text)?;
    buf.extend_from_slice(b"}\n");
    Ok(())
}

impl Interner<'_> {
    /// The text-pool index of `text` (address `id`), interning it clipped to `limit` bytes.
    ///
    /// Keyed by the address *and* by what is kept: a whole text and a clipped copy of the same
    /// text are two entries (both lines carry the whole payload's `id`), so a payload recorded
    /// whole never resolves to a clip made under a smaller ceiling.
    pub(crate) fn text(
        &mut self,
        text: &str,
        id: ContentId,
        limit: usize,
    ) -> Result<u64, serde_json::Error> {
        let key = (
            id,
            if text.len() <= limit {
                Kept::Whole
            } else {
                Kept::Tail(limit)
            },
        );
        if let Some(&index) = self.pools.texts.get(&key) {
            return Ok(index);
        }
        let index = self.pools.texts.len() as u64;
        let kept = clip_tail(text, limit);
        push_text_line(self.buf, index, id, kept)?;
        if kept.len() < text.len() {
            push_line(
                self.buf,
                &JournalLine::Clip(ClipRow {
                    pool: Pool::Text,
                    index,
                    original_bytes: text.len() as u64,
                    original_id: id,
                }),
            )?;
        }
        self.pools.texts.insert(key, index);
        Ok(index)
    }

    /// The toolset-pool index of `tools` (address `id`).
    pub(crate) fn toolset(
        &mut self,
        tools: &[ToolDefinition],
        id: ContentId,
    ) -> Result<u64, serde_json::Error> {
        if let Some(&index) = self.pools.toolsets.get(&id) {
            return Ok(index);
        }
        let index = self.pools.toolsets.len() as u64;
        push_line(
            self.buf,
            &JournalLine::Toolset(ToolsetLine {
                index,
                id,
                tools: tools.to_vec(),
            }),
        )?;
        self.pools.toolsets.insert(id, index);
        Ok(index)
    }

    /// The message-pool index of the message `(role, content)` (address `id`).
    ///
    /// A new message's tool payloads are interned into the text pool first (their lines
    /// precede the message line), and its images are reduced to descriptors.
    pub(crate) fn message(
        &mut self,
        role: Role,
        content: &[MessageContentBlock],
        id: ContentId,
    ) -> Result<u64, serde_json::Error> {
        if let Some(&index) = self.pools.messages.get(&id) {
            return Ok(index);
        }
        let mut stored = Vec::with_capacity(content.len());
        for block in content {
            stored.push(match block {
                MessageContentBlock::Text { text } => StoredBlock::Text { text: text.clone() },
                MessageContentBlock::Thinking { thinking } => StoredBlock::Thinking {
                    thinking: thinking.clone(),
                },
                MessageContentBlock::ToolCall {
                    id: call_id,
                    name,
                    arguments,
                } => StoredBlock::ToolCall {
                    id: call_id.clone(),
                    name: name.clone(),
                    arguments: self.text(arguments, text_id(arguments), TOOL_CLIP_BYTES)?,
                },
                MessageContentBlock::ToolResult {
                    tool_call_id,
                    content,
                    is_error,
                } => StoredBlock::ToolResult {
                    tool_call_id: tool_call_id.clone(),
                    content: self.text(content, text_id(content), TOOL_CLIP_BYTES)?,
                    is_error: *is_error,
                },
                MessageContentBlock::ImageBase64 { media_type, data } => StoredBlock::Image {
                    media_type: media_type.clone(),
                    size: base64_decoded_len(data),
                },
            });
        }
        let index = self.pools.messages.len() as u64;
        push_line(
            self.buf,
            &JournalLine::Message(MessageLine {
                index,
                id,
                body: StoredMessage {
                    role,
                    content: stored,
                },
            }),
        )?;
        self.pools.messages.insert(id, index);
        Ok(index)
    }
}

#[cfg(test)]
mod tests;
