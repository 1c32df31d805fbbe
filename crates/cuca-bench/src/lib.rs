//! Bench-only: the peers cuca's stores are compared against, and the records they all store.
//!
//! Each crate's own benches compare it with a baseline inside that crate. The comparisons
//! that need two stores at once live here: `benches/peers.rs` measures `FileBackend`
//! appends against a raw `write` of the same frame bytes (the physical limit), a JSONL file
//! (one `serde_json` line per record: [`JsonlPeer`]) and SQLite as agent frameworks use it
//! ([`SqlitePeer`]); and `SessionReplay` over a `.cslog` file against decoding the JSONL
//! file and against reading the file's bytes into memory. `benches/clients.rs` streams a
//! llama-server answer ([`llama`]) from a loopback server through `CucaClient`, async-openai,
//! a minimal SSE + JSON reader ([`llama::MinimalReader`]) and a raw body read. `cargo xtask
//! bench` runs both with every other bench and prints one table.
//!
//! ```
//! use cuca_bench::{turn_session, JsonlPeer, SqlitePeer};
//!
//! let dir = tempfile::tempdir()?;
//! let records = turn_session("demo", 100, 32);
//! assert_eq!(records.len(), 100);
//!
//! let mut jsonl = JsonlPeer::open(dir.path().join("demo.jsonl"))?;
//! let mut sqlite = SqlitePeer::open(dir.path().join("demo.sqlite"))?;
//! for record in &records {
//!     jsonl.append(record)?;
//!     sqlite.append(record)?;
//! }
//! assert_eq!(JsonlPeer::decode(jsonl.path())?, records);
//! assert_eq!(sqlite.replay("demo")?, records);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What it does not do
//!
//! It is not a store: the peers exist to be measured, keep no locks, recover nothing from a
//! damaged file and are never published (`publish = false`). It measures nothing itself;
//! the timing is criterion's, in `benches/`, and the verdicts are `cargo xtask bench`'s.
#![forbid(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use cuca_events::{Message, SessionEvent, SessionRecord};
use rusqlite::{params, Connection};

mod error;
pub mod llama;

pub use error::BenchError;

#[cfg(test)]
mod tests;

/// The payload sizes the performance targets are stated for: a streamed token block, a
/// sentence, a paragraph.
pub const SIZES: [usize; 3] = [32, 200, 1024];

/// Reasoning records per turn in [`turn_session`]: the seed's first demo turn streamed 72.
pub const REASONING_PER_TURN: usize = 72;

/// ASCII prose of exactly `len` bytes (no byte needs escaping in JSON, none is zero).
pub fn text(len: usize) -> String {
    let words = "the vault is in lisbon and the reply is noted ";
    words.chars().cycle().take(len).collect()
}

/// English prose for records whose content matters (sizes after compression): the prose
/// lines of this project's documentation, snapshotted in `data/prose.txt` (115 KB) so the
/// input does not move when the docs do. Markdown-flavoured technical English, as model
/// output often is.
pub const PROSE: &str = include_str!("../data/prose.txt");

/// `len` bytes of [`PROSE`] starting near byte `offset` (wrapping around), cut at character
/// boundaries and padded with spaces to exactly `len`.
///
/// Consecutive offsets `k * len` give consecutive, non-repeating passages until the corpus
/// wraps: over 115 KB, beyond the 32 KiB window of gzip, so a compressor finds no more
/// repetition across records than ordinary text has.
pub fn prose(offset: usize, len: usize) -> String {
    let mut out = String::with_capacity(len);
    let mut at = offset % PROSE.len();
    while out.len() < len {
        while !PROSE.is_char_boundary(at) {
            at = (at + 1) % PROSE.len();
        }
        let rest = &PROSE[at..];
        let want = len - out.len();
        let mut end = want.min(rest.len());
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        if end == 0 {
            // Not even one character fits: pad.
            out.extend(std::iter::repeat_n(' ', want));
            break;
        }
        out.push_str(&rest[..end]);
        at = (at + end) % PROSE.len();
    }
    out
}

