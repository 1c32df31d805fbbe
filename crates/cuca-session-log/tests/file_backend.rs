//! SessionLogPlugin over a FileBackend in a temp dir: resuming after a restart, a torn tail
//! left by a crash, and the backend's errors coming back unchanged.

// Helpers outside #[test] fns unwrap too: a failed hook is a failed test.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::sync::Arc;

use cuca_events::{
    CucaPlugin, Message, MessageContentBlock, PluginError, SessionBackend, SessionEvent,
    TokenUsage, UnifiedRequest, UnifiedResponse,
};
use cuca_session_log::SessionLogPlugin;
use cuca_store_file::{FileBackend, Verdict};

async fn turn(log: &SessionLogPlugin, messages: Vec<Message>, answer: &str) {
    let mut request = UnifiedRequest::new(messages);
    log.on_request(&mut request).await.unwrap();
    log.on_stream_chunk(&MessageContentBlock::thinking("hm"))
        .await
        .unwrap();
    log.on_stream_chunk(&MessageContentBlock::text(answer))
        .await
        .unwrap();
    log.on_response_complete(&UnifiedResponse {
        token_usage: TokenUsage {
            prompt_tokens: 10,
            completion_tokens: 2,
        },
        ..UnifiedResponse::default()
    })
    .await
    .unwrap();
}

fn plugin_over(dir: &std::path::Path) -> SessionLogPlugin {
    SessionLogPlugin::new(Arc::new(FileBackend::new(dir).unwrap())).with_session_id("demo")
}

fn n_messages(records: &[cuca_events::SessionRecord]) -> usize {
    records
        .iter()
        .filter(|record| matches!(record.event, SessionEvent::Message(_)))
        .count()
}

/// "a FileBackend reopened after a restart must continue at the right sequence, not 0", and
/// the messages it already holds are not recorded again.
#[tokio::test]
async fn a_plugin_over_a_reopened_file_backend_resumes_the_sequence_and_message_positions() {
    let dir = tempfile::tempdir().unwrap();
    let history = vec![
        Message::system("s"),
        Message::user("The vault is in Lisbon. Reply with: noted"),
    ];
    {
        let before_restart = plugin_over(dir.path());
        turn(&before_restart, history.clone(), "noted").await;
    } // The process "exits": the backend and its file lock are dropped.

    let after_restart = plugin_over(dir.path());
    let mut history2 = history;
    history2.push(Message::assistant("noted"));
    history2.push(Message::user("Where is the vault? Answer in one word."));
    turn(&after_restart, history2, "Lisbon").await;

    let records = after_restart.backend().replay("demo").unwrap();
    assert_eq!(
        records.iter().map(|r| r.sequence).collect::<Vec<_>>(),
        (0..13).collect::<Vec<u64>>(),
        "6 records before the restart, 7 after, one dense sequence"
    );
    assert_eq!(
        n_messages(&records),
        3,
        "user, assistant, user — none twice"
    );
    assert_eq!(
        records[7].event,
        SessionEvent::Message(Message::assistant("noted"))
    );
}

/// "a failed append must not consume a sequence number (the next successful append reuses it
/// — this is what lets FileBackend's recovery rule work)": a crash mid-append leaves a torn
/// tail; the resumed plugin reuses the torn record's sequence and the file stays readable.
#[tokio::test]
async fn after_a_crash_mid_append_the_resumed_plugin_reuses_the_torn_records_sequence() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = plugin_over(dir.path());
        turn(&log, vec![Message::user("u")], "a").await;
    }
    // What a crash part-way through one `write` leaves: frame bytes with no terminator.
    let path = dir.path().join("demo.cslog");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(&[0x07, 0x01, 0x04, 0x64, 0x65])
        .unwrap();

    let log = plugin_over(dir.path());
    let resumed = log
        .append_log(SessionEvent::Output {
            text: "after the crash".into(),
        })
        .unwrap();
    assert_eq!(
        resumed.sequence, 5,
        "5 complete records before the torn tail"
    );

    drop(log); // the process exits again; a fresh instance reads what is on disk
    let reopened = FileBackend::new(dir.path()).unwrap();
    let records = reopened.replay("demo").unwrap();
    assert_eq!(
        records.iter().map(|r| r.sequence).collect::<Vec<_>>(),
        (0..6).collect::<Vec<u64>>()
    );
    assert_eq!(records.last(), Some(&resumed));
    let report = reopened.verify("demo").unwrap();
    assert_eq!(report.verdict, Verdict::Recovered, "{report:?}");
    assert_eq!(report.records.len(), 6);
}

/// "SessionLogPlugin returns the PluginError its backend returns": FileBackend's refusal of a
/// session id with a `/` comes back from the hook unchanged, and nothing is written.
#[tokio::test]
async fn a_hook_returns_file_backends_validation_error_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let log = SessionLogPlugin::new(Arc::new(FileBackend::new(dir.path()).unwrap()))
        .with_session_id("../escape");
    let result = log.on_stream_chunk(&MessageContentBlock::text("x")).await;
    assert!(
        matches!(&result, Err(PluginError::Validation { schema, .. }) if schema.contains("session")),
        "{result:?}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    assert!(!dir.path().parent().unwrap().join("escape.cslog").exists());
}
