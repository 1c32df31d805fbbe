//! `FileBackend::rewrite`: a session's records replaced whole, atomically, for a rewrite
//! that must leave no old byte behind (`cuca scrub`).
//!
//! Unlike a repair, which keeps the damaged file aside, a rewrite keeps nothing of the old
//! file: the point of rewriting is often that its bytes must go. The new file is written
//! under a temporary name, synced, read back and renamed over the session's file, so a
//! reader sees the old session or the new one, never a mix.

use std::io::BufReader;

use cuca_events::{PluginError, SessionRecord};
use flate2::read::GzDecoder;

use crate::files::try_lock;
use crate::repair::{sync_dir, with_suffix, write_checked};
use crate::scan::{open_regular_file, scan_reader_as, Verdict};
use crate::FileBackend;

/// The suffix of the file a rewrite writes before renaming it over the session's file.
const REWRITE_TMP_SUFFIX: &str = ".rewrite";

impl FileBackend {
    /// Replaces the records of `session_id` with `records`, atomically: a new file is
    /// written beside the session's, read back, and renamed over it; nothing of the old file
    /// is kept. `expected_last` is the last sequence the caller read the session with: if the
    /// session has changed since (another writer appended), nothing is written and the answer
    /// is [`PluginError::SequenceTaken`] naming its last sequence. The session must scan
    /// clean (a damaged one is a [`PluginError::Corrupt`]: repair it first), and `records`
    /// must all be of `session_id` with increasing sequences ([`PluginError::Validation`]).
    /// The file is locked for the whole rewrite, so a writer holding it makes this fail
    /// with [`PluginError::Locked`]. A compacted session is rewritten into a live `.cslog`.
    ///
    /// ```
    /// use cuca_events::{SessionBackend, SessionEvent, SessionRecord};
    /// use cuca_store_file::FileBackend;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let backend = FileBackend::new(dir.path())?;
    /// let record = |sequence, text: &str| SessionRecord {
    ///     session_id: "demo".into(),
    ///     sequence,
    ///     timestamp_ms: 0,
    ///     event: SessionEvent::Output { text: text.into() },
    /// };
    /// backend.append(record(0, "the key is hunter2"))?;
    /// backend.close("demo");
    /// backend.rewrite("demo", 0, &[record(0, "the key is [REDACTED:pw]")])?;
    /// assert_eq!(backend.replay("demo")?, [record(0, "the key is [REDACTED:pw]")]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rewrite(
        &self,
        session_id: &str,
        expected_last: u64,
        records: &[SessionRecord],
    ) -> Result<(), PluginError> {
        let live = self.session_path(session_id)?;
        let mut last = None;
        for record in records {
            if record.session_id != session_id || last.is_some_and(|l| record.sequence <= l) {
                return Err(PluginError::validation(
                    "SessionRecord",
                    format!(
                        "{} cannot be written into session {session_id:?}: a rewrite takes records of that session with increasing sequences",
                        record.point_id()
                    ),
                ));
            }
            last = Some(record.sequence);
        }
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
        match report.verdict {
            Verdict::Clean => {}
            Verdict::Recovered => {
                return Err(PluginError::Corrupt {
                    path: source,
                    offset: 0,
                    message:
                        "the session has recovered damage; `cuca repair` it before rewriting it"
                            .into(),
                })
            }
            Verdict::Refused { offset, reason } => {
                return Err(PluginError::Corrupt {
                    path: source,
                    offset,
                    message: reason,
                })
            }
        }
        let stored_last = report.records.last().map(|record| record.sequence);
        if stored_last != Some(expected_last) {
            return Err(PluginError::SequenceTaken {
                session_id: session_id.to_owned(),
                sequence: expected_last,
                last: stored_last.unwrap_or(0),
            });
        }
        drop(report);
        let tmp = with_suffix(&live, REWRITE_TMP_SUFFIX);
        if let Err(error) = write_checked(&tmp, session_id, records) {
            let _ = std::fs::remove_file(&tmp);
            return Err(error);
        }
        std::fs::rename(&tmp, &live).map_err(|error| PluginError::io("rename", &tmp, error))?;
        if compacted {
            std::fs::remove_file(&source)
                .map_err(|error| PluginError::io("remove", &source, error))?;
        }
        sync_dir(self.dir())?;
        drop(file);
        Ok(())
    }
}
