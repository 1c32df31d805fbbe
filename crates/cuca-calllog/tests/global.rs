//! The process-global functions: one test, in a binary of its own, because they share state.

use cuca_calllog::{Env, Record};

#[test]
fn the_global_log_follows_open_and_keeps_its_counters_across_it() {
    // "Open points the log at a profile directory and is called once at startup ... It opens
    // nothing".
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    cuca_calllog::open(Some(first.path()));
    // Whatever this machine's CUCA_CALL_LOG says, the global resolves it the way path_for does.
    assert_eq!(
        cuca_calllog::path(),
        cuca_calllog::path_for(Some(first.path()))
    );
    assert_eq!(cuca_calllog::bodies(), Env::from_process().bodies());
    assert!(!first.path().join("logs").exists());

    cuca_calllog::start(Record {
        run: "global-run".into(),
        model: "m".into(),
        ..Record::default()
    })
    .finish(Record {
        status: 200,
        ..Record::default()
    });
    assert_eq!(cuca_calllog::calls_for("global-run"), 1);
    if let Some(path) = cuca_calllog::path().filter(|p| p.starts_with(first.path())) {
        let rows = cuca_calllog::read_rows(&path).unwrap().rows;
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].run, "global-run");
    }

    cuca_calllog::open(Some(second.path()));
    assert_eq!(
        cuca_calllog::path(),
        cuca_calllog::path_for(Some(second.path()))
    );
    assert_eq!(
        cuca_calllog::calls_for("global-run"),
        1,
        "counters carry over open"
    );
    assert_eq!(cuca_calllog::last_call().unwrap().model, "m");
    cuca_calllog::append(Record {
        run: "global-run".into(),
        phase: cuca_calllog::PHASE_START.into(),
        ..Record::default()
    });
    assert_eq!(cuca_calllog::calls_for("global-run"), 2);
    cuca_calllog::close();
    assert!(!second.path().join("logs").join("calls.1.jsonl").exists());
}
