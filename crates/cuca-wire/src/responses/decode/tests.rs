//! Unit tests of the Responses stream decoder, against the real llama-server transcripts and
//! hand-written streams in OpenAI's documented shapes (llama-server's tiny model never calls a
//! tool nor streams a reasoning summary).

use cuca_events::{MessageContentBlock, PromptCacheUsage, ProviderUsage, TokenDetail};
use serde_json::json;

use super::*;

pub(crate) const STREAM: &[u8] =
    include_bytes!("../../../tests/fixtures/llama-server/responses-stream.body");
pub(crate) const REASONING: &[u8] =
    include_bytes!("../../../tests/fixtures/llama-server/responses-reasoning-stream.body");
pub(crate) const BASIC: &[u8] =
    include_bytes!("../../../tests/fixtures/llama-server/responses-basic.body");

type Decoded = (Vec<MessageContentBlock>, StreamSummary);

fn decode_chunks(chunks: &[&[u8]]) -> Result<Decoded, WireError> {
    let mut decoder = ResponsesStreamDecoder::new();
    let mut blocks = Vec::new();
    for chunk in chunks {
        decoder.feed(chunk, &mut blocks)?;
    }
    let summary = decoder.finish(&mut blocks)?;
    Ok((blocks, summary))
}

pub(crate) fn decode(body: &[u8]) -> Result<Decoded, WireError> {
    decode_chunks(&[body])
}

/// An SSE body of these events, each as OpenAI sends it (`event:` line, then `data:`).
pub(crate) fn sse(events: &[serde_json::Value]) -> Vec<u8> {
    let mut body = Vec::new();
    for event in events {
        let kind = event["type"].as_str().unwrap_or("message");
        body.extend_from_slice(format!("event: {kind}\ndata: {event}\n\n").as_bytes());
    }
    body
}

fn texts(blocks: &[MessageContentBlock]) -> String {
    blocks
        .iter()
        .map(|b| match b {
            MessageContentBlock::Text { text } => text.as_str(),
            MessageContentBlock::Thinking { thinking } => thinking.as_str(),
            _ => "",
        })
        .collect()
}

#[test]
fn llama_server_stream_gives_one_text_block_per_delta_and_the_wire_layout() {
    let (blocks, summary) = decode(STREAM).unwrap();
    assert_eq!(blocks.len(), 12);
    assert!(blocks
        .iter()
        .all(|b| matches!(b, MessageContentBlock::Text { .. })));
    assert_eq!(blocks[0], MessageContentBlock::text(" Partido"));
    assert_eq!(
        texts(&blocks),
        " Partido cultiv never МеirsMvc Bibliografía ctx playing sitting Normal skal"
    );
    assert_eq!(summary.finish_reason.as_deref(), Some("completed"));
    assert_eq!(summary.model.as_deref(), Some("cuca-tiny-random"));
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
    assert_eq!(summary.timings.and_then(|t| t.cache_n), Some(39));
    assert!(summary.saw_done);
    assert_eq!(
        summary.wire,
        Some(json!({
            "format": "responses",
            "id": "resp_UNuV6kNOxQ36PvIUc5rKBxthCC5eHW4t",
            "created_at": 1796117865,
            "status": "completed",
            "usage": {"input_tokens":40,"output_tokens":12,"total_tokens":52,"input_tokens_details":{"cached_tokens":39}},
            "items": [{"type": "message", "id": "msg_244ir6tZqftIj7u22TXVFKQgwe53uS1A", "records": 12}],
        }))
    );
}

