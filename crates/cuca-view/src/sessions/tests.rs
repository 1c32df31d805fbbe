//! The session pages' reads: segmentation, early stop, fork parents.

use super::*;
use cuca_events::ReadMark;
use cuca_testkit::{append_all, demo_turn, record};

fn session_of_turns(backend: &FileBackend, id: &str, turns: u64) {
    let mut records = Vec::new();
    for turn in 0..turns {
        records.extend(demo_turn(id, turn * 7));
    }
    append_all(backend, &records);
}

#[test]
fn a_page_reads_only_its_turns_and_one_record_more() {
    // A 1,000,000-record session opens with the first turns visible and never loads the
    // whole trajectory into the page. What proves it is the count the backend handed over.
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    session_of_turns(&backend, "long", 500);
    let page = page(&backend, "long", 0, TURNS_PER_PAGE).unwrap();
    assert_eq!(page.turns.len(), TURNS_PER_PAGE);
    assert!(page.more);
    assert_eq!(page.records_read, TURNS_PER_PAGE as u64 * 7 + 1);
    assert_eq!(page.turns[0].records.len(), 7);
    assert!(page.turns.iter().all(|turn| turn.complete));
    assert_eq!(page.last_sequence(), Some(TURNS_PER_PAGE as u64 * 7 - 1));
}

#[test]
fn a_later_page_starts_at_its_turn_and_the_last_page_has_no_more() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    session_of_turns(&backend, "s", 3);
    // Seed 001: "records after the last pair form a final turn" — unfinished here.
    append_all(
        &backend,
        &[record(
            "s",
            21,
            SessionEvent::Output {
                text: "still streaming".into(),
            },
        )],
    );
    let page = page(&backend, "s", 2, 5).unwrap();
    assert!(!page.more);
    assert_eq!(
        page.turns.iter().map(|t| t.turn_idx).collect::<Vec<_>>(),
        vec![2, 3]
    );
    assert!(page.turns[0].complete);
    assert!(!page.turns[1].complete);
    assert_eq!(page.turns[1].records[0].sequence, 21);
}

#[test]
fn turn_of_finds_the_turn_of_a_point_and_none_for_a_missing_one() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    session_of_turns(&backend, "s", 4);
    assert_eq!(turn_of(&backend, "s", 0).unwrap(), Some(0));
    assert_eq!(turn_of(&backend, "s", 6).unwrap(), Some(0));
    assert_eq!(turn_of(&backend, "s", 7).unwrap(), Some(1));
    assert_eq!(turn_of(&backend, "s", 27).unwrap(), Some(3));
    assert_eq!(turn_of(&backend, "s", 28).unwrap(), None);
}

#[test]
fn records_after_returns_only_newer_records_in_bounded_batches() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    session_of_turns(&backend, "s", 200);
    let newer = records_after(&backend, "s", Some(1395), &ReadMark::START).unwrap();
    assert_eq!(
        newer
            .records
            .iter()
            .map(|r| r.record.sequence)
            .collect::<Vec<_>>(),
        vec![1396, 1397, 1398, 1399]
    );
    assert!(!newer.full);
    let first = records_after(&backend, "s", None, &ReadMark::START).unwrap();
    assert_eq!(first.records.len(), MAX_LIVE_BATCH);
    assert!(first.full);
    assert_eq!(first.records[0].record.sequence, 0);
}

