//! `FileBackend::create_session`: create-if-absent, atomic across backends and processes.

use std::sync::{Arc, Mutex};

use cuca_events::PluginError;

use super::{FileBackend, Handle};

impl FileBackend {
    /// Creates session `session_id`, empty, if no session of that id exists, and keeps it
    /// open for append in this instance, locked, as its first append would.
    ///
    /// Returns `true` when this call created it: every record this instance appends to it
    /// next lands in a session nobody else has written to, and no other backend (in this
    /// process or another) can append to it until [`FileBackend::close`] or drop. Returns
    /// `false`, changing nothing, when the session exists already: a live `.cslog`, a
    /// compacted `.cslog.gz`, or a file another writer created a moment ago.
    ///
    /// It is atomic: the file is made with `O_CREAT | O_EXCL` and locked before its header
    /// is written, so of two callers racing for one new id exactly one gets `true`. A
    /// compacted session is never absent in between: compaction and expansion each keep
    /// one of the two files in place at every step. This is how `cuca import` writes a new
    /// session only, without a window between checking and writing.
    ///
    /// ```
    /// use cuca_events::{SessionBackend, SessionEvent, SessionRecord};
    /// use cuca_store_file::FileBackend;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let mine = FileBackend::new(dir.path())?;
    /// let theirs = FileBackend::new(dir.path())?;
    /// assert!(mine.create_session("import")?);
    /// assert!(!theirs.create_session("import")?); // exists: theirs writes nothing
    /// mine.append(SessionRecord {
    ///     session_id: "import".into(),
    ///     sequence: 0,
    ///     timestamp_ms: 0,
    ///     event: SessionEvent::Output { text: "mine".into() },
    /// })?;
    /// assert_eq!(theirs.replay("import")?.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_session(&self, session_id: &str) -> Result<bool, PluginError> {
        let path = self.session_path(session_id)?;
        // Held throughout, so this instance's own appends and forks cannot open the session
        // in between.
        let mut handles = self.lock_handles();
        if handles.get(session_id).is_some() {
            return Ok(false);
        }
        // `claim_new` creates the live file exclusively and locks it, and refuses an id
        // stored in any form (live, compacted, or made by another writer a moment ago).
        match self.claim_new(session_id)? {
            Some(file) => {
                let handle = Handle::start(file, &path, &self.dir, self.durability, &[])?;
                handles.insert(session_id.to_owned(), Arc::new(Mutex::new(handle)));
                Ok(true)
            }
            None => Ok(false),
        }
    }
}
