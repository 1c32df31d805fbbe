//! Unit tests of the shell: the bound on every index an upstream sends, in every format.

use cuca_events::MessageContentBlock;

use crate::{Format, StreamSummary, WireError, MAX_INDEX};

/// One event of `format` carrying `index` where the format numbers something, and the field's
/// name as the decoder names it.
fn events_with_index(format: Format, index: u64) -> Vec<(&'static str, String)> {
    match format {
        Format::Chat => vec![
            (
                "choices[].index",
                format!(r#"data: {{"choices":[{{"index":{index},"delta":{{"content":"x"}}}}]}}"#),
            ),
            (
                "tool_calls[].index",
                format!(
                    r#"data: {{"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":{index},"id":"c","function":{{"name":"f","arguments":"{{}}"}}}}]}}}}]}}"#
                ),
            ),
        ],
        Format::Messages => vec![(
            "index",
            format!(
                r#"event: content_block_start
data: {{"type":"content_block_start","index":{index},"content_block":{{"type":"text","text":""}}}}"#
            ),
        )],
        _ => vec![
            (
                "content_index",
                format!(
                    r#"data: {{"type":"response.output_text.delta","output_index":0,"content_index":{index},"delta":"x"}}"#
                ),
            ),
            (
                "output_index",
                format!(
                    r#"data: {{"type":"response.output_text.delta","output_index":{index},"content_index":0,"delta":"x"}}"#
                ),
            ),
            (
                "summary_index",
                format!(
                    r#"data: {{"type":"response.reasoning_summary_text.delta","output_index":0,"summary_index":{index},"delta":"x"}}"#
                ),
            ),
        ],
    }
}

/// The format's end, so a stream whose hostile event is passed over is complete.
fn end(format: Format) -> &'static str {
    match format {
        Format::Chat => "data: [DONE]",
        Format::Messages => "event: message_stop\ndata: {\"type\":\"message_stop\"}",
        _ => r#"data: {"type":"response.completed","response":{"id":"r","status":"completed"}}"#,
    }
}

fn run(
    format: Format,
    skipping: bool,
    event: &str,
) -> (Vec<MessageContentBlock>, Result<StreamSummary, WireError>) {
    let mut decoder = format.decoder(skipping);
    let mut blocks = Vec::new();
    let body = format!("{event}\n\n{}\n\n", end(format));
    let result = decoder
        .feed(body.as_bytes(), &mut blocks)
        .and_then(|()| decoder.finish(&mut blocks));
    (blocks, result)
}

#[test]
fn an_index_past_the_bound_is_refused_naming_the_field_the_index_and_the_bound() {
    for format in Format::ALL {
        // The bound itself is read: the refusal starts past it.
        for (field, event) in events_with_index(format, MAX_INDEX) {
            let (_, result) = run(format, false, &event);
            let summary = result.unwrap_or_else(|e| panic!("{format:?} {field}: {e}"));
            assert_eq!(summary.n_skipped, 0, "{format:?} {field}");
        }
        for (field, event) in events_with_index(format, 4_000_000) {
            let (blocks, result) = run(format, false, &event);
            let Err(WireError::Decode { message }) = result else {
                panic!("{format:?} {field}: {result:?}");
            };
            assert!(
                message.contains(&format!("{field} 4000000 is past {MAX_INDEX}")),
                "{format:?}: {message}"
            );
            assert!(blocks.is_empty(), "{format:?} {field}: {blocks:?}");
        }
    }
}

#[test]
fn a_skipping_decoder_passes_over_an_index_past_the_bound_and_says_which() {
    for format in Format::ALL {
        for (field, event) in events_with_index(format, 4_000_000) {
            let (blocks, result) = run(format, true, &event);
            let summary = result.unwrap_or_else(|e| panic!("{format:?} {field}: {e}"));
            assert_eq!(summary.n_skipped, 1, "{format:?} {field}");
            let first = summary.first_skipped.unwrap_or_default();
            assert!(
                first.contains(&format!("{field} 4000000 is past {MAX_INDEX}")),
                "{format:?}: {first}"
            );
            assert!(blocks.is_empty(), "{format:?} {field}: {blocks:?}");
            // Nothing the index would have sized is kept in `wire`.
            let wire = summary.wire.map(|w| w.to_string()).unwrap_or_default();
            assert!(wire.len() < 200, "{format:?} {field}: {wire}");
        }
    }
}

#[test]
fn a_responses_stream_opening_items_past_the_bound_is_refused() {
    let added = |n: u64| {
        format!(
            "data: {{\"type\":\"response.output_item.added\",\"item\":{{\"id\":\"fc_{n}\",\"type\":\"function_call\",\"call_id\":\"c{n}\",\"name\":\"f\",\"arguments\":\"{{}}\"}}}}\n\n"
        )
    };
    let mut decoder = Format::Responses.decoder(true);
    let mut blocks = Vec::new();
    // Items 0 to the bound open.
    for n in 0..=MAX_INDEX {
        decoder.feed(added(n).as_bytes(), &mut blocks).unwrap();
    }
    let Err(WireError::Decode { message }) =
        decoder.feed(added(MAX_INDEX + 1).as_bytes(), &mut blocks)
    else {
        panic!("an item past the bound was opened");
    };
    assert!(
        message.contains(&format!(
            "output item {} is past {MAX_INDEX}",
            MAX_INDEX + 1
        )),
        "{message}"
    );
}

#[test]
fn a_messages_stream_starting_blocks_past_the_bound_is_refused() {
    let block = |event: &str, data: &str| format!("event: {event}\ndata: {data}\n\n");
    let one = block(
        "content_block_start",
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
    ) + &block(
        "content_block_stop",
        r#"{"type":"content_block_stop","index":0}"#,
    );
    let mut decoder = Format::Messages.decoder(true);
    let mut blocks = Vec::new();
    // Blocks 0 to the bound start (each reusing index 0 once the last one stopped).
    for _ in 0..=MAX_INDEX {
        decoder.feed(one.as_bytes(), &mut blocks).unwrap();
    }
    let Err(WireError::Decode { message }) = decoder.feed(one.as_bytes(), &mut blocks) else {
        panic!("a block past the bound was started");
    };
    assert!(
        message.contains(&format!(
            "content block {} is past {MAX_INDEX}",
            MAX_INDEX + 1
        )),
        "{message}"
    );
}
