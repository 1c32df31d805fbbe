//! Snapshotting a workspace: a walk that honours `.gitignore`, a stat cache so unchanged
//! files are not read again, the trees written, and the change list against a previous
//! snapshot.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cuca_events::{FileChange, FileChangeKind};

use crate::error::WorkspaceError;
use crate::lines::{is_binary, line_changes};
use crate::objects::{get_object, put_object, ObjectId, ObjectStore};
use crate::tree::{read_flat, write_trees, EntryKind, FileEntry, Flat};

/// The default per-file size cap: 10 MiB holds any source file, lock file or fixture a coding
/// agent edits, and keeps build outputs, datasets and disk images (which `.gitignore` usually
/// names anyway) out of a store that keeps every version.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 10 << 20;

/// How long after a file's modification time its stat is not trusted to say its content is
/// unchanged: a file written again within the file system's timestamp granularity of the
/// read can keep its size and time. One second covers every common file system (ext4 and
/// XFS stamp in jiffies, some network file systems in seconds); git's index has the same
/// "racily clean" rule.
const RACY_NS: i128 = 1_000_000_000;

/// How many recent snapshots' file lists are kept in memory for change lists: one per
/// session a proxy is recording at once, in the common case of a few.
const KEPT_FLATS: usize = 8;

/// What a snapshot leaves out and how.
#[derive(Debug, Clone)]
pub struct SnapshotConfig {
    /// Files larger than this are not stored; the snapshot's `skipped` list names them.
    pub max_file_bytes: u64,
    /// Paths never walked (absolute, or relative to the workspace): a session store inside
    /// the workspace, say, which would otherwise be snapshotted as it grows.
    pub exclude: Vec<PathBuf>,
}

impl Default for SnapshotConfig {
    fn default() -> Self {
        SnapshotConfig {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            exclude: Vec::new(),
        }
    }
}

/// One snapshot taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The root tree's address: what `WorkspaceSnapshot.snapshot` records.
    pub id: ObjectId,
    /// What changed since the previous snapshot, sorted by path (empty with none).
    pub changes: Vec<FileChange>,
    /// What was left out, a sentence per path.
    pub skipped: Vec<String>,
    /// How many files the snapshot holds.
    pub n_files: usize,
    /// How many files this snapshot read (the rest were known unchanged by their stat).
    pub n_read: u64,
    /// How many bytes the object store grew by.
    pub stored_bytes: u64,
}

impl Snapshot {
    /// The session record of this snapshot.
    pub fn event(&self) -> cuca_events::SessionEvent {
        cuca_events::SessionEvent::WorkspaceSnapshot {
            snapshot: self.id.to_string(),
            changes: self.changes.clone(),
            skipped: self.skipped.clone(),
        }
    }
}

/// What the stat cache knows of one file.
#[derive(Debug, Clone, Copy)]
struct Cached {
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    ino: u64,
    entry: FileEntry,
    /// When the file was read: its stat is trusted only if it was modified well before.
    read_at_ns: i128,
}

/// Snapshots one workspace into one object store, again and again: it keeps a stat cache
/// (path → size, times, inode → address) so that a snapshot reads only the files whose
/// stat changed, and the addresses of the objects it knows are stored.
pub struct Snapshotter {
    root: PathBuf,
    store: Arc<dyn ObjectStore>,
    config: SnapshotConfig,
    excluded: Vec<PathBuf>,
    cache: HashMap<String, Cached>,
    known: HashSet<ObjectId>,
    flats: Vec<(ObjectId, Arc<Flat>)>,
    n_reads: u64,
}

impl Snapshotter {
    /// A snapshotter of the directory `root` into `store`.
    pub fn new(
        root: &Path,
        store: Arc<dyn ObjectStore>,
        config: SnapshotConfig,
    ) -> Result<Self, WorkspaceError> {
        let root = root
            .canonicalize()
            .map_err(|error| WorkspaceError::io("open the workspace", root, error))?;
        let excluded = config
            .exclude
            .iter()
            .map(|path| {
                let path = root.join(path);
                path.canonicalize().unwrap_or(path)
            })
            .collect();
        Ok(Snapshotter {
            root,
            store,
            config,
            excluded,
            cache: HashMap::new(),
            known: HashSet::new(),
            flats: Vec::new(),
            n_reads: 0,
        })
    }

