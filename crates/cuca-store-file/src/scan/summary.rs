//! A scan that hands each good record to a visitor and keeps none: a report of any length.

use std::path::{Path, PathBuf};

use cuca_events::{PluginError, ReplayedRecord};

use super::skim::SkimmedRecord;

use super::{read_frames, Finding, Finished, SkippedFrame, Take, Verdict};

/// What [`scan_each`](crate::FileBackend::verify_each) found: a [`ScanReport`](super::ScanReport)
/// without the records, which went to the visitor one by one.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScanSummary {
    /// The file scanned.
    pub path: PathBuf,
    /// The file's length in bytes when it was read (for a compacted file, of the `.cslog`
    /// bytes inside the gzip).
    pub file_len: u64,
    /// The header's version byte, as [`ScanReport::version`](super::ScanReport::version).
    pub version: Option<u8>,
    /// How many records decoded, in file order (also when the verdict is refused).
    pub n_records: u64,
    /// The first [`MAX_LISTED`](super::MAX_LISTED) runs of damaged frames, in file order.
    pub skipped: Vec<SkippedFrame>,
    /// Runs of damaged frames in all, listed or not.
    pub skipped_runs: u64,
    /// Damaged frames in all.
    pub skipped_frames: u64,
    /// Bytes in damaged runs in all.
    pub skipped_bytes: u64,
    /// Bytes after the last `0x00` (or a header cut short).
    pub torn_tail_bytes: u64,
    /// The first [`MAX_LISTED`](super::MAX_LISTED) findings, in file order.
    pub findings: Vec<Finding>,
    /// Findings in all, listed or not.
    pub findings_total: u64,
    /// The conclusion.
    pub verdict: Verdict,
}

impl ScanSummary {
    /// Whether a load of this file succeeds.
    pub fn is_loadable(&self) -> bool {
        !matches!(self.verdict, Verdict::Refused { .. })
    }
}

/// Every good record to the visitor, counted; a refusal does not stop the scan, so the
/// summary describes the whole file, as a [`ScanReport`](super::ScanReport) does.
struct Tally<'v> {
    n_records: u64,
    visit: &'v mut dyn FnMut(ReplayedRecord<'_>) -> Result<(), PluginError>,
}

impl Take for Tally<'_> {
    type Record<'a> = ReplayedRecord<'a>;
    type Stop = PluginError;
    const COUNTS_REST: bool = true;

    fn sequence(record: &ReplayedRecord<'_>) -> u64 {
        record.sequence
    }

    fn session_id<'r>(record: &'r ReplayedRecord<'_>) -> &'r str {
        record.session_id
    }

    fn take(&mut self, record: ReplayedRecord<'_>) -> Result<(), PluginError> {
        self.n_records += 1;
        (self.visit)(record)
    }

    fn refused(&mut self, _: &Path, _: u64, _: &str) -> Result<(), PluginError> {
        Ok(())
    }
}

/// Scans `.cslog` bytes from `reader` like [`scan_reader`](super::scan_reader), handing each
/// good record to `visit` instead of collecting it: memory is one read chunk and one frame,
/// whatever the file's length. An error from `visit` stops the scan and is returned.
pub(crate) fn scan_each(
    reader: impl std::io::Read,
    path: &Path,
    session_id: Option<&str>,
    visit: &mut dyn FnMut(ReplayedRecord<'_>) -> Result<(), PluginError>,
) -> Result<ScanSummary, PluginError> {
    let take = Tally {
        n_records: 0,
        visit,
    };
    let finished = read_frames(reader, path, session_id, take)??.finish();
    let n_records = finished.take.n_records;
    Ok(summarize(finished, n_records))
}

/// [`Tally`] for [`SkimmedRecord`]s: the same scan, the text left in the read buffer.
struct SkimTally<'v> {
    n_records: u64,
    visit: &'v mut dyn FnMut(SkimmedRecord<'_>) -> Result<(), PluginError>,
}

impl Take for SkimTally<'_> {
    type Record<'a> = SkimmedRecord<'a>;
    type Stop = PluginError;
    const COUNTS_REST: bool = true;

    fn sequence(record: &SkimmedRecord<'_>) -> u64 {
        record.sequence
    }

    fn session_id<'r>(record: &'r SkimmedRecord<'_>) -> &'r str {
        record.session_id
    }

    fn take(&mut self, record: SkimmedRecord<'_>) -> Result<(), PluginError> {
        self.n_records += 1;
        (self.visit)(record)
    }

    fn refused(&mut self, _: &Path, _: u64, _: &str) -> Result<(), PluginError> {
        Ok(())
    }
}

/// [`scan_each`] handing over [`SkimmedRecord`]s: the same summary, no string allocated per
/// record.
pub(crate) fn skim_each(
    reader: impl std::io::Read,
    path: &Path,
    session_id: Option<&str>,
    visit: &mut dyn FnMut(SkimmedRecord<'_>) -> Result<(), PluginError>,
) -> Result<ScanSummary, PluginError> {
    let take = SkimTally {
        n_records: 0,
        visit,
    };
    let finished = read_frames(reader, path, session_id, take)??.finish();
    let n_records = finished.take.n_records;
    Ok(summarize(finished, n_records))
}

fn summarize<T>(finished: Finished<T>, n_records: u64) -> ScanSummary {
    let Finished {
        path,
        file_len,
        version,
        take: _,
        damage,
        torn_tail_bytes,
        findings,
        findings_total,
        verdict,
    } = finished;
    ScanSummary {
        path,
        file_len,
        version,
        n_records,
        skipped: damage.listed,
        skipped_runs: damage.runs,
        skipped_frames: damage.frames,
        skipped_bytes: damage.bytes,
        torn_tail_bytes,
        findings,
        findings_total,
        verdict,
    }
}
