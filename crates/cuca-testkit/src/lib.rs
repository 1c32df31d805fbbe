//! The conformance suite every [`SessionBackend`] runs, and small record builders for tests.
//!
//! A store crate runs the whole suite with one macro call in a test file; every check
//! becomes its own `#[test]`, so a failure names the law that broke:
//!
//! ```
//! use std::sync::Arc;
//! # #[derive(Debug, Default)] struct Dummy;
//! # impl cuca_events::SessionBackend for Dummy {
//! #   fn name(&self) -> &str { "dummy" }
//! #   fn append(&self, _: cuca_events::SessionRecord) -> Result<(), cuca_events::PluginError> { Ok(()) }
//! #   fn replay(&self, _: &str) -> Result<Vec<cuca_events::SessionRecord>, cuca_events::PluginError> { Ok(vec![]) }
//! #   fn fork(&self, _: &str, p: &str) -> Result<String, cuca_events::PluginError> { Err(cuca_events::PluginError::NotFound { what: "point".into(), id: p.into() }) }
//! #   fn sessions(&self) -> Result<Vec<String>, cuca_events::PluginError> { Ok(vec![]) }
//! #   fn gauge(&self) -> cuca_events::BackendGauge { Default::default() }
//! # }
//! // in tests/conformance.rs of a store crate:
//! cuca_testkit::conformance_tests!(|| Arc::new(Dummy));
//! ```
//!
//! The factory is called once per check and must return a backend with no sessions.
//!
//! # What it does not do
//!
//! It knows no concrete store: format, durability and cap checks live with each store.
#![forbid(unsafe_code)]

use std::sync::Arc;

use cuca_events::{Message, PluginError, SessionBackend, SessionEvent, SessionRecord};

/// A record of `session_id` at `sequence` holding `event`, stamped at a fixed time.
pub fn record(session_id: &str, sequence: u64, event: SessionEvent) -> SessionRecord {
    SessionRecord {
        session_id: session_id.to_owned(),
        sequence,
        timestamp_ms: 1_700_000_000_000 + sequence,
        event,
    }
}

/// The shape of one recorded turn: system prompt, user message, reasoning, output, then the
/// Latency/TokenUsage pair that closes a turn.
pub fn demo_turn(session_id: &str, first_sequence: u64) -> Vec<SessionRecord> {
    let events = [
        SessionEvent::SystemPrompt {
            text: "You are terse.".into(),
        },
        SessionEvent::Message(Message::user("The vault is in Lisbon. Reply with: noted")),
        SessionEvent::Reasoning {
            text: "The user".into(),
        },
        SessionEvent::Reasoning {
            text: " wants a short reply.".into(),
        },
        SessionEvent::Output {
            text: "noted".into(),
        },
        SessionEvent::Latency { duration_ms: 412 },
        SessionEvent::TokenUsage {
            prompt_tokens: 31,
            completion_tokens: 9,
        },
    ];
    events
        .into_iter()
        .enumerate()
        .map(|(offset, event)| record(session_id, first_sequence + offset as u64, event))
        .collect()
}

/// Appends every record, panicking with the backend's error: a conformance helper.
pub fn append_all(backend: &dyn SessionBackend, records: &[SessionRecord]) {
    for record in records {
        if let Err(error) = backend.append(record.clone()) {
            panic!("{} refused {}: {error}", backend.name(), record.point_id());
        }
    }
}

fn replay(backend: &dyn SessionBackend, session_id: &str) -> Vec<SessionRecord> {
    match backend.replay(session_id) {
        Ok(records) => records,
        Err(error) => panic!(
            "{} could not replay {session_id:?}: {error}",
            backend.name()
        ),
    }
}

/// Records come back in append order, exactly as given.
pub fn append_then_replay_keeps_order(backend: Arc<dyn SessionBackend>) {
    let turn = demo_turn("demo", 0);
    append_all(backend.as_ref(), &turn);
    assert_eq!(replay(backend.as_ref(), "demo"), turn);
}

/// "Backends store records as given": a sequence gap the plugin chose is kept, not renumbered.
pub fn records_are_stored_as_given(backend: Arc<dyn SessionBackend>) {
    let records = vec![
        record("gappy", 3, SessionEvent::Output { text: "a".into() }),
        record("gappy", 9, SessionEvent::Output { text: "b".into() }),
    ];
    append_all(backend.as_ref(), &records);
    assert_eq!(replay(backend.as_ref(), "gappy"), records);
}

