//! Reading a `.cslog` file back: the scan report, the recovery rule, and the replay that
//! applies the same rule while it hands each record to a visitor.
//!
//! One [`Scanner`] does both. It finds frames, decodes them and judges damage as it reads;
//! what happens to a good record is its [`Take`]: a scan collects every record into a
//! [`ScanReport`], a replay decodes each one where it lies in the read chunk into a
//! [`ReplayedRecord`] that borrows its session id from the chunk, and visits it.

use std::convert::Infallible;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

use cuca_events::{PluginError, ReadAfter, ReadMark, ReplayedRecord, SessionRecord};
use serde::Deserialize;

use crate::codec::{
    decode_cut_frame, HEADER_LEN, MAGIC, MAX_FRAME_LEN, SEAL_MARK, VERSION, VERSION_1,
};
use crate::error::FrameError;
use crate::mark::{FileCheck, FRAME_TAIL};

mod skim;
mod summary;

pub use skim::SkimmedRecord;
pub use summary::ScanSummary;
pub(crate) use summary::{scan_each, skim_each};

/// What a scan concluded about a file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Every byte is a header or a good frame.
    Clean,
    /// Damage was found where nothing recorded was lost (a torn tail, a sealed torn frame,
    /// skipped frames whose neighbours continue the sequence); the records are the whole
    /// session.
    Recovered,
    /// Damage that may have lost a record, a record a v2 writer could not have written, or a
    /// header this build cannot read: a load refuses.
    Refused {
        /// Where the damage starts.
        offset: u64,
        /// What was found.
        reason: String,
    },
}

/// A run of adjacent frames the scan skipped (no good record between them): one entry however
/// many frames or bytes it spans, so a report costs memory by runs, not by damaged bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedFrame {
    /// Byte offset of the run's first byte in the file.
    pub offset: u64,
    /// Bytes from the first frame's first byte to the last frame's last byte (the
    /// terminators inside the run counted, the last one not): a single frame's length.
    pub len: u64,
    /// How many frames the run holds (a run of `n` zero bytes is `n` empty frames).
    pub frames: u64,
    /// How many of them are sealed torn frames (ending in [`crate::SEAL_MARK`]): appends that
    /// never completed.
    pub sealed: u64,
    /// Why the run's first frame did not decode.
    pub reason: FrameError,
}

/// Something about the good records that a writer of this format never does: a record of
/// another session, or a sequence that does not increase.
///
/// In a v2 file the first one refuses the load; a v1 writer could leave them (it stored
/// sequences as given, and two processes could interleave), so in a v1 file they are reported
/// and the load goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Byte offset of the record's frame.
    pub offset: u64,
    /// The record's sequence.
    pub sequence: u64,
    /// What is wrong with it.
    pub kind: FindingKind,
}

/// What a [`Finding`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FindingKind {
    /// The record carries another session id than the file's session (a renamed or copied
    /// file, or two sessions' records in one file).
    ForeignSession {
        /// The id in the record.
        found: String,
        /// The session the file is read as (its name, or its first record's id).
        expected: String,
    },
    /// The record repeats the sequence of the record before it.
    RepeatedSequence,
    /// The record's sequence is lower than the one before it.
    BackwardSequence {
        /// The sequence of the record before it.
        previous: u64,
    },
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (offset, sequence) = (self.offset, self.sequence);
        match &self.kind {
            FindingKind::ForeignSession { found, expected } => write!(
                f,
                "record at byte {offset} (sequence {sequence}) belongs to session {found:?}, not {expected:?}: the file was renamed or copied, or holds two sessions"
            ),
            FindingKind::RepeatedSequence => write!(
                f,
                "record at byte {offset} repeats sequence {sequence}: two writers numbered records alike"
            ),
            FindingKind::BackwardSequence { previous } => write!(
                f,
                "record at byte {offset} goes back from sequence {previous} to {sequence}"
            ),
        }
    }
}

/// How many skipped runs and findings a report lists; the rest are counted. A report of a
/// hostile file costs this much memory, not memory per damaged byte.
pub const MAX_LISTED: usize = 64;

/// Everything a scan of one `.cslog` file found: what `cuca verify` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanReport {
    /// The file scanned.
    pub path: PathBuf,
    /// The file's length in bytes when it was read.
    pub file_len: u64,
    /// The header's version byte ([`crate::VERSION_1`] or [`crate::VERSION`]); `None` when
    /// the header is cut short or not a `.cslog` header.
    pub version: Option<u8>,
    /// Every record that decoded, in file order (also when the verdict is refused, for
    /// inspection; a load never hands these out then).
    pub records: Vec<SessionRecord>,
    /// The first [`MAX_LISTED`] runs of damaged frames, in file order.
    pub skipped: Vec<SkippedFrame>,
    /// Runs of damaged frames in all, listed or not.
    pub skipped_runs: u64,
    /// Damaged frames in all.
    pub skipped_frames: u64,
    /// Bytes in damaged runs in all.
    pub skipped_bytes: u64,
    /// Bytes after the last `0x00` (or a header cut short): what a crash mid-append leaves.
    pub torn_tail_bytes: u64,
    /// The first [`MAX_LISTED`] findings, in file order.
    pub findings: Vec<Finding>,
    /// Findings in all, listed or not.
    pub findings_total: u64,
    /// The conclusion.
    pub verdict: Verdict,
}

