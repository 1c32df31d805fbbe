//! The sequence rule on the append path: the last stored sequence of a session file, read
//! backwards from its end when a handle opens it, and the check every append makes against it.

use std::fs::File;

use cuca_events::{PluginError, SessionRecord};

use crate::backend::read_at;
use crate::codec::{decode_cut_frame, HEADER_LEN, MAX_FRAME_LEN};

/// The first read from the end of the file; each further one doubles, up to [`MAX_CHUNK`].
const FIRST_CHUNK: u64 = 4 * 1024;
const MAX_CHUNK: u64 = 1024 * 1024;

/// The sequence of the last record of a session file that is `len` bytes long (header
/// included), or `None` when it holds no record.
///
/// The last record is the one a forward scan would return last: frames end at each `0x00`
/// after the header, the bytes after the last `0x00` are a torn tail (never acknowledged),
/// and frames that do not decode (damage, seals, runs of zeros) are passed over. Reading goes
/// backwards from the end in growing chunks, so a healthy file costs one small read however
/// long it is; a frame is decoded from one read of its own bytes, never longer than
/// [`MAX_FRAME_LEN`], so memory stays bounded whatever the file holds.
///
/// The caller holds the file's lock: no writer can add a record while this reads.
pub(crate) fn last_sequence(file: &File, len: u64) -> std::io::Result<Option<u64>> {
    let header_end = HEADER_LEN as u64;
    // The terminator of the frame being looked for: its bytes end just before it.
    let mut frame_end: Option<u64> = None;
    // Bytes below `searched` have not been looked at yet.
    let mut searched = len;
    let mut chunk_len = FIRST_CHUNK;
    let mut chunk = Vec::new();
    while searched > header_end {
        let start = searched.saturating_sub(chunk_len).max(header_end);
        chunk.resize((searched - start) as usize, 0);
        let n = read_at(file, start, &mut chunk)?;
        if n < chunk.len() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "the file ended at byte {} while its last {} bytes were read",
                    start + n as u64,
                    len - start
                ),
            ));
        }
        let mut upper = chunk.len();
        while let Some(zero) = memchr::memrchr(0, &chunk[..upper]) {
            let at = start + zero as u64;
            if let Some(end) = frame_end {
                if let Some(sequence) = decode_sequence(file, &chunk, start, at + 1, end)? {
                    return Ok(Some(sequence));
                }
            }
            frame_end = Some(at);
            upper = zero;
        }
        searched = start;
        chunk_len = (chunk_len * 2).min(MAX_CHUNK);
    }
    // The first frame starts right after the header.
    match frame_end {
        Some(end) => decode_sequence(file, &chunk, header_end, header_end, end),
        None => Ok(None),
    }
}

/// Decodes the frame at `from..to` (without its terminator) and returns its sequence, or
/// `None` when it is not a record. `chunk` holds the file's bytes from `chunk_start`; a frame
/// that reaches past it is read on its own.
fn decode_sequence(
    file: &File,
    chunk: &[u8],
    chunk_start: u64,
    from: u64,
    to: u64,
) -> std::io::Result<Option<u64>> {
    let len = to - from;
    if len == 0 || len > MAX_FRAME_LEN as u64 {
        return Ok(None);
    }
    let mut frame = match usize::try_from(from - chunk_start)
        .ok()
        .and_then(|at| chunk.get(at..at + len as usize))
    {
        Some(bytes) => bytes.to_vec(),
        None => {
            let mut bytes = vec![0u8; len as usize];
            if read_at(file, from, &mut bytes)? < bytes.len() {
                return Ok(None);
            }
            bytes
        }
    };
    // Cut at zeros, so it holds none: the codec's strict checks do the rest.
    Ok(decode_cut_frame::<SessionRecord>(&mut frame)
        .ok()
        .map(|record| record.sequence))
}

/// The refusal of an append whose sequence is not above the session's `last`.
pub(crate) fn check_sequence(record: &SessionRecord, last: Option<u64>) -> Result<(), PluginError> {
    match last {
        Some(last) if record.sequence <= last => Err(PluginError::SequenceTaken {
            session_id: record.session_id.clone(),
            sequence: record.sequence,
            last,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use cuca_events::SessionEvent;
    use cuca_testkit::record;

    use super::last_sequence;
    use crate::codec::{encode_frame, HEADER, MAX_FRAME_LEN};

    fn frames(sequences: &[u64], text_len: usize) -> Vec<u8> {
        let mut bytes = HEADER.to_vec();
        for &sequence in sequences {
            let event = SessionEvent::Output {
                text: "x".repeat(text_len),
            };
            encode_frame(&record("s", sequence, event), &mut bytes).unwrap();
        }
        bytes
    }

    fn last_of(bytes: &[u8]) -> Option<u64> {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(bytes).unwrap();
        last_sequence(&file, bytes.len() as u64).unwrap()
    }

    #[test]
    fn the_last_record_is_found_past_torn_tails_seals_and_zero_runs() {
        assert_eq!(last_of(&HEADER), None);
        assert_eq!(last_of(&HEADER[..4]), None);
        assert_eq!(last_of(&frames(&[0], 3)), Some(0));
        assert_eq!(last_of(&frames(&[0, 1, 7], 3)), Some(7));

        // A torn tail: a frame without its terminator was never acknowledged.
        let mut torn = frames(&[0, 1], 3);
        let whole = frames(&[2], 3);
        torn.extend_from_slice(&whole[HEADER.len()..whole.len() - 1]);
        assert_eq!(last_of(&torn), Some(1));
        // Sealed, then a run of zeros, then damage.
        torn.extend_from_slice(&[0x02, 0x01, 0x00]);
        torn.extend_from_slice(&[0u8; 10_000]);
        torn.extend_from_slice(&[0x55; 300]);
        torn.push(0);
        assert_eq!(last_of(&torn), Some(1));
        // Nothing but damage after the header.
        let mut junk = HEADER.to_vec();
        junk.extend_from_slice(&[0x33; 5000]);
        junk.push(0);
        junk.extend_from_slice(&[0; 5000]);
        assert_eq!(last_of(&junk), None);
    }

    #[test]
    fn a_frame_longer_than_the_chunks_is_read_whole() {
        // 3 MiB of text spans many growing chunks before its start is found.
        let bytes = frames(&[4, 5], 3 * 1024 * 1024);
        assert_eq!(last_of(&bytes), Some(5));
        let mut one = frames(&[9], 3 * 1024 * 1024);
        assert_eq!(last_of(&one), Some(9));
        // The same with damage in the last frame: the one before it answers.
        one.extend_from_slice(&frames(&[10], 300_000)[HEADER.len()..]);
        let at = one.len() - 1000;
        one[at] ^= 0x40;
        assert_eq!(last_of(&one), Some(9));
    }

    #[test]
    fn a_run_without_zeros_longer_than_a_frame_is_damage_not_an_allocation() {
        let mut bytes = frames(&[3], 3);
        bytes.extend(std::iter::repeat_n(0x7Au8, MAX_FRAME_LEN + 10));
        bytes.push(0);
        assert_eq!(last_of(&bytes), Some(3));
    }
}
