//! `JournalPlugin`: records `model_io` / `model_error` for every call a client makes.
//!
//! `on_request` interns the request's bodies at once and keeps only the pooled form (indices)
//! keyed by the call id, so no message body waits in memory for the response; the response or
//! the error then writes the entry. The plugin never fails a call: every hook returns `Ok`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use cuca_events::{async_trait, CucaPlugin, PluginError, UnifiedRequest, UnifiedResponse};

use crate::format::{ErrorClass, PooledRequest, RequestRole};
use crate::recorder::{ModelFailure, Recorder};

/// The agent id a call is attributed to when its request names none.
pub const DEFAULT_AGENT: &str = "root";

/// The request tag that marks a compaction summarizer's call (`metadata.tag`).
pub const COMPACTION_TAG: &str = "compaction";

struct Pending {
    agent: String,
    request: PooledRequest,
    sent: Instant,
}

/// A [`CucaPlugin`] that journals every model call through a [`Recorder`].
///
/// Pairs a request with its response by `request.metadata.call_id` / `response.call_id` (the
/// client mints one per call). Without a call id, a call is keyed by its agent, so one call per
/// agent at a time still pairs. The agent is `request.metadata.agent` (else [`DEFAULT_AGENT`]);
/// the role is the compaction summarizer when `metadata.tag` is [`COMPACTION_TAG`]. Register it
/// after any redaction plugin: it records the request as earlier hooks left it.
pub struct JournalPlugin {
    recorder: Recorder,
    pending: Mutex<HashMap<String, Pending>>,
}

impl JournalPlugin {
    /// A plugin recording into `recorder`.
    pub fn new(recorder: Recorder) -> Self {
        JournalPlugin {
            recorder,
            pending: Mutex::new(HashMap::new()),
        }
    }

    /// The recorder it writes to.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// Calls seen by `on_request` and not yet answered or failed.
    pub fn in_flight(&self) -> usize {
        self.pending.lock().map(|p| p.len()).unwrap_or(0)
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        match self.pending.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

fn agent_of(request: &UnifiedRequest) -> String {
    request
        .metadata
        .agent
        .clone()
        .unwrap_or_else(|| DEFAULT_AGENT.to_owned())
}

fn key_of(call_id: Option<&str>, agent: &str) -> String {
    match call_id {
        Some(id) => format!("call:{id}"),
        None => format!("agent:{agent}"),
    }
}

/// The request's role discriminator, from its tag.
pub fn role_of(request: &UnifiedRequest) -> RequestRole {
    match request.metadata.tag.as_deref() {
        Some(COMPACTION_TAG) => RequestRole::CompactionSummarizer,
        _ => RequestRole::AgentTurn,
    }
}

/// The class a failed call is recorded under, read off the error a client returned.
///
/// A provider status is `fatal_status`, except a refusal that names images or vision
/// (`unsupported_image`), 401/403 (`missing_credential`), and 429 or 5xx, which the client
/// retries over its whole schedule before a plugin sees them (`retry_exhaustion`), as it does a
/// transport failure or a timeout. A credential validation error is `missing_credential`; an
/// undecodable stream is `unparseable_response`; a plugin abort that names a loop is
/// `loop_abandoned`. Anything else is `fatal_status`. A caller that knows the class better
/// records through [`Recorder::model_error`] directly.
pub fn classify(error: &PluginError) -> (ErrorClass, Option<u16>) {
    match error {
        PluginError::Provider {
            status, message, ..
        } => {
            let lower = message.to_ascii_lowercase();
            let class = if lower.contains("image") || lower.contains("vision") {
                ErrorClass::UnsupportedImage
            } else if *status == 401 || *status == 403 {
                ErrorClass::MissingCredential
            } else if *status == 429 || *status >= 500 {
                ErrorClass::RetryExhaustion
            } else {
                ErrorClass::FatalStatus
            };
            (class, Some(*status))
        }
        PluginError::Transport { .. } | PluginError::Timeout { .. } => {
            (ErrorClass::RetryExhaustion, None)
        }
        PluginError::Decode { .. } => (ErrorClass::UnparseableResponse, None),
        PluginError::Validation { schema, message } => {
            let text = format!("{schema} {message}").to_ascii_lowercase();
            if text.contains("credential") || text.contains("api key") || text.contains("api_key") {
                (ErrorClass::MissingCredential, None)
            } else {
                (ErrorClass::FatalStatus, None)
            }
        }
        PluginError::Plugin { message, .. } if message.to_ascii_lowercase().contains("loop") => {
            (ErrorClass::LoopAbandoned, None)
        }
        _ => (ErrorClass::FatalStatus, None),
    }
}

#[async_trait]
impl CucaPlugin for JournalPlugin {
    fn name(&self) -> &str {
        "journal"
    }

    async fn on_request(&self, request: &mut UnifiedRequest) -> Result<(), PluginError> {
        let agent = agent_of(request);
        let key = key_of(request.metadata.call_id.as_deref(), &agent);
        if let Some(pooled) = self.recorder.intern_request(request, role_of(request)) {
            self.pending().insert(
                key,
                Pending {
                    agent,
                    request: pooled,
                    sent: Instant::now(),
                },
            );
        }
        Ok(())
    }

    async fn on_response_complete(&self, response: &UnifiedResponse) -> Result<(), PluginError> {
        let pending = {
            let mut map = self.pending();
            match response.call_id.as_deref() {
                Some(id) => map.remove(&key_of(Some(id), "")),
                // No call id on the response: pair with the only call in flight, if that is
                // unambiguous.
                None if map.len() == 1 => {
                    let key = map.keys().next().cloned();
                    key.and_then(|key| map.remove(&key))
                }
                None => None,
            }
        };
        if let Some(pending) = pending {
            let latency = if response.duration.is_zero() {
                pending.sent.elapsed()
            } else {
                response.duration
            };
            self.recorder
                .model_io_pooled(&pending.agent, pending.request, response, latency);
        }
        Ok(())
    }

    async fn on_error(
        &self,
        request: &UnifiedRequest,
        error: &PluginError,
    ) -> Result<(), PluginError> {
        let agent = agent_of(request);
        self.pending()
            .remove(&key_of(request.metadata.call_id.as_deref(), &agent));
        let (class, status) = classify(error);
        let detail = error.to_string();
        self.recorder.model_error(
            &agent,
            request,
            role_of(request),
            &ModelFailure {
                class,
                status,
                detail: &detail,
            },
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests;
