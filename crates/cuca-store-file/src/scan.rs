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

use cuca_events::{PluginError, ReplayedRecord, SessionRecord};
use serde::Deserialize;

use crate::codec::{decode_cut_frame, HEADER_LEN, MAGIC, MAX_FRAME_LEN, VERSION};
use crate::error::FrameError;

mod summary;

pub(crate) use summary::scan_each;
pub use summary::ScanSummary;

/// What a scan concluded about a file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Every byte is a header or a good frame.
    Clean,
    /// Damage was found where nothing recorded was lost (a torn tail, skipped frames whose
    /// neighbours continue the sequence); the records are the whole session.
    Recovered,
    /// Damage that may have lost a record, or a header this build cannot read: a load refuses.
    Refused {
        /// Where the damage starts.
        offset: u64,
        /// What was found.
        reason: String,
    },
}

/// A frame the scan skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedFrame {
    /// Byte offset of the frame's first byte in the file.
    pub offset: u64,
    /// The frame's length in bytes, without its terminator.
    pub len: u64,
    /// Why it did not decode.
    pub reason: FrameError,
}

/// Everything a scan of one `.cslog` file found: what `cuca verify` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanReport {
    /// The file scanned.
    pub path: PathBuf,
    /// The file's length in bytes when it was read.
    pub file_len: u64,
    /// Every record that decoded, in file order (also when the verdict is refused, for
    /// inspection; a load never hands these out then).
    pub records: Vec<SessionRecord>,
    /// Frames that did not decode, with their offsets and reasons.
    pub skipped: Vec<SkippedFrame>,
    /// Bytes after the last `0x00` (or a header cut short): what a crash mid-append leaves.
    pub torn_tail_bytes: u64,
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

