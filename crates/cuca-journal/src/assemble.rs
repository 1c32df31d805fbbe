//! Host assembly: folding a collected capture journal into `replay.json.gz`, one line at a time.
//!
//! The seed's rule is "the document is never built in memory. Each of its five arrays is
//! streamed into a segment file as the journal is walked, and the segments are copied through a
//! gzip encoder into the artifact, so peak memory is one journal line." The five arrays are the
//! three pools, the clip table and the input log. Two things are held beside the line: the
//! agent table, which assembly upserts by agent id and is therefore O(agents), and the last
//! seed line, which is O(one line).
//!
//! What this module does not do: it never repairs a journal (a gap in a pool or a dangling
//! reference is refused, not patched), never reads the record it writes back, and never touches
//! anything in the collected tree but the journal it consumed.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use flate2::write::GzEncoder;
use flate2::Compression;
use serde::{Deserialize, Serialize};

use crate::format::RECORD_FILE_NAME;
use crate::format::{
    AgentRow, AgentStatus, ContentId, End, Entry, Header, Input, JournalLine, MessageLine, Pool,
    PooledRequest, Seed, StopReason, StoredBlock, StoredMessage, TextLine, ToolsetLine,
    DEFAULT_JOURNAL_DIR, FORMAT_VERSION, JOURNAL_FILE_NAME,
};

/// The name of the post-run stage that runs [`assemble`] (the seed's `gg-session-record`).
pub const STAGE_NAME: &str = "cuca-session-record";

/// The longest journal line assembly reads, in bytes, not counting its `\n`.
///
/// A longer line is damage (`corrupt_journal`), not an allocation: a journal is input from a
/// container that may have been killed or tampered with, and one unterminated run of bytes must
/// not decide how much memory the host spends. The largest legitimate line is a message-pool
/// line: its tool payloads live in the text pool (at most 256 KiB each), but its visible text is
/// verbatim. 16 MiB is sixty-four whole tool payloads, or a 16-million-character prompt, with
/// JSON escaping included; a line near it costs about three times its length while parsed.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// The gzip level of the artifact when [`AssembleOptions`] names no other.
///
/// Level 1. Measured in `docs/performance.md`, level 6 writes a record about 28% smaller but
/// takes about seven times as long to assemble, and assembly is on the host's post-run path of
/// every run; a deployment that stores records for long can ask for more.
pub const DEFAULT_COMPRESSION_LEVEL: u32 = 1;

/// How many bytes each journal read and each segment write buffers.
const IO_BUFFER_BYTES: usize = 64 * 1024;

/// How assembly reads a journal and writes its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssembleOptions {
    /// The journal directory, relative to the collected tree (default `.cuca`).
    pub journal_dir: PathBuf,
    /// The longest line read, in bytes (default [`DEFAULT_MAX_LINE_BYTES`]); a longer line is
    /// damage.
    pub max_line_bytes: usize,
    /// The gzip level of the artifact, 0 to 9 (default [`DEFAULT_COMPRESSION_LEVEL`]); a value
    /// above 9 is read as 9.
    pub compression_level: u32,
}

impl Default for AssembleOptions {
    fn default() -> Self {
        AssembleOptions {
            journal_dir: PathBuf::from(DEFAULT_JOURNAL_DIR),
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            compression_level: DEFAULT_COMPRESSION_LEVEL,
        }
    }
}

/// How the session's capture ended, as the record states it under `outcome`.
///
/// Written as an object tagged by `kind`: `{"kind":"complete"}`,
/// `{"kind":"corrupt_journal","lastCompleteSeq":41,"line":97,"reason":"…"}`, and so on. The
/// journal's structure outranks its self-report: the recorder's stop reason stands only when
/// the walk found no damage and the terminating count agrees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum Outcome {
    /// The journal ended with a terminating line whose count matches the walk, and capture
    /// never stopped early.
    Complete,
    /// No terminating line: the session died mid-capture. Everything read is kept.
    SessionKilled,
    /// A torn or unparseable line, or a terminating count that disagrees with the walk. The
    /// record holds everything before the damage.
    CorruptJournal {
        /// The seq of the last entry kept, `None` when no entry was.
        last_complete_seq: Option<u64>,
        /// The 1-based journal line where the damage was found.
        line: u64,
        /// What was wrong there.
        reason: String,
    },
    /// The journal writer failed, as the recorder reported it (`write_failed`, or
    /// `queue_full` when the writer could not keep up).
    WriteFailed {
        /// The recorder's own word for the failure.
        stop_reason: StopReason,
    },
    /// The journal byte ceiling was crossed, as the recorder reported it.
    ByteCeiling,
}

