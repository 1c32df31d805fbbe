//! Keeping the journal out of git: an anchored pattern in the workspace's `.git/info/exclude`.
//!
//! The journal grows inside the model's working tree while the run goes on. An uncommitted
//! exclusion keeps it out of the seed commit, out of reviewers' diffs, out of worktree commits
//! and out of the model's own `git add -A`; it must be in place before the model can commit.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use crate::error::JournalError;
use crate::format::DEFAULT_JOURNAL_DIR;

/// Appends `/.cuca/` to `<workspace>/.git/info/exclude` unless it is already there.
///
/// Returns whether it appended. See [`exclude_dir_from_git`].
pub fn exclude_from_git(workspace: &Path) -> Result<bool, JournalError> {
    exclude_dir_from_git(workspace, DEFAULT_JOURNAL_DIR)
}

/// Appends the anchored pattern `/<dir>/` to the workspace's exclude file unless a line equal
/// to it is already there. Idempotent: a second call changes nothing and returns `false`.
///
/// `dir` is the journal directory relative to the workspace. A `.git` *file* (a linked
/// worktree or submodule, `gitdir: …`) is followed to the common git directory, which is
/// where git reads `info/exclude` from.
pub fn exclude_dir_from_git(workspace: &Path, dir: &str) -> Result<bool, JournalError> {
    let dir = dir.trim_matches('/');
    if dir.is_empty() || dir.split('/').any(|part| part == ".." || part.is_empty()) {
        return Err(JournalError::InvalidConfig {
            field: "journal_dir",
            message: format!("{dir:?} is not a directory inside the workspace"),
        });
    }
    let pattern = format!("/{dir}/");
    let git_dir = common_git_dir(workspace)?;
    let info = git_dir.join("info");
    let exclude = info.join("exclude");
    let existing = match fs::read_to_string(&exclude) {
        Ok(text) => text,
        Err(error) if error.kind() == ErrorKind::NotFound => String::new(),
        Err(error) => return Err(JournalError::io("read", &exclude, error)),
    };
    if existing.lines().any(|line| line.trim_end() == pattern) {
        return Ok(false);
    }
    fs::create_dir_all(&info).map_err(|error| JournalError::io("create", &info, error))?;
    let mut text = String::new();
    if !existing.is_empty() && !existing.ends_with('\n') {
        text.push('\n');
    }
    text.push_str("# the cuca capture journal (never committed)\n");
    text.push_str(&pattern);
    text.push('\n');
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(&exclude)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .map_err(|error| JournalError::io("append to", &exclude, error))?;
    Ok(true)
}

/// The directory git reads `info/exclude` from for `workspace`.
fn common_git_dir(workspace: &Path) -> Result<PathBuf, JournalError> {
    let dot_git = workspace.join(".git");
    let metadata = match fs::metadata(&dot_git) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == ErrorKind::NotFound => {
            return Err(JournalError::NotARepository {
                path: workspace.to_path_buf(),
            })
        }
        Err(error) => return Err(JournalError::io("inspect", &dot_git, error)),
    };
    if metadata.is_dir() {
        return Ok(dot_git);
    }
    let text =
        fs::read_to_string(&dot_git).map_err(|error| JournalError::io("read", &dot_git, error))?;
    let Some(target) = text.lines().find_map(|line| line.strip_prefix("gitdir:")) else {
        return Err(JournalError::NotARepository {
            path: workspace.to_path_buf(),
        });
    };
    let git_dir = workspace.join(target.trim());
    // A linked worktree's git dir names the shared one in `commondir`.
    match fs::read_to_string(git_dir.join("commondir")) {
        Ok(common) => Ok(git_dir.join(common.trim())),
        Err(_) => Ok(git_dir),
    }
}

#[cfg(test)]
mod tests;
