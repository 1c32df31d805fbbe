//! Unit tests of the Messages module against the real llama-server transcripts and the
//! shapes Anthropic documents: requests read into the session vocabulary, streams and whole
//! messages decoded, replayed so the SDKs cannot tell, errors in Anthropic's shape.

use bytes::Bytes;
use cuca_events::{
    Message, MessageContentBlock, PromptCacheUsage, ProviderUsage, Role, TokenDetail, ToolChoice,
};
use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::{ErrorInfo, Format, RecordedAnswer, StreamSummary, WireError, WireRequest};

const STREAM: &[u8] = include_bytes!("../../tests/fixtures/llama-server/messages-stream.body");
const REASONING: &[u8] =
    include_bytes!("../../tests/fixtures/llama-server/messages-reasoning-stream.body");
const BASIC: &[u8] = include_bytes!("../../tests/fixtures/llama-server/messages-basic.body");
const COUNT_REQUEST: &[u8] =
    include_bytes!("../../tests/fixtures/llama-server/messages-count-tokens.request.json");
const REASONING_REQUEST: &[u8] =
    include_bytes!("../../tests/fixtures/llama-server/messages-reasoning-stream.request.json");

type Decoded = (Vec<MessageContentBlock>, StreamSummary);

fn decode_chunks(chunks: &[&[u8]]) -> Result<Decoded, WireError> {
    let mut decoder = MessagesStreamDecoder::new();
    let mut blocks = Vec::new();
    for chunk in chunks {
        decoder.feed(chunk, &mut blocks)?;
    }
    let summary = decoder.finish(&mut blocks)?;
    Ok((blocks, summary))
}

fn decode(body: &[u8]) -> Result<Decoded, WireError> {
    decode_chunks(&[body])
}

/// Splits `body` at the given cut points (taken modulo its length).
fn split_at<'a>(body: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
    cuts.sort_unstable();
    let mut pieces = Vec::new();
    let mut start = 0;
    for cut in cuts {
        pieces.push(&body[start..cut]);
        start = cut;
    }
    pieces.push(&body[start..]);
    pieces
}

fn answer_of((blocks, summary): &Decoded) -> RecordedAnswer<Vec<MessageContentBlock>> {
    let usage = summary.usage.clone().unwrap_or_default();
    RecordedAnswer {
        blocks: blocks.clone(),
        model: summary.model.clone().unwrap_or_default(),
        finish_reason: summary.finish_reason.clone(),
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
        wire: summary.wire.clone(),
        id: "cuca-test-0".into(),
    }
}

fn stream_bytes<B>(answer: RecordedAnswer<B>) -> Vec<u8>
where
    B: AsRef<[MessageContentBlock]> + Send + 'static,
{
    encode_stream(answer, &WireRequest::default())
        .flat_map(|event: Bytes| event.to_vec())
        .collect()
}

/// The `data` JSON of every event of an encoded stream, with its `event:` name.
fn events_of(bytes: &[u8]) -> Vec<(String, Value)> {
    let text = std::str::from_utf8(bytes).unwrap();
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|event| {
            let (name, data) = event.split_once('\n').unwrap();
            let name = name.strip_prefix("event: ").unwrap().to_owned();
            let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(data["type"], name.as_str(), "event name = data type");
            (name, data)
        })
        .collect()
}

#[test]
fn the_llama_server_text_stream_gives_one_text_block_per_delta_and_its_wire() {
    let (blocks, summary) = decode(STREAM).unwrap();
    assert_eq!(blocks.len(), 12);
    assert!(blocks
        .iter()
        .all(|b| matches!(b, MessageContentBlock::Text { .. })));
    assert_eq!(blocks[0], MessageContentBlock::text("orter"));
    assert_eq!(blocks[1], MessageContentBlock::text(" бу"));
    assert_eq!(summary.model.as_deref(), Some("cuca-tiny-random"));
    assert_eq!(summary.finish_reason.as_deref(), Some("max_tokens"));
    // "Anthropic's input_tokens, output_tokens and cache counts": every input count is prompt.
    assert_eq!(
        summary.usage,
        Some(ProviderUsage {
            prompt_tokens: 40,
            completion_tokens: 12,
            reasoning_tokens: None,
            cost: None,
            detail: DETAIL_40_12,
        })
    );
    assert_eq!(
        summary.prompt_cache,
        Some(PromptCacheUsage { cached_tokens: 39 })
    );
    assert!(summary.saw_done);
    assert_eq!(summary.n_events, 17);
    assert_eq!(
        summary.wire,
        Some(json!({
            "format": "messages",
            "id": "chatcmpl-imHYXdc23NW2HqelZa1YwSNVkzhhRcI8",
            "usage": {"cache_read_input_tokens": 39, "input_tokens": 1, "output_tokens": 12},
            "stop_sequence": null,
            "blocks": [{"type": "text", "records": 12}],
        }))
    );
}

#[test]
fn the_thinking_stream_keeps_its_signature_in_wire() {
    // "the same thinking blocks with their signatures (Anthropic rejects a thinking block
    // replayed without its signature)"
    let (blocks, summary) = decode(REASONING).unwrap();
    assert_eq!(blocks.len(), 12);
    assert_eq!(blocks[0], MessageContentBlock::thinking("\nStatus"));
    assert_eq!(blocks[8], MessageContentBlock::thinking(")-\\"));
    assert!(blocks
        .iter()
        .all(|b| matches!(b, MessageContentBlock::Thinking { .. })));
    assert_eq!(summary.usage.as_ref().map(|u| u.prompt_tokens), Some(41));
    let wire = summary.wire.unwrap();
    assert_eq!(
        wire["blocks"],
        json!([{"type": "thinking", "records": 12, "signature": ""}])
    );
    assert_eq!(wire["id"], "chatcmpl-gOL4ycUk09dkcbEf29STtAK2NPrYdFdN");
}

