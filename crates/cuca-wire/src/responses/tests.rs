//! Tests of the Responses module as a whole: reading requests, and replay round trips
//! (`decode(encode(decode(bytes)))` gives the blocks, item layout and ids, finish and usage of
//! `decode(bytes)`), and the shapes of the events the encoder sends.

use cuca_events::{Message, MessageContentBlock, Role, ToolChoice};
use proptest::prelude::*;
use serde_json::{json, Value};

use super::decode::tests::{
    decode, openai_function_call_stream, openai_reasoning_stream, BASIC, REASONING, STREAM,
};
use super::*;
use crate::{Format, RecordedAnswer, StreamSummary, WireRequest};

const STREAM_REQUEST: &[u8] =
    include_bytes!("../../tests/fixtures/llama-server/responses-stream.request.json");

fn answer(
    blocks: Vec<MessageContentBlock>,
    summary: &StreamSummary,
) -> RecordedAnswer<Vec<MessageContentBlock>> {
    let usage = summary.usage.clone().unwrap_or_default();
    RecordedAnswer {
        blocks,
        model: summary.model.clone().unwrap_or_default(),
        finish_reason: summary.finish_reason.clone(),
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
        wire: summary.wire.clone(),
        id: "cuca-s-1".into(),
    }
}

/// An answer recorded without a Responses `wire`, by model `m`.
fn recorded(
    blocks: Vec<MessageContentBlock>,
    finish_reason: Option<&str>,
    (prompt_tokens, completion_tokens): (u64, u64),
    id: &str,
) -> RecordedAnswer<Vec<MessageContentBlock>> {
    RecordedAnswer {
        blocks,
        model: "m".into(),
        finish_reason: finish_reason.map(str::to_owned),
        prompt_tokens,
        completion_tokens,
        wire: None,
        id: id.into(),
    }
}

fn encoded(answer: RecordedAnswer<Vec<MessageContentBlock>>, request: &WireRequest) -> Vec<u8> {
    encode_stream(answer, request)
        .flat_map(|b| b.to_vec())
        .collect()
}

/// The events of an encoded stream, each checked to be `event: T\ndata: {…"type":T…}\n\n`.
fn events(body: &[u8]) -> Vec<Value> {
    let text = std::str::from_utf8(body).unwrap();
    text.split_terminator("\n\n")
        .map(|event| {
            let (name, data) = event.split_once('\n').unwrap();
            let name = name.strip_prefix("event: ").unwrap();
            let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(data["type"], name);
            data
        })
        .collect()
}

/// What a round trip must keep: the blocks, the finish, the usage and the whole wire (ids,
/// layout, times, the usage object).
fn assert_same_answer(
    first: &(Vec<MessageContentBlock>, StreamSummary),
    again: &(Vec<MessageContentBlock>, StreamSummary),
) {
    assert_eq!(again.0, first.0);
    assert_eq!(again.1.finish_reason, first.1.finish_reason);
    assert_eq!(again.1.usage, first.1.usage);
    assert_eq!(again.1.prompt_cache, first.1.prompt_cache);
    assert_eq!(again.1.model, first.1.model);
    assert_eq!(again.1.wire, first.1.wire);
}

/// The streams the round trips run over: llama-server's two, and OpenAI's shapes with a
/// function call and with a reasoning summary.
fn streams() -> [Vec<u8>; 4] {
    [
        STREAM.to_vec(),
        REASONING.to_vec(),
        openai_function_call_stream(),
        openai_reasoning_stream(),
    ]
}

fn plain_request() -> WireRequest {
    parse_request(STREAM_REQUEST).unwrap()
}

#[test]
fn the_format_is_dispatched_by_name_and_path() {
    assert_eq!(
        Format::for_path("/v1/responses?x=1"),
        Some(Format::Responses)
    );
    assert_eq!(Format::from_name("responses"), Some(Format::Responses));
    assert_eq!(Format::Responses.path(), "/v1/responses");
    let mut decoder = Format::Responses.decoder(false);
    let mut blocks = Vec::new();
    decoder.feed(STREAM, &mut blocks).unwrap();
    assert!(decoder.is_done());
    assert_eq!(blocks.len(), 12);
}

