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
    // No empty run directory is left behind either.
    assert!(!run_dir.exists());
    // The container's copy is never touched.
    assert_eq!(
        std::fs::read(&journal).unwrap(),
        b"{\"line\":\"header\",\"formatVersion\":2}\n"
    );
}

#[test]
fn a_failed_salvage_names_the_journal_leaves_no_run_directory_and_a_kept_journal_is_not_removed() {
    // A failed salvage leaves no empty run directory behind, names the journal rather than a
    // scratch path that no longer exists, and never says the journal was removed while it is
    // still there.
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("replay.ndjson");
    std::fs::write(&journal, b"{\"line\":\"header\",\"formatVersion\":2}\n").unwrap();
    let run_dir = dir.path().join("run");
    let error = try_salvage(&journal, &run_dir).unwrap_err().to_string();
    assert!(error.contains(&journal.display().to_string()), "{error}");
    assert!(!error.contains(".cuca-salvage-"), "{error}");
    assert!(!run_dir.exists());
    // A run directory that was there before stays, empty or not.
    std::fs::create_dir_all(&run_dir).unwrap();
    assert!(try_salvage(&journal, &run_dir).is_err());
    assert!(run_dir.is_dir());

    let good = dir.path().join("good.ndjson");
    std::fs::write(
        &good,
        concat!(
            r#"{"line":"header","formatVersion":1,"sessionId":"s","routingKey":null,"capabilities":{},"recorder":{"ggVersion":"0.1.0","commit":null}}"#,
            "\n"
        ),
    )
    .unwrap();
    let report = try_salvage(&good, &dir.path().join("run2"))
        .unwrap()
        .unwrap();
    assert!(!report.journal_removed, "the journal is still there");
    assert!(good.exists());
    assert_eq!(report.outcome, crate::Outcome::SessionKilled);
}
