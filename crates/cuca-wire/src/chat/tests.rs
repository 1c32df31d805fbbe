//! Unit tests of the chat format: the stream decoder against the real llama-server transcripts.

use cuca_events::{MessageContentBlock, PromptCacheUsage, ProviderUsage, TokenDetail};
use proptest::prelude::*;

use super::*;
use crate::text::{server_message, SERVER_WORDS_CHARS};
use crate::{StreamSummary, WireError};

const BASIC: &[u8] = include_bytes!("../../tests/fixtures/llama-server/stream-basic.body");
const REASONING: &[u8] = include_bytes!("../../tests/fixtures/llama-server/stream-reasoning.body");
const NO_USAGE: &[u8] = include_bytes!("../../tests/fixtures/llama-server/stream-no-usage.body");

fn decode_chunks(chunks: &[&[u8]]) -> Result<(Vec<MessageContentBlock>, StreamSummary), WireError> {
    let mut decoder = ChatStreamDecoder::new();
    let mut blocks = Vec::new();
    for chunk in chunks {
        decoder.feed(chunk, &mut blocks)?;
    }
    let summary = decoder.finish(&mut blocks)?;
    Ok((blocks, summary))
}

fn decode(body: &[u8]) -> Result<(Vec<MessageContentBlock>, StreamSummary), WireError> {
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

#[test]
fn llama_server_basic_stream_gives_text_blocks_finish_reason_and_usage() {
    let (blocks, summary) = decode(BASIC).unwrap();
    // 12 completion tokens, one Text block per non-empty delta; the role chunk gives none.
    assert_eq!(blocks.len(), 12);
    assert!(blocks
        .iter()
        .all(|b| matches!(b, MessageContentBlock::Text { .. })));
    assert_eq!(blocks[0], MessageContentBlock::text("phas"));
    assert_eq!(blocks[1], MessageContentBlock::text(" temporal"));
    assert_eq!(summary.model.as_deref(), Some("cuca-tiny-random"));
    assert_eq!(summary.finish_reason.as_deref(), Some("length"));
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
        Some(PromptCacheUsage { cached_tokens: 0 })
    );
    let timings = summary.timings.unwrap();
    assert_eq!(
        (timings.prompt_n, timings.predicted_n),
        (Some(40), Some(12))
    );
    assert!(summary.saw_done);
}

#[test]
fn reasoning_content_becomes_one_thinking_block_per_delta() {
    // "The Reasoning records are one per streamed Thinking block."
    let (blocks, summary) = decode(REASONING).unwrap();
    assert_eq!(blocks.len(), 24);
    assert_eq!(blocks[0], MessageContentBlock::thinking("\n Records"));
    assert!(blocks
        .iter()
        .all(|b| matches!(b, MessageContentBlock::Thinking { .. })));
    assert_eq!(summary.finish_reason.as_deref(), Some("length"));
    assert_eq!(summary.usage.map(|u| u.completion_tokens), Some(24));
}

#[test]
fn a_stream_without_a_usage_chunk_keeps_llama_timings() {
    let (blocks, summary) = decode(NO_USAGE).unwrap();
    assert_eq!(blocks.len(), 8);
    assert_eq!(summary.usage, None);
    let timings = summary.timings.unwrap();
    assert_eq!(
        (timings.cache_n, timings.prompt_n, timings.predicted_n),
        (Some(3), Some(15), Some(8))
    );
}

#[test]
fn delta_reasoning_is_thinking_too_and_duplicates_are_not_doubled() {
    let body = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"a\"}}]}\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"b\",\"reasoning_content\":\"b\",\"content\":\"c\"}}]}\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"stop\"}]}\n\n\
data: [DONE]\n\n";
    let (blocks, _) = decode(body).unwrap();
    assert_eq!(
        blocks,
        vec![
            MessageContentBlock::thinking("a"),
            MessageContentBlock::thinking("b"),
            MessageContentBlock::text("c"),
        ]
    );
}

#[test]
fn usage_details_and_cost_are_read_where_present() {
    let body = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\n\
data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":7,\"prompt_tokens_details\":{\"cached_tokens\":4},\"completion_tokens_details\":{\"reasoning_tokens\":5},\"cost\":0.0012}}\n\n\
data: [DONE]\n\n";
    let (_, summary) = decode(body).unwrap();
    assert_eq!(
        summary.usage,
        Some(ProviderUsage {
            prompt_tokens: 10,
            completion_tokens: 7,
            reasoning_tokens: Some(5),
            cost: Some(0.0012),
            detail: TokenDetail {
                prompt: Some(10),
                output: Some(7),
                cache_read: Some(4),
                reasoning: Some(5),
                ..TokenDetail::default()
            },
        })
    );
    assert_eq!(
        summary.prompt_cache,
        Some(PromptCacheUsage { cached_tokens: 4 })
    );
}