/// Sessions do not see each other's records.
pub fn sessions_are_separate(backend: Arc<dyn SessionBackend>) {
    let a = demo_turn("a", 0);
    let b = demo_turn("b", 0);
    for (x, y) in a.iter().zip(&b) {
        append_all(backend.as_ref(), &[x.clone(), y.clone()]);
    }
    assert_eq!(replay(backend.as_ref(), "a"), a);
    assert_eq!(replay(backend.as_ref(), "b"), b);
    let sessions = backend.sessions().unwrap_or_default();
    assert_eq!(sessions, vec!["a".to_owned(), "b".to_owned()]);
}

/// `replay_each` visits exactly what `replay` returns, in order, with the session id as
/// stored, and an unknown session visits nothing; a visitor's error stops it and comes back.
pub fn replay_each_visits_what_replay_returns(backend: Arc<dyn SessionBackend>) {
    let mut turn = demo_turn("each", 0);
    turn.extend(demo_turn("each", 78));
    append_all(backend.as_ref(), &turn);
    append_all(backend.as_ref(), &demo_turn("other", 0));
    let visit_all = |session_id: &str| {
        let mut seen = Vec::new();
        let outcome = backend.replay_each(session_id, &mut |record| {
            seen.push(record.into_owned());
            Ok(())
        });
        if let Err(error) = outcome {
            panic!("{} could not visit {session_id:?}: {error}", backend.name());
        }
        seen
    };
    assert_eq!(visit_all("each"), replay(backend.as_ref(), "each"));
    assert_eq!(visit_all("each"), turn);
    assert_eq!(visit_all("never-written"), Vec::new());
    let mut n_seen = 0;
    let stopped = backend.replay_each("each", &mut |_| {
        n_seen += 1;
        Err(cuca_events::PluginError::validation("visitor", "stop here"))
    });
    assert!(
        matches!(stopped, Err(cuca_events::PluginError::Validation { .. })),
        "{} did not return the visitor's error: {stopped:?}",
        backend.name()
    );
    assert_eq!(n_seen, 1, "{} kept visiting after an error", backend.name());
}

/// Reads `session_id` after `mark`, with the marks handed out: the records and marks
/// visited, and what the read returned.
fn read_after(
    backend: &dyn SessionBackend,
    session_id: &str,
    mark: &cuca_events::ReadMark,
) -> (
    Vec<(SessionRecord, cuca_events::ReadMark)>,
    cuca_events::ReadAfter,
) {
    let mut seen = Vec::new();
    let outcome = backend.replay_after(session_id, mark, &mut |record, after| {
        seen.push((record.into_owned(), *after));
        Ok(())
    });
    match outcome {
        Ok(outcome) => (seen, outcome),
        Err(error) => panic!(
            "{} could not read {session_id:?} after {mark:?}: {error}",
            backend.name()
        ),
    }
}

