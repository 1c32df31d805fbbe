//! Races between a writer starting up, a second writer and a compaction, forced one
//! interleaving at a time through the protocol's test hooks (no sleeps): each hook runs the
//! other party, with its own `FileBackend` (its own open files and locks, as another process
//! would have), at one critical point.

use std::cell::Cell;
use std::path::Path;
use std::rc::Rc;

use cuca_events::{PluginError, SessionBackend, SessionEvent, SessionRecord};
use cuca_testkit::record;

use crate::files::hooks::{self, Point};
use crate::{FileBackend, Verdict};

fn output(session: &str, sequence: u64, text: &str) -> SessionRecord {
    record(
        session,
        sequence,
        SessionEvent::Output {
            text: text.to_owned(),
        },
    )
}

/// A session `s` of five records, written and closed by its own backend.
fn five_records(dir: &Path) -> Vec<SessionRecord> {
    let writer = FileBackend::new(dir).unwrap();
    let records: Vec<_> = (0..5).map(|n| output("s", n, "older")).collect();
    for record in &records {
        writer.append(record.clone()).unwrap();
    }
    records
}

/// Runs `other` the first time the protocol reaches `at`, and reports whether it ran.
fn once_at(at: Point, other: impl FnOnce() + 'static) -> Rc<Cell<bool>> {
    let ran = Rc::new(Cell::new(false));
    let flag = Rc::clone(&ran);
    let mut other = Some(other);
    hooks::set(move |point| {
        if point == at {
            if let Some(other) = other.take() {
                other();
                flag.set(true);
            }
        }
    });
    ran
}

/// "A writer that creates `S.cslog` just after `compact` removed it leaves readers seeing 1
/// record instead of 6; a second compaction then overwrites the `.gz`." The compaction runs
/// after the writer looked at the session and before it opens the live file.
#[test]
fn a_writer_starting_just_after_a_compaction_expands_the_session_instead_of_hiding_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected = five_records(dir.path());
    let writer = FileBackend::new(dir.path()).unwrap();
    let compactor_dir = dir.path().to_path_buf();
    let ran = once_at(Point::BeforeOpen, move || {
        let compactor = FileBackend::new(&compactor_dir).unwrap();
        assert_eq!(compactor.compact("s").unwrap().records, 5);
    });
    let sixth = output("s", 5, "new");
    writer.append(sixth.clone()).unwrap();
    hooks::clear();
    assert!(ran.get());
    expected.push(sixth);
    assert_eq!(writer.replay("s").unwrap(), expected);
    assert!(!writer.is_compacted("s").unwrap());
    assert!(!dir.path().join("s.cslog.gz").exists());
    // A second compaction keeps all six.
    assert_eq!(writer.compact("s").unwrap().records, 6);
    assert_eq!(writer.replay("s").unwrap(), expected);
}

/// The same race one step later: the writer has the old live file open when the compaction
/// removes it, and locks a file nobody can read any more. It notices (the path no longer names
/// its file) and starts its open again.
#[test]
fn a_writer_whose_file_was_compacted_away_before_its_lock_starts_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected = five_records(dir.path());
    let writer = FileBackend::new(dir.path()).unwrap();
    let compactor_dir = dir.path().to_path_buf();
    let ran = once_at(Point::OpenedBeforeLock, move || {
        let compactor = FileBackend::new(&compactor_dir).unwrap();
        assert_eq!(compactor.compact("s").unwrap().records, 5);
    });
    let sixth = output("s", 5, "new");
    writer.append(sixth.clone()).unwrap();
    hooks::clear();
    assert!(ran.get());
    expected.push(sixth);
    assert_eq!(writer.replay("s").unwrap(), expected);
    let fresh = FileBackend::new(dir.path()).unwrap();
    assert_eq!(fresh.replay("s").unwrap(), expected);
}

