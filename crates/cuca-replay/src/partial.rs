//! Whether a request was cut while its records were written and never closed: a partial
//! request left at the end of a session, or one whose records joined the next call's turn,
//! which a replay then cannot match.

use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};

use cuca_events::SessionEvent;

/// A request a session holds only part of, with no `CallRequest` after it and no closing
/// records: what a recorder leaves when the store refuses a request's second record (a full
/// disk, a file size limit, a store gone away) and nothing closes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartialRequest {
    /// The sequence of the partial request's first record.
    pub first_sequence: u64,
    /// How many request records its turn holds before the `CallRequest` (`Joined`: the
    /// partial request's and the call's own), or at all (`AtEnd`).
    pub n_records: u64,
    /// What became of it.
    pub why: PartialRequestKind,
}

/// What became of a partial request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PartialRequestKind {
    /// It is the session's last: the next call recorded into the session joins its turn
    /// unless the recorder closes it first (`cuca proxy` does).
    AtEnd,
    /// The next call's records joined its turn: the turn's system prompts are the partial
    /// request's and then the call's own again, so no request matches the turn and a replay
    /// of that call answers 409.
    Joined {
        /// The sequence of the `CallRequest` of the call it joined.
        call_sequence: u64,
    },
}

impl fmt::Display for PartialRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (first, n) = (self.first_sequence, self.n_records);
        let (records, them) = if n == 1 {
            ("1 record".to_owned(), "it")
        } else {
            (format!("{n} records"), "them")
        };
        match &self.why {
            PartialRequestKind::AtEnd => write!(
                f,
                "a request cut while it was written ({records} from sequence {first}, no CallRequest after {them}) ends the session; the next call recorded joins its turn unless it is closed first (cuca proxy closes it)"
            ),
            PartialRequestKind::Joined { call_sequence } => write!(
                f,
                "a request cut while it was written (from sequence {first}) was never closed, and the call whose CallRequest is at sequence {call_sequence} joined its turn ({n} request records before that CallRequest): the turn's system prompts come twice, so a replay cannot match that call"
            ),
        }
    }
}

/// Reads a session's records in order and finds its [`PartialRequest`]s. The turns are
/// segmented as a replay segments them (a `Latency` then a `TokenUsage` closes one). Memory
/// is one hash per system prompt of the current turn.
///
/// ```
/// use cuca_events::{Message, SessionEvent};
/// use cuca_replay::{PartialRequestCheck, PartialRequestKind};
///
/// let system = || SessionEvent::SystemPrompt { text: "Be brief.".into() };
/// let call = SessionEvent::CallRequest {
///     model: String::new(),
///     parameters: "{}".into(),
///     tools: "[]".into(),
///     messages: 2,
/// };
/// let mut check = PartialRequestCheck::new();
/// // A request cut after its system prompt, then the retried call's records.
/// check.observe(0, &system());
/// check.observe(1, &system());
/// check.observe(2, &SessionEvent::Message(Message::user("hi")));
/// check.observe(3, &call);
/// let found = check.finish();
/// assert_eq!(found.len(), 1);
/// assert_eq!(found[0].why, PartialRequestKind::Joined { call_sequence: 3 });
/// ```
#[derive(Debug, Default)]
pub struct PartialRequestCheck {
    /// Whether the session has call metadata (a `CallRequest`): without it, request records
    /// are never followed by one, and only a turn that holds nothing else is partial.
    metadata: bool,
    /// The current turn: its request records before its `CallRequest`.
    first_request: Option<u64>,
    n_request_records: u64,
    /// Hashes of the current turn's system prompts before its `CallRequest`.
    systems: Vec<u64>,
    /// The current turn's `CallRequest` came.
    has_call: bool,
    /// The current turn holds records other than its request's.
    has_other: bool,
    /// The record before was a `Latency`.
    after_latency: bool,
    found: Vec<PartialRequest>,
}

impl PartialRequestCheck {
    /// A check that has seen no record.
    pub fn new() -> PartialRequestCheck {
        PartialRequestCheck::default()
    }

    /// Takes the session's next record.
    pub fn observe(&mut self, sequence: u64, event: &SessionEvent) {
        match event {
            SessionEvent::SystemPrompt { text } => self.observe_system_prompt(sequence, text),
            other => self.observe_kind(sequence, other.kind()),
        }
    }

    /// Takes the session's next record when it is a `SystemPrompt` with `text`: for a reader
    /// that has the text borrowed, not as a [`SessionEvent`].
    pub fn observe_system_prompt(&mut self, sequence: u64, text: &str) {
        self.after_latency = false;
        if self.has_call {
            self.has_other = true;
            return;
        }
        self.request_record(sequence);
        let mut hasher = DefaultHasher::new();
        text.hash(&mut hasher);
        self.systems.push(hasher.finish());
    }

