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

    /// Adds a handle as the one used last, closing the least recently used idle ones beyond
    /// the bound first.
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

    /// Closes the least recently used handles until `keep` are left. A handle an append or a
    /// fork is using right now is passed over (closing it would make this backend's next open
    /// of that session find its own lock still held), so the bound can be passed by as many
    /// handles as there are appends in flight.
    fn evict_to(&mut self, keep: usize) {
        while self.by_session.len() > keep {
            let idle = self.by_use.iter().find_map(|(tick, id)| {
                let (handle, _) = self.by_session.get(id)?;
                let in_use_elsewhere = Arc::strong_count(handle)
                    > 1 + usize::from(self.last.as_ref().is_some_and(|(last, _)| last == id));
                (!in_use_elsewhere).then(|| (*tick, id.clone()))
            });
            let Some((tick, oldest)) = idle else {
                return;
            };
            self.by_use.remove(&tick);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Durability;
    use crate::files::{open_regular, try_lock, Mode};

    fn handle(dir: &std::path::Path, name: &str) -> Arc<Mutex<Handle>> {
        let path = dir.join(format!("{name}.cslog"));
        let file = open_regular(&path, Mode::CreateNew).unwrap();
        try_lock(&file, &path).unwrap();
        Arc::new(Mutex::new(
            Handle::start(file, &path, dir, Durability::Buffered, &[]).unwrap(),
        ))
    }

    /// "Keep a bounded set of open writers (least recently used closed first)."
    #[test]
    fn the_least_recently_used_idle_handle_is_closed_first() {
        let dir = tempfile::tempdir().unwrap();
        let mut handles = Handles::new(2);
        handles.insert("a".into(), handle(dir.path(), "a"));
        handles.insert("b".into(), handle(dir.path(), "b"));
        assert!(handles.get("a").is_some()); // b is now the least recently used
        handles.insert("c".into(), handle(dir.path(), "c"));
        assert_eq!(handles.len(), 2);
        assert!(handles.get("b").is_none());
        assert!(handles.get("a").is_some() && handles.get("c").is_some());
    }

    /// A handle an append is using is passed over: closing it would leave its lock held by
    /// the append while this backend opens the session again.
    #[test]
    fn a_handle_in_use_is_passed_over_and_the_next_idle_one_closed() {
        let dir = tempfile::tempdir().unwrap();
        let mut handles = Handles::new(2);
        handles.insert("a".into(), handle(dir.path(), "a"));
        handles.insert("b".into(), handle(dir.path(), "b"));
        let in_flight = handles.get("a").unwrap();
        handles.insert("c".into(), handle(dir.path(), "c"));
        assert!(handles.get("b").is_none());
        assert!(handles.get("a").is_some());
        // With every handle in use, the bound is passed rather than a busy handle closed.
        let c = handles.get("c").unwrap();
        handles.insert("d".into(), handle(dir.path(), "d"));
        assert_eq!(handles.len(), 3);
        drop((in_flight, c));
        handles.insert("e".into(), handle(dir.path(), "e"));
        assert_eq!(handles.len(), 2);
        assert!(handles.get("d").is_some() && handles.get("e").is_some());
    }
}
