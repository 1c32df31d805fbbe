//! The open append handles of one `FileBackend`: at most a bounded number, the least recently
//! used closed first, so a process that records thousands of sessions keeps a bounded number
//! of file descriptors.
//!
//! Closing a handle releases its session's lock; the next append to that session opens and
//! locks the file again (and gets `Locked` if another writer took the lock meanwhile).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use crate::backend::Handle;

/// How many sessions one `FileBackend` keeps open for append by default: far below the
/// common 1,024 file descriptors a process may have, and more than a session log or a proxy
/// writes to at once.
pub const DEFAULT_MAX_OPEN_SESSIONS: usize = 256;

/// The open append handles, by session id, in the order they were last used.
///
/// A session log writes one session at a time, so the last handle answers most appends with
/// one string comparison instead of hashing the id.
#[derive(Debug)]
pub(crate) struct Handles {
    by_session: HashMap<String, (Arc<Mutex<Handle>>, u64)>,
    /// Session ids by the tick of their last use: the first is the one closed next.
    by_use: BTreeMap<u64, String>,
    /// The handle used last. It holds the highest tick, so using it again needs no update.
    last: Option<(String, Arc<Mutex<Handle>>)>,
    tick: u64,
    max_open: usize,
}

impl Handles {
    pub(crate) fn new(max_open: usize) -> Self {
        Handles {
            by_session: HashMap::new(),
            by_use: BTreeMap::new(),
            last: None,
            tick: 0,
            max_open: max_open.max(1),
        }
    }

    pub(crate) fn set_max_open(&mut self, max_open: usize) {
        self.max_open = max_open.max(1);
        self.evict_to(self.max_open);
    }

    pub(crate) fn max_open(&self) -> usize {
        self.max_open
    }

    pub(crate) fn len(&self) -> usize {
        self.by_session.len()
    }

    pub(crate) fn get(&mut self, session_id: &str) -> Option<Arc<Mutex<Handle>>> {
        if let Some((id, handle)) = &self.last {
            if id == session_id {
                return Some(Arc::clone(handle));
            }
        }
        let tick = self.next_tick();
        let (handle, used) = self.by_session.get_mut(session_id)?;
        let handle = Arc::clone(handle);
        let before = std::mem::replace(used, tick);
        self.by_use.remove(&before);
        self.by_use.insert(tick, session_id.to_owned());
        self.last = Some((session_id.to_owned(), Arc::clone(&handle)));
        Some(handle)
    }

    /// Adds a handle as the one used last, closing the least recently used ones beyond the
    /// bound first. A handle closed while an append holds it stays open until that append ends.
    pub(crate) fn insert(&mut self, session_id: String, handle: Arc<Mutex<Handle>>) {
        self.remove(&session_id);
        self.evict_to(self.max_open - 1);
        let tick = self.next_tick();
        self.by_use.insert(tick, session_id.clone());
        self.last = Some((session_id.clone(), Arc::clone(&handle)));
        self.by_session.insert(session_id, (handle, tick));
    }

    pub(crate) fn remove(&mut self, session_id: &str) -> Option<Arc<Mutex<Handle>>> {
        if self.last.as_ref().is_some_and(|(id, _)| id == session_id) {
            self.last = None;
        }
        let (handle, tick) = self.by_session.remove(session_id)?;
        self.by_use.remove(&tick);
        Some(handle)
    }

    fn evict_to(&mut self, keep: usize) {
        while self.by_session.len() > keep {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                return;
            };
            if self.last.as_ref().is_some_and(|(id, _)| *id == oldest) {
                self.last = None;
            }
            self.by_session.remove(&oldest);
        }
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }
}