#[test]
fn llama_server_reasoning_stream_gives_thinking_blocks_as_reasoning_text_content() {
    let (blocks, summary) = decode(REASONING).unwrap();
    assert_eq!(blocks.len(), 12);
    assert!(blocks
        .iter()
        .all(|b| matches!(b, MessageContentBlock::Thinking { .. })));
    assert_eq!(blocks[0], MessageContentBlock::thinking("\n code"));
    assert_eq!(
        texts(&blocks),
        "\n code destroy yesterdayarenintendolaimedхівBodył ainsi submitted astr"
    );
    assert_eq!(summary.finish_reason.as_deref(), Some("completed"));
    let wire = summary.wire.unwrap();
    assert_eq!(wire["id"], "resp_kV1rBwMhSgCtRDxcX6EiL1Ngj6rhh059");
    assert_eq!(
        wire["items"],
        json!([{
            "type": "reasoning",
            "id": "rs_zGF5W7l2OBgqmBGAEIpNG3a01nWRLuZI",
            "records": 12,
            "content_records": [12],
            "encrypted_content": "",
        }])
    );
}

#[test]
fn llama_server_whole_response_gives_one_block_per_part_and_the_same_layout() {
    let (blocks, summary) = decode_whole(BASIC).unwrap();
    assert_eq!(
        blocks,
        vec![MessageContentBlock::text(
            "eries alb Wild Ali voetrifсторіяးroke Beyouwen assemb"
        )]
    );
    assert_eq!(summary.finish_reason.as_deref(), Some("completed"));
    assert_eq!(summary.model.as_deref(), Some("cuca-tiny-random"));
    assert_eq!(
        summary
            .usage
            .map(|u| (u.prompt_tokens, u.completion_tokens)),
        Some((40, 12))
    );
    assert_eq!(
        summary.prompt_cache,
        Some(PromptCacheUsage { cached_tokens: 39 })
    );
    let wire = summary.wire.unwrap();
    assert_eq!(wire["id"], "resp_QDMT8uLyStnNyLcSbrw1PT4OimIkDb3s");
    assert_eq!(wire["created_at"], 1796117868);
    assert_eq!(wire["completed_at"], 1796117868);
    assert_eq!(
        wire["items"],
        json!([{"type": "message", "id": "msg_8cG4zJ7ABsSGokbySNlbqiCKJidpaQzp", "records": 1}])
    );
}

#[test]
fn fixtures_split_at_every_byte_decode_the_same() {
    let canned = [openai_function_call_stream(), openai_reasoning_stream()];
    for body in [STREAM, REASONING, &canned[0], &canned[1]] {
        let whole = decode(body).unwrap();
        for cut in 0..=body.len() {
            let (a, b) = body.split_at(cut);
            assert_eq!(decode_chunks(&[a, b]).unwrap(), whole, "cut at {cut}");
        }
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(decode_chunks(&bytes).unwrap(), whole, "one byte per read");
    }
}

/// A function call as OpenAI streams it (the documented event shapes, with every index).
pub(crate) fn openai_function_call_stream() -> Vec<u8> {
    let item = json!({"id":"fc_67","type":"function_call","status":"in_progress","arguments":"","call_id":"call_Kq2","name":"get_weather"});
    let mut done = item.clone();
    done["status"] = json!("completed");
    done["arguments"] = json!("{\"city\":\"Lisbon\",\"unit\":\"c\"}");
    sse(&[
        json!({"type":"response.created","sequence_number":0,"response":{"id":"resp_9","object":"response","created_at":1741290958,"status":"in_progress","model":"gpt-4.1","output":[],"usage":null}}),
        json!({"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_9","object":"response","created_at":1741290958,"status":"in_progress","model":"gpt-4.1","output":[],"usage":null}}),
        json!({"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":item}),
        json!({"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_67","output_index":0,"delta":"{\"city\":"}),
        json!({"type":"response.function_call_arguments.delta","sequence_number":4,"item_id":"fc_67","output_index":0,"delta":"\"Lisbon\",\"unit\":\"c\"}"}),
        json!({"type":"response.function_call_arguments.done","sequence_number":5,"item_id":"fc_67","output_index":0,"arguments":"{\"city\":\"Lisbon\",\"unit\":\"c\"}"}),
        json!({"type":"response.output_item.done","sequence_number":6,"output_index":0,"item":done}),
        json!({"type":"response.completed","sequence_number":7,"response":{"id":"resp_9","object":"response","created_at":1741290958,"status":"completed","model":"gpt-4.1","output":[done],
            "usage":{"input_tokens":81,"input_tokens_details":{"cached_tokens":64},"output_tokens":17,"output_tokens_details":{"reasoning_tokens":5},"total_tokens":98}}}),
    ])
}