impl Outcome {
    /// The snake_case word the record writes under `outcome.kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Complete => "complete",
            Outcome::SessionKilled => "session_killed",
            Outcome::CorruptJournal { .. } => "corrupt_journal",
            Outcome::WriteFailed { .. } => "write_failed",
            Outcome::ByteCeiling => "byte_ceiling",
        }
    }
}

/// What one assembly did: where the record went and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AssembleReport {
    /// The record written (`<run_dir>/replay.json.gz`).
    pub artifact: PathBuf,
    /// How capture ended.
    pub outcome: Outcome,
    /// The session id from the journal's header.
    pub session_id: String,
    /// Journal lines walked and kept, the header included.
    pub n_lines: u64,
    /// Entries in the record's input log.
    pub n_entries: u64,
    /// The seq of the last entry kept.
    pub last_seq: Option<u64>,
    /// Entries by kind (`model_io`, `clock`, …).
    pub entries_by_kind: BTreeMap<String, u64>,
    /// Message-pool entries.
    pub n_messages: u64,
    /// Toolset-pool entries.
    pub n_toolsets: u64,
    /// Text-pool entries.
    pub n_texts: u64,
    /// Clip-table rows.
    pub n_clips: u64,
    /// Agent rows after upserting.
    pub n_agents: usize,
    /// Whether the journal had its terminating line.
    pub terminated: bool,
    /// The journal's size in bytes.
    pub journal_bytes: u64,
    /// The record's size in bytes (gzipped).
    pub artifact_bytes: u64,
    /// Whether the journal was removed from the collected tree afterwards. `false` only when
    /// removing it failed (logged); the record is written either way.
    pub journal_removed: bool,
}

/// Why a journal was refused or could not be assembled. Nothing is written when this is
/// returned, no scratch file is left behind, and the journal stays where it was.
///
/// Defined here rather than in the crate's `error.rs` because that file belongs to the capture
/// side; the two may be folded together.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AssembleError {
    /// An operating-system call failed on the journal, the run directory or a scratch file.
    #[error("{operation} {path}: {source}")]
    Io {
        /// What was being done (`"read"`, `"create scratch directory in"`, …).
        operation: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The journal's first line is not a complete, parseable `header` line (an empty journal
    /// included), so nothing says which format it is in.
    #[error("journal {path} has no header: {reason}")]
    NoHeader {
        /// The journal.
        path: PathBuf,
        /// What the first line was instead.
        reason: String,
    },
    /// The header states a format this build does not write, or none.
    #[error("journal {path} is in format {found}; this build reads format 1 only")]
    UnsupportedFormat {
        /// The journal.
        path: PathBuf,
        /// The `formatVersion` as written (JSON), or `none` when the header has none.
        found: String,
    },
    /// A pool line's index is not the next one of its pool: a skipped or repeated index would
    /// shift every later reference onto the wrong body.
    #[error(
        "journal {path} line {line}: {pool} pool line has index {found} where {expected} was next"
    )]
    PoolGap {
        /// The journal.
        path: PathBuf,
        /// The 1-based line.
        line: u64,
        /// `message`, `toolset` or `text`.
        pool: &'static str,
        /// The index the pool's next entry must have.
        expected: u64,
        /// The index the line states.
        found: u64,
    },
    /// A line references a pool index the journal never wrote.
    #[error("journal {path} line {line}: {field} references {pool} {index} but that pool holds {len} entries")]
    DanglingReference {
        /// The journal.
        path: PathBuf,
        /// The 1-based line.
        line: u64,
        /// The referencing field (`request.messages`, `stdout`, …).
        field: &'static str,
        /// The pool referenced.
        pool: &'static str,
        /// The index referenced.
        index: u64,
        /// How many entries the pool held at that line.
        len: u64,
    },
}

impl AssembleError {
    fn io(operation: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        AssembleError::Io {
            operation,
            path: path.into(),
            source,
        }
    }
}

/// Folds `<collected_tree>/.cuca/replay.ndjson` into `<run_dir>/replay.json.gz`.
///
/// Returns `Ok(None)` when the tree holds no journal (an ordinary absence: not every run
/// writes one), the report when a record was written, and an [`AssembleError`] when the
/// journal was refused or the host failed. On success the journal is removed from the
/// collected tree (the tree is copied into the run's `implementation/` and archive); after an
/// error it is left where it is, as the only account of the session.
///
/// The record goes to the root of `run_dir` — never into `run_dir/implementation/`, which is a
/// verbatim copy of what the model produced. `run_dir` is created when missing; an existing
/// record there is replaced atomically (written under a temporary name, then renamed).
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let tree = tempfile::tempdir()?;
/// let run_dir = tempfile::tempdir()?;
/// // No journal in the tree: an ordinary absence, and nothing is written.
/// let report = cuca_journal::assemble::assemble(tree.path(), run_dir.path())?;
/// assert!(report.is_none());
/// assert!(!run_dir.path().join("replay.json.gz").exists());
/// # Ok(()) }
/// ```
pub fn assemble(
    collected_tree: &Path,
    run_dir: &Path,
) -> Result<Option<AssembleReport>, AssembleError> {
    assemble_with(collected_tree, run_dir, &AssembleOptions::default())
}

