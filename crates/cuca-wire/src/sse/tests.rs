//! Unit tests of the event-stream line decoder.

use super::*;

fn events(chunks: &[&[u8]]) -> Vec<(String, String)> {
    let mut decoder = SseDecoder::new();
    let mut out = Vec::new();
    let mut push = |event: SseEvent<'_>| {
        out.push((event.event.to_owned(), event.data.to_owned()));
        Ok(())
    };
    for chunk in chunks {
        decoder.feed(chunk, &mut push).unwrap();
    }
    decoder.finish(&mut push).unwrap();
    out
}

fn message(data: &str) -> (String, String) {
    ("message".to_owned(), data.to_owned())
}

#[test]
fn lf_crlf_and_lone_cr_all_end_lines() {
    let expected = vec![message("a"), message("b"), message("c")];
    assert_eq!(
        events(&[b"data: a\n\ndata: b\r\n\r\ndata: c\r\r"]),
        expected
    );
}

#[test]
fn crlf_split_between_reads_is_one_terminator() {
    // "CRLF, events split across reads at any byte": the \r arrives alone first.
    assert_eq!(
        events(&[b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n"]),
        vec![message("a"), message("b")]
    );
}

#[test]
fn comments_and_keep_alives_are_ignored() {
    assert_eq!(
        events(&[b": keep-alive\n\n:\n\ndata: x\n\n"]),
        vec![message("x")]
    );
}

#[test]
fn multi_line_data_is_joined_and_event_names_are_kept() {
    assert_eq!(
        events(&[b"event: error\ndata: one\ndata: two\nid: 7\nretry: 10\n\n"]),
        vec![("error".to_owned(), "one\ntwo".to_owned())]
    );
}

#[test]
fn llama_cpp_error_line_is_dispatched_at_once() {
    assert_eq!(
        events(&[b"error: {\"code\":500}\n"]),
        vec![("error".to_owned(), "{\"code\":500}".to_owned())]
    );
}

#[test]
fn data_without_a_closing_blank_line_is_dispatched_at_the_end() {
    assert_eq!(events(&[b"data: tail"]), vec![message("tail")]);
}

#[test]
fn every_single_byte_split_gives_the_same_events() {
    let body = b"data: {\"x\":\"\xc3\xa9\"}\r\n\r\n: ping\n\ndata: [DONE]\n\n";
    let whole = events(&[body]);
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(events(&bytes), whole);
    assert_eq!(whole, vec![message("{\"x\":\"é\"}"), message("[DONE]")]);
}

#[test]
fn invalid_utf8_names_the_byte_offset() {
    let mut decoder = SseDecoder::new();
    let err = decoder
        .feed(b"data: ok\n\ndata: \xff\n\n", &mut |_| Ok(()))
        .unwrap_err();
    assert_eq!(err.to_string(), "the event stream is not UTF-8 at byte 16");
}

#[test]
fn a_lone_cr_at_the_end_of_a_read_is_resolved_by_the_next_byte() {
    // "\r" then "d…": the \r alone ended the line, so both data lines join one event.
    assert_eq!(
        events(&[b"data: a\r", b"data: b\r", b"\r"]),
        vec![message("a\nb")]
    );
}

#[test]
fn a_long_line_fed_one_byte_at_a_time_decodes_whole() {
    let text = "x".repeat(10_000);
    let body = format!("data: {text}\n\n");
    let bytes: Vec<&[u8]> = body.as_bytes().chunks(1).collect();
    assert_eq!(events(&bytes), vec![message(&text)]);
}

/// A server that never ends a line cannot make the decoder buffer without bound: past
/// `MAX_EVENT_BYTES` the stream is refused with a decode error that says why.
#[test]
fn a_line_that_never_ends_is_refused_past_the_cap() {
    let mut decoder = SseDecoder::new();
    let chunk = vec![b'x'; 1 << 20];
    let mut events = 0;
    let mut refused = None;
    for _ in 0..(MAX_EVENT_BYTES / chunk.len() + 2) {
        match decoder.feed(&chunk, &mut |_| {
            events += 1;
            Ok(())
        }) {
            Ok(()) => {}
            Err(error) => {
                refused = Some(error);
                break;
            }
        }
    }
    assert_eq!(events, 0);
    match refused {
        Some(WireError::Decode { message }) => {
            assert!(message.contains("without ending"), "{message}")
        }
        other => panic!("expected a Decode error, got {other:?}"),
    }
}

/// The same bound holds for an event whose `data:` lines keep coming without a blank line.
#[test]
fn an_event_that_never_ends_is_refused_past_the_cap() {
    let mut decoder = SseDecoder::new();
    let mut line = b"data: ".to_vec();
    line.extend(std::iter::repeat_n(b'y', 1 << 20));
    line.push(b'\n');
    let mut refused = None;
    for _ in 0..(MAX_EVENT_BYTES / line.len() + 2) {
        if let Err(error) = decoder.feed(&line, &mut |_| Ok(())) {
            refused = Some(error);
            break;
        }
    }
    match refused {
        Some(WireError::Decode { message }) => {
            assert!(message.contains("more than"), "{message}")
        }
        other => panic!("expected a Decode error, got {other:?}"),
    }
}