/// Scans the `.cslog` file at `path`.
///
/// Errors only when the file cannot be read (it is missing, is a directory, or the OS
/// refuses); damage inside the file is described by the report.
pub fn scan(path: &Path) -> Result<ScanReport, PluginError> {
    scan_reader(open_session_file(path)?, path)
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
/// [`MAX_FRAME_LEN`] bytes, whatever the input.
pub fn scan_reader(reader: impl Read, path: &Path) -> Result<ScanReport, PluginError> {
    // `Collect` never stops a scan, so the inner result cannot be an error.
    let Ok(scanner) = read_frames(reader, path, Collect(Vec::new()))?;
    Ok(scanner.finish().into_report())
}

/// Scans `.cslog` bytes held in memory.
pub fn scan_bytes(bytes: &[u8], path: &Path) -> ScanReport {
    let mut scanner = Scanner::new(path, Collect(Vec::new()));
    let n_header = bytes.len().min(HEADER_LEN);
    if !scanner.check_header(&bytes[..n_header]) {
        let mut rest = bytes[HEADER_LEN..].to_vec();
        let Ok(()) = scanner.feed(&mut rest);
    }
    let mut report = scanner.finish().into_report();
    report.file_len = bytes.len() as u64;
    report
}

/// Replays the `.cslog` file at `path` into `visit`, with [`scan`]'s recovery rule: what
/// `scan(path)?.into_records()` returns, record by record, without collecting the records.
///
/// Each frame is decoded where it lies in the read chunk into a [`ReplayedRecord`] whose
/// session id borrows from the chunk. It returns [`PluginError::Corrupt`] as soon as the scan
/// refuses the file (the same error [`ScanReport::into_records`] returns): the records visited
/// before that are for the caller to discard (see `SessionBackend::replay_each`). An error
/// from `visit` stops the read and is returned as it is.
pub(crate) fn replay_file(
    path: &Path,
    visit: &mut dyn FnMut(ReplayedRecord<'_>) -> Result<(), PluginError>,
) -> Result<(), PluginError> {
    replay_reader(open_session_file(path)?, path, visit)
}

/// [`replay_file`] over `.cslog` bytes from any reader (a compacted file's decoder); `path`
/// names the source in errors.
pub(crate) fn replay_reader(
    reader: impl Read,
    path: &Path,
    visit: &mut dyn FnMut(ReplayedRecord<'_>) -> Result<(), PluginError>,
) -> Result<(), PluginError> {
    let finished = read_frames(reader, path, Visit(visit))??.finish();
    match finished.verdict {
        Verdict::Refused { offset, reason } => Err(refusal(path, offset, reason)),
        Verdict::Clean | Verdict::Recovered => Ok(()),
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
/// [`replay_file`]. The outer error is the reader's, the inner one the [`Take`]'s.
fn read_frames<T: Take>(
    mut reader: impl Read,
    path: &Path,
    take: T,
) -> Result<Result<Scanner<T>, T::Stop>, PluginError> {
    let mut scanner = Scanner::new(path, take);
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

    /// Takes one good record, in file order. An error stops the scan.
    fn take(&mut self, record: Self::Record<'_>) -> Result<(), Self::Stop>;

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
    take: T,
    skipped: Vec<SkippedFrame>,
    torn_tail_bytes: u64,
    verdict: Verdict,
}

impl Finished<Collect> {
    fn into_report(self) -> ScanReport {
        ScanReport {
            path: self.path,
            file_len: self.file_len,
            records: self.take.0,
            skipped: self.skipped,
            torn_tail_bytes: self.torn_tail_bytes,
            verdict: self.verdict,
        }
    }
}

struct Scanner<T> {
    path: PathBuf,
    offset: u64,
    /// Bytes of a frame that began in an earlier chunk.
    partial: Vec<u8>,
    partial_start: u64,
    /// The current frame passed [`MAX_FRAME_LEN`]: its bytes are counted, not kept.
    overlong: bool,
    /// What happens to good records. Frames are judged as they are read (no list of
    /// intermediate outcomes): a second growing vector of every record cost a replay
    /// measurable time in page faults.
    take: T,
    /// Whether a good record was taken yet, and the sequence of the last one: all the
    /// recovery rule needs to know about the records before a damaged run.
    last_sequence: Option<u64>,
    skipped: Vec<SkippedFrame>,
    /// Index in `skipped` of the first damaged frame since the last good record: the run
    /// waiting for the next good record to show whether the sequence continues across it.
    run_start: Option<usize>,
    /// The first place where damage may have lost a record.
    refusal: Option<(u64, String)>,
    /// The header ended the scan: the torn bytes and the verdict it reached.
    header_end: Option<(u64, Verdict)>,
}

impl<T: Take> Scanner<T> {
    fn new(path: &Path, take: T) -> Self {
        Scanner {
            path: path.to_path_buf(),
            offset: HEADER_LEN as u64,
            partial: Vec::new(),
            partial_start: HEADER_LEN as u64,
            overlong: false,
            take,
            last_sequence: None,
            skipped: Vec::new(),
            run_start: None,
            refusal: None,
            header_end: None,
        }
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
        if header[HEADER_LEN - 1] != VERSION {
            self.header_end = Some((
                0,
                Verdict::Refused {
                    offset: (HEADER_LEN - 1) as u64,
                    reason: format!(
                        "unknown .cslog version {}; this build reads version {VERSION}",
                        header[HEADER_LEN - 1]
                    ),
                },
            ));
            return true;
        }
        false
    }

    fn feed(&mut self, chunk: &mut [u8]) -> Result<(), T::Stop> {
        let mut start = 0;
        while start < chunk.len() {
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
        if self.partial.len() + bytes.len() > MAX_FRAME_LEN {
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
            self.damaged(SkippedFrame {
                offset: frame_start,
                len,
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
            self.partial = frame;
            result
        }
    }

    /// Judges one frame the scan cut at its `0x00` (so it holds no zero: the codec does not
    /// search it again).
    fn push_frame(&mut self, offset: u64, frame: &mut [u8]) -> Result<(), T::Stop> {
        let len = frame.len() as u64;
        match decode_cut_frame::<T::Record<'_>>(frame) {
            Ok(record) => self.good(record),
            Err(reason) => {
                self.damaged(SkippedFrame {
                    offset,
                    len,
                    reason,
                });
                Ok(())
            }
        }
    }

    fn damaged(&mut self, frame: SkippedFrame) {
        self.run_start.get_or_insert(self.skipped.len());
        self.skipped.push(frame);
    }

    /// The recovery rule, as each good record arrives: a run of damaged frames before it is
    /// tolerated only when the sequence continues across the run without a gap.
    fn good(&mut self, record: T::Record<'_>) -> Result<(), T::Stop> {
        let sequence = T::sequence(&record);
        if let Some(first) = self.run_start.take() {
            let expected = self
                .last_sequence
                .map_or(Some(0), |previous| previous.checked_add(1));
            if self.refusal.is_none() && expected != Some(sequence) {
                if let Some(frame) = self.skipped.get(first) {
                    let before = self.last_sequence.map_or_else(
                        || "the start of the file".to_owned(),
                        |previous| format!("sequence {previous}"),
                    );
                    let (offset, reason) = (
                        frame.offset,
                        format!(
                            "frame at byte {} is damaged ({}) and the records around it go from {before} to sequence {sequence}: a recorded event may be lost",
                            frame.offset, frame.reason
                        ),
                    );
                    self.take.refused(&self.path, offset, &reason)?;
                    self.refusal = Some((offset, reason));
                }
            }
        }
        self.last_sequence = Some(sequence);
        self.take.take(record)
    }

    /// Concludes. A damaged run with no good record after it has no gap to show. The writer
    /// leaves exactly this when a process dies during an append that was sealing an earlier
    /// torn tail (seal + frame in one write), so it is read like a torn tail: the records
    /// before it are the acknowledged session. The report still lists every such frame.
    fn finish(self) -> Finished<T> {
        let (torn_tail_bytes, verdict) = match self.header_end {
            Some(end) => end,
            None => {
                let torn_tail_bytes = self.offset - self.partial_start;
                let verdict = match self.refusal {
                    Some((offset, reason)) => Verdict::Refused { offset, reason },
                    None if self.skipped.is_empty() && torn_tail_bytes == 0 => Verdict::Clean,
                    None => Verdict::Recovered,
                };
                (torn_tail_bytes, verdict)
            }
        };
        Finished {
            path: self.path,
            file_len: self.offset,
            take: self.take,
            skipped: self.skipped,
            torn_tail_bytes,
            verdict,
        }
    }
}
