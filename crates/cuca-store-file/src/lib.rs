//! `FileBackend`: a [`SessionBackend`] that keeps each session in its own append-only
//! `.cslog` file, and the `.cslog` v1 codec.
//!
//! A file is the 9-byte header (`CUCASLOG`, version `1`) followed by one frame per append:
//! `COBS(postcard(SessionRecord) ‖ CRC-32 LE)` and a `0x00` terminator, written with one
//! `write` on a file opened with `append(true)`. Files are never truncated or rewritten.
//! `docs/cslog-format.md` has the layout byte by byte.
//!
//! ```
//! use cuca_events::{SessionBackend, SessionEvent, SessionRecord};
//! use cuca_store_file::{FileBackend, Verdict};
//!
//! let dir = tempfile::tempdir()?;
//! let backend = FileBackend::new(dir.path())?;
//! for (sequence, text) in ["system", "hello"].into_iter().enumerate() {
//!     backend.append(SessionRecord {
//!         session_id: "demo".into(),
//!         sequence: sequence as u64,
//!         timestamp_ms: 0,
//!         event: SessionEvent::Output { text: text.into() },
//!     })?;
//! }
//! let branch = backend.fork("demo", "demo:0")?;
//! assert_eq!(branch, "demo:fork:demo:0:0");
//! assert_eq!(backend.replay(&branch)?.len(), 1);
//! assert_eq!(backend.replay("demo")?.len(), 3); // two records and the Fork audit record
//! assert!(dir.path().join("demo.cslog").is_file());
//!
//! let report = backend.verify("demo")?;
//! assert_eq!(report.verdict, Verdict::Clean);
//! assert_eq!(report.records.len(), 3);
//! assert_eq!(backend.gauge().bytes_on_disk, Some(report.file_len + backend.bytes_on_disk(&branch)?));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Recovery
//!
//! Damage is tolerated only where nothing recorded was lost. A torn tail (bytes after the
//! last `0x00`, what a crash mid-append leaves) replays as the records before it, and the next
//! append seals it with a lone `0x00` before its own frame. A frame that fails to decode is
//! skipped when the records around it continue the sequence without a gap, or when no good
//! record follows it (an interrupted append). Anything else — a gap, a bad magic, an unknown
//! version — refuses the load with [`PluginError::Corrupt`] naming the file and byte offset.
//! [`scan`] and [`FileBackend::verify`] report what was found in a [`ScanReport`].
//!
//! # What it does not do
//!
//! It does not cache records: every replay reads the file. It does not count records for
//! [`SessionBackend::gauge`] (that would mean reading every file); it reports bytes on disk.
//! It never truncates, rewrites or repairs a file in place: damage is reported, and the only
//! bytes it adds to a damaged file are the sealing `0x00`. [`FileBackend::compact`] gzips a
//! finished session into a new `{session_id}.cslog.gz` (read transparently, expanded back into
//! a `.cslog` when written to) and removes the `.cslog` only once the new file reads back the
//! same. Its lock is advisory
//! (`flock`): it keeps FileBackends apart, not other programs that ignore locks. It does not
//! fold case, so on a case-insensitive file system `Demo` and `demo` are one file.
//!
//! [`SessionBackend`]: cuca_events::SessionBackend
//! [`SessionBackend::gauge`]: cuca_events::SessionBackend::gauge
//! [`PluginError::Corrupt`]: cuca_events::PluginError::Corrupt
#![forbid(unsafe_code)]

mod backend;
mod codec;
mod compact;
mod error;
pub mod golden;
mod scan;

#[cfg(test)]
mod tests;

pub use backend::{validate_session_id, Durability, FileBackend, EXTENSION, MAX_FILE_NAME_LEN};
pub use codec::{
    decode_frame, encode_frame, CRC_LEN, HEADER, HEADER_LEN, MAGIC, MAX_FRAME_LEN, VERSION,
};
pub use compact::{Compaction, COMPACTED_EXTENSION};
pub use error::FrameError;
pub use scan::{scan, scan_bytes, scan_reader, ScanReport, ScanSummary, SkippedFrame, Verdict};
