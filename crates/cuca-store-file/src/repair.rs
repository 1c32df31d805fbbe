//! `FileBackend::repair`: the deliberate way to accept a loss the reader refuses to hide.
//!
//! A load refuses a file whose damage may have lost an acknowledged record. A person who
//! decides the rest is worth keeping runs a repair: it writes a new file of the good records
//! (every good record whose sequence increases on the one kept before it), keeps the damaged
//! file aside under a new name, and says what was dropped. Nothing is edited in place: the new
//! file is written under a temporary name, read back, and renamed over the session's file,
//! whose old bytes stay whole at the aside name.

use std::fs::File;
use std::io::{BufReader, BufWriter, ErrorKind, Write};
use std::path::{Path, PathBuf};

use cuca_events::{PluginError, SessionRecord};
use flate2::read::GzDecoder;

use crate::backend::MAX_FILE_NAME_LEN;
use crate::codec::{encode_frame_with, HEADER};
use crate::files::try_lock;
use crate::scan::{
    open_regular_file, scan_reader_as, scan_session, ScanReport, SkippedFrame, Verdict,
};
use crate::FileBackend;

/// The suffix of the file a repair writes before renaming it over the session's file.
const REPAIR_TMP_SUFFIX: &str = ".repair";

/// The suffix of the name a repaired file's old bytes are kept under: `.damaged`, then
/// `.damaged.1`, `.damaged.2`, … so an earlier repair's file is never replaced.
const ASIDE_SUFFIX: &str = ".damaged";

/// How many aside names a repair tries (`.damaged` .. `.damaged.999`).
const MAX_ASIDE: u32 = 1000;

/// A good record a repair left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedRecord {
    /// The record's sequence.
    pub sequence: u64,
    /// The sequence of the record kept before it, which it does not exceed (a repeated or
    /// backward sequence).
    pub after: u64,
}

/// What [`FileBackend::repair`] did to one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// The session's file, written anew (a v2 `.cslog`).
    pub path: PathBuf,
    /// Where the damaged file's bytes are kept, unchanged.
    pub kept_aside: PathBuf,
    /// The verdict the damaged file had.
    pub verdict_before: Verdict,
    /// Records in the new file.
    pub records_kept: usize,
    /// Good records left out because their sequence did not increase.
    pub dropped_records: Vec<DroppedRecord>,
    /// The damaged runs that were dropped (the first [`crate::MAX_LISTED`]).
    pub skipped: Vec<SkippedFrame>,
    /// Damaged runs, frames and bytes dropped in all.
    pub skipped_runs: u64,
    /// Damaged frames dropped in all.
    pub skipped_frames: u64,
    /// Bytes of damaged frames dropped in all.
    pub skipped_bytes: u64,
    /// Bytes of a torn tail dropped.
    pub torn_tail_bytes: u64,
}

impl FileBackend {
    /// Accepts the loss in a damaged session deliberately: writes a new file of its good
    /// records, keeps the damaged file aside as `{file}.damaged` (or `.damaged.N`), and
    /// returns what was dropped. `Ok(None)` when the file is clean and nothing needs dropping
    /// (nothing is written then).
    ///
    /// Kept: every record that decodes, in file order, except one whose sequence does not
    /// exceed the last kept record's. Dropped: damaged frames, a torn tail, and those records.
    /// A record of another session id is kept as it is (a renamed file stays readable). A
    /// compacted session is repaired into a live `.cslog`. The file is locked for the whole
    /// repair, so a writer holding it makes this fail with [`PluginError::Locked`] and change
    /// nothing; stop writers first. A file that is not a `.cslog` at all (bad magic, unknown
    /// version) is not rewritten: the load's [`PluginError::Corrupt`] comes back.
    ///
    /// ```
    /// use cuca_events::{SessionBackend, SessionEvent, SessionRecord};
    /// use cuca_store_file::FileBackend;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let backend = FileBackend::new(dir.path())?;
    /// for sequence in 0..3 {
    ///     backend.append(SessionRecord {
    ///         session_id: "demo".into(),
    ///         sequence,
    ///         timestamp_ms: 0,
    ///         event: SessionEvent::Output { text: "noted".into() },
    ///     })?;
    /// }
    /// backend.close("demo");
    /// let path = dir.path().join("demo.cslog");
    /// let mut bytes = std::fs::read(&path)?;
    /// let len = bytes.len();
    /// bytes[len - 3] ^= 0x01; // one bit of the last, acknowledged record
    /// std::fs::write(&path, &bytes)?;
    /// assert!(backend.replay("demo").is_err()); // refused: a record may be lost
    ///
    /// let repair = backend.repair("demo")?.expect("damaged");
    /// assert_eq!(repair.records_kept, 2);
    /// assert_eq!(repair.skipped_frames, 1);
    /// assert_eq!(std::fs::read(&repair.kept_aside)?, bytes); // the damaged bytes, kept
    /// assert_eq!(backend.replay("demo")?.len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn repair(&self, session_id: &str) -> Result<Option<Repair>, PluginError> {
        let live = self.session_path(session_id)?;
        self.close(session_id);
        let (source, compacted) = if live.exists() {
            (live.clone(), false)
        } else if self.is_compacted(session_id)? {
            (self.compacted_path(session_id)?, true)
        } else {
            return Err(PluginError::NotFound {
                what: "session".into(),
                id: session_id.into(),
            });
        };
        let longest = name_len(&source) + ASIDE_SUFFIX.len() + ".999".len();
        if longest.max(name_len(&live) + REPAIR_TMP_SUFFIX.len()) > MAX_FILE_NAME_LEN {
            return Err(PluginError::validation(
                "session_id",
                format!(
                    "{session_id:?} is too long to repair: the name its damaged file is kept under would pass the {MAX_FILE_NAME_LEN}-byte file name limit"
                ),
            ));
        }
        let file = open_regular_file(&source, "a session file is {dir}/{session_id}.cslog")?;
        try_lock(&file, &source)?;
        let report = if compacted {
            scan_reader_as(
                GzDecoder::new(BufReader::new(&file)),
                &source,
                Some(session_id),
            )?
        } else {
            scan_reader_as(&file, &source, Some(session_id))?
        };
        if report.version.is_none() {
            // Not a .cslog this build reads, or a header cut short: nothing to keep.
            if let Verdict::Refused { offset, reason } = report.verdict {
                return Err(PluginError::Corrupt {
                    path: source,
                    offset,
                    message: reason,
                });
            }
        }
        let ScanReport {
            records,
            verdict,
            skipped,
            skipped_runs,
            skipped_frames,
            skipped_bytes,
            torn_tail_bytes,
            ..
        } = report;
        let (kept, dropped_records) = keep_increasing(records);
        if verdict == Verdict::Clean && dropped_records.is_empty() {
            return Ok(None);
        }

