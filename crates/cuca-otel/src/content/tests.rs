//! Unit tests of `content`.

use super::*;
use cuca_events::Role;

#[test]
fn messages_become_role_and_parts() {
    let json = input_messages(&[Message::user("where?"), Message::assistant("Lisbon")]);
    let value: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        value,
        json!([
            {"role": "user", "parts": [{"type": "text", "content": "where?"}]},
            {"role": "assistant", "parts": [{"type": "text", "content": "Lisbon"}]},
        ])
    );
    let tool = Message {
        role: Role::Tool,
        content: vec![MessageContentBlock::ToolResult {
            tool_call_id: "c1".into(),
            content: "42".into(),
            is_error: false,
        }],
    };
    let value: Value = serde_json::from_str(&input_messages(&[tool])).unwrap();
    assert_eq!(value[0]["parts"][0]["type"], "tool_call_response");
    assert_eq!(value[0]["parts"][0]["id"], "c1");
}

#[test]
fn output_carries_reasoning_text_tool_calls_and_the_finish_reason() {
    let blocks = [
        MessageContentBlock::thinking("hmm"),
        MessageContentBlock::text("noted"),
        MessageContentBlock::ToolCall {
            id: "c1".into(),
            name: "grep".into(),
            arguments: "{}".into(),
        },
    ];
    let value: Value = serde_json::from_str(&output_messages(&blocks, Some("stop"))).unwrap();
    assert_eq!(value[0]["role"], "assistant");
    assert_eq!(value[0]["finish_reason"], "stop");
    assert_eq!(
        value[0]["parts"][0],
        json!({"type": "reasoning", "content": "hmm"})
    );
    assert_eq!(
        value[0]["parts"][1],
        json!({"type": "text", "content": "noted"})
    );
    assert_eq!(value[0]["parts"][2]["name"], "grep");
    let value: Value = serde_json::from_str(&output_messages(&blocks, None)).unwrap();
    assert!(value[0].get("finish_reason").is_none());
}

#[test]
fn system_prompts_become_text_parts() {
    assert_eq!(
        system_instructions(&["You are terse.".into()]),
        r#"[{"content":"You are terse.","type":"text"}]"#
    );
}