/// `replay_after` from the start visits what `replay_each` does; from a mark it handed out,
/// only what was appended since (another turn, a fork's audit record), each once; a mark
/// that no longer stands in the session is stale and visits nothing.
pub fn replay_after_reads_what_was_appended_since_its_mark(backend: Arc<dyn SessionBackend>) {
    use cuca_events::{ReadAfter, ReadMark};
    let first = demo_turn("after", 0);
    append_all(backend.as_ref(), &first);
    let (seen, outcome) = read_after(backend.as_ref(), "after", &ReadMark::START);
    let records: Vec<SessionRecord> = seen.iter().map(|(r, _)| r.clone()).collect();
    assert_eq!(records, first, "{}: a read from the start", backend.name());
    let last = seen.last().map(|(_, m)| *m).unwrap_or_default();
    assert_eq!(outcome, ReadAfter::Read(last), "{}", backend.name());
    assert_eq!(last.sequence, Some(6));

    // Another turn: only it is read after the mark.
    let second = demo_turn("after", 7);
    append_all(backend.as_ref(), &second);
    let (seen, outcome) = read_after(backend.as_ref(), "after", &last);
    let records: Vec<SessionRecord> = seen.iter().map(|(r, _)| r.clone()).collect();
    assert_eq!(records, second, "{}: a read after a mark", backend.name());
    let ReadAfter::Read(end) = outcome else {
        panic!(
            "{}: a mark of an appended session read as stale",
            backend.name()
        );
    };
    assert_eq!(end.sequence, Some(13));
    // Nothing new: nothing visited, the same mark back.
    let (seen, outcome) = read_after(backend.as_ref(), "after", &end);
    assert!(seen.is_empty(), "{}: {seen:?}", backend.name());
    assert_eq!(outcome, ReadAfter::Read(end));
    // A mark from the middle of a read stands too.
    let (seen, _) = read_after(backend.as_ref(), "after", &ReadMark::START);
    let middle = seen[3].1;
    let (seen, _) = read_after(backend.as_ref(), "after", &middle);
    let sequences: Vec<u64> = seen.iter().map(|(r, _)| r.sequence).collect();
    assert_eq!(
        sequences,
        (4..14).collect::<Vec<u64>>(),
        "{}",
        backend.name()
    );

    // A fork made after the mark: its audit record is what the original gained.
    let branch = match backend.fork("after", "after:6") {
        Ok(branch) => branch,
        Err(error) => panic!("{} could not fork: {error}", backend.name()),
    };
    let (seen, _) = read_after(backend.as_ref(), "after", &end);
    assert_eq!(seen.len(), 1, "{}: {seen:?}", backend.name());
    assert!(
        matches!(&seen[0].0.event, SessionEvent::Fork { to_session, .. } if *to_session == branch),
        "{}: {seen:?}",
        backend.name()
    );
    // The branch reads from the start as any session.
    let (seen, _) = read_after(backend.as_ref(), &branch, &ReadMark::START);
    assert_eq!(seen.len(), 7, "{}", backend.name());

    // A mark past what a session holds is stale, and visits nothing.
    append_all(backend.as_ref(), &demo_turn("short", 0));
    let (seen, outcome) = read_after(backend.as_ref(), "short", &end);
    assert!(seen.is_empty(), "{}: {seen:?}", backend.name());
    assert_eq!(outcome, ReadAfter::Stale, "{}", backend.name());
    // An unknown session reads as empty from the start.
    let (seen, outcome) = read_after(backend.as_ref(), "never-written", &ReadMark::START);
    assert!(seen.is_empty());
    assert_eq!(
        outcome,
        ReadAfter::Read(ReadMark::START),
        "{}",
        backend.name()
    );
}

/// A backend that hands out stamps (`SessionBackend::stamp`) hands out a new one whenever
/// the session changes — an append, by this instance or another, a fork's audit record, a
/// session created where there was none — and the same one while it does not. A backend
/// that hands out none (the trait's default) passes: its readers read on every time.
pub fn a_stamp_changes_when_the_session_does(backend: Arc<dyn SessionBackend>) {
    let name = backend.name().to_owned();
    let Some(unknown) = backend.stamp("stamped") else {
        assert_eq!(backend.stamp("stamped"), None, "{name}");
        return;
    };
    assert_eq!(
        backend.stamp("stamped"),
        Some(unknown),
        "{name}: an unknown session"
    );
    let turn = demo_turn("stamped", 0);
    let mut stamps = vec![unknown];
    for record in &turn {
        append_all(backend.as_ref(), std::slice::from_ref(record));
        let stamp = backend.stamp("stamped");
        assert_eq!(
            backend.stamp("stamped"),
            stamp,
            "{name}: nothing appended between"
        );
        let Some(stamp) = stamp else {
            panic!("{name}: no stamp for a session it stamped while unknown");
        };
        assert!(
            !stamps.contains(&stamp),
            "{name}: the stamp after sequence {} was handed out before",
            record.sequence
        );
        stamps.push(stamp);
    }
    // Another session's append leaves this one's stamp alone.
    let before = backend.stamp("stamped");
    append_all(backend.as_ref(), &demo_turn("elsewhere", 0));
    assert_eq!(backend.stamp("stamped"), before, "{name}: another session");
    // A fork appends its audit record to the original.
    if let Err(error) = backend.fork("stamped", "stamped:3") {
        panic!("{name} could not fork: {error}");
    }
    assert_ne!(
        backend.stamp("stamped"),
        before,
        "{name}: a fork's audit record"
    );
}

