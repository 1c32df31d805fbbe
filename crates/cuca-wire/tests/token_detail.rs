//! Every token kind a provider reports reaches the summary's detail exactly as sent, in each
//! format, streamed and whole: cache reads, cache writes (Anthropic's 5-minute and 1-hour
//! writes apart) and reasoning.

// Test helpers unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use cuca_events::TokenDetail;
use cuca_wire::{Format, StreamSummary};
use serde_json::{json, Value};

fn sse(events: &[(&str, Value)]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, data) in events {
        if !name.is_empty() {
            body.extend_from_slice(format!("event: {name}\n").as_bytes());
        }
        body.extend_from_slice(format!("data: {data}\n\n").as_bytes());
    }
    body
}

fn streamed(format: Format, body: &[u8]) -> StreamSummary {
    // Fed in small pieces, so a usage object split across reads still decodes whole.
    let mut decoder = format.decoder(false);
    let mut blocks = Vec::new();
    for piece in body.chunks(7) {
        decoder.feed(piece, &mut blocks).unwrap();
    }
    decoder.finish(&mut blocks).unwrap()
}

fn whole(format: Format, body: &Value) -> StreamSummary {
    format.decode_whole(body.to_string().as_bytes()).unwrap().1
}

fn detail(summary: &StreamSummary) -> TokenDetail {
    summary.usage.as_ref().unwrap().detail
}

/// The usage Claude Code's answers carry: 26 uncached input tokens, 1,201 written to the
/// cache (1,000 for 5 minutes, 201 for an hour) and 3,401 read from it.
const ANTHROPIC_DETAIL: TokenDetail = TokenDetail {
    prompt: None,
    input: Some(26),
    output: Some(57),
    cache_read: Some(3_401),
    cache_write: Some(1_201),
    cache_write_5m: Some(1_000),
    cache_write_1h: Some(201),
    reasoning: None,
};

fn anthropic_usage(output: u64) -> Value {
    json!({
        "input_tokens": 26,
        "cache_creation_input_tokens": 1201,
        "cache_read_input_tokens": 3401,
        "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 201},
        "output_tokens": output,
    })
}

#[test]
fn a_messages_stream_keeps_cache_reads_and_both_cache_write_lifetimes_apart() {
    let body = sse(&[
        (
            "message_start",
            json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":anthropic_usage(1)}}),
        ),
        (
            "content_block_start",
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}),
        ),
        (
            "content_block_stop",
            json!({"type":"content_block_stop","index":0}),
        ),
        // `message_delta` repeats the cumulative counts; the last word wins.
        (
            "message_delta",
            json!({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":anthropic_usage(57)}),
        ),
        ("message_stop", json!({"type":"message_stop"})),
    ]);
    let summary = streamed(Format::Messages, &body);
    assert_eq!(detail(&summary), ANTHROPIC_DETAIL);
    // The folded counts are unchanged: every input kind is prompt.
    let usage = summary.usage.unwrap();
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (4_628, 57));
}

#[test]
fn a_whole_messages_answer_keeps_every_token_kind() {
    let body = json!({"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":anthropic_usage(57)});
    assert_eq!(detail(&whole(Format::Messages, &body)), ANTHROPIC_DETAIL);
}

#[test]
fn a_messages_answer_without_the_lifetime_split_leaves_it_unsaid() {
    let body = json!({"id":"msg_1","type":"message","role":"assistant","model":"claude-3-5-haiku","content":[],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"cache_creation_input_tokens":9,"output_tokens":2}});
    let got = detail(&whole(Format::Messages, &body));
    assert_eq!(got.cache_write, Some(9));
    assert_eq!((got.cache_write_5m, got.cache_write_1h), (None, None));
    assert_eq!(got.cache_read, None);
}

const OPENAI_DETAIL: TokenDetail = TokenDetail {
    prompt: Some(2_048),
    input: None,
    output: Some(300),
    cache_read: Some(1_920),
    cache_write: None,
    cache_write_5m: None,
    cache_write_1h: None,
    reasoning: Some(256),
};

fn chat_usage() -> Value {
    json!({"prompt_tokens":2048,"completion_tokens":300,"total_tokens":2348,
        "prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},
        "completion_tokens_details":{"reasoning_tokens":256,"audio_tokens":0}})
}