#[test]
fn the_whole_message_object_decodes_to_its_blocks_and_wire() {
    let (blocks, summary) = decode_whole(BASIC).unwrap();
    assert_eq!(
        blocks,
        vec![MessageContentBlock::text(
            "hältanes智 Olimp flash DriverCon niUST KenĆitos"
        )]
    );
    assert_eq!(summary.finish_reason.as_deref(), Some("max_tokens"));
    assert_eq!(summary.usage.as_ref().map(|u| u.prompt_tokens), Some(40));
    assert_eq!(
        summary.wire,
        Some(json!({
            "format": "messages",
            "id": "chatcmpl-LV18JW5MNhEyL6N2reqH6c5tOqSJum9C",
            "usage": {"cache_read_input_tokens": 39, "input_tokens": 1, "output_tokens": 12},
            "stop_sequence": null,
            "blocks": [{"type": "text", "records": 1}],
        }))
    );
}

#[test]
fn every_split_into_two_reads_decodes_the_same() {
    for body in [STREAM, REASONING] {
        let whole = decode(body).unwrap();
        for cut in 0..=body.len() {
            let (a, b) = body.split_at(cut);
            assert_eq!(decode_chunks(&[a, b]).unwrap(), whole, "cut at byte {cut}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// "events split across reads at any byte": every chunking of a real transcript gives
    /// the same blocks, summary and wire as the whole body.
    #[test]
    fn any_chunking_of_a_real_transcript_decodes_the_same(
        cuts in proptest::collection::vec(any::<usize>(), 0..40),
        which in 0usize..3,
    ) {
        let body = [STREAM, REASONING, CANNED_TOOL_USE][which];
        let whole = decode(body).unwrap();
        prop_assert_eq!(decode_chunks(&split_at(body, &cuts)).unwrap(), whole);
    }

    /// The replayed stream decodes to what was recorded however the network splits it.
    #[test]
    fn any_chunking_of_a_replayed_stream_decodes_the_same(
        cuts in proptest::collection::vec(any::<usize>(), 0..40),
    ) {
        let recorded = decode(KEPT_BLOCKS).unwrap();
        let bytes = stream_bytes(answer_of(&recorded));
        let replayed = decode_chunks(&split_at(&bytes, &cuts)).unwrap();
        prop_assert_eq!(replayed.0, recorded.0);
        prop_assert_eq!(replayed.1.wire, recorded.1.wire);
    }
}

/// decode(encode(decode(bytes))) == decode(bytes), for blocks, wire, stop reason and usage.
fn assert_stream_round_trip(body: &[u8]) {
    let recorded = decode(body).unwrap();
    let replayed = decode(&stream_bytes(answer_of(&recorded))).unwrap();
    assert_eq!(replayed.0, recorded.0);
    assert_eq!(replayed.1.wire, recorded.1.wire);
    assert_eq!(replayed.1.finish_reason, recorded.1.finish_reason);
    assert_eq!(replayed.1.usage, recorded.1.usage);
    assert_eq!(replayed.1.prompt_cache, recorded.1.prompt_cache);
    assert_eq!(replayed.1.model, recorded.1.model);
    assert!(replayed.1.saw_done);
}

#[test]
fn a_replayed_stream_decodes_to_the_recorded_blocks_and_wire() {
    // "such that the client cannot tell it from the recorded answer: the same text, the same
    // tool-call ids and arguments, the same thinking blocks with their signatures, the same
    // stop reason and usage"
    for body in [STREAM, REASONING, CANNED_TOOL_USE, KEPT_BLOCKS] {
        assert_stream_round_trip(body);
    }
}

#[test]
fn a_replayed_thinking_stream_sends_its_signature_delta_before_the_block_stops() {
    let recorded = decode(REASONING).unwrap();
    let events = events_of(&stream_bytes(answer_of(&recorded)));
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
    let stop = names
        .iter()
        .position(|n| *n == "content_block_stop")
        .unwrap();
    assert_eq!(
        events[stop - 1].1["delta"],
        json!({"type": "signature_delta", "signature": ""})
    );
    assert_eq!(
        events[1].1,
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}})
    );
    // The recorded message id and the recorded usage, input counts in message_start.
    let start = &events[0].1["message"];
    assert_eq!(start["id"], "chatcmpl-gOL4ycUk09dkcbEf29STtAK2NPrYdFdN");
    assert_eq!(start["usage"]["input_tokens"], 41);
    assert_eq!(start["usage"]["cache_read_input_tokens"], 0);
    assert_eq!(
        events[events.len() - 2].1["usage"],
        json!({"output_tokens": 12})
    );
    assert_eq!(
        events[events.len() - 2].1["delta"]["stop_reason"],
        "max_tokens"
    );
}

#[test]
fn a_replayed_whole_message_decodes_to_the_recorded_blocks_and_wire() {
    let recorded = decode_whole(BASIC).unwrap();
    let answer = answer_of(&recorded);
    let object = encode_object(&answer, &WireRequest::default());
    let replayed = decode_whole(object.to_string().as_bytes()).unwrap();
    assert_eq!(replayed, recorded);
    // The recorded object, field for field.
    let original: Value = serde_json::from_slice(BASIC).unwrap();
    assert_eq!(object, original);
    // And as a stream: the same blocks and wire again.
    let streamed = decode(&stream_bytes(answer)).unwrap();
    assert_eq!(streamed.0, recorded.0);
    assert_eq!(streamed.1.wire, recorded.1.wire);
}

