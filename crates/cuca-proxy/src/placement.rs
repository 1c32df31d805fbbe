//! Where a call is recorded: the conversation of its session it lands in, that conversation's
//! writer taken and prepared for it, and its request records written there — placed again
//! when another process sharing the store began the same conversation first.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use cuca_events::{PluginError, SessionEvent, UnifiedRequest};
use cuca_session_log::SessionLogPlugin;
use cuca_wire::WireRequest;
use tokio::sync::OwnedMutexGuard;

use crate::conversations::{Conversations, Placed};
use crate::refusal::{shutting_down, ApiError};
use crate::rows::CallRows;
use crate::session::Slot;
use crate::state::Shared;

/// A recorded call's place in its session: what the tee records into.
pub(crate) struct Recording {
    pub(crate) slot: Arc<Slot>,
    /// Held until the call's last record is written: the proxy is the session's one writer.
    pub(crate) _guard: OwnedMutexGuard<()>,
    /// A sentence for the call's call-log rows' `note`: fork mode's word that this call
    /// diverged from the recording and where it was recorded instead, so the call log marks
    /// the divergence.
    pub(crate) note: Option<String>,
    /// Why the call is answered but not recorded (`ProxyConfig::answer_unrecorded`: the store
    /// was away when the session was prepared), for its call-log rows and stderr.
    pub(crate) unrecordable: Option<String>,
    /// The conversation's id while this call begins it (`Placed::new`): its first record must
    /// find the session empty, and if another process began it first the call is placed again
    /// under the base; if the call ends with nothing recorded, the id is given back.
    pub(crate) begins: Option<Reservation>,
}

/// A conversation id held by the call that begins that conversation, until the call records
/// its first record there ([`Reservation::keep`]) or ends having recorded nothing
/// ([`Reservation::release`]): then the id is given back, so that no id is left empty before
/// ids that hold conversations (a reader lists a session's conversations up to the first
/// empty id, and would not see those after it).
pub(crate) struct Reservation {
    conversations: Arc<Conversations>,
    /// The base session the call came in on.
    pub(crate) base: String,
    /// The conversation's id.
    id: String,
    /// Kept or released already: nothing left to do when it is dropped.
    settled: bool,
}

impl Reservation {
    fn new(shared: &Shared, base: &str, id: &str) -> Self {
        Reservation {
            conversations: Arc::clone(&shared.conversations),
            base: base.to_owned(),
            id: id.to_owned(),
            settled: false,
        }
    }

    /// The call recorded its first record in the conversation: the id is the
    /// conversation's for good.
    async fn keep(mut self, request: &UnifiedRequest) {
        self.settled = true;
        self.conversations
            .began(&self.base, &self.id, request)
            .await;
    }

    /// Another process recorded there first: what it recorded is the conversation now, and
    /// the id is not this call's to give back.
    fn lost(mut self) {
        self.settled = true;
    }

    /// The call ended with nothing recorded in the conversation: the id is given back before
    /// the caller has its answer, so the caller's next call can take it.
    pub(crate) async fn release(mut self) {
        self.settled = true;
        self.conversations.release(&self.base, &self.id).await;
    }
}

impl Drop for Reservation {
    /// A call dropped while it held the id (its caller hung up before the upstream answered):
    /// the id is given back as soon as the runtime can.
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let conversations = Arc::clone(&self.conversations);
        let (base, id) = (std::mem::take(&mut self.base), std::mem::take(&mut self.id));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { conversations.release(&base, &id).await });
        }
    }
}