/// [`assemble`] with explicit options (journal directory, line ceiling, gzip level).
pub fn assemble_with(
    collected_tree: &Path,
    run_dir: &Path,
    options: &AssembleOptions,
) -> Result<Option<AssembleReport>, AssembleError> {
    let journal_dir = collected_tree.join(&options.journal_dir);
    let journal = journal_dir.join(JOURNAL_FILE_NAME);
    let file = match File::open(&journal) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(AssembleError::io("open", &journal, err)),
    };
    let mut report = assemble_file(file, &journal, run_dir, options)?;
    report.journal_removed = match std::fs::remove_file(&journal) {
        Ok(()) => {
            // The directory held only the journal; leaving it empty would put a stray `.cuca/`
            // into implementation/. A directory that still holds something is left alone.
            let _ = std::fs::remove_dir(&journal_dir);
            true
        }
        Err(err) => {
            tracing::warn!(journal = %journal.display(), error = %err, "record written but the journal could not be removed from the collected tree");
            false
        }
    };
    Ok(Some(report))
}

/// Creates `run_dir` if it is missing; whether it did. A caller that fails afterwards removes
/// what it created ([`remove_if_created`]), so a failed assembly leaves no empty run directory.
pub(crate) fn create_run_dir(run_dir: &Path) -> Result<bool, AssembleError> {
    let created = matches!(
        std::fs::symlink_metadata(run_dir),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound
    );
    std::fs::create_dir_all(run_dir)
        .map_err(|err| AssembleError::io("create run directory", run_dir, err))?;
    Ok(created)
}

/// Removes `run_dir` if this assembly created it and it is empty again.
pub(crate) fn remove_if_created(run_dir: &Path, created: bool) {
    if created {
        // `remove_dir` removes only an empty directory: anything written there stays.
        let _ = std::fs::remove_dir(run_dir);
    }
}

/// Assembles an open journal into `run_dir`; the caller decides what happens to the journal.
/// `journal` names the journal in errors and in the report.
pub(crate) fn assemble_file(
    file: File,
    journal: &Path,
    run_dir: &Path,
    options: &AssembleOptions,
) -> Result<AssembleReport, AssembleError> {
    let journal_bytes = file
        .metadata()
        .map_err(|err| AssembleError::io("stat", journal, err))?
        .len();
    let created = create_run_dir(run_dir)?;
    let result = assemble_into(file, journal, journal_bytes, run_dir, options);
    if result.is_err() {
        // The scratch directory is gone by now (it dropped inside `assemble_into`).
        remove_if_created(run_dir, created);
    }
    result
}

fn assemble_into(
    file: File,
    journal: &Path,
    journal_bytes: u64,
    run_dir: &Path,
    options: &AssembleOptions,
) -> Result<AssembleReport, AssembleError> {
    // The scratch directory is removed when this value drops, on every path out of here,
    // refusals included.
    let scratch = tempfile::Builder::new()
        .prefix(".cuca-assemble-")
        .tempdir_in(run_dir)
        .map_err(|err| AssembleError::io("create scratch directory in", run_dir, err))?;
    let mut segments = Segments::create(scratch.path())?;
    let mut reader = BufReader::with_capacity(IO_BUFFER_BYTES, file);
    let walk = Walk::run(&mut reader, journal, &mut segments, options.max_line_bytes)?;
    let outcome = walk.outcome();

    let artifact = run_dir.join(RECORD_FILE_NAME);
    let artifact_bytes =
        write_artifact(&walk, &outcome, &mut segments, run_dir, &artifact, options)?;
    drop(segments);
    scratch
        .close()
        .map_err(|err| AssembleError::io("remove scratch directory in", run_dir, err))?;

    Ok(AssembleReport {
        artifact,
        outcome,
        session_id: walk.header.session_id.clone(),
        n_lines: walk.n_lines,
        n_entries: walk.n_entries,
        last_seq: walk.last_seq,
        entries_by_kind: walk
            .entries_by_kind
            .iter()
            .map(|(kind, n)| ((*kind).to_owned(), *n))
            .collect(),
        n_messages: walk.n_messages,
        n_toolsets: walk.n_toolsets,
        n_texts: walk.n_texts,
        n_clips: walk.n_clips,
        n_agents: walk.agents.len(),
        terminated: walk.end.is_some(),
        journal_bytes,
        artifact_bytes,
        journal_removed: false,
    })
}

