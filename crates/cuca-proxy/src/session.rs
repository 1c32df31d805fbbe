//! Choosing a call's session, and the one writer the proxy keeps per session.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::http::{HeaderMap, StatusCode};
use cuca_events::{PluginError, SessionBackend};
use cuca_session_log::SessionLogPlugin;

use crate::refusal::ApiError;

/// The longest session id accepted: a `.cslog` file name must fit in 255 bytes with its
/// extension, and fork ids grow from it.
const MAX_SESSION_ID_BYTES: usize = 200;

/// Why `id` cannot name a session, or `None` when it can. The same rule `FileBackend`
/// applies, checked before anything is forwarded, so a call is never sent upstream only to
/// find that it cannot be recorded.
pub(crate) fn invalid_session_id(id: &str) -> Option<String> {
    if id.is_empty() {
        return Some("a session id cannot be empty".into());
    }
    if id.len() > MAX_SESSION_ID_BYTES {
        return Some(format!(
            "a session id is at most {MAX_SESSION_ID_BYTES} bytes; this one has {}",
            id.len()
        ));
    }
    if id.chars().all(|c| c == '.') {
        return Some(format!(
            "session id {id:?} is made only of dots, which name directories, not files"
        ));
    }
    if id.contains(['/', '\\', '\0']) || id.chars().any(char::is_control) {
        return Some(format!(
            "session id {id:?} holds a '/', '\\\\', NUL or control character"
        ));
    }
    None
}

/// The conversation `X-Cuca-Conversation` names in session `base`, if the header was sent.
pub(crate) fn named_conversation(
    headers: &HeaderMap,
    base: &str,
) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(crate::headers::CONVERSATION_HEADER) else {
        return Ok(None);
    };
    let refused = |message: String| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "cuca_invalid_conversation",
            message,
        )
        .in_session(base)
    };
    let name = value
        .to_str()
        .map_err(|_| refused("the X-Cuca-Conversation header is not visible ASCII".into()))?;
    if name.is_empty() || name.contains(':') {
        return Err(refused(format!(
            "X-Cuca-Conversation {name:?} cannot name a conversation: it must be non-empty and hold no ':'"
        )));
    }
    // The automatic conversations are numbered; a named one has the same shape.
    let id = format!("{base}:conv:{name}");
    match invalid_session_id(&id) {
        None => Ok(Some(id)),
        Some(message) => Err(refused(message)),
    }
}

/// The session of a call: the `/s/{session}/` path prefix, else the `X-Cuca-Session`
/// header, else `default`.
pub(crate) fn choose(
    from_path: Option<String>,
    headers: &HeaderMap,
    default: &str,
) -> Result<String, ApiError> {
    let from_header = match headers.get(crate::headers::SESSION_HEADER) {
        None => None,
        Some(value) => Some(value.to_str().map(str::to_owned).map_err(|_| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "cuca_invalid_session",
                "the X-Cuca-Session header is not visible ASCII",
            )
        })?),
    };
    let session = from_path
        .or(from_header)
        .unwrap_or_else(|| default.to_owned());
    match invalid_session_id(&session) {
        None => Ok(session),
        Some(message) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "cuca_invalid_session",
            message,
        )),
    }
}

/// One session's writer: its plugin, and the lock that makes the proxy its only writer.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) plugin: Arc<SessionLogPlugin>,
    /// Held for a whole recorded call: a session is one conversation, and two calls recorded
    /// into it at once would interleave their records and merge their turns.
    pub(crate) lock: Arc<tokio::sync::Mutex<()>>,
    /// Whether the session's last call may be open in the store: true until the session is
    /// first checked (a proxy killed mid-call leaves one), and again after a write failed.
    may_be_open: AtomicBool,
}

/// What a call found open in its session is closed with: the `CallIncomplete` reason.
const LEFT_OPEN: &str = "the call was left open: its recorder stopped before the call ended (the proxy was killed, or a record could not be written); closed when the session was next used";

impl Slot {
    /// The session's last call may be open in the store: close it before the next call.
    pub(crate) fn needs_close(&self) {
        self.may_be_open.store(true, Ordering::Release);
    }

