//! Where each session's workspace was recorded, so that a replay or fork run in a restored
//! copy (another directory) still matches the recording.
//!
//! An agent names its working directory in its own prompt — Codex's `<cwd>` and
//! `<workspace_roots>`, Claude Code's "Primary working directory" — so a run restored into
//! `$TMPDIR/cuca-run-…` sends requests that differ from the recording wherever that path
//! appears. `cuca run` writes the recorded workspace's absolute path beside the store
//! (`STORE/.cuca-workspace/roots/HEX-OF-SESSION`), and a replay or fork run into a fresh copy
//! blanks the recorded path and the copy's path alike before comparing.

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

/// The pattern replay blanks first (before the default `/tmp/…` one cuts either path in
/// two): the recorded workspace, or any restored copy of the session (`copies_prefix`, then
/// the process id and the copy's number: a fork run's records name the copy it ran in, and
/// the next run of that fork is in another), each also in the form Claude Code names its
/// project directory by (`~/.claude/projects/-home-me-app/`, every character but a letter or
/// digit a `-`), which its system prompt holds.
pub(crate) fn same_place_pattern(recorded: &Path, copies_prefix: &Path) -> String {
    let recorded = recorded.to_string_lossy();
    let copy = copies_prefix.to_string_lossy();
    format!(
        r"(?:{}|{}[0-9]+-[0-9]+|{}|{}[0-9]+-[0-9]+)",
        regex::escape(&recorded),
        regex::escape(&copy),
        regex::escape(&slug(&recorded)),
        regex::escape(&slug(&copy)),
    )
}

/// `path` as Claude Code names a project's directory: each character but an ASCII letter or
/// digit replaced by `-`.
fn slug(path: &str) -> String {
    path.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_path_and_a_copy_blank_alike() {
        let pattern = same_place_pattern(
            Path::new("/home/me/my.project"),
            Path::new("/tmp/cuca-run-s-"),
        );
        let re = regex::Regex::new(&pattern).unwrap();
        let blank = |text: &str| re.replace_all(text, "…").into_owned();
        assert_eq!(
            blank("<cwd>/home/me/my.project</cwd>"),
            blank("<cwd>/tmp/cuca-run-s-42-0</cwd>")
        );
        assert_eq!(
            blank("projects/-home-me-my-project/memory"),
            blank("projects/-tmp-cuca-run-s-42-7/memory")
        );
        assert_eq!(
            blank("/tmp/cuca-run-s-42-0/a"),
            blank("/tmp/cuca-run-s-7-3/a")
        );
        assert_ne!(blank("/home/me/myXproject"), blank("/tmp/cuca-run-s-42-0"));
    }

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
