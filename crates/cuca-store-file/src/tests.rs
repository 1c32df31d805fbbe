//! Unit tests of the codec edges and the one-write rule.

use std::io::{ErrorKind, Write};

use cuca_events::{PluginError, SessionEvent};
use cuca_testkit::record;

use crate::backend::write_once;
use crate::{decode_frame, encode_frame, validate_session_id, FrameError, MAX_FRAME_LEN};

/// A writer that accepts at most `limit` bytes per call, or fails every call.
struct Stingy {
    limit: usize,
    fail: Option<ErrorKind>,
    interrupted_first: bool,
    written: Vec<u8>,
    calls: usize,
}

impl Write for Stingy {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.calls += 1;
        if self.interrupted_first {
            self.interrupted_first = false;
            return Err(ErrorKind::Interrupted.into());
        }
        if let Some(kind) = self.fail {
            return Err(kind.into());
        }
        let n = buf.len().min(self.limit);
        self.written.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn stingy(limit: usize) -> Stingy {
    Stingy {
        limit,
        fail: None,
        interrupted_first: false,
        written: Vec::new(),
        calls: 0,
    }
}

/// "A short write is an error: the handle never 'finishes' a partial frame."
#[test]
fn a_short_write_is_an_error_and_the_rest_is_never_written() {
    let mut writer = stingy(3);
    let error = write_once(&mut writer, b"0123456789").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::WriteZero);
    assert!(error.to_string().contains("3 of 10"), "{error}");
    assert_eq!(writer.written, b"012");
    assert_eq!(writer.calls, 1, "no second write finishes the frame");
}

#[test]
fn an_interrupted_write_wrote_nothing_and_is_retried() {
    let mut writer = Stingy {
        interrupted_first: true,
        ..stingy(100)
    };
    write_once(&mut writer, b"frame").unwrap();
    assert_eq!(writer.written, b"frame");
    assert_eq!(writer.calls, 2);
}

#[test]
fn a_write_error_is_returned_as_is() {
    let mut writer = Stingy {
        fail: Some(ErrorKind::StorageFull),
        ..stingy(100)
    };
    let error = write_once(&mut writer, b"frame").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::StorageFull);
    assert!(writer.written.is_empty());
}

/// "FileBackend rejects a session id containing / or \ rather than mapping it into a subdirectory."
#[test]
fn refused_session_ids_name_the_reason() {
    let long = "x".repeat(crate::MAX_SESSION_ID_LEN + 1);
    for (id, why) in [
        ("", "is empty"),
        ("a/b", "contains '/'"),
        ("a\\b", "contains '\\\\'"),
        ("a\0b", "control character U+0000"),
        ("a\u{1b}[2Jb", "control character U+001B"),
        (".", "only of dots"),
        ("..", "only of dots"),
        (long.as_str(), "over the 1048576-byte limit"),
    ] {
        match validate_session_id(id) {
            Err(PluginError::Validation { schema, message }) => {
                assert_eq!(schema, "session_id");
                assert!(message.contains(why), "{id:?}: {message}");
            }
            other => panic!("{id:?} gave {other:?}"),
        }
    }
    // An id too long for one file name is stored under an overflow name.
    assert!(validate_session_id(&"x".repeat(250)).is_ok());
    assert!(validate_session_id(&"x".repeat(crate::MAX_SESSION_ID_LEN)).is_ok());
    assert!(validate_session_id("..x").is_ok());
}

#[test]
fn a_frame_with_leftover_bytes_is_refused() {
    // Two records' postcard bytes in one frame with one CRC over both.
    let a = record("s", 0, SessionEvent::Output { text: "a".into() });
    let mut body = postcard::to_stdvec(&a).unwrap();
    body.extend(postcard::to_stdvec(&a).unwrap());
    body.extend(crc32fast::hash(&body).to_le_bytes());
    let mut frame = cobs::encode_vec(&body);
    assert_eq!(
        decode_frame(&mut frame),
        Err(FrameError::TrailingBytes {
            n_bytes: body.len() / 2 - 2
        })
    );
}

#[test]
fn an_empty_or_overlong_frame_is_damage() {
    assert_eq!(decode_frame(&mut []), Err(FrameError::Empty));
    let mut long = vec![1u8; MAX_FRAME_LEN + 1];
    assert!(matches!(
        decode_frame(&mut long),
        Err(FrameError::TooLong { .. })
    ));
    let mut short = cobs::encode_vec(&[1, 2, 3]);
    assert_eq!(
        decode_frame(&mut short),
        Err(FrameError::TooShort { len: 3 })
    );
}

