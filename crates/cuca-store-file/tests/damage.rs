//! Damage properties: truncation at every byte, bit flips, appends after a torn tail, and
//! arbitrary bytes fed to the reader.

// The helpers below are test code outside `#[test]` fns, where clippy's test allowance ends.
#![allow(clippy::unwrap_used)]

use std::io::Read;
use std::path::Path;

use cuca_events::{SessionBackend, SessionEvent, SessionRecord};
use cuca_store_file::golden::all_variants;
use cuca_store_file::{
    encode_frame, scan_bytes, scan_reader, FileBackend, FrameError, Verdict, HEADER, HEADER_LEN,
    MAX_FRAME_LEN, SEAL_MARK,
};
use proptest::prelude::*;

fn file_of(records: &[SessionRecord]) -> (Vec<u8>, Vec<usize>) {
    let mut bytes = HEADER.to_vec();
    let mut ends = Vec::new();
    for record in records {
        encode_frame(record, &mut bytes).unwrap();
        ends.push(bytes.len());
    }
    (bytes, ends)
}

fn arb_records() -> impl Strategy<Value = Vec<SessionRecord>> {
    prop::collection::vec(
        prop_oneof![
            ".{0,40}".prop_map(|text| SessionEvent::Output { text }),
            ".{0,300}".prop_map(|text| SessionEvent::Reasoning { text }),
            any::<u64>().prop_map(|duration_ms| SessionEvent::Latency { duration_ms }),
        ],
        1..8,
    )
    .prop_map(|events| {
        events
            .into_iter()
            .enumerate()
            .map(|(sequence, event)| SessionRecord {
                session_id: "s".into(),
                sequence: sequence as u64,
                timestamp_ms: 1_700_000_000_000,
                event,
            })
            .collect()
    })
}