/// The documented OpenAI chunk shape for streamed tool calls
/// (`choices[0].delta.tool_calls[i]` with `index`, `id`, `function.name` and
/// `function.arguments` arriving in pieces). llama-server did not emit tool calls for the
/// fixture model, so this is the documented shape, not a captured transcript.
const OPENAI_TOOL_CALLS: &[u8] = b"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":\"call_abc\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n\
data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"loc\"}}]},\"finish_reason\":null}]}\n\n\
data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_def\",\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"arguments\":\"{}\"}}]},\"finish_reason\":null}]}\n\n\
data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"ation\\\":\\\"Lisbon\\\"}\"}}]},\"finish_reason\":null}]}\n\n\
data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n\
data: [DONE]\n\n";

#[test]
fn tool_calls_are_assembled_by_index_and_emitted_whole_at_finish_reason() {
    // "delta.tool_calls assembled by index into complete ToolCall blocks (emitted when the
    // call is complete: at finish_reason or end)"; the shape is OpenAI's documented one.
    let mut decoder = ChatStreamDecoder::new();
    let mut blocks = Vec::new();
    let before_finish = OPENAI_TOOL_CALLS
        .windows(13)
        .position(|w| w == b"\"tool_calls\"}")
        .unwrap();
    decoder
        .feed(&OPENAI_TOOL_CALLS[..before_finish], &mut blocks)
        .unwrap();
    assert!(
        blocks.is_empty(),
        "no tool call is emitted before it is complete"
    );
    decoder
        .feed(&OPENAI_TOOL_CALLS[before_finish..], &mut blocks)
        .unwrap();
    let summary = decoder.finish(&mut blocks).unwrap();
    assert_eq!(
        blocks,
        vec![
            MessageContentBlock::ToolCall {
                id: "call_abc".into(),
                name: "get_weather".into(),
                arguments: "{\"location\":\"Lisbon\"}".into()
            },
            MessageContentBlock::ToolCall {
                id: "call_def".into(),
                name: "get_time".into(),
                arguments: "{}".into()
            },
        ]
    );
    assert_eq!(summary.finish_reason.as_deref(), Some("tool_calls"));
}

#[test]
fn an_open_tool_call_is_emitted_at_the_end_and_a_missing_id_is_synthesised() {
    let body = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"ls\",\"arguments\":\"{}\"}}]}}]}\n\ndata: [DONE]\n\n";
    let (blocks, _) = decode(body).unwrap();
    assert_eq!(
        blocks,
        vec![MessageContentBlock::ToolCall {
            id: "call_0".into(),
            name: "ls".into(),
            arguments: "{}".into()
        }]
    );
}

#[test]
fn a_tool_call_without_a_name_is_a_decode_error() {
    let body = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":2,\"function\":{\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n";
    let err = decode(body).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tool call 2 ended without a function name (arguments: {})"
    );
}

#[test]
fn a_stream_with_a_finish_reason_but_no_done_is_accepted() {
    // Documented rule: a missing [DONE] is accepted once a finish_reason arrived.
    let body = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n";
    let (blocks, summary) = decode(body).unwrap();
    assert_eq!(blocks, vec![MessageContentBlock::text("ok")]);
    assert!(!summary.saw_done);
}

#[test]
fn a_stream_with_neither_finish_reason_nor_done_is_refused() {
    let body = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\n";
    let err = decode(body).unwrap_err();
    assert!(
        matches!(err, WireError::Truncated { n_events: 1 }),
        "{err:?}"
    );
}

#[test]
fn an_empty_body_is_refused_as_an_empty_stream() {
    let err = decode(b"").unwrap_err();
    assert!(matches!(err, WireError::Truncated { n_events: 0 }));
    assert_eq!(
        err.to_string(),
        "the response body ended before any event: the server sent an empty stream"
    );
}

#[test]
fn a_malformed_chunk_is_a_decode_error_quoting_the_bytes() {
    let err = decode(b"data: {\"choices\":[{\"delta\":\n\n").unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, WireError::Decode { .. }));
    assert!(
        message.starts_with("event 1 is not a chat.completion.chunk ("),
        "{message}"
    );
    assert!(
        message.ends_with("): {\"choices\":[{\"delta\":"),
        "{message}"
    );
}