#[test]
fn a_whole_message_keeps_the_keys_cuca_does_not_map() {
    let body = br#"{"id":"msg_2","type":"message","role":"assistant","model":"claude","container":{"id":"cnt_1","expires_at":"2026-12-01T15:00:00Z"},"content":[{"type":"thinking","thinking":"hm","signature":"EqQB"},{"type":"tool_use","id":"toolu_9","name":"Bash","input":{"command":"ls -la"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":9}}"#;
    let recorded = decode_whole(body).unwrap();
    assert_eq!(
        recorded.0,
        vec![
            MessageContentBlock::thinking("hm"),
            tool_call("toolu_9", "Bash", r#"{"command":"ls -la"}"#)
        ]
    );
    let wire = recorded.1.wire.as_ref().unwrap();
    assert_eq!(wire["fields"]["container"]["id"], "cnt_1");
    assert_eq!(wire["blocks"][0]["signature"], "EqQB");
    let object = encode_object(&answer_of(&recorded), &WireRequest::default());
    assert_eq!(object, serde_json::from_slice::<Value>(body).unwrap());
    let streamed = decode(&stream_bytes(answer_of(&recorded))).unwrap();
    assert_eq!(streamed.0, recorded.0);
    assert_eq!(streamed.1.wire, recorded.1.wire);
}

#[test]
fn encoding_is_deterministic() {
    let recorded = decode(CANNED_TOOL_USE).unwrap();
    assert_eq!(
        stream_bytes(answer_of(&recorded)),
        stream_bytes(answer_of(&recorded))
    );
    let mut answer = answer_of(&recorded);
    answer.wire = None;
    assert_eq!(stream_bytes(answer.clone()), stream_bytes(answer));
}

fn tool_call(id: &str, name: &str, arguments: &str) -> MessageContentBlock {
    MessageContentBlock::ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

#[test]
fn without_wire_consecutive_blocks_of_a_kind_make_one_content_block() {
    // An answer recorded in another format: "group consecutive Text into one text block,
    // consecutive Thinking into one thinking block, each ToolCall its own tool_use block".
    let blocks = vec![
        MessageContentBlock::thinking("a"),
        MessageContentBlock::thinking("b"),
        MessageContentBlock::text("c"),
        MessageContentBlock::text("d"),
        tool_call("call_1", "ls", "{\"path\":\".\"}"),
        tool_call("call_2", "pwd", "{}"),
        MessageContentBlock::text("e"),
    ];
    let answer = RecordedAnswer {
        blocks: blocks.clone(),
        model: "m".into(),
        finish_reason: None,
        prompt_tokens: 7,
        completion_tokens: 5,
        wire: None,
        id: "cuca-s-3".into(),
    };
    let bytes = stream_bytes(answer.clone());
    let events = events_of(&bytes);
    let starts: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "content_block_start")
        .map(|(_, d)| &d["content_block"])
        .collect();
    assert_eq!(
        starts,
        [
            &json!({"type": "thinking", "thinking": ""}),
            &json!({"type": "text", "text": ""}),
            &json!({"type": "tool_use", "id": "call_1", "name": "ls", "input": {}}),
            &json!({"type": "tool_use", "id": "call_2", "name": "pwd", "input": {}}),
            &json!({"type": "text", "text": ""}),
        ]
    );
    assert!(
        !bytes.windows(15).any(|w| w == b"signature_delta"),
        "no signature to give"
    );
    assert_eq!(events[0].1["message"]["id"], "msg_cuca-s-3");
    assert_eq!(events[0].1["message"]["usage"]["input_tokens"], 7);
    let (decoded, summary) = decode(&bytes).unwrap();
    assert_eq!(decoded, blocks);
    // None → tool_use when a ToolCall is present.
    assert_eq!(summary.finish_reason.as_deref(), Some("tool_use"));
    assert_eq!(
        summary
            .usage
            .as_ref()
            .map(|u| (u.prompt_tokens, u.completion_tokens)),
        Some((7, 5))
    );

    let object = encode_object(&answer, &WireRequest::default());
    assert_eq!(
        object["content"],
        json!([
            {"type": "thinking", "thinking": "ab", "signature": ""},
            {"type": "text", "text": "cd"},
            {"type": "tool_use", "id": "call_1", "name": "ls", "input": {"path": "."}},
            {"type": "tool_use", "id": "call_2", "name": "pwd", "input": {}},
            {"type": "text", "text": "e"},
        ])
    );
    assert_eq!(object["stop_reason"], "tool_use");
    assert_eq!(object["id"], "msg_cuca-s-3");
}

#[test]
fn stop_reasons_of_other_formats_are_mapped() {
    assert_eq!(stop_reason(Some("stop"), false), "end_turn");
    assert_eq!(stop_reason(Some("length"), false), "max_tokens");
    assert_eq!(stop_reason(Some("tool_calls"), true), "tool_use");
    assert_eq!(stop_reason(Some("max_tokens"), false), "max_tokens");
    assert_eq!(stop_reason(Some("pause_turn"), false), "pause_turn");
    assert_eq!(stop_reason(None, false), "end_turn");
    assert_eq!(stop_reason(None, true), "tool_use");
}

#[test]
fn a_long_text_goes_out_in_pieces_of_at_most_max_event_text() {
    let long = "ü".repeat(crate::MAX_EVENT_TEXT); // two bytes a character
    let answer = RecordedAnswer {
        blocks: vec![MessageContentBlock::text(long.clone())],
        model: "m".into(),
        finish_reason: Some("end_turn".into()),
        prompt_tokens: 1,
        completion_tokens: 1,
        wire: None,
        id: "x".into(),
    };
    let events = events_of(&stream_bytes(answer));
    let pieces: Vec<&str> = events
        .iter()
        .filter(|(n, _)| n == "content_block_delta")
        .map(|(_, d)| d["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(pieces.len(), 2);
    assert!(pieces.iter().all(|p| p.len() <= crate::MAX_EVENT_TEXT));
    assert_eq!(pieces.concat(), long);
}

/// A tool-use stream in the shape Anthropic documents (text, then a `tool_use` block whose
/// input arrives as `input_json_delta` pieces, `stop_reason: "tool_use"`); llama-server's
/// random model never calls a tool, so this is the documented shape, not a capture.
const CANNED_TOOL_USE: &[u8] = b"event: message_start\n\
data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_014p7gG3wDgGV9EUtLvnow3U\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"stop_sequence\":null,\"usage\":{\"input_tokens\":472,\"cache_creation_input_tokens\":10,\"cache_read_input_tokens\":2000,\"output_tokens\":2},\"content\":[],\"stop_reason\":null}}\n\n\
event: ping\n\
data: {\"type\": \"ping\"}\n\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Okay, let's check\"}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" the weather.\"}}\n\n\
event: content_block_stop\n\
data: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01T1x1fJ34qAmk2tNTrN7Up6\",\"name\":\"get_weather\",\"input\":{}}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"location\\\":\"}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\" \\\"San Francisco, CA\\\", \"}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"unit\\\": \\\"fahrenheit\\\"}\"}}\n\n\
event: content_block_stop\n\
data: {\"type\":\"content_block_stop\",\"index\":1}\n\n\
event: message_delta\n\
data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":89}}\n\n\
event: message_stop\n\
data: {\"type\":\"message_stop\"}\n\n";

#[test]
fn a_tool_use_stream_records_one_tool_call_with_the_exact_arguments() {
    // "tool_use / function_call are ToolCalls with their ids"
    let (blocks, summary) = decode(CANNED_TOOL_USE).unwrap();
    assert_eq!(
        blocks,
        vec![
            MessageContentBlock::text("Okay, let's check"),
            MessageContentBlock::text(" the weather."),
            tool_call(
                "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                "get_weather",
                "{\"location\": \"San Francisco, CA\", \"unit\": \"fahrenheit\"}"
            ),
        ]
    );
    assert_eq!(summary.finish_reason.as_deref(), Some("tool_use"));
    assert_eq!(
        summary
            .usage
            .as_ref()
            .map(|u| (u.prompt_tokens, u.completion_tokens)),
        Some((2482, 89))
    );
    assert_eq!(
        summary.prompt_cache,
        Some(PromptCacheUsage {
            cached_tokens: 2000
        })
    );
    assert_eq!(
        summary.wire.unwrap()["blocks"],
        json!([{"type": "text", "records": 2}, {"type": "tool_use", "records": 1}])
    );
}

#[test]
fn a_tool_call_is_pushed_only_when_its_block_stops() {
    // Up to the second content_block_stop: the arguments are all there, the call not yet.
    let text = std::str::from_utf8(CANNED_TOOL_USE).unwrap();
    let second = text
        .match_indices("event: content_block_stop")
        .nth(1)
        .unwrap()
        .0;
    let mut decoder = MessagesStreamDecoder::new();
    let mut blocks = Vec::new();
    decoder
        .feed(&CANNED_TOOL_USE[..second], &mut blocks)
        .unwrap();
    assert_eq!(blocks.len(), 2);
    decoder
        .feed(&CANNED_TOOL_USE[second..], &mut blocks)
        .unwrap();
    assert_eq!(blocks.len(), 3);
    assert!(decoder.is_done());
}

#[test]
fn a_tool_use_without_streamed_input_takes_the_start_blocks_input() {
    let body = b"event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"now\",\"input\":{}}}\n\n\
event: content_block_stop\n\
data: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: message_delta\n\
data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":3}}\n\n";
    let (blocks, _) = decode(body).unwrap();
    assert_eq!(blocks, vec![tool_call("t1", "now", "{}")]);
}

