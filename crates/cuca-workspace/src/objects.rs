//! Content-addressed objects: a file's bytes, a directory's entry list or a command's output
//! stream, each stored compressed under the SHA-256 of its uncompressed bytes.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::WorkspaceError;

/// The largest object a read decompresses. Files over the snapshot's size cap are never
/// stored, and the default cap is 10 MiB; 256 MiB leaves room for a raised cap while a
/// damaged or hostile object that inflates without end is refused instead of filling memory.
pub const MAX_OBJECT_BYTES: u64 = 256 << 20;

/// An object's content address: the SHA-256 of its uncompressed bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId(pub [u8; 32]);

impl ObjectId {
    /// The address of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        ObjectId(Sha256::digest(bytes).into())
    }

    /// Parses `sha256:` and 64 lower-case hex digits, as [`std::fmt::Display`] writes it.
    pub fn parse(text: &str) -> Result<Self, WorkspaceError> {
        let bad = || WorkspaceError::BadId {
            text: text.to_owned(),
        };
        let hex_part = text.strip_prefix("sha256:").ok_or_else(bad)?;
        let mut id = [0u8; 32];
        hex::decode_to_slice(hex_part, &mut id).map_err(|_| bad())?;
        Ok(ObjectId(id))
    }

    /// The 64 hex digits alone.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl std::fmt::Display for ObjectId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl std::fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ObjectId({self})")
    }
}

/// Where objects are kept. An implementation stores the compressed bytes it is handed and
/// hands them back; compression and the address check are [`put_object`]'s and
/// [`get_object`]'s, so every store keeps the same bytes.
pub trait ObjectStore: Send + Sync {
    /// Whether `id` is stored.
    fn has(&self, id: &ObjectId) -> Result<bool, WorkspaceError>;
    /// Stores `compressed` under `id`; storing an id twice is not an error (the bytes are
    /// the same, the address says so).
    fn put(&self, id: &ObjectId, compressed: &[u8]) -> Result<(), WorkspaceError>;
    /// The compressed bytes stored under `id`, or `None`.
    fn get(&self, id: &ObjectId) -> Result<Option<Vec<u8>>, WorkspaceError>;
    /// Where the store is, for messages.
    fn describe(&self) -> String;
}

/// Compresses `bytes` and stores them under their address, unless they are there already;
/// returns the address and how many bytes the store grew by (0 when it had them).
pub fn put_object(
    store: &dyn ObjectStore,
    bytes: &[u8],
) -> Result<(ObjectId, u64), WorkspaceError> {
    let id = ObjectId::of(bytes);
    if store.has(&id)? {
        return Ok((id, 0));
    }
    let compressed = compress(bytes, &store.describe())?;
    store.put(&id, &compressed)?;
    Ok((id, compressed.len() as u64))
}

/// The uncompressed bytes of `id`, checked against the address.
pub fn get_object(store: &dyn ObjectStore, id: &ObjectId) -> Result<Vec<u8>, WorkspaceError> {
    let compressed = store.get(id)?.ok_or_else(|| WorkspaceError::Missing {
        id: id.to_string(),
        store: store.describe(),
    })?;
    let damaged = |reason: String| WorkspaceError::Damaged {
        id: id.to_string(),
        store: store.describe(),
        reason,
    };
    let mut bytes = Vec::new();
    flate2::read::ZlibDecoder::new(compressed.as_slice())
        .take(MAX_OBJECT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| damaged(format!("it does not decompress: {error}")))?;
    if bytes.len() as u64 > MAX_OBJECT_BYTES {
        return Err(damaged(format!(
            "it inflates past {MAX_OBJECT_BYTES} bytes"
        )));
    }
    if ObjectId::of(&bytes) != *id {
        return Err(damaged("its bytes have another address".into()));
    }
    Ok(bytes)
}