#[test]
fn a_live_poll_from_a_mark_reads_only_what_was_appended_since() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    session_of_turns(&backend, "s", 200);
    let first = records_after(&backend, "s", Some(1399), &ReadMark::START).unwrap();
    assert_eq!(
        first.records_read, 1400,
        "without a mark the poll reads it all"
    );
    assert!(first.records.is_empty());
    for sequence in 1400..1403 {
        backend
            .append(cuca_testkit::record(
                "s",
                sequence,
                SessionEvent::Output { text: "new".into() },
            ))
            .unwrap();
    }
    let next = records_after(&backend, "s", Some(1399), &first.mark).unwrap();
    assert_eq!(next.records_read, 3);
    assert_eq!(
        next.records
            .iter()
            .map(|r| r.record.sequence)
            .collect::<Vec<_>>(),
        vec![1400, 1401, 1402]
    );
    // A mark into a file replaced since is not trusted: the read starts over.
    let copy = tempfile::tempdir().unwrap();
    let other = FileBackend::new(copy.path()).unwrap();
    session_of_turns(&other, "s", 300);
    drop(other);
    let path = backend.session_path("s").unwrap();
    backend.close("s");
    // Copied beside it first, so the copy is a file of its own (another inode), then moved over.
    let beside = path.with_extension("copy");
    std::fs::copy(copy.path().join(path.file_name().unwrap()), &beside).unwrap();
    std::fs::rename(&beside, &path).unwrap();
    let replaced = records_after(&backend, "s", Some(1399), &next.mark).unwrap();
    assert_eq!(replaced.records_read, 1400 + MAX_LIVE_BATCH as u64);
    assert!(replaced.full);
    assert_eq!(replaced.records[0].record.sequence, 1400);
}

#[test]
fn a_live_answer_is_bounded_in_bytes_and_clips_a_record_over_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let big = "x".repeat(MAX_LIVE_RECORD_BYTES * 3);
    let small = "y".repeat(MAX_LIVE_RECORD_BYTES / 2);
    let mut texts = vec![&big];
    texts.extend([&small; 8]);
    texts.push(&big);
    for (sequence, text) in texts.iter().enumerate() {
        backend
            .append(cuca_testkit::record(
                "b",
                sequence as u64,
                SessionEvent::Output {
                    text: (*text).clone(),
                },
            ))
            .unwrap();
    }
    let first = records_after(&backend, "b", None, &ReadMark::START).unwrap();
    // The big record clipped to its share, then small ones until the budget is spent.
    assert_eq!(
        first.records[0].clipped_bytes,
        (MAX_LIVE_RECORD_BYTES * 2) as u64
    );
    let n_small = (MAX_LIVE_BYTES - MAX_LIVE_RECORD_BYTES) / (MAX_LIVE_RECORD_BYTES / 2);
    assert_eq!(first.records.len(), 1 + n_small);
    assert!(first.full);
    assert!(first.text_bytes <= (MAX_LIVE_BYTES + MAX_LIVE_RECORD_BYTES) as u64);
    let last = first.records.last().unwrap().record.sequence;
    let rest = records_after(&backend, "b", Some(last), &first.mark).unwrap();
    assert_eq!(rest.records[0].record.sequence, last + 1);
    assert_eq!(rest.records.len(), texts.len() - first.records.len());
    assert!(!rest.full);
    assert_eq!(
        rest.records.last().unwrap().clipped_bytes,
        (MAX_LIVE_RECORD_BYTES * 2) as u64
    );
}

#[test]
fn parent_of_follows_nested_fork_ids_one_level_up() {
    let child = "demo:fork:demo:1:0";
    let grandchild = format!("{child}:fork:{child}:3:2");
    assert_eq!(
        parent_of(&grandchild),
        Some((child.to_owned(), format!("{child}:3")))
    );
    assert_eq!(
        parent_of(child),
        Some(("demo".to_owned(), "demo:1".to_owned()))
    );
    // Not the shape a fork id has: no parent, rather than a wrong one.
    assert_eq!(parent_of("demo:fork:demo:x:0"), None);
    assert_eq!(parent_of("demo:fork:"), None);
    assert_eq!(parent_of(":fork::1:0"), None);
}

