//! `SessionLogPlugin`: the hooks that turn a model call into session records, and the cursor that numbers them.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use cuca_events::{
    AppendRefused, CucaPlugin, MessageContentBlock, PluginError, Role, SessionBackend,
    SessionEvent, SessionRecord, UnifiedRequest, UnifiedResponse,
};
use cuca_redact::{Counts, Rules};

#[cfg(test)]
mod tests;

/// The session id a plugin writes to when [`SessionLogPlugin::with_session_id`] is not called.
///
/// A fixed, file-name-safe word rather than a generated id: a program that records one
/// conversation and never names it finds it again under the same id after a restart, which is
/// what resuming needs.
pub const DEFAULT_SESSION_ID: &str = "default";

/// Records every request, streamed block and completion of the calls it is registered on as
/// append-only [`SessionEvent`]s in one session of a [`SessionBackend`].
///
/// The plugin assigns every sequence number: it holds a cursor (the next sequence and the
/// message positions already recorded) for its session, read from the backend the first time
/// the plugin touches the session, so a plugin over a reopened store continues where the last
/// one stopped. When the store refuses a sequence because another writer appended in between
/// ([`PluginError::SequenceTaken`]), the cursor moves past the stored tail and the append is
/// retried once. See the crate docs for the hook rules.
#[derive(Debug)]
pub struct SessionLogPlugin {
    backend: Arc<dyn SessionBackend>,
    session_id: String,
    /// Held across the backend append, so that concurrent turns through one plugin get dense,
    /// unique sequences in append order. A `std` mutex suffices: the backend is synchronous
    /// and no hook awaits while holding it.
    cursor: Mutex<Cursor>,
    /// Whether the hooks also write `CallRequest` and `CallFinish` (off by default, so the
    /// seed's record counts stay as they are).
    call_metadata: bool,
    /// Whether a request's tool results are recorded too, as `ToolResult` records once per
    /// position (off by default: the seed's rule, "Tool messages are not recorded").
    tool_results: bool,
    /// The rules every record is redacted by before it is appended (none by default).
    redaction: Option<Arc<Rules>>,
}

/// What the plugin knows about its session.
#[derive(Debug, Default)]
struct Cursor {
    /// The sequence the next record gets. `None` until it has been read from the backend:
    /// before the first touch, and after a fork whose realigning replay failed.
    next_sequence: Option<u64>,
    /// Whether `seen_positions` and `unplaced_messages` have been read from the backend.
    positions_loaded: bool,
    /// Indices in `request.messages` whose user or assistant message has been recorded.
    seen_positions: BTreeSet<usize>,
    /// `Message` records found in the session on resume that no position has been matched to
    /// yet. The log stores messages, not their indices, so on resume the first this-many user
    /// or assistant positions of the next requests are taken as the ones already recorded:
    /// a conversation's history is a prefix that only grows.
    unplaced_messages: usize,
    /// Indices in `request.messages` whose tool result has been recorded.
    seen_tool_positions: BTreeSet<usize>,
    /// `ToolResult` records found on resume that no position has been matched to yet.
    unplaced_tool_results: usize,
    /// The time the records being written are stamped with instead of now: the call's start,
    /// while its request is written (`RequestMetadata::started_ms`).
    stamp_at: Option<u64>,
    /// What redacting the record last stamped replaced: added to `redacted` only when that
    /// record is stored, so a retried append is not counted twice.
    pending: Counts,
    /// What redaction replaced in the records stored since [`SessionLogPlugin::take_redacted`]
    /// was last called.
    redacted: Counts,
    /// Where the last request's digest left off, for the next request's.
    digests: crate::call::DigestChain,
}

impl Cursor {
    /// Whether the user or assistant message at `position` still has to be recorded.
    fn is_new(&mut self, position: usize) -> bool {
        if self.seen_positions.contains(&position) {
            return false;
        }
        if self.unplaced_messages > 0 {
            self.unplaced_messages -= 1;
            self.seen_positions.insert(position);
            return false;
        }
        true
    }

    /// Whether the tool message at `position` still has to be recorded.
    fn is_new_tool(&mut self, position: usize) -> bool {
        if self.seen_tool_positions.contains(&position) {
            return false;
        }
        self.seen_tool_positions.insert(position);
        if self.unplaced_tool_results > 0 {
            self.unplaced_tool_results -= 1;
            return false;
        }
        true
    }
}

/// The sequence that follows a session's records: last sequence + 1, or 0 when it is empty.
///
/// The last sequence rather than the count, so that a session with a gap (records appended
/// by another writer) never gets a sequence twice. Saturates: [`SessionLogPlugin`] refuses
/// to write at `u64::MAX` instead of wrapping.
fn tail(records: &[SessionRecord]) -> u64 {
    records
        .last()
        .map_or(0, |record| record.sequence.saturating_add(1))
}

