//! Reading a `.cslog` file back: the scan report and the recovery rule.

use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

use cuca_events::{PluginError, SessionRecord};

use crate::codec::{decode_frame, HEADER_LEN, MAGIC, MAX_FRAME_LEN, VERSION};
use crate::error::FrameError;

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
            Verdict::Refused { offset, reason } => Err(PluginError::Corrupt {
                path: self.path,
                offset,
                message: reason,
            }),
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
    let metadata = std::fs::metadata(path).map_err(|error| PluginError::io("read", path, error))?;
    if !metadata.is_file() {
        return Err(PluginError::io(
            "read",
            path,
            std::io::Error::other(
                "this is not a regular file; a session file is {dir}/{session_id}.cslog",
            ),
        ));
    }
    let file = std::fs::File::open(path).map_err(|error| PluginError::io("open", path, error))?;
    scan_reader(file, path)
}

/// Scans `.cslog` bytes from any reader; `path` only names the source in the report.
///
/// Memory is bounded by the records it returns plus one frame of at most
/// [`MAX_FRAME_LEN`] bytes, whatever the input.
pub fn scan_reader(mut reader: impl Read, path: &Path) -> Result<ScanReport, PluginError> {
    let mut scanner = Scanner::new(path);
    let mut chunk = vec![0u8; READ_CHUNK];
    let mut header = [0u8; HEADER_LEN];
    let n_header = read_full(&mut reader, &mut header, path)?;
    if let Some(mut report) = scanner.check_header(&header[..n_header]) {
        // Count the rest so the report still says how long the file is.
        let rest = std::io::copy(&mut reader, &mut std::io::sink())
            .map_err(|error| PluginError::io("read", path, error))?;
        report.file_len += rest;
        return Ok(report);
    }
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(error) => return Err(PluginError::io("read", path, error)),
        };
        scanner.feed(&mut chunk[..n]);
    }
    Ok(scanner.finish())
}

