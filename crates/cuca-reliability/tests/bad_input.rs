//! Bad input at the public entry points, where the owning crates' own tests leave a gap: each
//! class (empty, too long, traversal, NUL, wrong type, wrong format version) gets its error
//! value asserted and a snapshot of the directory compared before and after.
//!
//! Already covered elsewhere, and not repeated: FileBackend's session ids, magic and version
//! (`cuca-store-file/tests/bad_input.rs`); run ids of the replay route
//! (`cuca-journal/src/serve/tests.rs`, `tests/host_serve.rs`); a call log on `/dev/full`, a
//! directory or an unwritable home (`cuca-calllog/tests/failures.rs`).
// Helpers outside `#[test]` functions unwrap too: a failure there should stop the test.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use cuca_events::{PluginError, SessionBackend, SessionEvent};
use cuca_reliability::payload;
use cuca_session_log::SessionLogPlugin;
use cuca_store_file::FileBackend;

use cuca_testkit::snapshot_dir as snapshot;

/// The classes of bad session id, each with what it is.
fn bad_session_ids() -> Vec<(&'static str, String)> {
    vec![
        ("empty", String::new()),
        (
            "too long",
            "s".repeat(cuca_store_file::MAX_SESSION_ID_LEN + 1),
        ),
        ("traversal", "../escape".into()),
        ("traversal by dots", "..".into()),
        ("absolute", "/etc/passwd".into()),
        ("backslash", "a\\b".into()),
        ("NUL", "demo\0.cslog".into()),
    ]
}

#[test]
fn the_plugin_refuses_every_bad_session_id_before_touching_the_disk() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("sessions");
    let backend: Arc<dyn SessionBackend> = Arc::new(FileBackend::new(&dir).unwrap());
    let before = snapshot(root.path());
    for (class, id) in bad_session_ids() {
        let plugin = SessionLogPlugin::new(Arc::clone(&backend)).with_session_id(id.clone());
        match plugin.append_log(SessionEvent::Output { text: "x".into() }) {
            Err(PluginError::Validation { schema, .. }) => {
                assert_eq!(schema, "session_id", "{class}")
            }
            other => panic!("{class}: expected a validation error, got {other:?}"),
        }
        match plugin.fork_session(&id, &format!("{id}:0")) {
            Err(PluginError::Validation { .. }) => {}
            other => panic!("{class}: fork: expected a validation error, got {other:?}"),
        }
        assert!(
            matches!(backend.replay(&id), Err(PluginError::Validation { .. })),
            "{class}"
        );
    }
    assert_eq!(
        snapshot(root.path()),
        before,
        "a refused id changed the disk"
    );
}

#[test]
fn every_bad_point_id_is_refused_and_the_session_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn SessionBackend> = Arc::new(FileBackend::new(dir.path()).unwrap());
    let plugin = SessionLogPlugin::new(Arc::clone(&backend)).with_session_id("demo");
    for n in 0..3 {
        plugin.append_log(payload::session_event(n)).unwrap();
    }
    let before = snapshot(dir.path());
    for (class, point) in [
        ("empty", String::new()),
        ("no sequence", "demo".to_owned()),
        ("empty sequence", "demo:".to_owned()),
        ("not a number", "demo:one".to_owned()),
        ("negative", "demo:-1".to_owned()),
        ("too long a number", format!("demo:{}", "9".repeat(40))),
        ("another session", "other:1".to_owned()),
        ("NUL", "demo:1\0".to_owned()),
        ("traversal", "../demo:1".to_owned()),
        ("past the end", "demo:3".to_owned()),
    ] {
        match plugin.fork_session("demo", &point) {
            Err(PluginError::Validation { .. } | PluginError::NotFound { .. }) => {}
            other => panic!("{class}: {point:?} gave {other:?}"),
        }
    }
    assert_eq!(
        snapshot(dir.path()),
        before,
        "a refused fork changed the disk"
    );
    // The plugin still continues where it was.
    assert_eq!(
        plugin
            .append_log(payload::session_event(3))
            .unwrap()
            .sequence,
        3
    );
}