/// [`turn_session`] with every text `len` bytes of [`prose`], each record's passage following
/// the previous one's.
pub fn prose_session(session_id: &str, n_records: usize, len: usize) -> Vec<SessionRecord> {
    let mut offset = 0;
    turn_session(session_id, n_records, len)
        .into_iter()
        .map(|mut record| {
            let text = match &mut record.event {
                SessionEvent::SystemPrompt { text }
                | SessionEvent::Reasoning { text }
                | SessionEvent::Output { text } => Some(text),
                SessionEvent::Message(message) => {
                    message.content.iter_mut().find_map(|block| match block {
                        cuca_events::MessageContentBlock::Text { text } => Some(text),
                        _ => None,
                    })
                }
                _ => None,
            };
            if let Some(text) = text {
                *text = prose(offset, len);
                offset += len;
            }
            record
        })
        .collect()
}

/// One `Reasoning` record of session `session_id` whose text is `len` bytes.
pub fn reasoning_record(session_id: &str, sequence: u64, len: usize) -> SessionRecord {
    SessionRecord {
        session_id: session_id.to_owned(),
        sequence,
        timestamp_ms: 1_700_000_000_000 + sequence,
        event: SessionEvent::Reasoning { text: text(len) },
    }
}

/// `n_records` records in the seed's turn shape (SystemPrompt, a user Message, 72
/// Reasoning, 2 Output, Latency, TokenUsage), every text `len` bytes; the last turn is cut
/// short and stays open, as a crashed recording leaves it.
pub fn turn_session(session_id: &str, n_records: usize, len: usize) -> Vec<SessionRecord> {
    let mut events = Vec::with_capacity(n_records);
    while events.len() < n_records {
        events.push(SessionEvent::SystemPrompt { text: text(len) });
        events.push(SessionEvent::Message(Message::user(text(len))));
        for _ in 0..REASONING_PER_TURN {
            events.push(SessionEvent::Reasoning { text: text(len) });
        }
        for _ in 0..2 {
            events.push(SessionEvent::Output { text: text(len) });
        }
        events.push(SessionEvent::Latency { duration_ms: 412 });
        events.push(SessionEvent::TokenUsage {
            prompt_tokens: 31,
            completion_tokens: 74,
        });
    }
    events.truncate(n_records);
    events
        .into_iter()
        .zip(0u64..)
        .map(|(event, sequence)| SessionRecord {
            session_id: session_id.to_owned(),
            sequence,
            timestamp_ms: 1_700_000_000_000 + sequence,
            event,
        })
        .collect()
}

/// The JSONL peer: one `serde_json` line per record, appended with one `write` to a file
/// opened with `append(true)` — what a session log written the obvious way does.
#[derive(Debug)]
pub struct JsonlPeer {
    path: PathBuf,
    file: File,
    /// Reused for every line, as `FileBackend` reuses its frame buffer.
    line: Vec<u8>,
}

impl JsonlPeer {
    /// Opens (creating) `path` for appending.
    pub fn open(path: impl Into<PathBuf>) -> Result<JsonlPeer, BenchError> {
        let path = path.into();
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|source| BenchError::Io {
                action: "open",
                path: path.clone(),
                source,
            })?;
        Ok(JsonlPeer {
            path,
            file,
            line: Vec::new(),
        })
    }

    /// The file this peer appends to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `record` as one line with one `write`.
    pub fn append(&mut self, record: &SessionRecord) -> Result<(), BenchError> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, record).map_err(|source| BenchError::Json {
            path: self.path.clone(),
            line: 0,
            source,
        })?;
        self.line.push(b'\n');
        self.file
            .write_all(&self.line)
            .map_err(|source| BenchError::Io {
                action: "write",
                path: self.path.clone(),
                source,
            })
    }

    /// Reads every line of `path` back into records: `BufReader::lines` and
    /// `serde_json::from_str`, the peer's replay.
    pub fn decode(path: &Path) -> Result<Vec<SessionRecord>, BenchError> {
        let io = |source| BenchError::Io {
            action: "read",
            path: path.to_owned(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let mut records = Vec::new();
        for (line, n) in BufReader::with_capacity(64 * 1024, file)
            .lines()
            .zip(1u64..)
        {
            let line = line.map_err(io)?;
            let record = serde_json::from_str(&line).map_err(|source| BenchError::Json {
                path: path.to_owned(),
                line: n,
                source,
            })?;
            records.push(record);
        }
        Ok(records)
    }
}

/// The SQLite peer, as agent frameworks keep sessions: WAL journal,
/// `synchronous=NORMAL`, one row per record holding the record as JSON, one `INSERT` (its
/// own transaction) per append. The table is the OpenAI Agents SDK's `SQLiteSession`
/// shape: an autoincrement id, the session id, the message JSON, a `created_at` default,
/// and an index on `(session_id, created_at)`.
#[derive(Debug)]
pub struct SqlitePeer {
    path: PathBuf,
    connection: Connection,
    /// Reused JSON buffer, as [`JsonlPeer`] reuses its line.
    json: Vec<u8>,
}

/// The peer's schema (see [`SqlitePeer`]).
const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS agent_messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        message_data TEXT NOT NULL,
        created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
    );
    CREATE INDEX IF NOT EXISTS idx_agent_messages_session_id
        ON agent_messages (session_id, created_at);