#[test]
fn a_cut_stream_keeps_its_wire_and_is_refused_as_truncated() {
    let cut = CANNED_TOOL_USE
        .windows(12)
        .position(|w| w == b"\\\"unit\\\": \\\"")
        .unwrap();
    // Cut inside the tool input, at the end of an event (no message_delta, no message_stop).
    let end = CANNED_TOOL_USE[..cut]
        .windows(2)
        .rposition(|w| w == b"\n\n")
        .unwrap()
        + 2;
    let mut decoder = MessagesStreamDecoder::new();
    let mut blocks = Vec::new();
    decoder.feed(&CANNED_TOOL_USE[..end], &mut blocks).unwrap();
    let wire = decoder.summary().wire.clone().unwrap();
    assert_eq!(wire["id"], "msg_014p7gG3wDgGV9EUtLvnow3U");
    assert_eq!(wire["blocks"][0], json!({"type": "text", "records": 2}));
    let err = decoder.finish(&mut blocks).unwrap_err();
    assert!(
        matches!(err, WireError::Truncated { n_events: 10 }),
        "{err:?}"
    );
    // The half-assembled tool call is pushed as far as it got.
    assert_eq!(
        blocks.last(),
        Some(&tool_call(
            "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "get_weather",
            "{\"location\": \"San Francisco, CA\", "
        ))
    );
    assert_eq!(
        decoder.summary().wire.as_ref().unwrap()["blocks"][1]["records"],
        1
    );

    // The llama-server text stream cut before message_delta, likewise.
    let end = STREAM
        .windows(20)
        .position(|w| w == b"event: message_delta")
        .unwrap();
    let mut decoder = MessagesStreamDecoder::new();
    let mut blocks = Vec::new();
    decoder.feed(&STREAM[..end], &mut blocks).unwrap();
    assert!(matches!(
        decoder.finish(&mut blocks),
        Err(WireError::Truncated { n_events: 15 })
    ));
    assert_eq!(blocks.len(), 12);
    assert_eq!(
        decoder.summary().wire.as_ref().unwrap()["blocks"],
        json!([{"type": "text", "records": 12}])
    );
}

