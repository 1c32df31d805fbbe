//! The live exporter: a real `CucaClient` with `OtelPlugin` registered, against a loopback
//! chat server, with the collector up (spans arrive with the conventions) and down (the call
//! is not failed, the drop is counted).

// Test helpers outside #[test] functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;
use common::*;
use cuca_calllog::CallLog;
use cuca_client::{CucaClient, ProviderEndpoint, RetryPolicy};
use cuca_events::{CucaPlugin, Message, PluginError, TokenUsage, UnifiedRequest, UnifiedResponse};
use cuca_otel::opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use cuca_otel::opentelemetry_proto::tonic::trace::v1::status::StatusCode as OtelStatus;
use cuca_otel::{ids, LiveConfig, LiveStats, OtelPlugin};
use futures::StreamExt;

const STREAM_BASIC: &[u8] =
    include_bytes!("../../cuca-client/tests/fixtures/llama-server/stream-basic.body");
const CONTEXT_OVERFLOW: &[u8] =
    include_bytes!("../../cuca-client/tests/fixtures/llama-server/error-context-overflow.body");

type Replies = Arc<Mutex<VecDeque<(u16, &'static [u8])>>>;

async fn completions(State(replies): State<Replies>) -> axum::response::Response {
    match replies.lock().unwrap().pop_front() {
        Some((200, body)) => ([("content-type", "text/event-stream")], body).into_response(),
        Some((status, body)) => (
            StatusCode::from_u16(status).unwrap(),
            [("content-type", "application/json")],
            body,
        )
            .into_response(),
        None => (StatusCode::GONE, "no scripted reply left").into_response(),
    }
}

/// A chat server answering with `replies` in order; returns its base URL.
async fn chat_server(replies: Vec<(u16, &'static [u8])>) -> String {
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(Arc::new(Mutex::new(VecDeque::from(replies))));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

fn client(base_url: &str, plugin: Arc<OtelPlugin>) -> CucaClient {
    CucaClient::builder()
        .with_provider(ProviderEndpoint::LlamaCpp)
        .with_base_url(base_url)
        .with_model("tiny")
        .with_retry_policy(RetryPolicy::none())
        .with_call_log(CallLog::off())
        .register_plugin(plugin as Arc<dyn CucaPlugin>)
        .build()
        .unwrap()
}

fn request(run: &str) -> UnifiedRequest {
    let mut request = UnifiedRequest::new(vec![
        Message::system("You are terse."),
        Message::user("The vault is in Lisbon. Reply with: noted"),
    ]);
    request.metadata.run = Some(run.to_owned());
    request.max_tokens = Some(12);
    request.temperature = Some(0.0);
    request
}

/// Runs one call to the end; the text it streamed, or its error.
async fn call(client: &CucaClient, run: &str) -> Result<String, PluginError> {
    let mut stream = client.generate_stream(request(run));
    let mut text = String::new();
    while let Some(block) = stream.next().await {
        if let cuca_events::MessageContentBlock::Text { text: t } = block? {
            text.push_str(&t);
        }
    }
    Ok(text)
}

#[tokio::test]
async fn a_collector_that_is_down_fails_no_call_and_the_drop_is_counted() {
    // A collector that is down never fails or slows a call (bounded queue, drops counted and
    // reported).
    let down = down_url().await;
    let chat = chat_server(vec![(200, STREAM_BASIC)]).await;
    let plugin = Arc::new(OtelPlugin::spawn(LiveConfig::new(&down).unwrap()).unwrap());
    let client = client(&chat, Arc::clone(&plugin));
    let text = call(&client, "run-down")
        .await
        .expect("the call is not failed");
    assert!(!text.is_empty());
    let stats: LiveStats = plugin.shutdown().await;
    assert_eq!(stats.queued, 1);
    assert_eq!(stats.dropped_send_failed, 1);
    assert_eq!(stats.failed_requests, 1);
    assert_eq!(stats.exported, 0);
    assert_eq!(stats.dropped_queue_full, 0);
}

#[tokio::test]
async fn a_running_agents_calls_reach_the_collector_as_they_end() {
    let (collector, received) = start_receiver().await;
    let chat = chat_server(vec![(200, STREAM_BASIC), (400, CONTEXT_OVERFLOW)]).await;
    let plugin = Arc::new(OtelPlugin::spawn(LiveConfig::new(&collector).unwrap()).unwrap());
    let client = client(&chat, Arc::clone(&plugin));
    call(&client, "run-live").await.unwrap();
    let refused = call(&client, "run-live").await;
    assert!(matches!(
        refused,
        Err(PluginError::Provider { status: 400, .. })
    ));
    let stats = plugin.shutdown().await;
    assert_eq!(stats.exported, 2);
    assert_eq!(stats.dropped_queue_full + stats.dropped_send_failed, 0);

    let spans = received.spans();
    assert_eq!(spans.len(), 2);
    let ok = &spans[0];
    assert_eq!(ok.name, "chat tiny");
    assert_eq!(ok.kind, SpanKind::Client as i32);
    // A call is a trace of its own, as a natively traced call is, and `session.id`
    // groups the run's traces in Phoenix's Sessions tab.
    assert!(ok.parent_span_id.is_empty());
    assert_eq!(str_attr(ok, "openinference.span.kind"), "LLM");
    assert_eq!(str_attr(ok, "session.id"), "run-live");
    assert_eq!(int_attr(ok, "llm.token_count.prompt"), 40);
    assert_eq!(int_attr(ok, "llm.token_count.total"), 52);
    assert_eq!(str_attr(ok, "gen_ai.operation.name"), "chat");
    assert_eq!(str_attr(ok, "gen_ai.provider.name"), "llamacpp");
    assert_eq!(str_attr(ok, "gen_ai.system"), "llamacpp");
    assert_eq!(str_attr(ok, "gen_ai.request.model"), "tiny");
    assert_eq!(str_attr(ok, "gen_ai.response.model"), "cuca-tiny-random");
    assert_eq!(int_attr(ok, "gen_ai.request.max_tokens"), 12);
    assert_eq!(int_attr(ok, "gen_ai.usage.input_tokens"), 40);
    assert_eq!(int_attr(ok, "gen_ai.usage.output_tokens"), 12);
    assert_eq!(
        str_array_attr(ok, "gen_ai.response.finish_reasons"),
        ["length"]
    );
    assert_eq!(str_attr(ok, "cuca.run"), "run-live");
    assert!(ok.end_time_unix_nano >= ok.start_time_unix_nano);
    assert!(ok.start_time_unix_nano > 0);
    // "call spans OK when they ended well".
    assert_eq!(ok.status.as_ref().unwrap().code, OtelStatus::Ok as i32);
    assert!(!has(ok, "gen_ai.input.messages"), "no content unless asked");
    assert!(!has(ok, "gen_ai.output.messages"));

    let failed = &spans[1];
    assert_ne!(failed.trace_id, ok.trace_id, "a trace per call");
    assert_eq!(
        str_attr(failed, "session.id"),
        "run-live",
        "one run, one session"
    );
    assert_ne!(failed.span_id, ok.span_id);
    assert_eq!(str_attr(failed, "error.type"), "400");
    assert_eq!(int_attr(failed, "http.response.status_code"), 400);
    let status = failed.status.as_ref().unwrap();
    assert_eq!(status.code, OtelStatus::Error as i32);
    assert!(status
        .message
        .contains("exceeds the available context size"));
}

#[tokio::test]
async fn with_content_a_live_call_carries_its_answer_with_its_finish_reason_and_its_project() {
    // The live `OtelPlugin` sends what an export sends: the answer is one joined text part
    // with the finish reason the schema requires, the root shows its input and output, and
    // the project is named. A live span is sent once, when its call has ended, so there is
    // nothing in flight to re-send.
    let (collector, received) = start_receiver().await;
    let chat = chat_server(vec![(200, STREAM_BASIC)]).await;
    let config = LiveConfig {
        with_content: true,
        project: Some("cuca-live".into()),
        ..LiveConfig::new(&collector).unwrap()
    };
    let plugin = Arc::new(OtelPlugin::spawn(config).unwrap());
    let client = client(&chat, Arc::clone(&plugin));
    let text = call(&client, "run-content").await.unwrap();
    let stats = plugin.shutdown().await;
    assert_eq!(stats.exported, 1);
    let request = received.requests.lock().unwrap()[0].clone();
    let resource = request.resource_spans[0].resource.as_ref().unwrap();
    assert!(matches!(
        attr(&resource.attributes, "openinference.project.name"),
        Some(cuca_otel::opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(p)) if p == "cuca-live"
    ));
    let span = &received.spans()[0];
    let output: serde_json::Value =
        serde_json::from_str(str_attr(span, "gen_ai.output.messages")).unwrap();
    assert_eq!(output[0]["finish_reason"], "length");
    let parts = output[0]["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 1, "one joined text part: {parts:?}");
    assert_eq!(parts[0]["content"], text.as_str());
    assert_eq!(str_attr(span, "output.value"), text);
    assert!(!str_attr(span, "input.value").is_empty());
}

fn response(call_id: &str) -> UnifiedResponse {
    UnifiedResponse {
        model: "qwen3".into(),
        provider: "openai".into(),
        content: vec![cuca_events::MessageContentBlock::text("noted")],
        finish_reason: Some("stop".into()),
        token_usage: TokenUsage {
            prompt_tokens: 3,
            completion_tokens: 1,
        },
        call_id: Some(call_id.into()),
        ..UnifiedResponse::default()
    }
}

#[tokio::test]
async fn a_full_queue_drops_and_counts_instead_of_waiting() {
    let (collector, received) = start_receiver().await;
    let config = LiveConfig {
        queue_capacity: 2,
        with_content: true,
        ..LiveConfig::new(&collector).unwrap()
    };
    // The worker is not running yet, so nothing leaves the queue: the third span on finds
    // it full, and every hook still returns at once.
    let (plugin, worker) = OtelPlugin::new(config).unwrap();
    for n in 0..5 {
        let mut req = request("run-q");
        req.metadata.call_id = Some(format!("call-{n}"));
        plugin.on_request(&mut req).await.unwrap();
        plugin
            .on_response_complete(&response(&format!("call-{n}")))
            .await
            .unwrap();
    }
    let stats = plugin.stats();
    assert_eq!(stats.queued, 2);
    assert_eq!(stats.dropped_queue_full, 3);

    plugin.close();
    let stats = worker.run().await;
    assert_eq!(stats.exported, 2);
    let spans = received.spans();
    assert_eq!(spans.len(), 2);
    assert_eq!(spans[0].span_id, ids::live_call_span_id("call-0").to_vec());
    // Content was asked for here: input without the system prompt, which goes separately.
    let input: serde_json::Value =
        serde_json::from_str(str_attr(&spans[0], "gen_ai.input.messages")).unwrap();
    assert_eq!(input.as_array().unwrap().len(), 1);
    assert_eq!(input[0]["role"], "user");
    let system: serde_json::Value =
        serde_json::from_str(str_attr(&spans[0], "gen_ai.system_instructions")).unwrap();
    assert_eq!(system[0]["content"], "You are terse.");
    let output: serde_json::Value =
        serde_json::from_str(str_attr(&spans[0], "gen_ai.output.messages")).unwrap();
    assert_eq!(output[0]["parts"][0]["content"], "noted");
    assert_eq!(output[0]["finish_reason"], "stop");

    // After close, a call's span is dropped and counted, and the hook still succeeds.
    plugin
        .on_response_complete(&response("late"))
        .await
        .unwrap();
    assert_eq!(plugin.stats().dropped_queue_full, 4);
}

#[tokio::test]
async fn calls_whose_end_is_never_seen_are_forgotten_and_counted() {
    let down = down_url().await;
    let config = LiveConfig {
        queue_capacity: 2,
        ..LiveConfig::new(&down).unwrap()
    };
    let (plugin, _worker) = OtelPlugin::new(config).unwrap();
    for n in 0..3 {
        let mut req = request("run-lost");
        req.metadata.call_id = Some(format!("lost-{n}"));
        plugin.on_request(&mut req).await.unwrap();
    }
    assert_eq!(plugin.stats().unmatched, 1);
}

#[tokio::test]
async fn a_bad_config_is_refused_by_name() {
    assert!(matches!(
        LiveConfig::new("not a url"),
        Err(cuca_otel::Error::Endpoint { .. })
    ));
    let config = LiveConfig {
        queue_capacity: 0,
        ..LiveConfig::new("http://127.0.0.1:4318").unwrap()
    };
    match config.validate() {
        Err(error) => assert!(error.to_string().contains("queue_capacity")),
        Ok(()) => panic!("a zero queue was accepted"),
    }
}

#[test]
fn spawning_outside_a_runtime_is_an_error_not_a_panic() {
    let config = LiveConfig::new("http://127.0.0.1:4318").unwrap();
    assert!(matches!(
        OtelPlugin::spawn(config),
        Err(cuca_otel::Error::Runtime { .. })
    ));
}

#[tokio::test]
async fn a_collector_that_hangs_holds_no_call_and_is_given_up_on() {
    // A collector that accepts connections and never answers: the call does not wait for
    // it, and the worker gives the request up after `request_timeout`.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hung = format!("http://{}", listener.local_addr().unwrap());
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = Arc::clone(&held);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            keep.lock().unwrap().push(socket);
        }
    });
    let chat = chat_server(vec![(200, STREAM_BASIC)]).await;
    let config = LiveConfig {
        request_timeout: std::time::Duration::from_millis(300),
        ..LiveConfig::new(&hung).unwrap()
    };
    let plugin = Arc::new(OtelPlugin::spawn(config).unwrap());
    let client = client(&chat, Arc::clone(&plugin));
    let text = call(&client, "run-hung")
        .await
        .expect("the call is not failed");
    assert!(!text.is_empty());
    let stats = plugin.shutdown().await;
    assert_eq!(stats.queued, 1);
    assert_eq!(stats.dropped_send_failed, 1);
    assert_eq!(stats.failed_requests, 1);
    assert!(
        !held.lock().unwrap().is_empty(),
        "the request did reach the hung collector"
    );
}

#[tokio::test]
async fn shutdown_against_a_collector_that_never_answers_returns_within_its_bound_and_counts_the_rest(
) {
    // `shutdown()` is bounded in time against a hanging collector (it once took 88–95 s).
    // The requests would each wait a minute; the shutdown bound is 200 ms.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hung = format!("http://{}", listener.local_addr().unwrap());
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = Arc::clone(&held);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            keep.lock().unwrap().push(socket);
        }
    });
    let config = LiveConfig {
        request_timeout: std::time::Duration::from_secs(60),
        shutdown_timeout: std::time::Duration::from_millis(200),
        max_batch: 2,
        ..LiveConfig::new(&hung).unwrap()
    };
    let plugin = OtelPlugin::spawn(config).unwrap();
    for n in 0..5 {
        plugin
            .on_response_complete(&response(&format!("stuck-{n}")))
            .await
            .unwrap();
    }
    // A guard far above the bound, so a regression fails instead of hanging the suite.
    let stats = tokio::time::timeout(std::time::Duration::from_secs(30), plugin.shutdown())
        .await
        .expect("shutdown returned within its guard");
    assert_eq!(stats.queued, 5);
    assert_eq!(stats.exported, 0);
    assert_eq!(stats.dropped_send_failed, 0);
    // Every span is accounted for: the batch in flight and the ones still queued.
    assert_eq!(stats.dropped_at_shutdown, 5, "{stats:?}");
    assert!(
        !held.lock().unwrap().is_empty(),
        "the first request did reach the hung collector"
    );
    // A second shutdown has nothing left to wait for and changes no count.
    assert_eq!(plugin.shutdown().await, stats);
}