/// `parameters` trimmed, when it looks like the JSON text of one object (what
/// [`SessionLogPlugin::record_request_with`] takes); a [`PluginError::Validation`] otherwise.
fn object_text(parameters: &str) -> Result<&str, PluginError> {
    let trimmed = parameters.trim();
    if trimmed.starts_with('{') && trimmed.ends_with('}') {
        Ok(trimmed)
    } else {
        Err(PluginError::validation(
            "parameters",
            "the parameters must be the JSON text of one object, such as {\"seed\":7}",
        ))
    }
}

fn now_ms() -> u64 {
    // A clock before 1970 is a broken clock, not a reason to fail a model call: stamp 0.
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// A call its recorder left open at the end of a session ([`SessionLogPlugin::close_open_call`]).
#[derive(Debug)]
struct OpenCall {
    /// The model its `CallRequest` asked for; empty when none was written.
    model: String,
    /// When its first record was made.
    started_ms: u64,
    /// Request records (`SystemPrompt`, `Message`, `ToolResult`) written before any
    /// `CallRequest`, when none followed them: a partial request.
    partial: usize,
    /// Whether its `CallRequest` was written.
    has_request: bool,
}

impl OpenCall {
    /// The call left open at the end of `records`, if one was. `call_metadata`: whether the
    /// plugin writes call metadata; request records with no `CallRequest` after them in a
    /// session without it (none anywhere, closed by a plugin that writes none) are what such
    /// a session log writes before every answer, not a partial request.
    fn find(records: &[SessionRecord], call_metadata: bool) -> Option<OpenCall> {
        let mut open: Option<OpenCall> = None;
        // Whether the record before was a `Latency`: a `TokenUsage` after one closes a turn,
        // which is how a reader segments the session.
        let mut after_latency = false;
        for record in records {
            let event = &record.event;
            match event {
                SessionEvent::CallRequest { model, .. } => {
                    let started_ms = match &open {
                        Some(partial) if !partial.has_request => partial.started_ms,
                        _ => record.timestamp_ms,
                    };
                    open = Some(OpenCall {
                        model: model.clone(),
                        started_ms,
                        partial: 0,
                        has_request: true,
                    });
                }
                SessionEvent::CallFinish { .. } => open = None,
                SessionEvent::TokenUsage { .. } if after_latency => open = None,
                SessionEvent::SystemPrompt { .. }
                | SessionEvent::Message(_)
                | SessionEvent::ToolResult { .. } => match &mut open {
                    Some(partial) if !partial.has_request => partial.partial += 1,
                    // A tool result streamed as part of an answer belongs to its call.
                    Some(_) => {}
                    None => {
                        open = Some(OpenCall {
                            model: String::new(),
                            started_ms: record.timestamp_ms,
                            partial: 1,
                            has_request: false,
                        });
                    }
                },
                // Closing records cut after their first (a call the proxy could not read,
                // said in the session, whose `CallFinish` was refused): open too.
                SessionEvent::CallIncomplete { .. } if open.is_none() => {
                    open = Some(OpenCall {
                        model: String::new(),
                        started_ms: record.timestamp_ms,
                        partial: 0,
                        has_request: false,
                    });
                }
                _ => {}
            }
            after_latency = matches!(event, SessionEvent::Latency { .. });
        }
        let metadata = call_metadata
            || records
                .iter()
                .any(|r| matches!(r.event, SessionEvent::CallRequest { .. }));
        open.filter(|call| call.has_request || call.partial == 0 || metadata)
    }
}

impl SessionLogPlugin {
    /// A plugin that records to `backend`, in session [`DEFAULT_SESSION_ID`].
    ///
    /// Nothing is read from the backend until the first hook or [`Self::append_log`] runs.
    pub fn new(backend: Arc<dyn SessionBackend>) -> Self {
        SessionLogPlugin {
            backend,
            session_id: DEFAULT_SESSION_ID.to_owned(),
            cursor: Mutex::new(Cursor::default()),
            call_metadata: false,
            tool_results: false,
            redaction: None,
        }
    }

    /// The same plugin, redacting every record by `rules` before it is appended: every
    /// text-bearing field (`cuca_redact::REDACTED_FIELDS`) of every record a hook or
    /// [`Self::append_log`] writes, each replaced value becoming `[REDACTED:rule]`, so what
    /// the rules find never reaches the store. [`Self::take_redacted`] says how many values
    /// each rule replaced. Off by default; rules with nothing in force (`Rules::is_empty`)
    /// are the same as none.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use cuca_events::{Message, SessionBackend, SessionEvent, UnifiedRequest};
    /// # use cuca_session_log::SessionLogPlugin;
    /// # use cuca_store_mem::InMemoryBackend;
    /// let backend = Arc::new(InMemoryBackend::new());
    /// let rules = Arc::new(cuca_redact::Rules::defaults()?);
    /// let log = SessionLogPlugin::new(backend.clone()).with_redaction(Some(rules));
    /// log.append_log(SessionEvent::Output { text: "key AKIAZ7Q3X9M2P5L8N4R6".into() })?;
    /// let records = backend.replay(log.session_id())?;
    /// assert_eq!(records[0].event, SessionEvent::Output { text: "key [REDACTED:aws-access-key-id]".into() });
    /// assert_eq!(log.take_redacted().to_string(), "aws-access-key-id=1");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_redaction(self, rules: Option<Arc<Rules>>) -> Self {
        SessionLogPlugin {
            redaction: rules.filter(|rules| !rules.is_empty()),
            ..self
        }
    }

    /// The rules records are redacted by, if any ([`Self::with_redaction`]).
    pub fn redaction(&self) -> Option<&Arc<Rules>> {
        self.redaction.as_ref()
    }

    /// How many values each rule replaced in the records stored since the last call (the
    /// counts are taken, not copied): a recorder that serialises its calls on the session
    /// takes them at the end of each call for its call-log row. Never the values.
    pub fn take_redacted(&self) -> Counts {
        std::mem::take(&mut self.lock().redacted)
    }

    /// The same plugin, also recording what each call was sent and how it ended: a
    /// [`SessionEvent::CallRequest`] (model, sampling parameters, tools offered) after each
    /// request's messages, and a [`SessionEvent::CallFinish`] (finish reason, served model)
    /// just before each call's `Latency`/`TokenUsage` pair. Off by default: the seed's
    /// record counts are those of a plugin that was not asked.
    #[must_use]
    pub fn with_call_metadata(self, on: bool) -> Self {
        SessionLogPlugin {
            call_metadata: on,
            ..self
        }
    }

    /// The same plugin, also recording the tool results each request carries: one
    /// [`SessionEvent::ToolResult`] per tool result (its call id and output verbatim), once per
    /// position, among the request's records, so a session shows what an agent's tools
    /// returned and a replay can compare them. Off by default, and then the seed's rule holds:
    /// "Tool messages are not recorded".
    #[must_use]
    pub fn with_tool_results(self, on: bool) -> Self {
        SessionLogPlugin {
            tool_results: on,
            ..self
        }
    }

    /// The sequence the next record of this session will get (reading the session's tail
    /// from the backend the first time, as a hook would). A caller that serialises its own
    /// calls on the session (one writer) learns from it the point its next call starts at.
    pub fn next_sequence(&self) -> Result<u64, PluginError> {
        let mut cursor = self.lock();
        self.sync(&mut cursor)
    }

    /// Whether the plugin has read its session's tail already, so that its next record needs
    /// no read of the store first (only the append). Until then, the next record reads the
    /// session from the store: on a store that is large or remote, a wait.
    pub fn has_read_session(&self) -> bool {
        let cursor = self.lock();
        cursor.next_sequence.is_some() && cursor.positions_loaded
    }

    /// The same plugin, writing to session `session_id`. The backend validates the id when
    /// the first record is appended (every store refuses an empty id and control characters;
    /// a `FileBackend` also `/` and `\`).
    #[must_use]
    pub fn with_session_id(self, session_id: impl Into<String>) -> Self {
        SessionLogPlugin {
            session_id: session_id.into(),
            // A new id is a new session: what was known about the old one does not apply.
            cursor: Mutex::new(Cursor::default()),
            ..self
        }
    }

    /// The session every hook writes to.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The store handle, for whoever replays or inspects what this plugin recorded.
    pub fn backend(&self) -> Arc<dyn SessionBackend> {
        Arc::clone(&self.backend)
    }

    /// Appends `event` to the plugin's session at the next sequence, stamped now, and returns
    /// the stored record (its [`SessionRecord::point_id`] is what [`Self::fork_session`] takes).
    ///
    /// This is the door for records no hook sees, such as [`SessionEvent::ModelSwap`], written
    /// by whoever holds the store handle. A backend error is returned unchanged and the
    /// sequence is not used up; a refused sequence is retried once, as for every hook (see
    /// the crate docs).
    pub fn append_log(&self, event: SessionEvent) -> Result<SessionRecord, PluginError> {
        let mut cursor = self.lock();
        let record = self.stamp(&mut cursor, event)?;
        let record = match self.backend.append(record.clone()) {
            Ok(()) => record,
            Err(refused) => {
                self.realign(&mut cursor, refused)?;
                let record = self.stamp(&mut cursor, record.event)?;
                self.append_realigned(&mut cursor, record.clone())?;
                record
            }
        };
        Self::advance(&mut cursor);
        Ok(record)
    }

    /// Branches `session_id` at `point_id` (`"{session_id}:{sequence}"`) and returns the new
    /// session's id, `"{session_id}:fork:{point_id}:{n}"`.
    ///
    /// The backend does the fork and appends a [`SessionEvent::Fork`] audit record to the
    /// original at its tail; when the original is this plugin's session, the plugin then
    /// realigns its next sequence to the session's replayed tail (last sequence + 1, its length
    /// when the plugin numbered it densely), so its next record follows
    /// the audit record. Forking another session leaves this plugin's cursor alone: the plugin
    /// never writes there. The backend's error is returned unchanged.
    pub fn fork_session(&self, session_id: &str, point_id: &str) -> Result<String, PluginError> {
        // Held across the fork so no hook appends between the backend choosing the audit
        // record's sequence and the plugin learning of it.
        let mut cursor = self.lock();
        let new_id = self.backend.fork(session_id, point_id)?;
        if session_id == self.session_id {
            match self.backend.replay(session_id) {
                Ok(records) => {
                    cursor.next_sequence = Some(tail(&records));
                    Self::load_positions(&mut cursor, &records);
                }
                Err(error) => {
                    // The fork itself happened, so its id is the answer; the next append
                    // reads the tail again and reports the error if it persists.
                    tracing::warn!(
                        session = %session_id,
                        %error,
                        "could not replay the session after forking it; will realign before the next append"
                    );
                    cursor.next_sequence = None;
                }
            }
        }
        Ok(new_id)
    }

    fn lock(&self) -> MutexGuard<'_, Cursor> {
        // The cursor is changed only after an append succeeded, so a panic elsewhere while
        // the lock was held cannot have left it describing a record that was not stored.
        self.cursor
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn load_positions(cursor: &mut Cursor, records: &[SessionRecord]) {
        if cursor.positions_loaded {
            return;
        }
        cursor.unplaced_messages = records
            .iter()
            .filter(|record| matches!(record.event, SessionEvent::Message(_)))
            .count();
        // A tool message holds one result, the way the wire formats are read.
        cursor.unplaced_tool_results = records
            .iter()
            .filter(|record| matches!(record.event, SessionEvent::ToolResult { .. }))
            .count();
        cursor.positions_loaded = true;
    }

    /// Reads what the cursor does not know yet from the backend: the tail and the messages
    /// already recorded. One replay, the first time the plugin touches its session.
    fn sync(&self, cursor: &mut Cursor) -> Result<u64, PluginError> {
        if let (Some(next), true) = (cursor.next_sequence, cursor.positions_loaded) {
            return Ok(next);
        }
        let records = self.backend.replay(&self.session_id)?;
        let next = *cursor.next_sequence.get_or_insert(tail(&records));
        Self::load_positions(cursor, &records);
        if next > 0 {
            tracing::debug!(session = %self.session_id, next, "resuming a session that already has records");
        }
        Ok(next)
    }

    /// The record `event` becomes at the next sequence; the cursor does not move until
    /// [`Self::advance`], so a failed append leaves the sequence for the next one.
    fn stamp(
        &self,
        cursor: &mut Cursor,
        mut event: SessionEvent,
    ) -> Result<SessionRecord, PluginError> {
        let sequence = self.sync(cursor)?;
        // Every record passes here before the store sees it, so this is the one place the
        // rules are applied.
        cursor.pending = match &self.redaction {
            Some(rules) => rules.redact_event(&mut event),
            None => Counts::new(),
        };
        if sequence == u64::MAX {
            return Err(PluginError::CapacityExceeded {
                resource: format!("session {:?}", self.session_id),
                cap: u64::MAX,
                message: "no sequence number is left; record to a new session".into(),
            });
        }
        Ok(SessionRecord {
            session_id: self.session_id.clone(),
            sequence,
            // A start in the future is a clock that moved back: now is the nearer truth.
            timestamp_ms: cursor.stamp_at.map_or_else(now_ms, |at| at.min(now_ms())),
            event,
        })
    }

    fn advance(cursor: &mut Cursor) {
        // `stamp` refused u64::MAX, so this cannot overflow.
        cursor.next_sequence = cursor.next_sequence.map(|next| next + 1);
        if !cursor.pending.is_empty() {
            let pending = std::mem::take(&mut cursor.pending);
            cursor.redacted.merge(&pending);
        }
    }

    /// Stamps and appends the event `make` builds (`None`: nothing to record); the cursor
    /// moves only when the backend took it. `make` runs a second time only for the one retry
    /// after a refused sequence, so the first attempt moves its event into the record
    /// without a copy.
    /// Returns the sequence the record was stored at, `None` when there was nothing to record.
    fn write(
        &self,
        cursor: &mut Cursor,
        make: impl Fn() -> Option<SessionEvent>,
    ) -> Result<Option<u64>, PluginError> {
        let Some(event) = make() else {
            return Ok(None);
        };
        let record = self.stamp(cursor, event)?;
        let mut sequence = record.sequence;
        if let Err(refused) = self.backend.append(record) {
            self.realign(cursor, refused)?;
            let Some(event) = make() else {
                return Ok(None);
            };
            let record = self.stamp(cursor, event)?;
            sequence = record.sequence;
            self.append_realigned(cursor, record)?;
        }
        Self::advance(cursor);
        Ok(Some(sequence))
    }

    /// After a refused append: when the backend refused the sequence
    /// ([`PluginError::SequenceTaken`]), another writer appended to the session since the
    /// cursor last read it — a second plugin, another process, a fork made through another
    /// handle, whose audit record took the tail — so the cursor re-reads the session's tail
    /// from the refusal, which names the last stored sequence, and the caller retries once.
    /// Any other error is returned unchanged.
    fn realign(&self, cursor: &mut Cursor, refused: PluginError) -> Result<(), PluginError> {
        match refused {
            PluginError::SequenceTaken { last, .. } => {
                tracing::debug!(
                    session = %self.session_id,
                    last,
                    "another writer appended to the session; continuing after its last record"
                );
                // `stamp` refuses u64::MAX, so a saturated tail ends in a clear error.
                cursor.next_sequence = Some(last.saturating_add(1));
                Ok(())
            }
            other => Err(other),
        }
    }

    /// The one retry: its refusal is returned, with the cursor realigned again so the next
    /// record starts from the session's real tail.
    fn append_realigned(
        &self,
        cursor: &mut Cursor,
        record: SessionRecord,
    ) -> Result<(), PluginError> {
        self.backend.append(record).map_err(|refused| {
            if let PluginError::SequenceTaken { last, .. } = refused {
                cursor.next_sequence = Some(last.saturating_add(1));
            }
            refused
        })
    }

    /// What [`CucaPlugin::on_request`] records, for a caller that holds the caller's own
    /// JSON of the call, such as a proxy: `parameters` is the JSON text of one object (`top_p`,
    /// `seed`, `stop`, `max_completion_tokens`, …, exactly as sent), and it is the
    /// [`SessionEvent::CallRequest`] record's parameters as it is — nothing is added from the
    /// request's own reading of them. Without call metadata ([`Self::with_call_metadata`]) the
    /// parameters are not recorded, and this is `on_request`.
    ///
    /// Returns the sequence of the first record this call wrote — where the call starts in
    /// the session, even when another writer's records came first — or `None` when it wrote
    /// none (every message already recorded, no system prompt, no call metadata). A text that
    /// is not a JSON object's is refused with [`PluginError::Validation`] before anything is
    /// written.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use cuca_events::{Message, SessionBackend, SessionEvent, UnifiedRequest};
    /// # use cuca_session_log::SessionLogPlugin;
    /// # use cuca_store_mem::InMemoryBackend;
    /// let backend = Arc::new(InMemoryBackend::new());
    /// let log = SessionLogPlugin::new(backend.clone()).with_call_metadata(true);
    /// let request = UnifiedRequest::new(vec![Message::user("hi")]);
    /// let first = log.record_request_with(&request, r#"{"seed":7,"top_p":0.9}"#)?;
    /// assert_eq!(first, Some(0));
    /// let records = backend.replay(log.session_id())?;
    /// let SessionEvent::CallRequest { parameters, .. } = &records[1].event else { panic!() };
    /// assert_eq!(parameters, r#"{"seed":7,"top_p":0.9}"#);
    /// # Ok::<(), cuca_events::PluginError>(())
    /// ```
    pub fn record_request_with(
        &self,
        request: &UnifiedRequest,
        parameters: &str,
    ) -> Result<Option<u64>, PluginError> {
        self.record_request(request, Some(object_text(parameters)?), false, &[])
    }

    /// [`Self::record_request_with`] for the first call of a session the caller has just
    /// chosen for it, such as a proxy's new conversation: the session must hold no record.
    /// When it does — another process chose the same id first, on a store that several
    /// processes write — nothing is written and the answer is [`PluginError::SequenceTaken`]
    /// (`last`: the session's last sequence), so the caller can choose another id instead of
    /// recording its call into someone else's session. The check and the first record are one
    /// step on a store with the sequence rule (two writers cannot both store sequence 0).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use cuca_events::{Message, PluginError, SessionBackend, UnifiedRequest};
    /// # use cuca_session_log::SessionLogPlugin;
    /// # use cuca_store_mem::InMemoryBackend;
    /// let backend = Arc::new(InMemoryBackend::new());
    /// let first = SessionLogPlugin::new(backend.clone()).with_session_id("c");
    /// let second = SessionLogPlugin::new(backend.clone()).with_session_id("c");
    /// let request = UnifiedRequest::new(vec![Message::user("hi")]);
    /// assert_eq!(first.record_new_request_with(&request, "{}")?, Some(0));
    /// let taken = second.record_new_request_with(&request, "{}").unwrap_err();
    /// assert!(matches!(taken, PluginError::SequenceTaken { last: 0, .. }));
    /// assert_eq!(backend.replay("c")?.len(), 1);
    /// # Ok::<(), cuca_events::PluginError>(())
    /// ```
    pub fn record_new_request_with(
        &self,
        request: &UnifiedRequest,
        parameters: &str,
    ) -> Result<Option<u64>, PluginError> {
        self.record_request(request, Some(object_text(parameters)?), true, &[])
    }

    /// [`Self::record_request_with`] (or, with `fresh`, [`Self::record_new_request_with`])
    /// with `before` written first, in the same run of records: what a recorder knows of the
    /// moment the call was made that belongs before its request, such as the workspace
    /// snapshot the request reflects. The returned sequence is the first of `before`'s.
    pub fn record_request_after(
        &self,
        before: &[SessionEvent],
        request: &UnifiedRequest,
        parameters: &str,
        fresh: bool,
    ) -> Result<Option<u64>, PluginError> {
        self.record_request(request, Some(object_text(parameters)?), fresh, before)
    }

    /// Records a request. Its first record is appended strictly: refused
    /// ([`PluginError::SequenceTaken`]), another writer appended to the session since this
    /// plugin last read it — another process continuing the same conversation — so the cursor
    /// reads the session anew (its tail and the messages it holds) and the request is written
    /// against that, once; a `fresh` session (see [`Self::record_new_request_with`]) is
    /// refused instead.
    fn record_request(
        &self,
        request: &UnifiedRequest,
        sent: Option<&str>,
        fresh: bool,
        before: &[SessionEvent],
    ) -> Result<Option<u64>, PluginError> {
        // One lock for the whole request keeps its records contiguous in the session.
        let mut cursor = self.lock();
        let written = self.record_request_locked(&mut cursor, request, sent, fresh, before);
        cursor.stamp_at = None;
        written
    }

    /// [`Self::record_request`] under the cursor's lock: its records are stamped with the
    /// call's start when the request says when it began.
    fn record_request_locked(
        &self,
        cursor: &mut Cursor,
        request: &UnifiedRequest,
        sent: Option<&str>,
        fresh: bool,
        before: &[SessionEvent],
    ) -> Result<Option<u64>, PluginError> {
        let at = request.metadata.started_ms;
        cursor.stamp_at = at;
        if fresh {
            // Taken as empty without reading it: the request's first record goes at sequence
            // 0 and is appended strictly, so a session that holds any record refuses it
            // (`SequenceTaken`, naming its last) as a read before it would have, and nothing
            // is written. One round trip fewer to the store for every conversation begun.
            *cursor = Cursor {
                stamp_at: at,
                redacted: std::mem::take(&mut cursor.redacted),
                next_sequence: Some(0),
                positions_loaded: true,
                ..Cursor::default()
            };
            let written = self.write_request(cursor, request, sent, true, before);
            if !matches!(written, Ok(Ok(_))) {
                // What the session holds is not what the cursor says: read it before the
                // next request.
                *cursor = Cursor {
                    stamp_at: at,
                    redacted: std::mem::take(&mut cursor.redacted),
                    ..Cursor::default()
                };
            }
            return written?;
        }
        // What the session holds is read before the messages are matched to it: a plugin
        // new to a session that has records must know which of them are recorded already.
        self.sync(cursor)?;
        match self.write_request(cursor, request, sent, true, before)? {
            Ok(first) => Ok(first),
            Err(taken) if fresh => Err(taken),
            Err(_) => {
                tracing::debug!(session = %self.session_id, "another writer appended to the session; reading it anew before the request");
                *cursor = Cursor {
                    stamp_at: at,
                    redacted: std::mem::take(&mut cursor.redacted),
                    ..Cursor::default()
                };
                self.sync(cursor)?;
                self.write_request(cursor, request, sent, false, before)?
            }
        }
    }

    /// Writes a request's records; with `strict`, a first record whose sequence another
    /// writer took is not retried but answered as the inner `Err`, with nothing written.
    fn write_request(
        &self,
        cursor: &mut Cursor,
        request: &UnifiedRequest,
        sent: Option<&str>,
        strict: bool,
        before: &[SessionEvent],
    ) -> Result<Result<Option<u64>, PluginError>, PluginError> {
        let mut first = None;
        let mut strict = strict;
        let mut write = |this: &Self,
                         cursor: &mut Cursor,
                         make: &dyn Fn() -> Option<SessionEvent>|
         -> Result<Result<Option<u64>, PluginError>, PluginError> {
            if !strict {
                return this.write(cursor, make).map(Ok);
            }
            let Some(event) = make() else {
                return Ok(Ok(None));
            };
            let record = this.stamp(cursor, event)?;
            let sequence = record.sequence;
            match this.backend.append(record) {
                Ok(()) => {
                    strict = false;
                    Self::advance(cursor);
                    Ok(Ok(Some(sequence)))
                }
                Err(taken @ PluginError::SequenceTaken { .. }) => Ok(Err(taken)),
                Err(other) => Err(other),
            }
        };
        macro_rules! written {
            ($make:expr) => {
                match write(self, cursor, &$make)? {
                    Ok(written) => written,
                    Err(taken) => return Ok(Err(taken)),
                }
            };
        }
        for event in before {
            let written = written!(|| Some(event.clone()));
            first = first.or(written);
        }
        for (position, message) in request.messages.iter().enumerate() {
            let written = match message.role {
                Role::System => written!(|| {
                    Some(SessionEvent::SystemPrompt {
                        text: message.text(),
                    })
                }),
                Role::User | Role::Assistant if cursor.is_new(position) => {
                    let written = written!(|| Some(SessionEvent::Message(message.clone())));
                    cursor.seen_positions.insert(position);
                    written
                }
                Role::Tool if self.tool_results && cursor.is_new_tool(position) => {
                    let mut written = None;
                    for block in &message.content {
                        if let MessageContentBlock::ToolResult {
                            tool_call_id,
                            content,
                            is_error,
                        } = block
                        {
                            let record = written!(|| {
                                Some(SessionEvent::ToolResult {
                                    tool_call_id: tool_call_id.clone(),
                                    content: content.clone(),
                                    is_error: *is_error,
                                    stdout: None,
                                    stderr: None,
                                    exit_code: None,
                                })
                            });
                            written = written.or(record);
                        }
                    }
                    written
                }
                Role::User | Role::Assistant | Role::Tool => None,
            };
            first = first.or(written);
        }
        if self.call_metadata {
            let written = written!(|| Some(crate::call::request_event(request, sent)));
            first = first.or(written);
            let digest = crate::call::digest_event(request, &mut cursor.digests);
            written!(|| Some(digest.clone()));
        }
        Ok(Ok(first))
    }

    /// Closes the session's last call when it was left open, so the next call starts a turn
    /// of its own instead of joining it. Open is any of what a recorder stopped mid-call
    /// (SIGKILL, an OOM kill, a failed write: a full disk, a file size limit, a store gone
    /// away) leaves after the session's last closed turn:
    ///
    /// * a `CallRequest` with no `CallFinish` after it: the request was written, the answer
    ///   not all;
    /// * a partly written request: `SystemPrompt`, `Message` or `ToolResult` records with no
    ///   `CallRequest` after them (the store refused the request's next record), in a session
    ///   with call metadata. Left as they are, they would join the next call's turn, whose
    ///   system prompts would then not be its request's, and it would not replay;
    /// * a `CallIncomplete` whose `CallFinish` was not written.
    ///
    /// Writes [`SessionEvent::CallIncomplete`] with `reason` (and, for a partial request,
    /// what of it was written), then a `CallFinish` with no finish reason, a `Latency` from
    /// the call's first record to the session's last, and a zero `TokenUsage`. Returns whether
    /// it closed one; a session whose last call is closed (or that has no call records) is
    /// left as it is. One replay of the session.
    pub fn close_open_call(&self, reason: &str) -> Result<bool, PluginError> {
        let mut cursor = self.lock();
        let records = self.backend.replay(&self.session_id)?;
        let Some(open) = OpenCall::find(&records, self.call_metadata) else {
            return Ok(false);
        };
        let last_ms = records.last().map_or(open.started_ms, |r| r.timestamp_ms);
        let duration_ms = last_ms.saturating_sub(open.started_ms);
        let reason = match open.partial {
            0 => reason.to_owned(),
            1 => format!(
                "{reason}; only the first record of its request was written, and no CallRequest"
            ),
            n => format!(
                "{reason}; only the first {n} records of its request were written, and no CallRequest"
            ),
        };
        let model = open.model;
        cursor.next_sequence = Some(tail(&records));
        Self::load_positions(&mut cursor, &records);
        self.write(&mut cursor, || {
            Some(SessionEvent::CallIncomplete {
                reason: reason.clone(),
            })
        })?;
        self.write(&mut cursor, || {
            Some(SessionEvent::CallFinish {
                finish_reason: None,
                model: model.clone(),
            })
        })?;
        self.write(&mut cursor, || Some(SessionEvent::Latency { duration_ms }))?;
        self.write(&mut cursor, || {
            Some(SessionEvent::TokenUsage {
                prompt_tokens: 0,
                completion_tokens: 0,
            })
        })?;
        Ok(true)
    }

    /// Records streamed blocks that are ready together (an answer's text held back for
    /// redaction and released at once), each as [`CucaPlugin::on_stream_chunk`] records one,
    /// in one [`SessionBackend::append_all`]: one write for all of them, not one each.
    ///
    /// A refused sequence (another writer appended since the cursor last read the session)
    /// is retried once from the session's tail, as for one record: each record of the run
    /// gets its one retry. On a refusal,
    /// [`AppendRefused::stored`] counts the blocks, from the first, that are recorded (a
    /// block that is not recorded, an image, counts as done); the rest are not, and the
    /// cursor is where the next record goes.
    pub fn record_blocks(&self, blocks: &[MessageContentBlock]) -> Result<(), AppendRefused> {
        let mut cursor = self.lock();
        let mut from = 0;
        // The block whose record was last refused for a taken sequence: each record is tried
        // again once, as `on_stream_chunk` tries one block again once.
        let mut retried: Option<usize> = None;
        loop {
            // Each record with the index of its block, and what redacting it replaced (merged
            // into the session's counts only once it is stored).
            let mut owners = Vec::with_capacity(blocks.len() - from);
            let mut records = Vec::with_capacity(blocks.len() - from);
            let mut counts = Vec::with_capacity(blocks.len() - from);
            let mut unstamped = None;
            for (i, block) in blocks.iter().enumerate().skip(from) {
                let Some(event) = Self::block_event(block) else {
                    continue;
                };
                match self.stamp(&mut cursor, event) {
                    Ok(record) => {
                        counts.push(std::mem::take(&mut cursor.pending));
                        // `stamp` refused u64::MAX, so this cannot overflow.
                        cursor.next_sequence = Some(record.sequence + 1);
                        owners.push(i);
                        records.push(record);
                    }
                    Err(error) => {
                        unstamped = Some(AppendRefused { stored: i, error });
                        break;
                    }
                }
            }
            let first = records.first().map(|record| record.sequence);
            let result = self.backend.append_all(records);
            let stored = result.as_ref().map_or_else(|r| r.stored, |()| owners.len());
            for stored_counts in &counts[..stored] {
                cursor.redacted.merge(stored_counts);
            }
            let refused = match result {
                Ok(()) => return unstamped.map_or(Ok(()), Err),
                Err(refused) => refused,
            };
            // The next record takes the first refused one's place, or follows another
            // writer's records.
            cursor.next_sequence = first.map(|first| first + refused.stored as u64);
            let taken = match &refused.error {
                PluginError::SequenceTaken { last, .. } => {
                    cursor.next_sequence = Some(last.saturating_add(1));
                    true
                }
                _ => false,
            };
            // A store that counts more than it was given is taken at its word: all stored.
            from = owners.get(refused.stored).copied().unwrap_or(blocks.len());
            if taken && retried != Some(from) {
                tracing::debug!(
                    session = %self.session_id,
                    "another writer appended to the session; continuing after its last record"
                );
                retried = Some(from);
                continue;
            }
            return Err(AppendRefused {
                stored: from,
                error: refused.error,
            });
        }
    }

    fn record_block(&self, block: &MessageContentBlock) -> Result<(), PluginError> {
        let mut cursor = self.lock();
        self.write(&mut cursor, || Self::block_event(block))
            .map(|_| ())
    }

    /// The record of a streamed block, `None` for one that is not recorded.
    fn block_event(block: &MessageContentBlock) -> Option<SessionEvent> {
        Some(match block {
            MessageContentBlock::Thinking { thinking } => SessionEvent::Reasoning {
                text: thinking.clone(),
            },
            MessageContentBlock::Text { text } => SessionEvent::Output { text: text.clone() },
            MessageContentBlock::ToolCall {
                id,
                name,
                arguments,
            } => SessionEvent::ToolCall {
                id: id.clone(),
                name: name.clone(),
                arguments: arguments.clone(),
            },
            MessageContentBlock::ToolResult {
                tool_call_id,
                content,
                is_error,
            } => SessionEvent::ToolResult {
                tool_call_id: tool_call_id.clone(),
                content: content.clone(),
                is_error: *is_error,
                // A content block has no process detail; a recorder that has it writes the
                // record itself through `append_log`.
                stdout: None,
                stderr: None,
                exit_code: None,
            },
            // Images are inputs the caller already holds, and base64 would dwarf the log.
            MessageContentBlock::ImageBase64 { .. } => return None,
        })
    }

    fn record_response(&self, response: &UnifiedResponse) -> Result<(), PluginError> {
        let duration_ms = u64::try_from(response.duration.as_millis()).unwrap_or(u64::MAX);
        // One lock for both, so the Latency/TokenUsage pair that closes a turn stays adjacent.
        let mut cursor = self.lock();
        if self.call_metadata {
            self.write(&mut cursor, || Some(crate::call::finish_event(response)))?;
        }
        // Every count the provider reported, kind by kind, before the pair that closes the
        // turn (which must stay adjacent): the two folded numbers below cannot be priced.
        if let Some(usage) = response.usage.as_ref().filter(|u| !u.detail.is_empty()) {
            self.write(&mut cursor, || {
                Some(SessionEvent::TokenDetail(usage.detail))
            })?;
        }
        self.write(&mut cursor, || Some(SessionEvent::Latency { duration_ms }))?;
        self.write(&mut cursor, || {
            Some(SessionEvent::TokenUsage {
                prompt_tokens: response.token_usage.prompt_tokens,
                completion_tokens: response.token_usage.completion_tokens,
            })
        })
        .map(|_| ())
    }
}

#[async_trait]
impl CucaPlugin for SessionLogPlugin {
    fn name(&self) -> &str {
        "session-log"
    }

    /// Appends a `SystemPrompt` for every system message, and a `Message` for each user or
    /// assistant message whose position has not been recorded in this session yet. Tool
    /// messages are not recorded; the request is not changed.
    async fn on_request(&self, request: &mut UnifiedRequest) -> Result<(), PluginError> {
        self.record_request(request, None, false, &[]).map(|_| ())
    }

    /// Appends one record per block (Thinking → Reasoning, Text → Output, ToolCall →
    /// ToolCall, ToolResult → ToolResult without process detail); images are not recorded.
    async fn on_stream_chunk(&self, block: &MessageContentBlock) -> Result<(), PluginError> {
        self.record_block(block)
    }

    /// Appends `Latency` then `TokenUsage`.
    async fn on_response_complete(&self, response: &UnifiedResponse) -> Result<(), PluginError> {
        self.record_response(response)
    }
}