/// "A missing file replays as an empty session" — for every backend, an unknown id is empty.
pub fn unknown_session_replays_empty(backend: Arc<dyn SessionBackend>) {
    assert_eq!(replay(backend.as_ref(), "never-written"), Vec::new());
}

/// "The new session holds the original's prefix up to and including that point, relabelled
/// with the new session id. The original gains one SessionEvent::Fork record."
pub fn fork_holds_the_prefix_and_audits_the_original(backend: Arc<dyn SessionBackend>) {
    let turn = demo_turn("demo", 0);
    append_all(backend.as_ref(), &turn);
    let new_id = match backend.fork("demo", "demo:1") {
        Ok(id) => id,
        Err(error) => panic!("fork failed: {error}"),
    };
    let branch = replay(backend.as_ref(), &new_id);
    let expected: Vec<SessionRecord> = turn[..=1]
        .iter()
        .map(|record| SessionRecord {
            session_id: new_id.clone(),
            ..record.clone()
        })
        .collect();
    assert_eq!(branch, expected, "branch is the relabelled prefix");

    let original = replay(backend.as_ref(), "demo");
    assert_eq!(
        original.len(),
        turn.len() + 1,
        "the original gains exactly one record"
    );
    assert_eq!(&original[..turn.len()], turn.as_slice());
    let audit = &original[turn.len()];
    assert_eq!(
        audit.sequence,
        turn.len() as u64,
        "the audit record is sequenced at the tail"
    );
    assert_eq!(
        audit.event,
        SessionEvent::Fork {
            from_point: "demo:1".into(),
            to_session: new_id.clone(),
        }
    );
}

/// "The new id is {session_id}:fork:{point_id}:{n}", and two forks get two ids.
pub fn fork_ids_follow_the_format(backend: Arc<dyn SessionBackend>) {
    append_all(backend.as_ref(), &demo_turn("demo", 0));
    let first = backend.fork("demo", "demo:1").unwrap_or_default();
    let second = backend.fork("demo", "demo:1").unwrap_or_default();
    for id in [&first, &second] {
        let n = id.strip_prefix("demo:fork:demo:1:");
        assert!(
            n.is_some_and(|n| n.parse::<u64>().is_ok()),
            "{id:?} is not demo:fork:demo:1:{{n}}"
        );
    }
    assert_ne!(first, second);
}

/// A fork never writes into a session that already exists.
pub fn fork_never_writes_into_an_existing_session(backend: Arc<dyn SessionBackend>) {
    append_all(backend.as_ref(), &demo_turn("demo", 0));
    // Occupy the ids a fresh counter would mint first.
    for n in 0..3 {
        let occupied = cuca_events::fork_session_id("demo", "demo:1", n);
        append_all(
            backend.as_ref(),
            &[record(
                &occupied,
                0,
                SessionEvent::Output {
                    text: "mine".into(),
                },
            )],
        );
    }
    let new_id = backend.fork("demo", "demo:1").unwrap_or_default();
    assert!(!new_id.is_empty());
    for n in 0..3 {
        let occupied = cuca_events::fork_session_id("demo", "demo:1", n);
        assert_ne!(new_id, occupied);
        assert_eq!(
            replay(backend.as_ref(), &occupied).len(),
            1,
            "{occupied} untouched"
        );
    }
    assert_eq!(replay(backend.as_ref(), &new_id).len(), 2);
}

/// A fork of a point that does not exist fails and changes nothing.
pub fn fork_of_a_missing_point_changes_nothing(backend: Arc<dyn SessionBackend>) {
    let turn = demo_turn("demo", 0);
    append_all(backend.as_ref(), &turn);
    let before = backend.sessions().unwrap_or_default();
    for (session, point) in [
        ("demo", "demo:99"),
        ("nope", "nope:0"),
        ("demo", "other:1"),
        ("demo", "demo"),
    ] {
        let result = backend.fork(session, point);
        assert!(
            matches!(
                result,
                Err(PluginError::NotFound { .. } | PluginError::Validation { .. })
            ),
            "fork({session:?}, {point:?}) gave {result:?}"
        );
    }
    assert_eq!(replay(backend.as_ref(), "demo"), turn);
    assert_eq!(backend.sessions().unwrap_or_default(), before);
}

