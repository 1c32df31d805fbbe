//! What a turn did outside the model: the files its workspace snapshot says changed (each with
//! its diff behind a `<details>`) and the shell commands recorded in it.

use cuca_events::{CapturedStream, FileChange, SessionEvent};
use cuca_workspace::{DiffLine, FileDiff, ObjectId};
use maud::{html, Markup};

use super::{anchors, duration_words, plural, thousands};
use crate::diffs::{Diffs, MAX_DIFFED_FILES, MAX_DIFF_BYTES, MAX_LISTED_CHANGES};
use crate::sessions::RecordView;

/// Where a snapshot's diffs come from: the store, and the tree its changes are counted
/// against (the session's snapshot before it; `None` for the first).
pub(crate) struct DiffSource<'a> {
    pub(crate) diffs: &'a Diffs,
    pub(crate) before: Option<ObjectId>,
}

/// The turn head's words for what happened outside the model before the call: files changed,
/// commands run, how many failed. Empty when nothing was recorded.
pub(crate) fn turn_summary(records: &[RecordView]) -> Option<String> {
    let (mut files, mut commands, mut failed, mut snapshots) = (0u64, 0u64, 0u64, 0u64);
    for record in records {
        match &record.event {
            SessionEvent::WorkspaceSnapshot { changes, .. } => {
                snapshots += 1;
                files += changes.len() as u64;
            }
            SessionEvent::ShellCommand { exit_status, .. } => {
                commands += 1;
                failed += u64::from(*exit_status != Some(0));
            }
            _ => {}
        }
    }
    if snapshots == 0 && commands == 0 {
        return None;
    }
    let mut words = Vec::new();
    if snapshots > 0 {
        words.push(if files == 0 {
            "no file changed".to_owned()
        } else {
            plural(files, "file changed", "files changed")
        });
    }
    if commands > 0 {
        let mut run = plural(commands, "command", "commands");
        if failed > 0 {
            run.push_str(&format!(", {failed} failed"));
        }
        words.push(run);
    }
    Some(words.join(" · "))
}

/// A `WorkspaceSnapshot` record: the files changed since the previous snapshot, each with
/// its counts and, when `source` is given, its diff on demand.
pub(crate) fn snapshot_box(record: &RecordView, source: Option<&DiffSource<'_>>) -> Markup {
    let SessionEvent::WorkspaceSnapshot {
        snapshot,
        changes,
        skipped,
    } = &record.event
    else {
        return html! {};
    };
    let tree = ObjectId::parse(snapshot).ok();
    let unavailable = source.and_then(|s| match s.diffs {
        Diffs::Unavailable(why) => Some(why.as_str()),
        Diffs::Store(..) => None,
    });
    let (added, removed) = changes.iter().fold((0u64, 0u64), |(a, r), c| {
        (a + c.added_lines, r + c.removed_lines)
    });
    let group = std::slice::from_ref(record);
    let budget = std::cell::Cell::new(MAX_DIFF_BYTES);
    html! {
        div.rec.workspace-snapshot { (anchors(group))
            div.who { "workspace before this call · #" (record.sequence) " · "
                @if changes.is_empty() { "no file changed" }
                @else { (plural(changes.len() as u64, "file changed", "files changed"))
                    " " span.added { "+" (thousands(added)) } " " span.removed { "−" (thousands(removed)) } }
                @if source.is_some_and(|s| s.before.is_none()) {
                    @if changes.is_empty() { " (the session's first snapshot)" }
                    @else { " (counted against a snapshot this session does not hold)" }
                } }
            div.muted { "snapshot " code.snapshot-id { (snapshot) } }
            @if let Some(why) = unavailable { p.muted.diff-unavailable { "Diffs are not shown: " (why) "." } }
            @if !changes.is_empty() {
                ul.file-changes {
                    @for (i, change) in changes.iter().take(MAX_LISTED_CHANGES).enumerate() {
                        (change_item(change, i, tree.as_ref(), source.filter(|_| unavailable.is_none()), &budget))
                    }
                }
                @if changes.len() > MAX_LISTED_CHANGES {
                    p.muted.changes-left-out { "… and " (plural((changes.len() - MAX_LISTED_CHANGES) as u64, "more file", "more files"))
                        " (" code { "cuca show DIR SESSION --json" } " lists them all)." }
                }
            }
            @if !skipped.is_empty() {
                details.skipped { summary { (plural(skipped.len() as u64, "file", "files")) " left out of the snapshot" }
                    ul { @for why in skipped { li { (why) } } } }
            }
        }
    }
}

