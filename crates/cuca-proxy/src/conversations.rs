//! A session's conversations: one base URL, many conversations.
//!
//! An app holds several conversations on one client (two unrelated questions, a LangChain
//! chain, `asyncio.gather` of four calls), and they all arrive on one session. A call belongs
//! to the recorded conversation its request continues: the one whose system prompts equal the
//! request's and whose user and assistant messages so far are a prefix of the request's
//! (compared as the replay match compares them). A call that continues none starts a new
//! conversation. The first conversation is recorded under the base session's own id, each
//! later one under [`conversation_session_id`] (`"{base}:conv:{n}"`, numbered from 1 in the
//! order they began), so each is a session every reader already knows, recorded by seed 000's
//! rules on its own, and each has its own writer: calls on different conversations record at
//! once, and only calls on one conversation wait for each other.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use axum::http::StatusCode;
use cuca_events::UnifiedRequest;
use cuca_events::{conversation_session_id, Message, Role, SessionBackend, SessionEvent};

use crate::refusal::ApiError;

/// The most base sessions whose conversations the proxy keeps in memory. Past it the least
/// recently used base nobody is placing a call in is dropped, and read from the store again
/// when a call next comes in on it: what the proxy keeps is bounded whatever the number of
/// sessions it serves.
const MAX_BASES: usize = 4096;

/// A message or system prompt as placement compares it: two independently keyed SipHash
/// values of the whole value, exact (no normalisation). The proxy keeps these, never the
/// text, so a conversation costs 16 bytes a message whatever its messages hold. The keys are
/// drawn at random when the process starts, so no caller can aim at a collision.
type Fingerprint = u128;

/// One 128-bit SipHash-1-3 pass over `value`, keyed at random once per process (placement
/// compares fingerprints made in this process only): an agent's every call fingerprints its
/// whole conversation, and two 64-bit passes cost twice as much.
fn fingerprint<T: Hash + ?Sized>(value: &T) -> Fingerprint {
    use siphasher::sip128::Hasher128;
    static KEYS: OnceLock<(u64, u64)> = OnceLock::new();
    let (k0, k1) = *KEYS.get_or_init(|| (rand::random(), rand::random()));
    let mut hasher = siphasher::sip128::SipHasher13::new_with_keys(k0, k1);
    value.hash(&mut hasher);
    hasher.finish128().as_u128()
}

/// What the proxy knows of one conversation: what it was asked so far, as fingerprints.
#[derive(Debug, Clone)]
struct Known {
    /// The session the conversation is recorded in.
    id: String,
    /// The system prompts of its calls.
    systems: Vec<Fingerprint>,
    /// Its user and assistant messages, as far as any call carried them.
    messages: Vec<Fingerprint>,
    /// Whether a call was recorded in it (read from the store, or recorded by this proxy):
    /// until then the id is only this proxy's choice, and another process sharing the store
    /// may begin a conversation of its own under it first.
    begun: bool,
    /// Read from the store halfway through another writer's first request: its system
    /// prompts and no message yet. Not known until read again: as it stands it would be a
    /// prefix of every request.
    pending: bool,
    /// The call that was to begin it ended without recording anything there (the upstream
    /// refused it, the caller hung up first): the id is free, and the next conversation that
    /// begins takes it, so no id is left empty before ids that hold conversations — a reader
    /// lists a session's conversations up to the first empty id.
    released: bool,
}

/// Where a call is recorded: the session, and whether the call begins it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placed {
    /// The session (the base, or `{base}:conv:{n}`).
    pub(crate) id: String,
    /// Whether no call is recorded there yet: the call's first record must then find the
    /// session empty (`SessionLogPlugin::record_new_request_with`), else another process
    /// began it first and the call is placed again ([`Conversations::taken`]).
    pub(crate) new: bool,
}

/// The conversations of each base session in use, read from the store on first use, at most
/// [`MAX_BASES`] of them.
pub(crate) struct Conversations {
    backend: Arc<dyn SessionBackend>,
    /// Each base's conversations and when it was last used (a tick of `clock`).
    bases: Mutex<HashMap<String, (Arc<Base>, u64)>>,
    clock: AtomicU64,
}

/// One base session's conversations, `None` until read from the store; held across the read
/// and the placing, so two calls placing at once see each other.
type Base = tokio::sync::Mutex<Option<Vec<Known>>>;