/// Assembles a journal file at any path into `run_dir`, leaving the journal in place.
///
/// The building block of [`salvage`](crate::salvage()); [`assemble`] is this plus finding the journal in
/// a collected tree and removing it afterwards.
pub fn assemble_journal(
    journal: &Path,
    run_dir: &Path,
    options: &AssembleOptions,
) -> Result<AssembleReport, AssembleError> {
    let file = File::open(journal).map_err(|err| AssembleError::io("open", journal, err))?;
    assemble_file(file, journal, run_dir, options)
}

/// The five arrays of the record, each streamed into its own scratch file.
struct Segments {
    messages: Segment,
    toolsets: Segment,
    texts: Segment,
    clips: Segment,
    entries: Segment,
}

impl Segments {
    fn create(dir: &Path) -> Result<Self, AssembleError> {
        Ok(Segments {
            messages: Segment::create(dir.join("messages.json"))?,
            toolsets: Segment::create(dir.join("toolsets.json"))?,
            texts: Segment::create(dir.join("texts.json"))?,
            clips: Segment::create(dir.join("clips.json"))?,
            entries: Segment::create(dir.join("entries.json"))?,
        })
    }
}

/// One scratch file holding the comma-separated elements of one array, without its brackets.
struct Segment {
    path: PathBuf,
    out: BufWriter<File>,
    n_items: u64,
}

impl Segment {
    fn create(path: PathBuf) -> Result<Self, AssembleError> {
        let file = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|err| AssembleError::io("create segment", &path, err))?;
        Ok(Segment {
            path,
            out: BufWriter::with_capacity(IO_BUFFER_BYTES, file),
            n_items: 0,
        })
    }

    fn push(&mut self, item: &impl Serialize) -> Result<(), AssembleError> {
        let result = (|| {
            if self.n_items > 0 {
                self.out.write_all(b",")?;
            }
            serde_json::to_writer(&mut self.out, item).map_err(std::io::Error::from)
        })();
        result.map_err(|err| AssembleError::io("write segment", &self.path, err))?;
        self.n_items += 1;
        Ok(())
    }

    /// Appends an entry as `{"seq":…,"agent":…,"kind":…,…}`.
    ///
    /// Written by splicing the input's own object after the two head fields: `Entry`'s derived
    /// `Serialize` goes through serde's flatten path, which is several times slower, and the
    /// bytes are the same.
    fn push_entry(&mut self, entry: &Entry) -> Result<(), AssembleError> {
        let result = (|| {
            let input = serde_json::to_vec(&entry.input)?;
            // `Input` is internally tagged, so it is always an object opening with `{"kind"`.
            let fields = input.get(1..).unwrap_or_default();
            if self.n_items > 0 {
                self.out.write_all(b",")?;
            }
            write!(self.out, "{{\"seq\":{},\"agent\":", entry.seq)?;
            serde_json::to_writer(&mut self.out, &entry.agent)?;
            self.out.write_all(b",")?;
            self.out.write_all(fields)?;
            Ok::<(), std::io::Error>(())
        })();
        result.map_err(|err| AssembleError::io("write segment", &self.path, err))?;
        self.n_items += 1;
        Ok(())
    }

    /// Copies the segment's bytes into `out`, from the start.
    fn copy_into(&mut self, out: &mut impl Write) -> Result<(), AssembleError> {
        let path = &self.path;
        self.out
            .flush()
            .map_err(|err| AssembleError::io("flush segment", path, err))?;
        let file = self.out.get_mut();
        file.seek(SeekFrom::Start(0))
            .map_err(|err| AssembleError::io("rewind segment", path, err))?;
        let mut reader = BufReader::with_capacity(IO_BUFFER_BYTES, &*file);
        std::io::copy(&mut reader, out)
            .map_err(|err| AssembleError::io("copy segment", path, err))?;
        Ok(())
    }
}

/// A pool entry as the record holds it: its position in the array is its index.
#[derive(Serialize)]
struct PooledMessage<'a> {
    id: &'a ContentId,
    body: &'a StoredMessage,
}

/// A toolset-pool entry as the record holds it.
#[derive(Serialize)]
struct PooledToolset<'a> {
    id: &'a ContentId,
    tools: &'a [cuca_events::ToolDefinition],
}

/// A text-pool entry as the record holds it.
#[derive(Serialize)]
struct PooledText<'a> {
    id: &'a ContentId,
    text: &'a str,
}

/// What one bounded line read found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineRead {
    /// A whole line (without its `\n`) is in the buffer.
    Line,
    /// The end of the journal, on a line boundary.
    Eof,
    /// Bytes after the last `\n`: a torn last line.
    Torn,
    /// The line is longer than the ceiling; the buffer holds at most the ceiling.
    TooLong,
}