#[test]
fn an_openai_function_call_stream_records_one_tool_call_with_its_call_id_and_exact_arguments() {
    // A `function_call` is one tool call, with its call id.
    let (blocks, summary) = decode(&openai_function_call_stream()).unwrap();
    assert_eq!(
        blocks,
        vec![MessageContentBlock::ToolCall {
            id: "call_Kq2".into(),
            name: "get_weather".into(),
            arguments: "{\"city\":\"Lisbon\",\"unit\":\"c\"}".into(),
        }]
    );
    assert_eq!(summary.finish_reason.as_deref(), Some("completed"));
    assert_eq!(summary.model.as_deref(), Some("gpt-4.1"));
    assert_eq!(
        summary.usage,
        Some(ProviderUsage {
            prompt_tokens: 81,
            completion_tokens: 17,
            reasoning_tokens: Some(5),
            cost: None,
            detail: TokenDetail {
                prompt: Some(81),
                output: Some(17),
                cache_read: Some(64),
                reasoning: Some(5),
                ..TokenDetail::default()
            },
        })
    );
    assert_eq!(
        summary.prompt_cache,
        Some(PromptCacheUsage { cached_tokens: 64 })
    );
    let wire = summary.wire.unwrap();
    assert_eq!(
        wire["items"],
        json!([{"type":"function_call","id":"fc_67","call_id":"call_Kq2","records":1}])
    );
    assert_eq!(wire["created_at"], 1741290958);
}

#[test]
fn the_done_item_s_arguments_are_authoritative_over_the_deltas() {
    let body = sse(&[
        json!({"type":"response.output_item.added","output_index":0,"item":{"id":"fc_1","type":"function_call","arguments":"","call_id":"c1","name":"f"}}),
        json!({"type":"response.function_call_arguments.delta","output_index":0,"item_id":"fc_1","delta":"{\"a\":"}),
        json!({"type":"response.output_item.done","output_index":0,"item":{"id":"fc_1","type":"function_call","arguments":"{\"a\":1}","call_id":"c1","name":"f"}}),
        json!({"type":"response.completed","response":{"id":"r","status":"completed"}}),
    ]);
    let (blocks, _) = decode(&body).unwrap();
    assert_eq!(
        blocks,
        vec![MessageContentBlock::ToolCall {
            id: "c1".into(),
            name: "f".into(),
            arguments: "{\"a\":1}".into()
        }]
    );
}