/// A request's system prompts and conversation messages, as placement compares them.
fn shape(request: &UnifiedRequest) -> (Vec<Fingerprint>, Vec<Fingerprint>) {
    let systems = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| fingerprint(m.text().as_str()))
        .collect();
    let messages = request
        .messages
        .iter()
        .filter(|m| matches!(m.role, Role::User | Role::Assistant))
        .map(fingerprint::<Message>)
        .collect();
    (systems, messages)
}

/// The session ids of `base`'s conversations that `exists` says are there: the base itself,
/// then `base:conv:1`, `base:conv:2`, … up to the first that is not.
pub(crate) fn ids_of(base: &str, mut exists: impl FnMut(&str) -> bool) -> Vec<String> {
    let mut ids = vec![base.to_owned()];
    for n in 1.. {
        let id = conversation_session_id(base, n);
        if !exists(&id) {
            break;
        }
        ids.push(id);
    }
    ids
}

impl Conversations {
    pub(crate) fn new(backend: Arc<dyn SessionBackend>) -> Self {
        Conversations {
            backend,
            bases: Mutex::new(HashMap::new()),
            clock: AtomicU64::new(0),
        }
    }

    /// The session `request` is recorded in: the conversation of `base` it continues, or a
    /// new one. Two calls that race on a new conversation with the same request (a client's
    /// retry) are placed in the same one, since the first's messages are known from the moment
    /// it is placed.
    ///
    /// On a store other processes write too (a fleet on one database), what this proxy knows
    /// may be behind: a call that continues no conversation it knows first reads the
    /// conversations recorded after those (another proxy may have begun the one it continues,
    /// or taken the next id), and only then begins a new one.
    pub(crate) async fn place(
        &self,
        base: &str,
        request: &UnifiedRequest,
    ) -> Result<Placed, ApiError> {
        let cell = self.cell(base);
        let mut known = cell.lock().await;
        // Read just now, for this call: what was begun since is nothing a read this soon
        // after would find, and another process beginning the same id first is caught by
        // the conversation's strict first append anyway.
        let loaded_now = known.is_none();
        if loaded_now {
            *known = Some(self.load(base).await?);
        }
        let Some(known) = known.as_mut() else {
            return Ok(Placed {
                id: base.to_owned(),
                new: false,
            });
        };
        let (systems, messages) = shape(request);
        let continued = |known: &[Known]| {
            known
                .iter()
                .enumerate()
                .filter(|(_, k)| !k.released && (!k.pending || messages.is_empty()))
                .filter(|(_, k)| k.systems == systems && messages.starts_with(&k.messages))
                // The longest recorded prefix; of equals, the conversation recorded first.
                .max_by_key(|(index, k)| (k.messages.len(), std::cmp::Reverse(*index)))
                .map(|(index, _)| index)
        };
        let mut found = continued(known);
        if found.is_none() && !loaded_now {
            // Read again what was read half-written, then what was begun since.
            for entry in known.iter_mut().filter(|k| k.pending) {
                if let Some(stored) = self.read_one(base, entry.id.clone()).await? {
                    *entry = stored;
                }
            }
            let later = self.probe(base, known.len()).await?;
            known.extend(later);
            found = continued(known);
        }
        let index = match found {
            Some(index) => index,
            // An id a call that began nothing gave back comes first: the lowest such.
            None => match known.iter().position(|k| k.released) {
                Some(free) => {
                    let entry = &mut known[free];
                    entry.systems = systems;
                    entry.messages = Vec::new();
                    entry.released = false;
                    free
                }
                None => {
                    let id = free_id(base, known);
                    known.push(Known {
                        id,
                        systems,
                        messages: Vec::new(),
                        begun: false,
                        pending: false,
                        released: false,
                    });
                    known.len() - 1
                }
            },
        };
        let chosen = &mut known[index];
        if messages.len() > chosen.messages.len() {
            chosen.messages = messages;
        }
        Ok(Placed {
            id: chosen.id.clone(),
            new: !chosen.begun,
        })
    }