        let tmp = with_suffix(&live, REPAIR_TMP_SUFFIX);
        if let Err(error) = write_checked(&tmp, session_id, &kept) {
            let _ = std::fs::remove_file(&tmp);
            return Err(error);
        }
        let kept_aside = match keep_aside(&source) {
            Ok(aside) => aside,
            Err(error) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(error);
            }
        };
        sync_dir(self.dir())?;
        std::fs::rename(&tmp, &live).map_err(|error| PluginError::io("rename", &tmp, error))?;
        if compacted {
            // Its bytes are kept aside; the live file is the session now.
            std::fs::remove_file(&source)
                .map_err(|error| PluginError::io("remove", &source, error))?;
        }
        sync_dir(self.dir())?;
        drop(file);
        Ok(Some(Repair {
            path: live,
            kept_aside,
            verdict_before: verdict,
            records_kept: kept.len(),
            dropped_records,
            skipped,
            skipped_runs,
            skipped_frames,
            skipped_bytes,
            torn_tail_bytes,
        }))
    }
}

fn name_len(path: &Path) -> usize {
    path.file_name().map_or(0, |name| name.len())
}

/// `path` with `suffix` appended to its file name.
pub(crate) fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Every record whose sequence exceeds the last kept one's, and the others.
fn keep_increasing(records: Vec<SessionRecord>) -> (Vec<SessionRecord>, Vec<DroppedRecord>) {
    let mut kept: Vec<SessionRecord> = Vec::with_capacity(records.len());
    let mut dropped = Vec::new();
    for record in records {
        match kept.last() {
            Some(last) if record.sequence <= last.sequence => dropped.push(DroppedRecord {
                sequence: record.sequence,
                after: last.sequence,
            }),
            _ => kept.push(record),
        }
    }
    (kept, dropped)
}

/// Writes a v2 file of `records` at `tmp` (replacing a stray one), synced, and reads it back.
pub(crate) fn write_checked(
    tmp: &Path,
    session_id: &str,
    records: &[SessionRecord],
) -> Result<(), PluginError> {
    let io = |operation: &'static str| move |error| PluginError::io(operation, tmp, error);
    let mut out = BufWriter::new(File::create(tmp).map_err(io("create"))?);
    out.write_all(&HEADER).map_err(io("write"))?;
    let (mut scratch, mut frame) = (Vec::new(), Vec::new());
    for record in records {
        frame.clear();
        encode_frame_with(record, &mut scratch, &mut frame).map_err(|error| {
            PluginError::validation(
                "SessionRecord",
                format!("{} cannot be stored: {error}", record.point_id()),
            )
        })?;
        out.write_all(&frame).map_err(io("write"))?;
    }
    let out = out
        .into_inner()
        .map_err(|error| PluginError::io("write", tmp, error.into_error()))?;
    out.sync_all().map_err(io("sync"))?;
    let again = scan_session(tmp, session_id)?;
    if again.verdict != Verdict::Clean || again.records != records {
        return Err(PluginError::Backend {
            backend: "file".into(),
            message: format!(
                "{} does not read back as the records it was written from: the repair stopped and changed nothing",
                tmp.display()
            ),
            source: None,
        });
    }
    Ok(())
}

/// Links `source` under the first free aside name; a hard link never replaces a file.
fn keep_aside(source: &Path) -> Result<PathBuf, PluginError> {
    for n in 0..MAX_ASIDE {
        let suffix = if n == 0 {
            ASIDE_SUFFIX.to_owned()
        } else {
            format!("{ASIDE_SUFFIX}.{n}")
        };
        let aside = with_suffix(source, &suffix);
        match std::fs::hard_link(source, &aside) {
            Ok(()) => return Ok(aside),
            Err(error) if error.kind() == ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(PluginError::io("link", &aside, error)),
        }
    }
    Err(PluginError::io(
        "link",
        source,
        std::io::Error::other(format!(
            "{MAX_ASIDE} earlier repairs' files are kept beside it already; move some away"
        )),
    ))
}

pub(crate) fn sync_dir(dir: &Path) -> Result<(), PluginError> {
    File::open(dir)
        .and_then(|dir| dir.sync_all())
        .map_err(|error| PluginError::io("sync", dir, error))
}