/// The records a reader must return for `bytes[..cut]`: those whose frame ends by `cut`.
fn complete_prefix(records: &[SessionRecord], ends: &[usize], cut: usize) -> Vec<SessionRecord> {
    let n = ends.iter().take_while(|&&end| end <= cut).count();
    records[..n].to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// "a torn tail (bytes after the last 0x00) is what a crash mid-append leaves: replay
    /// returns the complete records before it"
    #[test]
    fn truncation_at_every_offset_yields_the_complete_record_prefix(records in arb_records()) {
        let (bytes, ends) = file_of(&records);
        for cut in 0..=bytes.len() {
            let report = scan_bytes(&bytes[..cut], Path::new("t.cslog"));
            prop_assert!(report.is_loadable(), "cut at {}: {:?}", cut, report.verdict);
            prop_assert_eq!(report.records, complete_prefix(&records, &ends, cut));
            prop_assert!(report.skipped.is_empty());
            let at_boundary = cut == bytes.len() || cut == HEADER_LEN || ends.contains(&cut);
            prop_assert_eq!(report.verdict == Verdict::Clean, at_boundary || cut == 0);
        }
    }

    /// "the next append first writes a lone 0x00 to seal the torn bytes into their own frame,
    /// then its own frame" — nothing acknowledged is lost, whatever the tear.
    #[test]
    fn appending_after_a_torn_tail_loses_nothing_acknowledged(
        records in arb_records(),
        more in arb_records(),
        tear in 1usize..200,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let backend = FileBackend::new(dir.path()).unwrap();
        for record in &records {
            backend.append(record.clone()).unwrap();
        }
        drop(backend);
        // A crash mid-append: part of the next frame reached the file.
        let mut torn = Vec::new();
        encode_frame(&SessionRecord { sequence: records.len() as u64, ..records[0].clone() }, &mut torn).unwrap();
        let tear = tear.min(torn.len() - 1);
        let path = dir.path().join("s.cslog");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&torn[..tear]);
        std::fs::write(&path, &bytes).unwrap();

        let backend = FileBackend::new(dir.path()).unwrap();
        prop_assert_eq!(backend.replay("s").unwrap(), records.clone());
        // The resumed plugin reuses the unacknowledged sequence number.
        let resumed: Vec<SessionRecord> = more
            .iter()
            .map(|record| SessionRecord { sequence: record.sequence + records.len() as u64, ..record.clone() })
            .collect();
        for record in &resumed {
            backend.append(record.clone()).unwrap();
        }
        let mut expected = records.clone();
        expected.extend(resumed.iter().cloned());
        prop_assert_eq!(backend.replay("s").unwrap(), expected.clone());
        let report = backend.verify("s").unwrap();
        prop_assert_eq!(report.verdict, Verdict::Recovered);
        prop_assert_eq!(report.skipped.len(), 1);
        prop_assert_eq!(report.skipped[0].offset, bytes.len() as u64 - tear as u64);
        // The file is the old bytes, the torn bytes, the seal, then whole frames: never rewritten.
        let after = std::fs::read(&path).unwrap();
        prop_assert_eq!(&after[..bytes.len()], bytes.as_slice());
        // The seal: SEAL_MARK then 0x00, whatever the tear (a whole frame short only of its
        // terminator included: it never reads as an unacknowledged record).
        let seal = [SEAL_MARK.as_slice(), &[0]].concat();
        prop_assert_eq!(&after[bytes.len()..bytes.len() + seal.len()], seal.as_slice());
        prop_assert_eq!(report.skipped[0].sealed, 1);

        // A second crash during the sealing append, at every offset: still loadable, still
        // exactly the acknowledged records up to the cut.
        let sealed_frames_start = bytes.len() + seal.len();
        for cut in bytes.len()..after.len() {
            let report = scan_bytes(&after[..cut], Path::new("s.cslog"));
            prop_assert!(report.is_loadable(), "cut at {}: {:?}", cut, report.verdict);
            let n_resumed = report.records.len() - records.len();
            prop_assert_eq!(&report.records[..], &expected[..records.len() + n_resumed]);
            prop_assert!(cut >= sealed_frames_start || n_resumed == 0);
        }
    }

    /// Arbitrary bytes, with or without a valid header, never panic the reader, and it never
    /// returns more records than there are frames.
    #[test]
    fn arbitrary_bytes_never_panic_the_reader(body in prop::collection::vec(any::<u8>(), 0..2048), with_header: bool) {
        let mut bytes = if with_header { HEADER.to_vec() } else { Vec::new() };
        bytes.extend_from_slice(&body);
        let report = scan_bytes(&bytes, Path::new("fuzz.cslog"));
        let n_frames = bytes.iter().skip(HEADER_LEN).filter(|&&b| b == 0).count();
        prop_assert!(report.records.len() + report.skipped.len() <= n_frames);
        prop_assert_eq!(report.file_len, bytes.len() as u64);
        let streamed = scan_reader(bytes.as_slice(), Path::new("fuzz.cslog")).unwrap();
        prop_assert_eq!(streamed, report);
    }
}

/// "with a CRC inside the frame, none do [decode to a different, valid-looking record]":
/// every single-bit flip of every byte is detected and never yields a different record.
#[test]
fn every_single_bit_flip_is_detected_and_never_a_different_record() {
    let records = all_variants();
    let (bytes, _) = file_of(&records);
    let mut n_flips = 0;
    for at in 0..bytes.len() {
        for bit in 0..8 {
            let mut damaged = bytes.clone();
            damaged[at] ^= 1 << bit;
            let report = scan_bytes(&damaged, Path::new("flip.cslog"));
            assert_ne!(
                report.verdict,
                Verdict::Clean,
                "flip at byte {at} bit {bit} went unseen"
            );
            for record in &report.records {
                assert_eq!(
                    Some(record),
                    records.get(record.sequence as usize),
                    "flip at byte {at} bit {bit} produced a different record"
                );
            }
            if at < HEADER_LEN {
                assert!(matches!(report.verdict, Verdict::Refused { .. }));
            }
            n_flips += 1;
        }
    }
    assert_eq!(n_flips, bytes.len() * 8);
}

