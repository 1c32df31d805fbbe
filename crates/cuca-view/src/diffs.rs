//! The diffs of a turn's file changes, read from the workspace object store beside a
//! directory of sessions, within a budget per turn.

use std::sync::Arc;

use cuca_events::{FileChange, SessionEvent};
use cuca_workspace::{
    file_diff, read_flat, DiffLimits, DirObjects, FileDiff, ObjectId, ObjectStore,
};

use crate::index::SessionIndex;
use crate::sessions::Located;
use crate::ViewConfig;

/// Files of one snapshot whose diff a page shows: an agent's turn edits a few files, and
/// thirty diffs of a thousand lines are a long page already. The first snapshot of a session
/// lists every file as added; past this many the rest are listed with their counts, and
/// `cuca checkout` gives them whole.
pub const MAX_DIFFED_FILES: usize = 30;

/// The lines one file's diff shows at most: a long page of a browser; the rest is counted.
pub const MAX_DIFF_LINES: usize = 1_000;

/// The bytes of diff text one snapshot shows at most, as a turn keeps at most
/// [`crate::sessions::MAX_TURN_TEXT_BYTES`] of recorded text: thirty diffs of a thousand long
/// lines would be a page of tens of megabytes. A diff that crosses it is cut there, and the
/// files after it are listed without theirs.
pub const MAX_DIFF_BYTES: usize = 256 * 1024;

/// The changes one snapshot lists at most: the first snapshot of a big workspace names every
/// file (10,000 in the benchmark's), which is no page; the rest is counted.
pub const MAX_LISTED_CHANGES: usize = 500;

/// A workspace object store, shared (a database's connection, a directory).
#[derive(Clone)]
pub struct Objects(pub Arc<dyn ObjectStore>);

impl std::fmt::Debug for Objects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Objects({})", self.0.describe())
    }
}

/// Where a page's diffs come from.
#[derive(Debug, Clone)]
pub(crate) enum Diffs {
    /// The object store beside the session's directory (or the one configured for its
    /// store), and the tree a sibling conversation snapshotted last before the session's
    /// first snapshot ([`Diffs::with_sibling_base`]).
    Store(Objects, Option<ObjectId>),
    /// No store to read: why, in words the page shows.
    Unavailable(String),
}

impl Diffs {
    /// The object store beside `located`'s directory, when it is a directory that has one,
    /// or the one `config` names for its store.
    pub(crate) fn of(config: &ViewConfig, located: &Located) -> Diffs {
        let Some(backend) = located.file() else {
            let place = located.place();
            return match config.store_objects.iter().find(|(name, _)| *name == place) {
                Some((_, objects)) => Diffs::Store(objects.clone(), None),
                None => Diffs::Unavailable(
                    "the viewer was given no workspace objects for this session's store; the record's counts are shown".into(),
                ),
            };
        };
        let dir = backend.dir().join(DirObjects::DIR_NAME).join("objects");
        if dir.is_dir() {
            Diffs::Store(Objects(Arc::new(DirObjects::at(dir))), None)
        } else {
            Diffs::Unavailable(format!(
                "no workspace objects at {} (the session was copied without them, or recorded elsewhere); the record's counts are shown",
                dir.display()
            ))
        }
    }

    /// The diff of `path` from the snapshot `old` to `new`, or why there is none.
    pub(crate) fn diff(
        &self,
        old: Option<&ObjectId>,
        new: Option<&ObjectId>,
        path: &str,
    ) -> Result<FileDiff, String> {
        let store = match self {
            Diffs::Store(store, _) => store,
            Diffs::Unavailable(why) => return Err(why.clone()),
        };
        let limits = DiffLimits {
            max_lines: MAX_DIFF_LINES,
            ..DiffLimits::default()
        };
        file_diff(store.0.as_ref(), old, new, path, limits).map_err(|e| e.to_string())
    }
}

impl Diffs {
    /// These diffs, knowing where the session's first snapshot may have been counted from: a
    /// proxy that records several conversations of one agent (`S`, `S:conv:1`, …) counts a
    /// conversation's first snapshot against the last one it took, which is another
    /// conversation's, and the record does not name it. The candidate is the latest snapshot
    /// of the session's sibling conversations at or before its first; it is used only when it
    /// gives exactly the record's changed paths ([`Diffs::base_of_first`]).
    pub(crate) fn with_sibling_base(
        self,
        config: &ViewConfig,
        session: &str,
        index: &SessionIndex,
    ) -> Diffs {
        let Diffs::Store(objects, _) = self else {
            return self;
        };
        let candidate = index
            .snapshots
            .first()
            .filter(|first| first.n_changes > 0)
            .and_then(|first| {
                let lanes = crate::timeline::lanes(config, session).ok()?;
                lanes
                    .iter()
                    .filter(|lane| lane.session != session)
                    .flat_map(|lane| lane.index.snapshots.iter())
                    .filter(|s| s.at_ms <= first.at_ms && s.tree.is_some())
                    .max_by_key(|s| s.at_ms)
                    .and_then(|s| s.tree)
            });
        Diffs::Store(objects, candidate)
    }

    /// The tree the snapshot `event` (the session's first) was counted against, when a
    /// sibling conversation's snapshot gives exactly its changed paths; `None` otherwise.
    pub(crate) fn base_of_first(&self, event: &SessionEvent) -> Option<ObjectId> {
        let Diffs::Store(store, Some(candidate)) = self else {
            return None;
        };
        let SessionEvent::WorkspaceSnapshot {
            snapshot, changes, ..
        } = event
        else {
            return None;
        };
        let tree = ObjectId::parse(snapshot).ok()?;
        let (before, after) = (
            read_flat(store.0.as_ref(), candidate).ok()?,
            read_flat(store.0.as_ref(), &tree).ok()?,
        );
        let mut changed: Vec<&str> = before
            .iter()
            .filter(|(path, entry)| after.get(*path) != Some(entry))
            .map(|(path, _)| path.as_str())
            .chain(
                after
                    .keys()
                    .filter(|path| !before.contains_key(*path))
                    .map(String::as_str),
            )
            .collect();
        changed.sort_unstable();
        let recorded: Vec<&str> = changes
            .iter()
            .map(|c: &FileChange| c.path.as_str())
            .collect();
        (changed == recorded).then_some(*candidate)
    }
}