#[test]
fn scanning_something_that_is_not_a_session_file_is_an_io_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let before = snapshot(dir.path());
    for (class, path) in [
        ("missing", dir.path().join("missing.cslog")),
        ("a directory", dir.path().to_path_buf()),
        ("NUL in the path", dir.path().join("a\0b.cslog")),
        (
            "too long a name",
            dir.path().join(format!("{}.cslog", "n".repeat(300))),
        ),
    ] {
        match cuca_store_file::scan(&path) {
            Err(PluginError::Io { path: named, .. }) => assert_eq!(named, path, "{class}"),
            other => panic!("{class}: {other:?}"),
        }
    }
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn reading_a_call_log_that_is_not_a_file_is_a_read_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let before = snapshot(dir.path());
    for (class, path) in [
        ("missing", dir.path().join("calls.jsonl")),
        ("a directory", dir.path().to_path_buf()),
        ("NUL in the path", dir.path().join("calls\0.jsonl")),
        ("too long a name", dir.path().join("c".repeat(300))),
    ] {
        match cuca_calllog::read_rows(&path) {
            Err(cuca_calllog::Error::Read { path: named, .. }) => {
                assert_eq!(named, path, "{class}")
            }
            other => panic!("{class}: {other:?}"),
        }
    }
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn a_call_log_pointed_at_an_impossible_path_goes_silent_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a-file"), b"not a directory").unwrap();
    let before = snapshot(dir.path());
    for (class, path) in [
        ("NUL in the path", dir.path().join("calls\0.jsonl")),
        ("too long a name", dir.path().join("c".repeat(300))),
        (
            "a file where a directory must be",
            dir.path().join("a-file/logs/calls.jsonl"),
        ),
    ] {
        let log = cuca_calllog::CallLog::builder()
            .path(Some(path.clone()))
            .warn_sink(Arc::new(|_line: &str| {}))
            .build();
        let call = log.start(cuca_calllog::Record {
            run: "r".into(),
            ..Default::default()
        });
        call.finish(cuca_calllog::Record {
            status: 200,
            ..Default::default()
        });
        assert!(log.is_silenced(), "{class}");
        assert_eq!(log.calls_for("r"), 1, "{class}: the call still counts");
    }
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn a_journal_config_that_would_escape_or_is_empty_is_refused_by_field() {
    let dir = tempfile::tempdir().unwrap();
    let before = snapshot(dir.path());
    let field_of =
        |result: Result<cuca_journal::RecorderConfig, cuca_journal::JournalError>| match result {
            Err(cuca_journal::JournalError::InvalidConfig { field, .. }) => field,
            other => panic!("expected InvalidConfig, got {other:?}"),
        };
    assert_eq!(
        field_of(cuca_journal::RecorderConfig::new("", "s")),
        "workspace"
    );
    assert_eq!(
        field_of(cuca_journal::RecorderConfig::new(dir.path(), "")),
        "session_id"
    );
    for journal_dir in ["../outside", "a/../../outside", ""] {
        let config = cuca_journal::RecorderConfig::new(dir.path(), "s")
            .unwrap()
            .with_journal_dir(journal_dir);
        assert_eq!(
            field_of(config.validate().map(|()| config.clone())),
            "journal_dir",
            "{journal_dir:?}"
        );
        assert!(
            cuca_journal::Recorder::start(config).is_err(),
            "{journal_dir:?}"
        );
    }
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn a_journal_that_cannot_be_created_stops_capture_and_the_run_goes_on() {
    // "capture that stops and never fails the run": a workspace path with a NUL in it.
    let dir = tempfile::tempdir().unwrap();
    let before = snapshot(dir.path());
    let config = cuca_journal::RecorderConfig::new(dir.path().join("ws\0"), "s").unwrap();
    let recorder = cuca_journal::Recorder::start(config).unwrap();
    recorder.clock("root", std::time::Duration::from_secs(1), None);
    let status = recorder.finish();
    assert_eq!(
        status.stopped,
        Some(cuca_journal::format::StopReason::WriteFailed)
    );
    assert!(status.error.is_some());
    assert_eq!(snapshot(dir.path()), before);
}

fn journal_with_header(header: &str) -> Vec<u8> {
    format!("{header}\n{{\"line\":\"end\",\"entries\":0}}\n").into_bytes()
}

#[test]
fn assembly_refuses_a_journal_of_the_wrong_format_version_or_type_and_leaves_it() {
    let dir = tempfile::tempdir().unwrap();
    let options = cuca_journal::assemble::AssembleOptions::default();
    let header = |version: &str| {
        format!(
            "{{\"line\":\"header\",{version}\"sessionId\":\"s\",\"capabilities\":{{}},\"recorder\":{{\"version\":\"0.1.0\"}}}}"
        )
    };
    for (class, bytes) in [
        (
            "version 2",
            journal_with_header(&header("\"formatVersion\":2,")),
        ),
        (
            "version as a string",
            journal_with_header(&header("\"formatVersion\":\"1\",")),
        ),
        ("no version", journal_with_header(&header(""))),
    ] {
        let journal = dir.path().join("replay.ndjson");
        std::fs::write(&journal, &bytes).unwrap();
        let run_dir = dir.path().join("run");
        let result = cuca_journal::assemble::assemble_journal(&journal, &run_dir, &options);
        match result {
            Err(
                cuca_journal::AssembleError::UnsupportedFormat { .. }
                | cuca_journal::AssembleError::NoHeader { .. },
            ) => {}
            other => panic!("{class}: {other:?}"),
        }
        assert_eq!(
            std::fs::read(&journal).unwrap(),
            bytes,
            "{class}: the journal is kept"
        );
        assert!(
            !run_dir.join("replay.json.gz").exists(),
            "{class}: nothing written"
        );
    }
    for (class, bytes) in [
        ("empty", Vec::new()),
        ("a .cslog file", cuca_store_file::HEADER.to_vec()),
        (
            "JSON of another kind",
            b"{\"line\":\"entry\",\"seq\":0}\n".to_vec(),
        ),
    ] {
        let journal = dir.path().join("replay.ndjson");
        std::fs::write(&journal, &bytes).unwrap();
        let run_dir = dir.path().join("run");
        match cuca_journal::assemble::assemble_journal(&journal, &run_dir, &options) {
            Err(cuca_journal::AssembleError::NoHeader { path, .. }) => {
                assert_eq!(path, journal, "{class}")
            }
            other => panic!("{class}: {other:?}"),
        }
        assert_eq!(std::fs::read(&journal).unwrap(), bytes, "{class}");
        assert!(!run_dir.join("replay.json.gz").exists(), "{class}");
    }
    // Wrong type: a directory where the journal should be.
    let journal = dir.path().join("a-directory");
    std::fs::create_dir(&journal).unwrap();
    let result =
        cuca_journal::assemble::assemble_journal(&journal, &dir.path().join("run"), &options);
    assert!(
        matches!(result, Err(cuca_journal::AssembleError::Io { .. })),
        "{result:?}"
    );
}

async fn http_get(addr: std::net::SocketAddr, target: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {target} HTTP/1.1\r\nHost: test\r\nAccept-Encoding: identity\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text.split(' ').nth(1).unwrap().parse().unwrap();
    (status, text)
}

#[tokio::test]
async fn the_replay_route_answers_a_too_long_id_and_a_record_of_the_wrong_type_without_touching_anything(
) {
    // The owners test traversal and validate_run_id; these two classes go through the router.
    let runs = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(runs.path().join("dir-run/replay.json.gz")).unwrap();
    let before = snapshot(runs.path());
    let app = cuca_serve::router(runs.path());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(cuca_serve::serve(
        listener,
        app,
        cuca_serve::ServeLimits::default(),
    ));

    let (status, _) = http_get(addr, &format!("/runs/{}/replay", "r".repeat(300))).await;
    assert_eq!(status, 400, "too long");
    let (status, _) = http_get(addr, "/runs/%00/replay").await;
    assert_eq!(status, 400, "NUL");
    let (status, _) = http_get(addr, "/runs//replay").await;
    assert!(status == 400 || status == 404, "empty: {status}");
    // Wrong type: the record is a directory. A server error naming the run, not a panic.
    let (status, body) = http_get(addr, "/runs/dir-run/replay").await;
    assert_eq!(status, 500);
    assert!(body.contains("dir-run"), "{body}");
    assert_eq!(snapshot(runs.path()), before);
}