#[test]
fn a_chat_stream_keeps_cached_and_reasoning_tokens() {
    let body = sse(&[
        (
            "",
            json!({"id":"c1","object":"chat.completion.chunk","model":"o4-mini","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}),
        ),
        (
            "",
            json!({"id":"c1","object":"chat.completion.chunk","model":"o4-mini","choices":[],"usage":chat_usage()}),
        ),
    ]);
    let mut body = body;
    body.extend_from_slice(b"data: [DONE]\n\n");
    assert_eq!(detail(&streamed(Format::Chat, &body)), OPENAI_DETAIL);
}

#[test]
fn a_whole_chat_answer_keeps_cached_and_reasoning_tokens() {
    let body = json!({"id":"c1","object":"chat.completion","model":"o4-mini","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":chat_usage()});
    assert_eq!(detail(&whole(Format::Chat, &body)), OPENAI_DETAIL);
}

fn responses_object() -> Value {
    json!({"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"o4-mini",
        "output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hi","annotations":[]}]}],
        "usage":{"input_tokens":2048,"input_tokens_details":{"cached_tokens":1920},"output_tokens":300,"output_tokens_details":{"reasoning_tokens":256},"total_tokens":2348}})
}

#[test]
fn a_responses_stream_keeps_cached_and_reasoning_tokens() {
    let body = sse(&[
        (
            "response.created",
            json!({"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"o4-mini","output":[]}}),
        ),
        (
            "response.completed",
            json!({"type":"response.completed","sequence_number":1,"response":responses_object()}),
        ),
    ]);
    assert_eq!(detail(&streamed(Format::Responses, &body)), OPENAI_DETAIL);
}

#[test]
fn a_whole_responses_answer_keeps_cached_and_reasoning_tokens() {
    assert_eq!(
        detail(&whole(Format::Responses, &responses_object())),
        OPENAI_DETAIL
    );
}

#[test]
fn the_uncached_input_is_the_provider_s_where_it_said_and_the_prompt_less_the_cache_else() {
    assert_eq!(ANTHROPIC_DETAIL.uncached_input(), Some(26));
    assert_eq!(OPENAI_DETAIL.uncached_input(), Some(128));
}

fn anthropic_summary(model: &str) -> StreamSummary {
    let body = json!({"id":"msg_1","type":"message","role":"assistant","model":model,"content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":anthropic_usage(57)});
    whole(Format::Messages, &body)
}

#[test]
fn a_call_log_row_without_a_provider_cost_is_priced_kind_by_kind_and_says_by_what() {
    let mut row = cuca_calllog::Record::default();
    anthropic_summary("claude-sonnet-4-5-20250929").fill_end_row(&mut row, true);
    // 26 × $3/M + 57 × $15/M + 3,401 × $0.30/M + 1,000 × $3.75/M + 201 × $6/M.
    let expected = 26.0 * 3e-6 + 57.0 * 15e-6 + 3_401.0 * 0.3e-6 + 1_000.0 * 3.75e-6 + 201.0 * 6e-6;
    assert!(
        (row.cost - expected).abs() < 1e-12,
        "{} != {expected}",
        row.cost
    );
    assert!(
        row.cost_source.starts_with("LiteLLM"),
        "{}",
        row.cost_source
    );
    assert!(
        row.cost_source.contains("(20"),
        "the table's date: {}",
        row.cost_source
    );
    assert_eq!((row.cached_tokens, row.cache_write_tokens), (3_401, 1_201));
}

#[test]
fn a_call_log_row_of_a_model_no_table_prices_has_an_unknown_cost_not_zero() {
    let mut row = cuca_calllog::Record::default();
    anthropic_summary("mystery-model-9").fill_end_row(&mut row, true);
    assert_eq!(row.cost, 0.0, "no figure is written");
    assert!(
        row.cost_source
            .starts_with("unknown: no price for model \"mystery-model-9\""),
        "{}",
        row.cost_source
    );
    // Serialised, the row has no `cost` at all, and says why.
    let line = serde_json::to_value(&row).unwrap();
    assert!(line.get("cost").is_none());
    assert!(line["cost_source"].as_str().unwrap().starts_with("unknown"));
}

#[test]
fn a_provider_s_own_cost_is_kept_and_named() {
    let mut summary = anthropic_summary("claude-sonnet-4-5-20250929");
    summary.usage.as_mut().unwrap().cost = Some(0.5);
    let mut row = cuca_calllog::Record::default();
    summary.fill_end_row(&mut row, true);
    assert_eq!((row.cost, row.cost_source.as_str()), (0.5, "provider"));
}
