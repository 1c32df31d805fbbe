//! Redaction at write time in the library: a plugin given rules redacts every record it
//! writes — a request's system prompt, messages, tool results and call metadata, every
//! streamed block, and what `append_log` is handed — before the store sees it, and says how
//! many values each rule replaced; a plugin without rules writes what passed.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use cuca_events::{
    CucaPlugin, Message, MessageContentBlock, SessionBackend, SessionEvent, UnifiedRequest,
};
use cuca_session_log::redact::{Config, Rules};
use cuca_session_log::SessionLogPlugin;
use cuca_store_file::FileBackend;
use futures::executor::block_on;

const OPENAI: &str = "sk-proj-Qm7vR2xT9kLp4WzN8cYb3HdF6jGs1aEu_Xw2Nc7Vb1Mk8Jh3Gf6Dd0Ss5";
const GITHUB: &str = "ghp_R8mK2xQ9wL4zT7vN3cY6bH1jF5gS0dA2eU8i";
const EMPLOYEE: &str = "EMP-004211";

fn request() -> UnifiedRequest {
    let mut tool = Message::user("");
    tool.role = cuca_events::Role::Tool;
    tool.content = vec![MessageContentBlock::ToolResult {
        tool_call_id: "call_1".into(),
        content: format!("GITHUB_TOKEN={GITHUB}"),
        is_error: false,
    }];
    UnifiedRequest::new(vec![
        Message::system(format!("deploy with {OPENAI}")),
        Message::user(format!("who is {EMPLOYEE}?")),
        tool,
    ])
}

/// Records one call through `plugin` and returns the session file's bytes.
fn record(plugin: &SessionLogPlugin, dir: &std::path::Path) -> Vec<u8> {
    let mut request = request();
    block_on(plugin.on_request(&mut request)).unwrap();
    block_on(plugin.on_stream_chunk(&MessageContentBlock::text(format!("it is {OPENAI}"))))
        .unwrap();
    plugin
        .append_log(SessionEvent::ToolResult {
            tool_call_id: "call_2".into(),
            content: String::new(),
            is_error: false,
            stdout: Some(format!("token {GITHUB}")),
            stderr: None,
            exit_code: Some(0),
        })
        .unwrap();
    std::fs::read(dir.join(format!("{}.cslog", plugin.session_id()))).unwrap()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

#[test]
fn a_plugin_with_rules_stores_markers_and_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn SessionBackend> = Arc::new(FileBackend::new(dir.path()).unwrap());
    let mut config = Config::default();
    config.add_regex_flag("employee=EMP-[0-9]{6}").unwrap();
    let rules = Arc::new(Rules::new(&config).unwrap());
    let plugin = SessionLogPlugin::new(Arc::clone(&backend))
        .with_session_id("redacted")
        .with_call_metadata(true)
        .with_tool_results(true)
        .with_redaction(Some(rules));
    let bytes = record(&plugin, dir.path());
    for secret in [OPENAI, GITHUB, EMPLOYEE] {
        assert!(!contains(&bytes, secret), "{secret} is in the file");
    }
    let records = backend.replay("redacted").unwrap();
    assert_eq!(
        records[0].event,
        SessionEvent::SystemPrompt {
            text: "deploy with [REDACTED:openai-key]".into()
        }
    );
    assert!(records.iter().any(|r| r.event
        == SessionEvent::Output {
            text: "it is [REDACTED:openai-key]".into()
        }));
    assert_eq!(
        plugin.take_redacted().to_string(),
        "employee=1, github-token=2, openai-key=2"
    );
    // Taken, not copied: the next call's row starts from nothing.
    assert!(plugin.take_redacted().is_empty());
}

#[test]
fn a_plugin_without_rules_stores_what_passed() {
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn SessionBackend> = Arc::new(FileBackend::new(dir.path()).unwrap());
    let plugin = SessionLogPlugin::new(Arc::clone(&backend))
        .with_session_id("plain")
        .with_tool_results(true);
    let bytes = record(&plugin, dir.path());
    for secret in [OPENAI, GITHUB, EMPLOYEE] {
        assert!(contains(&bytes, secret), "{secret} is not in the file");
    }
    assert!(plugin.take_redacted().is_empty());
}
