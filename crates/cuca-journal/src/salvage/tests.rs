//! Unit tests of salvage's swallowing of failures.

use super::*;

#[test]
fn a_journal_path_that_is_a_directory_is_swallowed_as_no_record() {
    // "Every failure on this path is swallowed and the absent artifact is the signal."
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    assert!(salvage(dir.path(), &run_dir).is_none());
    assert!(!run_dir.join("replay.json.gz").exists());
}

#[test]
fn a_refused_journal_is_swallowed_and_leaves_no_scratch_tree() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("replay.ndjson");
    std::fs::write(&journal, b"{\"line\":\"header\",\"formatVersion\":2}\n").unwrap();
    let run_dir = dir.path().join("run");
    assert!(salvage(&journal, &run_dir).is_none());
    let left: Vec<_> = std::fs::read_dir(&run_dir).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    // The container's copy is never touched.
    assert_eq!(
        std::fs::read(&journal).unwrap(),
        b"{\"line\":\"header\",\"formatVersion\":2}\n"
    );
}
