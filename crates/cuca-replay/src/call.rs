//! A turn's call metadata: what the call was sent and how it ended, where the recording has it.

use cuca_events::{SessionEvent, TokenDetail};

use crate::trajectory::ReplayTurn;

/// What one turn's `CallRequest` record says the call was sent besides its messages.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CallParameters {
    /// The model asked for (empty: the server's choice).
    pub model: String,
    /// The sampling parameters that travelled, as the JSON text of one object.
    pub parameters: String,
    /// The tools offered, as the JSON text of an array of `{name, description, parameters}`.
    pub tools: String,
    /// How many messages the request carried, every role counted.
    pub messages: u64,
}

/// A turn's call metadata: the `CallRequest` and `CallFinish` records a session log writes
/// when asked (`SessionLogPlugin::with_call_metadata`). Both are `None` for a turn recorded
/// without them, which is every turn of a plugin that was not asked.
///
/// It sits beside the seed's view of a turn and changes none of it: the records land in no
/// other list, and [`ReplayTurn::response`] still reports `finish_reason: None`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CallMetadata {
    request: Option<CallParameters>,
    finish: Option<(Option<String>, String)>,
    incomplete: Option<String>,
    wire: Option<(String, String)>,
    digest: Option<String>,
    tokens: Option<TokenDetail>,
}

impl CallMetadata {
    /// What the call was sent, from its `CallRequest` record.
    pub fn request(&self) -> Option<&CallParameters> {
        self.request.as_ref()
    }

    /// Whether a `CallFinish` record closed the call.
    pub fn has_finish(&self) -> bool {
        self.finish.is_some()
    }

    /// The finish reason the server reported, from the `CallFinish` record; `None` when
    /// there is no such record or the server never said (a stream cut short).
    pub fn finish_reason(&self) -> Option<&str> {
        self.finish
            .as_ref()
            .and_then(|(reason, _)| reason.as_deref())
    }

    /// The model that answered, from the `CallFinish` record.
    pub fn served_model(&self) -> Option<&str> {
        self.finish.as_ref().map(|(_, model)| model.as_str())
    }

    /// Why the turn's records do not hold the call's whole answer, from its
    /// `CallIncomplete` record; `None` for a call recorded whole (or by a recorder that does
    /// not write the record).
    pub fn incomplete(&self) -> Option<&str> {
        self.incomplete.as_deref()
    }

    /// What the call's wire format said beyond the records, from its `CallWire` record: the
    /// format's name (`"messages"`, `"responses"`) and the JSON text of its extra fields.
    /// `None` for a call recorded in Chat Completions (which needs none) or without metadata.
    pub fn wire(&self) -> Option<(&str, &str)> {
        self.wire
            .as_ref()
            .map(|(format, wire)| (format.as_str(), wire.as_str()))
    }

    /// The SHA-256 of the call's user, assistant and tool messages, from its `RequestDigest`
    /// record (64 hex digits); `None` for a call recorded without one.
    pub fn digest(&self) -> Option<&str> {
        self.digest.as_deref()
    }

    /// Every token count the call's answer reported, from its `TokenDetail` record; `None`
    /// for a call recorded without one (before the record existed, or with no usage report).
    pub fn tokens(&self) -> Option<&TokenDetail> {
        self.tokens.as_ref()
    }

    /// Whether the turn holds none of the call records.
    pub fn is_empty(&self) -> bool {
        self.request.is_none()
            && self.finish.is_none()
            && self.incomplete.is_none()
            && self.wire.is_none()
            && self.digest.is_none()
            && self.tokens.is_none()
    }

    /// Files a `CallRequest`, `CallFinish` or `CallIncomplete` event; a turn keeps the last
    /// of each kind, since one call writes one of each.
    pub(crate) fn take(&mut self, event: SessionEvent) {
        match event {
            SessionEvent::CallRequest {
                model,
                parameters,
                tools,
                messages,
            } => {
                self.request = Some(CallParameters {
                    model,
                    parameters,
                    tools,
                    messages,
                });
            }
            SessionEvent::CallFinish {
                finish_reason,
                model,
            } => self.finish = Some((finish_reason, model)),
            SessionEvent::CallIncomplete { reason } => self.incomplete = Some(reason),
            SessionEvent::CallWire { format, wire } => self.wire = Some((format, wire)),
            SessionEvent::RequestDigest { sha256 } => self.digest = Some(sha256),
            SessionEvent::TokenDetail(detail) => self.tokens = Some(detail),
            _ => {}
        }
    }
}

impl ReplayTurn {
    /// The turn's call metadata (model, sampling parameters, tools offered, finish reason),
    /// where the recording has it; empty for a turn recorded without it.
    pub fn call(&self) -> &CallMetadata {
        &self.call
    }
}

#[cfg(test)]
mod tests;