/// "a frame longer than a documented maximum is damage, not an allocation": a run of
/// non-zero bytes past the maximum is skipped without being buffered, and reading goes on.
#[test]
fn an_overlong_frame_is_skipped_and_the_next_record_still_reads() {
    let records = all_variants();
    let mut tail = vec![0u8];
    encode_frame(&records[1], &mut tail).unwrap();
    let first = {
        let mut bytes = HEADER.to_vec();
        encode_frame(&records[0], &mut bytes).unwrap();
        bytes
    };
    let overlong = std::io::repeat(0x41).take(MAX_FRAME_LEN as u64 + 10);
    let reader = first.as_slice().chain(overlong).chain(tail.as_slice());
    let report = scan_reader(reader, Path::new("long.cslog")).unwrap();
    assert_eq!(report.records, records[..2].to_vec());
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].offset, first.len() as u64);
    assert_eq!(
        report.skipped[0].reason,
        FrameError::TooLong {
            len: MAX_FRAME_LEN as u64 + 10,
            max: MAX_FRAME_LEN as u64
        }
    );
    assert_eq!(report.verdict, Verdict::Recovered);
}

/// A bit flip inside the last complete (terminated) frame of a file is not read like a torn
/// tail: damage to any acknowledged frame refuses the load, with `PluginError::Corrupt` naming
/// file and offset. Every bit of the last frame, its
/// terminator included, through `replay` and `replay_each`.
#[test]
fn every_bit_flip_of_the_last_acknowledged_frame_refuses_the_load_naming_file_and_offset() {
    let records = all_variants();
    let (bytes, ends) = file_of(&records);
    let last_start = ends[ends.len() - 2];
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let path = dir.path().join("golden.cslog");
    let mut n_refused = 0;
    for at in last_start..bytes.len() {
        for bit in 0..8 {
            let mut damaged = bytes.clone();
            damaged[at] ^= 1 << bit;
            std::fs::write(&path, &damaged).unwrap();
            match backend.replay("golden") {
                Err(cuca_events::PluginError::Corrupt {
                    path: named,
                    offset,
                    message,
                }) => {
                    assert_eq!(named, path);
                    // The damage is reported where the last frame starts (a flip to 0x00
                    // splits it: then at its first half, or at the empty frame before it).
                    assert!(
                        (last_start as u64..=at as u64).contains(&offset),
                        "flip at {at} bit {bit}: offset {offset}: {message}"
                    );
                }
                other => panic!("flip at byte {at} bit {bit}: {other:?}"),
            }
            let mut visited = 0;
            let each = backend.replay_each("golden", &mut |_| {
                visited += 1;
                Ok(())
            });
            assert!(
                matches!(each, Err(cuca_events::PluginError::Corrupt { .. })),
                "{each:?}"
            );
            n_refused += 1;
        }
    }
    assert_eq!(n_refused, (bytes.len() - last_start) * 8);
}

/// "Keep reading files written by today's code … a file written before the change whose last
/// frame is damaged may keep today's reading": the same flips in a v1 file load as before.
#[test]
fn a_v1_file_whose_last_frame_is_damaged_keeps_the_v1_reading() {
    let records = all_variants();
    let (mut bytes, ends) = file_of(&records);
    bytes[HEADER_LEN - 1] = cuca_store_file::VERSION_1;
    let last_start = ends[ends.len() - 2];
    for at in last_start..bytes.len() - 1 {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x01;
        let report = scan_bytes(&damaged, Path::new("v1.cslog"));
        assert_eq!(report.verdict, Verdict::Recovered, "flip at {at}");
        assert_eq!(report.records, records[..records.len() - 1].to_vec());
    }
}

