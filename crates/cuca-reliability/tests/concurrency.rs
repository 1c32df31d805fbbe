//! Concurrency: two processes on one session, and many tasks recording at once.
// Helpers outside `#[test]` functions unwrap too: a failure there should stop the test.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::Arc;

use cuca_events::{CucaPlugin, MessageContentBlock, PluginError, SessionBackend, SessionEvent};
use cuca_reliability::payload;
use cuca_session_log::SessionLogPlugin;
use cuca_store_file::{scan, FileBackend, Verdict};

#[test]
fn a_second_process_on_a_locked_session_gets_the_lock_error_and_writes_nothing() {
    // ".cslog v1: FileBackend holds an advisory exclusive lock on a session file while it has it
    // open for append; a second process gets a clear error, not interleaved sequences."
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.cslog");
    let mut holder = common::child();
    holder
        .stdin(Stdio::piped())
        .arg("lock")
        .arg(dir.path())
        .arg("shared");
    let mut holder = holder.spawn().unwrap();
    let mut holder_out = BufReader::new(holder.stdout.take().unwrap());
    let mut line = String::new();
    holder_out.read_line(&mut line).unwrap();
    assert_eq!(line, "locked\n");
    let before = std::fs::read(&path).unwrap();

    let mut second = common::child();
    second
        .arg("session")
        .arg(dir.path())
        .args(["shared", "buffered", "5"]);
    let (status, lines) = common::run_to_end(second);
    assert!(!status.success());
    let error = lines
        .iter()
        .find_map(|line| line.strip_prefix("error "))
        .unwrap();
    assert!(error.contains("shared.cslog"), "{error}");
    assert!(
        error.contains("has this session open for append"),
        "{error}"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the refused process wrote nothing"
    );

    // The same from this process, as a typed error.
    let backend = FileBackend::new(dir.path()).unwrap();
    let refused = backend.append(cuca_events::SessionRecord {
        session_id: "shared".into(),
        sequence: 1,
        timestamp_ms: 0,
        event: payload::session_event(1),
    });
    match refused {
        Err(PluginError::Locked { path: named, .. }) => assert_eq!(named, path),
        other => panic!("expected PluginError::Locked, got {other:?}"),
    }
    assert_eq!(std::fs::read(&path).unwrap(), before);
    drop(backend);

    // The lock dies with its holder, even by SIGKILL: the kernel releases it.
    holder.kill().unwrap();
    holder.wait().unwrap();
    let mut third = common::child();
    third
        .arg("session")
        .arg(dir.path())
        .args(["shared", "buffered", "2"]);
    let (status, lines) = common::run_to_end(third);
    assert!(status.success(), "{lines:?}");
    assert_eq!(lines, ["ack 1", "ack 2"]);
    let report = scan(&path).unwrap();
    assert_eq!(report.verdict, Verdict::Clean);
    assert_eq!(report.records.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_tasks_into_sixty_four_sessions_leave_dense_clean_files() {
    const TASKS: usize = 64;
    const BLOCKS: u64 = 60;
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn SessionBackend> = Arc::new(FileBackend::new(dir.path()).unwrap());
    let mut handles = Vec::new();
    for task in 0..TASKS {
        let plugin =
            SessionLogPlugin::new(Arc::clone(&backend)).with_session_id(format!("task-{task}"));
        handles.push(tokio::spawn(async move {
            for n in 0..BLOCKS {
                // Through the hook a client calls, interleaved with the other tasks.
                plugin
                    .on_stream_chunk(&MessageContentBlock::text(payload::session_text(n % 15)))
                    .await
                    .unwrap();
                tokio::task::yield_now().await;
            }
        }));
    }
    for handle in handles {
        handle.await.unwrap();
    }
    for task in 0..TASKS {
        let report = scan(&dir.path().join(format!("task-{task}.cslog"))).unwrap();
        assert_eq!(report.verdict, Verdict::Clean, "task {task}");
        let sequences: Vec<u64> = report
            .records
            .iter()
            .map(|record| record.sequence)
            .collect();
        assert_eq!(sequences, (0..BLOCKS).collect::<Vec<_>>(), "task {task}");
        for (n, record) in report.records.iter().enumerate() {
            assert_eq!(
                record.event,
                SessionEvent::Output {
                    text: payload::session_text(n as u64 % 15)
                },
                "task {task}"
            );
        }
    }
    eprintln!(
        "FIGURES concurrency: sessions={TASKS} records={} files_clean={TASKS}",
        TASKS as u64 * BLOCKS
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_tasks_sharing_one_plugin_get_one_dense_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn SessionBackend> = Arc::new(FileBackend::new(dir.path()).unwrap());
    let plugin = Arc::new(SessionLogPlugin::new(Arc::clone(&backend)).with_session_id("shared"));
    let mut handles = Vec::new();
    for task in 0..16u64 {
        let plugin = Arc::clone(&plugin);
        handles.push(tokio::spawn(async move {
            for n in 0..25u64 {
                plugin
                    .on_stream_chunk(&MessageContentBlock::text(format!("{task}:{n}")))
                    .await
                    .unwrap();
                tokio::task::yield_now().await;
            }
        }));
    }
    for handle in handles {
        handle.await.unwrap();
    }
    let report = scan(&dir.path().join("shared.cslog")).unwrap();
    assert_eq!(report.verdict, Verdict::Clean);
    let sequences: Vec<u64> = report
        .records
        .iter()
        .map(|record| record.sequence)
        .collect();
    assert_eq!(sequences, (0..400).collect::<Vec<_>>());
    let mut texts: Vec<String> = report
        .records
        .iter()
        .map(|record| match &record.event {
            SessionEvent::Output { text } => text.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    texts.sort();
    texts.dedup();
    assert_eq!(texts.len(), 400, "every block recorded exactly once");
}