#[test]
fn list_shows_every_session_most_recent_first_with_its_status() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    session_of_turns(&backend, "old", 1);
    let mut newer = demo_turn("new", 0);
    for r in &mut newer {
        r.timestamp_ms += 1_000_000;
    }
    append_all(&backend, &newer);
    drop(backend);
    // A file that is not a cslog at all: a refused row, never a failed list.
    std::fs::write(dir.path().join("broken.cslog"), b"not a session file").unwrap();
    let rows = list(&ViewConfig::new(vec![dir.path().to_owned()])).unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, vec!["new", "old", "broken"]);
    assert_eq!(rows[0].status, Status::Clean);
    assert_eq!(rows[0].n_records, 7);
    assert_eq!(rows[0].n_turns, 1);
    assert_eq!((rows[0].prompt_tokens, rows[0].completion_tokens), (31, 9));
    assert!(
        matches!(rows[2].status, Status::Refused { offset: 0, .. }),
        "{:?}",
        rows[2].status
    );
}

#[test]
fn the_fork_tree_runs_from_the_oldest_ancestor_through_every_branch() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    session_of_turns(&backend, "root", 2);
    let a = backend.fork("root", "root:3").unwrap();
    let b = backend.fork("root", "root:8").unwrap();
    let a1 = backend.fork(&a, &format!("{a}:1")).unwrap();
    let tree = fork_tree(&ViewConfig::new(vec![dir.path().to_owned()]), &a1).unwrap();
    assert_eq!(tree.id, "root");
    assert_eq!(tree.point, None);
    let ids: Vec<&str> = tree.children.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, vec![a.as_str(), b.as_str()]);
    assert_eq!(tree.children[0].point.as_deref(), Some("root:3"));
    assert_eq!(tree.children[0].children[0].id, a1);
    assert!(tree.children[1].children.is_empty());
}

#[test]
fn a_page_keeps_a_long_turn_clipped_and_counts_what_it_cut() {
    // A page of 20 turns costs bounded memory however long a turn is (a 622 MB turn once
    // cost 2.26 GB). A turn of one long output and more streamed blocks than a page
    // keeps: the text is cut to the turn's budget, the records to the turn's count, and the
    // header's records after them are still kept.
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let long = "é".repeat(MAX_TURN_TEXT_BYTES); // two bytes a character: a cut mid-character
    let mut records = vec![record(
        "big",
        0,
        SessionEvent::Output {
            text: format!("x{long}"),
        },
    )];
    let blocks = MAX_TURN_RECORDS + 10;
    for n in 0..blocks {
        records.push(record(
            "big",
            1 + n as u64,
            SessionEvent::Output { text: "ab".into() },
        ));
    }
    let next = 1 + blocks as u64;
    records.push(record(
        "big",
        next,
        SessionEvent::Latency { duration_ms: 7 },
    ));
    records.push(record(
        "big",
        next + 1,
        SessionEvent::TokenUsage {
            prompt_tokens: 1,
            completion_tokens: 2,
        },
    ));
    records.extend(demo_turn("big", next + 2));
    append_all(&backend, &records);

    let page = page(&backend, "big", 0, TURNS_PER_PAGE).unwrap();
    assert_eq!(page.turns.len(), 2);
    let turn = &page.turns[0];
    assert!(turn.complete);
    // Kept: the records up to the count, then the two header records.
    assert_eq!(turn.records.len(), MAX_TURN_RECORDS + 2);
    assert_eq!(turn.clipped.records, (blocks + 1 - MAX_TURN_RECORDS) as u64);
    let SessionEvent::Output { text } = &turn.records[0].event else {
        panic!("the first record is the output");
    };
    // The budget less the byte a whole "é" did not fit in.
    assert_eq!(text.len(), MAX_TURN_TEXT_BYTES - 1);
    assert!(text.starts_with("xé"));
    let shown: usize = turn
        .records
        .iter()
        .map(|r| match &r.event {
            SessionEvent::Output { text } => text.len(),
            _ => 0,
        })
        .sum();
    assert!(shown <= MAX_TURN_TEXT_BYTES, "{shown}");
    // Everything of the first record past the budget; the first kept block fits one byte of
    // what is left, and the others none.
    let kept_blocks = (MAX_TURN_RECORDS - 1) as u64;
    assert_eq!(
        turn.clipped.bytes,
        (1 + long.len() - (MAX_TURN_TEXT_BYTES - 1)) as u64 + 1 + 2 * (kept_blocks - 1)
    );
    assert_eq!(shown, MAX_TURN_TEXT_BYTES);
    assert!(matches!(
        turn.records[MAX_TURN_RECORDS].event,
        SessionEvent::Latency { duration_ms: 7 }
    ));
    // The next turn starts with a full budget again.
    assert_eq!(page.turns[1].clipped, Clipped::default());
    assert_eq!(page.turns[1].records.len(), 7);
}