/// The case the seal exists for, in a v2 file: a torn append sealed by the next open, and that
/// sealing append cut short too, at every byte. Nothing was acknowledged after the last good
/// record, so every cut loads; and the sealed frame is told apart from damage (`sealed`).
#[test]
fn a_sealed_torn_frame_at_the_end_loads_however_the_sealing_append_was_cut() {
    let records = all_variants();
    let (mut bytes, _) = file_of(&records[..5]);
    let mut torn = Vec::new();
    encode_frame(&records[5], &mut torn).unwrap();
    bytes.extend_from_slice(&torn[..torn.len() / 2]);
    let torn_start = bytes.len() - torn.len() / 2;
    let mut sealing = SEAL_MARK.to_vec();
    sealing.push(0);
    encode_frame(&records[5], &mut sealing).unwrap();
    let full = [bytes.as_slice(), &sealing].concat();
    for cut in bytes.len()..=full.len() {
        let report = scan_bytes(&full[..cut], Path::new("s.cslog"));
        assert!(report.is_loadable(), "cut at {cut}: {:?}", report.verdict);
        let sealed_end = bytes.len() + SEAL_MARK.len() + 1;
        if cut >= sealed_end {
            assert_eq!(report.skipped[0].offset, torn_start as u64);
            assert_eq!(report.skipped[0].sealed, 1);
        }
        let n = if cut == full.len() { 6 } else { 5 };
        assert_eq!(report.records, records[..n].to_vec(), "cut at {cut}");
    }
}

/// A report summarises a run of damage instead of listing every byte (each 0x00 is a
/// separate skipped frame): 4 MiB of zeros after the last record are one skipped run
/// of 4 Mi empty frames, however many read chunks they span.
#[test]
fn a_run_of_zero_bytes_is_one_skipped_run_not_one_entry_per_byte() {
    let records = all_variants();
    let (bytes, _) = file_of(&records);
    let zeros = 4 << 20;
    let reader = bytes.as_slice().chain(std::io::repeat(0).take(zeros));
    let report = scan_reader(reader, Path::new("zeros.cslog")).unwrap();
    assert_eq!(report.records, records);
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].offset, bytes.len() as u64);
    assert_eq!(report.skipped[0].frames, zeros);
    assert_eq!(report.skipped[0].len, zeros - 1);
    assert_eq!(report.skipped[0].reason, FrameError::Empty);
    assert_eq!((report.skipped_runs, report.skipped_frames), (1, zeros));
    // Zeros are what a power cut leaves where data never reached the disk: the v2 reading
    // lets them pass at the end, like a torn tail.
    assert_eq!(report.verdict, Verdict::Recovered);
}

/// However many separate runs of damage a file holds, a report lists at most
/// `MAX_LISTED` and counts the rest.
#[test]
fn a_report_lists_at_most_max_listed_runs_and_counts_the_rest() {
    let records: Vec<SessionRecord> = (0..500)
        .map(|sequence| SessionRecord {
            session_id: "s".into(),
            sequence,
            timestamp_ms: 0,
            event: SessionEvent::Latency {
                duration_ms: sequence,
            },
        })
        .collect();
    let mut bytes = HEADER.to_vec();
    for record in &records {
        // A garbage frame before each record; the sequence continues across every one.
        bytes.extend_from_slice(&[0x07, 0x07, 0x00]);
        encode_frame(record, &mut bytes).unwrap();
    }
    let report = scan_bytes(&bytes, Path::new("many.cslog"));
    assert_eq!(report.verdict, Verdict::Recovered);
    assert_eq!(report.records, records);
    assert_eq!(report.skipped.len(), cuca_store_file::MAX_LISTED);
    assert_eq!(report.skipped_runs, 500);
    assert_eq!(report.skipped_frames, 500);
    assert_eq!(report.skipped_bytes, 500 * 2);
}

fn seq_record(session_id: &str, sequence: u64) -> SessionRecord {
    SessionRecord {
        session_id: session_id.into(),
        sequence,
        timestamp_ms: 0,
        event: SessionEvent::Latency {
            duration_ms: sequence,
        },
    }
}

fn raw_file(version: u8, records: &[SessionRecord]) -> Vec<u8> {
    let (mut bytes, _) = file_of(records);
    bytes[HEADER_LEN - 1] = version;
    bytes
}