/// Blocks cuca has no session block for: a redacted thinking block and a server tool's use
/// and result (Anthropic's documented web search shapes), beside a text block with a
/// citation delta. "What cuca cannot map is kept, not dropped."
const KEPT_BLOCKS: &[u8] = b"event: message_start\n\
data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_kept\",\"type\":\"message\",\"container\":null,\"role\":\"assistant\",\"model\":\"claude-opus-4-1\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":9,\"output_tokens\":1,\"server_tool_use\":{\"web_search_requests\":1,\"web_fetch_requests\":0}}}}\n\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"EmwKAhgBEgy3va3pzix\"}}\n\n\
event: content_block_stop\n\
data: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"srvtoolu_01\",\"name\":\"web_search\",\"input\":{}}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"query\\\": \\\"weather\\\"}\"}}\n\n\
event: content_block_stop\n\
data: {\"type\":\"content_block_stop\",\"index\":1}\n\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"web_search_tool_result\",\"tool_use_id\":\"srvtoolu_01\",\"content\":[{\"type\":\"web_search_result\",\"title\":\"Weather\",\"url\":\"https://example.com\",\"encrypted_content\":\"Eq0\"}]}}\n\n\
event: content_block_stop\n\
data: {\"type\":\"content_block_stop\",\"index\":2}\n\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":3,\"content_block\":{\"type\":\"text\",\"text\":\"\",\"citations\":[]}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"citations_delta\",\"citation\":{\"type\":\"web_search_result_location\",\"url\":\"https://example.com\",\"title\":\"Weather\",\"encrypted_index\":\"Eo8\",\"cited_text\":\"Sunny\"}}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"text_delta\",\"text\":\"Sunny.\"}}\n\n\
event: content_block_stop\n\
data: {\"type\":\"content_block_stop\",\"index\":3}\n\n\
event: message_delta\n\
data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":20}}\n\n\
event: message_stop\n\
data: {\"type\":\"message_stop\"}\n\n";

#[test]
fn redacted_thinking_and_unknown_blocks_are_kept_verbatim_in_wire() {
    let (blocks, summary) = decode(KEPT_BLOCKS).unwrap();
    assert_eq!(blocks, vec![MessageContentBlock::text("Sunny.")]);
    assert_eq!(
        summary.wire.as_ref().unwrap()["blocks"],
        json!([
            {"type": "redacted_thinking", "records": 0, "data": "EmwKAhgBEgy3va3pzix"},
            {"type": "server_tool_use", "records": 0,
             "raw": {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {}},
             "deltas": [{"type": "input_json_delta", "partial_json": "{\"query\": \"weather\"}"}]},
            {"type": "web_search_tool_result", "records": 0,
             "raw": {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01",
                     "content": [{"type": "web_search_result", "title": "Weather", "url": "https://example.com", "encrypted_content": "Eq0"}]}},
            {"type": "text", "records": 1, "fields": {"citations": []},
             "deltas": [{"type": "citations_delta", "citation": {"type": "web_search_result_location", "url": "https://example.com", "title": "Weather", "encrypted_index": "Eo8", "cited_text": "Sunny"}}]},
        ])
    );
    // A message key cuca does not map is kept too.
    assert_eq!(
        summary.wire.as_ref().unwrap()["fields"],
        json!({"container": null})
    );
    // The usage object is kept whole, server tool counts included.
    assert_eq!(
        summary.wire.as_ref().unwrap()["usage"]["server_tool_use"],
        json!({"web_search_requests": 1, "web_fetch_requests": 0})
    );
    // The whole object: kept blocks as recorded, the server tool's input assembled, the
    // citation folded into its text block as the SDKs accumulate it.
    let object = encode_object(&answer_of(&(blocks, summary)), &WireRequest::default());
    assert_eq!(
        object["content"][0],
        json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"})
    );
    assert_eq!(object["content"][1]["input"], json!({"query": "weather"}));
    assert_eq!(
        object["content"][3],
        json!({"type": "text", "text": "Sunny.", "citations": [{"type": "web_search_result_location", "url": "https://example.com", "title": "Weather", "encrypted_index": "Eo8", "cited_text": "Sunny"}]})
    );
}

#[test]
fn a_wire_that_does_not_lay_out_the_blocks_falls_back_to_grouping() {
    let (_, summary) = decode(STREAM).unwrap();
    // Two blocks where the wire says twelve: its layout cannot be trusted for them.
    let answer = RecordedAnswer {
        blocks: vec![
            MessageContentBlock::text("a"),
            MessageContentBlock::text("b"),
        ],
        model: "m".into(),
        finish_reason: Some("end_turn".into()),
        prompt_tokens: 1,
        completion_tokens: 1,
        wire: summary.wire,
        id: "x".into(),
    };
    let (blocks, replayed) = decode(&stream_bytes(answer)).unwrap();
    assert_eq!(
        blocks,
        vec![
            MessageContentBlock::text("a"),
            MessageContentBlock::text("b")
        ]
    );
    assert_eq!(
        replayed.wire.unwrap()["blocks"],
        json!([{"type": "text", "records": 2}])
    );
}

#[test]
fn an_error_event_is_the_servers_message() {
    let body = b"event: message_start\n\
data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":1}}}\n\n\
event: error\n\
data: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n";
    let err = decode(body).unwrap_err();
    assert_eq!(
        err,
        WireError::StreamError {
            message: "Overloaded".into()
        }
    );
    assert_eq!(err.to_string(), "error event in the stream: Overloaded");
}

#[test]
fn a_malformed_event_is_refused_or_skipped_and_counted() {
    let body = b"event: message_start\n\
data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"x\",\"usage\":{\"input_tokens\":1}}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":4,\"delta\":{\"type\":\"text_delta\",\"text\":\"lost\"}}\n\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_de\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n\
event: message_stop\n\
data: {\"type\":\"message_stop\"}\n\n";
    let err = decode(body).unwrap_err();
    assert_eq!(
        err.to_string(),
        "event 2 is a delta for content block 4, never started: {\"type\":\"content_block_delta\",\"index\":4,\"delta\":{\"type\":\"text_delta\",\"text\":\"lost\"}}"
    );
    let mut decoder = MessagesStreamDecoder::skipping_malformed();
    let mut blocks = Vec::new();
    decoder.feed(body, &mut blocks).unwrap();
    let summary = decoder.finish(&mut blocks).unwrap();
    assert_eq!(blocks, vec![MessageContentBlock::text("ok")]);
    assert_eq!(summary.n_skipped, 2);
    assert!(summary
        .first_skipped
        .as_deref()
        .is_some_and(|s| s.starts_with("event 2 is a delta for content block 4")));
}

