//! A request cut while it was written (the store refused after its first records) and never
//! closed: `cuca verify` says so, and a session where the next call joined its turn, which a
//! replay cannot match, is not replayable.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::cuca;
use cuca::{FileBackend, Message, SessionBackend, SessionEvent, SessionLogPlugin};

fn plugin(dir: &std::path::Path, session: &str) -> SessionLogPlugin {
    SessionLogPlugin::new(Arc::new(FileBackend::new(dir).unwrap()) as Arc<dyn SessionBackend>)
        .with_session_id(session)
        .with_call_metadata(true)
}

fn system() -> SessionEvent {
    SessionEvent::SystemPrompt {
        text: "Be brief.".into(),
    }
}

/// One whole call's records: its request (a system prompt and `messages` user message
/// records), its answer and its closing records.
fn call(log: &SessionLogPlugin, messages: u64) {
    log.append_log(system()).unwrap();
    log.append_log(SessionEvent::Message(Message::user(format!("q{messages}"))))
        .unwrap();
    let events = [
        SessionEvent::CallRequest {
            model: "m".into(),
            parameters: "{}".into(),
            tools: "[]".into(),
            messages: messages + 1,
        },
        SessionEvent::Output { text: "a".into() },
        SessionEvent::CallFinish {
            finish_reason: Some("stop".into()),
            model: "m".into(),
        },
        SessionEvent::Latency { duration_ms: 3 },
        SessionEvent::TokenUsage {
            prompt_tokens: 1,
            completion_tokens: 1,
        },
    ];
    for event in events {
        log.append_log(event).unwrap();
    }
}

#[test]
fn verify_names_a_partial_request_and_refuses_a_session_where_a_call_joined_one() {
    let dir = tempfile::tempdir().unwrap();
    {
        // The next call joined the partial request's turn.
        let joined = plugin(dir.path(), "joined");
        call(&joined, 1);
        joined.append_log(system()).unwrap();
        call(&joined, 3);
        // The partial request is the session's last record.
        let at_end = plugin(dir.path(), "at_end");
        call(&at_end, 1);
        at_end.append_log(system()).unwrap();
        // Closed by its recorder before the next call: a turn of its own.
        let closed = plugin(dir.path(), "closed");
        call(&closed, 1);
        closed.append_log(system()).unwrap();
        assert!(closed.close_open_call("the store refused").unwrap());
        call(&closed, 3);
    }
    let out = cuca().arg("verify").arg(dir.path()).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!out.status.success(), "{text}");
    let block = |session: &str| -> String {
        text.split('\n')
            .skip_while(|l| !l.starts_with(&format!("{session}: ")))
            .take_while(|l| l.starts_with(&format!("{session}: ")) || l.starts_with("  "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        block("joined").contains("not replayable: a request cut while it was written (from sequence 7) was never closed, and the call whose CallRequest is at sequence 10 joined its turn (3 request records before that CallRequest)"),
        "{text}"
    );
    assert!(
        block("at_end").contains("partial request: a request cut while it was written (1 record from sequence 7, no CallRequest after it) ends the session"),
        "{text}"
    );
    assert!(!block("closed").contains("partial"), "{text}");
    assert!(!block("closed").contains("not replayable"), "{text}");
    assert!(text.contains("1 session not replayable"), "{text}");

    // Without the joined session, a partial request at the end is said, not refused.
    let out = cuca()
        .args(["verify", "--json"])
        .arg(dir.path())
        .args(["at_end", "closed"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let row = |s: &str| rows.iter().find(|r| r["session"] == s).unwrap().clone();
    assert_eq!(row("at_end")["partial_requests"][0]["first_sequence"], 7);
    assert_eq!(row("at_end")["replayable"], true);
    assert_eq!(row("closed")["partial_requests"], serde_json::json!([]));
}
