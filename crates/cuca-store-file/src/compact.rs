//! Compaction: a finished session's `.cslog` gzipped into `{session_id}.cslog.gz`, read
//! through a decoder, and expanded back into a live `.cslog` the first time it is written to.
//!
//! The compacted file is the gzip of the `.cslog` bytes, unchanged: the same header, frames
//! and torn tail, so a scan of it reports exactly what a scan of the live file did. Both
//! directions run under the session's lock (see [`crate::files`]). Every step writes a new
//! file and renames it into place, so a crash leaves either the old form, the new form, both
//! with the same content (the live `.cslog` wins a read), or an empty live placeholder next to
//! the compacted file (the compacted file wins), and maybe a stray hidden `.{hash}.tmp` file
//! that nothing reads.

use std::fs::File;
use std::io::{BufReader, BufWriter, ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use cuca_events::PluginError;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;

use crate::files::{create_tmp, hooks, open_regular, still_named, sync_dir, try_lock, Mode};
use crate::naming::tmp_name;
use crate::scan::{scan_reader, scan_reader_as, ScanReport, Verdict};

/// The file name extension of a compacted session: `{dir}/{session_id}.cslog.gz`.
pub const COMPACTED_EXTENSION: &str = "cslog.gz";

/// What [`crate::FileBackend::compact`] did to one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compaction {
    /// The compacted file, `{dir}/{session_id}.cslog.gz`.
    pub path: PathBuf,
    /// Records in the session.
    pub records: usize,
    /// Bytes the live `.cslog` took (zero when the session was compacted already).
    pub bytes_before: u64,
    /// Bytes the `.cslog.gz` takes.
    pub bytes_after: u64,
    /// The session had no live file and was compacted already: nothing was written.
    pub already_compacted: bool,
    /// The gzip would have been no smaller than the `.cslog` (`bytes_after` is its size), so
    /// the live file was left as it is and `path` names it; nothing was written.
    pub kept_live: bool,
}

/// A reader of the `.cslog` bytes inside a compacted file.
pub(crate) fn open_compacted(path: &Path) -> Result<GzDecoder<BufReader<File>>, PluginError> {
    let file =
        open_regular(path, Mode::Read).map_err(|error| PluginError::io("open", path, error))?;
    Ok(compacted_reader(file))
}

/// A reader of the `.cslog` bytes inside an open compacted file.
pub(crate) fn compacted_reader(file: File) -> GzDecoder<BufReader<File>> {
    GzDecoder::new(BufReader::new(file))
}

/// Scans a compacted file: the report of the `.cslog` inside, naming `path`.
///
/// A gzip stream that is damaged (a bad deflate block, a CRC-32 or length that does not
/// match) is an error naming the file: unlike a `.cslog`, a compressed file cannot be read
/// past damage.
pub(crate) fn scan_compacted(
    path: &Path,
    session_id: Option<&str>,
) -> Result<ScanReport, PluginError> {
    scan_reader_as(open_compacted(path)?, path, session_id)
}

/// Gzips the live file `file` at `live` into `packed`, checks the result, then removes `live`.
///
/// The caller holds `file`'s lock and has checked that `live` still names it, so no writer
/// appends meanwhile and nobody else compacts or expands the session. A file a load refuses
/// is not compacted: its damage is reported by [`PluginError::Corrupt`] and the file is left.
/// A compacted file that is already there (left by a crash between the rename and the removal
/// of the live file) is replaced only when its records are where the live file's start. With
/// `only_if_smaller`, a gzip no smaller than the live file is removed and the live file kept.
pub(crate) fn compact_file(
    mut file: File,
    live: &Path,
    packed: &Path,
    dir: &Path,
    only_if_smaller: bool,
) -> Result<Compaction, PluginError> {
    let report = scan_reader(&file, live)?;
    let bytes_before = report.file_len;
    if let Verdict::Refused { offset, reason } = &report.verdict {
        // The error a load of the file returns: compaction keeps what it cannot vouch for.
        return Err(PluginError::Corrupt {
            path: live.to_path_buf(),
            offset: *offset,
            message: reason.clone(),
        });
    }
    match scan_compacted(packed, None) {
        Ok(older) if !report.records.starts_with(&older.records) => {
            return Err(PluginError::Backend {
                backend: "file".into(),
                message: format!(
                    "{} holds records that {} does not: both are kept as they are; compare them before compacting",
                    packed.display(),
                    live.display()
                ),
                source: None,
            })
        }
        _ => {}
    }

    let tmp = dir.join(tmp_name(&file_name(packed)));
    let written = write_gzip(&mut file, &tmp);
    let checked = written.and_then(|()| {
        let again = scan_compacted(&tmp, None)?;
        if again.file_len == report.file_len
            && again.records == report.records
            && again.verdict == report.verdict
        {
            Ok(())
        } else {
            Err(PluginError::Backend {
                backend: "file".into(),
                message: format!(
                    "{} does not read back as {}: compaction stopped and the live file is kept",
                    tmp.display(),
                    live.display()
                ),
                source: None,
            })
        }
    });
    if let Err(error) = checked {
        let _ = std::fs::remove_file(&tmp);
        return Err(error);
    }
    let packed_len = std::fs::metadata(&tmp)
        .map_err(|error| PluginError::io("stat", &tmp, error))?
        .len();
    // Compaction is for space: a file it would grow (a 135-byte file once grew to 158
    // bytes) stays live. Not when an older compacted file is there too (a crash between the
    // rename and the removal): that pair must become one form, and the compacted one is it.
    if only_if_smaller && packed_len >= bytes_before && !packed.exists() {
        let _ = std::fs::remove_file(&tmp);
        return Ok(Compaction {
            path: live.to_path_buf(),
            records: report.records.len(),
            bytes_before,
            bytes_after: packed_len,
            already_compacted: false,
            kept_live: true,
        });
    }
    std::fs::rename(&tmp, packed).map_err(|error| PluginError::io("rename", &tmp, error))?;
    sync_dir(dir)?;
    hooks::at(hooks::Point::CompactBeforeRemoveLive);
    // From here the compacted file holds the session; the live one is the same bytes. It is
    // removed while its lock is still held: a writer waiting for it finds it gone and starts
    // its open again.
    std::fs::remove_file(live).map_err(|error| PluginError::io("remove", live, error))?;
    sync_dir(dir)?;
    drop(file);
    let bytes_after = std::fs::metadata(packed)
        .map_err(|error| PluginError::io("stat", packed, error))?
        .len();
    Ok(Compaction {
        path: packed.to_path_buf(),
        records: report.records.len(),
        bytes_before,
        bytes_after,
        already_compacted: false,
        kept_live: false,
    })
}

