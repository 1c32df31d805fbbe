//! Unit tests of the request body.

use cuca_events::{Message, MessageContentBlock, Role, ToolChoice, ToolDefinition, UnifiedRequest};
use serde_json::{json, Value};

use super::*;

fn body(ceiling: MaxTokensField, request: &UnifiedRequest) -> Value {
    serde_json::from_slice(&request_body(request, &request.model, ceiling).unwrap()).unwrap()
}

#[test]
fn every_body_streams_with_usage_and_omits_what_is_unset() {
    let request = UnifiedRequest::new(vec![Message::user("hi")]);
    assert_eq!(
        body(MaxTokensField::MaxTokens, &request),
        json!({
            "messages": [{"role": "user", "content": "hi"}],
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    );
}

#[test]
fn openai_gets_max_completion_tokens_and_llama_cpp_max_tokens() {
    let mut request = UnifiedRequest::new(vec![Message::user("hi")]);
    request.model = "gpt-4o-mini".into();
    request.max_tokens = Some(64);
    request.reasoning_effort = Some("low".into());
    let openai = body(MaxTokensField::MaxCompletionTokens, &request);
    assert_eq!(openai["max_completion_tokens"], 64);
    assert_eq!(openai.get("max_tokens"), None);
    assert_eq!(openai["reasoning_effort"], "low");
    assert_eq!(openai["model"], "gpt-4o-mini");
    let llama = body(MaxTokensField::MaxTokens, &request);
    assert_eq!(llama["max_tokens"], 64);
    assert_eq!(llama.get("max_completion_tokens"), None);
}

#[test]
fn tool_calls_results_thinking_and_images_take_the_chat_completions_shape() {
    let mut request = UnifiedRequest::new(vec![
        Message {
            role: Role::User,
            content: vec![
                MessageContentBlock::text("what is this?"),
                MessageContentBlock::ImageBase64 {
                    media_type: "image/png".into(),
                    data: "iVBO".into(),
                },
            ],
        },
        Message {
            role: Role::Assistant,
            content: vec![
                MessageContentBlock::thinking("look it up"),
                MessageContentBlock::ToolCall {
                    id: "call_1".into(),
                    name: "lookup".into(),
                    arguments: "{\"q\":\"png\"}".into(),
                },
            ],
        },
        Message {
            role: Role::Tool,
            content: vec![MessageContentBlock::ToolResult {
                tool_call_id: "call_1".into(),
                content: "a picture".into(),
                is_error: false,
            }],
        },
    ]);
    request.tools = vec![ToolDefinition {
        name: "lookup".into(),
        description: "Looks a thing up.".into(),
        parameters: json!({"type": "object"}),
    }];
    request.tool_choice = Some(ToolChoice::Named("lookup".into()));
    let wire = body(MaxTokensField::MaxTokens, &request);
    assert_eq!(
        wire["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
            ]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"png\"}"}},
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "a picture"},
        ])
    );
    assert_eq!(
        wire["tools"],
        json!([{"type": "function", "function": {
            "name": "lookup", "description": "Looks a thing up.", "parameters": {"type": "object"}
        }}])
    );
    assert_eq!(
        wire["tool_choice"],
        json!({"type": "function", "function": {"name": "lookup"}})
    );
}
