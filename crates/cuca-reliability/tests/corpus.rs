//! The damaged-`.cslog` corpus under `tests/corpus/`: each file's expected verdict is in
//! `tests/corpus/MANIFEST`, stated by hand from the recovery rule; the scan, `FileBackend`'s
//! replay and verify, and the session-log plugin must all agree with it. (`cuca verify` prints
//! the same `scan` report; its agreement with the scan is the CLI's own tests' business.)
//!
//! `CUCA_BLESS=1` rewrites the corpus from `cuca_reliability::corpus`.
// Helpers outside `#[test]` functions unwrap too: a failure there should stop the test.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cuca_events::{PluginError, SessionBackend, SessionRecord};
use cuca_reliability::corpus::{self, Case, Expected};
use cuca_session_log::SessionLogPlugin;
use cuca_store_file::{scan, scan_bytes, FileBackend, Verdict};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// Every record a corpus file may legitimately hand back.
fn originals() -> Vec<SessionRecord> {
    let mut all = corpus::records("demo", 0, 5);
    all.extend(corpus::records("other", 0, 3));
    all
}

fn check_verdict(case: &Case, verdict: &Verdict, n_records: usize) {
    match (case.expected, verdict) {
        (Expected::Clean(n), Verdict::Clean) | (Expected::Recovered(n), Verdict::Recovered) => {
            assert_eq!(n_records, n, "{}: record count", case.name)
        }
        (Expected::Refused(offset), Verdict::Refused { offset: found, .. }) => {
            assert_eq!(*found, offset, "{}: refusal offset", case.name)
        }
        (expected, found) => panic!("{}: expected {expected:?}, scan says {found:?}", case.name),
    }
}

#[test]
fn the_committed_corpus_is_the_generated_one() {
    let dir = corpus_dir();
    if std::env::var_os("CUCA_BLESS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for case in corpus::cases() {
            std::fs::write(dir.join(case.name), &case.bytes).unwrap();
        }
        std::fs::write(dir.join("MANIFEST"), corpus::manifest()).unwrap();
    }
    let manifest = std::fs::read_to_string(dir.join("MANIFEST")).unwrap();
    assert_eq!(
        manifest,
        corpus::manifest(),
        "MANIFEST is stale: run with CUCA_BLESS=1"
    );
    for case in corpus::cases() {
        let committed = std::fs::read(dir.join(case.name)).unwrap();
        assert_eq!(
            committed, case.bytes,
            "{} is stale: run with CUCA_BLESS=1",
            case.name
        );
    }
    let n_files = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(
        n_files,
        corpus::cases().len() + 1,
        "a file in tests/corpus/ is not in the manifest"
    );
}

#[test]
fn the_scan_agrees_with_the_manifest_for_every_damaged_file() {
    let manifest = std::fs::read_to_string(corpus_dir().join("MANIFEST")).unwrap();
    let originals = originals();
    let mut n_checked = 0;
    for case in corpus::cases() {
        let line = manifest
            .lines()
            .find(|line| line.split('\t').next() == Some(case.name))
            .unwrap();
        assert_eq!(
            line.split('\t').nth(1),
            Some(case.expected.to_manifest().as_str())
        );
        let path = corpus_dir().join(case.name);
        let report = scan(&path).unwrap();
        check_verdict(&case, &report.verdict, report.records.len());
        assert_eq!(report.file_len, case.bytes.len() as u64);
        // Never silently wrong: whatever the verdict, every record handed back is one that
        // was written, never a damaged frame decoded into something else.
        for record in &report.records {
            assert!(
                originals.contains(record),
                "{}: {record:?} was never written",
                case.name
            );
        }
        n_checked += 1;
    }
    assert_eq!(n_checked, corpus::cases().len());
}

