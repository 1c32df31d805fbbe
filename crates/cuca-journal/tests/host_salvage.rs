//! Salvage of a journal copied out of a torn-down container.
//!
//! "The artifact collector copies that single file out of a possibly-dying container into a
//! scratch directory shaped like a collected tree, and the same assembly stage folds it into the
//! same run directory a completed run's record is written into ... the record reports itself
//! killed, which is what happened."

// Helpers outside `#[test]` functions unwrap too: a failure there is a failed test.
#![allow(clippy::unwrap_used)]

mod host_common;

use cuca_journal::assemble::Outcome;
use cuca_journal::salvage::salvage;
use host_common::*;

#[test]
fn a_hung_runs_journal_is_salvaged_into_a_record_that_reports_itself_killed() {
    let mut lines = session();
    lines.truncate(15); // the container died mid-session: no terminating line
    let fx = Fixture::new(&to_bytes(&lines));
    let before = std::fs::read(&fx.journal).unwrap();

    let report = salvage(&fx.journal, &fx.run_dir).unwrap();
    assert_eq!(report.outcome, Outcome::SessionKilled);
    assert_eq!(report.n_entries, 4);
    assert_eq!(report.artifact, fx.artifact());
    // Only the record lands in the run directory: no scratch tree, no implementation tree.
    assert_eq!(fx.run_dir_names(), vec!["replay.json.gz"]);
    let record = read_artifact(&fx.artifact());
    assert_eq!(record["outcome"]["kind"], "session_killed");
    assert_eq!(record["sessionId"], "run-42");
    // The container's copy is read, never consumed.
    assert_eq!(std::fs::read(&fx.journal).unwrap(), before);
}

#[test]
fn a_salvaged_journal_that_did_finish_keeps_its_own_outcome() {
    let fx = Fixture::new(&to_bytes(&session()));
    let report = salvage(&fx.journal, &fx.run_dir).unwrap();
    assert_eq!(report.outcome, Outcome::Complete);
}

#[test]
fn every_failure_on_the_salvage_path_is_an_absent_record() {
    // "Every failure on this path is swallowed and the absent artifact is the signal."
    let mut gap = text_lines(&session());
    gap[7] = gap[7].replace("\"index\":1", "\"index\":5");
    for journal in [join(&gap), Vec::new(), b"garbage\n".to_vec()] {
        let fx = Fixture::new(&journal);
        assert!(salvage(&fx.journal, &fx.run_dir).is_none());
        assert!(fx.run_dir_names().is_empty(), "{:?}", fx.run_dir_names());
    }
    // No journal at all.
    let fx = Fixture::new(b"");
    std::fs::remove_file(&fx.journal).unwrap();
    assert!(salvage(&fx.journal, &fx.run_dir).is_none());
    assert!(!fx.artifact().exists());
}
