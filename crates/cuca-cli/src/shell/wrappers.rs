//! The commands agents wrap before they hand them to a shell, unwrapped so that the record
//! holds the command the model asked for.
//!
//! Claude Code's Bash tool runs `bash -c 'source SNAPSHOT … && eval 'CMD' < /dev/null && pwd
//! -P >| /tmp/claude-…-cwd'` (2.1.x): its shell snapshot sourced, then the model's command
//! through `eval`, then the directory it ended in written down for the next call. Codex's
//! shell tool, once it has a shell snapshot (0.171.0), runs a script that saves its own
//! variables, sources the snapshot, restores them and ends in `exec '/bin/bash' -c 'CMD'`.
//! The record keeps CMD, with the origin naming the tool.

/// What follows the `eval` word of Claude Code's wrapper.
const CLAUDE_CODE_TAIL: &str = " < /dev/null && pwd -P >| ";

/// The origin of a command unwrapped from Claude Code's Bash tool.
pub(crate) const CLAUDE_CODE_BASH: &str = "Claude Code Bash tool";

/// The origin of a command unwrapped from Codex's shell tool.
pub(crate) const CODEX_SHELL: &str = "Codex shell tool";

/// The command Codex's shell tool wrapped in `text` (its last line, `exec SHELL -c CMD`), or
/// `None` when `text` is not its wrapper.
pub(crate) fn codex_command(text: &str) -> Option<String> {
    if !text.starts_with("__CODEX_SNAPSHOT_") {
        return None;
    }
    let last = text.trim_end().lines().last()?.strip_prefix("exec ")?;
    let (_shell, rest) = shell_word(last)?;
    let rest = rest.trim_start().strip_prefix("-c ")?;
    let (command, rest) = shell_word(rest.trim_start())?;
    rest.trim().is_empty().then_some(command)
}

/// The command Claude Code's Bash tool wrapped in `text`, or `None` when `text` is not its
/// wrapper.
pub(crate) fn claude_code_command(text: &str) -> Option<String> {
    if !text.starts_with("source ") {
        return None;
    }
    let at = text.find(" && eval ")? + " && eval ".len();
    let (word, rest) = shell_word(&text[at..])?;
    rest.starts_with(CLAUDE_CODE_TAIL).then_some(word)
}

/// The first shell word of `text` as the shell reads it (single and double quotes, backslash
/// escapes), and what follows it; `None` when a quote is left open.
fn shell_word(text: &str) -> Option<(String, &str)> {
    let mut word = String::new();
    let mut chars = text.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => return Some((word, &text[at..])),
            '\'' => loop {
                match chars.next()?.1 {
                    '\'' => break,
                    inner => word.push(inner),
                }
            },
            '"' => loop {
                match chars.next()?.1 {
                    '"' => break,
                    '\\' => {
                        let escaped = chars.next()?.1;
                        if !matches!(escaped, '"' | '\\' | '$' | '`' | '\n') {
                            word.push('\\');
                        }
                        word.push(escaped);
                    }
                    inner => word.push(inner),
                }
            },
            '\\' => word.push(chars.next()?.1),
            other => word.push(other),
        }
    }
    Some((word, ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Claude Code 2.1.332's wrapper as the shim was handed it.
    fn wrapped(quoted: &str) -> String {
        format!(
            "source /h/.claude/shell-snapshots/snapshot-bash-1-x.sh 2>/dev/null || true && \\builtin shopt -u extglob 2>/dev/null || true && eval {quoted} < /dev/null && pwd -P >| /tmp/claude-ba71-cwd"
        )
    }

    #[test]
    fn the_model_s_command_is_taken_out_of_claude_code_s_wrapper() {
        assert_eq!(
            claude_code_command(&wrapped("'echo cuca-tool-ok'")).as_deref(),
            Some("echo cuca-tool-ok")
        );
        assert_eq!(
            claude_code_command(&wrapped(r#"'echo "a ${X:-b}"; echo it'\''s >&2; exit 3'"#))
                .as_deref(),
            Some(r#"echo "a ${X:-b}"; echo it's >&2; exit 3"#)
        );
        assert_eq!(
            claude_code_command(&wrapped(r#""say \"hi\" \$HOME""#)).as_deref(),
            Some(r#"say "hi" $HOME"#)
        );
    }

    #[test]
    fn the_model_s_command_is_taken_out_of_codex_s_wrapper() {
        let wrapped = "__CODEX_SNAPSHOT_OVERRIDE_SET_0=\"${X+x}\"\nif . '/h/s.sh' >/dev/null 2>&1; then :; fi\n\nexec '/bin/bash' -c 'cat notes.txt; echo it'\\''s >&2; exit 3'\n";
        assert_eq!(
            codex_command(wrapped).as_deref(),
            Some("cat notes.txt; echo it's >&2; exit 3")
        );
        assert_eq!(codex_command("exec '/bin/bash' -c 'ls'"), None);
    }

    #[test]
    fn other_commands_are_left_as_they_are() {
        assert_eq!(
            claude_code_command("echo cuca && eval 'x' < /dev/null"),
            None
        );
        assert_eq!(claude_code_command(&wrapped("'open quote")), None);
        assert_eq!(
            claude_code_command("source x && eval 'ls' && pwd -P >| /tmp/c"),
            None
        );
    }
}