impl ScanReport {
    /// The records a load returns, or [`PluginError::Corrupt`] naming the file and offset when
    /// the verdict is [`Verdict::Refused`].
    pub fn into_records(self) -> Result<Vec<SessionRecord>, PluginError> {
        match self.verdict {
            Verdict::Refused { offset, reason } => Err(refusal(&self.path, offset, reason)),
            Verdict::Clean | Verdict::Recovered => Ok(self.records),
        }
    }

    /// Whether a load of this file succeeds.
    pub fn is_loadable(&self) -> bool {
        !matches!(self.verdict, Verdict::Refused { .. })
    }
}

/// Scans the `.cslog` file at `path`, read as whatever session its first record names.
///
/// Errors only when the file cannot be read (it is missing, is a directory, or the OS
/// refuses); damage inside the file is described by the report.
pub fn scan(path: &Path) -> Result<ScanReport, PluginError> {
    scan_reader(open_session_file(path)?, path)
}

/// [`scan`] for the file of `session_id`: a record of another session is a [`Finding`].
pub fn scan_session(path: &Path, session_id: &str) -> Result<ScanReport, PluginError> {
    scan_reader_as(open_session_file(path)?, path, Some(session_id))
}

/// Opens a session file for reading, refusing what is not a regular file.
pub(crate) fn open_session_file(path: &Path) -> Result<std::fs::File, PluginError> {
    open_regular_file(path, "a session file is {dir}/{session_id}.cslog")
}

/// Opens `path` for reading, refusing what is not a regular file; `expected` says what the
/// file should have been, for the error.
pub(crate) fn open_regular_file(path: &Path, expected: &str) -> Result<std::fs::File, PluginError> {
    let metadata = std::fs::metadata(path).map_err(|error| PluginError::io("read", path, error))?;
    if !metadata.is_file() {
        return Err(PluginError::io(
            "read",
            path,
            std::io::Error::other(format!("this is not a regular file; {expected}")),
        ));
    }
    std::fs::File::open(path).map_err(|error| PluginError::io("open", path, error))
}

/// Scans `.cslog` bytes from any reader; `path` only names the source in the report.
///
/// Memory is bounded by the records it returns plus one frame of at most
/// [`MAX_FRAME_LEN`] bytes, whatever the input: damage is counted in runs, and at most
/// [`MAX_LISTED`] runs and findings are listed.
pub fn scan_reader(reader: impl Read, path: &Path) -> Result<ScanReport, PluginError> {
    scan_reader_as(reader, path, None)
}

/// [`scan_reader`] read as `session_id`'s file when it is given.
pub(crate) fn scan_reader_as(
    reader: impl Read,
    path: &Path,
    session_id: Option<&str>,
) -> Result<ScanReport, PluginError> {
    // `Collect` never stops a scan, so the inner result cannot be an error.
    let Ok(scanner) = read_frames(reader, path, session_id, Collect(Vec::new()))?;
    Ok(scanner.finish().into_report())
}

/// Scans `.cslog` bytes held in memory (a read chunk at a time, so never a copy of them all).
pub fn scan_bytes(bytes: &[u8], path: &Path) -> ScanReport {
    let mut scanner = Scanner::new(path, None, Collect(Vec::new()));
    let n_header = bytes.len().min(HEADER_LEN);
    if !scanner.check_header(&bytes[..n_header]) {
        let mut chunk = Vec::with_capacity(READ_CHUNK.min(bytes.len()));
        for window in bytes[HEADER_LEN..].chunks(READ_CHUNK) {
            chunk.clear();
            chunk.extend_from_slice(window);
            let Ok(()) = scanner.feed(&mut chunk);
        }
    }
    let mut report = scanner.finish().into_report();
    report.file_len = bytes.len() as u64;
    report
}

