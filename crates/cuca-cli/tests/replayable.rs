//! A session that cannot be replayed says so: `cuca verify` (and `--replayable`) reports a
//! session that holds two different requests at one conversation position with no way to
//! tell them apart, instead of calling it clean.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::cuca;
use cuca::{FileBackend, Message, SessionBackend, SessionEvent, SessionLogPlugin, UnifiedRequest};

fn plugin(dir: &std::path::Path, session: &str) -> SessionLogPlugin {
    SessionLogPlugin::new(Arc::new(FileBackend::new(dir).unwrap()) as Arc<dyn SessionBackend>)
        .with_session_id(session)
        .with_call_metadata(true)
}

/// One whole call: the request's records, an answer, its close.
fn call(log: &SessionLogPlugin, request: &UnifiedRequest, answer: &str) {
    log.record_request_with(request, "{}").unwrap();
    for event in [
        SessionEvent::Output {
            text: answer.into(),
        },
        SessionEvent::CallFinish {
            finish_reason: Some("stop".into()),
            model: "m".into(),
        },
        SessionEvent::Latency { duration_ms: 3 },
        SessionEvent::TokenUsage {
            prompt_tokens: 4,
            completion_tokens: 1,
        },
    ] {
        log.append_log(event).unwrap();
    }
}

fn asking(question: &str) -> UnifiedRequest {
    UnifiedRequest::new(vec![Message::system("Be brief."), Message::user(question)])
}

#[test]
fn two_different_requests_at_one_position_are_not_replayable_and_a_retry_is() {
    let dir = tempfile::tempdir().unwrap();
    {
        // An app of two conversations, recorded as one: "the second conversation's user
        // message is at a position the session had already recorded, so it is never written".
        let mixed = plugin(dir.path(), "mixed");
        call(&mixed, &asking("Name a colour."), "Blue.");
        call(&mixed, &asking("Name a planet."), "Mars.");
        // The same question twice (a client's retry; LangChain's invoke then stream).
        let retried = plugin(dir.path(), "retried");
        call(&retried, &asking("Name a colour."), "Blue.");
        call(&retried, &asking("Name a colour."), "Red.");
    }
    let out = cuca().arg("verify").arg(dir.path()).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!out.status.success(), "{text}");
    assert!(
        stderr.contains("1 of 2 sessions") && stderr.contains("cannot be replayed"),
        "{stderr}"
    );
    let block = |session: &str| -> String {
        text.split('\n')
            .skip_while(|l| !l.starts_with(&format!("{session}: ")))
            .take_while(|l| l.starts_with(&format!("{session}: ")) || l.starts_with("  "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        block("mixed")
            .contains("not replayable: calls 1 and 2 both carried 2 messages, but different ones"),
        "{text}"
    );
    assert!(!block("retried").contains("not replayable"), "{text}");
    assert!(text.contains("; 1 session not replayable"), "{text}");

    let json = cuca()
        .args(["verify", "--json"])
        .arg(dir.path())
        .output()
        .unwrap();
    let rows: Vec<serde_json::Value> = String::from_utf8(json.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let row = |s: &str| rows.iter().find(|r| r["session"] == s).unwrap().clone();
    assert_eq!(row("mixed")["replayable"], false);
    assert_eq!(row("mixed")["ambiguities"][0]["later_call"], 2);
    assert_eq!(row("retried")["replayable"], true);
}

/// A recording made before cuca wrote request digests: two calls at one position, and
/// nothing to say whether they were one request.
#[test]
fn calls_at_one_position_without_digests_are_reported_as_indistinguishable() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = SessionLogPlugin::new(
            Arc::new(FileBackend::new(dir.path()).unwrap()) as Arc<dyn SessionBackend>
        )
        .with_session_id("old");
        for answer in ["Blue.", "Mars."] {
            log.append_log(SessionEvent::CallRequest {
                model: "m".into(),
                parameters: "{}".into(),
                tools: "[]".into(),
                messages: 2,
            })
            .unwrap();
            log.append_log(SessionEvent::Output {
                text: answer.into(),
            })
            .unwrap();
        }
    }
    let out = cuca().arg("verify").arg(dir.path()).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("not replayable: calls 1 and 2 both carried 2 messages and the session holds no request digest"),
        "{text}"
    );
}