/// Reads one `\n`-terminated line into `buf`, never holding more than `max` bytes of it.
fn read_bounded_line(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<LineRead> {
    buf.clear();
    loop {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        if available.is_empty() {
            return Ok(if buf.is_empty() {
                LineRead::Eof
            } else {
                LineRead::Torn
            });
        }
        let (take, done) = match available.iter().position(|&b| b == b'\n') {
            Some(at) => (at, true),
            None => (available.len(), false),
        };
        if buf.len() + take > max {
            return Ok(LineRead::TooLong);
        }
        buf.extend_from_slice(&available[..take]);
        reader.consume(if done { take + 1 } else { take });
        if done {
            return Ok(LineRead::Line);
        }
    }
}

/// Just the tag of a journal line.
#[derive(Deserialize)]
struct LineTag<'a> {
    #[serde(borrow)]
    line: std::borrow::Cow<'a, str>,
}

/// Parses one journal line into the format's [`JournalLine`].
///
/// Equivalent to `serde_json::from_slice::<JournalLine>` (a unit test holds the two together)
/// but reads the tag first and then the variant's own type straight from the bytes: serde's
/// internally tagged enums buffer every line into a generic tree before typing it, which costs
/// a second copy of every string of every line.
pub(crate) fn parse_line(bytes: &[u8]) -> Result<JournalLine, serde_json::Error> {
    let tag: LineTag<'_> = serde_json::from_slice(bytes)?;
    Ok(match tag.line.as_ref() {
        "header" => JournalLine::Header(serde_json::from_slice(bytes)?),
        "seed" => JournalLine::Seed(serde_json::from_slice(bytes)?),
        "agent" => JournalLine::Agent(serde_json::from_slice(bytes)?),
        "message" => JournalLine::Message(serde_json::from_slice(bytes)?),
        "toolset" => JournalLine::Toolset(serde_json::from_slice(bytes)?),
        "text" => JournalLine::Text(serde_json::from_slice(bytes)?),
        "clip" => JournalLine::Clip(serde_json::from_slice(bytes)?),
        "entry" => JournalLine::Entry(parse_entry(bytes)?),
        "end" => JournalLine::End(serde_json::from_slice(bytes)?),
        // Fall back to the derived parser for its error message, which names the known tags.
        _ => serde_json::from_slice(bytes)?,
    })
}

/// The fields of an entry line around its input.
#[derive(Deserialize)]
struct EntryHead<'a> {
    seq: u64,
    agent: String,
    #[serde(borrow)]
    kind: std::borrow::Cow<'a, str>,
}

/// Parses an entry line into the format's [`Entry`] without serde's flatten machinery.
///
/// `Entry` flattens its internally tagged `Input`, and serde parses that by buffering every
/// field of the line into a generic tree first; on a prompt frame of forty items that is most
/// of assembly's time. Reading the head, then the kind's own struct straight from the bytes,
/// accepts exactly the same lines (unknown fields are ignored either way, and an unknown kind
/// falls back to the derived parser for its error).
fn parse_entry(bytes: &[u8]) -> Result<Entry, serde_json::Error> {
    let head: EntryHead<'_> = serde_json::from_slice(bytes)?;
    let input = match head.kind.as_ref() {
        "model_io" => Input::ModelIo(serde_json::from_slice(bytes)?),
        "model_error" => Input::ModelError(serde_json::from_slice(bytes)?),
        "tool_result" => Input::ToolResult(serde_json::from_slice(bytes)?),
        "prompt_frame" => Input::PromptFrame(serde_json::from_slice(bytes)?),
        "shell" => Input::Shell(serde_json::from_slice(bytes)?),
        "git" => Input::Git(serde_json::from_slice(bytes)?),
        "cancel_probe" => Input::CancelProbe(serde_json::from_slice(bytes)?),
        "clock" => Input::Clock(serde_json::from_slice(bytes)?),
        _ => return serde_json::from_slice(bytes),
    };
    Ok(Entry {
        seq: head.seq,
        agent: head.agent,
        input,
    })
}

/// The first line's tag and format version, read before anything else is trusted.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HeaderProbe {
    line: Option<String>,
    format_version: Option<serde_json::Value>,
}

/// Damage found by the walk: bounded, reported, and the walk stops there.
struct Damage {
    line: u64,
    reason: String,
}

/// A refusal-or-damage verdict on one line.
enum Step {
    Continue,
    Damaged(String),
}

/// The state of one walk over a journal.
struct Walk {
    journal: PathBuf,
    header: Header,
    seed: Option<Seed>,
    agents: Vec<AgentRow>,
    agent_index: HashMap<String, usize>,
    n_lines: u64,
    n_messages: u64,
    n_toolsets: u64,
    n_texts: u64,
    n_clips: u64,
    n_entries: u64,
    last_seq: Option<u64>,
    entries_by_kind: BTreeMap<&'static str, u64>,
    end: Option<(u64, End)>,
    damage: Option<Damage>,
}