#[test]
fn file_backend_replay_and_verify_agree_with_the_manifest_and_change_nothing() {
    for case in corpus::cases() {
        let dir = tempfile::tempdir().unwrap();
        let session = case.name.trim_end_matches(".cslog");
        let path = dir.path().join(case.name);
        std::fs::write(&path, &case.bytes).unwrap();
        let backend = FileBackend::new(dir.path()).unwrap();

        let replayed = backend.replay(session);
        let verified = backend.verify(session).unwrap();
        check_verdict(&case, &verified.verdict, verified.records.len());
        match (case.expected, replayed) {
            (Expected::Clean(n) | Expected::Recovered(n), Ok(records)) => {
                assert_eq!(records.len(), n, "{}", case.name);
                assert_eq!(records, verified.records, "{}", case.name);
            }
            (
                Expected::Refused(offset),
                Err(PluginError::Corrupt {
                    path: named,
                    offset: at,
                    ..
                }),
            ) => {
                assert_eq!(at, offset, "{}", case.name);
                assert_eq!(named, path, "{}: the error names the file", case.name);
            }
            (expected, got) => panic!("{}: expected {expected:?}, replay gave {got:?}", case.name),
        }
        assert_eq!(
            std::fs::read(&path).unwrap(),
            case.bytes,
            "{}: a read changed the file",
            case.name
        );
    }
}

#[test]
fn a_plugin_resumes_every_loadable_damaged_file_and_refuses_the_rest_untouched() {
    // "the next append first writes a lone 0x00 to seal the torn bytes into their own frame,
    // then its own frame" — and a refused file gets no byte at all.
    for case in corpus::cases() {
        let dir = tempfile::tempdir().unwrap();
        let session = case.name.trim_end_matches(".cslog");
        let path = dir.path().join(case.name);
        std::fs::write(&path, &case.bytes).unwrap();
        let backend: Arc<dyn SessionBackend> = Arc::new(FileBackend::new(dir.path()).unwrap());
        let plugin = SessionLogPlugin::new(Arc::clone(&backend)).with_session_id(session);
        let event = cuca_events::SessionEvent::Output {
            text: "after the damage".into(),
        };
        let appended = plugin.append_log(event.clone());
        match case.expected {
            Expected::Refused(offset) => {
                match appended {
                    Err(PluginError::Corrupt { offset: at, .. }) => {
                        assert_eq!(at, offset, "{}", case.name)
                    }
                    other => panic!("{}: expected a refusal, got {other:?}", case.name),
                }
                assert_eq!(
                    std::fs::read(&path).unwrap(),
                    case.bytes,
                    "{}: refused but written",
                    case.name
                );
            }
            Expected::Clean(n) | Expected::Recovered(n) => {
                let record = appended.unwrap();
                let before = scan_bytes(&case.bytes, &path).records;
                let tail = before.last().map_or(0, |last| last.sequence + 1);
                assert_eq!(
                    record.sequence, tail,
                    "{}: the plugin continues at last + 1",
                    case.name
                );
                let after = scan(&path).unwrap();
                assert!(after.is_loadable(), "{}: {:?}", case.name, after.verdict);
                assert_eq!(
                    after.records.len(),
                    n + 1,
                    "{}: nothing lost, one added",
                    case.name
                );
                assert_eq!(after.records[..n], before[..], "{}", case.name);
                assert_eq!(after.records[n].event, event, "{}", case.name);
            }
        }
    }
}

#[test]
fn no_truncation_or_bit_flip_of_any_corpus_file_yields_a_record_never_written() {
    // The corpus as seeds: every prefix of every file, and every single-bit flip of every file
    // under 1 KiB, scanned. None may panic or hand back a record that was not written.
    let originals = originals();
    let (mut inputs, mut refused) = (0u64, 0u64);
    let path = Path::new("mutant.cslog");
    for case in corpus::cases() {
        let mut check = |bytes: &[u8]| {
            let report = scan_bytes(bytes, path);
            inputs += 1;
            refused += u64::from(!report.is_loadable());
            for record in &report.records {
                assert!(
                    originals.contains(record),
                    "{}: a mutant decoded into {record:?}",
                    case.name
                );
            }
        };
        for len in 0..=case.bytes.len() {
            check(&case.bytes[..len]);
        }
        if case.bytes.len() < 1024 {
            for bit in 0..case.bytes.len() * 8 {
                let mut bytes = case.bytes.clone();
                bytes[bit / 8] ^= 1 << (bit % 8);
                check(&bytes);
            }
        }
    }
    eprintln!("FIGURES corpus mutants: inputs={inputs} refused={refused}");
    assert!(inputs > 10_000, "{inputs}");
}
