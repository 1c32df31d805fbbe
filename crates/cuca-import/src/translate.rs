//! What one transcript line becomes: the interface each format's reader implements.

use cuca_events::SessionEvent;
use serde_json::Value;

use crate::report::ImportReport;
use crate::writer::Call;

/// Which session of a transcript a record goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// The session the file is named after.
    Main,
    /// The sub-agent session of the sidechain lines a main transcript holds inline.
    Sidechain,
}

/// One thing a line asks to be written.
#[derive(Debug)]
pub(crate) enum Out {
    /// Something sent to the model (a message, a tool result).
    Input(SessionEvent),
    /// Something the model answered (output, reasoning, a tool call).
    Answer(SessionEvent),
    /// Neither (a system prompt, a model swap).
    Other(SessionEvent),
    /// One line of a call that may span lines (Claude Code).
    CallLine(Call),
    /// A call's usage, written after its records (Codex).
    CallDone(Call),
}

/// [`Out`] with where and when.
#[derive(Debug)]
pub(crate) struct Emit {
    pub(crate) side: Side,
    pub(crate) ts: u64,
    pub(crate) out: Out,
}

/// A transcript format's line reader. `Err` is a line it cannot read, in words.
pub(crate) trait Translate {
    fn line(
        &mut self,
        value: Value,
        report: &mut ImportReport,
        out: &mut Vec<Emit>,
    ) -> Result<(), String>;

    /// The reader's state across lines, kept in the resume marker.
    fn state(&self) -> Value;

    /// Restores [`Translate::state`] from a marker.
    fn restore(&mut self, state: &Value);
}

/// Milliseconds since the epoch of an RFC 3339 timestamp.
pub(crate) fn parse_ts(text: &str) -> Option<u64> {
    let time = humantime::parse_rfc3339_weak(text.trim_end_matches('Z'))
        .ok()
        .or_else(|| humantime::parse_rfc3339(text).ok())?;
    let since = time.duration_since(std::time::UNIX_EPOCH).ok()?;
    u64::try_from(since.as_millis()).ok()
}

pub(crate) fn u64_at(value: &Value, key: &str) -> u64 {
    value.get(key).and_then(Value::as_u64).unwrap_or(0)
}

pub(crate) fn str_at<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}
