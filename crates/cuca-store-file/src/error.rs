//! `FrameError`: why one `.cslog` frame could not be written or read back.

/// What is wrong with one frame.
///
/// A reader never returns this on its own: it lands in a [`crate::SkippedFrame`] of a
/// [`crate::ScanReport`], or inside the `PluginError` a refused load or append returns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// A `0x00` with nothing before it: no frame the writer makes is empty.
    #[error("empty frame")]
    Empty,
    /// The frame is longer than [`crate::MAX_FRAME_LEN`]; a reader skips it unread.
    #[error("frame of {len} bytes is longer than the {max}-byte maximum")]
    TooLong {
        /// The frame's length in bytes (encoded, without its terminator), or at least this.
        len: u64,
        /// The maximum, [`crate::MAX_FRAME_LEN`].
        max: u64,
    },
    /// The bytes are not a valid COBS encoding.
    #[error("frame is not valid COBS")]
    Cobs,
    /// The decoded frame is too short to hold a record and its CRC-32.
    #[error("frame decodes to {len} bytes, too short for a record and its crc-32")]
    TooShort {
        /// The decoded length.
        len: usize,
    },
    /// The CRC-32 stored in the frame does not match its record bytes.
    #[error("crc-32 mismatch: frame says {stored:#010x}, record bytes give {computed:#010x}")]
    Crc {
        /// The checksum stored in the frame.
        stored: u32,
        /// The checksum of the record bytes as read.
        computed: u32,
    },
    /// The record bytes passed the CRC but are not a postcard `SessionRecord` this build knows.
    #[error("record does not decode: {message}")]
    Record {
        /// postcard's message.
        message: String,
    },
    /// The record decoded but bytes were left over after it.
    #[error("{n_bytes} bytes left over after the record")]
    TrailingBytes {
        /// How many bytes were left over.
        n_bytes: usize,
    },
    /// The record could not be encoded (postcard refused it).
    #[error("record does not encode: {message}")]
    Encode {
        /// postcard's message.
        message: String,
    },
}
