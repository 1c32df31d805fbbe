//! The golden fixtures: built again in memory and compared byte for byte (the `--check` of
//! `cargo xtask fixtures`), and read by an independent minimal reader written here.

use std::path::{Path, PathBuf};

use cuca_store_file::golden::{all_variants, golden_files};
use cuca_store_file::{scan, scan_bytes, Verdict};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// "The format is pinned by committed golden fixtures that `cargo xtask fixtures` regenerates
/// and a test checks byte for byte."
#[test]
fn committed_fixtures_match_the_generator_byte_for_byte() {
    let files = golden_files().unwrap();
    assert_eq!(files.len(), 8);
    for golden in files {
        let path = fixtures_dir().join(golden.name);
        let on_disk = std::fs::read(&path).unwrap_or_else(|error| {
            panic!("{}: {error}; run `cargo xtask fixtures`", path.display())
        });
        assert!(
            on_disk == golden.bytes,
            "{} differs from the generator; if the format change is intended, bump the version byte, keep a v1 reader, and run `cargo xtask fixtures`",
            golden.name
        );
    }
}

#[test]
fn fixtures_read_back_as_their_descriptions_say() {
    let dir = fixtures_dir();
    let records = all_variants();

    let empty = scan(&dir.join("empty.cslog")).unwrap();
    assert_eq!((empty.verdict, empty.records.len()), (Verdict::Clean, 0));

    let all = scan(&dir.join("all_variants.cslog")).unwrap();
    assert_eq!(all.verdict, Verdict::Clean);
    assert_eq!(all.records, records);

    let torn = scan(&dir.join("torn_tail.cslog")).unwrap();
    assert_eq!(torn.verdict, Verdict::Recovered);
    assert_eq!(torn.records, records);
    assert!(torn.torn_tail_bytes > 0);
    assert!(torn.skipped.is_empty());

    let sealed = scan(&dir.join("sealed.cslog")).unwrap();
    assert_eq!(sealed.version, Some(2));
    assert_eq!(sealed.verdict, Verdict::Recovered);
    assert_eq!(sealed.records.len(), 11);
    assert_eq!(sealed.records[10].sequence, 10);
    assert_eq!(sealed.skipped.len(), 1);
    assert_eq!(sealed.skipped[0].offset, all.file_len);
    assert_eq!(sealed.skipped[0].sealed, 1);
    assert_eq!(sealed.torn_tail_bytes, 0);

    let gap = scan(&dir.join("gap.cslog")).unwrap();
    assert!(
        matches!(gap.verdict, Verdict::Refused { .. }),
        "{:?}",
        gap.verdict
    );
    let error = gap.into_records().unwrap_err().to_string();
    assert!(error.contains("gap.cslog is damaged at byte"), "{error}");
    assert!(error.contains("from sequence 2 to sequence 4"), "{error}");

    // v2: the last frame damaged has no record after it, and is no sealed torn frame.
    let damaged_last = scan(&dir.join("damaged_last.cslog")).unwrap();
    let Verdict::Refused { offset, .. } = damaged_last.verdict else {
        panic!("{:?}", damaged_last.verdict)
    };
    let last_frame_start = damaged_last.skipped[0].offset;
    assert_eq!(offset, last_frame_start);
    assert_eq!(damaged_last.records, records[..9].to_vec());

    // v1 files keep the v1 reading: a lone 0x00 seal, and a damaged last frame read like a
    // torn tail (a v1 seal cannot be told from damage).
    let v1_sealed = scan(&dir.join("v1_sealed.cslog")).unwrap();
    assert_eq!(v1_sealed.version, Some(1));
    assert_eq!(v1_sealed.verdict, Verdict::Recovered);
    assert_eq!(v1_sealed.records.len(), 11);
    let v1_damaged_last = scan(&dir.join("v1_damaged_last.cslog")).unwrap();
    assert_eq!(v1_damaged_last.verdict, Verdict::Recovered);
    assert_eq!(v1_damaged_last.records, records[..9].to_vec());
    assert_eq!(v1_damaged_last.skipped[0].offset, last_frame_start);
}

/// An independent reader: header, split at 0x00, COBS by hand, CRC-32 by hand (bitwise, not
/// crc32fast), and the first fields of the postcard record by hand.
#[cfg(test)]
mod minimal {
    pub(super) fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = 0xFFFF_FFFFu32;
        for &byte in bytes {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    pub(super) fn cobs_decode(frame: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < frame.len() {
            let code = frame[i] as usize;
            assert!(code > 0 && i + code <= frame.len(), "bad cobs code at {i}");
            out.extend_from_slice(&frame[i + 1..i + code]);
            i += code;
            if code < 0xFF && i < frame.len() {
                out.push(0);
            }
        }
        out
    }

    pub(super) fn varint(bytes: &[u8], at: &mut usize) -> u64 {
        let mut value = 0u64;
        let mut shift = 0;
        loop {
            let byte = bytes[*at];
            *at += 1;
            value |= u64::from(byte & 0x7F) << shift;
            if byte & 0x80 == 0 {
                return value;
            }
            shift += 7;
        }
    }

    /// (session_id, sequence, timestamp_ms, variant index) of every frame.
    pub(super) fn read(file: &[u8]) -> Vec<(String, u64, u64, u64)> {
        assert_eq!(&file[..8], b"CUCASLOG");
        assert_eq!(file[8], 2, "v2: frames as in v1");
        let body = &file[9..];
        assert_eq!(body.last(), Some(&0), "every frame is terminated");
        body[..body.len() - 1]
            .split(|&b| b == 0)
            .map(|frame| {
                let decoded = cobs_decode(frame);
                let (payload, crc) = decoded.split_at(decoded.len() - 4);
                assert_eq!(u32::from_le_bytes(crc.try_into().unwrap()), crc32(payload));
                let mut at = 0;
                let len = varint(payload, &mut at) as usize;
                let id = String::from_utf8(payload[at..at + len].to_vec()).unwrap();
                at += len;
                let sequence = varint(payload, &mut at);
                let timestamp = varint(payload, &mut at);
                let variant = varint(payload, &mut at);
                (id, sequence, timestamp, variant)
            })
            .collect()
    }
}

#[test]
fn an_independent_minimal_reader_decodes_the_fixture() {
    let bytes = std::fs::read(fixtures_dir().join("all_variants.cslog")).unwrap();
    let read = minimal::read(&bytes);
    let expected: Vec<(String, u64, u64, u64)> = all_variants()
        .into_iter()
        .map(|r| {
            (
                r.session_id,
                r.sequence,
                r.timestamp_ms,
                r.event.kind_index() as u64,
            )
        })
        .collect();
    assert_eq!(read, expected);
    // The variant index table of the docs: SystemPrompt 0 … Fork 9.
    assert_eq!(
        read.iter().map(|r| r.3).collect::<Vec<_>>(),
        (0..10).collect::<Vec<_>>()
    );
    // The hand CRC agrees with the check value of CRC-32/ISO-HDLC.
    assert_eq!(minimal::crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(scan_bytes(&bytes, Path::new("x")).records.len(), 10);
}
