//! Replay mode: match a request to its session's recorded turn, and answer as the upstream
//! did — an SSE stream of OpenAI chunks or one JSON object — with no network at all.
//!
//! A request is placed by conversation position: the number of user and assistant messages
//! it carries. The session log records each such message once, the first time its position
//! appears, so the turn asked with `n` of them is the one whose recorded messages, counted
//! from the session's start, reach `n`. The request's messages must equal the recorded ones
//! position by position, and its system messages those of that turn; the first difference is
//! a 409 that names the message index and quotes both sides, clipped.
//!
//! The comparison runs on the session's index ([`crate::index`]): keys of the recorded
//! messages and system prompts, turn by turn. Only the turn chosen is read from the store, to
//! compare its tools and parameters and to serve its answer.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Body;
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use cuca_events::{Message, MessageContentBlock, Role};
use cuca_replay::{ReplayTrajectory, ReplayTurn, SessionReplay};

use crate::aliases::Aliases;
use crate::divergence::FirstDifference;
use crate::flush::OneAtATime;
use crate::headers::{INCOMPLETE_HEADER, POINT_HEADER, SESSION_HEADER, TURN_HEADER};
use crate::index::{first_dialogue_key, Indexes, Key, Keys, TurnIndex};
use crate::matching::Matching;
use crate::refusal::ApiError;
use cuca_wire::{Format, RecordedAnswer, WireRequest};

/// The longest `X-Cuca-Incomplete` value: a header line, not a report.
const MAX_INCOMPLETE_HEADER: usize = 240;