/// Scans `.cslog` bytes held in memory.
pub fn scan_bytes(bytes: &[u8], path: &Path) -> ScanReport {
    let mut scanner = Scanner::new(path);
    let n_header = bytes.len().min(HEADER_LEN);
    if let Some(mut report) = scanner.check_header(&bytes[..n_header]) {
        report.file_len = bytes.len() as u64;
        return report;
    }
    let mut rest = bytes[HEADER_LEN..].to_vec();
    scanner.feed(&mut rest);
    scanner.finish()
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

struct Scanner {
    path: PathBuf,
    offset: u64,
    /// Bytes of a frame that began in an earlier chunk.
    partial: Vec<u8>,
    partial_start: u64,
    /// The current frame passed [`MAX_FRAME_LEN`]: its bytes are counted, not kept.
    overlong: bool,
    /// Good records so far, in file order. Frames are judged as they are read (no list of
    /// intermediate outcomes): a second growing vector of every record cost a replay
    /// measurable time in page faults.
    records: Vec<SessionRecord>,
    skipped: Vec<SkippedFrame>,
    /// Index in `skipped` of the first damaged frame since the last good record: the run
    /// waiting for the next good record to show whether the sequence continues across it.
    run_start: Option<usize>,
    /// The first place where damage may have lost a record.
    refusal: Option<(u64, String)>,
}

impl Scanner {
    fn new(path: &Path) -> Self {
        Scanner {
            path: path.to_path_buf(),
            offset: HEADER_LEN as u64,
            partial: Vec::new(),
            partial_start: HEADER_LEN as u64,
            overlong: false,
            records: Vec::new(),
            skipped: Vec::new(),
            run_start: None,
            refusal: None,
        }
    }

    fn report(&self, file_len: u64, torn_tail_bytes: u64, verdict: Verdict) -> ScanReport {
        ScanReport {
            path: self.path.clone(),
            file_len,
            records: Vec::new(),
            skipped: Vec::new(),
            torn_tail_bytes,
            verdict,
        }
    }

    /// Returns a finished report when the header ends the scan (short or bad).
    fn check_header(&mut self, header: &[u8]) -> Option<ScanReport> {
        let len = header.len() as u64;
        if let Some(at) = header
            .iter()
            .zip(MAGIC.iter())
            .position(|(got, want)| got != want)
        {
            return Some(self.report(
                len,
                0,
                Verdict::Refused {
                    offset: at as u64,
                    reason: format!(
                        "not a .cslog file: the first bytes are {:?}, a .cslog file starts with \"CUCASLOG\"",
                        String::from_utf8_lossy(header)
                    ),
                },
            ));
        }
        if header.len() < HEADER_LEN {
            // A prefix of the header: the file was created and the process died before the
            // one write of the header finished. Nothing was recorded, so nothing is lost.
            let verdict = if header.is_empty() {
                Verdict::Clean
            } else {
                Verdict::Recovered
            };
            return Some(self.report(len, len, verdict));
        }
        if header[HEADER_LEN - 1] != VERSION {
            return Some(self.report(
                len,
                0,
                Verdict::Refused {
                    offset: (HEADER_LEN - 1) as u64,
                    reason: format!(
                        "unknown .cslog version {}; this build reads version {VERSION}",
                        header[HEADER_LEN - 1]
                    ),
                },
            ));
        }
        None
    }

    fn feed(&mut self, chunk: &mut [u8]) {
        let mut start = 0;
        while start < chunk.len() {
            let Some(end) = memchr::memchr(0, &chunk[start..]) else {
                self.keep(&chunk[start..]);
                self.offset += (chunk.len() - start) as u64;
                return;
            };
            let end = start + end;
            if self.overlong || !self.partial.is_empty() {
                self.keep(&chunk[start..end]);
                self.offset += (end - start) as u64;
                self.close_partial();
            } else {
                // The whole frame is inside this chunk: decode it where it lies, no copy.
                let frame_start = self.offset;
                self.offset += (end - start) as u64;
                self.push_frame(frame_start, &mut chunk[start..end]);
            }
            self.offset += 1; // the terminator
            self.partial_start = self.offset;
            start = end + 1;
        }
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

    fn close_partial(&mut self) {
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
        } else {
            let mut frame = std::mem::take(&mut self.partial);
            self.push_frame(frame_start, &mut frame);
            frame.clear();
            self.partial = frame;
        }
    }

    fn push_frame(&mut self, offset: u64, frame: &mut [u8]) {
        let len = frame.len() as u64;
        match decode_frame(frame) {
            Ok(record) => self.good(record),
            Err(reason) => self.damaged(SkippedFrame {
                offset,
                len,
                reason,
            }),
        }
    }

    fn damaged(&mut self, frame: SkippedFrame) {
        self.run_start.get_or_insert(self.skipped.len());
        self.skipped.push(frame);
    }

    /// The recovery rule, as each good record arrives: a run of damaged frames before it is
    /// tolerated only when the sequence continues across the run without a gap.
    fn good(&mut self, record: SessionRecord) {
        if let Some(first) = self.run_start.take() {
            let expected = self
                .records
                .last()
                .map_or(Some(0), |previous| previous.sequence.checked_add(1));
            if self.refusal.is_none() && expected != Some(record.sequence) {
                if let Some(frame) = self.skipped.get(first) {
                    let before = self.records.last().map_or_else(
                        || "the start of the file".to_owned(),
                        |previous| format!("sequence {}", previous.sequence),
                    );
                    self.refusal = Some((
                        frame.offset,
                        format!(
                            "frame at byte {} is damaged ({}) and the records around it go from {before} to sequence {}: a recorded event may be lost",
                            frame.offset, frame.reason, record.sequence
                        ),
                    ));
                }
            }
        }
        self.records.push(record);
    }

    /// Concludes. A damaged run with no good record after it has no gap to show. The writer
    /// leaves exactly this when a process dies during an append that was sealing an earlier
    /// torn tail (seal + frame in one write), so it is read like a torn tail: the records
    /// before it are the acknowledged session. The report still lists every such frame.
    fn finish(self) -> ScanReport {
        let torn_tail_bytes = self.offset - self.partial_start;
        let verdict = match self.refusal {
            Some((offset, reason)) => Verdict::Refused { offset, reason },
            None if self.skipped.is_empty() && torn_tail_bytes == 0 => Verdict::Clean,
            None => Verdict::Recovered,
        };
        ScanReport {
            path: self.path,
            file_len: self.offset,
            records: self.records,
            skipped: self.skipped,
            torn_tail_bytes,
            verdict,
        }
    }
}