#[test]
fn a_request_with_every_item_kind_reads_as_chat_positions_and_keeps_its_parameters_exact() {
    // `instructions` and system/developer input items are system prompts, reasoning items are
    // reasoning, `function_call`s are tool calls: every item kind has its session record.
    let body = br#"{"model":"gpt-5","instructions":"Be terse.","store":false,
        "reasoning":{"effort":"high","summary":"auto"},"include":["reasoning.encrypted_content"],
        "text":{"format":{"type":"json_schema","name":"x","schema":{"type":"object"}},"verbosity":"low"},
        "max_output_tokens":300,"temperature":0.5,"stream":true,"previous_response_id":"resp_prev",
        "tool_choice":{"type":"function","name":"shell"},
        "tools":[{"type":"function","name":"shell","description":"Runs a command","parameters":{"type":"object","properties":{"cmd":{"type":"string"}}},"strict":false},
                 {"type":"web_search_preview"}],
        "input":[
          {"type":"message","role":"developer","content":[{"type":"input_text","text":"Use the shell."}]},
          {"role":"user","content":[{"type":"input_text","text":"List files"},{"type":"input_image","image_url":"data:image/png;base64,iVBO"}]},
          {"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"I will list."}],"encrypted_content":"gAAA"},
          {"type":"function_call","id":"fc_1","call_id":"call_1","name":"shell","arguments":"{\"cmd\":\"ls\"}"},
          {"type":"local_shell_call","id":"lsh_1","call_id":"call_2","status":"completed","action":{"type":"exec","command":["ls"]}},
          {"type":"function_call_output","call_id":"call_1","output":"a.txt"},
          {"type":"local_shell_call_output","call_id":"call_2","output":"b.txt"},
          {"type":"message","role":"assistant","content":[{"type":"output_text","text":"a.txt","annotations":[]}]},
          {"type":"item_reference","id":"msg_0"}
        ]}"#;
    let request = parse_request(body).unwrap();
    let messages = &request.unified.messages;
    let roles: Vec<Role> = messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::System,
            Role::System,
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Tool,
            Role::Assistant,
            Role::User
        ]
    );
    assert_eq!(messages[0], Message::system("Be terse."));
    assert_eq!(messages[1], Message::system("Use the shell."));
    assert_eq!(
        messages[2].content,
        vec![
            MessageContentBlock::text("List files"),
            MessageContentBlock::ImageBase64 {
                media_type: "image/png".into(),
                data: "iVBO".into()
            },
        ]
    );
    // The reasoning item, the function call and the shell call are one assistant turn.
    assert_eq!(messages[3].content.len(), 3);
    assert_eq!(
        messages[3].content[0],
        MessageContentBlock::thinking("I will list.")
    );
    assert_eq!(
        messages[3].content[1],
        MessageContentBlock::ToolCall {
            id: "call_1".into(),
            name: "shell".into(),
            arguments: "{\"cmd\":\"ls\"}".into()
        }
    );
    assert_eq!(
        messages[3].content[2],
        MessageContentBlock::text(
            r#"{"type":"local_shell_call","id":"lsh_1","call_id":"call_2","status":"completed","action":{"type":"exec","command":["ls"]}}"#
        )
    );
    assert_eq!(
        messages[4].content,
        vec![MessageContentBlock::ToolResult {
            tool_call_id: "call_1".into(),
            content: "a.txt".into(),
            is_error: false
        }]
    );
    assert_eq!(
        messages[5].content,
        vec![MessageContentBlock::ToolResult {
            tool_call_id: "call_2".into(),
            content: r#"{"type":"local_shell_call_output","call_id":"call_2","output":"b.txt"}"#
                .into(),
            is_error: false
        }]
    );
    assert_eq!(
        messages[6].content,
        vec![MessageContentBlock::text("a.txt")]
    );
    assert_eq!(
        messages[7].content,
        vec![MessageContentBlock::text(
            r#"{"type":"item_reference","id":"msg_0"}"#
        )]
    );
    let unified = &request.unified;
    assert_eq!(unified.model, "gpt-5");
    assert_eq!(unified.max_tokens, Some(300));
    assert_eq!(unified.temperature, Some(0.5));
    assert_eq!(unified.reasoning_effort.as_deref(), Some("high"));
    assert_eq!(unified.tool_choice, Some(ToolChoice::Named("shell".into())));
    assert_eq!(unified.tools.len(), 2);
    assert_eq!(unified.tools[0].name, "shell");
    assert_eq!(unified.tools[0].description, "Runs a command");
    assert_eq!(
        unified.tools[0].parameters["properties"]["cmd"]["type"],
        "string"
    );
    assert_eq!(unified.tools[1].name, "web_search_preview");
    assert_eq!(
        unified.tools[1].parameters,
        json!({"type": "web_search_preview"})
    );
    assert!(request.stream);
    assert_eq!(request.previous_response_id.as_deref(), Some("resp_prev"));
    assert!(request.unrecorded.is_empty());
    // Every other field, byte for byte as sent (serde's key order: the map is sorted).
    assert_eq!(
        request.parameters,
        r#"{"include":["reasoning.encrypted_content"],"max_output_tokens":300,"previous_response_id":"resp_prev","reasoning":{"effort":"high","summary":"auto"},"store":false,"temperature":0.5,"text":{"format":{"type":"json_schema","name":"x","schema":{"type":"object"}},"verbosity":"low"},"tool_choice":{"type":"function","name":"shell"}}"#
    );
}