    /// Everything that can be checked before a call is forwarded (a call that
    /// cannot be recorded is refused, not forwarded first): the store takes the session id
    /// and no other process holds the session; and a call its recorder left open is closed,
    /// so this call is a turn of its own (unless `close_open` is false: see `placement::writer`).
    /// Runs on a blocking thread: it may read the session.
    /// With `answer_unrecorded` (`ProxyConfig::answer_unrecorded`), a store that is away is
    /// said on stderr and the call goes on, to be answered and not recorded: the answer is
    /// `Ok(Some(why))`. Not recorded even if the store is back by the time the call would
    /// write: a call left open before it (`needs_close`) may still be open, and a call
    /// recorded into another call's open turn would read back as part of that call.
    pub(crate) async fn prepare(
        self: &Arc<Self>,
        session: &str,
        answer_unrecorded: bool,
        close_open: bool,
    ) -> Result<Option<String>, ApiError> {
        let slot = Arc::clone(self);
        let id = session.to_owned();
        let check = move || -> Result<(), PluginError> {
            slot.plugin.backend().check_writable(&id)?;
            if close_open && slot.may_be_open.swap(false, Ordering::AcqRel) {
                if let Err(error) = slot.plugin.close_open_call(LEFT_OPEN) {
                    slot.needs_close();
                    return Err(error);
                }
            }
            Ok(())
        };
        // In place when nothing can wait: a store whose appends take microseconds, a session
        // already read (so its file is open), and no call left open to close.
        let quick = !self.plugin.backend().appends_may_wait()
            && self.plugin.has_read_session()
            && !(close_open && self.may_be_open.load(Ordering::Acquire));
        let checked = if quick {
            Ok(check())
        } else {
            tokio::task::spawn_blocking(check).await
        };
        let error = match checked {
            Ok(Ok(())) => return Ok(None),
            Ok(Err(error)) => error,
            Err(join) => {
                return Err(ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "server_error",
                    "cuca_record_failed",
                    format!("checking session {session:?} stopped: {join}"),
                )
                .in_session(session))
            }
        };
        let (status, kind, code) = match &error {
            PluginError::Validation { .. } => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "cuca_invalid_session",
            ),
            PluginError::Locked { .. } => {
                (StatusCode::CONFLICT, "server_error", "cuca_session_locked")
            }
            _ if answer_unrecorded => {
                tracing::error!(session = %session, %error, "the store is away; the call is answered and not recorded");
                // The session's last call may still be open: the next call closes it first.
                self.needs_close();
                return Ok(Some(format!(
                    "session {session:?} could not be prepared for it ({error})"
                )));
            }
            _ => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "cuca_record_failed",
            ),
        };
        Err(ApiError::new(
            status,
            kind,
            code,
            format!(
                "session {session:?} cannot be recorded, so the call was not forwarded: {error}"
            ),
        )
        .in_session(session))
    }
}

/// The writers of the sessions in use, at most `max` of them.
#[derive(Debug)]
pub(crate) struct Slots {
    backend: Arc<dyn SessionBackend>,
    max: usize,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    /// What every writer redacts its records by.
    redaction: Option<Arc<cuca_redact::Rules>>,
}

impl Slots {
    pub(crate) fn new(
        backend: Arc<dyn SessionBackend>,
        max: usize,
        redaction: Option<Arc<cuca_redact::Rules>>,
    ) -> Self {
        Slots {
            backend,
            max,
            slots: Mutex::new(HashMap::new()),
            redaction,
        }
    }

    /// The writer of `session`, if one was made.
    pub(crate) fn existing(&self, session: &str) -> Option<Arc<Slot>> {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.get(session).cloned()
    }

    /// Every writer made and not dropped.
    pub(crate) fn all(&self) -> Vec<Arc<Slot>> {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.values().cloned().collect()
    }

    /// The writer of `session`, made on first use. When the table is full, writers nobody
    /// holds are dropped (a new one re-reads its session's tail from the store); when every
    /// one is in use, the call is refused with a 503 rather than the table growing.
    pub(crate) fn get(&self, session: &str) -> Result<Arc<Slot>, ApiError> {
        // The table is only read and written under this lock, never across an await, so a
        // panic elsewhere cannot leave it half-changed.
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = slots.get(session) {
            return Ok(Arc::clone(slot));
        }
        if slots.len() >= self.max {
            slots.retain(|_, slot| Arc::strong_count(slot) > 1);
        }
        if slots.len() >= self.max {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                "cuca_too_many_sessions",
                format!(
                    "{} sessions are recording at once, the proxy's limit; retry when one finishes",
                    self.max
                ),
            )
            .in_session(session));
        }
        let plugin = SessionLogPlugin::new(Arc::clone(&self.backend))
            .with_session_id(session)
            .with_call_metadata(true)
            // What an agent's tools returned is half its trajectory, and replay compares it.
            .with_tool_results(true)
            .with_redaction(self.redaction.clone());
        let slot = Arc::new(Slot {
            plugin: Arc::new(plugin),
            lock: Arc::new(tokio::sync::Mutex::new(())),
            may_be_open: AtomicBool::new(true),
        });
        slots.insert(session.to_owned(), Arc::clone(&slot));
        Ok(slot)
    }
}