/// `reason` as a header value: visible ASCII and spaces, at most [`MAX_INCOMPLETE_HEADER`]
/// characters (anything else becomes `?`).
fn header_text(reason: &str) -> String {
    reason
        .chars()
        .take(MAX_INCOMPLETE_HEADER)
        .map(|c| {
            if c == ' ' || c.is_ascii_graphic() {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// The longest piece of recorded or sent text a divergence message quotes.
const QUOTE_CHARS: usize = 160;

/// `text` as a divergence message quotes it: cut to [`QUOTE_CHARS`] characters, marked
/// when cut.
fn quote(text: &str) -> String {
    match text.char_indices().nth(QUOTE_CHARS) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}… ({} chars in all)", &text[..cut], text.chars().count()),
    }
}

/// A session's load as callers share it: the trajectory, or why it could not be loaded.
pub(crate) type Loaded = Result<Arc<ReplayTrajectory>, String>;

/// The replay reads of one proxy: each session's index of turns ([`crate::index`]), which
/// every replayed request is matched against, and whole loads of a session, shared, for what
/// still needs the trajectory (a Responses request's `previous_response_id`): callers asking
/// for a session while it is being loaded wait for that load and share its trajectory instead
/// of each loading their own copy.
///
/// The bound: at most one load of each session runs at a time, and a trajectory lives only
/// while a caller uses it (nothing is cached past the callers of the load), so N concurrent
/// callers of one session hold one copy of it, not N (a 50 MB turn read by 16
/// callers once took 1.04 GB). A caller that arrives after a load finished starts a new one, so it
/// sees every record stored before it asked; one that joins a load in flight sees the session
/// as that load read it, which is the state when its request was concurrent with the read. In
/// auto mode callers of one session are already one at a time (the writer is taken before the
/// lookup), so a recorded call is always in the next caller's load.
pub(crate) struct Loads {
    replay: SessionReplay,
    in_flight: Mutex<HashMap<String, Arc<tokio::sync::OnceCell<Loaded>>>>,
    /// Each session's index of turns, which replay matches against (see [`crate::index`]).
    indexes: Indexes,
}

impl Loads {
    pub(crate) fn new(replay: SessionReplay, matching: Matching) -> Loads {
        Loads {
            indexes: Indexes::new(replay.clone(), matching),
            replay,
            in_flight: Mutex::new(HashMap::new()),
        }
    }

    /// The session's index of turns, refreshed from its tail: what replay matches against
    /// instead of a load of the session.
    pub(crate) async fn index(&self, session: &str) -> Result<Arc<TurnIndex>, String> {
        self.indexes.index(session).await
    }

    /// The index of every conversation of session `base`: the base's, then each
    /// `{base}:conv:{n}`'s in order up to the first with no records.
    /// Every conversation of session `base` a request `asked` can be answered from,
    /// refreshed, and the rest as last read ([`Indexes::conversations`]).
    pub(crate) async fn index_conversations(
        &self,
        base: &str,
        asked: &Asked,
    ) -> Result<Vec<(String, Arc<TurnIndex>)>, String> {
        self.indexes.conversations(base, asked.first_key()).await
    }

    /// The keys the indexes share, to key a request with once.
    pub(crate) fn keys(&self) -> &Keys {
        self.indexes.keys()
    }

    /// The same keys, to share with the proxy's memo of messages read.
    pub(crate) fn shared_keys(&self) -> Arc<Keys> {
        self.indexes.shared_keys()
    }

    /// Every conversation of session `base`, each refreshed from its tail: what a strict
    /// replay's report lays the ledger over, where no request says which can answer.
    pub(crate) async fn every_conversation(
        &self,
        base: &str,
    ) -> Result<Vec<(String, Arc<TurnIndex>)>, String> {
        self.indexes.conversations(base, None).await
    }

    fn in_flight(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, Arc<tokio::sync::OnceCell<Loaded>>>> {
        // The map holds no invariant a panic could break halfway.
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The session's trajectory, loaded on a blocking thread (a long session is a long read,
    /// and other callers must not wait for it), or joined from the load already running.
    pub(crate) async fn load(&self, session: &str) -> Loaded {
        let cell = Arc::clone(self.in_flight().entry(session.to_owned()).or_default());
        let replay = self.replay.clone();
        let id = session.to_owned();
        let loaded = cell
            .get_or_init(|| async move {
                let name = id.clone();
                match tokio::task::spawn_blocking(move || replay.load(&id)).await {
                    Ok(Ok(trajectory)) => Ok(Arc::new(trajectory)),
                    Ok(Err(error)) => Err(format!("cannot load session {name:?}: {error}")),
                    Err(join) => Err(format!("loading session {name:?} stopped: {join}")),
                }
            })
            .await
            .clone();
        // Done: the next caller loads afresh, and sees what was appended meanwhile.
        let mut in_flight = self.in_flight();
        if in_flight
            .get(session)
            .is_some_and(|current| Arc::ptr_eq(current, &cell))
        {
            in_flight.remove(session);
        }
        loaded
    }

    /// Every conversation of session `base`: the base's trajectory, then each
    /// `{base}:conv:{n}` in order up to the first with no records.
    pub(crate) async fn load_conversations(
        &self,
        base: &str,
    ) -> Result<Vec<(String, Arc<ReplayTrajectory>)>, String> {
        let mut out = vec![(base.to_owned(), self.load(base).await?)];
        for n in 1.. {
            let id = cuca_events::conversation_session_id(base, n);
            let trajectory = self.load(&id).await?;
            if trajectory.is_empty() {
                break;
            }
            out.push((id, trajectory));
        }
        Ok(out)
    }
}

/// The turns each conversation has served in this proxy: a repeated request gets the next
/// recorded answer to it, not the first one again.
#[derive(Debug, Default)]
pub(crate) struct Served(Mutex<HashMap<String, HashSet<usize>>>);

impl Served {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashSet<usize>>> {
        // A set of numbers: no invariant a panic could break halfway.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn of(&self, session: &str) -> HashSet<usize> {
        self.lock().get(session).cloned().unwrap_or_default()
    }

    fn has(&self, session: &str, turn: usize) -> bool {
        self.lock().get(session).is_some_and(|s| s.contains(&turn))
    }

    pub(crate) fn mark(&self, session: &str, turn: usize) {
        self.lock()
            .entry(session.to_owned())
            .or_default()
            .insert(turn);
    }

    fn clear(&self, session: &str) {
        self.lock().remove(session);
    }
}

/// A request as the index compares it: the key and role of each message that is not a
/// system message, with its index in the request, and its system prompts.
pub(crate) struct Asked {
    messages: Vec<(usize, Role, Key)>,
    systems: Vec<(usize, String)>,
    systems_key: Key,
}

impl Asked {
    pub(crate) fn new(keys: &Keys, wire: &WireRequest) -> Asked {
        Asked::with_read(keys, wire, &crate::memo::RequestRead::default(), keys)
    }

    /// The request keyed, the keys of the messages `read` read through the proxy's memo
    /// (keyed there by `read_keys`) taken from there when `keys` are the same.
    pub(crate) fn with_read(
        keys: &Keys,
        wire: &WireRequest,
        read: &crate::memo::RequestRead,
        read_keys: &Keys,
    ) -> Asked {
        let all = &wire.unified.messages;
        let known = read.keys(keys, read_keys, all.len());
        let mut messages = Vec::with_capacity(all.len());
        let mut systems = Vec::new();
        let mut prompts = Vec::new();
        for (i, (message, known)) in all.iter().zip(known).enumerate() {
            if message.role == Role::System {
                let text = message.text();
                prompts.push(known.unwrap_or_else(|| keys.text(&text)));
                systems.push((i, text));
            } else {
                let key = known.unwrap_or_else(|| keys.message(message));
                messages.push((i, message.role, key));
            }
        }
        Asked {
            messages,
            systems_key: keys.systems(&prompts),
            systems,
        }
    }

    /// The key of the first user or assistant message asked with.
    pub(crate) fn first_key(&self) -> Option<Key> {
        first_dialogue_key(self.messages.iter().map(|(_, role, key)| (*role, *key)))
    }
}

/// Whether a message of `role` is compared, in a recording that does or does not hold tool
/// results (one made before they were recorded compares the rest).
fn compared(role: Role, knows_tools: bool) -> bool {
    match role {
        Role::User | Role::Assistant => true,
        Role::Tool => knows_tools,
        Role::System => false,
    }
}

/// A replay that could not read what it had found: a 500.
fn read_failed(session: &str, message: String) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "server_error",
        "cuca_replay_failed",
        message,
    )
    .in_session(session)
}

/// Places `request` among the conversations of a session: the first conversation whose
/// recording answers it (in the order they were recorded, so of two that match equally the
/// one recorded first), else the refusal of the one that agrees with it longest — its system
/// prompts first, then the messages they share from the start. `asked` is the request keyed
/// with the indexes' keys ([`Loads::keys`]).
///
/// A conversation whose first user or assistant message is not the request's cannot answer
/// it and agrees with it on no message: it is only weighed by its system prompts, and its
/// refusal is worded (which reads its recorded message back) only when it is the one sent.
pub(crate) async fn lookup_conversations(
    conversations: &[(String, Arc<TurnIndex>)],
    wire: &WireRequest,
    asked: &Asked,
    served: &Served,
    matching: &Matching,
) -> Result<(Lookup, String), ApiError> {
    if conversations.is_empty() {
        return Ok((not_recorded_anywhere(), String::new()));
    }
    // Sized up front: an agent's request holds thousands of messages, and growing by
    // doubling copied them a dozen times.
    let mut dialogue: Vec<Key> = Vec::with_capacity(asked.messages.len());
    dialogue.extend(
        asked
            .messages
            .iter()
            .filter(|(_, role, _)| compared(*role, false))
            .map(|(_, _, key)| *key),
    );
    let first_asked = asked.first_key();
    let mut best: Option<Refusal<'_>> = None;
    let mut first_found: Option<(Lookup, String)> = None;
    for (id, index) in conversations {
        let same_systems = index
            .turns()
            .last()
            .is_some_and(|turn| turn.systems == asked.systems_key);
        let first_recorded = index.first_key();
        if first_asked.is_some() && first_recorded.is_some() && first_asked != first_recorded {
            let affinity = (same_systems, 0);
            if best.as_ref().is_none_or(|Refusal(b, ..)| affinity > *b) {
                best = Some(Refusal(affinity, None, id, index));
            }
            continue;
        }
        let found = lookup_asked(index, id, wire, asked, &served.of(id), matching).await?;
        if let Lookup::Found(_, turn_idx) = &found {
            // A turn not served yet answers at once; one served before only if no other
            // conversation has a fresh one (two apps' identical first questions).
            if !served.has(id, *turn_idx) {
                served.mark(id, *turn_idx);
                return Ok((found, id.clone()));
            }
            if first_found.is_none() {
                first_found = Some((found, id.clone()));
            }
            continue;
        }
        let shared = index
            .messages()
            .iter()
            .filter(|m| compared(m.role, false))
            .zip(&dialogue)
            .take_while(|(a, b)| a.key == **b)
            .count();
        let affinity = (same_systems, shared);
        if best.as_ref().is_none_or(|Refusal(b, ..)| affinity > *b) {
            best = Some(Refusal(affinity, Some(found), id, index));
        }
    }
    if let Some((found, id)) = first_found {
        // Everything that matches was served: the recording is replayed again from its start.
        served.clear(&id);
        if let Lookup::Found(_, turn_idx) = &found {
            served.mark(&id, *turn_idx);
        }
        return Ok((found, id));
    }
    Ok(match best {
        Some(Refusal(_, Some(found), id, _)) => (found, id.to_owned()),
        Some(Refusal(_, None, id, index)) => (
            lookup_asked(index, id, wire, asked, &served.of(id), matching).await?,
            id.to_owned(),
        ),
        None => (not_recorded_anywhere(), String::new()),
    })
}

/// The refusal to send when no conversation answers: how far its conversation agrees with
/// the request (same system prompts, messages shared from the start), its lookup once worded,
/// and the conversation.
struct Refusal<'a>((bool, usize), Option<Lookup>, &'a str, &'a TurnIndex);

fn not_recorded_anywhere() -> Lookup {
    Lookup::NotRecorded(ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found_error",
        "cuca_session_not_found",
        "the session has no recording",
    ))
}

/// Where a request falls in its session's recording.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// The turn it matches, and that turn's index.
    Found(Box<ReplayTurn>, usize),
    /// The recording has a turn at this position, or disagrees before it: a 409.
    Diverged(ApiError),
    /// The recording ends before this position, or there is none: a 404 in replay mode,
    /// forwarded and recorded in auto mode.
    NotRecorded(ApiError),
}

