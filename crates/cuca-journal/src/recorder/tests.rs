//! Unit tests of the recorder's config and helpers.

use super::*;

#[test]
fn the_default_journal_path_is_under_dot_cuca() {
    let config = RecorderConfig::new("/ws", "s").unwrap();
    assert_eq!(config.journal_path(), Path::new("/ws/.cuca/replay.ndjson"));
    let config = config.with_journal_dir("var/journal");
    assert_eq!(
        config.journal_path(),
        Path::new("/ws/var/journal/replay.ndjson")
    );
}

#[test]
fn invalid_configs_name_their_field() {
    let field_of = |result: Result<(), JournalError>| match result {
        Err(JournalError::InvalidConfig { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        field_of(RecorderConfig::new("", "s").map(|_| ())),
        "workspace"
    );
    assert_eq!(
        field_of(RecorderConfig::new("/ws", "").map(|_| ())),
        "session_id"
    );
    let ok = RecorderConfig::new("/ws", "s").unwrap();
    assert_eq!(
        field_of(ok.clone().with_journal_dir("../out").validate()),
        "journal_dir"
    );
    assert_eq!(
        field_of(ok.clone().with_journal_dir("").validate()),
        "journal_dir"
    );
    assert_eq!(
        field_of(ok.clone().with_max_bytes(0).validate()),
        "max_bytes"
    );
    assert_eq!(
        field_of(ok.clone().with_queue_capacity(0).validate()),
        "queue_capacity"
    );
    assert_eq!(
        field_of(ok.clone().with_build("", None).validate()),
        "build_version"
    );
    assert!(ok.with_journal_dir("/abs/dir").validate().is_ok());
}

#[test]
fn start_refuses_an_invalid_config() {
    let config = RecorderConfig::new("/ws", "s")
        .unwrap()
        .with_queue_capacity(0);
    let error = Recorder::start(config).unwrap_err();
    assert!(error.to_string().contains("queue_capacity"), "{error}");
}

#[test]
fn cwd_is_relative_to_the_workspace_wherever_possible() {
    let ws = Path::new("/ws");
    assert_eq!(relative_cwd(ws, Path::new("/ws")), ".");
    assert_eq!(relative_cwd(ws, Path::new("/ws/crates/x")), "crates/x");
    assert_eq!(relative_cwd(ws, Path::new("/tmp")), "/tmp");
    assert_eq!(relative_cwd(ws, Path::new("rel")), "rel");
}

#[test]
fn latency_saturates_instead_of_wrapping() {
    assert_eq!(millis(Duration::from_millis(1500)), 1500);
    assert_eq!(millis(Duration::MAX), u64::MAX);
}