    /// A call was recorded in `id`: it is begun, and later calls continue it as they would
    /// any conversation. An id given back meanwhile (a call placed there with it, that failed
    /// first) is known again, with this call's request.
    pub(crate) async fn began(&self, base: &str, id: &str, request: &UnifiedRequest) {
        let cell = self.cell(base);
        let mut known = cell.lock().await;
        let Some(known) = known.as_mut() else {
            return;
        };
        match known.iter_mut().find(|k| k.id == id) {
            Some(entry) => {
                entry.begun = true;
                entry.released = false;
            }
            None => {
                let (systems, messages) = shape(request);
                known.push(Known {
                    id: id.to_owned(),
                    systems,
                    messages,
                    begun: true,
                    pending: false,
                    released: false,
                });
            }
        }
    }

    /// The call placed to begin `id` ended with nothing recorded there: unless a call began
    /// it meanwhile, the id is given back. The last ids are dropped, so the next conversation
    /// gets the lowest free number; one before a begun conversation is kept free for the
    /// next conversation that begins.
    pub(crate) async fn release(&self, base: &str, id: &str) {
        let cell = self.cell(base);
        let mut known = cell.lock().await;
        let Some(known) = known.as_mut() else {
            return;
        };
        if let Some(entry) = known.iter_mut().find(|k| k.id == id && !k.begun) {
            entry.released = true;
            entry.messages = Vec::new();
        }
        while known.last().is_some_and(|k| k.released) {
            known.pop();
        }
    }

    /// Another process began `id` before this proxy's call could: what it holds is read from
    /// the store in place of what this proxy meant to record there, so placing the call again
    /// finds it another conversation (or the other's, if the call continues it).
    pub(crate) async fn taken(&self, base: &str, id: &str) -> Result<(), ApiError> {
        let cell = self.cell(base);
        let mut known = cell.lock().await;
        let Some(known) = known.as_mut() else {
            return Ok(());
        };
        let Some(index) = known.iter().position(|k| k.id == id) else {
            return Ok(());
        };
        let read = self.read_one(base, id.to_owned()).await?;
        match read {
            Some(stored) => known[index] = stored,
            None => known[index].begun = false,
        }
        Ok(())
    }

    /// The conversations of `base`, used now. When [`MAX_BASES`] are kept, the least
    /// recently used one no call holds is dropped first.
    fn cell(&self, base: &str) -> Arc<Base> {
        let now = self.clock.fetch_add(1, Ordering::Relaxed);
        let mut bases = self.bases.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((cell, used)) = bases.get_mut(base) {
            *used = now;
            return Arc::clone(cell);
        }
        if bases.len() >= MAX_BASES {
            let idle = bases
                .iter()
                .filter(|(_, (cell, _))| Arc::strong_count(cell) == 1)
                .min_by_key(|(_, (_, used))| *used)
                .map(|(id, _)| id.clone());
            if let Some(idle) = idle {
                bases.remove(&idle);
            }
        }
        let cell = Arc::new(Base::default());
        bases.insert(base.to_owned(), (Arc::clone(&cell), now));
        cell
    }

