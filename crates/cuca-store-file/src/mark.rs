//! What a read mark knows a session file by, so a mark into a file since replaced is stale.
//!
//! A file's device and inode are not enough: `cp other.cslog s.cslog` writes into the same
//! inode, and ext4 hands an `rm`ed inode number straight back to the next file made. A mark's
//! check therefore also covers bytes that a replacement cannot share by chance: the file's
//! header and first frame (the session id, the first record's sequence and millisecond
//! timestamp, and its CRC-32), its birth time where the file system keeps one, and the bytes
//! just before the mark (the CRC-32 of the record the mark stands after). Each is read again
//! when the mark is used: a few KiB, whatever the session's length.

use std::fs::{File, Metadata};
use std::hash::{Hash, Hasher};

use cuca_events::SessionStamp;

use crate::codec::HEADER_LEN;

/// How many bytes after the header a check covers, at most: the first frame whole where it
/// is shorter (most are: a system prompt or a first message), else its first 4 KiB, which
/// hold the record's session id, sequence and timestamp. A fixed window, so the bytes it
/// covers never change as the file grows.
const HEAD_PROBE: usize = 4096;

/// How many bytes before a mark its check covers, at most: the end of the frame the mark
/// stands after, its terminator included — the COBS-coded CRC-32 of its record and the
/// record's last bytes (a small record whole: its session id, sequence and timestamp) — never
/// a byte of the frame before it, so a scan can take them from the frame it just decoded.
pub(crate) const FRAME_TAIL: usize = 64;

/// Set in the check of a mark into a compacted file, so it never equals a live file's.
const COMPACTED_CHECK: u64 = 1 << 63;

/// What every mark into one open live file shares: its identity and its head. A mark's own
/// check adds the bytes just before it ([`FileCheck::at`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FileCheck {
    base: u64,
}

impl FileCheck {
    /// Reads what an open live session file is known by.
    pub(crate) fn of_live(file: &File) -> std::io::Result<FileCheck> {
        let mut hasher = hasher();
        identity(file, &mut hasher)?;
        let mut head = [0u8; HEADER_LEN + HEAD_PROBE];
        let n = read_at(file, 0, &mut head)?;
        // The header, then the first frame up to its terminator (or the whole window).
        let end = head[..n]
            .iter()
            .skip(HEADER_LEN)
            .position(|&byte| byte == 0)
            .map_or(n, |at| HEADER_LEN + at + 1);
        head[..end].hash(&mut hasher);
        Ok(FileCheck {
            base: hasher.finish(),
        })
    }

    /// The check of a mark at byte `position`, read from the file: the bytes of the frame
    /// that ends there, at most [`FRAME_TAIL`] of them.
    pub(crate) fn at(&self, file: &File, position: u64) -> std::io::Result<u64> {
        let from = position
            .saturating_sub(FRAME_TAIL as u64)
            .max(HEADER_LEN as u64)
            .min(position);
        let mut window = [0u8; FRAME_TAIL];
        // `position - from` is at most FRAME_TAIL, so it fits the window.
        let want = usize::try_from(position - from).map_or(FRAME_TAIL, |n| n.min(FRAME_TAIL));
        let n = read_at(file, from, &mut window[..want])?;
        let window = &window[..n];
        // The frame starts after the last terminator before its own (frames hold no zero).
        let start = match window.split_last() {
            Some((_, body)) => body
                .iter()
                .rposition(|&byte| byte == 0)
                .map_or(0, |at| at + 1),
            None => 0,
        };
        Ok(self.of_tail(position, &window[start..]))
    }

    /// The check of a mark at byte `position` whose frame ends in `frame_tail` (at most
    /// [`FRAME_TAIL`] bytes, its terminator included), as a scan that just read the frame
    /// has it.
    pub(crate) fn of_tail(&self, position: u64, frame_tail: &[u8]) -> u64 {
        let mut hasher = hasher();
        self.base.hash(&mut hasher);
        position.hash(&mut hasher);
        frame_tail.hash(&mut hasher);
        live(hasher.finish())
    }
}

