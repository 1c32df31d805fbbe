//! Point ids (`"{session_id}:{sequence}"`) and fork ids (`"{session_id}:fork:{point_id}:{n}"`).

use crate::error::PluginError;

/// Splits a point id at its **last** `:` into session id and sequence.
///
/// A fork session id itself contains `:`, so only the last one separates the sequence.
///
/// ```
/// use cuca_events::parse_point_id;
/// assert_eq!(parse_point_id("demo:1").unwrap(), ("demo", 1));
/// assert_eq!(parse_point_id("demo:fork:demo:1:0:3").unwrap(), ("demo:fork:demo:1:0", 3));
/// assert!(parse_point_id("demo").is_err());
/// ```
pub fn parse_point_id(point_id: &str) -> Result<(&str, u64), PluginError> {
    let Some((session_id, sequence)) = point_id.rsplit_once(':') else {
        return Err(PluginError::validation(
            "point_id",
            format!("{point_id:?} has no ':'; a point id is \"{{session_id}}:{{sequence}}\", e.g. \"demo:1\""),
        ));
    };
    if session_id.is_empty() {
        return Err(PluginError::validation(
            "point_id",
            format!("{point_id:?} names no session before its ':'"),
        ));
    }
    let not_a_sequence = || {
        PluginError::validation(
            "point_id",
            format!("{point_id:?} ends in {sequence:?}, which is not a sequence number"),
        )
    };
    let parsed = sequence.parse::<u64>().map_err(|_| not_a_sequence())?;
    // Only the canonical spelling names a point: "demo:01" or "demo:+1" would otherwise
    // mint fork ids that contain a point id no record has.
    if parsed.to_string() != sequence {
        return Err(not_a_sequence());
    }
    Ok((session_id, parsed))
}

/// The id of the `n`th fork of `session_id` at `point_id`: `"{session_id}:fork:{point_id}:{n}"`.
///
/// ```
/// assert_eq!(cuca_events::fork_session_id("demo", "demo:1", 0), "demo:fork:demo:1:0");
/// ```
pub fn fork_session_id(session_id: &str, point_id: &str, n: u64) -> String {
    format!("{session_id}:fork:{point_id}:{n}")
}

/// The parent session and point a fork id names: `("demo", "demo:1")` for
/// `"demo:fork:demo:1:0"`; `None` when `session_id` is not a fork id.
///
/// A fork id is [`fork_session_id`]'s `{parent}:fork:{parent}:{sequence}:{n}`. The parent may
/// itself be a fork and contain `:fork:`, but it stands twice around the one `:fork:` that
/// splits the id, so the split is where the two halves agree.
///
/// ```
/// use cuca_events::fork_parent;
/// assert_eq!(fork_parent("demo:fork:demo:1:0"), Some(("demo", "demo:1")));
/// let nested = "demo:fork:demo:1:0:fork:demo:fork:demo:1:0:3:7";
/// assert_eq!(fork_parent(nested), Some(("demo:fork:demo:1:0", "demo:fork:demo:1:0:3")));
/// assert_eq!(fork_parent("a:fork:b:1:0"), None);
/// assert_eq!(fork_parent("demo"), None);
/// ```
pub fn fork_parent(session_id: &str) -> Option<(&str, &str)> {
    const MARK: &str = ":fork:";
    let (rest, n) = session_id.rsplit_once(':')?;
    n.parse::<u64>().ok()?;
    let (doubled, sequence) = rest.rsplit_once(':')?;
    sequence.parse::<u64>().ok()?;
    let half = doubled.len().checked_sub(MARK.len())? / 2;
    let parent = doubled.get(..half)?;
    let mark = doubled.get(half..half + MARK.len())?;
    let again = doubled.get(half + MARK.len()..)?;
    (!parent.is_empty() && mark == MARK && again == parent)
        .then_some((parent, &rest[half + MARK.len()..]))
}

/// The id of conversation `n` (from 1) of session `base`: `"{base}:conv:{n}"`. A session
/// holds conversations: the first is recorded under `base` itself, each later one (a call
/// that continues none recorded so far) under this id, so every reader that knows sessions
/// reads a conversation as one.
///
/// ```
/// assert_eq!(cuca_events::conversation_session_id("app", 2), "app:conv:2");
/// ```
pub fn conversation_session_id(base: &str, n: u64) -> String {
    format!("{base}:conv:{n}")
}

/// The base session and number a conversation id names: `("app", 2)` for `"app:conv:2"`;
/// `None` for any other id (the base itself, a fork, an id whose number is not canonical).
///
/// ```
/// use cuca_events::conversation_parent;
/// assert_eq!(conversation_parent("app:conv:2"), Some(("app", 2)));
/// assert_eq!(conversation_parent("app"), None);
/// assert_eq!(conversation_parent("app:conv:02"), None);
/// assert_eq!(conversation_parent("app:conv:0"), None);
/// assert_eq!(conversation_parent("app:conv:1:fork:app:conv:1:5:0"), None);
/// ```
pub fn conversation_parent(session_id: &str) -> Option<(&str, u64)> {
    let (base, n) = session_id.rsplit_once(":conv:")?;
    let parsed = n.parse::<u64>().ok()?;
    (!base.is_empty() && parsed > 0 && parsed.to_string() == n).then_some((base, parsed))
}

/// Checks that `point_id` belongs to `session_id` and returns its sequence.
///
/// Every backend's `fork` calls this first, so all of them refuse the same inputs the same way.
pub fn point_in_session(session_id: &str, point_id: &str) -> Result<u64, PluginError> {
    let (point_session, sequence) = parse_point_id(point_id)?;
    if point_session != session_id {
        return Err(PluginError::validation(
            "point_id",
            format!("{point_id:?} is a point of session {point_session:?}, not of {session_id:?}"),
        ));
    }
    Ok(sequence)
}
