//! A recording that failed says so where people look, `cuca verify` included. A file can be clean while a call in it was cut short or left open; verify says so.
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

#[test]
fn verify_names_calls_not_recorded_in_full_and_a_call_left_open() {
    let dir = tempfile::tempdir().unwrap();
    let request = UnifiedRequest::new(vec![Message::user("hi")]);
    {
        // A call the proxy closed as cut short, then one left open by a killed recorder.
        let log = plugin(dir.path(), "cut");
        log.record_request_with(&request, "{}").unwrap();
        log.append_log(SessionEvent::Output { text: "he".into() })
            .unwrap();
        log.append_log(SessionEvent::CallIncomplete {
            reason: "cut short: the caller hung up".into(),
        })
        .unwrap();
        assert!(log.close_open_call("left open").unwrap());
        let open = plugin(dir.path(), "open");
        open.record_request_with(&request, "{}").unwrap();
        let whole = plugin(dir.path(), "whole");
        whole.record_request_with(&request, "{}").unwrap();
        whole
            .append_log(SessionEvent::CallFinish {
                finish_reason: Some("stop".into()),
                model: "m".into(),
            })
            .unwrap();
    }
    let out = cuca().arg("verify").arg(dir.path()).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let block = |session: &str| -> String {
        text.split("\n")
            .skip_while(|l| !l.starts_with(&format!("{session}: ")))
            .take_while(|l| l.starts_with(&format!("{session}: ")) || l.starts_with("  "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    // Two marks on the one call in "cut" (the test's and close_open_call's): one call.
    assert!(
        block("cut").contains("incomplete: 1 call not recorded in full"),
        "{text}"
    );
    assert!(!block("cut").contains("open call at the end"), "{text}");
    assert!(block("open").contains("open call at the end"), "{text}");
    assert!(!block("whole").contains("incomplete"), "{text}");
    assert!(text.contains("; 2 calls not recorded in full"), "{text}");

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
    assert_eq!(row("cut")["incomplete_calls"], 1);
    assert_eq!(row("open")["open_call_at_end"], true);
    assert_eq!(row("whole")["open_call_at_end"], false);
}