    /// How many base sessions' conversations are kept.
    #[cfg(test)]
    fn n_bases(&self) -> usize {
        self.bases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The conversations of `base` recorded from number `from` on (0: the base itself), up to
    /// the first id that holds nothing: what other processes began since this proxy read.
    async fn probe(&self, base: &str, from: usize) -> Result<Vec<Known>, ApiError> {
        let mut found = Vec::new();
        for n in from.. {
            let id = match n {
                0 => base.to_owned(),
                n => conversation_session_id(base, n as u64),
            };
            match self.read_one(base, id).await? {
                Some(known) => found.push(known),
                None => break,
            }
        }
        Ok(found)
    }

    /// One conversation as the store holds it, `None` when it holds no record; on a blocking
    /// thread, as the store's reads may block.
    async fn read_one(&self, base: &str, id: String) -> Result<Option<Known>, ApiError> {
        let backend = Arc::clone(&self.backend);
        let read = tokio::task::spawn_blocking(move || {
            backend
                .replay(&id)
                .map(|records| known_of(id.clone(), &records))
                .map_err(|error| format!("cannot read session {id:?}: {error}"))
        })
        .await;
        read_answer(base, read)
    }

    /// A new conversation of `base` for `request`, whatever it continues: fork mode's branch
    /// when a call diverges before any recorded call matched.
    pub(crate) async fn begin(
        &self,
        base: &str,
        request: &UnifiedRequest,
    ) -> Result<String, ApiError> {
        let cell = self.cell(base);
        let mut known = cell.lock().await;
        if known.is_none() {
            *known = Some(self.load(base).await?);
        }
        let Some(known) = known.as_mut() else {
            return Ok(base.to_owned());
        };
        let (systems, messages) = shape(request);
        let id = conversation_session_id(base, known.len().max(1) as u64);
        known.push(Known {
            id: id.clone(),
            systems,
            messages,
            begun: true,
            pending: false,
            released: false,
        });
        Ok(id)
    }

    /// Reads `base`'s conversations from the store, on a blocking thread.
    async fn load(&self, base: &str) -> Result<Vec<Known>, ApiError> {
        let backend = Arc::clone(&self.backend);
        let base_id = base.to_owned();
        let loaded = tokio::task::spawn_blocking(move || {
            let mut failure = None;
            let mut records = HashMap::new();
            let ids = ids_of(&base_id, |id| match backend.replay(id) {
                Ok(found) if !found.is_empty() => {
                    records.insert(id.to_owned(), found);
                    true
                }
                Ok(_) => false,
                Err(error) => {
                    failure = Some(format!("cannot read session {id:?}: {error}"));
                    false
                }
            });
            if let Some(failure) = failure {
                return Err(failure);
            }
            let base_records = match backend.replay(&base_id) {
                Ok(found) => found,
                Err(error) => return Err(format!("cannot read session {base_id:?}: {error}")),
            };
            records.insert(base_id.clone(), base_records);
            Ok(ids
                .into_iter()
                .filter_map(|id| {
                    let records = records.remove(&id)?;
                    known_of(id, &records)
                })
                .collect::<Vec<_>>())
        })
        .await;
        read_answer(base, loaded)
    }
}

/// The lowest conversation id of `base` no known conversation has: the base itself, then
/// `{base}:conv:1`, …
fn free_id(base: &str, known: &[Known]) -> String {
    (0..)
        .map(|n| match n {
            0 => base.to_owned(),
            n => conversation_session_id(base, n),
        })
        .find(|id| known.iter().all(|k| &k.id != id))
        .unwrap_or_else(|| base.to_owned())
}

/// A read of `base`'s conversations on a blocking thread, as the call's answer: a store that
/// cannot be read, or a read that stopped, is a 500 naming the session.
fn read_answer<T>(
    base: &str,
    read: Result<Result<T, String>, tokio::task::JoinError>,
) -> Result<T, ApiError> {
    let message = match read {
        Ok(Ok(value)) => return Ok(value),
        Ok(Err(message)) => message,
        Err(join) => format!("reading session {base:?} stopped: {join}"),
    };
    Err(ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "server_error",
        "cuca_record_failed",
        message,
    )
    .in_session(base))
}