/// Places `request` in the recording `index` holds (session `session`). An error is a
/// recording the index found and the store then could not read.
pub(crate) async fn lookup(
    index: &TurnIndex,
    session: &str,
    wire: &WireRequest,
    served: &HashSet<usize>,
    matching: &Matching,
) -> Result<Lookup, ApiError> {
    let asked = Asked::new(index.keys(), wire);
    lookup_asked(index, session, wire, &asked, served, matching).await
}

async fn lookup_asked(
    index: &TurnIndex,
    session: &str,
    wire: &WireRequest,
    asked: &Asked,
    served: &HashSet<usize>,
    matching: &Matching,
) -> Result<Lookup, ApiError> {
    let request = &wire.unified;
    if index.is_empty() {
        return Ok(Lookup::NotRecorded(
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found_error",
                "cuca_session_not_found",
                format!("session {session:?} has no recording"),
            )
            .in_session(session),
        ));
    }
    // Tool results are compared where the recording holds them (a session log asked for
    // them); a recording made without them compares the rest.
    let knows_tools = index.knows_tools();
    let mut conversation: Vec<&(usize, Role, Key)> = Vec::with_capacity(asked.messages.len());
    conversation.extend(
        asked
            .messages
            .iter()
            .filter(|(_, role, _)| compared(*role, knows_tools)),
    );
    // Each compared recorded message with its place among all the recorded ones, to read
    // it back for a 409.
    let mut recorded: Vec<(usize, Key)> = Vec::with_capacity(index.messages().len());
    recorded.extend(
        index
            .messages()
            .iter()
            .enumerate()
            .filter(|(_, m)| compared(m.role, knows_tools))
            .map(|(at, m)| (at, m.key)),
    );
    let read = |message: String| read_failed(session, message);
    let describe_recorded = |at: usize| async move {
        index
            .read_message(at)
            .await
            .map(|message| describe(&message))
            .map_err(read)
    };
    let n = conversation.len();
    for (i, (message_idx, _, got)) in conversation.iter().enumerate().take(recorded.len()) {
        let (at, want) = recorded[i];
        if want != *got {
            let expected = index.read_message(at).await.map_err(read)?;
            let sent = &request.messages[*message_idx];
            return Ok(Lookup::Diverged(
                diverged(
                    session,
                    *message_idx,
                    &describe(&expected),
                    &describe(sent),
                    FirstDifference::of_messages(*message_idx, &expected, sent, matching),
                )
                .at_point(point_of_message(index, session, at)),
            ));
        }
    }
    let systems = &asked.systems;
    // A turn's position: the messages its request carried, from its CallRequest record. A
    // recording without call metadata falls back on counting Message records from the start,
    // which is exact as long as every call extended the conversation.
    let turns = index.turns();
    let by_metadata = turns.iter().any(|turn| turn.asked_with.is_some());
    let mut positions = Vec::with_capacity(turns.len());
    let mut count = 0;
    for turn in turns {
        count += turn.n_messages;
        positions.push(if by_metadata {
            turn.asked_with.map(|m| m as usize)
        } else {
            Some(count)
        });
    }
    let target = if by_metadata {
        request.messages.len()
    } else {
        n
    };
    let at_position: Vec<usize> = (0..turns.len())
        .filter(|&t| positions[t] == Some(target))
        .collect();
    let complete: Vec<usize> = at_position
        .iter()
        .copied()
        .filter(|&t| turns[t].complete)
        .collect();
    // Of several turns asked at one position, those with the request's system prompts (a side
    // call with its own prompt is another conversation), and of those the last that ended with
    // a finish reason: a call retried after it was cut short is the one the agent went on from.
    let same_system: Vec<usize> = complete
        .iter()
        .copied()
        .filter(|&t| turns[t].systems == asked.systems_key)
        .collect();
    let pool = if same_system.is_empty() {
        &complete
    } else {
        &same_system
    };
    // Not a call the recorder marked incomplete: its answer was cut or lost. Of the whole
    // ones, the first this proxy has not served yet, so calls that repeat one request
    // (LangChain's `invoke` then `stream`) get the recorded answers in the recorded order; once
    // all were served, the first again.
    let whole: Vec<usize> = pool
        .iter()
        .copied()
        .filter(|&t| turns[t].is_whole())
        .collect();
    let chosen = whole
        .iter()
        .find(|t| !served.contains(t))
        .or(whole.first())
        .or(pool.last())
        .copied();
    let Some(turn_idx) = chosen else {
        let furthest = positions.iter().flatten().max().copied().unwrap_or(0);
        if target > furthest || !at_position.is_empty() {
            let message = if at_position.is_empty() {
                format!(
                    "session {session:?} has {} recorded turns, the furthest asked with {furthest} messages; this request, with {target}, comes after it",
                    index.len()
                )
            } else {
                format!(
                    "turn {} of session {session:?} was never completed in the recording",
                    at_position[0]
                )
            };
            return Ok(Lookup::NotRecorded(
                ApiError::new(
                    StatusCode::NOT_FOUND,
                    "not_found_error",
                    "cuca_turn_not_found",
                    message,
                )
                .in_session(session),
            ));
        }
        // The request agrees with the recording as far as it goes, but no turn was asked
        // with as many messages as it carries.
        let index_at = request.messages.len();
        let expected = match recorded.get(n) {
            Some((at, _)) => describe_recorded(*at).await?,
            None => "a turn asked with as many messages".to_owned(),
        };
        let point = recorded
            .get(n)
            .and_then(|(at, _)| point_of_message(index, session, *at));
        return Ok(Lookup::Diverged(
            diverged(
                session,
                index_at,
                &expected,
                "no message (the request ends here)",
                None,
            )
            .at_point(point),
        ));
    };
    // Chosen by the index: now its records are read, and what the index holds no key of (the
    // tools, the parameters) is compared with them.
    let turn = index.read_turn(turn_idx).await.map_err(read)?;
    let point = Some(format!("{session}:{}", turn.sequence_range().start()));
    match compare_chosen(session, &turn, turn_idx, wire, systems, matching) {
        Some(error) => Ok(Lookup::Diverged(error.at_point(point))),
        None => Ok(Lookup::Found(Box::new(turn), turn_idx)),
    }
}

