//! Call metadata: `CallRequest`/`CallFinish` are written only when the plugin is
//! asked, inside the turn they describe, and a plugin that was not asked writes exactly what
//! the seed's hooks write.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use cuca_events::{
    CucaPlugin, Message, MessageContentBlock, SessionBackend, SessionEvent, TokenUsage, ToolChoice,
    ToolDefinition, UnifiedRequest, UnifiedResponse,
};
use cuca_session_log::SessionLogPlugin;
use cuca_store_mem::InMemoryBackend;
use futures::executor::block_on;

fn request() -> UnifiedRequest {
    let mut request = UnifiedRequest::new(vec![
        Message::system("You are terse."),
        Message::user("The vault is in Lisbon. Reply with: noted"),
    ]);
    request.model = "tiny".into();
    request.max_tokens = Some(12);
    request.temperature = Some(0.0);
    request.tool_choice = Some(ToolChoice::Auto);
    request.tools = vec![ToolDefinition {
        name: "lookup".into(),
        description: "Finds a city.".into(),
        parameters: serde_json::json!({"type": "object"}),
    }];
    request
}

fn response() -> UnifiedResponse {
    UnifiedResponse {
        model: "cuca-tiny-random".into(),
        provider: "llamacpp".into(),
        content: vec![MessageContentBlock::text("noted")],
        finish_reason: Some("length".into()),
        token_usage: TokenUsage {
            prompt_tokens: 40,
            completion_tokens: 12,
        },
        duration: Duration::from_millis(7),
        ..UnifiedResponse::default()
    }
}

fn turn(plugin: &SessionLogPlugin) {
    block_on(async {
        let mut request = request();
        plugin.on_request(&mut request).await.unwrap();
        plugin
            .on_stream_chunk(&MessageContentBlock::text("noted"))
            .await
            .unwrap();
        plugin.on_response_complete(&response()).await.unwrap();
    });
}

fn kinds(backend: &Arc<dyn SessionBackend>) -> Vec<&'static str> {
    backend
        .replay("demo")
        .unwrap()
        .iter()
        .map(|record| record.event.kind())
        .collect()
}

/// "The plugin writes them only when asked (`SessionLogPlugin` option), so seed 000's record
/// counts and its worked example stay exactly as they are by default."
#[test]
fn a_plugin_not_asked_writes_only_the_seed_records() {
    let backend: Arc<dyn SessionBackend> = Arc::new(InMemoryBackend::new());
    let plugin = SessionLogPlugin::new(Arc::clone(&backend)).with_session_id("demo");
    turn(&plugin);
    assert_eq!(
        kinds(&backend),
        ["SystemPrompt", "Message", "Output", "Latency", "TokenUsage"]
    );
}