#[test]
fn a_string_input_is_one_user_message_and_the_fixture_request_reads() {
    let request = plain_request();
    assert_eq!(
        request.unified.messages,
        vec![
            Message::system("You are terse."),
            Message::user("The vault is in Lisbon. Reply with: noted")
        ]
    );
    assert_eq!(request.unified.max_tokens, Some(12));
    assert_eq!(request.parameters, r#"{"max_output_tokens":12}"#);
    let request = parse_request(br#"{"model":"m","input":"hi","tool_choice":"required"}"#).unwrap();
    assert_eq!(request.unified.messages, vec![Message::user("hi")]);
    assert_eq!(request.unified.tool_choice, Some(ToolChoice::Required));
    assert!(!request.stream);
}

#[test]
fn a_bad_request_is_refused_naming_the_field() {
    let error = |body: &[u8]| parse_request(body).unwrap_err();
    assert_eq!(error(b"[1]"), "the body is not a JSON object");
    assert!(error(b"{").starts_with("the body is not JSON"));
    assert_eq!(
        error(br#"{"input":3}"#),
        "'input' must be a string or an array"
    );
    assert_eq!(
        error(br#"{"instructions":[1],"input":"x"}"#),
        "'instructions' must be a string"
    );
    assert_eq!(
        error(br#"{"input":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":"c"},{"content":"d"}]}"#),
        "input[3]: 'role' is required"
    );
    assert_eq!(
        error(br#"{"input":[{"role":"robot","content":"a"}]}"#),
        "input[0]: role \"robot\" is not a Responses role"
    );
    assert_eq!(
        error(br#"{"input":[{"type":"function_call","call_id":"c"}]}"#),
        "input[0]: a function_call has no 'name'"
    );
    assert_eq!(
        error(br#"{"input":[{"type":"function_call_output","output":"x"}]}"#),
        "input[0]: a function_call_output has no 'call_id'"
    );
}

#[test]
fn a_freeform_tool_s_result_is_read_as_a_function_s_without_its_per_run_item_id() {
    // Codex's `apply_patch` result: the `id` is new on every run, the call id and output are not.
    let result = |id: &str| {
        let body = format!(
            r#"{{"model":"m","input":[{{"role":"user","content":"Edit"}},
              {{"type":"custom_tool_call","id":"ctc_1","call_id":"call_1","name":"apply_patch","input":"*** Begin Patch"}},
              {{"type":"custom_tool_call_output","id":"{id}","call_id":"call_1","output":"Success."}}]}}"#
        );
        let request = parse_request(body.as_bytes()).unwrap();
        request.unified.messages[2].content.clone()
    };
    assert_eq!(
        result("ctco_1"),
        vec![MessageContentBlock::ToolResult {
            tool_call_id: "call_1".into(),
            content: "Success.".into(),
            is_error: false
        }]
    );
    assert_eq!(result("ctco_1"), result("ctco_2"));
    assert_eq!(
        parse_request(br#"{"input":[{"type":"custom_tool_call_output","output":"x"}]}"#)
            .unwrap_err()
            .to_string(),
        "input[0]: a custom_tool_call_output has no 'call_id'"
    );
}

#[test]
fn a_tool_nested_past_the_value_limit_keeps_its_name_and_json_text() {
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let body = format!(
        r#"{{"input":"x","tools":[{{"type":"function","name":"deep","parameters":{deep}}}],"text":{deep}}}"#
    );
    let request = parse_request(body.as_bytes()).unwrap();
    assert_eq!(request.unified.tools[0].name, "deep");
    assert_eq!(request.unrecorded.len(), 1);
    assert!(
        request.parameters.contains(&deep),
        "the deep parameter is kept byte for byte"
    );
}

#[test]
fn every_fixture_round_trips_through_the_stream_encoder() {
    // A replay answers in the request's wire format so the client cannot tell it from the
    // recorded answer: the same text, the same tool-call ids and arguments, the same stop
    // reason and usage.
    let request = plain_request();
    for body in streams() {
        let first = decode(&body).unwrap();
        let replay = encoded(answer(first.0.clone(), &first.1), &request);
        let again = decode(&replay).unwrap();
        assert_same_answer(&first, &again);
        // A second pass gives the very same bytes: the encoding is a fixed point.
        let twice = encoded(answer(again.0.clone(), &again.1), &request);
        assert_eq!(twice, replay);
    }
}

#[test]
fn the_whole_fixture_round_trips_through_the_object_encoder() {
    let request = plain_request();
    let first = decode_whole(BASIC).unwrap();
    let object = encode_object(&answer(first.0.clone(), &first.1), &request);
    let again = decode_whole(object.to_string().as_bytes()).unwrap();
    assert_same_answer(&first, &again);
    assert_eq!(
        object["output"][0]["content"][0]["text"],
        "eries alb Wild Ali voetrifсторіяးroke Beyouwen assemb"
    );
    assert_eq!(object["completed_at"], 1796117868);
    // Streams and objects hold the same answer: the stream's last event carries the object.
    for body in [
        STREAM.to_vec(),
        openai_reasoning_stream(),
        openai_function_call_stream(),
    ] {
        let first = decode(&body).unwrap();
        let object = encode_object(&answer(first.0.clone(), &first.1), &request);
        // The object holds each part whole: one block per part, the same item ids.
        let (_, again) = decode_whole(object.to_string().as_bytes()).unwrap();
        let ids = |wire: &Option<Value>| -> Vec<Value> {
            wire.as_ref().unwrap()["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["id"].clone())
                .collect()
        };
        assert_eq!(ids(&again.wire), ids(&first.1.wire));
        assert_eq!(again.finish_reason, first.1.finish_reason);
        assert_eq!(again.usage, first.1.usage);
        let stream = events(&encoded(answer(first.0.clone(), &first.1), &request));
        assert_eq!(stream.last().unwrap()["response"], object);
    }
}

/// The fields each event type of OpenAI's has that an SDK indexes (openai-python's
/// `types/responses/*_event.py`, all required there), besides `type` and `sequence_number`.
fn required_fields(kind: &str) -> &'static [&'static str] {
    match kind {
        "response.created"
        | "response.in_progress"
        | "response.completed"
        | "response.incomplete" => &["response"],
        "response.output_item.added" | "response.output_item.done" => &["output_index", "item"],
        "response.content_part.added" | "response.content_part.done" => {
            &["item_id", "output_index", "content_index", "part"]
        }
        "response.output_text.delta" => &[
            "item_id",
            "output_index",
            "content_index",
            "delta",
            "logprobs",
        ],
        "response.output_text.done" => &[
            "item_id",
            "output_index",
            "content_index",
            "text",
            "logprobs",
        ],
        "response.reasoning_text.delta" => &["item_id", "output_index", "content_index", "delta"],
        "response.reasoning_text.done" => &["item_id", "output_index", "content_index", "text"],
        "response.reasoning_summary_part.added" | "response.reasoning_summary_part.done" => {
            &["item_id", "output_index", "summary_index", "part"]
        }
        "response.reasoning_summary_text.delta" => {
            &["item_id", "output_index", "summary_index", "delta"]
        }
        "response.reasoning_summary_text.done" => {
            &["item_id", "output_index", "summary_index", "text"]
        }
        "response.function_call_arguments.delta" => &["item_id", "output_index", "delta"],
        "response.function_call_arguments.done" => &["item_id", "output_index", "arguments"],
        other => panic!("the encoder sent an event OpenAI does not: {other}"),
    }
}

#[test]
fn every_encoded_event_carries_the_indices_openai_s_events_have() {
    // The Python SDK raised "list indices must be integers or slices, not NoneType" on
    // llama-server's own events: ours carry every index.
    let request = plain_request();
    for body in streams() {
        let first = decode(&body).unwrap();
        let stream = events(&encoded(answer(first.0, &first.1), &request));
        for (n, event) in stream.iter().enumerate() {
            assert_eq!(event["sequence_number"], n, "{event}");
            let kind = event["type"].as_str().unwrap();
            for field in required_fields(kind) {
                assert!(
                    event.get(*field).is_some_and(|v| !v.is_null()),
                    "{kind} lacks {field}: {event}"
                );
            }
            if let Some(item_id) = event.get("item_id") {
                let index = event["output_index"].as_u64().unwrap() as usize;
                let last = stream.last().unwrap();
                assert_eq!(&last["response"]["output"][index]["id"], item_id, "{event}");
            }
        }
        let first = &stream[0]["response"];
        for field in [
            "id",
            "created_at",
            "model",
            "object",
            "output",
            "parallel_tool_calls",
            "tool_choice",
            "tools",
            "status",
        ] {
            assert!(first.get(field).is_some(), "response.created lacks {field}");
        }
        let last = &stream.last().unwrap()["response"];
        for field in ["input_tokens", "output_tokens", "total_tokens"] {
            assert!(last["usage"][field].is_u64(), "usage lacks {field}");
        }
    }
}

#[test]
fn without_a_wire_the_blocks_are_grouped_with_ids_made_from_the_answer_id() {
    let blocks = vec![
        MessageContentBlock::thinking("a"),
        MessageContentBlock::thinking("b"),
        MessageContentBlock::text("c"),
        MessageContentBlock::text("d"),
        MessageContentBlock::ToolCall {
            id: "call_x".into(),
            name: "f".into(),
            arguments: "{}".into(),
        },
        MessageContentBlock::ToolCall {
            id: "call_y".into(),
            name: "g".into(),
            arguments: "".into(),
        },
    ];
    let recorded = recorded(blocks.clone(), Some("tool_calls"), (5, 7), "s-3");
    let object = encode_object(&recorded, &plain_request());
    let ids: Vec<&str> = object["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["rs_s-3_0", "msg_s-3_1", "fc_s-3_2", "fc_s-3_3"]);
    assert_eq!(object["id"], "resp_s-3");
    assert_eq!(object["created_at"], 0);
    assert_eq!(object["status"], "completed");
    assert_eq!(
        object["output"][0]["content"][0],
        json!({"type": "reasoning_text", "text": "ab"})
    );
    assert_eq!(object["output"][1]["content"][0]["text"], "cd");
    assert_eq!(object["output"][2]["call_id"], "call_x");
    // Made up from the counts, the usage has OpenAI's full shape.
    assert_eq!(
        object["usage"],
        json!({"input_tokens": 5, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
               "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 12})
    );
    let replay = encoded(recorded, &plain_request());
    let (again, summary) = decode(&replay).unwrap();
    assert_eq!(again, blocks);
    assert_eq!(summary.finish_reason.as_deref(), Some("completed"));
}

#[test]
fn a_length_finish_replays_as_response_incomplete_with_its_reason() {
    let recorded = recorded(
        vec![MessageContentBlock::text("cut")],
        Some("length"),
        (1, 1),
        "x",
    );
    let stream = events(&encoded(recorded, &plain_request()));
    let last = stream.last().unwrap();
    assert_eq!(last["type"], "response.incomplete");
    assert_eq!(last["response"]["status"], "incomplete");
    assert_eq!(
        last["response"]["incomplete_details"]["reason"],
        "max_output_tokens"
    );
    let (_, summary) = decode(
        &stream
            .iter()
            .map(|e| format!("data: {e}\n\n"))
            .collect::<String>()
            .into_bytes(),
    )
    .unwrap();
    assert_eq!(summary.finish_reason.as_deref(), Some("max_output_tokens"));
}

#[test]
fn a_wire_that_does_not_fit_the_blocks_falls_back_to_grouping_but_keeps_the_response_id() {
    let (blocks, summary) = decode(STREAM).unwrap();
    let mut recorded = answer(blocks[..3].to_vec(), &summary);
    let object = encode_object(&recorded, &plain_request());
    assert_eq!(object["id"], "resp_UNuV6kNOxQ36PvIUc5rKBxthCC5eHW4t");
    assert_eq!(object["output"][0]["id"], "msg_cuca-s-1_0");
    // A wire from another format is not read at all.
    recorded.wire = Some(json!({"format": "messages", "id": "msg_x"}));
    assert_eq!(
        encode_object(&recorded, &plain_request())["id"],
        "resp_cuca-s-1"
    );
}

#[test]
fn a_long_text_goes_out_in_pieces_and_decodes_to_the_same_text() {
    let text = "é".repeat(crate::MAX_EVENT_TEXT);
    let recorded = recorded(
        vec![MessageContentBlock::text(text.clone())],
        None,
        (0, 0),
        "x",
    );
    let body = encoded(recorded, &plain_request());
    let deltas: Vec<Value> = events(&body)
        .into_iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .collect();
    // 128 KiB of two-byte characters: two deltas, each cut at a character boundary.
    assert_eq!(deltas.len(), 2);
    assert!(deltas
        .iter()
        .all(|d| d["delta"].as_str().unwrap().len() <= crate::MAX_EVENT_TEXT));
    let (blocks, _) = decode(&body).unwrap();
    assert_eq!(blocks.len(), 2);
    let joined: String = blocks
        .iter()
        .map(|b| match b {
            MessageContentBlock::Text { text } => text.as_str(),
            _ => "",
        })
        .collect();
    assert_eq!(joined, text);
}

#[test]
fn the_request_s_fields_are_echoed_in_the_response() {
    let request = parse_request(br#"{"model":"m","input":"x","store":false,"parallel_tool_calls":false,"tool_choice":"none",
        "tools":[{"type":"function","name":"f","description":"d","parameters":{"type":"object","properties":{}}},{"type":"web_search","search_context_size":"low"}],"previous_response_id":"resp_0"}"#).unwrap();
    let recorded = recorded(Vec::<MessageContentBlock>::new(), None, (0, 0), "x");
    let object = encode_object(&recorded, &request);
    assert_eq!(object["store"], false);
    assert_eq!(object["parallel_tool_calls"], false);
    assert_eq!(object["tool_choice"], "none");
    assert_eq!(object["previous_response_id"], "resp_0");
    assert_eq!(object["tools"][0]["name"], "f");
    assert_eq!(object["tools"][0]["type"], "function");
    assert_eq!(
        object["tools"][1],
        json!({"type":"web_search","search_context_size":"low"})
    );
    assert_eq!(object["output"], json!([]));
}

#[test]
fn the_error_body_is_openai_s() {
    let info = crate::ErrorInfo {
        status: 404,
        kind: "not_found_error",
        code: "cuca_turn_not_found",
        message: "no such turn",
        param: None,
    };
    assert_eq!(error_body(&info), crate::chat::error_body(&info));
    assert_eq!(
        Format::Responses.error_body(&info)["error"]["message"],
        "no such turn"
    );
}

/// The second request of a tool loop, as the OpenAI Agents SDK (pip `openai-agents` 0.24.0,
/// `Runner.run_streamed`) sent it to a loopback stand-in serving this module's encoding of
/// `openai_function_call_stream`: it echoes the replayed call's `call_id`, `id` and arguments.
const AGENTS_SECOND_TURN: &str = r#"{"model":"m","stream":true,"include":[],"input":[{"content":"Weather in Lisbon?","role":"user"},{"arguments":"{\"city\":\"Lisbon\",\"unit\":\"c\"}","call_id":"call_Kq2","name":"get_weather","type":"function_call","id":"fc_67","status":"completed"},{"call_id":"call_Kq2","output":"sunny","type":"function_call_output"}],"instructions":"Be terse.","tools":[{"name":"get_weather","parameters":{"properties":{"city":{"title":"City","type":"string"},"unit":{"title":"Unit","type":"string"}},"required":["city","unit"],"title":"get_weather_args","type":"object","additionalProperties":false},"strict":true,"type":"function","description":"Weather in a city."}]}"#;

#[test]
fn the_agents_sdk_s_tool_loop_request_reads_as_user_assistant_tool() {
    let request = parse_request(AGENTS_SECOND_TURN.as_bytes()).unwrap();
    assert_eq!(
        request.unified.messages,
        vec![
            Message::system("Be terse."),
            Message::user("Weather in Lisbon?"),
            Message {
                role: Role::Assistant,
                content: vec![MessageContentBlock::ToolCall {
                    id: "call_Kq2".into(),
                    name: "get_weather".into(),
                    arguments: "{\"city\":\"Lisbon\",\"unit\":\"c\"}".into(),
                }],
            },
            Message {
                role: Role::Tool,
                content: vec![MessageContentBlock::ToolResult {
                    tool_call_id: "call_Kq2".into(),
                    content: "sunny".into(),
                    is_error: false,
                }],
            },
        ]
    );
    assert!(request.stream);
    assert_eq!(request.unified.tools[0].name, "get_weather");
    assert_eq!(
        request.unified.tools[0].parameters["required"],
        json!(["city", "unit"])
    );
    assert_eq!(request.parameters, r#"{"include":[]}"#);
}

/// The second request of a tool loop as Codex CLI 0.169.0 (`codex exec`, a custom provider
/// with `wire_api = "responses"`) sent it to a loopback stand-in serving this module's
/// encoding of an `exec_command` call, its long texts and most tools cut short: the system
/// prompt as developer messages, no `instructions`, the replayed call echoed with its ids.
const CODEX_SECOND_TURN: &str = r#"{"model":"cuca-tiny-random","stream":true,"input":[{"type":"message","id":"msg_c567ff7a-5db0-5191-8cc5-c797e9e81249","role":"developer","content":[{"type":"input_text","text":"You are a coding agent running in the Codex CLI,"}]},{"type":"message","id":"msg_01a231dc-2be2-7c20-ae0d-f6458dfda7c2","role":"developer","content":[{"type":"input_text","text":"<skills_instructions>\n## Skills\nA skill is a set"},{"type":"input_text","text":"<permissions instructions>\nFilesystem sandboxing"}]},{"type":"message","id":"msg_01a231dc-2be2-7c20-ae0d-f657634a4a81","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/tmp/codex</cwd>\n  "}]},{"type":"message","id":"msg_01a231dc-2bed-7fa1-8c0d-95aa3bb643a9","role":"user","content":[{"type":"input_text","text":"Run echo"}]},{"type":"function_call","status":"completed","id":"fc_codex-1_0","name":"exec_command","arguments":"{\"cmd\":\"echo cuca-tool-ran > /tmp/codex/ran.txt\"}","call_id":"call_cuca1"},{"type":"function_call_output","id":"fco_01a231dc-2cf6-7b02-a915-aed0a5b5b812","call_id":"call_cuca1","output":"Chunk ID: af2839\nWall time: 0.0031 seconds\nProcess exited with code 0\nOriginal token count: 0\nOutput:\n"}],"tools":[{"type":"function","name":"exec_command","description":"Runs a command in a PTY, returning outpu","strict":false,"parameters":{"type":"object","properties":{"cmd":{"type":"string","description":"Shell command to execute."}},"required":["cmd"],"additionalProperties":false}},{"type":"namespace","name":"multi_agent_v1","description":"Tools for spawning and managing sub-agents.","tools":[{"type":"function","name":"close_agent","description":"Close an agent and any open de","strict":false,"parameters":{"type":"object","properties":{}}}]},{"type":"web_search","external_web_access":true}],"tool_choice":"auto","parallel_tool_calls":true,"reasoning":{"summary":"auto"},"store":false,"include":["reasoning.encrypted_content"],"prompt_cache_key":"01a231dc","client_metadata":{"session_id":"01a231dc"}}"#;

#[test]
fn codex_s_tool_loop_request_reads_as_system_user_assistant_tool() {
    let request = parse_request(CODEX_SECOND_TURN.as_bytes()).unwrap();
    let messages = &request.unified.messages;
    let roles: Vec<Role> = messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::System,
            Role::System,
            Role::User,
            Role::User,
            Role::Assistant,
            Role::Tool
        ]
    );
    assert_eq!(
        messages[1].content.len(),
        2,
        "two input_text parts, two blocks"
    );
    assert_eq!(messages[3], Message::user("Run echo"));
    assert_eq!(
        messages[4].content,
        vec![MessageContentBlock::ToolCall {
            id: "call_cuca1".into(),
            name: "exec_command".into(),
            arguments: r#"{"cmd":"echo cuca-tool-ran > /tmp/codex/ran.txt"}"#.into(),
        }]
    );
    assert!(matches!(
        &messages[5].content[..],
        [MessageContentBlock::ToolResult { tool_call_id, content, is_error: false }]
            if tool_call_id == "call_cuca1" && content.contains("Process exited with code 0")
    ));
    let names: Vec<&str> = request
        .unified
        .tools
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(names, ["exec_command", "multi_agent_v1", "web_search"]);
    assert_eq!(
        request.unified.tools[2].parameters["external_web_access"],
        true
    );
    assert_eq!(request.unified.tool_choice, Some(ToolChoice::Auto));
    assert!(request.stream);
    for kept in [
        r#""include":["reasoning.encrypted_content"]"#,
        r#""store":false"#,
        r#""reasoning":{"summary":"auto"}"#,
        r#""prompt_cache_key":"01a231dc""#,
    ] {
        assert!(
            request.parameters.contains(kept),
            "{kept} in {}",
            request.parameters
        );
    }
    // The replayed response echoes Codex's tools in Responses' shape.
    let recorded = recorded(vec![MessageContentBlock::text("done")], None, (0, 0), "x");
    let object = encode_object(&recorded, &request);
    assert_eq!(object["tools"][1]["type"], "namespace");
    assert_eq!(
        object["tools"][2],
        json!({"type": "web_search", "external_web_access": true})
    );
    assert_eq!(object["store"], false);
    assert_eq!(object["parallel_tool_calls"], true);
}

/// The events of one made-up output item, as a server streams items (one after another):
/// any kind, with or without `added` / `done` events, deltas of its kind in any of two
/// parts, with or without the indices llama-server leaves out.
fn arbitrary_item(at: u64) -> impl Strategy<Value = Vec<Value>> {
    let kinds = prop::sample::select(vec![
        "message",
        "reasoning",
        "function_call",
        "web_search_call",
    ]);
    let delta = (0u64..2, "[a-z é]{0,3}", any::<bool>());
    (
        kinds,
        any::<(bool, bool, bool, bool, bool)>(),
        prop::collection::vec(delta, 0..5),
        "[a-z]{0,3}",
    )
        .prop_map(move |(kind, (indexed, with_id, added, done, whole), deltas, text)| {
            let mut item = json!({"type": kind});
            if with_id {
                item["id"] = format!("it_{at}").into();
            }
            if kind == "function_call" {
                item["call_id"] = "c".into();
                item["name"] = "f".into();
                item["arguments"] = "".into();
            }
            let fields = |mut event: Value| {
                if indexed {
                    event["output_index"] = at.into();
                }
                if let (true, Some(id)) = (with_id, item.get("id")) {
                    event["item_id"] = id.clone();
                }
                event
            };
            let mut events = Vec::new();
            if added {
                events.push(fields(json!({"type": "response.output_item.added", "item": item})));
            }
            for (part, piece, summary) in deltas {
                let event = match (kind, summary) {
                    ("message", _) => json!({"type": "response.output_text.delta", "content_index": part, "delta": piece}),
                    ("reasoning", true) => json!({"type": "response.reasoning_summary_text.delta", "summary_index": part, "delta": piece}),
                    ("reasoning", false) => json!({"type": "response.reasoning_text.delta", "content_index": part, "delta": piece}),
                    ("function_call", _) => json!({"type": "response.function_call_arguments.delta", "delta": piece}),
                    _ => continue,
                };
                events.push(fields(event));
            }
            if done {
                let mut item = item.clone();
                if whole {
                    item["content"] = json!([{"type": "output_text", "text": text}]);
                    item["summary"] = json!([{"type": "summary_text", "text": text}]);
                    item["arguments"] = text.into();
                }
                events.push(fields(json!({"type": "response.output_item.done", "item": item})));
            }
            events
        })
}

fn arbitrary_stream() -> impl Strategy<Value = Vec<Value>> {
    (0usize..4).prop_flat_map(|n| {
        (0..n as u64)
            .map(arbitrary_item)
            .collect::<Vec<_>>()
            .prop_map(|items| items.into_iter().flatten().collect())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Whatever a server sends, the decoder neither panics nor loses its layout: a made-up
    /// stream that decodes replays to the same blocks, finish, response id and item layout.
    #[test]
    fn any_stream_that_decodes_round_trips(events in arbitrary_stream()) {
        let mut events = events;
        events.push(json!({"type": "response.completed", "response": {"id": "r", "status": "completed"}}));
        let body = super::decode::tests::sse(&events);
        if let Ok(first) = decode(&body) {
            let replay = encoded(answer(first.0.clone(), &first.1), &plain_request());
            let again = decode(&replay).unwrap();
            prop_assert_eq!(&again.0, &first.0);
            prop_assert_eq!(&again.1.finish_reason, &first.1.finish_reason);
            // A usage and `created_at` the stream never sent are made up by the replay.
            // So is an id for an item that came without one.
            let (a, mut b) = (first.1.wire.unwrap(), again.1.wire.unwrap());
            let made_up: Vec<bool> = a["items"].as_array().unwrap().iter().map(|i| i.get("id").is_none()).collect();
            for (item, made_up) in b["items"].as_array_mut().unwrap().iter_mut().zip(made_up) {
                if made_up {
                    item.as_object_mut().unwrap().remove("id");
                }
            }
            prop_assert_eq!(&b["items"], &a["items"]);
            prop_assert_eq!(&b["id"], &a["id"]);
        }
    }
}