/// What the index holds no key of, compared with the chosen turn's records: its system
/// prompts, its tools and its sampling parameters; the refusal of the first that differs.
fn compare_chosen(
    session: &str,
    turn: &ReplayTurn,
    turn_idx: usize,
    wire: &WireRequest,
    systems: &[(usize, String)],
    matching: &Matching,
) -> Option<ApiError> {
    let request = &wire.unified;
    let expected = turn.system_prompts();
    for i in 0..systems.len().max(expected.len()) {
        match (expected.get(i), systems.get(i)) {
            (Some(want), Some((index, got))) if !matching.same_text(want, got) => {
                return Some(diverged(
                    session,
                    *index,
                    &format!("system {:?}", quote(want)),
                    &format!("system {:?}", quote(got)),
                    FirstDifference::of_texts(
                        format!("messages[{index}].content"),
                        &matching.normal(want),
                        &matching.normal(got),
                    ),
                ));
            }
            (Some(want), None) => {
                return Some(diverged(
                    session,
                    request.messages.len(),
                    &format!("system {:?}", quote(want)),
                    "no system message",
                    None,
                ));
            }
            (None, Some((index, got))) => {
                return Some(diverged(
                    session,
                    *index,
                    "no system message",
                    &format!("system {:?}", quote(got)),
                    None,
                ));
            }
            _ => {}
        }
    }
    if let Some(recorded) = turn.call().request() {
        if !matching.same_tools(&recorded.tools, &request.tools) {
            let names = |tools: Vec<String>| format!("[{}]", tools.join(", "));
            let want: Vec<String> = serde_json::from_str::<Vec<serde_json::Value>>(&recorded.tools)
                .unwrap_or_default()
                .iter()
                .map(|t| {
                    t.get("name")
                        .and_then(|n| n.as_str())
                        .unwrap_or("?")
                        .to_owned()
                })
                .collect();
            let got: Vec<String> = request.tools.iter().map(|t| t.name.clone()).collect();
            return Some(refused(
                session,
                "tools",
                format!(
                    "the tools offered differ from those turn {turn_idx} of session {session:?} was recorded with: expected {} (as recorded), got {}",
                    quote(&names(want)),
                    quote(&names(got))
                ),
            ));
        }
        if let Some((key, want, got)) =
            matching.parameter_difference(&recorded.parameters, &wire.parameters)
        {
            return Some(refused(
                session,
                key,
                format!(
                    "the request's {key:?} differs from turn {turn_idx} of session {session:?}: expected {}, got {} (replay compares sampling parameters; `--ignore-params` turns that off)",
                    quote(&want),
                    quote(&got)
                ),
            ));
        }
    }
    None
}

