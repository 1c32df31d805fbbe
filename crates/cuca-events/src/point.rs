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
