//! Compaction: a finished session's `.cslog` gzipped into `{session_id}.cslog.gz`, read
//! through a decoder, and expanded back into a live `.cslog` the first time it is written to.
//!
//! The compacted file is the gzip of the `.cslog` bytes, unchanged: the same header, frames
//! and torn tail, so a scan of it reports exactly what a scan of the live file did. Every
//! step writes a new file and renames or links it into place, so a crash leaves either the
//! old form, the new form, or both with the same content (the live `.cslog` wins a read), and
//! a stray `….tmp` file that nothing reads.

use std::fs::File;
use std::io::{BufReader, BufWriter, ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use cuca_events::PluginError;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;

use crate::scan::{open_regular_file, scan_reader, scan_reader_as, ScanReport, Verdict};

/// The file name extension of a compacted session: `{dir}/{session_id}.cslog.gz`.
pub const COMPACTED_EXTENSION: &str = "cslog.gz";

/// The suffix of the temporary file a compaction or an expansion writes before renaming or
/// linking it into place.
pub(crate) const COMPACTION_TMP_SUFFIX: &str = ".tmp";

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
}

/// `path` with `suffix` appended to its file name (`a.cslog` → `a.cslog.tmp`).
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// A reader of the `.cslog` bytes inside a compacted file.
pub(crate) fn open_compacted(path: &Path) -> Result<GzDecoder<BufReader<File>>, PluginError> {
    let file = open_regular_file(path, "a compacted session is {dir}/{session_id}.cslog.gz")?;
    Ok(GzDecoder::new(BufReader::new(file)))
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

/// Flushes a directory's entries (a rename, a link, an unlink) to disk.
fn sync_dir(dir: &Path) -> Result<(), PluginError> {
    File::open(dir)
        .and_then(|dir| dir.sync_all())
        .map_err(|error| PluginError::io("sync", dir, error))
}

/// Gzips the live file at `live` into `packed`, checks the result, then removes `live`.
///
/// The caller has closed its own append handle; `lock` takes the file's advisory lock, so a
/// writer elsewhere makes this fail rather than lose its appends. A file a load refuses is
/// not compacted: its damage is reported by [`PluginError::Corrupt`] and the file is left.
pub(crate) fn compact_file(
    live: &Path,
    packed: &Path,
    dir: &Path,
    lock: impl FnOnce(&File, &Path) -> Result<(), PluginError>,
) -> Result<Compaction, PluginError> {
    let mut file = File::open(live).map_err(|error| PluginError::io("open", live, error))?;
    lock(&file, live)?;
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

    let tmp = with_suffix(packed, COMPACTION_TMP_SUFFIX);
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
    std::fs::rename(&tmp, packed).map_err(|error| PluginError::io("rename", &tmp, error))?;
    sync_dir(dir)?;
    // From here the compacted file holds the session; the live one is the same bytes.
    std::fs::remove_file(live).map_err(|error| PluginError::io("remove", live, error))?;
    sync_dir(dir)?;
    let bytes_after = std::fs::metadata(packed)
        .map_err(|error| PluginError::io("stat", packed, error))?
        .len();
    Ok(Compaction {
        path: packed.to_path_buf(),
        records: report.records.len(),
        bytes_before,
        bytes_after,
        already_compacted: false,
    })
}

/// Writes the gzip of `file`'s bytes (from its start) to `tmp`, synced.
fn write_gzip(file: &mut File, tmp: &Path) -> Result<(), PluginError> {
    let io = |operation: &'static str| move |error| PluginError::io(operation, tmp, error);
    file.seek(SeekFrom::Start(0)).map_err(io("read"))?;
    // A stray file from an interrupted compaction is replaced, never appended to.
    let out = File::create(tmp).map_err(io("create"))?;
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
/// `packed`. A live file that appeared meanwhile (another writer expanded it first) is kept
/// as it is.
pub(crate) fn expand_file(packed: &Path, live: &Path, dir: &Path) -> Result<(), PluginError> {
    let tmp = with_suffix(live, COMPACTION_TMP_SUFFIX);
    let written = (|| {
        let mut reader = open_compacted(packed)?;
        let out = File::create(&tmp).map_err(|error| PluginError::io("create", &tmp, error))?;
        let mut out = BufWriter::new(out);
        // The decoder checks the gzip CRC-32 and length at the end: damage is an error here.
        copy(&mut reader, &mut out, packed, &tmp)?;
        let out = out
            .into_inner()
            .map_err(|error| PluginError::io("write", &tmp, error.into_error()))?;
        out.sync_all()
            .map_err(|error| PluginError::io("sync", &tmp, error))
    })();
    if let Err(error) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(error);
    }
    // A hard link never replaces an existing file, where a rename would.
    let linked = std::fs::hard_link(&tmp, live);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {}
        Err(error) if error.kind() == ErrorKind::AlreadyExists => return Ok(()),
        Err(error) => return Err(PluginError::io("link", live, error)),
    }
    sync_dir(dir)?;
    std::fs::remove_file(packed).map_err(|error| PluginError::io("remove", packed, error))?;
    sync_dir(dir)
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