/// How many of the recording's turns, from the first, `request` agrees with: turns asked
/// before it whose recorded messages (compared as the match compares them) are the request's
/// own, in order. Fork mode branches the recording after the last of them.
pub(crate) fn matched_turns(index: &TurnIndex, wire: &WireRequest, _matching: &Matching) -> usize {
    let request = &wire.unified;
    let knows_tools = index.knows_tools();
    let asked = Asked::new(index.keys(), wire);
    let sent: Vec<Key> = asked
        .messages
        .iter()
        .filter(|(_, role, _)| compared(*role, knows_tools))
        .map(|(_, _, key)| *key)
        .collect();
    let mut at = 0;
    let mut matched = 0;
    for turn in index.turns() {
        if turn
            .asked_with
            .is_some_and(|asked| asked as usize >= request.messages.len())
        {
            break;
        }
        let recorded: Vec<Key> = index.messages()
            [turn.messages_from..turn.messages_from + turn.n_messages]
            .iter()
            .filter(|m| compared(m.role, knows_tools))
            .map(|m| m.key)
            .collect();
        let Some(next) = sent.get(at..at + recorded.len()) else {
            break;
        };
        if recorded != next {
            break;
        }
        at += recorded.len();
        matched += 1;
    }
    matched
}

/// The point of the recorded call whose messages hold the recorded message `at` (counted
/// among all of the index's messages), as `{session}:{sequence}` of its first record.
fn point_of_message(index: &TurnIndex, session: &str, at: usize) -> Option<String> {
    index
        .turns()
        .iter()
        .find(|turn| (turn.messages_from..turn.messages_from + turn.n_messages).contains(&at))
        .map(|turn| format!("{session}:{}", turn.sequence_range().start()))
}

