//! A restored copy of the workspace read as the workspace it was restored from. A replay or
//! fork run starts its agent in a fresh copy of the recorded workspace, at another path, and
//! agents put their working directory into what they send (Claude Code's system prompt names
//! it and its project directory, `-tmp-work` for `/tmp/work`; Codex's environment context
//! names it): read as sent, every such request would differ from the recording at the path.
//! Each alias rewrites the copy's path to the recorded one in the request the proxy places,
//! compares and records — never in the bytes it forwards, so a live call still tells the
//! model where the agent really is.

use std::borrow::Cow;

/// Paths to read as other paths, longest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Aliases {
    pairs: Vec<(String, String)>,
}

impl Aliases {
    /// `copy` read as `recorded`, in the forms agents write a working directory in: the path
    /// itself, and the path with every character but ASCII letters and digits made `-` (the
    /// name Claude Code gives a project's directory under `~/.claude/projects`).
    pub fn workspace(copy: &str, recorded: &str) -> Aliases {
        let mut pairs = vec![
            (copy.to_owned(), recorded.to_owned()),
            (project_name(copy), project_name(recorded)),
        ];
        pairs.retain(|(from, to)| !from.is_empty() && from != to);
        pairs.dedup();
        pairs.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
        Aliases { pairs }
    }

    /// `body` with every alias applied; borrowed as it is when none occurs (or it is not
    /// UTF-8, which no JSON request is).
    pub fn apply<'a>(&self, body: &'a [u8]) -> Cow<'a, [u8]> {
        let Ok(text) = std::str::from_utf8(body) else {
            return Cow::Borrowed(body);
        };
        if !self
            .pairs
            .iter()
            .any(|(from, _)| text.contains(from.as_str()))
        {
            return Cow::Borrowed(body);
        }
        let mut rewritten = text.to_owned();
        for (from, to) in &self.pairs {
            if rewritten.contains(from.as_str()) {
                rewritten = rewritten.replace(from.as_str(), to);
            }
        }
        Cow::Owned(rewritten.into_bytes())
    }

    /// The other way round: what a recorded answer names by the recorded workspace's path,
    /// read as the copy's, so that a replayed tool call acts on the copy the agent runs in
    /// (Claude Code's file tools take absolute paths).
    pub fn reversed(&self) -> Aliases {
        let mut pairs: Vec<(String, String)> = self
            .pairs
            .iter()
            .map(|(from, to)| (to.clone(), from.clone()))
            .filter(|(from, _)| !from.is_empty())
            .collect();
        pairs.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
        Aliases { pairs }
    }

    /// `text` with every alias applied; borrowed as it is when none occurs.
    pub(crate) fn apply_str<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.apply(text.as_bytes()) {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            // `apply` rewrites UTF-8 into UTF-8 (its pairs are strings).
            Cow::Owned(bytes) => Cow::Owned(String::from_utf8(bytes).unwrap_or_default()),
        }
    }

    /// Where `text` holds an aliased path, in order, with what each is read as: the longest
    /// alias wins where two start at one place, and no two overlap.
    pub(crate) fn find<'s>(&'s self, text: &str) -> Vec<(std::ops::Range<usize>, &'s str)> {
        let mut found: Vec<(std::ops::Range<usize>, &str)> = Vec::new();
        // Longest first, so a longer alias claims its bytes before a shorter one inside it.
        for (from, to) in &self.pairs {
            for (at, _) in text.match_indices(from.as_str()) {
                let range = at..at + from.len();
                if !found
                    .iter()
                    .any(|(r, _)| r.start < range.end && range.start < r.end)
                {
                    found.push((range, to.as_str()));
                }
            }
        }
        found.sort_by_key(|(range, _)| range.start);
        found
    }

    /// Whether there is nothing to rewrite.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }
}

/// `path` with every character but ASCII letters and digits made `-`.
fn project_name(path: &str) -> String {
    path.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_is_read_as_the_recorded_workspace_in_both_forms_and_nothing_else_changes() {
        let aliases = Aliases::workspace("/tmp/cuca-run-agent-7-0", "/tmp/.tmpAb/work");
        let body = br#"{"system":"cwd /tmp/cuca-run-agent-7-0, memory at ~/.claude/projects/-tmp-cuca-run-agent-7-0/memory/","x":"/tmp/other"}"#;
        assert_eq!(
            aliases.apply(body).as_ref(),
            br#"{"system":"cwd /tmp/.tmpAb/work, memory at ~/.claude/projects/-tmp--tmpAb-work/memory/","x":"/tmp/other"}"#
        );
        let untouched = br#"{"messages":[]}"#;
        assert!(matches!(aliases.apply(untouched), Cow::Borrowed(_)));
        assert!(matches!(
            aliases.apply(b"\xff/tmp/cuca-run-agent-7-0"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn a_replayed_answer_names_the_copy_where_the_recording_named_the_workspace() {
        let answers = Aliases::workspace("/tmp/cuca-run-s-1-0", "/home/me/app").reversed();
        let chunk = br#"data: {"input":{"file_path":"/home/me/app/src/main.rs"}}"#;
        assert_eq!(
            answers.apply(chunk).as_ref(),
            br#"data: {"input":{"file_path":"/tmp/cuca-run-s-1-0/src/main.rs"}}"#
        );
    }

    #[test]
    fn the_same_path_needs_no_alias() {
        assert!(Aliases::workspace("/work", "/work").is_empty());
    }
}
