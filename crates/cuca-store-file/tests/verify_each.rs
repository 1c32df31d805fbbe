//! `FileBackend::verify_each`: the same verdict, counts, skipped frames and torn tail as
//! `verify`, with every record handed to the visitor instead of kept.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use cuca_events::{PluginError, SessionBackend, SessionEvent, SessionRecord};
use cuca_store_file::{FileBackend, ScanSummary, Verdict};
use proptest::prelude::*;

fn write_session(dir: &Path, n: u64) {
    let backend = FileBackend::new(dir).unwrap();
    for sequence in 0..n {
        backend
            .append(SessionRecord {
                session_id: "s".into(),
                sequence,
                timestamp_ms: 1_700_000_000_000 + sequence,
                event: SessionEvent::Output {
                    text: format!("token {sequence}"),
                },
            })
            .unwrap();
    }
}

fn each(backend: &FileBackend) -> (ScanSummary, Vec<SessionRecord>) {
    let mut seen = Vec::new();
    let summary = backend
        .verify_each("s", &mut |record| {
            seen.push(record.into_owned());
            Ok(())
        })
        .unwrap();
    (summary, seen)
}

fn assert_same_as_verify(backend: &FileBackend) {
    let report = backend.verify("s").unwrap();
    let (summary, seen) = each(backend);
    assert_eq!(summary.path, report.path);
    assert_eq!(summary.file_len, report.file_len);
    assert_eq!(summary.n_records, report.records.len() as u64);
    assert_eq!(summary.skipped, report.skipped);
    assert_eq!(summary.torn_tail_bytes, report.torn_tail_bytes);
    assert_eq!(summary.verdict, report.verdict);
    assert_eq!(summary.is_loadable(), report.is_loadable());
    assert_eq!(seen, report.records);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Damage anywhere (a byte overwritten, the file cut short) is reported by verify_each
    /// exactly as verify reports it, live and compacted.
    #[test]
    fn verify_each_reports_what_verify_reports(n in 1u64..12, at in any::<prop::sample::Index>(), byte in any::<u8>(), cut in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        write_session(dir.path(), n);
        let file = dir.path().join("s.cslog");
        let mut bytes = std::fs::read(&file).unwrap();
        let i = at.index(bytes.len());
        if cut {
            bytes.truncate(i);
        } else {
            bytes[i] = byte;
        }
        std::fs::write(&file, &bytes).unwrap();
        let backend = FileBackend::new(dir.path()).unwrap();
        assert_same_as_verify(&backend);
    }
}

#[test]
fn verify_each_reads_a_compacted_session_and_stops_at_a_visitor_error() {
    let dir = tempfile::tempdir().unwrap();
    write_session(dir.path(), 5);
    let backend = FileBackend::new(dir.path()).unwrap();
    backend.compact("s").unwrap();
    assert_same_as_verify(&backend);
    let (summary, _) = each(&backend);
    assert_eq!((summary.n_records, summary.verdict), (5, Verdict::Clean));

    let mut seen = 0;
    let stopped = backend.verify_each("s", &mut |_| {
        seen += 1;
        Err(PluginError::validation("test", "enough"))
    });
    assert!(matches!(stopped, Err(PluginError::Validation { .. })));
    assert_eq!(seen, 1);
    assert!(matches!(
        backend.verify_each("absent", &mut |_| Ok(())),
        Err(PluginError::NotFound { .. })
    ));
}
