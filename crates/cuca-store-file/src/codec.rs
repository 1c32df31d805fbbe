//! The `.cslog` codec (v2, and v1 which frames records the same way): the header, one frame
//! per record, the torn-tail seal, and the limits that keep decoding strict.

use cuca_events::SessionRecord;
use serde::Deserialize;

use crate::error::FrameError;

/// The first eight bytes of every `.cslog` file.
pub const MAGIC: [u8; 8] = *b"CUCASLOG";

/// The format version this build writes: v2 frames records exactly as v1 does; what changed
/// is the promise behind the bytes. A v2 writer ends torn bytes with [`SEAL_MARK`] and never
/// writes a record whose sequence does not increase or whose session id is not the file's, so
/// a v2 reader refuses what a v1 reader had to let pass (`docs/cslog-format.md`).
pub const VERSION: u8 = 2;

/// The first format version, still read (with its own, looser reading of a damaged last
/// frame) and still appended to: the version byte is written once, when a file is created.
pub const VERSION_1: u8 = 1;

/// What a writer puts after torn bytes (a crash mid-append left them after the last `0x00`)
/// before the `0x00` that ends them as a frame of their own: `FE 7E 53 45 41 4C 7E FE`
/// (`~SEAL~` between two `0xFE`).
///
/// A damaged frame that ends in these bytes is a *sealed torn frame*: an append that never
/// completed, so never acknowledged. No zero inside (it must not end the frame early); the
/// first byte has seven bits set, so no single-bit flip of a terminator reads as the start
/// of a seal; and after a whole frame the `0xFE` is a COBS code that runs past the frame's end,
/// so a sealed whole frame never decodes as the record it almost was.
pub const SEAL_MARK: [u8; 8] = [0xFE, b'~', b'S', b'E', b'A', b'L', b'~', 0xFE];

/// The seal as written: [`SEAL_MARK`] and the `0x00` that ends the torn bytes' frame.
pub(crate) const SEAL: [u8; 9] = [0xFE, b'~', b'S', b'E', b'A', b'L', b'~', 0xFE, 0x00];

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
    encode_frame_with(record, &mut Vec::new(), out)
}

/// What a fresh scratch buffer holds before it first grows: a streamed block or a short
/// message fits, so the append path never retries.
const SCRATCH_START: usize = 4 * 1024;

