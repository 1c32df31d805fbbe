//! The workspace's records in a replay's words: the files a turn's call saw changed, and the
//! shell commands run before it (`cuca replay`).

use cuca::SessionEvent;

use crate::term::line;

/// Changed files one snapshot lists at most: the first snapshot of a big workspace may name
/// thousands; `cuca show STORE SESSION --json` prints them all.
const MAX_LISTED_FILES: usize = 50;

/// Lines of a failed command's stderr shown: where a compiler or a test runner says what
/// went wrong, without its whole output.
const STDERR_LINES: usize = 5;

/// `event` (a `WorkspaceSnapshot` or a `ShellCommand`) as lines under its turn, each ending
/// in a newline:
///
/// ```text
///   workspace: 2 files changed (snapshot sha256:…)
///     modified notes.txt +1 -0
///     deleted logo.bin (binary)
///   shell: cargo test --quiet (exit status 101, 1300 ms, in ., bash -c)
///     stderr: error[E0425]: cannot find value `two` in this scope
/// ```
pub(crate) fn words(event: &SessionEvent) -> String {
    match event {
        SessionEvent::WorkspaceSnapshot {
            snapshot,
            changes,
            skipped,
        } => {
            let mut out = format!(
                "  workspace: {} (snapshot {})\n",
                match changes.len() {
                    0 => "no file changed".to_owned(),
                    1 => "1 file changed".to_owned(),
                    n => format!("{n} files changed"),
                },
                line(snapshot)
            );
            for change in changes.iter().take(MAX_LISTED_FILES) {
                let counts = if change.binary {
                    "(binary)".to_owned()
                } else {
                    format!("+{} -{}", change.added_lines, change.removed_lines)
                };
                out.push_str(&format!(
                    "    {} {} {counts}\n",
                    change.kind.word(),
                    line(&change.path)
                ));
            }
            if changes.len() > MAX_LISTED_FILES {
                out.push_str(&format!(
                    "    … and {} more\n",
                    changes.len() - MAX_LISTED_FILES
                ));
            }
            for why in skipped {
                out.push_str(&format!("    left out: {}\n", line(why)));
            }
            out
        }
        SessionEvent::ShellCommand {
            command,
            cwd,
            origin,
            exit_status,
            duration_ms,
            stderr,
            ..
        } => {
            let status = match exit_status {
                Some(code) => format!("exit status {code}"),
                None => "did not run".to_owned(),
            };
            let origin = if origin.is_empty() {
                String::new()
            } else {
                format!(", {}", line(origin))
            };
            let mut out = format!(
                "  shell: {} ({status}, {duration_ms} ms, in {}{origin})\n",
                line(command),
                line(cwd)
            );
            if *exit_status != Some(0) && !stderr.tail.trim().is_empty() {
                let lines: Vec<&str> = stderr.tail.trim_end().lines().collect();
                let cut = if stderr.cut > 0 {
                    format!(" (the last {} bytes recorded)", stderr.bytes - stderr.cut)
                } else {
                    String::new()
                };
                for (i, text) in lines.iter().take(STDERR_LINES).enumerate() {
                    let label = if i == 0 {
                        format!("stderr{cut}: ")
                    } else {
                        "        ".to_owned()
                    };
                    out.push_str(&format!("    {label}{}\n", line(text)));
                }
                if lines.len() > STDERR_LINES {
                    out.push_str(&format!(
                        "        … {} more lines\n",
                        lines.len() - STDERR_LINES
                    ));
                }
            }
            out
        }
        _ => String::new(),
    }
}

/// `event`'s fields as one JSON object (the record's own, without the variant's name, which
/// the key it is listed under says).
pub(crate) fn json(event: &SessionEvent) -> serde_json::Value {
    match serde_json::to_value(event) {
        Ok(serde_json::Value::Object(mut map)) if map.len() == 1 => map
            .values_mut()
            .next()
            .map(std::mem::take)
            .unwrap_or_default(),
        Ok(other) => other,
        Err(_) => serde_json::Value::Null,
    }
}