/// `verify` reports a sequence that goes backwards, and flags duplicates in any file. A v2 writer refuses both, so in a v2 file they refuse the
/// load at the record; a v1 writer stored sequences as given, so a v1 file loads as before
/// and the report carries the findings.
#[test]
fn repeated_and_backward_sequences_refuse_a_v2_file_and_are_findings_in_a_v1_file() {
    let cases: [(&[u64], usize, cuca_store_file::FindingKind); 2] = [
        (
            &[0, 1, 1, 2],
            2,
            cuca_store_file::FindingKind::RepeatedSequence,
        ),
        (
            &[0, 2, 1, 3],
            2,
            cuca_store_file::FindingKind::BackwardSequence { previous: 2 },
        ),
    ];
    for (sequences, bad, kind) in cases {
        let records: Vec<SessionRecord> = sequences
            .iter()
            .map(|&sequence| seq_record("s", sequence))
            .collect();
        let (_, ends) = file_of(&records);
        let offset = ends[bad - 1] as u64;

        let v2 = scan_bytes(&raw_file(2, &records), Path::new("s.cslog"));
        assert_eq!(v2.findings.len(), 1, "{sequences:?}");
        assert_eq!(v2.findings[0].offset, offset);
        assert_eq!(v2.findings[0].kind, kind);
        let Verdict::Refused { offset: at, reason } = &v2.verdict else {
            panic!("{sequences:?}: {:?}", v2.verdict)
        };
        assert_eq!(*at, offset);
        assert!(reason.contains("sequence"), "{reason}");

        let v1 = scan_bytes(&raw_file(1, &records), Path::new("s.cslog"));
        assert_eq!(v1.verdict, Verdict::Clean, "{sequences:?}");
        assert_eq!(v1.findings, v2.findings);
        assert_eq!(v1.findings_total, 1);
        assert_eq!(v1.records, records);
    }
}

/// `verify` reports a file whose records carry another session id than the file's name (a
/// renamed or copied file). The records are still what was recorded, each under the
/// id it carries, so the load goes on; the report names the first foreign record.
#[test]
fn a_renamed_file_is_a_finding_of_verify_and_still_loads() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<SessionRecord> = (0..3).map(|sequence| seq_record("a", sequence)).collect();
    std::fs::write(dir.path().join("b.cslog"), raw_file(2, &records)).unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    let report = backend.verify("b").unwrap();
    assert_eq!(report.verdict, Verdict::Clean);
    assert_eq!(report.findings_total, 3);
    assert_eq!(report.findings[0].offset, HEADER_LEN as u64);
    assert_eq!(
        report.findings[0].kind,
        cuca_store_file::FindingKind::ForeignSession {
            found: "a".into(),
            expected: "b".into()
        }
    );
    assert!(report.findings[0].to_string().contains("renamed or copied"));
    assert_eq!(backend.replay("b").unwrap(), records);
    // Read without a session to compare with, a file is judged by its first record's id.
    let alone = cuca_store_file::scan(&dir.path().join("b.cslog")).unwrap();
    assert!(alone.findings.is_empty());
}

/// "Keep reading files written by today's code": a v1 file is appended to as it is (its
/// version byte never rewritten), a torn tail in it is sealed with the v2 seal, and it reads
/// back whole.
#[test]
fn a_v1_file_is_appended_to_and_stays_v1() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<SessionRecord> = (0..4).map(|sequence| seq_record("s", sequence)).collect();
    let mut bytes = raw_file(1, &records[..2]);
    bytes.extend_from_slice(&[0x05, 0x73]); // a torn tail
    let path = dir.path().join("s.cslog");
    std::fs::write(&path, &bytes).unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    for record in &records[2..] {
        backend.append(record.clone()).unwrap();
    }
    let after = std::fs::read(&path).unwrap();
    assert_eq!(&after[..bytes.len()], bytes.as_slice());
    assert_eq!(after[HEADER_LEN - 1], 1);
    assert_eq!(
        &after[bytes.len()..bytes.len() + SEAL_MARK.len()],
        &SEAL_MARK
    );
    let report = backend.verify("s").unwrap();
    assert_eq!(report.version, Some(1));
    assert_eq!(report.verdict, Verdict::Recovered);
    assert_eq!(report.skipped[0].sealed, 1);
    assert_eq!(backend.replay("s").unwrap(), records);
}
