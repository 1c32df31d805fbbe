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
    assert_eq!(
        value[0],
        json!({"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "42"}]})
    );
}

#[test]
fn output_carries_reasoning_text_tool_calls_and_the_finish_reason() {
    let blocks = [
        MessageContentBlock::thinking("hmm"),
        MessageContentBlock::text("noted"),
        MessageContentBlock::ToolCall {
            id: "c1".into(),
            name: "grep".into(),
            arguments: r#"{"pattern":"vault"}"#.into(),
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
    // The arguments are the JSON value the model wrote, not a string of it.
    assert_eq!(
        value[0]["parts"][2],
        json!({"type": "tool_call", "id": "c1", "name": "grep", "arguments": {"pattern": "vault"}})
    );
}

#[test]
fn the_finish_reason_is_always_there_recorded_or_defaulted() {
    // `gen_ai.output.messages` always has the `finish_reason` the GenAI conventions'
    // output-messages schema requires.
    let text = [MessageContentBlock::text("Lisbon")];
    let value: Value = serde_json::from_str(&output_messages(&text, None)).unwrap();
    assert_eq!(value[0]["finish_reason"], DEFAULT_FINISH_REASON);
    let call = [MessageContentBlock::ToolCall {
        id: "c1".into(),
        name: "grep".into(),
        arguments: "{\"pat".into(),
    }];
    let value: Value = serde_json::from_str(&output_messages(&call, None)).unwrap();
    assert_eq!(value[0]["finish_reason"], "tool_call");
    // Arguments cut mid-stream are sent as the text they are.
    assert_eq!(value[0]["parts"][0]["arguments"], "{\"pat");
    // A provider's own words in the conventions' spelling.
    let value: Value = serde_json::from_str(&output_messages(&call, Some("tool_calls"))).unwrap();
    assert_eq!(value[0]["finish_reason"], "tool_call");
    let value: Value = serde_json::from_str(&output_messages(&text, Some("max_tokens"))).unwrap();
    assert_eq!(value[0]["finish_reason"], "length");
    let value: Value = serde_json::from_str(&output_messages(&text, Some("weird"))).unwrap();
    assert_eq!(value[0]["finish_reason"], "weird");
}

#[test]
fn consecutive_streamed_blocks_are_one_part() {
    // The answer is one joined text part, not one part per streamed token (12 parts for a
    // 12-token answer).
    let blocks: Vec<MessageContentBlock> = ["th", "ink"]
        .iter()
        .map(|t| MessageContentBlock::thinking(*t))
        .chain(
            ["The", " vault", " is", " in", " Lisbon", "."]
                .iter()
                .map(|t| MessageContentBlock::text(*t)),
        )
        .chain([MessageContentBlock::ToolCall {
            id: "c1".into(),
            name: "open".into(),
            arguments: "{}".into(),
        }])
        .chain([MessageContentBlock::text("done")])
        .collect();
    let value: Value = serde_json::from_str(&output_messages(&blocks, None)).unwrap();
    assert_eq!(
        value[0]["parts"],
        json!([
            {"type": "reasoning", "content": "think"},
            {"type": "text", "content": "The vault is in Lisbon."},
            {"type": "tool_call", "id": "c1", "name": "open", "arguments": {}},
            {"type": "text", "content": "done"},
        ])
    );
    assert_eq!(answer_text(&blocks), "The vault is in Lisbon.done");
}

#[test]
fn the_input_shown_is_what_came_after_the_last_answer() {
    let (first, second, answer) = (
        Message::user("first"),
        Message::user("second"),
        Message::assistant("a"),
    );
    let system = Message::system("terse");
    // The new question, as text, whatever came before it.
    assert_eq!(
        new_input(&[&system, &first, &answer, &second]),
        ("second".to_owned(), crate::conventions::MIME_TEXT)
    );
    // A tool's result is a message of its own, shown as the conventions' JSON.
    let result = Message {
        role: Role::Tool,
        content: vec![MessageContentBlock::ToolResult {
            tool_call_id: "c1".into(),
            content: "24 °C".into(),
            is_error: false,
        }],
    };
    let (value, mime) = new_input(&[&first, &answer, &result]);
    assert_eq!(mime, crate::conventions::MIME_JSON);
    let value: Value = serde_json::from_str(&value).unwrap();
    assert_eq!(value[0]["role"], "tool");
    assert_eq!(value.as_array().map(Vec::len), Some(1));
    // Nothing after the last answer: the whole conversation sent.
    let (value, mime) = new_input(&[&system, &first, &answer]);
    assert_eq!(mime, crate::conventions::MIME_JSON);
    assert_eq!(value, input_messages([&first, &answer]));
}

#[test]
fn an_answer_of_reasoning_alone_is_shown_as_its_text() {
    let blocks = [
        MessageContentBlock::Thinking {
            thinking: "The user".into(),
        },
        MessageContentBlock::Thinking {
            thinking: " asks.".into(),
        },
    ];
    let output = output_messages(&blocks, None);
    assert_eq!(
        output_value(&blocks, &output),
        ("The user asks.".to_owned(), crate::conventions::MIME_TEXT)
    );
    let call = [MessageContentBlock::ToolCall {
        id: "c1".into(),
        name: "open".into(),
        arguments: "{}".into(),
    }];
    let output = output_messages(&call, None);
    assert_eq!(
        output_value(&call, &output),
        (output.clone(), crate::conventions::MIME_JSON)
    );
}

#[test]
fn recorded_tools_become_openai_function_schemas_and_junk_none() {
    let tools = r#"[{"name":"open","description":"Opens a file","parameters":{"type":"object"}}]"#;
    let schemas = tool_schemas(tools);
    assert_eq!(schemas.len(), 1);
    let value: Value = serde_json::from_str(&schemas[0]).unwrap();
    assert_eq!(
        value,
        json!({"type": "function", "function": {"name": "open", "description": "Opens a file", "parameters": {"type": "object"}}})
    );
    assert!(tool_schemas("[]").is_empty());
    assert!(tool_schemas("not json").is_empty());
    let many = Value::Array(vec![json!({"name": "t"}); MAX_TOOLS + 5]).to_string();
    assert_eq!(tool_schemas(&many).len(), MAX_TOOLS);
}

#[test]
fn system_prompts_become_text_parts() {
    assert_eq!(
        system_instructions(&["You are terse.".into()]),
        r#"[{"content":"You are terse.","type":"text"}]"#
    );
}