#[test]
fn an_empty_body_is_refused_as_an_empty_stream() {
    assert!(matches!(
        decode(b""),
        Err(WireError::Truncated { n_events: 0 })
    ));
}

#[test]
fn a_request_is_read_into_the_session_vocabulary_and_its_parameters_kept_byte_exact() {
    // "Anthropic's top-level system (string or blocks) ... are SystemPrompts; thinking ... is
    // Reasoning; text is Output; tool_use ... are ToolCalls with their ids"
    let body = br#"{"model":"claude-sonnet-4-5","max_tokens":  1024,
"system":[{"type":"text","text":"You are Claude Code."},{"type":"text","text":"Be terse.","cache_control":{"type":"ephemeral"}}],
"thinking":{"type":"enabled","budget_tokens":  2048},
"metadata":{"user_id":"u_1" },
"temperature":0.5,
"tool_choice":{"type":"any"},
"stream":true,
"tools":[{"name":"Bash","description":"Run a command","input_schema":{"type":"object","properties":{"command":{"type":"string"}}}},
         {"type":"web_search_20250305","name":"web_search","max_uses":5}],
"messages":[
 {"role":"user","content":"list files"},
 {"role":"assistant","content":[
   {"type":"thinking","thinking":"I should run ls.","signature":"EqQB"},
   {"type":"redacted_thinking","data":"EmwK"},
   {"type":"text","text":"Running it."},
   {"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]},
 {"role":"user","content":[
   {"type":"tool_result","tool_use_id":"toolu_1","content":"a.txt","is_error":true},
   {"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]},
   {"type":"text","text":"and now?"},
   {"type":"document","source":{"type":"text","media_type":"text/plain","data":"hi"}},
   {"type":"image","source":{"type":"url","url":"https://example.com/a.png"}},
   {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBOR"}}]}
]}"#;
    let request = parse_request(body).unwrap();
    let unified = &request.unified;
    assert_eq!(unified.model, "claude-sonnet-4-5");
    assert_eq!(unified.max_tokens, Some(1024));
    assert_eq!(unified.temperature, Some(0.5));
    assert_eq!(unified.tool_choice, Some(ToolChoice::Required));
    assert!(request.stream);
    assert!(!request.include_usage);
    assert_eq!(
        unified.messages,
        vec![
            Message::new(Role::System, "You are Claude Code."),
            Message::new(Role::System, "Be terse."),
            Message::new(Role::User, "list files"),
            Message {
                role: Role::Assistant,
                content: vec![
                    MessageContentBlock::thinking("I should run ls."),
                    MessageContentBlock::text(r#"{"data":"EmwK","type":"redacted_thinking"}"#),
                    MessageContentBlock::text("Running it."),
                    tool_call("toolu_1", "Bash", r#"{"command":"ls"}"#),
                ],
            },
            Message {
                role: Role::Tool,
                content: vec![MessageContentBlock::ToolResult {
                    tool_call_id: "toolu_1".into(),
                    content: "a.txt".into(),
                    is_error: true,
                }],
            },
            Message {
                role: Role::Tool,
                content: vec![MessageContentBlock::ToolResult {
                    tool_call_id: "toolu_2".into(),
                    content: "one\ntwo".into(),
                    is_error: false,
                }],
            },
            Message {
                role: Role::User,
                content: vec![
                    MessageContentBlock::text("and now?"),
                    MessageContentBlock::text(
                        r#"{"source":{"data":"hi","media_type":"text/plain","type":"text"},"type":"document"}"#
                    ),
                    MessageContentBlock::ImageBase64 {
                        media_type: "text/uri-list".into(),
                        data: "https://example.com/a.png".into(),
                    },
                    MessageContentBlock::ImageBase64 {
                        media_type: "image/png".into(),
                        data: "iVBOR".into(),
                    },
                ],
            },
        ]
    );
    assert_eq!(unified.tools.len(), 2);
    assert_eq!(unified.tools[0].name, "Bash");
    assert_eq!(unified.tools[0].description, "Run a command");
    assert_eq!(
        unified.tools[0].parameters,
        json!({"type":"object","properties":{"command":{"type":"string"}}})
    );
    // A server tool has no schema: its whole JSON stands in.
    assert_eq!(unified.tools[1].name, "web_search");
    assert_eq!(
        unified.tools[1].parameters,
        json!({"type":"web_search_20250305","name":"web_search","max_uses":5})
    );
    // "every parameter sent", the caller's own bytes (the spaces inside a value included;
    // those before it are the parser's, as in chat).
    assert_eq!(
        request.parameters,
        r#"{"max_tokens":1024,"metadata":{"user_id":"u_1" },"temperature":0.5,"thinking":{"type":"enabled","budget_tokens":  2048},"tool_choice":{"type":"any"}}"#
    );
    assert!(request.unrecorded.is_empty());
}

#[test]
fn a_kept_block_gives_the_same_text_whatever_its_key_order() {
    // "a block type it does not know is recorded verbatim": as canonical JSON, because the
    // TypeScript SDK sends a block back in the key order it received, and a replayed stream's
    // order is not the recorded server's.
    let text = |block: &str| {
        let body =
            format!(r#"{{"model":"m","messages":[{{"role":"assistant","content":[{block}]}}]}}"#);
        parse_request(body.as_bytes()).unwrap().unified.messages[0].content[0].clone()
    };
    let want = MessageContentBlock::text(r#"{"data":"EmwK","type":"redacted_thinking"}"#);
    assert_eq!(text(r#"{"type":"redacted_thinking","data":"EmwK"}"#), want);
    assert_eq!(
        text(r#"{ "data": "EmwK", "type": "redacted_thinking" }"#),
        want
    );
}

#[test]
fn a_message_of_tool_results_alone_gives_tool_messages_and_an_empty_one_stays() {
    let request = parse_request(
        br#"{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[]}]},{"role":"assistant","content":[]}]}"#,
    )
    .unwrap();
    assert_eq!(
        request.unified.messages,
        vec![
            Message {
                role: Role::Tool,
                content: vec![MessageContentBlock::ToolResult {
                    tool_call_id: "t1".into(),
                    content: String::new(),
                    is_error: false,
                }],
            },
            Message {
                role: Role::Assistant,
                content: vec![],
            },
        ]
    );
}

#[test]
fn the_recorded_request_fixture_is_read() {
    let request = parse_request(REASONING_REQUEST).unwrap();
    assert_eq!(
        request.unified.messages,
        vec![
            Message::new(Role::System, "You are terse."),
            Message::new(Role::User, "The vault is in Lisbon. Reply with: noted"),
        ]
    );
    assert!(request.stream);
    assert_eq!(
        request.parameters,
        r#"{"max_tokens":12,"thinking":{"type":"enabled","budget_tokens":1024}}"#
    );
}

#[test]
fn tool_choice_words_map_to_the_unified_choice() {
    let choice = |json: &str| {
        let body = format!(r#"{{"model":"m","messages":[],"tool_choice":{json}}}"#);
        parse_request(body.as_bytes()).unwrap().unified.tool_choice
    };
    assert_eq!(choice(r#"{"type":"auto"}"#), Some(ToolChoice::Auto));
    assert_eq!(choice(r#"{"type":"any"}"#), Some(ToolChoice::Required));
    assert_eq!(choice(r#"{"type":"none"}"#), Some(ToolChoice::None));
    assert_eq!(
        choice(r#"{"type":"tool","name":"Bash"}"#),
        Some(ToolChoice::Named("Bash".into()))
    );
}

#[test]
fn request_errors_name_the_field() {
    let err = |body: &str| parse_request(body.as_bytes()).unwrap_err();
    assert_eq!(err("[1]"), "the body is not a JSON object");
    assert_eq!(
        err(r#"{"model":"m"}"#),
        "'messages' is required and must be an array"
    );
    assert_eq!(
        err(r#"{"messages":[{"role":"user","content":"a"},{"role":"tool","content":"b"}]}"#),
        r#"messages[1].role: "tool" is not a messages role"#
    );
    assert_eq!(
        err(
            r#"{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"text":"b"}]}]}"#
        ),
        "messages[0].content[1]: a content block has no 'type'"
    );
    assert!(
        err(r#"{"messages":[],"system":[{"type":"text","text":7}]}"#).starts_with("system[0]: ")
    );
    assert_eq!(
        err(r#"{"messages":[{"role":"user","content":7}]}"#),
        "messages[0].content: is neither a string nor an array of blocks"
    );
}

#[test]
fn a_block_nested_past_the_value_limit_is_still_recorded_byte_for_byte() {
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    let block = format!(r#"{{"type":"custom","data":{deep}}}"#);
    let body = format!(
        r#"{{"model":"m","response_schema":{deep},"messages":[{{"role":"user","content":[{block}]}}]}}"#
    );
    let request = parse_request(body.as_bytes()).unwrap();
    assert_eq!(
        request.unified.messages[0].content,
        vec![MessageContentBlock::text(block)]
    );
    assert_eq!(
        request.parameters,
        format!(r#"{{"response_schema":{deep}}}"#)
    );
}

#[test]
fn count_tokens_is_estimated_from_the_request() {
    // System "You are terse." (14 characters) and the user's 41: 55 / 4, rounded up. (The
    // real server answered 40, counting with its tokenizer and chat template.)
    let request = parse_request(COUNT_REQUEST).unwrap();
    assert_eq!(estimate_input_tokens(&request), 14);
    assert_eq!(count_tokens_body(14), json!({"input_tokens": 14}));
    let empty = parse_request(br#"{"model":"m","messages":[]}"#).unwrap();
    assert_eq!(estimate_input_tokens(&empty), 1);
    let image = parse_request(
        br#"{"model":"m","messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]}]}"#,
    )
    .unwrap();
    assert_eq!(estimate_input_tokens(&image), 1600);
}

#[test]
fn error_bodies_carry_anthropics_type_for_the_status() {
    // "an Anthropic-shaped error body on /v1/messages ... so each SDK raises its own
    // exception with cuca's message in it"
    let body = |status| {
        error_body(&ErrorInfo {
            status,
            kind: "not_found_error",
            code: "cuca_replay_diverged",
            message: "the request diverged",
            param: Some("messages[3]"),
        })
    };
    for (status, kind) in [
        (400, "invalid_request_error"),
        (409, "invalid_request_error"),
        (422, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (413, "request_too_large"),
        (429, "rate_limit_error"),
        (503, "overloaded_error"),
        (529, "overloaded_error"),
        (500, "api_error"),
        (502, "api_error"),
    ] {
        assert_eq!(
            body(status),
            json!({"type": "error", "error": {"type": kind, "message": "the request diverged", "code": "cuca_replay_diverged"}}),
            "status {status}"
        );
    }
}

#[test]
fn format_dispatches_to_this_module() {
    assert_eq!(Format::for_path("/v1/messages"), Some(Format::Messages));
    assert_eq!(
        Format::for_path("/v1/messages?beta=true"),
        Some(Format::Messages)
    );
    assert_eq!(Format::for_path("/v1/messages/count_tokens"), None);
    assert_eq!(Format::from_name("messages"), Some(Format::Messages));
    assert_eq!(Format::Messages.path(), "/v1/messages");
    let mut decoder = Format::Messages.decoder(true);
    let mut blocks = Vec::new();
    decoder.feed(STREAM, &mut blocks).unwrap();
    assert!(decoder.is_done());
    assert_eq!(
        decoder.finish(&mut blocks).unwrap(),
        decode(STREAM).unwrap().1
    );
    let recorded = decode(REASONING).unwrap();
    let via_format: Vec<u8> = Format::Messages
        .encode_stream(answer_of(&recorded), &WireRequest::default())
        .flat_map(|b| b.to_vec())
        .collect();
    assert_eq!(via_format, stream_bytes(answer_of(&recorded)));
}

#[test]
fn a_stream_cut_at_any_byte_gives_a_prefix_of_its_blocks_and_refuses_before_its_stop() {
    for body in [STREAM, REASONING, CANNED_TOOL_USE] {
        let (whole, _) = decode(body).unwrap();
        let text = std::str::from_utf8(body).unwrap();
        let stop_at = text.find("\"stop_reason\":\"").unwrap();
        // The first event ends its line at the first "\n\n": from there `wire` exists.
        let first_event = text.find("}\n\n").unwrap() + 1;
        for cut in 0..body.len() {
            let mut decoder = MessagesStreamDecoder::skipping_malformed();
            let mut blocks = Vec::new();
            decoder.feed(&body[..cut], &mut blocks).unwrap();
            let finished = decoder.finish(&mut blocks);
            // Text and thinking arrive whole per delta; a tool call cut short is pushed as far
            // as it got, so only the last block may differ, and only a tool call.
            let n = blocks.len();
            assert!(n <= whole.len(), "cut at byte {cut}");
            if n > 0 {
                assert_eq!(blocks[..n - 1], whole[..n - 1], "cut at byte {cut}");
                assert!(
                    blocks[n - 1] == whole[n - 1]
                        || matches!(blocks[n - 1], MessageContentBlock::ToolCall { .. }),
                    "cut at byte {cut}"
                );
            }
            if cut < stop_at {
                // Cut inside a character, the last line is not UTF-8 (the SSE layer's
                // refusal); anywhere else the stream is refused as truncated.
                let refused_as = if text.is_char_boundary(cut) {
                    matches!(finished, Err(WireError::Truncated { .. }))
                } else {
                    matches!(finished, Err(WireError::Decode { .. }))
                };
                assert!(refused_as, "cut at byte {cut}: {finished:?}");
                assert_eq!(
                    decoder.summary().wire.is_some(),
                    cut >= first_event,
                    "cut at byte {cut}"
                );
            }
        }
    }
}

/// Claude Code 2.1 sends its environment as a `"role": "system"` message inside `messages`
/// (beside the top-level `system`): it is a system prompt, in its place.
#[test]
fn a_system_message_inside_messages_is_a_system_prompt_in_its_place() {
    let request = parse_request(
        br##"{"model":"m","system":"You are Claude Code.","messages":[{"role":"user","content":"hi"},{"role":"system","content":[{"type":"text","text":"# Environment"}],"output_config":{"effort":"medium"}}]}"##,
    )
    .unwrap();
    let roles: Vec<Role> = request.unified.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::System, Role::User, Role::System]);
    assert_eq!(request.unified.messages[2].text(), "# Environment");
}

/// The usage of the llama-server fixture, kind by kind, as the server sent it.
const DETAIL_40_12: TokenDetail = TokenDetail {
    prompt: None,
    input: Some(1),
    output: Some(12),
    cache_read: Some(39),
    cache_write: None,
    cache_write_5m: None,
    cache_write_1h: None,
    reasoning: None,
};

#[test]
fn every_cache_breakpoint_is_kept_with_where_it_sat_and_as_sent() {
    let body = br#"{"model":"claude-sonnet-4-5","max_tokens":64,
"cache_control":{"type":"ephemeral"},
"tools":[{"name":"Bash","input_schema":{"type":"object"}},{"name":"Read","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral","ttl":"1h"}}],
"system":[{"type":"text","text":"You are Claude Code."},{"type":"text","text":"Be terse.","cache_control":{"type":"ephemeral"}}],
"messages":[
 {"role":"user","content":"list files"},
 {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]},
 {"role":"user","content":[
   {"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"a.txt","cache_control":{"type":"ephemeral"}}]},
   {"type":"text","text":"and now?","cache_control":{"type":"ephemeral","ttl":"5m"}},
   {"type":"text","text":"nothing here","cache_control":null}]}
]}"#;
    let request = parse_request(body).unwrap();
    assert_eq!(
        request.wire,
        Some(json!({"cache_control": [
            {"at": "", "cache_control": {"type": "ephemeral"}},
            {"at": "tools[1]", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
            {"at": "system[1]", "cache_control": {"type": "ephemeral"}},
            {"at": "messages[2].content[0].content[0]", "cache_control": {"type": "ephemeral"}},
            {"at": "messages[2].content[1]", "cache_control": {"type": "ephemeral", "ttl": "5m"}},
        ]}))
    );
    // The records and the parameters are what they were without the markers.
    assert_eq!(
        request.parameters,
        r#"{"cache_control":{"type":"ephemeral"},"max_tokens":64}"#
    );
    // A request that marks nothing has nothing to keep.
    let plain = parse_request(
        br#"{"model":"m","max_tokens":8,"system":"Be terse.","messages":[{"role":"user","content":"hi"}]}"#,
    )
    .unwrap();
    assert_eq!(plain.wire, None);
    // A key spelled with an escape is the same key to the API, and is found too.
    let escaped = parse_request(
        br#"{"model":"m","max_tokens":8,"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache\u005fcontrol":{"type":"ephemeral"}}]}]}"#,
    )
    .unwrap();
    assert_eq!(
        escaped.wire,
        Some(json!({"cache_control": [
            {"at": "messages[0].content[0]", "cache_control": {"type": "ephemeral"}},
        ]}))
    );
}