";

const INSERT: &str = "INSERT INTO agent_messages (session_id, message_data) VALUES (?1, ?2)";
const SELECT: &str = "SELECT message_data FROM agent_messages WHERE session_id = ?1 ORDER BY id";

impl SqlitePeer {
    /// Opens (creating) the database at `path` in WAL mode with `synchronous=NORMAL`.
    pub fn open(path: impl Into<PathBuf>) -> Result<SqlitePeer, BenchError> {
        let path = path.into();
        let sqlite = |source| BenchError::Sqlite {
            path: path.clone(),
            source,
        };
        let connection = Connection::open(&path).map_err(sqlite)?;
        // `journal_mode` answers with a row, so it is read as a query, not executed.
        let mode: String = connection
            .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
            .map_err(sqlite)?;
        debug_assert_eq!(mode, "wal");
        connection
            .execute_batch("PRAGMA synchronous=NORMAL;")
            .map_err(sqlite)?;
        connection.execute_batch(SCHEMA).map_err(sqlite)?;
        Ok(SqlitePeer {
            path,
            connection,
            json: Vec::new(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Inserts `record` as one row, in its own (autocommit) transaction.
    pub fn append(&mut self, record: &SessionRecord) -> Result<(), BenchError> {
        self.json.clear();
        serde_json::to_writer(&mut self.json, record).map_err(|source| BenchError::Json {
            path: self.path.clone(),
            line: 0,
            source,
        })?;
        // serde_json writes UTF-8; the lossy conversion never replaces anything here.
        let json = String::from_utf8_lossy(&self.json);
        let mut insert =
            self.connection
                .prepare_cached(INSERT)
                .map_err(|source| BenchError::Sqlite {
                    path: self.path.clone(),
                    source,
                })?;
        insert
            .execute(params![record.session_id, json])
            .map_err(|source| BenchError::Sqlite {
                path: self.path.clone(),
                source,
            })?;
        Ok(())
    }

    /// Every record of `session_id`, in insertion order.
    pub fn replay(&self, session_id: &str) -> Result<Vec<SessionRecord>, BenchError> {
        let sqlite = |source| BenchError::Sqlite {
            path: self.path.clone(),
            source,
        };
        let mut select = self.connection.prepare_cached(SELECT).map_err(sqlite)?;
        let mut rows = select.query(params![session_id]).map_err(sqlite)?;
        let mut records = Vec::new();
        let mut n = 0u64;
        while let Some(row) = rows.next().map_err(sqlite)? {
            n += 1;
            let json: String = row.get(0).map_err(sqlite)?;
            let record = serde_json::from_str(&json).map_err(|source| BenchError::Json {
                path: self.path.clone(),
                line: n,
                source,
            })?;
            records.push(record);
        }
        Ok(records)
    }

    /// Bytes on disk after a checkpoint folds the WAL into the database file.
    pub fn bytes_on_disk(&self) -> Result<u64, BenchError> {
        self.connection
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .map_err(|source| BenchError::Sqlite {
                path: self.path.clone(),
                source,
            })?;
        let len = |path: &Path| std::fs::metadata(path).map_or(0, |m| m.len());
        let mut wal = self.path.clone().into_os_string();
        wal.push("-wal");
        Ok(len(&self.path) + len(Path::new(&wal)))
    }
}

/// Where benches leave machine-readable results for `cargo xtask bench`:
/// `$CARGO_TARGET_DIR/cuca-bench`, or `target/cuca-bench` at the workspace root.
pub fn results_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        PathBuf::from,
    );
    target.join("cuca-bench")
}

/// Writes `value` as `results_dir()/<name>.json`.
pub fn write_result(name: &str, value: &serde_json::Value) -> Result<PathBuf, BenchError> {
    let dir = results_dir();
    let path = dir.join(format!("{name}.json"));
    let io = |source| BenchError::Io {
        action: "write",
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    std::fs::write(&path, value.to_string()).map_err(io)?;
    Ok(path)
}