/// A live span of a tool loop's step shows the step's own new input (the tool's result, not
/// the first question), the tools the request offered, and no token counts when the
/// response reported none.
#[tokio::test]
async fn a_live_tool_loop_step_shows_its_new_input_and_tools_and_no_unknown_tokens() {
    let (collector, received) = start_receiver().await;
    let config = LiveConfig {
        with_content: true,
        ..LiveConfig::new(&collector).unwrap()
    };
    let (plugin, worker) = OtelPlugin::new(config).unwrap();
    let mut req = UnifiedRequest::new(vec![
        Message::system("You are terse."),
        Message::user("What is the weather in Lisbon?"),
        Message {
            role: cuca_events::Role::Assistant,
            content: vec![cuca_events::MessageContentBlock::ToolCall {
                id: "call_1".into(),
                name: "weather".into(),
                arguments: r#"{"city":"Lisbon"}"#.into(),
            }],
        },
        Message {
            role: cuca_events::Role::Tool,
            content: vec![cuca_events::MessageContentBlock::ToolResult {
                tool_call_id: "call_1".into(),
                content: "sunny, 24 °C".into(),
                is_error: false,
            }],
        },
    ]);
    req.tools = vec![cuca_events::ToolDefinition {
        name: "weather".into(),
        description: "The weather in a city".into(),
        parameters: serde_json::json!({"type": "object"}),
    }];
    req.metadata.run = Some("run-loop".into());
    req.metadata.call_id = Some("loop-2".into());
    plugin.on_request(&mut req).await.unwrap();
    let mut done = response("loop-2");
    done.token_usage = TokenUsage::default();
    plugin.on_response_complete(&done).await.unwrap();
    plugin.close();
    worker.run().await;
    let span = &received.spans()[0];
    let input: serde_json::Value = serde_json::from_str(str_attr(span, "input.value")).unwrap();
    assert_eq!(input[0]["role"], "tool");
    assert_eq!(input[0]["parts"][0]["response"], "sunny, 24 °C");
    assert_eq!(input.as_array().unwrap().len(), 1);
    let tool: serde_json::Value =
        serde_json::from_str(str_attr(span, "llm.tools.0.tool.json_schema")).unwrap();
    assert_eq!(tool["function"]["name"], "weather");
    for key in ["gen_ai.usage.input_tokens", "llm.token_count.total"] {
        assert!(!has(span, key), "{key} sent for tokens nobody reported");
    }
}
