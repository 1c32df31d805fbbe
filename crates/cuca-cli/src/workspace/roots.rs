//! Where each session's workspace was recorded, so that a replay or fork run in a restored
//! copy (another directory) still matches the recording.
//!
//! An agent names its working directory in its own prompt — Codex's `<cwd>` and
//! `<workspace_roots>`, Claude Code's "Primary working directory" — so a run restored into
//! `$TMPDIR/cuca-run-…` sends requests that differ from the recording wherever that path
//! appears. `cuca run` writes the recorded workspace's absolute path beside the store
//! (`STORE/.cuca-workspace/roots/HEX-OF-SESSION`), and a replay or fork run into a fresh copy
//! has the proxy read the copy's path in requests as that one (`cuca_proxy::Aliases`).

use std::path::{Path, PathBuf};

use crate::error::CliError;

/// The file naming the workspace `session` was recorded in: the session id in hex, since a
/// session id may hold `:` and `/`.
fn root_file(store_dir: &Path, session: &str) -> PathBuf {
    store_dir
        .join(cuca_workspace::DirObjects::DIR_NAME)
        .join("roots")
        .join(hex::encode(session))
}

/// Remembers that `session` is recorded from `workspace` (an absolute path).
pub(crate) fn remember(store_dir: &Path, session: &str, workspace: &Path) -> Result<(), CliError> {
    let file = root_file(store_dir, session);
    let write = || -> std::io::Result<()> {
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&file, workspace.as_os_str().as_encoded_bytes())
    };
    write().map_err(|error| CliError::Failed(format!("write {}: {error}", file.display())))
}

/// The workspace `session` was recorded in, when `cuca run` wrote it down.
pub(crate) fn recorded(store_dir: &Path, session: &str) -> Option<PathBuf> {
    let bytes = std::fs::read(root_file(store_dir, session)).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    (!text.is_empty()).then(|| PathBuf::from(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_is_read_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(recorded(dir.path(), "s:conv:1"), None);
        remember(dir.path(), "s:conv:1", Path::new("/w/here")).unwrap();
        assert_eq!(
            recorded(dir.path(), "s:conv:1"),
            Some(PathBuf::from("/w/here"))
        );
        assert_eq!(recorded(dir.path(), "s"), None);
    }
}