/// A 409 about `param`, in words.
fn refused(session: &str, param: &str, message: String) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "invalid_request_error",
        "cuca_replay_diverged",
        message,
    )
    .with_param(param.to_owned())
    .in_session(session)
}

/// The 409 of a request that differs from its recording at message `index`: both sides in
/// a few words, and, where one was found, the first difference in context (also in the body,
/// as `error.divergence`).
fn diverged(
    session: &str,
    index: usize,
    expected: &str,
    got: &str,
    difference: Option<FirstDifference>,
) -> ApiError {
    let detail = difference
        .as_ref()
        .map_or(String::new(), |d| format!("; {}", d.sentence()));
    let error = ApiError::new(
        StatusCode::CONFLICT,
        "invalid_request_error",
        "cuca_replay_diverged",
        format!(
            "the request diverges from the recording of session {session:?} at messages[{index}]: expected {expected}, got {got}{detail}"
        ),
    )
    .with_param(format!("messages[{index}]"))
    .in_session(session);
    match difference {
        Some(difference) => error.with_divergence(difference.json()),
        None => error,
    }
}

/// A message in a few words: its role and clipped text, and any tool calls or images.
fn describe(message: &Message) -> String {
    let mut out = if message.role == Role::Tool {
        message.role.as_str().to_owned()
    } else {
        format!("{} {:?}", message.role.as_str(), quote(&message.text()))
    };
    for block in &message.content {
        match block {
            MessageContentBlock::ToolCall {
                name, arguments, ..
            } => out.push_str(&format!(" + tool call {name}({})", quote(arguments))),
            MessageContentBlock::ImageBase64 { media_type, data } => {
                out.push_str(&format!(" + image {media_type} ({} bytes)", data.len()));
            }
            MessageContentBlock::Thinking { thinking } => {
                out.push_str(&format!(" + reasoning {:?}", quote(thinking)));
            }
            MessageContentBlock::ToolResult {
                tool_call_id,
                content,
                is_error,
            } => {
                let error = if *is_error { ", an error" } else { "" };
                out.push_str(&format!(
                    " + the result of {tool_call_id:?}{error}: {:?}",
                    quote(content)
                ));
            }
            _ => {}
        }
    }
    out
}

