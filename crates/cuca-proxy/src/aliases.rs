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
    fn the_same_path_needs_no_alias() {
        assert!(Aliases::workspace("/work", "/work").is_empty());
    }
}