/// One changed file: its path and counts, and its diff behind a `<details>` while the turn's
/// diff budget lasts.
fn change_item(
    change: &FileChange,
    i: usize,
    tree: Option<&ObjectId>,
    source: Option<&DiffSource<'_>>,
    budget: &std::cell::Cell<usize>,
) -> Markup {
    let head = html! {
        code.path { (change.path) }
        " " span.change-kind { (change.kind.word()) }
        @if change.binary { " " span.binary { "binary" } }
        @else { " " span.added { "+" (thousands(change.added_lines)) } " " span.removed { "−" (thousands(change.removed_lines)) } }
    };
    let kind = change.kind.word();
    let Some(source) = source.filter(|_| !change.binary) else {
        return html! { li.file-change data-kind=(kind) { (head) } };
    };
    if i >= MAX_DIFFED_FILES || budget.get() == 0 {
        return html! { li.file-change data-kind=(kind) { (head)
        span.muted.diff-not-shown { " · diff not shown (a page shows the diffs of the first " (MAX_DIFFED_FILES)
            " files of a snapshot, " (MAX_DIFF_BYTES / 1024) " KiB of them at most)" } } };
    }
    let (old, new) = match change.kind {
        cuca_events::FileChangeKind::Added => (None, tree),
        cuca_events::FileChangeKind::Deleted => (source.before.as_ref(), None),
        _ => (source.before.as_ref(), tree),
    };
    // A change counted against a snapshot the session does not hold (the recorder's
    // previous one was another session's) has no old side to read: the record does not name
    // the tree it was counted against. An added file's old side is empty whatever it was.
    let mut diff = if old.is_none() && change.kind != cuca_events::FileChangeKind::Added {
        Err("the snapshot this change was counted against is not in this session, and the record does not name it".to_owned())
    } else {
        source.diffs.diff(old, new, &change.path)
    };
    if let Ok(FileDiff::Text(text)) = &mut diff {
        spend(text, budget);
    }
    html! {
        li.file-change data-kind=(kind) {
            details.diff {
                summary { (head) }
                @match &diff {
                    Ok(FileDiff::Text(text)) => {
                        pre.diff { @for line in &text.lines { (diff_line(line)) } }
                        @if text.coarse { p.muted { "The changed part is too long to align line by line: shown as removed, then added." } }
                        @if text.lines_left_out > 0 { p.muted.diff-cut { "… " (plural(text.lines_left_out as u64, "more line", "more lines")) " of the diff not shown." } }
                    }
                    Ok(FileDiff::Binary { old_bytes, new_bytes }) => {
                        p.muted { "binary: " (plural(*old_bytes, "byte", "bytes")) " → " (plural(*new_bytes, "byte", "bytes")) }
                    }
                    Err(why) => { p.muted.diff-unavailable { "The diff cannot be read: " (why) } }
                }
            }
        }
    }
}

/// Keeps the lines of `text` that fit what is left of the snapshot's `budget`, spending it;
/// the rest are counted in its `lines_left_out`.
fn spend(text: &mut cuca_workspace::TextDiff, budget: &std::cell::Cell<usize>) {
    let mut left = budget.get();
    let mut kept = 0;
    for line in &text.lines {
        // A line's text and its sign and newline; a hunk header is some 30 bytes.
        let bytes = match line {
            DiffLine::Context(t) | DiffLine::Removed(t) | DiffLine::Added(t) => t.len() + 2,
            DiffLine::Hunk { .. } => 32,
        };
        if bytes > left {
            left = 0;
            break;
        }
        left -= bytes;
        kept += 1;
    }
    text.lines_left_out += text.lines.len() - kept;
    text.lines.truncate(kept);
    budget.set(left);
}

fn diff_line(line: &DiffLine) -> Markup {
    let class = match line {
        DiffLine::Hunk { .. } => "hunk",
        DiffLine::Context(_) => "ctx",
        DiffLine::Removed(_) => "del",
        DiffLine::Added(_) => "add",
    };
    html! { span class=(class) { (line.to_string()) } "\n" }
}

/// A `ShellCommand` record: the command line, how it ended, where it ran, how long it took,
/// and its streams' recorded tails (stderr open when it failed).
pub(crate) fn command_box(record: &RecordView) -> Markup {
    let SessionEvent::ShellCommand {
        command,
        cwd,
        origin,
        exit_status,
        duration_ms,
        stdout,
        stderr,
    } = &record.event
    else {
        return html! {};
    };
    let failed = *exit_status != Some(0);
    let group = std::slice::from_ref(record);
    html! {
        div.rec.shell-command data-exit=(exit_status.map_or("none".to_owned(), |s| s.to_string())) { (anchors(group))
            div.who { "shell command · #" (record.sequence) }
            div.command-meta {
                span class=(if failed { "exit-status error" } else { "exit-status status-clean" }) {
                    @match exit_status { Some(code) => { "exit " (code) } None => { "did not run" } } }
                " · " span.duration { (duration_words(*duration_ms)) }
                " · in " code.cwd { (cwd) }
                @if !origin.is_empty() { " · " span.muted.origin { (origin) } } }
            pre.command { "$ " (command) }
            (stream("stdout", stdout, false))
            (stream("stderr", stderr, failed))
        }
    }
}

/// One recorded stream: its tail, and how much of it the record left out.
fn stream(name: &str, stream: &CapturedStream, open: bool) -> Markup {
    if stream.bytes == 0 {
        return html! {};
    }
    html! {
        details class=(format!("stream {name}")) open[open] {
            summary { (name) " · " (plural(stream.bytes, "byte", "bytes"))
                @if stream.cut > 0 { " (the last " (plural(stream.bytes - stream.cut, "byte", "bytes")) " shown)" } }
            pre { @if stream.cut > 0 { "…" } (stream.tail) }
        }
    }
}

#[cfg(test)]
mod tests;
