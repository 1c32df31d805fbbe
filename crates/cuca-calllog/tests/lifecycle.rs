//! Where the file goes and when it appears: lazy open, the injected environment, close.

mod common;

use std::path::PathBuf;

use cuca_calllog::{read_rows, CallLog, Env, Record, FILE_NAME};

fn env_homed_in(dir: &std::path::Path) -> Env {
    let mut env = Env::default();
    env.home = Some(dir.join("home"));
    env.xdg_state_home = Some(dir.join("xdg"));
    env
}

#[test]
fn open_creates_nothing_until_the_first_record() {
    // "It opens nothing: the file is opened by the first record, so a process that makes no
    // model call leaves no file and no empty logs directory behind."
    let tmp = tempfile::tempdir().unwrap();
    let profile = tmp.path().join("profile");
    std::fs::create_dir(&profile).unwrap();
    let log = CallLog::from_env(&env_homed_in(tmp.path()), Some(&profile));
    assert_eq!(
        log.path(),
        Some(profile.join("logs").join(FILE_NAME).as_path())
    );
    assert_eq!(log.calls_for("r"), 0);
    log.close();
    assert_eq!(common::files_under(tmp.path()), [PathBuf::from("profile")]);

    log.append(Record {
        run: "r".into(),
        ..Record::default()
    });
    assert_eq!(
        common::files_under(tmp.path()),
        [
            PathBuf::from("profile"),
            PathBuf::from("profile/logs"),
            PathBuf::from("profile/logs/calls.jsonl"),
        ]
    );
}

#[test]
fn the_default_path_follows_the_injected_env_and_nothing_lands_outside_it() {
    // Tests never write into the real state root: HOME and XDG point into this test's dir.
    let tmp = tempfile::tempdir().unwrap();
    let env = env_homed_in(tmp.path());
    let log = CallLog::from_env(&env, None);
    let expected = tmp.path().join("xdg/cuca/logs/calls.jsonl");
    assert_eq!(log.path(), Some(expected.as_path()));
    log.start(Record::default()).finish(Record::default());
    assert_eq!(read_rows(&expected).unwrap().rows.len(), 2);
    assert_eq!(
        common::files_under(tmp.path()),
        [
            PathBuf::from("xdg"),
            PathBuf::from("xdg/cuca"),
            PathBuf::from("xdg/cuca/logs"),
            PathBuf::from("xdg/cuca/logs/calls.jsonl"),
        ]
    );
    // And the state root the real environment names was never chosen.
    let real = Env::from_process().path_for(None);
    assert_ne!(real.as_deref(), Some(expected.as_path()));
}

#[test]
fn cuca_home_wins_over_xdg_and_home() {
    let tmp = tempfile::tempdir().unwrap();
    let mut env = env_homed_in(tmp.path());
    env.cuca_home = Some(tmp.path().join("cuca-home"));
    let log = CallLog::from_env(&env, None);
    log.append(Record::default());
    assert!(tmp.path().join("cuca-home/logs/calls.jsonl").is_file());
    assert!(!tmp.path().join("xdg").exists());
    assert!(!tmp.path().join("home").exists());
}

#[test]
fn off_writes_nothing_anywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let mut env = env_homed_in(tmp.path());
    env.call_log = Some("off".into());
    let log = CallLog::from_env(&env, Some(tmp.path()));
    assert_eq!(log.path(), None);
    log.start(Record {
        run: "r".into(),
        ..Record::default()
    })
    .finish(Record::default());
    assert!(common::files_under(tmp.path()).is_empty());
    assert_eq!(
        log.calls_for("r"),
        1,
        "counted whether or not the file is written"
    );
}

#[test]
fn close_releases_the_file_and_a_later_append_reopens_it() {
    // "a process that forgets loses nothing, because every record is written and flushed as
    // it happens."
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("calls.jsonl");
    let (log, warnings) = common::log_at(&path);
    log.append(Record {
        id: "1".into(),
        ..Record::default()
    });
    assert_eq!(
        read_rows(&path).unwrap().rows.len(),
        1,
        "written before close"
    );
    log.close();
    log.append(Record {
        id: "2".into(),
        ..Record::default()
    });
    let ids: Vec<String> = read_rows(&path)
        .unwrap()
        .rows
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids, ["1", "2"]);
    assert!(warnings.lines().is_empty());
}

#[test]
fn a_pinned_path_is_the_live_file() {
    let tmp = tempfile::tempdir().unwrap();
    let mut env = env_homed_in(tmp.path());
    env.call_log = Some(tmp.path().join("watch/me.jsonl").into_os_string());
    let log = CallLog::from_env(&env, None);
    log.append(Record::default());
    assert_eq!(
        common::files_under(tmp.path()),
        [PathBuf::from("watch"), PathBuf::from("watch/me.jsonl")]
    );
}