/// [`encode_frame`] with a caller-owned scratch buffer that keeps its high-water length, so
/// an append serializes into memory that is already there.
///
/// Postcard writes into a fixed slice (a pointer bump per field) rather than a growing `Vec`
/// (a capacity check and a length update per field), which halves the encode of a small
/// record; a record larger than the slice doubles it and serializes again.
pub(crate) fn encode_frame_with(
    record: &SessionRecord,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Result<(), FrameError> {
    let len = loop {
        if scratch.len() < SCRATCH_START {
            scratch.resize(SCRATCH_START, 0);
        }
        match postcard::to_slice(record, scratch).map(|bytes| bytes.len()) {
            Ok(len) => break len,
            Err(postcard::Error::SerializeBufferFull) if scratch.len() <= MAX_FRAME_LEN => {
                let grown = scratch.len().saturating_mul(2);
                scratch.resize(grown, 0);
            }
            Err(postcard::Error::SerializeBufferFull) => {
                return Err(FrameError::TooLong {
                    len: scratch.len() as u64,
                    max: MAX_FRAME_LEN as u64,
                })
            }
            Err(error) => {
                return Err(FrameError::Encode {
                    message: error.to_string(),
                })
            }
        }
    };
    let crc = crc32fast::hash(&scratch[..len]);
    if scratch.len() < len + CRC_LEN {
        scratch.resize(len + CRC_LEN, 0);
    }
    scratch[len..len + CRC_LEN].copy_from_slice(&crc.to_le_bytes());
    let payload = &scratch[..len + CRC_LEN];
    let encoded_len = cobs_encoded_len(payload.len());
    if encoded_len > MAX_FRAME_LEN {
        return Err(FrameError::TooLong {
            len: encoded_len as u64,
            max: MAX_FRAME_LEN as u64,
        });
    }
    out.reserve(encoded_len + 1);
    cobs_encode(payload, out);
    out.push(0);
    Ok(())
}

/// Checks, without encoding it, that `record`'s frame fits in [`MAX_FRAME_LEN`]: what an
/// append asks before it creates a file, so a record too large to store leaves nothing behind.
///
/// postcard only counts here (its size flavour adds up lengths, copies no string), so the
/// check costs a walk over the record's fields, not a second encoding.
pub(crate) fn check_frame_len(record: &SessionRecord) -> Result<(), FrameError> {
    let len = postcard::serialize_with_flavor(record, postcard::ser_flavors::Size::default())
        .map_err(|error| FrameError::Encode {
            message: error.to_string(),
        })?;
    let encoded_len = cobs_encoded_len(len + CRC_LEN);
    if encoded_len > MAX_FRAME_LEN {
        return Err(FrameError::TooLong {
            len: encoded_len as u64,
            max: MAX_FRAME_LEN as u64,
        });
    }
    Ok(())
}

/// The longest COBS encoding of `len` bytes: one code byte per started 254-byte run.
fn cobs_encoded_len(len: usize) -> usize {
    len + len / 254 + 1
}

/// COBS-encodes `source` onto `out` (no terminator).
///
/// Byte-identical to the `cobs` crate's encoder (a test checks it), but it finds zeros with
/// `memchr` and copies whole runs, where the crate's state machine handles one byte at a
/// time: the per-byte loop was most of an append's CPU time for kilobyte records. Each search
/// looks only as far as one group can reach (254 bytes), not to the end of the record.
pub(crate) fn cobs_encode(source: &[u8], out: &mut Vec<u8>) {
    let mut rest = source;
    loop {
        let window = &rest[..rest.len().min(254)];
        match memchr::memchr(0, window) {
            Some(run) => {
                out.push(run as u8 + 1);
                out.extend_from_slice(&window[..run]);
                // A zero always starts another group, empty if the zero was the last byte.
                rest = &rest[run + 1..];
            }
            None if window.len() == 254 => {
                // A full group: 254 data bytes, no implied zero after it.
                out.push(0xFF);
                out.extend_from_slice(window);
                rest = &rest[254..];
                if rest.is_empty() {
                    return;
                }
            }
            None => {
                out.push(window.len() as u8 + 1);
                out.extend_from_slice(window);
                return;
            }
        }
    }
}

/// Decodes COBS bytes (no zeros, no terminator) in place; `None` when they are not COBS.
///
/// Each group is moved with one `copy_within` rather than byte by byte.
pub(crate) fn cobs_decode_in_place(buf: &mut [u8]) -> Option<usize> {
    let len = buf.len();
    let (mut src, mut dst) = (0usize, 0usize);
    while src < len {
        let code = usize::from(*buf.get(src)?);
        if code == 0 || src + code > len {
            return None;
        }
        buf.copy_within(src + 1..src + code, dst);
        dst += code - 1;
        src += code;
        if code != 0xFF && src < len {
            // `dst` trails `src` by at least one byte per group, so this is in bounds.
            *buf.get_mut(dst)? = 0;
            dst += 1;
        }
    }
    Some(dst)
}

/// Decodes one frame, given without its `0x00` terminator, in place.
///
/// Strict: the frame must be valid COBS, carry a matching CRC-32, and decode to exactly one
/// record with no bytes left over.
pub fn decode_frame(frame: &mut [u8]) -> Result<SessionRecord, FrameError> {
    // A caller may hand over any bytes, so a zero inside (which no frame holds) is checked
    // here; the scanner, which cut the frame at its first zero, skips this search.
    if !frame.is_empty() && frame.len() <= MAX_FRAME_LEN && memchr::memchr(0, frame).is_some() {
        return Err(FrameError::Cobs);
    }
    decode_cut_frame(frame)
}

/// [`decode_frame`] for a frame the caller cut at its first `0x00`, so it holds no zero,
/// decoding into any type with `SessionRecord`'s wire layout (which may borrow from the frame:
/// a replay decodes into `ReplayedRecord`, whose session id points into the read buffer).
///
/// Every other check of [`decode_frame`] runs, in the same order, with the same errors.
// Inlined into the scanner, the decoded record is built where the scanner hands it on
// instead of being copied out through this function's result (a `memcpy` of ~150 bytes):
// 60 instructions of a 32-byte record's replay, 4%.
#[inline(always)]
pub(crate) fn decode_cut_frame<'a, R: Deserialize<'a>>(
    frame: &'a mut [u8],
) -> Result<R, FrameError> {
    if frame.is_empty() {
        return Err(FrameError::Empty);
    }
    if frame.len() > MAX_FRAME_LEN {
        return Err(FrameError::TooLong {
            len: frame.len() as u64,
            max: MAX_FRAME_LEN as u64,
        });
    }
    let decoded_len = cobs_decode_in_place(frame).ok_or(FrameError::Cobs)?;
    let decoded = &frame[..decoded_len];
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
        postcard::take_from_bytes::<R>(body).map_err(|error| FrameError::Record {
            message: error.to_string(),
        })?;
    if !rest.is_empty() {
        return Err(FrameError::TrailingBytes {
            n_bytes: rest.len(),
        });
    }
    Ok(record)
}
