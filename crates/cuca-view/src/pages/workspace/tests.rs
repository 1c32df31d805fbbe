//! Unit tests of a turn's files and commands: the diff budget, and a stream's tail clipped
//! from its start.

use cuca_events::{CapturedStream, SessionEvent};
use cuca_workspace::{text_diff, DiffLimits};

use super::spend;

#[test]
fn a_snapshots_diffs_stop_at_its_byte_budget_and_count_the_rest() {
    let new: String = (0..100).map(|i| format!("line {i:03}\n")).collect();
    let mut diff = text_diff(b"", new.as_bytes(), DiffLimits::default());
    assert_eq!(diff.lines.len(), 101);
    // The hunk header (32) and ten lines of 8 bytes plus sign and newline (10 each).
    let budget = std::cell::Cell::new(32 + 10 * 10 + 5);
    spend(&mut diff, &budget);
    assert_eq!(diff.lines.len(), 11);
    assert_eq!(diff.lines_left_out, 90);
    assert_eq!(
        budget.get(),
        0,
        "a cut diff leaves nothing for the next file"
    );
    let mut next = text_diff(b"", b"x\n", DiffLimits::default());
    spend(&mut next, &budget);
    assert!(next.lines.is_empty());
    assert_eq!(next.lines_left_out, 2);
}

#[test]
fn a_commands_stream_is_clipped_from_its_start_and_says_so() {
    let tail = format!("{}the error at the end", "x".repeat(1000));
    let mut event = SessionEvent::ShellCommand {
        command: "make".into(),
        cwd: ".".into(),
        origin: "bash -c".into(),
        exit_status: Some(2),
        duration_ms: 5,
        stdout: CapturedStream::default(),
        stderr: CapturedStream {
            sha256: String::new(),
            bytes: 5_000,
            tail: tail.clone(),
            cut: 5_000 - tail.len() as u64,
        },
    };
    let mut budget = 4 + 100;
    let cut = crate::sessions::clip::clip_event(&mut event, &mut budget);
    let SessionEvent::ShellCommand {
        stderr, command, ..
    } = &event
    else {
        unreachable!("the event keeps its kind")
    };
    assert_eq!(command, "make");
    assert_eq!(stderr.tail.len(), 100);
    assert!(
        stderr.tail.ends_with("the error at the end"),
        "{}",
        stderr.tail
    );
    assert_eq!(cut, tail.len() as u64 - 100);
    assert_eq!(
        stderr.cut,
        5_000 - 100,
        "what the page shows is the record's last 100 bytes"
    );
    assert_eq!(budget, 0);
}