/// The file name of a path this crate built (always valid UTF-8).
fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Writes the gzip of `file`'s bytes (from its start) to `tmp`, synced.
fn write_gzip(file: &mut File, tmp: &Path) -> Result<(), PluginError> {
    let io = |operation: &'static str| move |error| PluginError::io(operation, tmp, error);
    file.seek(SeekFrom::Start(0)).map_err(io("read"))?;
    // A stray file from an interrupted compaction is replaced, never appended to.
    let out = create_tmp(tmp)?;
    let mut encoder = GzEncoder::new(BufWriter::new(out), flate2::Compression::default());
    std::io::copy(file, &mut encoder).map_err(io("write"))?;
    let out = encoder
        .finish()
        .map_err(io("write"))?
        .into_inner()
        .map_err(|error| PluginError::io("write", tmp, error.into_error()))?;
    out.sync_all().map_err(io("sync"))
}

/// Expands the compacted file at `packed` back into a live file at `live`, then removes
/// `packed`; returns the new live file, opened for append and locked.
///
/// The caller holds `placeholder`'s lock, the empty live file `live` names, which is what
/// makes it the only one expanding. The bytes go to a temporary file that is locked before it
/// is renamed over the placeholder, so the lock never leaves this call's hands; a writer
/// waiting on the placeholder finds it replaced and opens the new file (and gets `Locked`).
pub(crate) fn expand_locked(
    placeholder: File,
    packed: &Path,
    live: &Path,
    dir: &Path,
) -> Result<File, PluginError> {
    let tmp = dir.join(tmp_name(&file_name(live)));
    let written = (|| {
        let mut reader = open_compacted(packed)?;
        let out = create_tmp(&tmp)?;
        try_lock(&out, &tmp)?;
        let mut writer = BufWriter::new(&out);
        // The decoder checks the gzip CRC-32 and length at the end: damage is an error here.
        copy(&mut reader, &mut writer, packed, &tmp)?;
        writer
            .into_inner()
            .map_err(|error| PluginError::io("write", &tmp, error.into_error()))?;
        out.sync_all()
            .map_err(|error| PluginError::io("sync", &tmp, error))?;
        Ok(out)
    })();
    let out = match written {
        Ok(out) => out,
        Err(error) => {
            let _ = std::fs::remove_file(&tmp);
            // The placeholder holds nothing: the session is left as it was, compacted.
            if still_named(live, &placeholder).unwrap_or(false) {
                let _ = std::fs::remove_file(live);
            }
            return Err(error);
        }
    };
    hooks::at(hooks::Point::ExpandBeforeRename);
    std::fs::rename(&tmp, live).map_err(|error| PluginError::io("rename", &tmp, error))?;
    sync_dir(dir)?;
    drop(placeholder);
    hooks::at(hooks::Point::ExpandBeforeRemovePacked);
    // The live file now holds the same bytes: the compacted one is a copy.
    std::fs::remove_file(packed).map_err(|error| PluginError::io("remove", packed, error))?;
    sync_dir(dir)?;
    Ok(out)
}

/// Copies `reader` into `writer`, naming the source on a read error and the target on a write
/// error.
fn copy(
    reader: &mut impl Read,
    writer: &mut impl Write,
    from: &Path,
    to: &Path,
) -> Result<(), PluginError> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(error) => return Err(PluginError::io("read", from, error)),
        };
        writer
            .write_all(&buf[..n])
            .map_err(|error| PluginError::io("write", to, error))?;
    }
}
