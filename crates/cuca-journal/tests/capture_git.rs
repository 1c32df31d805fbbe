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
