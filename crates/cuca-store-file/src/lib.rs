//! `FileBackend`: a [`SessionBackend`] that keeps each session in its own append-only
//! `.cslog` file, and the `.cslog` v1 codec.
//!
//! A file is the 9-byte header (`CUCASLOG`, version `2`; version `1` files are still read and
//! appended to) followed by one frame per append:
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
//! Damage is tolerated only where nothing acknowledged was lost. A torn tail (bytes after the
//! last `0x00`, what a crash mid-append leaves) replays as the records before it, and the next
//! append seals it with [`SEAL_MARK`] and a `0x00` before its own frame, so the sealed bytes
//! are recognisably an append that never completed. A frame that fails to decode is skipped
//! when it is such a sealed frame, or when the records around it continue the sequence without
//! a gap. In a v2 file (every file this build creates) a damaged frame after the last good
//! record that is not sealed, a last record whose terminator is damaged, and a sequence that
//! repeats or goes back refuse the load; a v1 file keeps the v1 reading of those (see
//! `docs/cslog-format.md`). Anything else — a gap, a bad magic, an unknown version — refuses
//! the load with [`PluginError::Corrupt`] naming the file and byte offset. [`scan`] and
//! [`FileBackend::verify`] report what was found in a [`ScanReport`], whose size is bounded
//! whatever the file holds; [`FileBackend::repair`] accepts a refused loss deliberately.
//!
//! # What it does not do
//!
//! It does not cache records: every replay reads the file. It does not count records for
//! [`SessionBackend::gauge`] (that would mean reading every file); it reports bytes on disk.
//! It never truncates, rewrites or repairs a file in place: damage is reported, the only bytes
//! it adds to a damaged file are the seal, and [`FileBackend::repair`] writes a new file and
//! keeps the damaged one aside. [`FileBackend::compact`] gzips a
//! finished session into a new `{session_id}.cslog.gz` (read transparently, expanded back into
//! a `.cslog` when written to) and removes the `.cslog` only once the new file reads back the
//! same. Its lock is advisory
//! (`flock` on the live file, also guarding creation, compaction and expansion): it keeps
//! FileBackends apart, not other programs that ignore locks. It keeps at most
//! [`DEFAULT_MAX_OPEN_SESSIONS`] sessions open for append, closing (and unlocking) the least
//! recently used first. It opens regular files only, never following a link. It does not
//! fold case, so on a case-insensitive file system `Demo` and `demo` are one file. An id too
//! long for one file name is stored under an overflow name whose true id is in its records
//! (`docs/cslog-format.md`).
//!
//! [`SessionBackend`]: cuca_events::SessionBackend
//! [`SessionBackend::gauge`]: cuca_events::SessionBackend::gauge
//! [`PluginError::Corrupt`]: cuca_events::PluginError::Corrupt
// `deny`, not `forbid`: one module, `fork`, registers a `pthread_atfork` handler (its docs
// say why); everything else is safe code.
#![deny(unsafe_code)]

mod backend;
mod codec;
mod compact;
mod error;
mod files;
mod fork;
pub mod golden;
mod handles;
mod mark;
mod naming;
mod repair;
mod rewrite;
mod scan;
mod sequence;

#[cfg(test)]
mod tests;

pub use backend::{validate_session_id, Durability, FileBackend, EXTENSION, MAX_FILE_NAME_LEN};
pub use codec::{
    decode_frame, encode_frame, CRC_LEN, HEADER, HEADER_LEN, MAGIC, MAX_FRAME_LEN, SEAL_MARK,
    VERSION, VERSION_1,
};
pub use compact::{Compaction, COMPACTED_EXTENSION};
pub use error::FrameError;
pub use handles::DEFAULT_MAX_OPEN_SESSIONS;
pub use naming::MAX_SESSION_ID_LEN;
pub use repair::{DroppedRecord, Repair};
pub use scan::{
    scan, scan_bytes, scan_reader, scan_session, Finding, FindingKind, ScanReport, ScanSummary,
    SkimmedRecord, SkippedFrame, Verdict, MAX_LISTED,
};