/// "One writer's expansion of `S.cslog.gz` truncates the other's live file: writer A was
/// acknowledged record 5, record 5 is missing." A second writer arriving at each step of A's
/// expansion is refused (the session is locked), and A's acknowledged record stays.
#[test]
fn a_second_writer_during_an_expansion_is_refused_and_the_first_keeps_its_record() {
    for at in [Point::ExpandBeforeRename, Point::ExpandBeforeRemovePacked] {
        let dir = tempfile::tempdir().unwrap();
        let mut expected = five_records(dir.path());
        FileBackend::new(dir.path()).unwrap().compact("s").unwrap();
        let writer_a = FileBackend::new(dir.path()).unwrap();
        let b_dir = dir.path().to_path_buf();
        let refused = Rc::new(Cell::new(0));
        let count = Rc::clone(&refused);
        let ran = once_at(at, move || {
            let writer_b = FileBackend::new(&b_dir).unwrap();
            let append = writer_b.append(output("s", 5, "from b"));
            assert!(
                matches!(append, Err(PluginError::Locked { .. })),
                "{at:?}: {append:?}"
            );
            let compact = writer_b.compact("s");
            assert!(
                matches!(compact, Err(PluginError::Locked { .. })),
                "{at:?}: {compact:?}"
            );
            count.set(2);
        });
        let from_a = output("s", 5, "from a");
        writer_a.append(from_a.clone()).unwrap();
        hooks::clear();
        assert!(ran.get(), "{at:?}");
        assert_eq!(refused.get(), 2);
        expected.push(from_a);
        assert_eq!(writer_a.replay("s").unwrap(), expected, "{at:?}");
        let report = writer_a.verify("s").unwrap();
        assert_eq!(report.verdict, Verdict::Clean);
        assert!(!dir.path().join("s.cslog.gz").exists());
        // Once A lets go, B appends after A's record.
        assert!(writer_a.close("s"));
        let writer_b = FileBackend::new(dir.path()).unwrap();
        writer_b.append(output("s", 6, "from b")).unwrap();
        assert_eq!(writer_b.replay("s").unwrap().len(), 7);
    }
}

/// A writer that arrives while a compaction holds the session is refused, and the
/// compaction completes with every record.
#[test]
fn a_writer_arriving_during_a_compaction_is_refused_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let expected = five_records(dir.path());
    let compactor = FileBackend::new(dir.path()).unwrap();
    let writer_dir = dir.path().to_path_buf();
    let ran = once_at(Point::CompactBeforeRemoveLive, move || {
        let writer = FileBackend::new(&writer_dir).unwrap();
        let append = writer.append(output("s", 5, "late"));
        assert!(
            matches!(append, Err(PluginError::Locked { .. })),
            "{append:?}"
        );
    });
    assert_eq!(compactor.compact("s").unwrap().records, 5);
    hooks::clear();
    assert!(ran.get());
    assert!(compactor.is_compacted("s").unwrap());
    assert_eq!(compactor.replay("s").unwrap(), expected);
}

/// "A fork can shadow a compacted session": `FileBackend::fork` tried `create_new` on
/// `{id}.cslog` only, so a restarted backend (n from 0 again) created a live file over a
/// compacted earlier branch. "A fork never writes into a session that already exists … n
/// advances until the id is free", whatever form it has on disk.
#[test]
fn a_fork_after_a_restart_never_shadows_a_compacted_branch() {
    let dir = tempfile::tempdir().unwrap();
    five_records(dir.path());
    let forker = FileBackend::new(dir.path()).unwrap();
    let first = forker.fork("s", "s:2").unwrap();
    assert_eq!(first, "s:fork:s:2:0");
    forker.compact(&first).unwrap();
    drop(forker);
    // A restarted backend counts from n = 0 again.
    let restarted = FileBackend::new(dir.path()).unwrap();
    let second = restarted.fork("s", "s:2").unwrap();
    assert_eq!(second, "s:fork:s:2:1");
    assert_eq!(restarted.replay(&first).unwrap().len(), 3);
    assert!(restarted.is_compacted(&first).unwrap());
    assert!(!dir.path().join(format!("{first}.cslog")).exists());
    assert_eq!(restarted.replay(&second).unwrap().len(), 3);
}

/// A fork looks for a free id; between its look (no compacted file) and its create, another
/// process compacts the branch that holds the id. The create then succeeds where the live
/// file was, but the id is looked at again under the new file's lock, so the fork moves on
/// to the next n and the compacted branch stays whole.
#[test]
fn a_fork_never_takes_an_id_compacted_between_its_look_and_its_create() {
    let dir = tempfile::tempdir().unwrap();
    five_records(dir.path());
    let earlier = FileBackend::new(dir.path()).unwrap();
    let taken = earlier.fork("s", "s:2").unwrap();
    drop(earlier);
    let forker = FileBackend::new(dir.path()).unwrap();
    let compactor_dir = dir.path().to_path_buf();
    let branch = taken.clone();
    let ran = once_at(Point::ClaimBeforeCreate, move || {
        let compactor = FileBackend::new(&compactor_dir).unwrap();
        assert_eq!(compactor.compact(&branch).unwrap().records, 3);
    });
    // The forker's first look is at n = 0: no compacted file yet, so the hook runs there.
    let new_id = forker.fork("s", "s:2").unwrap();
    hooks::clear();
    assert!(ran.get());
    assert_ne!(new_id, taken);
    assert!(forker.is_compacted(&taken).unwrap());
    assert!(!dir.path().join(format!("{taken}.cslog")).exists());
    assert_eq!(forker.replay(&taken).unwrap().len(), 3);
    assert_eq!(forker.replay(&new_id).unwrap().len(), 3);
}
