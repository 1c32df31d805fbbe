//! `cuca replay` and `export` take the base session or one conversation: a base session's replay names the conversations it holds, each replayable on its own.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::cuca;
use cuca::{FileBackend, SessionBackend, SessionEvent, SessionLogPlugin};

#[test]
fn replaying_a_base_session_names_its_conversations_and_each_replays_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(FileBackend::new(dir.path()).unwrap()) as Arc<dyn SessionBackend>;
    for (session, answer) in [
        ("app", "Blue."),
        ("app:conv:2", "Oak."),
        ("app:conv:1", "Mars."),
        ("other", "Hi."),
    ] {
        let log = SessionLogPlugin::new(Arc::clone(&backend)).with_session_id(session);
        for event in [
            SessionEvent::Output {
                text: answer.into(),
            },
            SessionEvent::Latency { duration_ms: 2 },
            SessionEvent::TokenUsage {
                prompt_tokens: 3,
                completion_tokens: 1,
            },
        ] {
            log.append_log(event).unwrap();
        }
    }
    let out = cuca()
        .args(["replay", "--no-pager"])
        .arg(dir.path())
        .arg("app")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let d = dir.path().display();
    assert!(
        text.ends_with(&format!(
            "Session \"app\" holds 2 more conversations: replay each on its own:\n  cuca replay {d} app:conv:1\n  cuca replay {d} app:conv:2\n"
        )),
        "{text}"
    );
    assert!(text.contains("Blue.") && !text.contains("Mars."), "{text}");
    let one = cuca()
        .args(["replay", "--no-pager"])
        .arg(dir.path())
        .arg("app:conv:1")
        .output()
        .unwrap();
    let one = String::from_utf8(one.stdout).unwrap();
    assert!(one.contains("Mars.") && !one.contains("holds"), "{one}");
    let exported = cuca()
        .arg("export")
        .arg(dir.path())
        .arg("app:conv:2")
        .output()
        .unwrap();
    assert!(String::from_utf8(exported.stdout).unwrap().contains("Oak."));
}
