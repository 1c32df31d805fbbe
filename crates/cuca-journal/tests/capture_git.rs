//! The git exclusion, against a real `git`.
// Test-crate helpers outside #[test] functions unwrap too, as tests do.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

use cuca_journal::{exclude_from_git, Recorder, RecorderConfig};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_exclusion_is_idempotent_and_keeps_the_journal_out_of_git() {
    // "it is excluded from git at seed time by appending an anchored /.gg/ pattern to the
    // workspace's .git/info/exclude ... out of the model's own git add -A"
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    git(ws, &["init", "-q"]);
    std::fs::write(ws.join("main.rs"), "fn main() {}\n").unwrap();
    // A nested .cuca is the model's own file: the pattern is anchored at the root.
    std::fs::create_dir_all(ws.join("sub/.cuca")).unwrap();
    std::fs::write(ws.join("sub/.cuca/keep"), "mine\n").unwrap();

    assert!(exclude_from_git(ws).unwrap());
    assert!(
        !exclude_from_git(ws).unwrap(),
        "a second call changes nothing"
    );
    let exclude = std::fs::read_to_string(ws.join(".git/info/exclude")).unwrap();
    assert_eq!(exclude.lines().filter(|l| *l == "/.cuca/").count(), 1);

    let recorder = Recorder::start(RecorderConfig::new(ws, "git").unwrap()).unwrap();
    recorder.clock("root", std::time::Duration::from_secs(1), None);
    recorder.finish();
    assert!(recorder.path().exists());

    let status = git(ws, &["status", "--porcelain", "--untracked-files=all"]);
    assert!(!status.contains(".cuca/replay.ndjson"), "{status}");
    assert!(status.contains("main.rs"), "{status}");
    assert!(status.contains("sub/.cuca/keep"), "{status}");
    git(ws, &["add", "-A"]);
    let staged = git(ws, &["diff", "--cached", "--name-only"]);
    assert_eq!(
        staged.lines().collect::<Vec<_>>(),
        ["main.rs", "sub/.cuca/keep"]
    );
}

#[test]
fn a_workspace_without_git_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let error = exclude_from_git(dir.path()).unwrap_err();
    assert!(matches!(
        error,
        cuca_journal::JournalError::NotARepository { .. }
    ));
    assert!(
        error.to_string().contains("not a git repository"),
        "{error}"
    );
}

fn staged_after_add_all(ws: &Path) -> Vec<String> {
    git(ws, &["add", "-A"]);
    git(ws, &["diff", "--cached", "--name-only"])
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn starting_a_recorder_inside_a_work_tree_excludes_its_journal_directory_by_itself() {
    // A journal directory inside a git work tree (any journal dir, not only the default) is
    // excluded automatically and idempotently, and the run never fails if it cannot be. Seed: "no publish-time filter can undo a commit the model already made".
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    git(ws, &["init", "-q"]);
    std::fs::write(ws.join("main.rs"), "fn main() {}\n").unwrap();
    for _ in 0..2 {
        let recorder = Recorder::start(RecorderConfig::new(ws, "auto").unwrap()).unwrap();
        recorder.clock("root", std::time::Duration::from_secs(1), None);
        assert_eq!(recorder.finish().stopped, None);
    }
    // A configured directory with glob characters in its name, and a second recorder there.
    let odd = RecorderConfig::new(ws, "odd")
        .unwrap()
        .with_journal_dir("var/[run]*");
    let recorder = Recorder::start(odd).unwrap();
    recorder.finish();
    assert!(ws.join("var/[run]*/replay.ndjson").exists());
    std::fs::write(ws.join("var/keep.txt"), "mine\n").unwrap();
    assert_eq!(staged_after_add_all(ws), ["main.rs", "var/keep.txt"]);
    let exclude = std::fs::read_to_string(ws.join(".git/info/exclude")).unwrap();
    assert_eq!(
        exclude.lines().filter(|l| *l == "/.cuca/").count(),
        1,
        "idempotent: {exclude}"
    );
}

#[test]
fn an_absolute_journal_directory_is_excluded_from_the_work_tree_it_lies_in() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let other = dir.path().join("other");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    git(&other, &["init", "-q"]);
    std::fs::write(other.join("README"), "other repo\n").unwrap();
    let config = RecorderConfig::new(&ws, "abs")
        .unwrap()
        .with_journal_dir(other.join("logs/journal"));
    let recorder = Recorder::start(config).unwrap();
    recorder.finish();
    assert!(other.join("logs/journal/replay.ndjson").exists());
    assert_eq!(staged_after_add_all(&other), ["README"]);
}

#[test]
fn a_journal_directory_that_cannot_be_excluded_does_not_stop_capture() {
    // ".git" is a file that names no git directory: the exclusion fails, capture goes on.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".git"), "not a gitdir line\n").unwrap();
    let recorder = Recorder::start(RecorderConfig::new(dir.path(), "s").unwrap()).unwrap();
    recorder.clock("root", std::time::Duration::from_secs(1), None);
    let status = recorder.finish();
    assert_eq!((status.stopped, status.entries), (None, 1));
}
