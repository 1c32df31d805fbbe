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
    MAX_FRAME_LEN,
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
        // A lone 0x00 seals torn bytes, unless they are a whole frame short only of its
        // terminator: then 0x02 0x01 0x00, so they can never read as an unacknowledged record.
        let whole = tear == torn.len() - 1;
        let seal: &[u8] = if whole { &[2, 1, 0] } else { &[0] };
        prop_assert_eq!(&after[bytes.len()..bytes.len() + seal.len()], seal);

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
