//! The call-metadata records a plugin writes when asked: what a call was sent, how it ended.

use std::hash::Hash;
use std::sync::OnceLock;

use cuca_events::{Message, Role, SessionEvent, ToolChoice, UnifiedRequest, UnifiedResponse};
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

/// Where a session's last request digest left off: the fingerprints of the messages it
/// hashed, and the SHA-256 state after them. An agent's next call carries its whole
/// conversation again; when it begins with the same messages, the digest goes on from this
/// state and serializes and hashes only the messages after them.
///
/// Holds 16 bytes a message of the session's last request and one SHA-256 state.
#[derive(Debug, Clone, Default)]
pub(crate) struct DigestChain {
    fingerprints: Vec<u128>,
    state: Sha256,
}

/// A message's 128-bit SipHash-1-3 fingerprint over its fields, keyed at random once per
/// process: two messages with the same fingerprint are taken as the same message (a chance
/// collision is about 2⁻¹²⁸, and no caller can aim for one without the keys).
fn fingerprint(message: &Message) -> u128 {
    use siphasher::sip128::Hasher128;
    static KEYS: OnceLock<(u64, u64)> = OnceLock::new();
    let (k0, k1) = *KEYS.get_or_init(|| (rand::random(), rand::random()));
    let mut hasher = siphasher::sip128::SipHasher13::new_with_keys(k0, k1);
    message.hash(&mut hasher);
    hasher.finish128().as_u128()
}

/// The [`SessionEvent::RequestDigest`] of `request`: the SHA-256 of its user, assistant and
/// tool messages in order, each as its JSON text with its length before it (so no two lists
/// of messages hash alike by running one into the next). System prompts are left out: they
/// are recorded on every request, so they tell calls apart already.
///
/// The messages `chain` already hashed, when `request` begins with them, are not hashed
/// again (the digest is the same either way); `chain` then holds this request's messages.
pub(crate) fn digest_event(request: &UnifiedRequest, chain: &mut DigestChain) -> SessionEvent {
    let messages: Vec<&Message> = request
        .messages
        .iter()
        .filter(|m| m.role != Role::System)
        .collect();
    let fingerprints: Vec<u128> = messages.iter().map(|m| fingerprint(m)).collect();
    let (mut hasher, from) = if fingerprints.starts_with(&chain.fingerprints) {
        (chain.state.clone(), chain.fingerprints.len())
    } else {
        (Sha256::new(), 0)
    };
    for message in &messages[from..] {
        // A message is plain data; its JSON text cannot fail to serialise.
        let text = serde_json::to_vec(message).unwrap_or_default();
        hasher.update((text.len() as u64).to_le_bytes());
        hasher.update(&text);
    }
    chain.state = hasher.clone();
    chain.fingerprints = fingerprints;
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

#[cfg(test)]
mod tests {
    use cuca_events::{Message, SessionEvent, UnifiedRequest};

    use super::{digest_event, DigestChain};

    fn digest(messages: &[Message], chain: &mut DigestChain) -> String {
        match digest_event(&UnifiedRequest::new(messages.to_vec()), chain) {
            SessionEvent::RequestDigest { sha256 } => sha256,
            other => panic!("{other:?}"),
        }
    }

    /// A digest that goes on from the last request's state is the digest of the whole list:
    /// for a conversation that grows, one asked again, one cut short, one whose earlier
    /// message changed, and one that begins anew.
    #[test]
    fn a_digest_continued_from_the_last_request_is_the_digest_of_the_whole_request() {
        let user = |i: usize| Message::user(format!("question {i}"));
        let assistant = |i: usize| Message::assistant(format!("answer {i}"));
        let mut conversation = vec![Message::system("You are terse."), user(0)];
        let mut requests = vec![conversation.clone()];
        for i in 1..6 {
            conversation.extend([assistant(i - 1), user(i)]);
            requests.push(conversation.clone());
        }
        requests.push(conversation.clone());
        requests.push(conversation[..5].to_vec());
        let mut changed = conversation.clone();
        changed[3] = Message::user("question 1, asked otherwise");
        requests.push(changed);
        requests.push(vec![user(9)]);
        requests.push(conversation.clone());
        let mut chain = DigestChain::default();
        let mut seen = std::collections::BTreeSet::new();
        for request in &requests {
            let continued = digest(request, &mut chain);
            let whole = digest(request, &mut DigestChain::default());
            assert_eq!(continued, whole, "{} messages", request.len());
            seen.insert(whole);
        }
        // Different lists digest apart (the repeated ones alike).
        assert_eq!(seen.len(), requests.len() - 2);
    }
}