    /// The workspace, canonical.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The object store.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// How many files this snapshotter has read, over all its snapshots.
    pub fn n_reads(&self) -> u64 {
        self.n_reads
    }

    /// Snapshots the workspace now; the change list is against `previous` (a snapshot of
    /// the same store), and empty without one.
    pub fn snapshot(&mut self, previous: Option<&ObjectId>) -> Result<Snapshot, WorkspaceError> {
        let started_ns = now_ns();
        let reads_before = self.n_reads;
        let mut flat = Flat::new();
        let mut skipped = Vec::new();
        let mut cache = HashMap::with_capacity(self.cache.len());
        let mut stored_bytes = 0u64;
        for found in self.walker().build() {
            let entry = match found {
                Ok(entry) => entry,
                Err(error) => {
                    skipped.push(format!("{error}"));
                    continue;
                }
            };
            if entry.depth() == 0 {
                continue;
            }
            let Some(file_type) = entry.file_type() else {
                continue;
            };
            if file_type.is_dir() {
                continue;
            }
            let relative = entry
                .path()
                .strip_prefix(&self.root)
                .unwrap_or(entry.path());
            let Some(path) = relative.to_str().map(str::to_owned) else {
                skipped.push(format!(
                    "{}: the path is not UTF-8",
                    relative.to_string_lossy()
                ));
                continue;
            };
            let metadata = match entry.metadata() {
                Ok(metadata) => metadata,
                Err(error) => {
                    skipped.push(format!("{path}: {error}"));
                    continue;
                }
            };
            let kind = if file_type.is_symlink() {
                EntryKind::Symlink
            } else if file_type.is_file() {
                if metadata.mode() & 0o111 != 0 {
                    EntryKind::Executable
                } else {
                    EntryKind::File
                }
            } else {
                skipped.push(format!("{path}: not a file, a directory or a link"));
                continue;
            };
            if kind != EntryKind::Symlink && metadata.len() > self.config.max_file_bytes {
                skipped.push(format!(
                    "{path}: {} bytes, over the {}-byte cap",
                    metadata.len(),
                    self.config.max_file_bytes
                ));
                continue;
            }
            let stat = Cached {
                size: metadata.len(),
                mtime_ns: i128::from(metadata.mtime()) * 1_000_000_000
                    + i128::from(metadata.mtime_nsec()),
                ctime_ns: i128::from(metadata.ctime()) * 1_000_000_000
                    + i128::from(metadata.ctime_nsec()),
                ino: metadata.ino(),
                entry: FileEntry {
                    kind,
                    id: ObjectId([0; 32]),
                },
                read_at_ns: started_ns,
            };
            let cached = self.cache.get(&path).filter(|cached| {
                cached.size == stat.size
                    && cached.mtime_ns == stat.mtime_ns
                    && cached.ctime_ns == stat.ctime_ns
                    && cached.ino == stat.ino
                    && cached.entry.kind == kind
                    && cached.mtime_ns + RACY_NS < cached.read_at_ns
            });
            let entry = match cached {
                Some(cached) => {
                    cache.insert(path.clone(), *cached);
                    cached.entry
                }
                None => {
                    let bytes = match self.read(entry.path(), kind) {
                        Ok(bytes) => bytes,
                        Err(error) => {
                            skipped.push(format!("{path}: {error}"));
                            continue;
                        }
                    };
                    if bytes.len() as u64 > self.config.max_file_bytes {
                        skipped.push(format!(
                            "{path}: over the {}-byte cap",
                            self.config.max_file_bytes
                        ));
                        continue;
                    }
                    let id = ObjectId::of(&bytes);
                    if !self.known.contains(&id) {
                        let (id, grew) = put_object(self.store.as_ref(), &bytes)?;
                        stored_bytes += grew;
                        self.known.insert(id);
                    }
                    let entry = FileEntry { kind, id };
                    cache.insert(path.clone(), Cached { entry, ..stat });
                    entry
                }
            };
            flat.insert(path, entry);
        }
        self.cache = cache;
        let (id, grew) = write_trees(self.store.as_ref(), &flat, &mut self.known)?;
        stored_bytes += grew;
        let changes = match previous {
            Some(previous) if *previous != id => {
                let before = self.flat(previous)?;
                self.changes(&before, &flat)?
            }
            _ => Vec::new(),
        };
        let n_files = flat.len();
        self.keep_flat(id, Arc::new(flat));
        Ok(Snapshot {
            id,
            changes,
            skipped,
            n_files,
            n_read: self.n_reads - reads_before,
            stored_bytes,
        })
    }