#[test]
fn a_frame_round_trips_and_ends_in_its_only_zero() {
    let a = record("s", 7, SessionEvent::Latency { duration_ms: 0 });
    let mut frame = Vec::new();
    encode_frame(&a, &mut frame).unwrap();
    let terminator = frame.iter().position(|&b| b == 0).unwrap();
    assert_eq!(terminator, frame.len() - 1);
    assert_eq!(decode_frame(&mut frame[..terminator]).unwrap(), a);
}

proptest::proptest! {
    /// Our COBS is the reference COBS: same bytes out, and it decodes what the reference makes.
    #[test]
    fn cobs_matches_the_reference_crate(data in proptest::collection::vec(
        proptest::prop_oneof![1 => proptest::prelude::Just(0u8), 100 => 1u8..=255], 0..1200)) {
        let mut ours = Vec::new();
        crate::codec::cobs_encode(&data, &mut ours);
        if !data.is_empty() {
            proptest::prop_assert_eq!(&ours, &cobs::encode_vec(&data));
        }
        proptest::prop_assert!(!ours.contains(&0));
        let n = crate::codec::cobs_decode_in_place(&mut ours).unwrap();
        proptest::prop_assert_eq!(&ours[..n], data.as_slice());
    }
}

/// A record larger than the append path's first scratch buffer grows it and still encodes to
/// the same frame as a fresh encoder would; the next, small record reuses the grown buffer.
#[test]
fn records_larger_than_the_scratch_buffer_encode_the_same() {
    let big = record(
        "s",
        1,
        SessionEvent::Output {
            text: "x\0y".repeat(40_000),
        },
    );
    let small = record("s", 2, SessionEvent::Output { text: "ok".into() });
    let mut scratch = Vec::new();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    crate::codec::encode_frame_with(&big, &mut scratch, &mut a).unwrap();
    assert!(
        scratch.len() >= 120_000,
        "the scratch grew to {}",
        scratch.len()
    );
    crate::codec::encode_frame_with(&small, &mut scratch, &mut b).unwrap();
    let (body_a, body_b) = (a.len() - 1, b.len() - 1);
    assert_eq!(decode_frame(&mut a[..body_a]).unwrap(), big);
    assert_eq!(decode_frame(&mut b[..body_b]).unwrap(), small);
    // The bytes are postcard's, CRC-32 LE, COBS, as docs/cslog-format.md says.
    let mut payload = postcard::to_allocvec(&small).unwrap();
    payload
        .extend_from_slice(&crc32fast::hash(&postcard::to_allocvec(&small).unwrap()).to_le_bytes());
    let mut expected = cobs::encode_vec(&payload);
    expected.push(0);
    let mut again = Vec::new();
    encode_frame(&small, &mut again).unwrap();
    assert_eq!(again, expected);
}

/// A run of exactly 254 non-zero bytes at the end ends on a full group with nothing after it.
#[test]
fn cobs_full_groups_round_trip() {
    for len in [253usize, 254, 255, 508, 509] {
        let data = vec![7u8; len];
        let mut ours = Vec::new();
        crate::codec::cobs_encode(&data, &mut ours);
        assert_eq!(ours, cobs::encode_vec(&data), "len {len}");
        let n = crate::codec::cobs_decode_in_place(&mut ours).unwrap();
        assert_eq!(&ours[..n], data.as_slice());
    }
}

/// The worked example of docs/cslog-format.md, byte for byte.
#[test]
fn the_format_page_example_frame_is_exact() {
    let record = cuca_events::SessionRecord {
        session_id: "demo".into(),
        sequence: 0,
        timestamp_ms: 0,
        event: SessionEvent::Output {
            text: "noted".into(),
        },
    };
    let mut frame = Vec::new();
    encode_frame(&record, &mut frame).unwrap();
    assert_eq!(
        frame,
        [
            0x06, 0x04, 0x64, 0x65, 0x6d, 0x6f, 0x01, 0x0c, 0x03, 0x05, 0x6e, 0x6f, 0x74, 0x65,
            0x64, 0xb6, 0x86, 0xcf, 0x28, 0x00
        ]
    );
}

/// A short write says how many bytes it put down, so a run of frames written at once knows
/// which of them are whole on disk.
#[test]
fn a_short_write_counts_the_bytes_it_wrote() {
    let mut writer = stingy(7);
    let (written, error) = crate::backend::write_counted(&mut writer, b"0123456789").unwrap_err();
    assert_eq!(written, 7);
    assert_eq!(error.kind(), ErrorKind::WriteZero);
    let mut failing = Stingy {
        fail: Some(ErrorKind::StorageFull),
        ..stingy(100)
    };
    let (written, error) = crate::backend::write_counted(&mut failing, b"frame").unwrap_err();
    assert_eq!((written, error.kind()), (0, ErrorKind::StorageFull));
}
