//! The damaged-`.cslog` corpus: each file built from a clean session by one kind of damage,
//! with the verdict the recovery rule says it must get, stated here by hand from the rule in
//! `DESIGN.md` (".cslog v1"), never computed by the reader under test.
//!
//! `tests/corpus.rs` checks that the committed files under `tests/corpus/` are exactly these
//! bytes (`CUCA_BLESS=1` rewrites them) and that the scan, `FileBackend::replay` and
//! `FileBackend::verify` agree with `MANIFEST`.

use cuca_events::{SessionEvent, SessionRecord};
use cuca_store_file::{encode_frame, HEADER, HEADER_LEN, SEAL_MARK, VERSION_1};

/// The verdict a corpus file must get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// Clean, with this many records.
    Clean(usize),
    /// Recovered, with this many records (the whole session).
    Recovered(usize),
    /// Refused, with the damage starting at this byte offset.
    Refused(u64),
}

impl Expected {
    /// The manifest's spelling: `clean 3`, `recovered 2`, `refused@41`.
    pub fn to_manifest(self) -> String {
        match self {
            Expected::Clean(n) => format!("clean {n}"),
            Expected::Recovered(n) => format!("recovered {n}"),
            Expected::Refused(offset) => format!("refused@{offset}"),
        }
    }
}

/// One corpus file.
#[derive(Debug, Clone)]
pub struct Case {
    /// File name under `tests/corpus/`, ending in `.cslog`.
    pub name: &'static str,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// What the reader must conclude.
    pub expected: Expected,
    /// What damage this is, in words.
    pub note: &'static str,
}

/// The session every case starts from: `n` records of `session_id`.
pub fn records(session_id: &str, first: u64, n: u64) -> Vec<SessionRecord> {
    (first..first + n)
        .map(|sequence| SessionRecord {
            session_id: session_id.to_owned(),
            sequence,
            timestamp_ms: 1_700_000_000_000 + sequence,
            event: SessionEvent::Output {
                text: format!("record {sequence} of {session_id}"),
            },
        })
        .collect()
}

/// A clean file of `records`, and the byte offset where each frame starts (plus the end).
pub fn clean_file(records: &[SessionRecord]) -> (Vec<u8>, Vec<usize>) {
    let mut bytes = HEADER.to_vec();
    let mut starts = vec![HEADER_LEN];
    for record in records {
        // Encoding a record this module built cannot fail; an empty frame would show it.
        let _ = encode_frame(record, &mut bytes);
        starts.push(bytes.len());
    }
    (bytes, starts)
}

/// The same bytes with a v1 header: what the writer before v2 left.
fn as_v1(mut bytes: Vec<u8>) -> Vec<u8> {
    if let Some(version) = bytes.get_mut(HEADER_LEN - 1) {
        *version = VERSION_1;
    }
    bytes
}

fn flip(mut bytes: Vec<u8>, at: usize, bit: u8) -> Vec<u8> {
    if let Some(byte) = bytes.get_mut(at) {
        *byte ^= 1 << bit;
    }
    bytes
}