impl Walk {
    /// Reads the header, then every line until the end, the first damage, or a refusal.
    fn run(
        reader: &mut impl BufRead,
        journal: &Path,
        segments: &mut Segments,
        max_line_bytes: usize,
    ) -> Result<Self, AssembleError> {
        let mut buf = Vec::new();
        let header = read_header(reader, journal, &mut buf, max_line_bytes)?;
        let mut walk = Walk {
            journal: journal.to_owned(),
            header,
            seed: None,
            agents: Vec::new(),
            agent_index: HashMap::new(),
            n_lines: 1,
            n_messages: 0,
            n_toolsets: 0,
            n_texts: 0,
            n_clips: 0,
            n_entries: 0,
            last_seq: None,
            entries_by_kind: BTreeMap::new(),
            end: None,
            damage: None,
        };
        loop {
            let line_no = walk.n_lines + 1;
            let read = read_bounded_line(reader, &mut buf, max_line_bytes)
                .map_err(|err| AssembleError::io("read", journal, err))?;
            let verdict = match read {
                LineRead::Eof => break,
                LineRead::Torn => Step::Damaged("torn line: no terminating newline".to_owned()),
                LineRead::TooLong => Step::Damaged(format!(
                    "line longer than the {max_line_bytes}-byte maximum"
                )),
                LineRead::Line if walk.end.is_some() => {
                    Step::Damaged("a line after the terminating line".to_owned())
                }
                LineRead::Line => match parse_line(&buf) {
                    Ok(line) => walk.apply(line_no, line, segments)?,
                    Err(err) => Step::Damaged(format!("unparseable line: {err}")),
                },
            };
            match verdict {
                Step::Continue => walk.n_lines = line_no,
                Step::Damaged(reason) => {
                    walk.damage = Some(Damage {
                        line: line_no,
                        reason,
                    });
                    break;
                }
            }
        }
        Ok(walk)
    }

    /// Folds one parsed line into the segments and the state.
    fn apply(
        &mut self,
        line_no: u64,
        line: JournalLine,
        segments: &mut Segments,
    ) -> Result<Step, AssembleError> {
        match line {
            JournalLine::Header(_) => return Ok(Step::Damaged("a second header".to_owned())),
            JournalLine::Seed(seed) => self.seed = Some(seed),
            JournalLine::Agent(row) => self.upsert_agent(row),
            JournalLine::Message(MessageLine { index, id, body }) => {
                self.check_index(line_no, "message", index, self.n_messages)?;
                for block in &body.content {
                    let (field, text) = match block {
                        StoredBlock::ToolCall { arguments, .. } => {
                            ("body.content.arguments", *arguments)
                        }
                        StoredBlock::ToolResult { content, .. } => {
                            ("body.content.content", *content)
                        }
                        _ => continue,
                    };
                    self.check_ref(line_no, field, "text", text, self.n_texts)?;
                }
                segments.messages.push(&PooledMessage {
                    id: &id,
                    body: &body,
                })?;
                self.n_messages += 1;
            }
            JournalLine::Toolset(ToolsetLine { index, id, tools }) => {
                self.check_index(line_no, "toolset", index, self.n_toolsets)?;
                segments.toolsets.push(&PooledToolset {
                    id: &id,
                    tools: &tools,
                })?;
                self.n_toolsets += 1;
            }
            JournalLine::Text(TextLine { index, id, text }) => {
                self.check_index(line_no, "text", index, self.n_texts)?;
                segments.texts.push(&PooledText {
                    id: &id,
                    text: &text,
                })?;
                self.n_texts += 1;
            }
            JournalLine::Clip(row) => {
                let (pool, len) = match row.pool {
                    Pool::Message => ("message", self.n_messages),
                    Pool::Toolset => ("toolset", self.n_toolsets),
                    Pool::Text => ("text", self.n_texts),
                };
                self.check_ref(line_no, "index", pool, row.index, len)?;
                segments.clips.push(&row)?;
                self.n_clips += 1;
            }
            JournalLine::Entry(entry) => {
                let expected = self.last_seq.map_or(0, |seq| seq + 1);
                if entry.seq != expected {
                    return Ok(Step::Damaged(format!(
                        "entry seq {} where {expected} was next",
                        entry.seq
                    )));
                }
                self.check_entry_refs(line_no, &entry)?;
                segments.entries.push_entry(&entry)?;
                self.n_entries += 1;
                self.last_seq = Some(entry.seq);
                *self.entries_by_kind.entry(entry.input.kind()).or_default() += 1;
            }
            JournalLine::End(end) => self.end = Some((line_no, end)),
        }
        Ok(Step::Continue)
    }