/// Reads what a check covers from `offset` (as much of `buf` as the file holds there). One
/// positioned read where the platform has one: it runs each time a mark is used, so it costs
/// one system call and leaves the handle's cursor alone.
fn read_at(file: &File, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        #[cfg(unix)]
        let read = {
            use std::os::unix::fs::FileExt;
            file.read_at(&mut buf[filled..], offset + filled as u64)
        };
        #[cfg(not(unix))]
        let read = {
            use std::io::{Read, Seek, SeekFrom};
            let mut handle = file;
            handle
                .seek(SeekFrom::Start(offset + filled as u64))
                .and_then(|_| handle.read(&mut buf[filled..]))
        };
        match read {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}

/// The check of every mark into an open compacted session file: its identity, and the gzip
/// trailer (the CRC-32 and length of everything the file holds), which a replacement does
/// not share. A compacted file is never appended to, so one check stands for all its marks.
pub(crate) fn compacted_check(file: &File) -> std::io::Result<u64> {
    let mut hasher = hasher();
    identity(file, &mut hasher)?;
    let len = file.metadata()?.len();
    len.hash(&mut hasher);
    let mut trailer = [0u8; 8];
    let n = read_at(file, len.saturating_sub(8), &mut trailer)?;
    trailer[..n].hash(&mut hasher);
    Ok(live(hasher.finish()) | COMPACTED_CHECK)
}

/// The stamp of a session stored in the file `metadata` describes (one `lstat`, taken without
/// opening it): its length in the high 64 bits, so an append always changes the stamp, and in
/// the low 64 a hash of its device, inode, modification and status-change times, so a file
/// renamed over the session's (another inode) or rewritten in place (later times) does too.
/// What it cannot tell: a file rewritten in place to the same length within one tick of the
/// file system's clock (a few milliseconds where timestamps are coarse).
pub(crate) fn stamp(metadata: &Metadata, compacted: bool) -> SessionStamp {
    let mut hasher = hasher();
    compacted.hash(&mut hasher);
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        metadata.dev().hash(&mut hasher);
        metadata.ino().hash(&mut hasher);
        (metadata.mtime(), metadata.mtime_nsec()).hash(&mut hasher);
        (metadata.ctime(), metadata.ctime_nsec()).hash(&mut hasher);
    }
    #[cfg(not(unix))]
    {
        // Where the platform keeps no such time this is an error, and the length stands.
        if let Ok(modified) = metadata.modified() {
            modified.hash(&mut hasher);
        }
    }
    SessionStamp((u128::from(metadata.len()) << 64) | u128::from(hasher.finish()))
}

/// The stamp of a session with no file: a live or compacted file's has a length of at least a
/// header, so it never equals this.
pub(crate) const NO_FILE: SessionStamp = SessionStamp(0);

/// A hasher with fixed keys: a mark is compared only within the process that handed it out,
/// so the value need not be stable across builds, only within one.
fn hasher() -> std::hash::DefaultHasher {
    std::hash::DefaultHasher::new()
}

/// Feeds the file's device, inode and birth time into `hasher`, where the platform has them.
fn identity(file: &File, hasher: &mut impl Hasher) -> std::io::Result<()> {
    let metadata = file.metadata()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        metadata.dev().hash(hasher);
        metadata.ino().hash(hasher);
    }
    // Where the file system keeps no birth time this is an error, and the other parts stand.
    if let Ok(born) = metadata.created() {
        born.hash(hasher);
    }
    Ok(())
}

/// A live file's check: never 0 (the check of [`cuca_events::ReadMark::START`] and of the
/// trait's default marks), never with the compacted bit.
fn live(value: u64) -> u64 {
    (value & !COMPACTED_CHECK).max(1)
}