    /// Takes the session's next record by its kind ([`SessionEvent::kind`]), for every kind
    /// but `SystemPrompt` ([`Self::observe_system_prompt`]): the rest are told apart by kind
    /// alone, so a reader that skims records without their text can feed them.
    pub fn observe_kind(&mut self, sequence: u64, kind: &str) {
        let after_latency = std::mem::replace(&mut self.after_latency, kind == "Latency");
        match kind {
            "Message" | "ToolResult" if !self.has_call => self.request_record(sequence),
            "CallRequest" => {
                self.metadata = true;
                if !self.has_call {
                    self.check_joined(sequence);
                }
                self.has_call = true;
            }
            "TokenUsage" if after_latency => self.end_turn(),
            _ => self.has_other = true,
        }
    }

    /// The partial requests found, in record order.
    pub fn finish(mut self) -> Vec<PartialRequest> {
        if let Some(first_sequence) = self.first_request {
            if !self.has_call && (self.metadata || !self.has_other) {
                self.found.push(PartialRequest {
                    first_sequence,
                    n_records: self.n_request_records,
                    why: PartialRequestKind::AtEnd,
                });
            }
        }
        self.found
    }

    fn request_record(&mut self, sequence: u64) {
        self.first_request.get_or_insert(sequence);
        self.n_request_records += 1;
    }

    /// A turn's system prompts are a request's, written once per call. When they are a run
    /// `P` that a full run `F` follows, with `P` a start of `F`, a partial request's system
    /// prompts came first and the call's own after them: the turn holds `P ++ F`, not `F`.
    ///
    /// A request that carries one system prompt run twice over (`[a, a]`) looks the same and
    /// is reported too: no record tells the two apart.
    fn check_joined(&mut self, call_sequence: u64) {
        let n = self.systems.len();
        let joined = (1..=n / 2).any(|cut| {
            let (partial, own) = self.systems.split_at(cut);
            own.starts_with(partial)
        });
        if let (true, Some(first_sequence)) = (joined, self.first_request) {
            self.found.push(PartialRequest {
                first_sequence,
                n_records: self.n_request_records,
                why: PartialRequestKind::Joined { call_sequence },
            });
        }
    }

    fn end_turn(&mut self) {
        self.first_request = None;
        self.n_request_records = 0;
        self.systems.clear();
        self.has_call = false;
        self.has_other = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuca_events::Message;

    fn system(text: &str) -> SessionEvent {
        SessionEvent::SystemPrompt { text: text.into() }
    }

    fn call() -> SessionEvent {
        SessionEvent::CallRequest {
            model: "m".into(),
            parameters: "{}".into(),
            tools: "[]".into(),
            messages: 2,
        }
    }

    fn close(check: &mut PartialRequestCheck, from: u64) {
        check.observe(from, &SessionEvent::Output { text: "x".into() });
        check.observe(from + 1, &SessionEvent::Latency { duration_ms: 1 });
        check.observe(
            from + 2,
            &SessionEvent::TokenUsage {
                prompt_tokens: 1,
                completion_tokens: 1,
            },
        );
    }

    #[test]
    fn whole_calls_and_a_closed_partial_request_are_replayable() {
        let mut check = PartialRequestCheck::new();
        check.observe(0, &system("a"));
        check.observe(1, &SessionEvent::Message(Message::user("hi")));
        check.observe(2, &call());
        close(&mut check, 3);
        // A partial request closed by its recorder is a turn of its own.
        check.observe(6, &system("a"));
        check.observe(
            7,
            &SessionEvent::CallIncomplete {
                reason: "cut".into(),
            },
        );
        check.observe(8, &SessionEvent::Latency { duration_ms: 0 });
        check.observe(
            9,
            &SessionEvent::TokenUsage {
                prompt_tokens: 0,
                completion_tokens: 0,
            },
        );
        // Two different system prompts are one request's.
        check.observe(10, &system("a"));
        check.observe(11, &system("b"));
        check.observe(12, &call());
        close(&mut check, 13);
        assert_eq!(check.finish(), []);
    }

    #[test]
    fn a_partial_request_at_the_end_and_one_a_call_joined_are_found() {
        let mut check = PartialRequestCheck::new();
        check.observe(0, &system("a"));
        check.observe(1, &system("b"));
        check.observe(2, &system("a"));
        check.observe(3, &system("b"));
        check.observe(4, &call());
        close(&mut check, 5);
        check.observe(8, &system("a"));
        check.observe(9, &SessionEvent::Message(Message::user("more")));
        let found = check.finish();
        assert_eq!(
            found,
            [
                PartialRequest {
                    first_sequence: 0,
                    n_records: 4,
                    why: PartialRequestKind::Joined { call_sequence: 4 },
                },
                PartialRequest {
                    first_sequence: 8,
                    n_records: 2,
                    why: PartialRequestKind::AtEnd,
                },
            ]
        );
        assert!(found[1].to_string().contains("2 records from sequence 8"));
    }

    #[test]
    fn a_session_without_call_metadata_is_partial_only_when_its_last_turn_is_a_bare_request() {
        let mut check = PartialRequestCheck::new();
        check.observe(0, &system("a"));
        check.observe(1, &SessionEvent::Message(Message::user("hi")));
        check.observe(
            2,
            &SessionEvent::Output {
                text: "half".into(),
            },
        );
        assert_eq!(check.finish(), []);
        let mut check = PartialRequestCheck::new();
        check.observe(0, &system("a"));
        assert_eq!(check.finish().len(), 1);
    }
}
