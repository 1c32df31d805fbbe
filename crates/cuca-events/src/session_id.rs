//! The rule every store applies to a session id before it stores anything under it.

use crate::error::PluginError;

/// Checks the part of the session-id rule that every store shares, and refuses with
/// [`PluginError::Validation`] (`schema: "session_id"`):
///
/// * an empty id: a point id is `"{session_id}:{sequence}"`, and one with nothing before its
///   `:` names no session, so an empty session could never be forked;
/// * an id holding a control character — C0 (`U+0000`–`U+001F`, so NUL, `\n`, `\r`, `\t` and
///   ESC), DEL (`U+007F`) or C1 (`U+0080`–`U+009F`): session ids are printed in listings,
///   reports and file names, where a newline forges a line and an escape sequence drives the
///   terminal.
///
/// Every store calls it on the ids it appends to and forks, so an id one store takes every
/// store takes. A store may refuse more: `FileBackend` also refuses `/`, `\`, ids made only of
/// dots and ids too long for a file name. The error names the id with Rust's escaping
/// (`"a\u{1b}b"`), never raw.
///
/// ```
/// use cuca_events::{validate_session_id, PluginError};
/// assert!(validate_session_id("demo:fork:demo:1:0").is_ok());
/// assert!(validate_session_id("naïve — ünïcode ✓").is_ok());
/// for bad in ["", "two\nlines", "esc\u{1b}[31m", "del\u{7f}", "c1\u{85}", "nul\0"] {
///     assert!(matches!(validate_session_id(bad), Err(PluginError::Validation { .. })), "{bad:?}");
/// }
/// ```
pub fn validate_session_id(session_id: &str) -> Result<(), PluginError> {
    if session_id.is_empty() {
        return Err(PluginError::validation(
            "session_id",
            "the session id is empty; a point id \"{session_id}:{sequence}\" could not name it",
        ));
    }
    if let Some(control) = session_id.chars().find(|c| c.is_control()) {
        return Err(PluginError::validation(
            "session_id",
            format!(
                "{session_id:?} contains the control character U+{:04X}; session ids are printed and name files, so C0 controls (newline, escape, NUL …), DEL and C1 controls are refused",
                u32::from(control)
            ),
        ));
    }
    Ok(())
}
