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
    append_pattern(&git_dir, &pattern)
}

/// Excludes the journal directory `journal_dir` from the git work tree it lies in, if any.
///
/// [`crate::Recorder::start`] calls this for every journal directory, the default or a
/// configured one, relative or absolute: the nearest ancestor holding a `.git` (directory or
/// file) is the work tree, and the anchored pattern is the directory's path from its root.
/// Returns the exclude file appended to, `None` when nothing was appended (no work tree, or
/// the pattern is already there).
pub(crate) fn exclude_journal_dir(journal_dir: &Path) -> Result<Option<PathBuf>, JournalError> {
    let journal_dir = std::path::absolute(journal_dir)
        .map_err(|error| JournalError::io("resolve", journal_dir, error))?;
    let Some((root, relative)) = journal_dir.ancestors().skip(1).find_map(|dir| {
        let relative = journal_dir.strip_prefix(dir).ok()?;
        fs::symlink_metadata(dir.join(".git"))
            .is_ok()
            .then(|| (dir.to_path_buf(), relative.to_path_buf()))
    }) else {
        return Ok(None);
    };
    let mut pattern = String::from("/");
    for component in relative.components() {
        let std::path::Component::Normal(part) = component else {
            // `absolute` keeps `..` as written; a path that leaves and re-enters is not one a
            // pattern can name reliably, and capture goes on without it.
            return Err(JournalError::InvalidConfig {
                field: "journal_dir",
                message: format!(
                    "{} is not a plain path below {}",
                    relative.display(),
                    root.display()
                ),
            });
        };
        let Some(part) = part.to_str() else {
            return Err(JournalError::InvalidConfig {
                field: "journal_dir",
                message: format!(
                    "{} is not UTF-8; git exclude patterns are text",
                    relative.display()
                ),
            });
        };
        pattern.push_str(&escape_pattern(part));
        pattern.push('/');
    }
    let git_dir = common_git_dir(&root)?;
    Ok(append_pattern(&git_dir, &pattern)?.then(|| git_dir.join("info").join("exclude")))
}

/// Escapes what gitignore patterns would read as glob or syntax in one path component, so a
/// directory named `a*b` or `#notes` excludes exactly itself.
fn escape_pattern(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    for (i, c) in part.chars().enumerate() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') || (i == 0 && matches!(c, '#' | '!')) {
            out.push('\\');
        }
        out.push(c);
    }
    // A trailing space is dropped by git unless escaped.
    if out.ends_with(' ') {
        out.pop();
        out.push_str("\\ ");
    }
    out
}

/// Appends `pattern` to `<git_dir>/info/exclude` unless a line equal to it is there already.
fn append_pattern(git_dir: &Path, pattern: &str) -> Result<bool, JournalError> {
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
    text.push_str(pattern);
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
