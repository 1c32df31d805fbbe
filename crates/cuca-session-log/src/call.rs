//! The call-metadata records a plugin writes when asked: what a call was sent, how it ended.

use cuca_events::{Role, SessionEvent, ToolChoice, UnifiedRequest, UnifiedResponse};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

/// The [`SessionEvent::CallRequest`] of `request`: its model, the sampling parameters that
/// travelled, and the tools it offered.
///
/// `sent` is the caller's own JSON object text of its parameters, when the caller holds it
/// (the proxy): then it is the record's parameters exactly as sent, and nothing is added
/// from the unified request's reading of them (a `max_completion_tokens` is not also written
/// as a `max_tokens`). Without it, the parameters the request set are written.
pub(crate) fn request_event(request: &UnifiedRequest, sent: Option<&str>) -> SessionEvent {
    let parameters = match sent {
        Some(sent) => sent.to_owned(),
        None => Value::Object(unified_parameters(request)).to_string(),
    };
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
        parameters,
        tools: Value::Array(tools).to_string(),
        messages: request.messages.len() as u64,
    }
}

/// The [`SessionEvent::RequestDigest`] of `request`: the SHA-256 of its user, assistant and
/// tool messages in order, each as its JSON text with its length before it (so no two lists
/// of messages hash alike by running one into the next). System prompts are left out: they
/// are recorded on every request, so they tell calls apart already.
pub(crate) fn digest_event(request: &UnifiedRequest) -> SessionEvent {
    let mut hasher = Sha256::new();
    for message in request.messages.iter().filter(|m| m.role != Role::System) {
        // A message is plain data; its JSON text cannot fail to serialise.
        let text = serde_json::to_vec(message).unwrap_or_default();
        hasher.update((text.len() as u64).to_le_bytes());
        hasher.update(&text);
    }
    let sha256 = hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    SessionEvent::RequestDigest { sha256 }
}

/// The sampling parameters a unified request set, with the names OpenAI gives them.
fn unified_parameters(request: &UnifiedRequest) -> Map<String, Value> {
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
    parameters
}

/// The [`SessionEvent::CallFinish`] of `response`.
pub(crate) fn finish_event(response: &UnifiedResponse) -> SessionEvent {
    SessionEvent::CallFinish {
        finish_reason: response.finish_reason.clone(),
        model: response.model.clone(),
    }
}