    /// Upserts an agent row by id: a later row replaces an earlier one, except that an opening
    /// row never replaces a terminal one, and the row keeps its first position.
    fn upsert_agent(&mut self, row: AgentRow) {
        match self.agent_index.get(&row.id) {
            Some(&at) => {
                let Some(slot) = self.agents.get_mut(at) else {
                    return;
                };
                let terminal_kept =
                    slot.status != AgentStatus::Started && row.status == AgentStatus::Started;
                if !terminal_kept {
                    *slot = row;
                }
            }
            None => {
                self.agent_index.insert(row.id.clone(), self.agents.len());
                self.agents.push(row);
            }
        }
    }

    fn check_index(
        &self,
        line: u64,
        pool: &'static str,
        found: u64,
        expected: u64,
    ) -> Result<(), AssembleError> {
        if found == expected {
            return Ok(());
        }
        Err(AssembleError::PoolGap {
            path: self.journal.clone(),
            line,
            pool,
            expected,
            found,
        })
    }

    fn check_ref(
        &self,
        line: u64,
        field: &'static str,
        pool: &'static str,
        index: u64,
        len: u64,
    ) -> Result<(), AssembleError> {
        if index < len {
            return Ok(());
        }
        Err(AssembleError::DanglingReference {
            path: self.journal.clone(),
            line,
            field,
            pool,
            index,
            len,
        })
    }

    fn check_request(&self, line: u64, request: &PooledRequest) -> Result<(), AssembleError> {
        for &message in &request.messages {
            self.check_ref(
                line,
                "request.messages",
                "message",
                message,
                self.n_messages,
            )?;
        }
        if let Some(toolset) = request.toolset {
            self.check_ref(line, "request.toolset", "toolset", toolset, self.n_toolsets)?;
        }
        Ok(())
    }

    fn check_entry_refs(&self, line: u64, entry: &Entry) -> Result<(), AssembleError> {
        let texts = self.n_texts;
        match &entry.input {
            Input::ModelIo(io) => {
                self.check_request(line, &io.request)?;
                self.check_ref(
                    line,
                    "response.message",
                    "message",
                    io.response.message,
                    self.n_messages,
                )
            }
            Input::ModelError(error) => self.check_request(line, &error.request),
            Input::ToolResult(result) => {
                self.check_ref(line, "arguments", "text", result.arguments, texts)?;
                self.check_ref(line, "output", "text", result.output, texts)
            }
            Input::PromptFrame(frame) => frame.items.iter().try_for_each(|item| {
                self.check_ref(
                    line,
                    "items.message",
                    "message",
                    item.message,
                    self.n_messages,
                )
            }),
            Input::Shell(shell) => {
                self.check_ref(line, "stdout", "text", shell.stdout, texts)?;
                self.check_ref(line, "stderr", "text", shell.stderr, texts)
            }
            Input::Git(git) => {
                self.check_ref(line, "stdout", "text", git.stdout, texts)?;
                self.check_ref(line, "stderr", "text", git.stderr, texts)
            }
            Input::CancelProbe(_) | Input::Clock(_) => Ok(()),
        }
    }

    /// The outcome of the walk: the structure first, the recorder's own word last.
    fn outcome(&self) -> Outcome {
        if let Some(damage) = &self.damage {
            return Outcome::CorruptJournal {
                last_complete_seq: self.last_seq,
                line: damage.line,
                reason: damage.reason.clone(),
            };
        }
        let Some((end_line, end)) = &self.end else {
            return Outcome::SessionKilled;
        };
        if end.entries != self.n_entries {
            return Outcome::CorruptJournal {
                last_complete_seq: self.last_seq,
                line: *end_line,
                reason: format!(
                    "the terminating line counts {} entries but the journal holds {}",
                    end.entries, self.n_entries
                ),
            };
        }
        match end.stop_reason {
            None => Outcome::Complete,
            Some(StopReason::ByteCeiling) => Outcome::ByteCeiling,
            Some(stop_reason @ (StopReason::WriteFailed | StopReason::QueueFull)) => {
                Outcome::WriteFailed { stop_reason }
            }
        }
    }
}

/// Reads and checks the first line; every failure here is a refusal.
fn read_header(
    reader: &mut impl BufRead,
    journal: &Path,
    buf: &mut Vec<u8>,
    max_line_bytes: usize,
) -> Result<Header, AssembleError> {
    let no_header = |reason: &str| AssembleError::NoHeader {
        path: journal.to_owned(),
        reason: reason.to_owned(),
    };
    match read_bounded_line(reader, buf, max_line_bytes)
        .map_err(|err| AssembleError::io("read", journal, err))?
    {
        LineRead::Line => {}
        LineRead::Eof => return Err(no_header("the journal is empty")),
        LineRead::Torn => return Err(no_header("the first line is torn")),
        LineRead::TooLong => return Err(no_header("the first line is over the line maximum")),
    }
    let probe: HeaderProbe = serde_json::from_slice(buf)
        .map_err(|err| no_header(&format!("the first line does not parse: {err}")))?;
    if probe.line.as_deref() != Some("header") {
        return Err(no_header(&format!(
            "the first line is a {:?} line",
            probe.line.as_deref().unwrap_or("untagged")
        )));
    }
    let supported = probe
        .format_version
        .as_ref()
        .and_then(serde_json::Value::as_u64)
        == Some(u64::from(FORMAT_VERSION));
    if !supported {
        return Err(AssembleError::UnsupportedFormat {
            path: journal.to_owned(),
            found: probe
                .format_version
                .map_or_else(|| "none".to_owned(), |v| v.to_string()),
        });
    }
    serde_json::from_slice(buf)
        .map_err(|err| no_header(&format!("the header line does not parse: {err}")))
}