/// Replays `.cslog` bytes from any reader (an open session file, a compacted file's decoder)
/// into `visit`, with [`scan`]'s recovery rule: what `scan_reader(reader, path)?.into_records()`
/// returns, record by record, without collecting the records; `path` names the source in
/// errors.
///
/// Each frame is decoded where it lies in the read chunk into a [`ReplayedRecord`] whose
/// session id borrows from the chunk. It returns [`PluginError::Corrupt`] as soon as the scan
/// refuses the file (the same error [`ScanReport::into_records`] returns): the records visited
/// before that are for the caller to discard (see `SessionBackend::replay_each`). An error
/// from `visit` stops the read and is returned as it is.
pub(crate) fn replay_reader(
    reader: impl Read,
    path: &Path,
    session_id: Option<&str>,
    visit: &mut dyn FnMut(ReplayedRecord<'_>) -> Result<(), PluginError>,
) -> Result<(), PluginError> {
    let finished = read_frames(reader, path, session_id, Visit(visit))??.finish();
    match finished.verdict {
        Verdict::Refused { offset, reason } => Err(refusal(path, offset, reason)),
        Verdict::Clean | Verdict::Recovered => Ok(()),
    }
}

/// A replay that hands out marks: each record with the mark just after it.
struct VisitMarked<'v> {
    visit: &'v mut dyn FnMut(ReplayedRecord<'_>, &ReadMark) -> Result<(), PluginError>,
    /// The file read, whose bytes before each mark go into its check.
    file: &'v std::fs::File,
    path: &'v Path,
    /// What the file is known by, put in every mark with the bytes before it.
    check: FileCheck,
    /// The mark after the last record visited.
    mark: ReadMark,
    /// Whether a record was visited yet.
    taken: bool,
    /// Whether the read starts at a mark, not at the start of the file.
    from_mark: bool,
    /// The read from a mark was refused before any record: the mark may not describe the
    /// file (see [`replay_file_after`]).
    stale: bool,
}

impl Take for VisitMarked<'_> {
    type Record<'a> = ReplayedRecord<'a>;
    type Stop = PluginError;
    const COUNTS_REST: bool = false;

    fn sequence(record: &ReplayedRecord<'_>) -> u64 {
        record.sequence
    }

    fn session_id<'r>(record: &'r ReplayedRecord<'_>) -> &'r str {
        record.session_id
    }

    fn take(&mut self, record: ReplayedRecord<'_>) -> Result<(), PluginError> {
        // The scanner hands every record over with its frame (`take_at`); this is the mark
        // read from the file, for a caller that has no frame.
        let end = self.mark.position;
        let check = self
            .check
            .at(self.file, end)
            .map_err(|error| PluginError::io("read", self.path, error))?;
        self.visit_with(record, end, check)
    }

    fn take_at(
        &mut self,
        record: ReplayedRecord<'_>,
        frame_end: u64,
        frame_tail: &[u8],
    ) -> Result<(), PluginError> {
        let check = self.check.of_tail(frame_end, frame_tail);
        self.visit_with(record, frame_end, check)
    }

    fn refused(&mut self, path: &Path, offset: u64, reason: &str) -> Result<(), PluginError> {
        if !self.taken && self.from_mark {
            self.stale = true;
        }
        Err(refusal(path, offset, reason.to_owned()))
    }
}

impl VisitMarked<'_> {
    fn visit_with(
        &mut self,
        record: ReplayedRecord<'_>,
        frame_end: u64,
        check: u64,
    ) -> Result<(), PluginError> {
        self.taken = true;
        self.mark = ReadMark {
            sequence: Some(record.sequence),
            position: frame_end,
            check,
        };
        (self.visit)(record, &self.mark)
    }
}