/// The blocks of a recorded turn, shared with every caller of its load: what an encoder
/// streams from.
struct TurnBlocks(ReplayTurn);

impl AsRef<[MessageContentBlock]> for TurnBlocks {
    fn as_ref(&self) -> &[MessageContentBlock] {
        self.0.blocks()
    }
}

/// The answer the upstream gave for `turn`, rebuilt in the caller's `format`: its event
/// stream when the request asked for one, else its whole answer object. The same turn and
/// request give the same bytes every time: no clock, no random id. With `answers` (a
/// restored copy's paths, `Aliases::reversed`), every rendered byte is read through them.
pub(crate) fn render(
    turn: &ReplayTurn,
    turn_idx: usize,
    session: &str,
    request: &WireRequest,
    format: Format,
    answers: Option<&Aliases>,
) -> Response {
    let call = turn.call();
    let model = call
        .served_model()
        .map(str::to_owned)
        .or_else(|| call.request().map(|r| r.model.clone()))
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| {
            if request.unified.model.is_empty() {
                "cuca-replay".to_owned()
            } else {
                request.unified.model.clone()
            }
        });
    let completion = turn.completion().unwrap_or_default();
    let answer = RecordedAnswer {
        blocks: TurnBlocks(turn.clone()),
        model,
        finish_reason: call.finish_reason().map(str::to_owned),
        prompt_tokens: completion.prompt_tokens,
        completion_tokens: completion.completion_tokens,
        // The recording's own ids and signatures, when it was made in the caller's format.
        wire: call
            .wire()
            .filter(|(recorded, _)| *recorded == format.name())
            .and_then(|(_, wire)| serde_json::from_str(wire).ok()),
        id: format!("cuca-{turn_idx}"),
    };
    let answers = answers.filter(|aliases| !aliases.is_empty()).cloned();
    let (content_type, body) = if request.stream {
        let chunks = format.encode_stream(answer, request).map(move |chunk| {
            Ok::<Bytes, std::io::Error>(match answers.as_ref().map(|a| a.apply(&chunk)) {
                Some(std::borrow::Cow::Owned(rewritten)) => Bytes::from(rewritten),
                _ => chunk,
            })
        });
        (
            "text/event-stream",
            Body::from_stream(OneAtATime::new(futures::stream::iter(chunks))),
        )
    } else {
        let body = format.encode_object(&answer, request).to_string();
        let body = match &answers {
            Some(aliases) => aliases.apply(body.as_bytes()).into_owned(),
            None => body.into_bytes(),
        };
        ("application/json", Body::from(body))
    };
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    for (name, value) in [
        (SESSION_HEADER, session.to_owned()),
        (
            POINT_HEADER,
            format!("{session}:{}", turn.sequence_range().start()),
        ),
        // Turns count from 1 here as everywhere a person reads them (`cuca replay --turn`).
        (TURN_HEADER, (turn_idx + 1).to_string()),
    ]
    .into_iter()
    .chain(
        call.incomplete()
            .map(|why| (INCOMPLETE_HEADER, header_text(why))),
    ) {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    response
}
