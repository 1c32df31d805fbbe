//! The golden `.cslog` files that pin the format, built in memory from fixed records.
//!
//! `cargo xtask fixtures` writes them to `crates/cuca-store-file/tests/fixtures/`, and a test
//! builds them again and compares byte for byte, so any change to the encoding shows up as a
//! fixture diff in review.

use cuca_events::{Message, MessageContentBlock, Role, SessionEvent, SessionRecord};

use crate::codec::{encode_frame, HEADER, HEADER_LEN, SEAL, VERSION_1};
use crate::error::FrameError;

/// One golden file: its name under `tests/fixtures/`, its bytes, and what it shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoldenFile {
    /// File name, e.g. `all_variants.cslog`.
    pub name: &'static str,
    /// The exact bytes.
    pub bytes: Vec<u8>,
    /// What a reader must make of it, in words.
    pub about: &'static str,
}

/// The fixed time every golden record is stamped from, so the files never change by clock.
pub const GOLDEN_EPOCH_MS: u64 = 1_700_000_000_000;

fn record(session_id: &str, sequence: u64, event: SessionEvent) -> SessionRecord {
    SessionRecord {
        session_id: session_id.to_owned(),
        sequence,
        timestamp_ms: GOLDEN_EPOCH_MS + sequence * 1_000,
        event,
    }
}

/// One record of every [`SessionEvent`] variant, in variant-index order, in session `golden`.
pub fn all_variants() -> Vec<SessionRecord> {
    let events = vec![
        SessionEvent::SystemPrompt {
            text: "You are terse.".into(),
        },
        SessionEvent::Message(Message {
            role: Role::User,
            content: vec![
                MessageContentBlock::text("The vault is in Lisbon. Reply with: noted"),
                MessageContentBlock::ImageBase64 {
                    media_type: "image/png".into(),
                    data: "iVBORw0KGgo=".into(),
                },
            ],
        }),
        SessionEvent::Reasoning {
            text: "The user wants a short reply.".into(),
        },
        SessionEvent::Output {
            text: "noted".into(),
        },
        SessionEvent::ToolCall {
            id: "call_1".into(),
            name: "lookup".into(),
            arguments: "{\"city\":\"Lisbon\"}".into(),
        },
        SessionEvent::ToolResult {
            tool_call_id: "call_1".into(),
            content: "found".into(),
            is_error: false,
            stdout: Some("found\n".into()),
            stderr: None,
            exit_code: Some(0),
        },
        SessionEvent::Latency { duration_ms: 412 },
        SessionEvent::TokenUsage {
            prompt_tokens: 31,
            completion_tokens: 9,
        },
        SessionEvent::ModelSwap {
            from: "gemma-4-12b".into(),
            to: "gemma-4-27b".into(),
            reason: "longer context".into(),
        },
        SessionEvent::Fork {
            from_point: "golden:1".into(),
            to_session: "golden:fork:golden:1:0".into(),
        },
    ];
    events
        .into_iter()
        .enumerate()
        .map(|(sequence, event)| record("golden", sequence as u64, event))
        .collect()
}

fn file(records: &[SessionRecord]) -> Result<Vec<u8>, FrameError> {
    let mut bytes = HEADER.to_vec();
    for record in records {
        encode_frame(record, &mut bytes)?;
    }
    Ok(bytes)
}

/// The same bytes as a v1 file: only the version byte differs.
fn as_v1(mut bytes: Vec<u8>) -> Vec<u8> {
    if let Some(version) = bytes.get_mut(HEADER_LEN - 1) {
        *version = VERSION_1;
    }
    bytes
}

/// Every golden file, built from scratch.
pub fn golden_files() -> Result<Vec<GoldenFile>, FrameError> {
    let records = all_variants();
    let all = file(&records)?;

    // A crash mid-append: the first half of the next frame, with no terminator.
    let mut next = Vec::new();
    encode_frame(
        &record("golden", 10, SessionEvent::Output { text: "cut".into() }),
        &mut next,
    )?;
    let mut torn = all.clone();
    torn.extend_from_slice(&next[..next.len() / 2]);

    // The torn file after the next append: the seal ends the torn bytes, then the frame of
    // the record that reuses sequence 10 (the torn one was never acknowledged).
    let resumed = record(
        "golden",
        10,
        SessionEvent::Output {
            text: "resumed".into(),
        },
    );
    let mut sealed = torn.clone();
    sealed.extend_from_slice(&SEAL);
    encode_frame(&resumed, &mut sealed)?;

    // The same in a v1 file, sealed as a v1 writer did: a lone 0x00.
    let mut v1_sealed = as_v1(torn.clone());
    v1_sealed.push(0);
    encode_frame(&resumed, &mut v1_sealed)?;

    // One bit of the last record flipped: an acknowledged record damaged, with no record
    // after it to show a gap.
    let mut damaged_last = all.clone();
    if let Some(byte) = damaged_last.get_mut(all.len() - 3) {
        *byte ^= 0x04;
    }

    // A damaged frame between sequence 2 and 4: record 3 is lost, so a load refuses.
    let mut gap = file(&records[..3])?;
    let damaged_at = gap.len();
    encode_frame(&records[3], &mut gap)?;
    if let Some(byte) = gap.get_mut(damaged_at + 2) {
        *byte ^= 0x10;
    }
    let mut rest = Vec::new();
    for record in &records[4..] {
        encode_frame(record, &mut rest)?;
    }
    gap.extend_from_slice(&rest);

    Ok(vec![
        GoldenFile {
            name: "empty.cslog",
            bytes: HEADER.to_vec(),
            about: "a session created and never appended to: clean, no records",
        },
        GoldenFile {
            name: "all_variants.cslog",
            bytes: all,
            about: "one record of each SessionEvent variant, sequences 0..=9: clean",
        },
        GoldenFile {
            name: "torn_tail.cslog",
            bytes: torn,
            about: "all_variants plus half a frame: recovered, 10 records, torn tail",
        },
        GoldenFile {
            name: "sealed.cslog",
            bytes: sealed,
            about: "torn_tail after one more append: recovered, 11 records, one skipped (sealed) frame",
        },
        GoldenFile {
            name: "gap.cslog",
            bytes: gap,
            about: "all_variants with frame 3 damaged: refused, a record would be lost",
        },
        GoldenFile {
            name: "damaged_last.cslog",
            bytes: damaged_last.clone(),
            about: "all_variants with one bit of the last frame flipped: refused, an acknowledged record would be lost",
        },
        GoldenFile {
            name: "v1_sealed.cslog",
            bytes: v1_sealed,
            about: "a v1 file: torn_tail sealed by a lone 0x00 and one more append: recovered, 11 records",
        },
        GoldenFile {
            name: "v1_damaged_last.cslog",
            bytes: as_v1(damaged_last),
            about: "damaged_last as a v1 file: the v1 reading, recovered with 9 records (a v1 seal cannot be told from damage)",
        },
    ])
}
