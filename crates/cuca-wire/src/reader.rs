//! How a request's messages are read: each element of its message list on its own, so that
//! a caller who read the same bytes before can hand back what it read then.
//!
//! An agent's request repeats every message of the one before it: at an agent loop's
//! 1,000th turn, 1,997 of its 1,999 messages were read at the 999th. Reading them again
//! (a JSON tree each, then the unified message) was most of what a replayed late turn
//! cost. A [`MessageReader`] sees each element's bytes exactly as sent and may answer from
//! what it kept; [`ReadEach`] reads every element anew.

use cuca_events::Message;
use serde_json::value::RawValue;

/// A format's reading of one element of a request's message list: appends the messages the
/// element stands for to `out` (a Messages-format user message with tool results is several),
/// or says in words why it is not one.
pub type ReadElement<'a> = &'a dyn Fn(&RawValue, &mut Vec<Message>) -> Result<(), String>;

/// Reads the elements of a request's message list (see [`crate::Format::parse_request_with`]).
///
/// An implementation must append exactly what `read` would for the same bytes: the format's
/// reading depends on nothing but them, so one that keeps `read`'s messages by the element's
/// bytes and hands them back for the same bytes is exact. An error is the format's own and is
/// passed on as it is.
///
/// ```
/// use cuca_events::Message;
/// use serde_json::value::RawValue;
/// use std::cell::Cell;
///
/// /// Counts the elements it is asked to read, and reads each as the format does.
/// struct Counting(Cell<usize>);
/// impl cuca_wire::MessageReader for Counting {
///     fn read(
///         &self,
///         raw: &RawValue,
///         out: &mut Vec<Message>,
///         read: cuca_wire::ReadElement<'_>,
///     ) -> Result<(), String> {
///         self.0.set(self.0.get() + 1);
///         read(raw, out)
///     }
/// }
///
/// let counting = Counting(Cell::new(0));
/// let request = cuca_wire::Format::Chat
///     .parse_request_with(
///         br#"{"model":"m","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"hi"}]}"#,
///         &counting,
///     )
///     .unwrap();
/// assert_eq!(request.unified.messages.len(), 2);
/// assert_eq!(counting.0.get(), 2);
/// ```
pub trait MessageReader {
    /// Appends the messages `raw` stands for to `out`; `read` is the format's own reading of
    /// it. `raw` is one element of the request's message list, its bytes as the caller sent
    /// them.
    fn read(
        &self,
        raw: &RawValue,
        out: &mut Vec<Message>,
        read: ReadElement<'_>,
    ) -> Result<(), String>;
}

/// Reads every element anew: what [`crate::Format::parse_request`] does.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadEach;

impl MessageReader for ReadEach {
    fn read(
        &self,
        raw: &RawValue,
        out: &mut Vec<Message>,
        read: ReadElement<'_>,
    ) -> Result<(), String> {
        read(raw, out)
    }
}