/// A branch is a session like any other: it replays and takes appends after its prefix.
pub fn a_branch_takes_appends(backend: Arc<dyn SessionBackend>) {
    append_all(backend.as_ref(), &demo_turn("demo", 0));
    let new_id = backend.fork("demo", "demo:4").unwrap_or_default();
    let next = record(
        &new_id,
        5,
        SessionEvent::Output {
            text: "other path".into(),
        },
    );
    append_all(backend.as_ref(), std::slice::from_ref(&next));
    let branch = replay(backend.as_ref(), &new_id);
    assert_eq!(branch.len(), 6);
    assert_eq!(branch.last(), Some(&next));
    // A fork of a fork splits its id at the last ':'.
    let grandchild = backend.fork(&new_id, &format!("{new_id}:2"));
    assert!(grandchild.is_ok(), "fork of a fork: {grandchild:?}");
}

/// The refusal a stale writer gets: asserts `result` is [`PluginError::SequenceTaken`] naming
/// `session_id`, the refused `sequence` and the `last` one stored.
fn assert_sequence_taken(
    backend: &dyn SessionBackend,
    result: Result<(), PluginError>,
    session_id: &str,
    sequence: u64,
    last: u64,
) {
    match result {
        Err(PluginError::SequenceTaken {
            session_id: named,
            sequence: refused,
            last: stored,
        }) => {
            assert_eq!(
                named,
                session_id,
                "{} named another session",
                backend.name()
            );
            assert_eq!(
                refused,
                sequence,
                "{} named another sequence",
                backend.name()
            );
            assert_eq!(
                stored,
                last,
                "{} named another last sequence",
                backend.name()
            );
        }
        other => panic!(
            "{} took sequence {sequence} of {session_id:?} after {last}: {other:?}",
            backend.name()
        ),
    }
}

/// "Sequences are strictly increasing per session in every store, a contract of
/// `SessionBackend::append`": a duplicate or a step backwards is refused with
/// `PluginError::SequenceTaken` naming the last stored sequence, and nothing changes; the
/// next higher sequence (gaps allowed) is taken, and other sessions count on their own.
pub fn append_refuses_a_sequence_at_or_below_the_last(backend: Arc<dyn SessionBackend>) {
    let turn = demo_turn("demo", 0);
    append_all(backend.as_ref(), &turn);
    let last = turn.len() as u64 - 1;
    let output = |session: &str, sequence| {
        record(
            session,
            sequence,
            SessionEvent::Output {
                text: format!("stale {sequence}"),
            },
        )
    };
    // 0,0 (a duplicate of the last), 0,…,6,2 (a step backwards), and 0 again.
    for stale in [last, 2, 0] {
        let refused = backend.append(output("demo", stale));
        assert_sequence_taken(backend.as_ref(), refused, "demo", stale, last);
    }
    assert_eq!(
        replay(backend.as_ref(), "demo"),
        turn,
        "a refusal stored nothing"
    );
    // Another session starts where it likes; this one goes on above its last, gaps kept.
    append_all(
        backend.as_ref(),
        &[output("other", 0), output("demo", last + 5)],
    );
    let refused = backend.append(output("demo", last + 1));
    assert_sequence_taken(backend.as_ref(), refused, "demo", last + 1, last + 5);
    let demo = replay(backend.as_ref(), "demo");
    assert_eq!(demo.len(), turn.len() + 1);
    assert!(
        demo.windows(2)
            .all(|pair| pair[0].sequence < pair[1].sequence),
        "{} replays sequences that do not increase",
        backend.name()
    );
}