/// The writer of a call in `base`: in the conversation it continues when that is known
/// (`continued`), else in the one its request is placed in. Record and auto mode take it
/// before anything is forwarded or looked up, so a call recorded meanwhile on the same
/// conversation cannot slip in between.
pub(crate) async fn take_writer(
    shared: &Shared,
    base: &str,
    continued: Option<String>,
    request: Option<&WireRequest>,
) -> Result<(String, Recording), ApiError> {
    match continued {
        Some(conversation) => {
            let recording = recording(shared, &conversation).await?;
            Ok((conversation, recording))
        }
        None => match place(shared, base, request).await {
            Ok(placed) => {
                let recording = placed_recording(shared, base, &placed).await?;
                Ok((placed.id, recording))
            }
            // The store is away (`answer_unrecorded`): the conversation cannot be read, so the
            // call is answered and recorded nowhere, under its base session, and says so.
            Err(error) if shared.config.answer_unrecorded => {
                tracing::error!(session = %base, "the store is away; the call is answered and not recorded: {}", error.message);
                let mut recording = writer(shared, base, true).await?;
                recording.unrecordable.get_or_insert_with(|| {
                    format!(
                        "the conversations of session {base:?} could not be read to place it ({})",
                        error.message
                    )
                });
                Ok((base.to_owned(), recording))
            }
            Err(error) => Err(error),
        },
    }
}

/// The conversation of session `session` a call is recorded in; a body that is
/// not a request of the format is forwarded and recorded nowhere, under the base session.
pub(crate) async fn place(
    shared: &Shared,
    session: &str,
    request: Option<&WireRequest>,
) -> Result<Placed, ApiError> {
    match request {
        Some(request) => shared.conversations.place(session, &request.unified).await,
        None => Ok(Placed {
            id: session.to_owned(),
            new: false,
        }),
    }
}

/// The writer of a placed call: a call that begins its conversation carries the base session,
/// so the recorder can place it again if another process began the same id first.
pub(crate) async fn placed_recording(
    shared: &Shared,
    base: &str,
    placed: &Placed,
) -> Result<Recording, ApiError> {
    let mut recording = writer(shared, &placed.id, !placed.new).await?;
    if placed.new {
        recording.begins = Some(Reservation::new(shared, base, &placed.id));
    }
    Ok(recording)
}

/// The writer of a call whose conversation is known (it continues an answer, or its caller
/// named the conversation), prepared for it.
pub(crate) async fn recording(shared: &Shared, session: &str) -> Result<Recording, ApiError> {
    writer(shared, session, true).await
}

/// The session's writer, prepared for a call. `close_open`: whether a call found open in the
/// session is closed first (one a killed proxy left). A call that begins a conversation does
/// not: the session is empty, unless another process began it a moment ago and is recording
/// its first call right now — which is not to be closed under it (the call is placed again).
async fn writer(shared: &Shared, session: &str, close_open: bool) -> Result<Recording, ApiError> {
    let slot = shared.slots.get(session)?;
    let guard = Arc::clone(&slot.lock).lock_owned().await;
    // A call that waited for its session's writer through the start of a shutdown must not
    // start a recording the shutdown is no longer waiting for.
    if shared.closing.load(Ordering::SeqCst) {
        return Err(shutting_down(session));
    }
    let unrecordable = slot
        .prepare(session, shared.config.answer_unrecorded, close_open)
        .await?;
    Ok(Recording {
        slot,
        _guard: guard,
        note: None,
        unrecordable,
        begins: None,
    })
}

/// Writes a request's records (`SessionLogPlugin::record_request_after`) on a blocking
/// thread, and gives `unified` back. A store's append may wait for a round trip —
/// PostgreSQL answers a session's first record and its messages after their commit — and
/// on a runtime worker that wait would hold every other call the worker serves: calls that
/// begin at once would reach the store as many at a time as the runtime has workers, one
/// commit after another, their answers held meanwhile. From blocking threads they reach it
/// together, and a store that groups commits (`Durability::Pipelined`) commits them
/// together. A store whose appends do not wait
/// ([`cuca_events::SessionBackend::appends_may_wait`]) is written in place once the session
/// has been read.
async fn write_request(
    plugin: Arc<SessionLogPlugin>,
    before: &[SessionEvent],
    unified: &mut UnifiedRequest,
    parameters: &str,
    fresh: bool,
) -> Result<Option<u64>, PluginError> {
    // A store whose appends take microseconds, and a session already read: in place. The
    // hop to a blocking thread and back would be most of the call's cost before its first
    // byte.
    if !plugin.backend().appends_may_wait() && plugin.has_read_session() {
        return plugin.record_request_after(before, unified, parameters, fresh);
    }
    // Moved to the thread and back: a long conversation's request is not copied.
    let request = std::mem::take(unified);
    let (before, parameters) = (before.to_vec(), parameters.to_owned());
    let session = plugin.session_id().to_owned();
    let written = tokio::task::spawn_blocking(move || {
        let written = plugin.record_request_after(&before, &request, &parameters, fresh);
        (written, request)
    })
    .await;
    match written {
        Ok((written, request)) => {
            *unified = request;
            written
        }
        Err(join) => Err(PluginError::Backend {
            backend: "proxy".into(),
            message: format!(
                "writing the request of a call in session {session:?} stopped: {join}"
            ),
            source: None,
        }),
    }
}

