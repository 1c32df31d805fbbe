//! A directory's entry list as an object, and a whole snapshot flattened to its files.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::WorkspaceError;
use crate::objects::{get_object, put_object, ObjectId, ObjectStore};

/// What an entry of a directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EntryKind {
    /// A regular file, not executable.
    File,
    /// A regular file with an execute bit.
    Executable,
    /// A symbolic link; its object holds the target.
    Symlink,
    /// A directory; its object is another tree.
    Directory,
}

/// One entry of a directory: the tree object is a postcard list of these, sorted by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TreeEntry {
    pub(crate) name: String,
    pub(crate) kind: EntryKind,
    pub(crate) id: [u8; 32],
}

/// A file of a snapshot: what it is and its content's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileEntry {
    /// File, executable or link.
    pub kind: EntryKind,
    /// The content's address.
    pub id: ObjectId,
}

/// A snapshot flattened: every file by its `/`-separated path relative to the workspace.
pub type Flat = BTreeMap<String, FileEntry>;

/// Whether `name` is one plain path component: what a tree read from a store may hold, so a
/// restore never writes outside its target (`..`, `/`, an empty name) whatever the store
/// says.
fn plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('\0')
}

/// Stores the trees of `flat` bottom-up and returns the root's address, with how many bytes
/// the store grew by. A directory whose entries are unchanged has the same address as
/// before and is found stored, so a snapshot writes only the trees on the paths to what
/// changed.
pub(crate) fn write_trees(
    store: &dyn ObjectStore,
    flat: &Flat,
    known: &mut std::collections::HashSet<ObjectId>,
) -> Result<(ObjectId, u64), WorkspaceError> {
    // Nested maps from the flat paths: a directory's entries, files and subdirectories.
    #[derive(Default)]
    struct Dir<'a> {
        files: BTreeMap<&'a str, FileEntry>,
        dirs: BTreeMap<&'a str, Dir<'a>>,
    }
    let mut root = Dir::default();
    for (path, entry) in flat {
        let mut parts: Vec<&str> = path.split('/').collect();
        let Some(name) = parts.pop() else { continue };
        let mut dir = &mut root;
        for part in parts {
            dir = dir.dirs.entry(part).or_default();
        }
        dir.files.insert(name, *entry);
    }
    fn write(
        store: &dyn ObjectStore,
        dir: &Dir<'_>,
        known: &mut std::collections::HashSet<ObjectId>,
        grew: &mut u64,
    ) -> Result<ObjectId, WorkspaceError> {
        let mut entries = Vec::with_capacity(dir.files.len() + dir.dirs.len());
        for (name, sub) in &dir.dirs {
            let id = write(store, sub, known, grew)?;
            entries.push(TreeEntry {
                name: (*name).to_owned(),
                kind: EntryKind::Directory,
                id: id.0,
            });
        }
        for (name, file) in &dir.files {
            entries.push(TreeEntry {
                name: (*name).to_owned(),
                kind: file.kind,
                id: file.id.0,
            });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let bytes = postcard::to_stdvec(&entries).map_err(|error| WorkspaceError::Store {
            store: store.describe(),
            message: format!("encode a tree: {error}"),
        })?;
        let id = ObjectId::of(&bytes);
        // Known to be stored already (written or read by this process): no store round trip.
        if known.contains(&id) {
            return Ok(id);
        }
        let (id, added) = put_object(store, &bytes)?;
        *grew += added;
        known.insert(id);
        Ok(id)
    }
    let mut grew = 0;
    let id = write(store, &root, known, &mut grew)?;
    Ok((id, grew))
}

/// The files of the snapshot whose root tree is `root`, read from `store`.
pub fn read_flat(store: &dyn ObjectStore, root: &ObjectId) -> Result<Flat, WorkspaceError> {
    let mut flat = Flat::new();
    let mut pending = vec![(String::new(), *root, 0usize)];
    while let Some((prefix, id, depth)) = pending.pop() {
        // A store's trees are data: a chain deeper than any file system allows is damage (or
        // a cycle of addresses that cannot exist without a hash collision).
        if depth > MAX_DEPTH {
            return Err(WorkspaceError::Damaged {
                id: id.to_string(),
                store: store.describe(),
                reason: format!("trees nest deeper than {MAX_DEPTH} directories"),
            });
        }
        let bytes = get_object(store, &id)?;
        let entries: Vec<TreeEntry> =
            postcard::from_bytes(&bytes).map_err(|error| WorkspaceError::Damaged {
                id: id.to_string(),
                store: store.describe(),
                reason: format!("not a tree: {error}"),
            })?;
        for entry in entries {
            if !plain_name(&entry.name) {
                return Err(WorkspaceError::Damaged {
                    id: id.to_string(),
                    store: store.describe(),
                    reason: format!("entry {:?} is not a plain file name", entry.name),
                });
            }
            let path = if prefix.is_empty() {
                entry.name
            } else {
                format!("{prefix}/{}", entry.name)
            };
            match entry.kind {
                EntryKind::Directory => pending.push((path, ObjectId(entry.id), depth + 1)),
                kind => {
                    flat.insert(
                        path,
                        FileEntry {
                            kind,
                            id: ObjectId(entry.id),
                        },
                    );
                }
            }
        }
    }
    Ok(flat)
}

/// Deeper than Linux's `PATH_MAX` (4096 bytes) allows with one-letter names.
const MAX_DEPTH: usize = 2048;

/// The file at `path` (`/`-separated, relative to the workspace) in the snapshot whose root
/// tree is `root`, reading only the trees on the way to it; `None` when the snapshot has no
/// file there (a directory at `path` is no file either).
pub fn find_file(
    store: &dyn ObjectStore,
    root: &ObjectId,
    path: &str,
) -> Result<Option<FileEntry>, WorkspaceError> {
    let mut parts = path.split('/').peekable();
    let mut tree = *root;
    while let Some(name) = parts.next() {
        let bytes = get_object(store, &tree)?;
        let entries: Vec<TreeEntry> =
            postcard::from_bytes(&bytes).map_err(|error| WorkspaceError::Damaged {
                id: tree.to_string(),
                store: store.describe(),
                reason: format!("not a tree: {error}"),
            })?;
        let Some(entry) = entries.into_iter().find(|entry| entry.name == name) else {
            return Ok(None);
        };
        match (entry.kind, parts.peek().is_some()) {
            (EntryKind::Directory, true) => tree = ObjectId(entry.id),
            (EntryKind::Directory, false) | (_, true) => return Ok(None),
            (kind, false) => {
                return Ok(Some(FileEntry {
                    kind,
                    id: ObjectId(entry.id),
                }))
            }
        }
    }
    Ok(None)
}