/// What a recorded conversation was asked so far: its Message records in order (each
/// position once) and the system prompts of its last call. `None` for a session with no
/// records (a base never used).
fn known_of(id: String, records: &[cuca_events::SessionRecord]) -> Option<Known> {
    if records.is_empty() {
        return None;
    }
    let mut messages = Vec::new();
    let mut systems = Vec::new();
    let mut call_systems = Vec::new();
    let mut in_request = false;
    for record in records {
        match &record.event {
            SessionEvent::SystemPrompt { text } => {
                if !in_request {
                    call_systems.clear();
                    in_request = true;
                }
                call_systems.push(fingerprint(text.as_str()));
            }
            SessionEvent::Message(message) => {
                in_request = true;
                if matches!(message.role, Role::User | Role::Assistant) {
                    messages.push(fingerprint(message));
                }
            }
            SessionEvent::CallRequest { .. } | SessionEvent::Output { .. } => {
                if in_request {
                    systems = std::mem::take(&mut call_systems);
                }
                in_request = false;
            }
            _ => in_request = false,
        }
    }
    // A request whose call has not written its next record yet (another process is still
    // recording it): its system prompts are the conversation's all the same.
    let pending = in_request && messages.is_empty();
    if in_request && systems.is_empty() {
        systems = call_systems;
    }
    Some(Known {
        id,
        systems,
        messages,
        begun: true,
        pending,
        released: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuca_events::{MessageContentBlock, SessionRecord};

    fn message(role: Role, text: &str) -> Message {
        Message {
            role,
            content: vec![MessageContentBlock::text(text)],
        }
    }

    fn request(system: &str, texts: &[(Role, &str)]) -> UnifiedRequest {
        let mut request = UnifiedRequest::default();
        request.messages.push(message(Role::System, system));
        for (role, text) in texts {
            request.messages.push(message(*role, text));
        }
        request
    }

    fn conversations() -> Conversations {
        Conversations::new(Arc::new(cuca_store_mem::InMemoryBackend::new()))
    }

    /// "A call belongs to the recorded conversation its request continues … A call that
    /// continues none starts a new conversation."
    #[tokio::test]
    async fn two_questions_on_one_session_are_two_conversations_and_a_follow_up_continues_its_own()
    {
        let conversations = conversations();
        let colour = request("Be brief.", &[(Role::User, "Name a colour.")]);
        let planet = request("Be brief.", &[(Role::User, "Name a planet.")]);
        assert_eq!(conversations.place("app", &colour).await.unwrap().id, "app");
        assert_eq!(
            conversations.place("app", &planet).await.unwrap().id,
            "app:conv:1"
        );
        let follow_up = request(
            "Be brief.",
            &[
                (Role::User, "Name a planet."),
                (Role::Assistant, "Mars"),
                (Role::User, "Another?"),
            ],
        );
        assert_eq!(
            conversations.place("app", &follow_up).await.unwrap().id,
            "app:conv:1"
        );
        // The same question again (LangChain's `invoke` then `stream`) is a retry in place.
        assert_eq!(conversations.place("app", &colour).await.unwrap().id, "app");
        // Another system prompt is another conversation, even with the same question.
        let other = request("Be verbose.", &[(Role::User, "Name a colour.")]);
        assert_eq!(
            conversations.place("app", &other).await.unwrap().id,
            "app:conv:2"
        );
    }

    /// What is kept is bounded: past [`MAX_BASES`] base sessions the least recently used
    /// is dropped, and read from the store again when a call comes in on it.
    #[tokio::test]
    async fn the_bases_kept_are_bounded_and_a_dropped_one_is_read_again() {
        let backend = Arc::new(cuca_store_mem::InMemoryBackend::new());
        let conversations = Conversations::new(Arc::clone(&backend) as Arc<dyn SessionBackend>);
        let colour = request("Be brief.", &[(Role::User, "Name a colour.")]);
        let planet = request("Be brief.", &[(Role::User, "Name a planet.")]);
        assert_eq!(
            conversations.place("first", &colour).await.unwrap().id,
            "first"
        );
        for n in 0..MAX_BASES + 10 {
            conversations
                .place(&format!("app-{n}"), &colour)
                .await
                .unwrap();
        }
        assert_eq!(conversations.n_bases(), MAX_BASES);
        // "first" was dropped: nothing was recorded there, so its conversation is new again.
        let placed = conversations.place("first", &planet).await.unwrap();
        assert_eq!((placed.id.as_str(), placed.new), ("first", true));
    }

    /// The conversations are read back from the store by a proxy that did not record them.
    #[tokio::test]
    async fn a_new_proxy_reads_the_conversations_back_from_the_store() {
        let backend = Arc::new(cuca_store_mem::InMemoryBackend::new());
        let record = |session: &str, sequence: u64, event: SessionEvent| SessionRecord {
            session_id: session.into(),
            sequence,
            timestamp_ms: 0,
            event,
        };
        for (session, question) in [("app", "Name a colour."), ("app:conv:1", "Name a planet.")] {
            backend
                .append(record(
                    session,
                    0,
                    SessionEvent::SystemPrompt {
                        text: "Be brief.".into(),
                    },
                ))
                .unwrap();
            backend
                .append(record(
                    session,
                    1,
                    SessionEvent::Message(message(Role::User, question)),
                ))
                .unwrap();
            backend
                .append(record(
                    session,
                    2,
                    SessionEvent::Output { text: "Red".into() },
                ))
                .unwrap();
        }
        let conversations = Conversations::new(backend);
        let planet = request(
            "Be brief.",
            &[
                (Role::User, "Name a planet."),
                (Role::Assistant, "Mars"),
                (Role::User, "Another?"),
            ],
        );
        assert_eq!(
            conversations.place("app", &planet).await.unwrap().id,
            "app:conv:1"
        );
        let third = request("Be brief.", &[(Role::User, "Name a fish.")]);
        assert_eq!(
            conversations.place("app", &third).await.unwrap().id,
            "app:conv:2"
        );
    }
}