#[test]
fn an_error_object_in_the_stream_is_the_servers_message() {
    let err = decode(b"data: {\"error\":{\"code\":500,\"message\":\"slot unavailable\"}}\n\n")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "error event in the stream: slot unavailable"
    );
}

#[test]
fn bytes_after_done_are_ignored() {
    let mut body = BASIC.to_vec();
    body.extend_from_slice(b"data: {not json}\n\n");
    let (blocks, _) = decode(&body).unwrap();
    assert_eq!(blocks.len(), 12);
}

#[test]
fn server_message_reads_json_errors_and_clips_html() {
    let llama = include_str!("../../tests/fixtures/llama-server/error-no-messages.body");
    assert_eq!(server_message(llama), "'messages' is required");
    let html = format!(
        "<html><head><title>500 Internal Server Error</title></head><body>{}</body></html>",
        "<p>stack frame</p>".repeat(100)
    );
    let message = server_message(&html);
    assert!(
        message.starts_with("500 Internal Server Error stack frame"),
        "{message}"
    );
    // The tag-stripped text is "500 Internal Server Error" and 100 " stack frame"s.
    assert!(message.ends_with("… (1225 bytes in all)"), "{message}");
    assert!(message.chars().count() < SERVER_WORDS_CHARS + 40);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// "events split across reads at any byte": every chunking of a real transcript gives
    /// the same blocks and the same usage as the whole body.
    #[test]
    fn any_chunking_of_a_real_transcript_decodes_the_same(
        cuts in proptest::collection::vec(any::<usize>(), 0..40),
        which in 0usize..3,
    ) {
        let body = [BASIC, REASONING, NO_USAGE][which];
        let whole = decode(body).unwrap();
        let pieces = split_at(body, &cuts);
        let chunked = decode_chunks(&pieces).unwrap();
        prop_assert_eq!(chunked, whole);
    }

    /// The same with CRLF line ends, which the cuts can split between \r and \n.
    #[test]
    fn any_chunking_of_a_crlf_transcript_decodes_the_same(
        cuts in proptest::collection::vec(any::<usize>(), 0..40),
    ) {
        let crlf: Vec<u8> = String::from_utf8(BASIC.to_vec()).unwrap().replace('\n', "\r\n").into_bytes();
        let whole = decode(BASIC).unwrap();
        let chunked = decode_chunks(&split_at(&crlf, &cuts)).unwrap();
        prop_assert_eq!(chunked, whole);
    }

    /// Tool-call assembly (documented OpenAI shape) does not depend on the chunking.
    #[test]
    fn any_chunking_of_tool_call_pieces_assembles_the_same(
        cuts in proptest::collection::vec(any::<usize>(), 0..40),
    ) {
        let whole = decode(OPENAI_TOOL_CALLS).unwrap();
        prop_assert_eq!(decode_chunks(&split_at(OPENAI_TOOL_CALLS, &cuts)).unwrap(), whole);
    }
}

/// A decoder made to skip malformed events (the proxy's, which must record all it can) passes
/// over an event
/// that is not a chat chunk, counts it, and decodes the rest; a plain one refuses the stream.
#[test]
fn a_skipping_decoder_passes_over_a_malformed_event_and_counts_it() {
    let stream = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"cut\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"},\"finish_reason\":\"stop\"}]}\n\n\
data: [DONE]\n\n";
    let mut decoder = ChatStreamDecoder::skipping_malformed();
    let mut blocks = Vec::new();
    decoder.feed(stream, &mut blocks).unwrap();
    let summary = decoder.finish(&mut blocks).unwrap();
    assert_eq!(
        blocks,
        vec![
            MessageContentBlock::text("a"),
            MessageContentBlock::text("b")
        ]
    );
    assert_eq!(summary.n_skipped, 1);
    assert!(summary
        .first_skipped
        .as_deref()
        .is_some_and(|e| e.starts_with("event 2 is not a chat.completion.chunk")));
    assert_eq!(summary.finish_reason.as_deref(), Some("stop"));

    let mut plain = ChatStreamDecoder::new();
    assert!(plain.feed(stream, &mut Vec::new()).is_err());
}

/// The usage of the llama-server fixture, kind by kind, as the server sent it.
const DETAIL_40_12: TokenDetail = TokenDetail {
    prompt: Some(40),
    input: None,
    output: Some(12),
    cache_read: Some(0),
    cache_write: None,
    cache_write_5m: None,
    cache_write_1h: None,
    reasoning: None,
};