/// [`SessionBackend::append_all`] stores a run of records as that many appends would: in
/// order, readable after; a record refused in the middle (a taken sequence) leaves the ones
/// before it stored, counts them, and stores none after it; an empty run stores nothing.
pub fn append_all_stores_in_order_and_counts_what_a_refusal_stored(
    backend: Arc<dyn SessionBackend>,
) {
    let turn = demo_turn("demo", 0);
    if let Err(refused) = backend.append_all(turn.clone()) {
        panic!(
            "{} refused a turn appended whole: {refused}",
            backend.name()
        );
    }
    assert_eq!(replay(backend.as_ref(), "demo"), turn);
    if let Err(refused) = backend.append_all(Vec::new()) {
        panic!("{} refused an empty run: {refused}", backend.name());
    }
    let last = turn.len() as u64 - 1;
    let output = |sequence: u64| {
        record(
            "demo",
            sequence,
            SessionEvent::Output {
                text: format!("block {sequence}"),
            },
        )
    };
    // Two that follow, one that steps back to a taken sequence, one that would follow.
    let run = vec![
        output(last + 1),
        output(last + 2),
        output(3),
        output(last + 3),
    ];
    match backend.append_all(run.clone()) {
        Ok(()) => panic!("{} stored a run holding a taken sequence", backend.name()),
        Err(refused) => {
            assert_eq!(refused.stored, 2, "{}: {refused}", backend.name());
            assert_sequence_taken(backend.as_ref(), Err(refused.error), "demo", 3, last + 2);
        }
    }
    let mut expected = turn;
    expected.extend_from_slice(&run[..2]);
    assert_eq!(
        replay(backend.as_ref(), "demo"),
        expected,
        "{} stores the records before a refusal and none after it",
        backend.name()
    );
    // The session goes on after the stored ones.
    if let Err(refused) = backend.append_all(vec![output(last + 3)]) {
        panic!(
            "{} refused the record after the stored run: {refused}",
            backend.name()
        );
    }
    assert_eq!(replay(backend.as_ref(), "demo").len(), expected.len() + 1);
}

/// The Fork audit record keeps the rule: it is the original's last record, so a writer that
/// did not see the fork (a second plugin, another handle) and reuses its sequence is refused
/// with the audit record's sequence as `last`, instead of storing a duplicate.
pub fn the_fork_audit_record_takes_its_sequence(backend: Arc<dyn SessionBackend>) {
    let turn = demo_turn("demo", 0);
    append_all(backend.as_ref(), &turn);
    let branch = match backend.fork("demo", "demo:1") {
        Ok(id) => id,
        Err(error) => panic!("fork failed: {error}"),
    };
    let audit = turn.len() as u64;
    let stale = record(
        "demo",
        audit,
        SessionEvent::Output {
            text: "written by a writer that missed the fork".into(),
        },
    );
    let refused = backend.append(stale.clone());
    assert_sequence_taken(backend.as_ref(), refused, "demo", audit, audit);
    append_all(
        backend.as_ref(),
        &[SessionRecord {
            sequence: audit + 1,
            ..stale
        }],
    );
    let sequences: Vec<u64> = replay(backend.as_ref(), "demo")
        .iter()
        .map(|record| record.sequence)
        .collect();
    assert_eq!(
        sequences,
        (0..=audit + 1).collect::<Vec<_>>(),
        "dense, no duplicate"
    );
    // The branch's prefix ends at the fork point: it goes on from there, not below.
    let refused = backend.append(record(
        &branch,
        1,
        SessionEvent::Output {
            text: "again".into(),
        },
    ));
    assert_sequence_taken(backend.as_ref(), refused, &branch, 1, 1);
}

/// Every store refuses ids with control characters (`\n`, ESC, other C0/C1 controls, DEL) at
/// validation, so none is ever printed raw: an append or a fork under such an id (or the empty id)
/// is `PluginError::Validation` and stores nothing.
pub fn session_ids_with_control_characters_are_refused(backend: Arc<dyn SessionBackend>) {
    append_all(backend.as_ref(), &demo_turn("demo", 0));
    let before = backend.sessions().unwrap_or_default();
    for id in [
        "two\nlines",
        "carriage\rreturn",
        "esc\u{1b}[31mred",
        "nul\0byte",
        "tab\tbed",
        "del\u{7f}",
        "c1\u{85}next-line",
        "c1\u{9b}csi",
        "",
    ] {
        let appended = backend.append(record(
            id,
            0,
            SessionEvent::Output {
                text: "refused".into(),
            },
        ));
        assert!(
            matches!(appended, Err(PluginError::Validation { ref schema, .. }) if schema == "session_id"),
            "{} appended to session {id:?}: {appended:?}",
            backend.name()
        );
        let forked = backend.fork(id, &format!("{id}:0"));
        assert!(
            matches!(forked, Err(PluginError::Validation { .. })),
            "{} forked session {id:?}: {forked:?}",
            backend.name()
        );
    }
    assert_eq!(
        backend.sessions().unwrap_or_default(),
        before,
        "nothing stored"
    );
}

