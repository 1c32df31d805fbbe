//! Unit tests of the exclude-file edit.

use super::*;

#[test]
fn an_existing_file_without_a_final_newline_is_continued_on_a_new_line() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join(".git/info")).unwrap();
    fs::write(dir.path().join(".git/info/exclude"), "*.log").unwrap();
    assert!(exclude_from_git(dir.path()).unwrap());
    let text = fs::read_to_string(dir.path().join(".git/info/exclude")).unwrap();
    assert!(text.starts_with("*.log\n"), "{text:?}");
    assert!(text.ends_with("\n/.cuca/\n"), "{text:?}");
}

#[test]
fn a_missing_info_directory_is_created() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join(".git")).unwrap();
    assert!(exclude_dir_from_git(dir.path(), "journal").unwrap());
    let text = fs::read_to_string(dir.path().join(".git/info/exclude")).unwrap();
    assert_eq!(text.lines().last(), Some("/journal/"));
}

#[test]
fn a_linked_worktree_writes_the_common_exclude_file() {
    let dir = tempfile::tempdir().unwrap();
    let common = dir.path().join("main/.git");
    let linked = common.join("worktrees/feature");
    fs::create_dir_all(&linked).unwrap();
    fs::write(linked.join("commondir"), "../..\n").unwrap();
    let ws = dir.path().join("feature");
    fs::create_dir_all(&ws).unwrap();
    fs::write(ws.join(".git"), format!("gitdir: {}\n", linked.display())).unwrap();
    assert!(exclude_from_git(&ws).unwrap());
    let text = fs::read_to_string(common.join("info/exclude")).unwrap();
    assert!(text.contains("/.cuca/"));
}

#[test]
fn a_directory_outside_the_workspace_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join(".git")).unwrap();
    for bad in ["", "/", "../up", "a//b"] {
        let error = exclude_dir_from_git(dir.path(), bad).unwrap_err();
        assert!(
            matches!(
                error,
                JournalError::InvalidConfig {
                    field: "journal_dir",
                    ..
                }
            ),
            "{bad:?}: {error}"
        );
    }
}