/// How many times a call that begins a conversation is placed again when another process
/// began the id it was given first: each time the id is taken, the next is tried.
const MAX_PLACINGS: usize = 8;

/// Writes the call's request records. A call that begins its conversation writes them only
/// into an empty session (`record_new_request_with`); when another process sharing the store
/// began that id first, the call is placed again and recorded where it lands — `session` and
/// `recording` follow it, and its end row names the session and says why.
pub(crate) async fn record_request(
    shared: &Shared,
    recording: &mut Recording,
    session: &mut String,
    unified: &mut UnifiedRequest,
    parameters: &str,
    before: &[cuca_events::SessionEvent],
    rows: &mut CallRows,
) -> Result<Option<u64>, PluginError> {
    let mut placings = 0;
    loop {
        let plugin = Arc::clone(&recording.slot.plugin);
        unified.metadata.node = Some(session.clone());
        let Some(base) = recording.begins.as_ref().map(|r| r.base.clone()) else {
            return write_request(plugin, before, unified, parameters, false).await;
        };
        let taken = match write_request(plugin, before, unified, parameters, true).await {
            Ok(point) => {
                if let Some(reservation) = recording.begins.take() {
                    reservation.keep(unified).await;
                }
                return Ok(point);
            }
            Err(taken @ PluginError::SequenceTaken { .. }) if placings < MAX_PLACINGS => taken,
            Err(error) => return Err(error),
        };
        placings += 1;
        if let Some(reservation) = recording.begins.take() {
            reservation.lost();
        }
        let lost = session.clone();
        let moved = async {
            shared.conversations.taken(&base, &lost).await?;
            let placed = shared.conversations.place(&base, unified).await?;
            if placed.id == lost {
                // What is there continues this call's conversation (an identical call that
                // began it while this one waited for its writer, which this call holds):
                // recorded after it, as a retry of the same request is.
                return Ok::<_, ApiError>((placed.id, None));
            }
            let mut next = writer(shared, &placed.id, !placed.new).await?;
            next.begins = placed
                .new
                .then(|| Reservation::new(shared, &base, &placed.id));
            next.note = recording.note.take();
            Ok((placed.id, Some(next)))
        };
        let (id, next) = moved.await.map_err(|error| PluginError::Backend {
            backend: "proxy".into(),
            message: format!(
                "another process began session {lost:?} first ({taken}), and the call could not be placed again: {}",
                error.message
            ),
            source: None,
        })?;
        // The same id again when what is there continues this call's conversation (a part
        // of it recorded before, by an earlier try of this call or by another process).
        if id != lost {
            tracing::info!(from = %lost, to = %id, "another process began the conversation's session first; the call is recorded in the next");
            rows.moved_to(
                &id,
                &format!("recorded in {id}: another process began {lost} first"),
            );
        }
        if let Some(next) = next {
            *recording = next;
        }
        *session = id;
        if let Some(why) = recording.unrecordable.clone() {
            return Err(PluginError::Backend {
                backend: "proxy".into(),
                message: why,
                source: None,
            });
        }
    }
}