/// Writes the record: the head, then each segment between its brackets, through one gzip
/// encoder into a temporary file that is renamed into place. Returns the record's size.
fn write_artifact(
    walk: &Walk,
    outcome: &Outcome,
    segments: &mut Segments,
    run_dir: &Path,
    artifact: &Path,
    options: &AssembleOptions,
) -> Result<u64, AssembleError> {
    let temp = tempfile::Builder::new()
        .prefix(".replay.json.gz.")
        .tempfile_in(run_dir)
        .map_err(|err| AssembleError::io("create temporary record in", run_dir, err))?;
    let (file, temp_path) = temp.into_parts();
    let level = Compression::new(options.compression_level.min(9));
    let mut gz = GzEncoder::new(BufWriter::with_capacity(IO_BUFFER_BYTES, file), level);
    let head_err = |err: std::io::Error| AssembleError::io("write", temp_path.to_path_buf(), err);

    write_head(&mut gz, walk, outcome).map_err(head_err)?;
    gz.write_all(b",\"pools\":{\"messages\":[")
        .map_err(head_err)?;
    segments.messages.copy_into(&mut gz)?;
    gz.write_all(b"],\"toolsets\":[").map_err(head_err)?;
    segments.toolsets.copy_into(&mut gz)?;
    gz.write_all(b"],\"texts\":[").map_err(head_err)?;
    segments.texts.copy_into(&mut gz)?;
    gz.write_all(b"]},\"clips\":[").map_err(head_err)?;
    segments.clips.copy_into(&mut gz)?;
    gz.write_all(b"],\"entries\":[").map_err(head_err)?;
    segments.entries.copy_into(&mut gz)?;
    gz.write_all(b"]}").map_err(head_err)?;

    let file = gz
        .finish()
        .and_then(|buffered| buffered.into_inner().map_err(|err| err.into_error()))
        .map_err(head_err)?;
    // The rename below is what makes the record appear whole; syncing first keeps a crash
    // between the two from publishing a name that points at unwritten blocks.
    file.sync_all().map_err(head_err)?;
    let artifact_bytes = file
        .metadata()
        .map_err(|err| AssembleError::io("stat", temp_path.to_path_buf(), err))?
        .len();
    drop(file);
    temp_path
        .persist(artifact)
        .map_err(|err| AssembleError::io("rename the record into", artifact, err.error))?;
    Ok(artifact_bytes)
}

/// The record's scalar fields and agent table, up to (not including) the pools.
fn write_head(out: &mut impl Write, walk: &Walk, outcome: &Outcome) -> std::io::Result<()> {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Head<'a> {
        format_version: u32,
        session_id: &'a str,
        routing_key: Option<&'a str>,
        recorder: &'a crate::format::RecorderBuild,
        capabilities: &'a serde_json::Value,
        outcome: &'a Outcome,
        seed: Option<&'a Seed>,
        agents: &'a [AgentRow],
    }
    let head = Head {
        format_version: FORMAT_VERSION,
        session_id: &walk.header.session_id,
        routing_key: walk.header.routing_key.as_deref(),
        recorder: &walk.header.recorder,
        capabilities: &walk.header.capabilities,
        outcome,
        seed: walk.seed.as_ref(),
        agents: &walk.agents,
    };
    let mut bytes = serde_json::to_vec(&head).map_err(std::io::Error::from)?;
    // `Head` serializes as one object; drop its closing brace so the pools follow inside it.
    bytes.pop();
    out.write_all(&bytes)
}

/// Reads a journal's bytes through the same bounded line reader assembly uses, for tests.
#[cfg(test)]
fn lines_of(bytes: &[u8], max: usize) -> Vec<(LineRead, Vec<u8>)> {
    let mut reader = std::io::BufReader::with_capacity(7, bytes);
    let mut out = Vec::new();
    let mut buf = Vec::new();
    loop {
        let Ok(read) = read_bounded_line(&mut reader, &mut buf, max) else {
            return out;
        };
        out.push((read, buf.clone()));
        if read != LineRead::Line {
            return out;
        }
    }
}

#[cfg(test)]
mod tests;