/// "Record, per call, the model, the sampling parameters, the tools offered and the finish
/// reason, as new `SessionEvent` kinds added at the end of the enum."
#[test]
fn a_plugin_asked_records_what_the_call_was_sent_and_how_it_ended_inside_the_turn() {
    let backend: Arc<dyn SessionBackend> = Arc::new(InMemoryBackend::new());
    let plugin = SessionLogPlugin::new(Arc::clone(&backend))
        .with_session_id("demo")
        .with_call_metadata(true);
    turn(&plugin);
    assert_eq!(
        kinds(&backend),
        [
            "SystemPrompt",
            "Message",
            "CallRequest",
            "RequestDigest",
            "Output",
            "CallFinish",
            "Latency",
            "TokenUsage"
        ]
    );
    let records = backend.replay("demo").unwrap();
    let SessionEvent::CallRequest {
        model,
        parameters,
        tools,
        messages,
    } = &records[2].event
    else {
        panic!("record 2 is {:?}", records[2].event);
    };
    assert_eq!(model, "tiny");
    assert_eq!(*messages, 2);
    let parameters: serde_json::Value = serde_json::from_str(parameters).unwrap();
    assert_eq!(
        parameters,
        serde_json::json!({"max_tokens": 12, "temperature": 0.0, "tool_choice": "auto"})
    );
    let tools: serde_json::Value = serde_json::from_str(tools).unwrap();
    assert_eq!(tools[0]["name"], "lookup");
    assert_eq!(tools[0]["parameters"]["type"], "object");
    assert_eq!(
        records[5].event,
        SessionEvent::CallFinish {
            finish_reason: Some("length".into()),
            model: "cuca-tiny-random".into(),
        }
    );
    // Dense sequences: the new records take numbers like any other.
    let sequences: Vec<u64> = records.iter().map(|r| r.sequence).collect();
    assert_eq!(sequences, [0, 1, 2, 3, 4, 5, 6, 7]);
    // The request's digest follows its CallRequest: it is what tells two requests at one
    // position apart.
    let SessionEvent::RequestDigest { sha256 } = &records[3].event else {
        panic!("{:?}", records[3].event)
    };
    assert_eq!(sha256.len(), 64);
    assert!(sha256
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
}

/// The proxy learns the point a call starts at before the call writes anything.
#[test]
fn next_sequence_is_the_sequence_the_next_record_gets() {
    let backend: Arc<dyn SessionBackend> = Arc::new(InMemoryBackend::new());
    let plugin = SessionLogPlugin::new(Arc::clone(&backend)).with_session_id("demo");
    assert_eq!(plugin.next_sequence().unwrap(), 0);
    turn(&plugin);
    assert_eq!(plugin.next_sequence().unwrap(), 5);
    // A plugin over the same store that never wrote reads the tail.
    let fresh = SessionLogPlugin::new(Arc::clone(&backend)).with_session_id("demo");
    assert_eq!(fresh.next_sequence().unwrap(), 5);
    let record = fresh
        .append_log(SessionEvent::Output { text: "x".into() })
        .unwrap();
    assert_eq!(record.sequence, 5);
}

/// "Record, per call, the model, the sampling parameters": a caller holding the request's
/// own JSON (the proxy) records every parameter it sent, exactly as sent: nothing the
/// unified request read is added (a call that sent only `max_completion_tokens` is not
/// recorded with a `max_tokens` too). A plugin not asked for call metadata records what
/// `on_request` records, and no parameters.
#[test]
fn record_request_with_records_the_callers_parameters_exactly_as_sent() {
    let sent =
        r#"{"top_p":0.9,"seed":7,"stop":["\n"],"temperature":0.7,"max_completion_tokens":5}"#;

    let backend = Arc::new(InMemoryBackend::new());
    let log = SessionLogPlugin::new(Arc::clone(&backend) as Arc<dyn SessionBackend>)
        .with_session_id("s")
        .with_call_metadata(true);
    // `request()` sets max_tokens 12, temperature and a tool choice of its own reading.
    assert_eq!(log.record_request_with(&request(), sent).unwrap(), Some(0));
    let records = backend.replay("s").unwrap();
    let SessionEvent::CallRequest { parameters, .. } = &records[2].event else {
        panic!("{:?}", records[2].event)
    };
    assert_eq!(parameters, sent);
    assert!(!parameters.contains("\"max_tokens\""), "{parameters}");

    // A text that is no JSON object is refused before anything is written.
    let refused = log.record_request_with(&request(), "[1]").unwrap_err();
    assert!(
        matches!(refused, cuca_events::PluginError::Validation { .. }),
        "{refused}"
    );
    assert_eq!(backend.replay("s").unwrap().len(), records.len());

    let plain = Arc::new(InMemoryBackend::new());
    let log =
        SessionLogPlugin::new(Arc::clone(&plain) as Arc<dyn SessionBackend>).with_session_id("s");
    log.record_request_with(&request(), sent).unwrap();
    let kinds: Vec<&str> = plain
        .replay("s")
        .unwrap()
        .iter()
        .map(|r| r.event.kind())
        .collect();
    assert_eq!(kinds, ["SystemPrompt", "Message"]);
}

/// The point of a call is the first record actually written, not the tail the
/// plugin last knew: another writer's records (here a second plugin on the same store) come
/// first, and the call's records follow them.
#[test]
fn record_request_with_returns_the_sequence_its_first_record_got() {
    let backend = Arc::new(InMemoryBackend::new());
    let log = SessionLogPlugin::new(Arc::clone(&backend) as Arc<dyn SessionBackend>)
        .with_session_id("s")
        .with_call_metadata(true);
    assert_eq!(log.next_sequence().unwrap(), 0);
    let other =
        SessionLogPlugin::new(Arc::clone(&backend) as Arc<dyn SessionBackend>).with_session_id("s");
    for n in 0..3 {
        other
            .append_log(SessionEvent::Output {
                text: format!("other {n}"),
            })
            .unwrap();
    }
    let first = log.record_request_with(&request(), "{}").unwrap();
    assert_eq!(first, Some(3));
    let records = backend.replay("s").unwrap();
    assert_eq!(records[3].event.kind(), "SystemPrompt");
}

/// On resume, a tail turn that has a CallRequest and no CallFinish is closed: a
/// recorder killed mid-call leaves its turn open; the next plugin closes it with a
/// CallIncomplete saying why, so the next call is a turn of its own. A closed session is
/// left alone.
#[test]
fn close_open_call_closes_a_call_left_open_and_nothing_else() {
    let backend = Arc::new(InMemoryBackend::new());
    let killed = SessionLogPlugin::new(Arc::clone(&backend) as Arc<dyn SessionBackend>)
        .with_session_id("s")
        .with_call_metadata(true);
    killed.record_request_with(&request(), "{}").unwrap();
    killed
        .append_log(SessionEvent::Output {
            text: "half an ans".into(),
        })
        .unwrap();
    let n_before = backend.replay("s").unwrap().len();

    let resumed = SessionLogPlugin::new(Arc::clone(&backend) as Arc<dyn SessionBackend>)
        .with_session_id("s")
        .with_call_metadata(true);
    assert!(resumed.close_open_call("the recorder stopped").unwrap());
    let records = backend.replay("s").unwrap();
    let kinds: Vec<&str> = records[n_before..].iter().map(|r| r.event.kind()).collect();
    assert_eq!(
        kinds,
        ["CallIncomplete", "CallFinish", "Latency", "TokenUsage"]
    );
    assert_eq!(
        records[n_before].event,
        SessionEvent::CallIncomplete {
            reason: "the recorder stopped".into()
        }
    );
    assert_eq!(
        records[n_before + 1].event,
        SessionEvent::CallFinish {
            finish_reason: None,
            model: "tiny".into()
        }
    );
    // Dense sequences: the closing records follow the tail.
    for (i, record) in records.iter().enumerate() {
        assert_eq!(record.sequence, i as u64);
    }
    // Closed now: a second look changes nothing.
    assert!(!resumed.close_open_call("again").unwrap());
    assert_eq!(backend.replay("s").unwrap().len(), records.len());
    // A session without call records is never touched.
    let plain = SessionLogPlugin::new(Arc::clone(&backend) as Arc<dyn SessionBackend>)
        .with_session_id("plain");
    plain
        .append_log(SessionEvent::Output { text: "x".into() })
        .unwrap();
    assert!(!plain.close_open_call("no").unwrap());
    assert_eq!(backend.replay("plain").unwrap().len(), 1);
}

/// Every tool result a request carries is recorded once per conversation position as a
/// `SessionEvent::ToolResult` (with its call id, and the output verbatim) through an explicit,
/// opt-in plugin switch; the seed rule ('Tool messages are not recorded') is unchanged when
/// the switch is off.
#[test]
fn tool_results_are_recorded_once_per_position_only_when_asked() {
    let tool_turn = || {
        let mut request = request();
        request.messages.push(Message {
            role: cuca_events::Role::Assistant,
            content: vec![MessageContentBlock::ToolCall {
                id: "call_1".into(),
                name: "lookup".into(),
                arguments: "{}".into(),
            }],
        });
        request.messages.push(Message {
            role: cuca_events::Role::Tool,
            content: vec![MessageContentBlock::ToolResult {
                tool_call_id: "call_1".into(),
                content: "ALPHA\n".into(),
                is_error: true,
            }],
        });
        request
    };
    for on in [true, false] {
        let backend = Arc::new(InMemoryBackend::new());
        let plugin = SessionLogPlugin::new(Arc::clone(&backend) as Arc<dyn SessionBackend>)
            .with_session_id("tools")
            .with_call_metadata(true)
            .with_tool_results(on);
        let first = tool_turn();
        let mut second = tool_turn();
        second.messages.push(Message::user("And then?"));
        for mut request in [first, second] {
            block_on(plugin.on_request(&mut request)).unwrap();
            block_on(plugin.on_response_complete(&response())).unwrap();
        }
        let results: Vec<SessionEvent> = backend
            .replay("tools")
            .unwrap()
            .into_iter()
            .map(|r| r.event)
            .filter(|e| matches!(e, SessionEvent::ToolResult { .. }))
            .collect();
        if on {
            assert_eq!(
                results,
                vec![SessionEvent::ToolResult {
                    tool_call_id: "call_1".into(),
                    content: "ALPHA\n".into(),
                    is_error: true,
                    stdout: None,
                    stderr: None,
                    exit_code: None,
                }]
            );
        } else {
            assert!(results.is_empty(), "{results:?}");
        }
    }
}