/// Every case, in manifest order.
pub fn cases() -> Vec<Case> {
    let five = records("demo", 0, 5);
    let (clean, starts) = clean_file(&five);
    // starts[k] is where frame k begins; starts[k + 1] - 1 is its terminator.
    let mid = |k: usize| (starts[k] + starts[k + 1]) / 2;
    let mut out = Vec::new();
    let mut push = |name, bytes, expected, note| {
        out.push(Case {
            name,
            bytes,
            expected,
            note,
        })
    };

    push(
        "clean.cslog",
        clean.clone(),
        Expected::Clean(5),
        "five records, undamaged",
    );
    push(
        "empty.cslog",
        Vec::new(),
        Expected::Clean(0),
        "a file created and never written",
    );
    push(
        "header_only.cslog",
        HEADER.to_vec(),
        Expected::Clean(0),
        "the header and no record",
    );
    push(
        "header_cut_short.cslog",
        HEADER[..5].to_vec(),
        Expected::Recovered(0),
        "a crash while the header was being written: nothing was recorded",
    );
    push(
        "header_cut_before_version.cslog",
        HEADER[..HEADER_LEN - 1].to_vec(),
        Expected::Recovered(0),
        "all of the magic, no version byte",
    );
    push(
        "torn_tail_mid_frame.cslog",
        clean[..mid(4)].to_vec(),
        Expected::Recovered(4),
        "a crash half-way through the fifth append",
    );
    push(
        "torn_tail_before_terminator.cslog",
        clean[..starts[5] - 1].to_vec(),
        Expected::Recovered(4),
        "the fifth frame whole but for its 0x00: never acknowledged, must not read as a record",
    );
    push(
        "torn_tail_one_byte.cslog",
        clean[..starts[4] + 1].to_vec(),
        Expected::Recovered(4),
        "one byte of the fifth frame",
    );
    let mut sealed = clean[..mid(4)].to_vec();
    sealed.extend_from_slice(&SEAL_MARK);
    sealed.push(0);
    let sealed_only = sealed.clone();
    let mut resumed = Vec::new();
    let _ = encode_frame(&five[4], &mut resumed);
    sealed.extend_from_slice(&resumed);
    push(
        "torn_tail_sealed_and_resumed.cslog",
        sealed,
        Expected::Recovered(5),
        "a torn fifth frame sealed (SEAL_MARK, 0x00), then the resumed writer's sequence 4",
    );
    push(
        "torn_tail_sealed_at_the_end.cslog",
        sealed_only,
        Expected::Recovered(4),
        "a torn fifth frame sealed by an append that died right after the seal: the sealed \
         frame was never acknowledged, so nothing is lost",
    );
    let mut v1_sealed = as_v1(clean[..mid(4)].to_vec());
    v1_sealed.push(0);
    v1_sealed.extend_from_slice(&resumed);
    push(
        "v1_torn_tail_sealed_and_resumed.cslog",
        v1_sealed,
        Expected::Recovered(5),
        "a v1 file: a torn fifth frame sealed by a lone 0x00 (the v1 seal), then sequence 4",
    );
    push(
        "bitflip_middle_frame.cslog",
        flip(clean.clone(), mid(2), 3),
        Expected::Refused(starts[2] as u64),
        "one bit of an acknowledged record in the middle: records 1 and 3 show the gap",
    );
    push(
        "bitflip_first_frame.cslog",
        flip(clean.clone(), starts[0] + 1, 0),
        Expected::Refused(starts[0] as u64),
        "one bit of record 0: record 1 shows the gap from the start of the file",
    );
    push(
        "bitflip_makes_a_terminator.cslog",
        {
            // Turn a byte of frame 2 into 0x00: the frame splits in two damaged halves.
            let mut bytes = clean.clone();
            bytes[mid(2)] = 0;
            bytes
        },
        Expected::Refused(starts[2] as u64),
        "a byte of record 2 zeroed: two damaged halves, and a gap",
    );
    push(
        "bitflip_last_frame.cslog",
        flip(clean.clone(), mid(4), 5),
        Expected::Refused(starts[4] as u64),
        "one bit of the last record: a damaged frame with no record after it that is no sealed \
         torn frame, so an acknowledged record may be lost",
    );
    push(
        "terminator_flipped_last_frame.cslog",
        flip(clean.clone(), starts[5] - 1, 4),
        Expected::Refused(starts[4] as u64),
        "the last record's 0x00 reads 0x10: a whole good frame and one byte, which no \
         interrupted append leaves",
    );
    push(
        "v1_bitflip_last_frame.cslog",
        as_v1(flip(clean.clone(), mid(4), 5)),
        Expected::Recovered(4),
        "one bit of the last record of a v1 file: the v1 reading, since a v1 seal (a lone \
         0x00) cannot be told from damage; the scan lists the skipped frame",
    );
    push(
        "bitflip_magic.cslog",
        flip(clean.clone(), 2, 1),
        Expected::Refused(2),
        "one bit of the magic: not a .cslog file",
    );
    push(
        "bitflip_version.cslog",
        flip(clean.clone(), HEADER_LEN - 1, 0),
        Expected::Refused((HEADER_LEN - 1) as u64),
        "the version byte reads 3: a format this build does not know",
    );
    push(
        "zero_run_tail.cslog",
        {
            let mut bytes = clean.clone();
            bytes.extend_from_slice(&[0u8; 4096]);
            bytes
        },
        Expected::Recovered(5),
        "a 4 KiB block of zeros after the last frame, as ext4 leaves a file whose size reached \
         the disk before its data",
    );
    push(
        "zero_run_over_last_frames.cslog",
        {
            let mut bytes = clean.clone();
            for byte in &mut bytes[starts[3]..] {
                *byte = 0;
            }
            bytes
        },
        Expected::Recovered(3),
        "the last two frames zeroed (data never reached the disk before power loss): lost, \
         which buffered durability does not promise against; the scan lists them",
    );
    push(
        "zero_run_middle.cslog",
        {
            let mut bytes = clean.clone();
            for byte in &mut bytes[starts[1]..starts[3]] {
                *byte = 0;
            }
            bytes
        },
        Expected::Refused(starts[1] as u64),
        "records 1 and 2 zeroed with record 3 intact after them: a gap",
    );
    push(
        "garbage_appended.cslog",
        {
            let mut bytes = clean.clone();
            bytes.extend_from_slice(b"\x17garbage that is no frame at all\xff\xfe");
            bytes
        },
        Expected::Recovered(5),
        "bytes with no terminator after the last frame: a torn tail",
    );
    push(
        "garbage_frames_appended.cslog",
        {
            let mut bytes = clean.clone();
            bytes.extend_from_slice(b"\x05abcd\x00\xff\xff\xff\x00\x01\x00");
            bytes
        },
        Expected::Refused(starts[5] as u64),
        "terminated frames of garbage after the last record: no sealed torn frame, so it may be \
         an acknowledged record damaged",
    );
    push(
        "garbage_then_record.cslog",
        {
            let mut bytes = clean[..starts[4]].to_vec();
            bytes.extend_from_slice(b"\x05abcd\x00");
            bytes.extend_from_slice(&clean[starts[4]..]);
            bytes
        },
        Expected::Recovered(5),
        "a garbage frame between records 3 and 4, which continue the sequence: skipped",
    );
    push(
        "duplicate_sequence.cslog",
        {
            let mut bytes = clean.clone();
            let _ = encode_frame(&five[4], &mut bytes);
            bytes
        },
        Expected::Refused(starts[5] as u64),
        "record 4 written twice, both frames whole: a v2 writer refuses a sequence that does \
         not increase, so something else wrote it",
    );
    push(
        "v1_duplicate_sequence.cslog",
        {
            let mut bytes = as_v1(clean.clone());
            let _ = encode_frame(&five[4], &mut bytes);
            bytes
        },
        Expected::Clean(6),
        "the same in a v1 file, whose writer stored sequences as given: loads, and the scan \
         reports the repeated sequence as a finding",
    );
    push(
        "frame_removed.cslog",
        {
            let mut bytes = clean[..starts[2]].to_vec();
            bytes.extend_from_slice(&clean[starts[3]..]);
            bytes
        },
        Expected::Clean(4),
        "record 2 cut out exactly at its frame boundaries: every byte left is a good frame, and \
         a gap in the sequence is one a writer may choose, so no reader can tell this from it \
         (a limitation, documented in docs/reliability.md)",
    );
    push(
        "two_files_concatenated.cslog",
        {
            let (other, _) = clean_file(&records("other", 0, 3));
            let mut bytes = clean.clone();
            bytes.extend_from_slice(&other);
            bytes
        },
        Expected::Refused(starts[5] as u64),
        "a second file's bytes after the first: its header merges into its first frame, \
         and its records restart at sequence 1",
    );
    push(
        "same_file_twice.cslog",
        {
            let mut bytes = clean.clone();
            bytes.extend_from_slice(&clean);
            bytes
        },
        Expected::Refused(starts[5] as u64),
        "the file appended to itself: the sequence goes back from 4 to 1",
    );
    push(
        "not_a_cslog.cslog",
        b"{\"session_id\":\"demo\"}\n".to_vec(),
        Expected::Refused(0),
        "a JSON file with the .cslog name",
    );
    out
}

/// The manifest for [`cases`]: one line per file, `name<TAB>verdict<TAB>note`.
pub fn manifest() -> String {
    let mut text = String::from(
        "# The damaged-.cslog corpus: file, expected verdict (clean N | recovered N | refused@OFFSET), what the damage is.\n\
         # Generated from crates/cuca-reliability/src/corpus.rs (CUCA_BLESS=1 cargo test -p cuca-reliability --test corpus).\n",
    );
    for case in cases() {
        text.push_str(&format!(
            "{}\t{}\t{}\n",
            case.name,
            case.expected.to_manifest(),
            case.note
        ));
    }
    text
}