/// [`replay_reader`] of a live session file from `after` on: each record after the mark, with
/// the mark after it (its `position` the byte offset of the next frame, its `check` the
/// file's `check` with the bytes before that offset). The scan starts at the mark's offset as if it had just read the record
/// the mark names, so the recovery rule judges what follows exactly as a scan from the start
/// would. A mark that cannot stand where it says — another file (`check`), past the end, not
/// after a frame's terminator — is [`ReadAfter::Stale`], and so is a read refused before its
/// first record (the mark may point into a rewritten file; a read from the start gives the
/// file's own verdict).
pub(crate) fn replay_file_after(
    file: &std::fs::File,
    path: &Path,
    session_id: &str,
    after: &ReadMark,
    check: FileCheck,
    visit: &mut dyn FnMut(ReplayedRecord<'_>, &ReadMark) -> Result<(), PluginError>,
) -> Result<ReadAfter, PluginError> {
    let io = |error| PluginError::io("read", path, error);
    let len = file.metadata().map_err(io)?.len();
    let take = VisitMarked {
        visit,
        file,
        path,
        check,
        mark: *after,
        taken: false,
        from_mark: *after != ReadMark::START,
        stale: false,
    };
    let mut scanner = Scanner::new(path, Some(session_id), take);
    let mut header = [0u8; HEADER_LEN];
    let n_header = crate::backend::read_at(file, 0, &mut header).map_err(io)?;
    let ended = scanner.check_header(&header[..n_header]);
    let start = if *after == ReadMark::START {
        if ended {
            return match scanner.finish().verdict {
                Verdict::Refused { offset, reason } => Err(refusal(path, offset, reason)),
                Verdict::Clean | Verdict::Recovered => Ok(ReadAfter::Read(ReadMark::START)),
            };
        }
        HEADER_LEN as u64
    } else {
        let mut before = [1u8; 1];
        let fits = !ended
            && after.sequence.is_some()
            && after.position > HEADER_LEN as u64
            && after.position <= len
            && crate::backend::read_at(file, after.position - 1, &mut before).map_err(io)? == 1
            && before[0] == 0
            && after.check == check.at(file, after.position).map_err(io)?;
        if !fits {
            return Ok(ReadAfter::Stale);
        }
        scanner.last_sequence = after.sequence;
        after.position
    };
    scanner.offset = start;
    scanner.partial_start = start;
    let mut chunk = vec![0u8; READ_CHUNK];
    let mut at = start;
    let fed = loop {
        let n = crate::backend::read_at(file, at, &mut chunk).map_err(io)?;
        if n == 0 {
            break Ok(());
        }
        at += n as u64;
        if let Err(stop) = scanner.feed(&mut chunk[..n]) {
            break Err(stop);
        }
    };
    if let Err(stop) = fed {
        return if scanner.take.stale {
            Ok(ReadAfter::Stale)
        } else {
            Err(stop)
        };
    }
    let finished = scanner.finish();
    match finished.verdict {
        Verdict::Refused { .. } if !finished.take.taken && *after != ReadMark::START => {
            Ok(ReadAfter::Stale)
        }
        Verdict::Refused { offset, reason } => Err(refusal(path, offset, reason)),
        Verdict::Clean | Verdict::Recovered => Ok(ReadAfter::Read(finished.take.mark)),
    }
}

/// The error a load of a refused file returns.
fn refusal(path: &Path, offset: u64, reason: String) -> PluginError {
    PluginError::Corrupt {
        path: path.to_path_buf(),
        offset,
        message: reason,
    }
}

/// Reads the header, then every chunk, through a scanner: the one read loop of [`scan`] and
/// [`replay_reader`]. The outer error is the reader's, the inner one the [`Take`]'s.
fn read_frames<T: Take>(
    mut reader: impl Read,
    path: &Path,
    session_id: Option<&str>,
    take: T,
) -> Result<Result<Scanner<T>, T::Stop>, PluginError> {
    let mut scanner = Scanner::new(path, session_id, take);
    let mut header = [0u8; HEADER_LEN];
    let n_header = read_full(&mut reader, &mut header, path)?;
    if scanner.check_header(&header[..n_header]) {
        if T::COUNTS_REST {
            // Count the rest so the report still says how long the file is.
            let rest = std::io::copy(&mut reader, &mut std::io::sink())
                .map_err(|error| PluginError::io("read", path, error))?;
            scanner.offset += rest;
        }
        return Ok(Ok(scanner));
    }
    let mut chunk = vec![0u8; READ_CHUNK];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(error) => return Err(PluginError::io("read", path, error)),
        };
        if let Err(stop) = scanner.feed(&mut chunk[..n]) {
            return Ok(Err(stop));
        }
    }
    Ok(Ok(scanner))
}

/// Size of one read: large enough that a replay is a few syscalls per megabyte.
const READ_CHUNK: usize = 64 * 1024;

/// How far past [`MAX_FRAME_LEN`] the scanner still keeps a frame's bytes: a torn frame of
/// nearly the maximum length plus a few seals (one per interrupted sealing append) must still
/// be seen to end in [`SEAL_MARK`].
const SEAL_SLACK: usize = 8 * SEAL_MARK.len();

fn read_full(reader: &mut impl Read, buf: &mut [u8], path: &Path) -> Result<usize, PluginError> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => return Err(PluginError::io("read", path, error)),
        }
    }
    Ok(filled)
}

/// What a [`Scanner`] does with each good record.
pub(crate) trait Take {
    /// The type a good frame's record bytes decode into: anything with `SessionRecord`'s wire
    /// layout, possibly borrowing from the frame.
    type Record<'a>: Deserialize<'a>;
    /// Why a scan stops early.
    type Stop;
    /// Whether a scan whose header already ended it reads on to count the file's length
    /// (a report states it; a replay has no use for it).
    const COUNTS_REST: bool;

