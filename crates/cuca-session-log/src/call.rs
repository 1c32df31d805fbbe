//! The call-metadata records a plugin writes when asked: what a call was sent, how it ended.

use cuca_events::{SessionEvent, ToolChoice, UnifiedRequest, UnifiedResponse};
use serde_json::{json, Map, Value};

/// The [`SessionEvent::CallRequest`] of `request`: its model, the sampling parameters that
/// travelled (only those it set), and the tools it offered.
pub(crate) fn request_event(request: &UnifiedRequest, more: &Map<String, Value>) -> SessionEvent {
    let mut parameters = Map::new();
    if let Some(max_tokens) = request.max_tokens {
        parameters.insert("max_tokens".into(), json!(max_tokens));
    }
    if let Some(temperature) = request.temperature {
        // A NaN has no JSON spelling; serde_json writes it as null, which says "not a number"
        // without losing the key.
        parameters.insert("temperature".into(), json!(temperature));
    }
    if let Some(effort) = &request.reasoning_effort {
        parameters.insert("reasoning_effort".into(), json!(effort));
    }
    if let Some(choice) = &request.tool_choice {
        let choice = match choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Named(name) => json!({"type": "function", "function": {"name": name}}),
        };
        parameters.insert("tool_choice".into(), choice);
    }
    // What the caller says it sent wins over the unified request's reading of it (an f32
    // temperature, `max_completion_tokens` read as `max_tokens`).
    for (key, value) in more {
        parameters.insert(key.clone(), value.clone());
    }
    let tools: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| {
            json!({
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            })
        })
        .collect();
    SessionEvent::CallRequest {
        model: request.model.clone(),
        parameters: Value::Object(parameters).to_string(),
        tools: Value::Array(tools).to_string(),
        messages: request.messages.len() as u64,
    }
}

/// The [`SessionEvent::CallFinish`] of `response`.
pub(crate) fn finish_event(response: &UnifiedResponse) -> SessionEvent {
    SessionEvent::CallFinish {
        finish_reason: response.finish_reason.clone(),
        model: response.model.clone(),
    }
}
