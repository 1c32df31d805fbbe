//! Session ids too long for one file name: stored under an overflow name, found by their true
//! id by every operation, listed by it, and never sharing a file with another id.

// The helpers below are test code outside `#[test]` fns, where clippy's test allowance ends.
#![allow(clippy::unwrap_used)]

use cuca_events::{PluginError, SessionBackend, SessionEvent, SessionRecord};
use cuca_store_file::{FileBackend, Verdict, MAX_FILE_NAME_LEN};
use cuca_testkit::record;

fn output(session: &str, sequence: u64) -> SessionRecord {
    record(
        session,
        sequence,
        SessionEvent::Output {
            text: format!("record {sequence}"),
        },
    )
}

/// "Nested forks die after a few levels … a UUID session can be forked only twice." Forks
/// nested ten deep: the ids that fit keep `{session_id}.cslog`, the others take overflow
/// names; a restarted backend lists, replays, verifies, compacts and forks them by their true
/// ids.
#[test]
fn forks_nested_ten_deep_are_stored_listed_and_found_by_their_true_ids() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let root = "0b3c5a6e-9d2f-4f1a-8c7b-2e4d6f8a0c1e";
    for sequence in 0..3 {
        backend.append(output(root, sequence)).unwrap();
    }
    let mut ids = vec![root.to_owned()];
    for _ in 0..10 {
        let parent = ids.last().unwrap().clone();
        ids.push(backend.fork(&parent, &format!("{parent}:1")).unwrap());
    }
    drop(backend);

    // On disk: every name fits; the first levels keep the seed's name.
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 11);
    assert!(names.iter().all(|name| name.len() <= MAX_FILE_NAME_LEN));
    for id in &ids[..3] {
        assert!(names.contains(&format!("{id}.cslog")), "{id}");
    }
    assert!(names.iter().filter(|name| name.starts_with(root)).count() == 11);

    let restarted = FileBackend::new(dir.path()).unwrap();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(restarted.sessions().unwrap(), expected);
    let deepest = ids.last().unwrap();
    assert!(deepest.len() > 40_000);
    let branch = restarted.replay(deepest).unwrap();
    assert_eq!(branch.len(), 2);
    assert!(branch.iter().all(|record| record.session_id == *deepest));
    assert_eq!(restarted.verify(deepest).unwrap().verdict, Verdict::Clean);
    restarted.append(output(deepest, 2)).unwrap();

    // Compacted, it is still found and listed once; written to, it expands again.
    let compaction = restarted.compact(deepest).unwrap();
    assert_eq!(compaction.records, 3);
    assert!(compaction.path.file_name().unwrap().len() <= MAX_FILE_NAME_LEN);
    assert!(restarted.is_compacted(deepest).unwrap());
    assert_eq!(restarted.sessions().unwrap(), expected);
    assert_eq!(restarted.replay(deepest).unwrap().len(), 3);
    restarted.append(output(deepest, 3)).unwrap();
    assert_eq!(restarted.replay(deepest).unwrap().len(), 4);

    // The tenth level forks on; the parent gets its audit record.
    let eleventh = restarted.fork(&ids[9], &format!("{}:0", ids[9])).unwrap();
    assert_eq!(restarted.replay(&eleventh).unwrap().len(), 1);
    assert!(matches!(
        &restarted.replay(&ids[9]).unwrap().last().unwrap().event,
        SessionEvent::Fork { to_session, .. } if *to_session == eleventh
    ));
}

/// "Never lets two ids collide": a file under one id's overflow name that holds another
/// id's records (a copy, a rename, a hash collision) is never appended to.
#[test]
fn a_file_under_an_overflow_name_holding_another_id_is_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let mine = format!("{}-mine", "m".repeat(300));
    let theirs = format!("{}-theirs", "t".repeat(300));
    backend.append(output(&theirs, 0)).unwrap();
    backend.close(&theirs);
    let their_file = backend.session_path(&theirs).unwrap();
    let my_file = backend.session_path(&mine).unwrap();
    assert_ne!(their_file, my_file);
    std::fs::copy(&their_file, &my_file).unwrap();
    let before = std::fs::read(&my_file).unwrap();
    match backend.append(output(&mine, 1)) {
        Err(PluginError::Backend { message, .. }) => {
            assert!(
                message.contains("two ids share one overflow name"),
                "{message}"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(std::fs::read(&my_file).unwrap(), before);
    // The copy is not listed as `mine`: its records name `theirs`, whose name it is not.
    assert_eq!(backend.sessions().unwrap(), vec![theirs.clone()]);
}