#[test]
fn a_notes_only_tail_is_never_counted_as_a_turn_in_the_list_or_the_index() {
    // The list does not count a notes-only block as a turn.
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    session_of_turns(&backend, "s", 2);
    let fork = backend.fork("s", "s:3").unwrap();
    let config = ViewConfig::new(vec![dir.path().to_owned()]);
    let rows = list(&config).unwrap();
    let row = rows.iter().find(|r| r.id == "s").unwrap();
    assert_eq!(row.n_turns, 2);
    let index = crate::index::build(&backend, "s").unwrap();
    assert_eq!(index.turns.len(), 2);
    assert_eq!(index.notes_after, Some(14));
    assert_eq!(
        index.turns.iter().map(|t| t.number).collect::<Vec<_>>(),
        [1, 2]
    );
    assert!(rows.iter().any(|r| r.id == fork));
}

#[test]
fn the_index_sorts_turns_and_finds_the_next_error() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let mut records = Vec::new();
    for (turn, (ms, failed)) in [(300u64, false), (900, true), (100, false), (500, true)]
        .into_iter()
        .enumerate()
    {
        let base = records.len() as u64;
        records.push(record("e", base, SessionEvent::Output { text: "x".into() }));
        if failed {
            records.push(record(
                "e",
                base + 1,
                SessionEvent::CallIncomplete {
                    reason: format!("turn {turn} broke"),
                },
            ));
        }
        let n = records.len() as u64;
        records.push(record("e", n, SessionEvent::Latency { duration_ms: ms }));
        records.push(record(
            "e",
            n + 1,
            SessionEvent::TokenUsage {
                prompt_tokens: 10 * (turn as u64 + 1),
                completion_tokens: 1,
            },
        ));
    }
    append_all(&backend, &records);
    let index = crate::index::build(&backend, "e").unwrap();
    let by_latency: Vec<usize> = index
        .sorted_by(crate::index::SortKey::Latency)
        .iter()
        .map(|t| t.number)
        .collect();
    assert_eq!(by_latency, [2, 4, 1, 3]);
    let by_tokens: Vec<usize> = index
        .sorted_by(crate::index::SortKey::Tokens)
        .iter()
        .map(|t| t.number)
        .collect();
    assert_eq!(by_tokens, [4, 3, 2, 1]);
    assert_eq!(index.n_errors(), 2);
    assert_eq!(index.next_error(0).map(|t| t.number), Some(2));
    assert_eq!(index.next_error(2).map(|t| t.number), Some(4));
    assert_eq!(index.next_error(4), None);
    assert_eq!(
        index.turns[1].error.as_deref(),
        Some("incomplete call: turn 1 broke")
    );
}