    /// The record's sequence number, for the recovery rule.
    fn sequence(record: &Self::Record<'_>) -> u64;

    /// The record's session id, for the findings.
    fn session_id<'r>(record: &'r Self::Record<'_>) -> &'r str;

    /// Takes one good record, in file order. An error stops the scan.
    fn take(&mut self, record: Self::Record<'_>) -> Result<(), Self::Stop>;

    /// [`Take::take`], told the byte offset just past the record's frame (its terminator
    /// included): where the next frame starts; and the frame's last bytes as stored (at most
    /// [`FRAME_TAIL`], the terminator included), which a mark's check covers. Only a read
    /// that hands out marks wants them.
    fn take_at(
        &mut self,
        record: Self::Record<'_>,
        _frame_end: u64,
        _frame_tail: &[u8],
    ) -> Result<(), Self::Stop> {
        self.take(record)
    }

    /// Called once, when damage first refuses the file; an error stops the scan (the
    /// refusal is final, so a replay need not read on), `Ok` reads on to report the rest.
    fn refused(&mut self, path: &Path, offset: u64, reason: &str) -> Result<(), Self::Stop>;
}

/// A scan for a [`ScanReport`]: owned records, all of them, refused or not.
struct Collect(Vec<SessionRecord>);

impl Take for Collect {
    type Record<'a> = SessionRecord;
    type Stop = Infallible;
    const COUNTS_REST: bool = true;

    fn sequence(record: &SessionRecord) -> u64 {
        record.sequence
    }

    fn session_id(record: &SessionRecord) -> &str {
        &record.session_id
    }

    fn take(&mut self, record: SessionRecord) -> Result<(), Infallible> {
        self.0.push(record);
        Ok(())
    }

    fn refused(&mut self, _: &Path, _: u64, _: &str) -> Result<(), Infallible> {
        Ok(())
    }
}

/// A replay: each record, its session id borrowed from the read chunk, to the visitor.
struct Visit<'v>(&'v mut dyn FnMut(ReplayedRecord<'_>) -> Result<(), PluginError>);

impl Take for Visit<'_> {
    type Record<'a> = ReplayedRecord<'a>;
    type Stop = PluginError;
    const COUNTS_REST: bool = false;

    fn sequence(record: &ReplayedRecord<'_>) -> u64 {
        record.sequence
    }

    fn session_id<'r>(record: &'r ReplayedRecord<'_>) -> &'r str {
        record.session_id
    }

    fn take(&mut self, record: ReplayedRecord<'_>) -> Result<(), PluginError> {
        (self.0)(record)
    }

    fn refused(&mut self, path: &Path, offset: u64, reason: &str) -> Result<(), PluginError> {
        Err(refusal(path, offset, reason.to_owned()))
    }
}

/// Where a scan ended: everything but the records, which stay with the [`Take`].
struct Finished<T> {
    path: PathBuf,
    file_len: u64,
    version: Option<u8>,
    take: T,
    damage: Damage,
    torn_tail_bytes: u64,
    findings: Vec<Finding>,
    findings_total: u64,
    verdict: Verdict,
}

impl Finished<Collect> {
    fn into_report(self) -> ScanReport {
        ScanReport {
            path: self.path,
            file_len: self.file_len,
            version: self.version,
            records: self.take.0,
            skipped: self.damage.listed,
            skipped_runs: self.damage.runs,
            skipped_frames: self.damage.frames,
            skipped_bytes: self.damage.bytes,
            torn_tail_bytes: self.torn_tail_bytes,
            findings: self.findings,
            findings_total: self.findings_total,
            verdict: self.verdict,
        }
    }
}

/// The damaged runs a scan closed: the first [`MAX_LISTED`], and totals.
#[derive(Default)]
struct Damage {
    listed: Vec<SkippedFrame>,
    runs: u64,
    frames: u64,
    bytes: u64,
}

/// The damaged frames since the last good record.
struct Run {
    skipped: SkippedFrame,
    /// The first frame in the run that is neither a sealed torn frame nor empty: the one a v2
    /// reader cannot explain by an interrupted append or a power cut.
    unexplained: Option<(u64, FrameError)>,
}

/// One damaged frame as the scanner met it.
struct Damaged {
    offset: u64,
    len: u64,
    /// How many frames: more than one only for a run of zero bytes.
    frames: u64,
    sealed: bool,
    reason: FrameError,
}

struct Scanner<T> {
    path: PathBuf,
    offset: u64,
    /// Bytes of a frame that began in an earlier chunk.
    partial: Vec<u8>,
    partial_start: u64,
    /// The current frame passed [`MAX_FRAME_LEN`] (and the seal slack): its bytes are
    /// counted, not kept.
    overlong: bool,
    /// What happens to good records. Frames are judged as they are read (no list of
    /// intermediate outcomes): a second growing vector of every record cost a replay
    /// measurable time in page faults.
    take: T,
    /// The header's version byte, once read.
    version: Option<u8>,
    /// The session the file is read as: given, or the first record's.
    session: Option<String>,
    /// Whether a good record was taken yet, and the sequence of the last one: all the
    /// recovery rule needs to know about the records before a damaged run.
    last_sequence: Option<u64>,
    damage: Damage,
    /// The damaged frames since the last good record, waiting for the next good record to
    /// show whether the sequence continues across them.
    run: Option<Run>,
    findings: Vec<Finding>,
    findings_total: u64,
    /// The first place where damage may have lost a record.
    refusal: Option<(u64, String)>,
    /// The header ended the scan: the torn bytes and the verdict it reached.
    header_end: Option<(u64, Verdict)>,
    /// The byte offset just past the frame being judged, terminator included.
    frame_end: u64,
    /// The frame being judged's last bytes as stored, the terminator included
    /// (`frame_tail_len` of them), copied before decoding rewrites the frame in place.
    frame_tail: [u8; FRAME_TAIL],
    frame_tail_len: usize,
}

impl<T: Take> Scanner<T> {
    fn new(path: &Path, session_id: Option<&str>, take: T) -> Self {
        Scanner {
            path: path.to_path_buf(),
            offset: HEADER_LEN as u64,
            partial: Vec::new(),
            partial_start: HEADER_LEN as u64,
            overlong: false,
            take,
            version: None,
            session: session_id.map(str::to_owned),
            last_sequence: None,
            damage: Damage::default(),
            run: None,
            findings: Vec::new(),
            findings_total: 0,
            refusal: None,
            header_end: None,
            frame_end: HEADER_LEN as u64,
            frame_tail: [0; FRAME_TAIL],
            frame_tail_len: 0,
        }
    }

    /// Whether the file is read by the v2 rules (see `docs/cslog-format.md`).
    fn strict(&self) -> bool {
        self.version == Some(VERSION)
    }

    /// Whether the header ends the scan (short or bad); the verdict is then already made.
    fn check_header(&mut self, header: &[u8]) -> bool {
        let len = header.len() as u64;
        self.offset = len;
        if let Some(at) = header
            .iter()
            .zip(MAGIC.iter())
            .position(|(got, want)| got != want)
        {
            self.header_end = Some((
                0,
                Verdict::Refused {
                    offset: at as u64,
                    reason: format!(
                        "not a .cslog file: the first bytes are {:?}, a .cslog file starts with \"CUCASLOG\"",
                        String::from_utf8_lossy(header)
                    ),
                },
            ));
            return true;
        }
        if header.len() < HEADER_LEN {
            // A prefix of the header: the file was created and the process died before the
            // one write of the header finished. Nothing was recorded, so nothing is lost.
            let verdict = if header.is_empty() {
                Verdict::Clean
            } else {
                Verdict::Recovered
            };
            self.header_end = Some((len, verdict));
            return true;
        }
        let version = header[HEADER_LEN - 1];
        if version != VERSION && version != VERSION_1 {
            self.header_end = Some((
                0,
                Verdict::Refused {
                    offset: (HEADER_LEN - 1) as u64,
                    reason: format!(
                        "unknown .cslog version {version}; this build reads versions {VERSION_1} and {VERSION}"
                    ),
                },
            ));
            return true;
        }
        self.version = Some(version);
        false
    }

    fn feed(&mut self, chunk: &mut [u8]) -> Result<(), T::Stop> {
        let mut start = 0;
        while start < chunk.len() {
            if chunk[start] == 0 && !self.overlong && self.partial.is_empty() {
                // A run of zero bytes is that many empty frames: counted in one step, so a
                // file of zeros costs neither a frame's work nor a report entry per byte.
                let zeros = chunk[start..]
                    .iter()
                    .position(|&byte| byte != 0)
                    .unwrap_or(chunk.len() - start);
                self.damaged(Damaged {
                    offset: self.offset,
                    len: zeros as u64 - 1,
                    frames: zeros as u64,
                    sealed: false,
                    reason: FrameError::Empty,
                });
                self.offset += zeros as u64;
                self.partial_start = self.offset;
                start += zeros;
                continue;
            }
            let Some(end) = memchr::memchr(0, &chunk[start..]) else {
                self.keep(&chunk[start..]);
                self.offset += (chunk.len() - start) as u64;
                return Ok(());
            };
            let end = start + end;
            if self.overlong || !self.partial.is_empty() {
                self.keep(&chunk[start..end]);
                self.offset += (end - start) as u64;
                self.close_partial()?;
            } else {
                // The whole frame is inside this chunk: decode it where it lies, no copy.
                let frame_start = self.offset;
                self.offset += (end - start) as u64;
                self.push_frame(frame_start, &mut chunk[start..end])?;
            }
            self.offset += 1; // the terminator
            self.partial_start = self.offset;
            start = end + 1;
        }
        Ok(())
    }

    fn keep(&mut self, bytes: &[u8]) {
        if self.overlong {
            return;
        }
        if self.partial.len() + bytes.len() > MAX_FRAME_LEN + SEAL_SLACK {
            self.overlong = true;
            self.partial = Vec::new();
        } else {
            self.partial.extend_from_slice(bytes);
        }
    }

    fn close_partial(&mut self) -> Result<(), T::Stop> {
        let frame_start = self.partial_start;
        if self.overlong {
            self.overlong = false;
            let len = self.offset - frame_start;
            self.damaged(Damaged {
                offset: frame_start,
                len,
                frames: 1,
                sealed: false,
                reason: FrameError::TooLong {
                    len,
                    max: MAX_FRAME_LEN as u64,
                },
            });
            Ok(())
        } else {
            let mut frame = std::mem::take(&mut self.partial);
            let result = self.push_frame(frame_start, &mut frame);
            frame.clear();
            if frame.capacity() > READ_CHUNK {
                // A long frame's buffer is not kept for the rest of the file.
                frame = Vec::new();
            }
            self.partial = frame;
            result
        }
    }

    /// Judges one frame the scan cut at its `0x00` (so it holds no zero: the codec does not
    /// search it again).
    fn push_frame(&mut self, offset: u64, frame: &mut [u8]) -> Result<(), T::Stop> {
        let len = frame.len() as u64;
        self.frame_end = offset + len + 1;
        let kept = frame.len().min(FRAME_TAIL - 1);
        self.frame_tail[..kept].copy_from_slice(&frame[frame.len() - kept..]);
        self.frame_tail[kept] = 0;
        self.frame_tail_len = kept + 1;
        // Looked at before decoding, which rewrites the bytes in place.
        let sealed = frame.len() > SEAL_MARK.len() && frame.ends_with(&SEAL_MARK);
        match decode_cut_frame::<T::Record<'_>>(frame) {
            Ok(record) => self.good(offset, record),
            Err(reason) => {
                self.damaged(Damaged {
                    offset,
                    len,
                    frames: 1,
                    sealed,
                    reason,
                });
                Ok(())
            }
        }
    }

    fn damaged(&mut self, frame: Damaged) {
        let explained = frame.sealed || frame.reason == FrameError::Empty;
        let end = frame.offset + frame.len;
        match &mut self.run {
            Some(run) => {
                run.skipped.len = end - run.skipped.offset;
                run.skipped.frames += frame.frames;
                run.skipped.sealed += u64::from(frame.sealed);
                if !explained && run.unexplained.is_none() {
                    run.unexplained = Some((frame.offset, frame.reason));
                }
            }
            None => {
                let unexplained = (!explained).then(|| (frame.offset, frame.reason.clone()));
                self.run = Some(Run {
                    skipped: SkippedFrame {
                        offset: frame.offset,
                        len: frame.len,
                        frames: frame.frames,
                        sealed: u64::from(frame.sealed),
                        reason: frame.reason,
                    },
                    unexplained,
                });
            }
        }
    }

    /// Ends the damaged run, if any, into the report's counts and list.
    fn close_run(&mut self) -> Option<Run> {
        let run = self.run.take()?;
        self.damage.runs += 1;
        self.damage.frames += run.skipped.frames;
        self.damage.bytes += run.skipped.len;
        if self.damage.listed.len() < MAX_LISTED {
            self.damage.listed.push(run.skipped.clone());
        }
        Some(run)
    }

    /// Refuses the file at `offset` (the first refusal only).
    fn refuse(&mut self, offset: u64, reason: String) -> Result<(), T::Stop> {
        if self.refusal.is_none() {
            self.take.refused(&self.path, offset, &reason)?;
            self.refusal = Some((offset, reason));
        }
        Ok(())
    }

    /// The recovery rule, as each good record arrives: a run of damaged frames before it is
    /// tolerated when it holds only sealed torn frames (never acknowledged) or when the
    /// sequence continues across it without a gap. Then the record itself is checked against
    /// the ones before it (its session, its sequence).
    fn good(&mut self, offset: u64, record: T::Record<'_>) -> Result<(), T::Stop> {
        let sequence = T::sequence(&record);
        if let Some(run) = self.close_run() {
            let expected = self
                .last_sequence
                .map_or(Some(0), |previous| previous.checked_add(1));
            let only_sealed = run.skipped.sealed == run.skipped.frames;
            if !only_sealed && expected != Some(sequence) {
                let before = self.last_sequence.map_or_else(
                    || "the start of the file".to_owned(),
                    |previous| format!("sequence {previous}"),
                );
                let at = run.skipped.offset;
                self.refuse(
                    at,
                    format!(
                        "frame at byte {at} is damaged ({}) and the records around it go from {before} to sequence {sequence}: a recorded event may be lost",
                        run.skipped.reason
                    ),
                )?;
            }
        }
        let kind = match self.last_sequence {
            Some(previous) if sequence == previous => Some(FindingKind::RepeatedSequence),
            Some(previous) if sequence < previous => {
                Some(FindingKind::BackwardSequence { previous })
            }
            _ => None,
        };
        if let Some(kind) = kind {
            self.finding(Finding {
                offset,
                sequence,
                kind,
            })?;
        }
        let id = T::session_id(&record);
        match &self.session {
            None => self.session = Some(id.to_owned()),
            Some(expected) if expected != id => {
                let kind = FindingKind::ForeignSession {
                    found: id.to_owned(),
                    expected: expected.clone(),
                };
                self.finding(Finding {
                    offset,
                    sequence,
                    kind,
                })?;
            }
            Some(_) => {}
        }
        self.last_sequence = Some(sequence);
        self.take.take_at(
            record,
            self.frame_end,
            &self.frame_tail[..self.frame_tail_len],
        )
    }

    /// Records a finding. In a v2 file a sequence that does not increase refuses the file: its
    /// writer refuses such an append, so something else changed the file, and no order a
    /// reader could pick is known to be right. A record of another session does not: it is
    /// still exactly what was recorded, under the id it carries (a renamed or copied file).
    fn finding(&mut self, finding: Finding) -> Result<(), T::Stop> {
        self.findings_total += 1;
        let sequence_kind = !matches!(finding.kind, FindingKind::ForeignSession { .. });
        if self.strict() && sequence_kind {
            self.refuse(
                finding.offset,
                format!("{finding}; a v2 writer never writes this, so the file was changed by something else"),
            )?;
        }
        if self.findings.len() < MAX_LISTED {
            self.findings.push(finding);
        }
        Ok(())
    }

    /// The v2 reading of what follows the last good record. Damaged frames there have no
    /// record after them to show a gap, so each must explain itself: a sealed torn frame is an
    /// append that never completed, and zero bytes are what a power cut leaves where data never
    /// reached the disk; any other damaged frame may be an acknowledged record, and refuses.
    /// A torn tail that is a whole good frame and one more byte is a last frame whose
    /// terminator was damaged (no interrupted append leaves that: a frame is followed by its
    /// `0x00`, or, when a seal started, by [`SEAL_MARK`]'s first byte).
    fn judge_tail(&mut self, run: Option<Run>) -> Option<(u64, String)> {
        if let Some((at, reason)) = run.and_then(|run| run.unexplained) {
            return Some((
                at,
                format!(
                    "frame at byte {at} is damaged ({reason}) and no record follows it: it is not an interrupted append (a resumed writer seals those), so an acknowledged record may be lost; `cuca repair` drops it deliberately"
                ),
            ));
        }
        if self.overlong || self.partial.len() < 2 {
            return None;
        }
        let cut = self.partial.len() - 1;
        let (frame, last) = self.partial.split_at_mut(cut);
        if last[0] == SEAL_MARK[0] || decode_cut_frame::<SessionRecord>(frame).is_err() {
            return None;
        }
        let at = self.partial_start;
        Some((
            at,
            format!(
                "the frame at byte {at} is a whole record whose terminator reads {:#04x} instead of 0x00: an acknowledged record with a damaged last byte; `cuca repair` drops it deliberately",
                last[0]
            ),
        ))
    }

    /// Concludes.
    fn finish(mut self) -> Finished<T> {
        let (torn_tail_bytes, verdict) = match self.header_end.take() {
            Some(end) => end,
            None => {
                let torn_tail_bytes = self.offset - self.partial_start;
                let run = self.close_run();
                if self.refusal.is_none() && self.strict() {
                    // A v1 file keeps the v1 reading: a damaged run with no good record after
                    // it is read like a torn tail, since a v1 seal (a lone `0x00`) cannot be
                    // told from damage.
                    self.refusal = self.judge_tail(run);
                }
                let damaged = self.damage.runs > 0 || torn_tail_bytes > 0;
                let verdict = match self.refusal.take() {
                    Some((offset, reason)) => Verdict::Refused { offset, reason },
                    None if damaged => Verdict::Recovered,
                    None => Verdict::Clean,
                };
                (torn_tail_bytes, verdict)
            }
        };
        Finished {
            path: self.path,
            file_len: self.offset,
            version: self.version,
            take: self.take,
            damage: self.damage,
            torn_tail_bytes,
            findings: self.findings,
            findings_total: self.findings_total,
            verdict,
        }
    }
}
