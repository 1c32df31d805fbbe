//! Whether a recording can be replayed call by call: two calls made at one conversation
//! position leave the same `Message` records (seed 000 writes a message once per position),
//! so only their `RequestDigest` records say whether they were one request asked twice (a
//! client's retry: replay serves the recorded answers in order) or two different requests
//! that a replay cannot tell apart, so a session that cannot be replayed says so.

use std::collections::BTreeMap;
use std::fmt;

use cuca_events::SessionEvent;

/// Two calls of one session at the same conversation position that its records cannot tell
/// apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ambiguity {
    /// The earlier call, numbered from 1 in the order the session's `CallRequest`s come.
    pub first_call: u64,
    /// The later call at the same position.
    pub later_call: u64,
    /// How many messages both requests carried (`CallRequest::messages`).
    pub messages: u64,
    /// Why the records cannot tell the two apart.
    pub why: AmbiguityKind,
}

/// Why two calls at one position cannot be told apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AmbiguityKind {
    /// Their digests differ: they carried different messages, and the session records only
    /// the first call's.
    DifferentRequests {
        /// The earlier call's digest.
        first: String,
        /// The later call's digest.
        later: String,
    },
    /// At least one of them has no `RequestDigest` (a recording made before cuca wrote
    /// them), so nothing says whether they were the same request.
    NoDigest,
}

impl fmt::Display for Ambiguity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (first, later, messages) = (self.first_call, self.later_call, self.messages);
        let carried = if messages == 1 {
            "1 message".to_owned()
        } else {
            format!("{messages} messages")
        };
        match &self.why {
            AmbiguityKind::DifferentRequests { first: a, later: b } => write!(
                f,
                "calls {first} and {later} both carried {carried}, but different ones (request digests {} and {}): the session records only call {first}'s, so a replay cannot tell them apart",
                short(a),
                short(b)
            ),
            AmbiguityKind::NoDigest => write!(
                f,
                "calls {first} and {later} both carried {carried} and the session holds no request digest to say whether they were the same request (recorded before cuca wrote digests), so a replay cannot tell them apart"
            ),
        }
    }
}

/// The first 12 hex digits of a digest: enough to tell two apart in a sentence.
fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

/// Reads a session's records in order and collects its [`Ambiguity`]s. Memory is one entry
/// per distinct position (its first call's number and digest), not per record.
///
/// ```
/// use cuca_events::SessionEvent;
/// use cuca_replay::{AmbiguityCheck, AmbiguityKind};
///
/// let mut check = AmbiguityCheck::new();
/// for sha256 in ["aa", "bb"] {
///     check.observe(&SessionEvent::CallRequest {
///         model: String::new(),
///         parameters: "{}".into(),
///         tools: "[]".into(),
///         messages: 2,
///     });
///     check.observe(&SessionEvent::RequestDigest { sha256: sha256.into() });
/// }
/// let found = check.finish();
/// assert_eq!(found.len(), 1);
/// assert_eq!((found[0].first_call, found[0].later_call), (1, 2));
/// assert!(matches!(found[0].why, AmbiguityKind::DifferentRequests { .. }));
/// ```
#[derive(Debug, Default)]
pub struct AmbiguityCheck {
    /// Each position's first call: its number and digest.
    positions: BTreeMap<u64, (u64, Option<String>)>,
    /// The call whose digest may still come: its number, position and digest so far.
    open: Option<(u64, u64, Option<String>)>,
    calls: u64,
    found: Vec<Ambiguity>,
}

impl AmbiguityCheck {
    /// A check that has seen no record.
    pub fn new() -> AmbiguityCheck {
        AmbiguityCheck::default()
    }

    /// Takes the session's next record's event; only `CallRequest` and `RequestDigest`
    /// matter.
    pub fn observe(&mut self, event: &SessionEvent) {
        match event {
            SessionEvent::CallRequest { messages, .. } => {
                self.close();
                self.calls += 1;
                self.open = Some((self.calls, *messages, None));
            }
            SessionEvent::RequestDigest { sha256 } => {
                if let Some((_, _, digest)) = &mut self.open {
                    *digest = Some(sha256.clone());
                }
            }
            _ => {}
        }
    }

    /// The ambiguities found, in the order of their later calls.
    pub fn finish(mut self) -> Vec<Ambiguity> {
        self.close();
        self.found
    }

    /// Files the open call under its position, comparing it with the position's first call.
    fn close(&mut self) {
        let Some((call, messages, digest)) = self.open.take() else {
            return;
        };
        match self.positions.get(&messages) {
            None => {
                self.positions.insert(messages, (call, digest));
            }
            Some((first_call, first)) => {
                let why = match (first, &digest) {
                    (Some(a), Some(b)) if a == b => return,
                    (Some(a), Some(b)) => AmbiguityKind::DifferentRequests {
                        first: a.clone(),
                        later: b.clone(),
                    },
                    _ => AmbiguityKind::NoDigest,
                };
                self.found.push(Ambiguity {
                    first_call: *first_call,
                    later_call: call,
                    messages,
                    why,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(check: &mut AmbiguityCheck, messages: u64, digest: Option<&str>) {
        check.observe(&SessionEvent::CallRequest {
            model: "m".into(),
            parameters: "{}".into(),
            tools: "[]".into(),
            messages,
        });
        check.observe(&SessionEvent::Output { text: "x".into() });
        if let Some(sha256) = digest {
            check.observe(&SessionEvent::RequestDigest {
                sha256: sha256.into(),
            });
        }
    }

    #[test]
    fn a_growing_conversation_and_a_retry_of_one_request_are_replayable() {
        let mut check = AmbiguityCheck::new();
        call(&mut check, 1, Some("a"));
        call(&mut check, 1, Some("a"));
        call(&mut check, 3, Some("b"));
        call(&mut check, 5, None);
        assert_eq!(check.finish(), []);
    }

    #[test]
    fn two_different_requests_at_one_position_are_named_with_their_calls() {
        let mut check = AmbiguityCheck::new();
        call(&mut check, 2, Some("0123456789abcdef"));
        call(&mut check, 4, Some("c"));
        call(&mut check, 2, Some("fedcba9876543210"));
        let found = check.finish();
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].first_call, found[0].later_call), (1, 3));
        let sentence = found[0].to_string();
        assert!(
            sentence.starts_with("calls 1 and 3 both carried 2 messages, but different ones")
                && sentence.contains("0123456789ab")
                && sentence.contains("fedcba987654"),
            "{sentence}"
        );
    }

    #[test]
    fn calls_at_one_position_without_digests_cannot_be_told_apart() {
        let mut check = AmbiguityCheck::new();
        call(&mut check, 1, None);
        call(&mut check, 1, None);
        let found = check.finish();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].why, AmbiguityKind::NoDigest);
        assert!(found[0].to_string().contains("1 message and"));
    }
}
