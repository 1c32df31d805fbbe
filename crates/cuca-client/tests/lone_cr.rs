//! Regression (found by `cuca-reliability`'s fuzzing): a `\r` that ends one read is a line
//! end as soon as the next read shows it is not the first half of `\r\n`.

use cuca_client::SseDecoder;

#[test]
fn an_event_ended_by_bare_crs_across_one_byte_reads_is_dispatched_on_time() {
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    for read in [&b"data: a\r"[..], b"\r", b"x"] {
        decoder
            .feed(read, &mut |event| {
                events.push(event.data.to_owned());
                Ok(())
            })
            .map_err(|error| error.to_string())
            .unwrap_or_else(|error| panic!("{error}"));
    }
    // The blank line (`\r`) is known to be whole once `x` arrives: the event is out.
    assert_eq!(events, ["a"]);
}