/// zlib at level 1: a snapshot compresses what changed on every model call, where speed
/// counts more than the last few per cent (level 6 is about three times slower on source
/// text for some 5% less).
fn compress(bytes: &[u8], store: &str) -> Result<Vec<u8>, WorkspaceError> {
    let mut encoder = flate2::write::ZlibEncoder::new(
        Vec::with_capacity(bytes.len() / 2 + 64),
        flate2::Compression::fast(),
    );
    encoder
        .write_all(bytes)
        .and_then(|()| encoder.finish())
        .map_err(|error| WorkspaceError::Store {
            store: store.to_owned(),
            message: format!("compress an object: {error}"),
        })
}

/// The workspace store beside a directory of sessions: `DIR/.cuca-workspace/objects/`, one
/// file per object, named by its hex address split after two digits as git does, so no
/// directory holds more than a few thousand entries.
#[derive(Debug, Clone)]
pub struct DirObjects {
    root: PathBuf,
}

impl DirObjects {
    /// The name of the directory kept inside a session store.
    pub const DIR_NAME: &'static str = ".cuca-workspace";

    /// The objects of the session store at `sessions` (created on first write).
    pub fn beside(sessions: &Path) -> Self {
        DirObjects {
            root: sessions.join(Self::DIR_NAME).join("objects"),
        }
    }

    /// Objects kept directly under `root`.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        DirObjects { root: root.into() }
    }

    fn path(&self, id: &ObjectId) -> PathBuf {
        let hex = id.hex();
        self.root.join(&hex[..2]).join(&hex[2..])
    }
}

impl ObjectStore for DirObjects {
    fn has(&self, id: &ObjectId) -> Result<bool, WorkspaceError> {
        Ok(self.path(id).is_file())
    }

    fn put(&self, id: &ObjectId, compressed: &[u8]) -> Result<(), WorkspaceError> {
        let path = self.path(id);
        let dir = path.parent().unwrap_or(&self.root);
        std::fs::create_dir_all(dir).map_err(|e| WorkspaceError::io("create directory", dir, e))?;
        // Written aside and renamed into place, so a reader never finds half an object and
        // two writers of the same object both end with the whole one.
        let mut temp = tempfile_in(dir)?;
        temp.1
            .write_all(compressed)
            .map_err(|e| WorkspaceError::io("write", &temp.0, e))?;
        drop(temp.1);
        std::fs::rename(&temp.0, &path).map_err(|e| WorkspaceError::io("write", &path, e))
    }

    fn get(&self, id: &ObjectId) -> Result<Option<Vec<u8>>, WorkspaceError> {
        let path = self.path(id);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(WorkspaceError::io("read", path, error)),
        }
    }

    fn describe(&self) -> String {
        self.root.display().to_string()
    }
}

/// A new file in `dir` with a name no other writer picks.
fn tempfile_in(dir: &Path) -> Result<(PathBuf, std::fs::File), WorkspaceError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!(".tmp-{}-{n}", std::process::id()));
    let file = std::fs::File::create(&path).map_err(|e| WorkspaceError::io("create", &path, e))?;
    Ok((path, file))
}

/// Objects held in memory: for tests, and for a recorder with nowhere to keep them.
#[derive(Debug, Default)]
pub struct MemObjects {
    objects: std::sync::Mutex<std::collections::HashMap<ObjectId, Vec<u8>>>,
}

impl MemObjects {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The stored (compressed) bytes of every object, summed.
    pub fn stored_bytes(&self) -> u64 {
        self.lock().values().map(|bytes| bytes.len() as u64).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<ObjectId, Vec<u8>>> {
        // A panic while holding the map leaves it whole (every step is one insert or read).
        self.objects
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl ObjectStore for MemObjects {
    fn has(&self, id: &ObjectId) -> Result<bool, WorkspaceError> {
        Ok(self.lock().contains_key(id))
    }

    fn put(&self, id: &ObjectId, compressed: &[u8]) -> Result<(), WorkspaceError> {
        self.lock().insert(*id, compressed.to_vec());
        Ok(())
    }

    fn get(&self, id: &ObjectId) -> Result<Option<Vec<u8>>, WorkspaceError> {
        Ok(self.lock().get(id).cloned())
    }

    fn describe(&self) -> String {
        "memory".into()
    }
}