#[test]
fn an_answer_echoed_back_as_the_next_request_is_marked_once() {
    // An answer echoed back as the next request does not show twice on a proxy session page.
    use cuca_events::Message;
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let events = [
        SessionEvent::SystemPrompt {
            text: "terse".into(),
        },
        SessionEvent::Message(Message::user("one")),
        SessionEvent::Output { text: "Lis".into() },
        SessionEvent::Output { text: "bon".into() },
        SessionEvent::Latency { duration_ms: 1 },
        SessionEvent::TokenUsage {
            prompt_tokens: 1,
            completion_tokens: 1,
        },
        SessionEvent::SystemPrompt {
            text: "terse".into(),
        },
        SessionEvent::Message(Message::assistant("Lisbon")),
        SessionEvent::Message(Message::user("two")),
        SessionEvent::Message(Message::assistant("not the answer")),
        SessionEvent::Output {
            text: "Porto".into(),
        },
        SessionEvent::Latency { duration_ms: 1 },
        SessionEvent::TokenUsage {
            prompt_tokens: 1,
            completion_tokens: 1,
        },
    ];
    let records: Vec<_> = events
        .into_iter()
        .enumerate()
        .map(|(i, e)| record("p", i as u64, e))
        .collect();
    append_all(&backend, &records);
    let page = page(&backend, "p", 0, TURNS_PER_PAGE).unwrap();
    assert!(page.turns[0].echoes.is_empty());
    assert_eq!(page.turns[1].echoes, [6, 7]);
    // The same holds on a page that starts at the second turn.
    let later = super::page(&backend, "p", 1, TURNS_PER_PAGE).unwrap();
    assert_eq!(later.turns[0].echoes, [6, 7]);
}

#[test]
fn a_deep_page_reads_from_its_index_mark_and_shows_what_a_read_from_the_start_shows() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    session_of_turns(&backend, "s", 200);
    let index = crate::index::build(&backend, "s").unwrap();
    let first_turn = 180;
    let from = index.page_mark(first_turn);
    assert_eq!(from.map(|(turn_idx, _)| turn_idx), Some(first_turn - 1));
    let seeked = page_from(&backend, "s", first_turn, TURNS_PER_PAGE, from).unwrap();
    let whole = page(&backend, "s", first_turn, TURNS_PER_PAGE).unwrap();
    // The turn before the page and the page's own twenty: 21 turns of 7 records.
    assert_eq!(seeked.records_read, 21 * 7);
    assert_eq!(whole.records_read, 200 * 7);
    assert_eq!(seeked.turns, whole.turns);
    assert_eq!(seeked.more, whole.more);
    assert!(seeked.end.is_some(), "the last page read to the end");
    // The end mark is where a live poll reads on from: nothing new, nothing read.
    let poll = records_after(&backend, "s", Some(1399), &seeked.end.unwrap()).unwrap();
    assert_eq!((poll.records_read, poll.records.len()), (0, 0));
    // A middle page reads its own turns and one record more.
    let middle = page_from(&backend, "s", 100, TURNS_PER_PAGE, index.page_mark(100)).unwrap();
    assert_eq!(middle.records_read, 21 * 7 + 1);
    assert_eq!(
        middle.turns,
        page(&backend, "s", 100, TURNS_PER_PAGE).unwrap().turns
    );
}

#[test]
fn a_grown_session_s_index_reads_only_what_was_appended_and_equals_a_fresh_one() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    session_of_turns(&backend, "g", 200);
    let config = crate::ViewConfig::new(vec![dir.path().to_owned()]);
    let located = locate(&config, "g").unwrap();
    let (first, n_read) = crate::index::of_counting(&located, "g").unwrap();
    assert_eq!((first.turns.len(), n_read), (200, 1400));
    let (_, n_read) = crate::index::of_counting(&located, "g").unwrap();
    assert_eq!(n_read, 0, "an unchanged file is answered from the cache");
    // Half a turn, then the rest of it and one more: each refresh reads only what is new,
    // and the half turn read first is finished where it was left.
    let next = demo_turn("g", 1400);
    append_all(&backend, &next[..3]);
    let (half, n_read) = crate::index::of_counting(&located, "g").unwrap();
    assert_eq!((half.turns.len(), n_read), (201, 3));
    assert!(!half.turns[200].complete);
    let mut rest = next[3..].to_vec();
    rest.extend(demo_turn("g", 1407));
    append_all(&backend, &rest);
    let (grown, n_read) = crate::index::of_counting(&located, "g").unwrap();
    assert_eq!(n_read, rest.len() as u64);
    let mut fresh = crate::index::build(&backend, "g").unwrap();
    fresh.bytes = grown.bytes;
    assert_eq!(*grown, fresh);
    assert_eq!(grown.turns.len(), 202);
    assert!(grown.turns[200].complete);
}