/// Seed 000: "fork_session branches from any historical point", at any depth: a fork id
/// repeats its parent's id twice, so forks nested ten deep from a 36-byte UUID session make
/// ids of about 47 KB. Each branch replays its prefix, takes appends and is listed by its true
/// id.
pub fn forks_nest_ten_deep_from_a_uuid_session(backend: Arc<dyn SessionBackend>) {
    let root = "0b3c5a6e-9d2f-4f1a-8c7b-2e4d6f8a0c1e";
    append_all(backend.as_ref(), &demo_turn(root, 0));
    let mut ids = vec![root.to_owned()];
    for depth in 1..=10 {
        let parent = ids.last().cloned().unwrap_or_default();
        let child = match backend.fork(&parent, &format!("{parent}:1")) {
            Ok(id) => id,
            Err(error) => panic!("fork at depth {depth} ({} bytes): {error}", parent.len()),
        };
        assert!(child.starts_with(&format!("{parent}:fork:{parent}:1:")));
        // The branch holds points 0 and 1; it takes the next record after them.
        let next = record(
            &child,
            2,
            SessionEvent::Output {
                text: format!("depth {depth}"),
            },
        );
        if let Err(error) = backend.append(next.clone()) {
            panic!("append at depth {depth} ({} bytes): {error}", child.len());
        }
        let branch = replay(backend.as_ref(), &child);
        assert_eq!(branch.len(), 3, "depth {depth}");
        assert_eq!(branch.last(), Some(&next));
        assert!(branch.iter().all(|record| record.session_id == child));
        ids.push(child);
    }
    let deepest = ids.last().cloned().unwrap_or_default();
    assert!(deepest.len() > 40_000, "{} bytes", deepest.len());
    let mut listed = backend.sessions().unwrap_or_default();
    listed.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(listed, expected);
    // Every parent carries its Fork audit record naming the child by its true id.
    for pair in ids.windows(2) {
        let parent = replay(backend.as_ref(), &pair[0]);
        assert!(
            parent.iter().any(|record| matches!(
                &record.event,
                SessionEvent::Fork { to_session, .. } if *to_session == pair[1]
            )),
            "{} bytes: no audit record",
            pair[0].len()
        );
    }
}

/// Generates one `#[test]` per conformance law for a backend factory expression.
#[macro_export]
macro_rules! conformance_tests {
    ($factory:expr) => {
        $crate::conformance_tests!(@each $factory;
            append_then_replay_keeps_order,
            records_are_stored_as_given,
            sessions_are_separate,
            unknown_session_replays_empty,
            replay_each_visits_what_replay_returns,
            replay_after_reads_what_was_appended_since_its_mark,
            a_stamp_changes_when_the_session_does,
            fork_holds_the_prefix_and_audits_the_original,
            fork_ids_follow_the_format,
            fork_never_writes_into_an_existing_session,
            fork_of_a_missing_point_changes_nothing,
            a_branch_takes_appends,
            append_refuses_a_sequence_at_or_below_the_last,
            append_all_stores_in_order_and_counts_what_a_refusal_stored,
            the_fork_audit_record_takes_its_sequence,
            session_ids_with_control_characters_are_refused,
            forks_nest_ten_deep_from_a_uuid_session
        );
    };
    (@each $factory:expr; $($law:ident),+) => {
        $(
            #[test]
            fn $law() {
                let make = $factory;
                let backend: ::std::sync::Arc<dyn ::cuca_events::SessionBackend> = make();
                $crate::$law(backend);
            }
        )+
    };
}

/// Every path under `root` with its bytes (`None` for a directory), for tests that assert a
/// refused call left "nothing on disk changed": take one before, one after, compare.
pub fn snapshot_dir(
    root: &std::path::Path,
) -> std::collections::BTreeMap<std::path::PathBuf, Option<Vec<u8>>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(error) => panic!("cannot list {}: {error}", dir.display()),
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                out.insert(path.clone(), None);
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path)
                    .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
                out.insert(path, Some(bytes));
            }
        }
    }
    out
}
