//! The `.cslog` v1 codec: the header, one frame per record, and the limits that keep decoding strict.

use cuca_events::SessionRecord;

use crate::error::FrameError;

/// The first eight bytes of every `.cslog` file.
pub const MAGIC: [u8; 8] = *b"CUCASLOG";

/// The format version this build writes and the only one it reads.
pub const VERSION: u8 = 1;

/// Length of the header: [`MAGIC`] then the [`VERSION`] byte.
pub const HEADER_LEN: usize = 9;

/// The header a new `.cslog` file starts with, written once when the file is created.
pub const HEADER: [u8; HEADER_LEN] = [
    MAGIC[0], MAGIC[1], MAGIC[2], MAGIC[3], MAGIC[4], MAGIC[5], MAGIC[6], MAGIC[7], VERSION,
];

/// Bytes of the CRC-32 (little-endian) that follows the record bytes inside a frame.
pub const CRC_LEN: usize = 4;

/// The longest frame (COBS bytes, without the `0x00` terminator) a writer makes or a reader
/// decodes: 32 MiB.
///
/// A record is one streamed block or one message, and a message cannot be larger than the
/// request that carried it; 32 MB is the largest request body the common providers accept.
/// A reader that meets a longer run of bytes without a `0x00` treats it as damage and skips
/// it without buffering it, so damaged or hostile input never turns into a large allocation.
pub const MAX_FRAME_LEN: usize = 32 * 1024 * 1024;

/// Appends one frame for `record` to `out`: `COBS(postcard(record) ‖ CRC-32 LE)` then `0x00`.
///
/// ```
/// use cuca_events::{SessionEvent, SessionRecord};
/// let record = SessionRecord {
///     session_id: "demo".into(),
///     sequence: 0,
///     timestamp_ms: 0,
///     event: SessionEvent::Output { text: "noted".into() },
/// };
/// let mut frame = Vec::new();
/// cuca_store_file::encode_frame(&record, &mut frame)?;
/// assert_eq!(frame.last(), Some(&0));
/// assert!(!frame[..frame.len() - 1].contains(&0));
/// let body = frame.len() - 1;
/// assert_eq!(cuca_store_file::decode_frame(&mut frame[..body])?, record);
/// # Ok::<(), cuca_store_file::FrameError>(())
/// ```
pub fn encode_frame(record: &SessionRecord, out: &mut Vec<u8>) -> Result<(), FrameError> {
    let mut scratch = Vec::new();
    encode_frame_with(record, &mut scratch, out)
}

/// [`encode_frame`] with a caller-owned scratch buffer, so the append path reuses one
/// allocation for the record bytes and one for the frame instead of two per append.
pub(crate) fn encode_frame_with(
    record: &SessionRecord,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Result<(), FrameError> {
    let mut payload = std::mem::take(scratch);
    payload.clear();
    let mut payload = postcard::to_extend(record, payload).map_err(|error| FrameError::Encode {
        message: error.to_string(),
    })?;
    let crc = crc32fast::hash(&payload);
    payload.extend_from_slice(&crc.to_le_bytes());
    let room = cobs::max_encoding_length(payload.len()) + 1;
    if room > MAX_FRAME_LEN + 1 {
        let len = room as u64;
        *scratch = payload;
        return Err(FrameError::TooLong {
            len,
            max: MAX_FRAME_LEN as u64,
        });
    }
    let start = out.len();
    out.resize(start + room, 0);
    let encoded = cobs::try_encode(&payload, &mut out[start..]);
    *scratch = payload;
    match encoded {
        Ok(n) => {
            out.truncate(start + n);
            out.push(0);
            Ok(())
        }
        Err(_) => {
            // Unreachable with `room` sized by the crate's own bound; reported, not panicked.
            out.truncate(start);
            Err(FrameError::Encode {
                message: "cobs encoder ran out of room".into(),
            })
        }
    }
}

/// Decodes one frame, given without its `0x00` terminator, in place.
///
/// Strict: the frame must be valid COBS, carry a matching CRC-32, and decode to exactly one
/// record with no bytes left over.
pub fn decode_frame(frame: &mut [u8]) -> Result<SessionRecord, FrameError> {
    if frame.is_empty() {
        return Err(FrameError::Empty);
    }
    if frame.len() > MAX_FRAME_LEN {
        return Err(FrameError::TooLong {
            len: frame.len() as u64,
            max: MAX_FRAME_LEN as u64,
        });
    }
    let report = cobs::decode_in_place_report(frame).map_err(|_| FrameError::Cobs)?;
    if report.src_used != frame.len() {
        return Err(FrameError::Cobs);
    }
    let decoded = &frame[..report.dst_used];
    if decoded.len() <= CRC_LEN {
        return Err(FrameError::TooShort { len: decoded.len() });
    }
    let (body, crc) = decoded.split_at(decoded.len() - CRC_LEN);
    let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    let computed = crc32fast::hash(body);
    if stored != computed {
        return Err(FrameError::Crc { stored, computed });
    }
    let (record, rest) =
        postcard::take_from_bytes::<SessionRecord>(body).map_err(|error| FrameError::Record {
            message: error.to_string(),
        })?;
    if !rest.is_empty() {
        return Err(FrameError::TrailingBytes {
            n_bytes: rest.len(),
        });
    }
    Ok(record)
}