    /// The files of snapshot `id`, from memory when it is recent.
    pub fn flat(&mut self, id: &ObjectId) -> Result<Arc<Flat>, WorkspaceError> {
        if let Some((_, flat)) = self.flats.iter().find(|(kept, _)| kept == id) {
            return Ok(Arc::clone(flat));
        }
        let flat = Arc::new(read_flat(self.store.as_ref(), id)?);
        self.keep_flat(*id, Arc::clone(&flat));
        Ok(flat)
    }

    fn keep_flat(&mut self, id: ObjectId, flat: Arc<Flat>) {
        self.flats.retain(|(kept, _)| *kept != id);
        if self.flats.len() >= KEPT_FLATS {
            self.flats.remove(0);
        }
        self.flats.push((id, flat));
    }

    /// The change list from `before` to `after`, with line counts read from the store.
    fn changes(&self, before: &Flat, after: &Flat) -> Result<Vec<FileChange>, WorkspaceError> {
        let mut changes = Vec::new();
        let store = self.store.as_ref();
        for (path, new) in after {
            match before.get(path) {
                None => {
                    let bytes = get_object(store, &new.id)?;
                    changes.push(change(path, FileChangeKind::Added, &[], &bytes));
                }
                Some(old) if old != new => {
                    let (old_bytes, new_bytes) = if old.id == new.id {
                        (Vec::new(), Vec::new())
                    } else {
                        (get_object(store, &old.id)?, get_object(store, &new.id)?)
                    };
                    changes.push(change(
                        path,
                        FileChangeKind::Modified,
                        &old_bytes,
                        &new_bytes,
                    ));
                }
                Some(_) => {}
            }
        }
        for (path, old) in before {
            if !after.contains_key(path) {
                let bytes = get_object(store, &old.id)?;
                changes.push(change(path, FileChangeKind::Deleted, &bytes, &[]));
            }
        }
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(changes)
    }

    /// A file's content (a link's target), at most one byte over the cap so an over-cap
    /// file that grew after its stat is caught without reading it whole.
    fn read(&mut self, path: &Path, kind: EntryKind) -> Result<Vec<u8>, std::io::Error> {
        self.n_reads += 1;
        if kind == EntryKind::Symlink {
            use std::os::unix::ffi::OsStrExt;
            return Ok(std::fs::read_link(path)?.as_os_str().as_bytes().to_vec());
        }
        let mut bytes = Vec::new();
        std::fs::File::open(path)?
            .take(self.config.max_file_bytes + 1)
            .read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    /// The walk: `.gitignore`, `.git/info/exclude` and `.ignore` files honoured (inside a git
    /// work tree or not), the user's global excludes not (they differ between machines, and
    /// a restore must give back the same files on every one), hidden files kept, links not
    /// followed, and never `.git` itself nor an excluded path.
    pub(crate) fn walker(&self) -> ignore::WalkBuilder {
        let mut builder = ignore::WalkBuilder::new(&self.root);
        builder
            .hidden(false)
            .git_ignore(true)
            .git_exclude(true)
            .git_global(false)
            .require_git(false)
            .follow_links(false);
        let excluded = self.excluded.clone();
        builder.filter_entry(move |entry| {
            entry.file_name() != ".git" && !excluded.iter().any(|path| entry.path() == path)
        });
        builder
    }
}

/// One change, with line counts unless a side is binary.
fn change(path: &str, kind: FileChangeKind, old: &[u8], new: &[u8]) -> FileChange {
    let binary = is_binary(old) || is_binary(new);
    let (added_lines, removed_lines) = if binary {
        (0, 0)
    } else {
        line_changes(old, new)
    };
    FileChange {
        path: path.to_owned(),
        kind,
        added_lines,
        removed_lines,
        binary,
    }
}

fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as i128)
}
