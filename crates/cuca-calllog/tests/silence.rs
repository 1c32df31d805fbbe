//! Silencing is per process: one write failure quiets every handle and prints one line.
//!
//! This binary holds one test on purpose: it silences the process's scope, which would
//! silence any other test sharing the binary.

mod common;

use cuca_calllog::{CallLog, Env, Record, SilenceScope};

#[test]
fn one_write_failure_silences_every_handle_of_the_process_and_prints_one_line() {
    // Seed 003: "Anything that goes wrong here ... silences the log for the rest of the
    // process and prints one line naming the path it could not write."
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("a-directory");
    std::fs::create_dir(&bad).unwrap();
    let good = tmp.path().join("calls.jsonl");

    let first_lines = common::Warnings::default();
    let broken = CallLog::builder()
        .path(Some(bad.clone()))
        .warn_sink(first_lines.sink())
        .silence_scope(SilenceScope::process())
        .build();
    let second_lines = common::Warnings::default();
    let second = CallLog::builder()
        .path(Some(good.clone()))
        .warn_sink(second_lines.sink())
        .silence_scope(SilenceScope::process())
        .build();
    assert!(!second.is_silenced());

    broken.append(Record::default());
    assert_eq!(first_lines.lines().len(), 1, "{:?}", first_lines.lines());
    assert!(first_lines.lines()[0].contains(&bad.display().to_string()));

    // A second handle, and a log opened later from the environment, are quiet too: no row,
    // no second line.
    second.append(Record::default());
    let mut env = Env::default();
    env.call_log = Some(tmp.path().join("later.jsonl").into_os_string());
    let later = CallLog::from_env(&env, None);
    later.append(Record::default());
    assert!(second.is_silenced());
    assert!(later.is_silenced());
    assert!(SilenceScope::process().is_silenced());
    assert_eq!(second.path(), None);
    assert!(
        second_lines.lines().is_empty(),
        "{:?}",
        second_lines.lines()
    );
    assert!(!good.exists());
    assert!(!tmp.path().join("later.jsonl").exists());
    assert_eq!(first_lines.lines().len(), 1);

    // The counters still count.
    second
        .start(Record {
            run: "r".into(),
            ..Record::default()
        })
        .end(cuca_calllog::Ended::Abandoned);
    assert_eq!(second.calls_for("r"), 1);

    // A handle given a scope of its own is not part of the process's silence.
    let own = tmp.path().join("own.jsonl");
    let isolated = CallLog::builder()
        .path(Some(own.clone()))
        .silence_scope(SilenceScope::new())
        .build();
    isolated.append(Record::default());
    assert_eq!(cuca_calllog::read_rows(&own).unwrap().rows.len(), 1);
}
