//! Unit tests of the line reader, the usage mapping and the session ids of transcripts.

use std::io::Cursor;
use std::path::Path;

use serde_json::json;

use crate::claude_code::{sent_of, usage_of};
use crate::lines::{Line, Lines};
use crate::report::ImportReport;
use crate::usage::TranscriptUsage;
use crate::{transcripts, usage_records, Sent, Source};
use cuca_events::{SessionEvent, TokenDetail};

#[test]
fn lines_are_capped_counted_and_fingerprinted_as_read() {
    let text = b"one\n0123456789abcdef\nthree\ntail";
    let mut lines = Lines::new(Cursor::new(&text[..]), 8);
    let mut buf = Vec::new();
    assert_eq!(lines.next_line(&mut buf).unwrap(), Some(Line::Complete));
    assert_eq!(
        (buf.as_slice(), lines.offset, lines.next_line_no),
        (&b"one"[..], 4, 2)
    );
    assert_eq!(
        lines.next_line(&mut buf).unwrap(),
        Some(Line::TooLong { len: 16 })
    );
    assert_eq!(lines.offset, 21);
    assert_eq!(lines.next_line(&mut buf).unwrap(), Some(Line::Complete));
    assert_eq!(buf, b"three");
    // The tail is not counted until accepted.
    assert_eq!(lines.next_line(&mut buf).unwrap(), Some(Line::Unterminated));
    assert_eq!(lines.offset, 27);
    let before_tail = lines.digest();
    lines.accept_unterminated(&buf.clone());
    assert_eq!(lines.offset, 31);
    assert_eq!(lines.next_line(&mut buf).unwrap(), None);

    // Skipping the part read before gives the same fingerprint as reading it.
    let mut again = Lines::new(Cursor::new(&text[..]), 8);
    assert!(again.skip(27, 3).unwrap());
    assert_eq!(again.digest(), before_tail);
    assert_eq!(again.next_line_no, 4);
    let mut short = Lines::new(Cursor::new(&b"ab"[..]), 8);
    assert!(!short.skip(27, 3).unwrap());
}

#[test]
fn cache_writes_split_into_five_minutes_and_one_hour_keeping_the_total() {
    let split = json!({"input_tokens": 3, "output_tokens": 9, "cache_read_input_tokens": 70,
        "cache_creation_input_tokens": 500,
        "cache_creation": {"ephemeral_5m_input_tokens": 200, "ephemeral_1h_input_tokens": 300}});
    let usage = usage_of(&split);
    assert_eq!(
        usage,
        TranscriptUsage {
            input: 3,
            output: 9,
            cache_read: 70,
            cache_write_5m: 200,
            cache_write_1h: 300,
            reasoning: 0
        }
    );
    assert_eq!(usage.total(), 3 + 9 + 70 + 500);
    // No split: every write was a 5-minute one. No total: the split's sum is.
    let unsplit = usage_of(&json!({"cache_creation_input_tokens": 640}));
    assert_eq!((unsplit.cache_write_5m, unsplit.cache_write_1h), (640, 0));
    let no_total = usage_of(
        &json!({"cache_creation": {"ephemeral_5m_input_tokens": 5, "ephemeral_1h_input_tokens": 7}}),
    );
    assert_eq!((no_total.cache_write_5m, no_total.cache_write_1h), (5, 7));
    // The detail keeps every kind the usage object wrote, the split included; the folded
    // pair after the latency sums the prompt.
    assert_eq!(
        usage_records(&usage, &sent_of(&split), 40),
        [
            SessionEvent::TokenDetail(TokenDetail {
                input: Some(3),
                output: Some(9),
                cache_read: Some(70),
                cache_write: Some(500),
                cache_write_5m: Some(200),
                cache_write_1h: Some(300),
                ..TokenDetail::default()
            }),
            SessionEvent::Latency { duration_ms: 40 },
            SessionEvent::TokenUsage {
                prompt_tokens: 573,
                completion_tokens: 9
            }
        ]
    );
    // Without the split the detail has no 5-minute or 1-hour count: none was written.
    let sent = sent_of(&json!({"cache_creation_input_tokens": 640}));
    let detail = sent.detail(&unsplit);
    assert_eq!(
        (detail.cache_write, detail.cache_write_5m, detail.input),
        (Some(640), None, None)
    );
}

#[test]
fn codex_input_is_the_prompt_and_a_call_counted_elsewhere_says_zero() {
    let sent = Sent {
        input_includes_cache_read: true,
        input: true,
        output: true,
        cache_read: true,
        reasoning: true,
        ..Sent::default()
    };
    let usage = TranscriptUsage {
        input: 100,
        cache_read: 900,
        output: 50,
        reasoning: 20,
        ..TranscriptUsage::default()
    };
    assert_eq!(
        sent.detail(&usage),
        TokenDetail {
            prompt: Some(1_000),
            output: Some(50),
            cache_read: Some(900),
            reasoning: Some(20),
            ..TokenDetail::default()
        }
    );
    let zero = sent.detail(&TranscriptUsage::default());
    assert_eq!((zero.prompt, zero.cache_read), (Some(0), Some(0)));
    // A usage object with no count at all leaves no detail.
    assert_eq!(
        usage_records(&TranscriptUsage::default(), &Sent::default(), 0).len(),
        2
    );
}

#[test]
fn transcript_files_name_their_sessions_parents_first() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let sub = root.join("p/S1/subagents");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("agent-a1.jsonl"), "").unwrap();
    std::fs::write(root.join("p/S1.jsonl"), "").unwrap();
    std::fs::write(root.join("p/notes.txt"), "").unwrap();
    let mut report = ImportReport::default();
    let found = transcripts(Source::ClaudeCode, root, &mut report).unwrap();
    let named: Vec<(&str, Option<&str>)> = found
        .iter()
        .map(|t| (t.session.as_str(), t.parent.as_deref()))
        .collect();
    assert_eq!(
        named,
        [
            ("claude-code-S1", None),
            ("claude-code-S1-agent-a1", Some("claude-code-S1"))
        ]
    );

    let day = root.join("2026/03/09");
    std::fs::create_dir_all(&day).unwrap();
    let rollout =
        day.join("rollout-2026-03-09T14-02-11-0199a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a44.jsonl");
    std::fs::write(&rollout, "").unwrap();
    let found = transcripts(Source::Codex, &rollout, &mut report).unwrap();
    assert_eq!(
        found[0].session,
        "codex-0199a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a44"
    );
    assert!(transcripts(Source::Codex, Path::new("/no/such/dir"), &mut report).is_err());
}
