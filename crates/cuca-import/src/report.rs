//! What an import did: the sessions it wrote and every line it could not read.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// The outcome of one import run.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ImportReport {
    /// Transcript files read.
    pub files: u64,
    /// Every session written to (or found up to date), in the order they were first met.
    pub sessions: Vec<SessionOutcome>,
    /// What could not be read, each with its file and line.
    pub findings: Vec<Finding>,
    /// Lines and blocks read but deliberately not turned into records, counted by their
    /// kind (`"summary"`, `"event_msg:agent_message"`, `"block:redacted_thinking"`);
    /// docs/import.md says why each is left out.
    pub skipped: BTreeMap<String, u64>,
}

impl ImportReport {
    /// True when something could not be imported: any finding but a last line still being
    /// written.
    pub fn failed(&self) -> bool {
        self.findings
            .iter()
            .any(|finding| finding.kind != FindingKind::Incomplete)
    }

    /// Records appended by this run, all sessions together.
    pub fn records(&self) -> u64 {
        self.sessions.iter().map(|s| s.records).sum()
    }

    pub(crate) fn skip(&mut self, what: impl Into<String>) {
        *self.skipped.entry(what.into()).or_default() += 1;
    }
}

/// One session an import wrote to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionOutcome {
    /// The cuca session id.
    pub session: String,
    /// The transcript it was read from.
    pub file: PathBuf,
    /// The session did not exist before this run.
    pub new: bool,
    /// Records this run appended to it (0: it was up to date).
    pub records: u64,
    /// The session it is a sub-agent of, if it is one.
    pub parent: Option<String>,
}

/// Something an import could not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The transcript.
    pub file: PathBuf,
    /// The 1-based line number, when the finding is about one line.
    pub line: Option<u64>,
    /// What kind of problem.
    pub kind: FindingKind,
    /// What was wrong, in words.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file.display(), self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

/// The kinds of [`Finding`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FindingKind {
    /// A line that is not JSON, or lacks a field its kind needs; it was skipped.
    Unreadable,
    /// A line over the length cap; it was skipped.
    TooLong,
    /// The part of the transcript imported before has changed since (rewritten or
    /// truncated): the file was not imported again.
    Changed,
    /// A session with the transcript's id exists but was not written by an import: the file
    /// was not imported.
    Foreign,
    /// The file or its directory could not be read.
    Io,
    /// The last line has no newline and does not parse yet (a transcript being written): it
    /// is left for the next import. Not a failure.
    Incomplete,
}