/// A reasoning model's answer as OpenAI streams it: a reasoning item with two summary parts
/// and its encrypted content, then a message with an annotation.
pub(crate) fn openai_reasoning_stream() -> Vec<u8> {
    let rs = |summary: serde_json::Value| json!({"id":"rs_1","type":"reasoning","summary":summary,"encrypted_content":"gAAAA=="});
    let annotation = json!({"type":"url_citation","start_index":0,"end_index":2,"title":"t","url":"https://example.invalid/"});
    let msg_done = json!({"id":"msg_2","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[annotation],"logprobs":[],"text":"Hi there"}]});
    sse(&[
        json!({"type":"response.created","sequence_number":0,"response":{"id":"resp_r","object":"response","created_at":7,"status":"in_progress","model":"o4-mini","output":[]}}),
        json!({"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":rs(json!([]))}),
        json!({"type":"response.reasoning_summary_part.added","sequence_number":2,"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}),
        json!({"type":"response.reasoning_summary_text.delta","sequence_number":3,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"**Plan**"}),
        json!({"type":"response.reasoning_summary_text.delta","sequence_number":4,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":" greet"}),
        json!({"type":"response.reasoning_summary_text.done","sequence_number":5,"item_id":"rs_1","output_index":0,"summary_index":0,"text":"**Plan** greet"}),
        json!({"type":"response.reasoning_summary_part.done","sequence_number":6,"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":"**Plan** greet"}}),
        json!({"type":"response.reasoning_summary_part.added","sequence_number":7,"item_id":"rs_1","output_index":0,"summary_index":1,"part":{"type":"summary_text","text":""}}),
        json!({"type":"response.reasoning_summary_text.delta","sequence_number":8,"item_id":"rs_1","output_index":0,"summary_index":1,"delta":"then stop"}),
        json!({"type":"response.output_item.done","sequence_number":9,"output_index":0,"item":rs(json!([{"type":"summary_text","text":"**Plan** greet"},{"type":"summary_text","text":"then stop"}]))}),
        json!({"type":"response.output_item.added","sequence_number":10,"output_index":1,"item":{"id":"msg_2","type":"message","status":"in_progress","role":"assistant","content":[]}}),
        json!({"type":"response.content_part.added","sequence_number":11,"item_id":"msg_2","output_index":1,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}),
        json!({"type":"response.output_text.delta","sequence_number":12,"item_id":"msg_2","output_index":1,"content_index":0,"delta":"Hi","logprobs":[]}),
        json!({"type":"response.output_text.delta","sequence_number":13,"item_id":"msg_2","output_index":1,"content_index":0,"delta":" there","logprobs":[]}),
        json!({"type":"response.output_text.annotation.added","sequence_number":14,"item_id":"msg_2","output_index":1,"content_index":0,"annotation_index":0,"annotation":annotation}),
        json!({"type":"response.output_item.done","sequence_number":15,"output_index":1,"item":msg_done}),
        json!({"type":"response.completed","sequence_number":16,"response":{"id":"resp_r","object":"response","created_at":7,"status":"completed","model":"o4-mini","output":[],
            "usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":20},"total_tokens":40}}}),
    ])
}

#[test]
fn an_openai_reasoning_summary_stream_keeps_its_parts_encrypted_content_and_annotations() {
    let (blocks, summary) = decode(&openai_reasoning_stream()).unwrap();
    assert_eq!(
        blocks,
        vec![
            MessageContentBlock::thinking("**Plan**"),
            MessageContentBlock::thinking(" greet"),
            MessageContentBlock::thinking("then stop"),
            MessageContentBlock::text("Hi"),
            MessageContentBlock::text(" there"),
        ]
    );
    assert_eq!(summary.usage.and_then(|u| u.reasoning_tokens), Some(20));
    let wire = summary.wire.unwrap();
    assert_eq!(
        wire["items"][0],
        json!({"type":"reasoning","id":"rs_1","records":3,"summary_records":[2,1],"encrypted_content":"gAAAA=="})
    );
    assert_eq!(wire["items"][1]["records"], 2);
    assert_eq!(wire["items"][1]["parts"][0]["records"], 2);
    assert_eq!(
        wire["items"][1]["parts"][0]["annotations"][0]["type"],
        "url_citation"
    );
}

#[test]
fn a_stream_cut_before_response_completed_is_truncated_after_pushing_what_it_holds() {
    let body = openai_function_call_stream();
    // Cut at an event boundary, after the argument deltas, before the item is done.
    let cut = String::from_utf8_lossy(&body)
        .find("event: response.function_call_arguments.done")
        .unwrap();
    let mut decoder = ResponsesStreamDecoder::new();
    let mut blocks = Vec::new();
    decoder.feed(&body[..cut], &mut blocks).unwrap();
    // The wire is up to date before the end: the response id and the item are there.
    let wire = decoder.summary().wire.clone().unwrap();
    assert_eq!(wire["id"], "resp_9");
    assert_eq!(wire["items"][0]["id"], "fc_67");
    let error = decoder.finish(&mut blocks).unwrap_err();
    assert!(
        matches!(error, WireError::Truncated { n_events } if n_events >= 4),
        "{error:?}"
    );
    assert_eq!(
        blocks.len(),
        1,
        "the open call is pushed with what arrived: {blocks:?}"
    );
    assert!(matches!(&blocks[0], MessageContentBlock::ToolCall { id, .. } if id == "call_Kq2"));
    assert!(!decoder.is_done());
}

#[test]
fn an_empty_body_is_truncated_with_no_events() {
    assert_eq!(
        decode(b"").unwrap_err(),
        WireError::Truncated { n_events: 0 }
    );
}

#[test]
fn response_incomplete_ends_the_stream_with_the_incomplete_reason() {
    let body = sse(&[
        json!({"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"cut"}),
        json!({"type":"response.incomplete","response":{"id":"r","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}}),
    ]);
    let (blocks, summary) = decode(&body).unwrap();
    assert_eq!(blocks, vec![MessageContentBlock::text("cut")]);
    assert_eq!(summary.finish_reason.as_deref(), Some("max_output_tokens"));
    assert_eq!(summary.wire.unwrap()["status"], "incomplete");
}

#[test]
fn response_failed_and_error_events_fail_the_stream_with_the_server_s_message() {
    let failed = sse(&[
        json!({"type":"response.failed","response":{"id":"r","status":"failed","error":{"code":"server_error","message":"The model crashed."}}}),
    ]);
    assert_eq!(
        decode(&failed).unwrap_err(),
        WireError::StreamError {
            message: "The model crashed.".into()
        }
    );
    let error = sse(&[
        json!({"type":"error","code":"rate_limit_exceeded","message":"Slow down.","param":null,"sequence_number":3}),
    ]);
    assert_eq!(
        decode(&error).unwrap_err(),
        WireError::StreamError {
            message: "Slow down.".into()
        }
    );
    // llama.cpp's mid-stream failure line.
    assert!(matches!(
        decode(b"error: {\"error\":{\"message\":\"boom\"}}\n\n").unwrap_err(),
        WireError::StreamError { message } if message == "boom"
    ));
}

#[test]
fn an_item_that_arrives_whole_in_output_item_done_gives_its_blocks_there() {
    // Codex's own tests stream items this way: no `added`, no deltas.
    let body = sse(&[
        json!({"type":"response.output_item.done","item":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello"}]}}),
        json!({"type":"response.output_item.done","item":{"type":"web_search_call","id":"ws_1","status":"completed","action":{"query":"q"}}}),
        json!({"type":"response.completed","response":{"id":"resp1"}}),
    ]);
    let (blocks, summary) = decode(&body).unwrap();
    assert_eq!(blocks, vec![MessageContentBlock::text("Hello")]);
    let wire = summary.wire.unwrap();
    assert_eq!(wire["items"][0], json!({"type":"message","records":1}));
    assert_eq!(wire["items"][1]["records"], 0);
    assert_eq!(wire["items"][1]["raw"]["action"]["query"], "q");
}

#[test]
fn a_malformed_event_is_refused_or_skipped_and_counted() {
    let body = b"data: {not json}\n\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\"}}\n\n";
    assert!(matches!(
        decode(body).unwrap_err(),
        WireError::Decode { .. }
    ));
    let mut decoder = ResponsesStreamDecoder::skipping_malformed();
    let mut blocks = Vec::new();
    decoder.feed(body, &mut blocks).unwrap();
    let summary = decoder.finish(&mut blocks).unwrap();
    assert_eq!(summary.n_skipped, 1);
    assert!(summary.first_skipped.unwrap().contains("{not json}"));
}

#[test]
fn bytes_after_response_completed_are_ignored() {
    let mut body = STREAM.to_vec();
    body.extend_from_slice(b"data: {garbage\n\n");
    assert_eq!(decode(&body).unwrap(), decode(STREAM).unwrap());
}

/// The usage of the llama-server fixture, kind by kind, as the server sent it.
const DETAIL_40_12: TokenDetail = TokenDetail {
    prompt: Some(40),
    input: None,
    output: Some(12),
    cache_read: Some(39),
    cache_write: None,
    cache_write_5m: None,
    cache_write_1h: None,
    reasoning: None,
};
