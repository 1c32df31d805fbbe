//! Replay and auto mode: recorded through the proxy, then answered
//! from the recording with no upstream at all.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod support;

use cuca_proxy::{Mode, ProxyConfig};
use serde_json::{json, Value};
use support::*;

/// Records the seed's two turns (streamed, then the second turn) and a non-streamed call in
/// session "demo", and a tool call in "tools", through a recording proxy; returns the upstream
/// stopped.
async fn record_demo(dir: &std::path::Path) {
    let upstream = upstream().await;
    let proxy = recording(&upstream, dir).await;
    for (session, name) in [
        ("demo", "stream-basic"),
        ("demo", "stream-second-turn"),
        ("think", "nonstream-reasoning"),
    ] {
        let response = client()
            .post(proxy.chat_url(Some(session)))
            .body(request(name))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
    }
    let response = client()
        .post(proxy.chat_url(Some("tools")))
        .json(&tool_request())
        .send()
        .await
        .unwrap();
    response.bytes().await.unwrap();
    drop(proxy);
    upstream.stop().await;
}

fn tool_request() -> Value {
    json!({
        "model": "tiny", "stream": true,
        "messages": [{"role": "user", "content": "TOOLS: where is the vault?"}],
        "tools": [{"type": "function", "function": {"name": "lookup", "description": "Finds a city.", "parameters": {"type": "object"}}}],
    })
}

async fn post(url: &str, body: Vec<u8>) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let response = client().post(url).body(body).send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.bytes().await.unwrap().to_vec())
}

/// "if they match, the recorded blocks are served as the upstream would — an SSE stream of
/// OpenAI chunks (content, `reasoning_content`, `tool_calls` deltas, usage, finish reason) or
/// a single JSON response — deterministically"; "no network at all".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_turn_is_served_as_the_upstream_served_it_with_the_upstream_gone() {
    let dir = tempfile::tempdir().unwrap();
    record_demo(dir.path()).await;
    let proxy = replaying(dir.path()).await;

    for (turn, name) in [(0, "stream-basic"), (1, "stream-second-turn")] {
        let (status, headers, body) = post(&proxy.chat_url(Some("demo")), request(name)).await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        assert_eq!(headers["content-type"], "text/event-stream");
        assert_eq!(headers["x-cuca-session"], "demo");
        assert_eq!(headers["x-cuca-turn"], (turn + 1).to_string());
        let replayed = blocks_of_sse(&body);
        let recorded = blocks_of_sse(&fixture(&format!("{name}.body")));
        assert_eq!(replayed, recorded, "{name}");
        // The usage chunk was asked for, and carries the recorded counts.
        let text = String::from_utf8(body.clone()).unwrap();
        let usage_line = text
            .lines()
            .find(|l| l.contains("\"usage\""))
            .expect("a usage chunk");
        let usage: Value = serde_json::from_str(usage_line.trim_start_matches("data: ")).unwrap();
        assert_eq!(usage["usage"]["completion_tokens"], 12);
        assert!(text.contains("\"finish_reason\":\"length\""));
        assert!(text.ends_with("data: [DONE]\n\n"));
        // Deterministic: the same request gives the same bytes.
        let (_, _, again) = post(&proxy.chat_url(Some("demo")), request(name)).await;
        assert_eq!(again, body);
    }
    assert_eq!(
        post(&proxy.chat_url(Some("demo")), request("stream-basic"))
            .await
            .1["x-cuca-point"],
        "demo:0"
    );

    // A non-streamed call is answered with one chat.completion object.
    let (status, _, body) = post(
        &proxy.chat_url(Some("think")),
        request("nonstream-reasoning"),
    )
    .await;
    assert_eq!(status, 200);
    let got: Value = serde_json::from_slice(&body).unwrap();
    let want: Value = serde_json::from_slice(&fixture("nonstream-reasoning.body")).unwrap();
    assert_eq!(got["object"], "chat.completion");
    assert_eq!(
        got["choices"][0]["message"]["reasoning_content"],
        want["choices"][0]["message"]["reasoning_content"]
    );
    assert_eq!(got["choices"][0]["message"]["content"], "");
    assert_eq!(got["choices"][0]["finish_reason"], "length");
    assert_eq!(got["model"], "cuca-tiny-random");
    assert_eq!(
        got["usage"],
        json!({"prompt_tokens": 34, "completion_tokens": 24, "total_tokens": 58})
    );

    // A tool call comes back as one tool_calls delta the client's decoder assembles.
    let (status, _, body) = post(
        &proxy.chat_url(Some("tools")),
        serde_json::to_vec(&tool_request()).unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(blocks_of_sse(&body), blocks_of_sse(TOOL_STREAM.as_bytes()));
    assert!(String::from_utf8(body)
        .unwrap()
        .contains("\"finish_reason\":\"tool_calls\""));

    // A stream without stream_options gets no usage chunk.
    let mut no_usage: Value = serde_json::from_slice(&request("stream-basic")).unwrap();
    no_usage.as_object_mut().unwrap().remove("stream_options");
    let (_, _, body) = post(
        &proxy.chat_url(Some("demo")),
        serde_json::to_vec(&no_usage).unwrap(),
    )
    .await;
    assert!(!String::from_utf8(body).unwrap().contains("\"usage\""));
}

/// "if the agent's request differs from the recording, answer 409 with an OpenAI-shaped
/// error that says where it diverged (message index, expected vs got, clipped)".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_prompt_is_a_409_that_says_where_it_diverged() {
    let dir = tempfile::tempdir().unwrap();
    record_demo(dir.path()).await;
    let proxy = replaying(dir.path()).await;

    let mut changed: Value = serde_json::from_slice(&request("stream-second-turn")).unwrap();
    changed["messages"][1]["content"] = json!("The vault is in Porto. Reply with: noted");
    let (status, headers, body) = post(
        &proxy.chat_url(Some("demo")),
        serde_json::to_vec(&changed).unwrap(),
    )
    .await;
    assert_eq!(status, 409);
    assert_eq!(headers["x-cuca-session"], "demo");
    let error: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert_eq!(error["error"]["code"], "cuca_replay_diverged");
    assert_eq!(error["error"]["param"], "messages[1]");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("messages[1]"), "{message}");
    assert!(
        message.contains("expected user \"The vault is in Lisbon"),
        "{message}"
    );
    assert!(
        message.contains("got user \"The vault is in Porto"),
        "{message}"
    );

    // A changed system prompt is a divergence at its own index.
    let mut changed: Value = serde_json::from_slice(&request("stream-basic")).unwrap();
    changed["messages"][0]["content"] = json!("You are verbose.");
    let (status, _, body) = post(
        &proxy.chat_url(Some("demo")),
        serde_json::to_vec(&changed).unwrap(),
    )
    .await;
    assert_eq!(status, 409);
    let error: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(error["error"]["param"], "messages[0]");

    // Long texts are clipped on both sides.
    let mut long: Value = serde_json::from_slice(&request("stream-basic")).unwrap();
    long["messages"][1]["content"] = json!("x".repeat(5000));
    let (status, _, body) = post(
        &proxy.chat_url(Some("demo")),
        serde_json::to_vec(&long).unwrap(),
    )
    .await;
    assert_eq!(status, 409);
    let error: Value = serde_json::from_slice(&body).unwrap();
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.len() < 1000, "{} bytes", message.len());
    assert!(message.contains("(5000 chars in all)"), "{message}");
}

/// "an unknown session or a turn past the end is 404".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_session_or_a_turn_past_the_end_is_a_404() {
    let dir = tempfile::tempdir().unwrap();
    record_demo(dir.path()).await;
    let proxy = replaying(dir.path()).await;
    let (status, _, body) = post(&proxy.chat_url(Some("nobody")), request("stream-basic")).await;
    assert_eq!(status, 404);
    let error: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(error["error"]["code"], "cuca_session_not_found");
    assert_eq!(error["error"]["type"], "not_found_error");

    let mut third: Value = serde_json::from_slice(&request("stream-second-turn")).unwrap();
    let messages = third["messages"].as_array_mut().unwrap();
    messages.push(json!({"role": "assistant", "content": "Lisbon"}));
    messages.push(json!({"role": "user", "content": "And the key?"}));
    let (status, _, body) = post(
        &proxy.chat_url(Some("demo")),
        serde_json::to_vec(&third).unwrap(),
    )
    .await;
    assert_eq!(status, 404);
    let error: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(error["error"]["code"], "cuca_turn_not_found");
    assert!(error["error"]["message"]
        .as_str()
        .unwrap()
        .contains("comes after it"));

    // Not JSON at all is the caller's error, said in OpenAI's shape.
    let (status, _, body) = post(&proxy.chat_url(Some("demo")), request("error-bad-json")).await;
    assert_eq!(status, 400);
    let error: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(error["error"]["type"], "invalid_request_error");

    // GET /v1/models never reaches a network either.
    let models: Value = client()
        .get(format!("{}/s/demo/v1/models", proxy.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], "cuca-replay");
}

/// "`auto` mode replays what is recorded and forwards and records what is not."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_replays_what_is_recorded_and_forwards_what_is_not() {
    let dir = tempfile::tempdir().unwrap();
    record_demo(dir.path()).await;
    let upstream = upstream().await;
    let proxy = start(
        ProxyConfig::new(Mode::Auto, Some(upstream.url.clone())).unwrap(),
        dir.path(),
    )
    .await;
    let before = proxy.records("demo").len();
    let (status, headers, body) =
        post(&proxy.chat_url(Some("demo")), request("stream-basic")).await;
    assert_eq!(status, 200);
    assert_eq!(headers["x-cuca-turn"], "1");
    assert_eq!(
        blocks_of_sse(&body),
        blocks_of_sse(&fixture("stream-basic.body"))
    );
    assert_eq!(upstream.calls(), 0);
    assert_eq!(proxy.records("demo").len(), before);

    // A third turn the recording does not have goes upstream and is recorded.
    let mut third: Value = serde_json::from_slice(&request("stream-second-turn")).unwrap();
    let messages = third["messages"].as_array_mut().unwrap();
    messages.push(json!({"role": "assistant", "content": "Lisbon"}));
    messages.push(json!({"role": "user", "content": "And the key?"}));
    let third = serde_json::to_vec(&third).unwrap();
    let (status, headers, body) = post(&proxy.chat_url(Some("demo")), third.clone()).await;
    assert_eq!(status, 200);
    assert!(headers.get("x-cuca-turn").is_none());
    assert_eq!(headers["x-cuca-point"], format!("demo:{before}"));
    assert_eq!(body, fixture("stream-basic.body"));
    assert_eq!(upstream.calls(), 1);
    assert!(proxy.records("demo").len() > before);

    // Asked again, the new turn is now replayed.
    let (status, headers, again) = post(&proxy.chat_url(Some("demo")), third).await;
    assert_eq!(status, 200);
    assert_eq!(headers["x-cuca-turn"], "3");
    assert_eq!(blocks_of_sse(&again), blocks_of_sse(&body));
    assert_eq!(upstream.calls(), 1);

    // A divergent request is still a 409: the recording says otherwise at that position.
    let mut changed: Value = serde_json::from_slice(&request("stream-basic")).unwrap();
    changed["messages"][1]["content"] = json!("Something else");
    let (status, _, _) = post(
        &proxy.chat_url(Some("demo")),
        serde_json::to_vec(&changed).unwrap(),
    )
    .await;
    assert_eq!(status, 409);
    assert_eq!(upstream.calls(), 1);
}

/// A call cut short and then retried leaves two turns at one position: the retry, which
/// finished, is the one the agent went on from, so it is the one served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_a_cut_call_and_its_retry_the_retry_is_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream().await;
    let proxy = recording(&upstream, dir.path()).await;
    let call =
        json!({"model": "tiny", "stream": true, "messages": [{"role": "user", "content": "HANG"}]});
    let mut cut = client()
        .post(proxy.chat_url(Some("retry")))
        .json(&call)
        .send()
        .await
        .unwrap();
    cut.chunk().await.unwrap();
    upstream.hang_started.notified().await;
    drop(cut);
    upstream.hang_dropped.notified().await;
    proxy.proxy.settled("retry").await;
    let retried = client()
        .post(proxy.chat_url(Some("retry")))
        .header("X-Test-Answer", "tools")
        .json(&call)
        .send()
        .await
        .unwrap();
    assert_eq!(retried.headers()["x-cuca-session"], "retry");
    assert_eq!(
        retried.bytes().await.unwrap().as_ref(),
        TOOL_STREAM.as_bytes()
    );
    drop(proxy);
    upstream.stop().await;

    let replay = replaying(dir.path()).await;
    let (status, headers, body) = post(
        &replay.chat_url(Some("retry")),
        serde_json::to_vec(&call).unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(headers["x-cuca-turn"], "2");
    assert_eq!(blocks_of_sse(&body), blocks_of_sse(TOOL_STREAM.as_bytes()));
}

/// Turns are placed by the message count their CallRequest holds, not by counting Message
/// records; and a side call that re-asks the first prompt after the conversation went on
/// continues no recorded conversation, so it is a conversation of its own: replayed
/// in the recorded order, each call gets its own answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_are_placed_by_the_message_count_each_call_was_sent() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream().await;
    let proxy = recording(&upstream, dir.path()).await;
    let mut sessions = Vec::new();
    for (name, answer) in [
        ("stream-basic", None),
        ("stream-second-turn", None),
        ("stream-basic", Some("tools")),
    ] {
        let mut builder = client()
            .post(proxy.chat_url(Some("side")))
            .body(request(name));
        if let Some(answer) = answer {
            builder = builder.header("X-Test-Answer", answer);
        }
        let response = builder.send().await.unwrap();
        assert_eq!(response.status(), 200);
        sessions.push(
            response.headers()["x-cuca-session"]
                .to_str()
                .unwrap()
                .to_owned(),
        );
        assert!(!response.bytes().await.unwrap().is_empty());
    }
    assert_eq!(sessions, ["side", "side", "side:conv:1"]);
    drop(proxy);
    upstream.stop().await;
    let replay = replaying(dir.path()).await;
    let (status, headers, body) =
        post(&replay.chat_url(Some("side")), request("stream-basic")).await;
    assert_eq!(status, 200);
    assert_eq!(headers["x-cuca-session"], "side");
    assert_eq!(headers["x-cuca-turn"], "1");
    assert_eq!(
        blocks_of_sse(&body),
        blocks_of_sse(&fixture("stream-basic.body"))
    );
    let (status, headers, body) = post(
        &replay.chat_url(Some("side")),
        request("stream-second-turn"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(headers["x-cuca-turn"], "2");
    assert_eq!(
        blocks_of_sse(&body),
        blocks_of_sse(&fixture("stream-second-turn.body"))
    );
    let (_, headers, body) = post(&replay.chat_url(Some("side")), request("stream-basic")).await;
    assert_eq!(headers["x-cuca-session"], "side:conv:1");
    assert_eq!(headers["x-cuca-turn"], "1");
    assert_eq!(blocks_of_sse(&body), blocks_of_sse(TOOL_STREAM.as_bytes()));
}

/// A replayed answer is streamed, not loaded whole. The stream is built
/// one event at a time, and a block longer than an event's text goes out in pieces: the
/// caller's decoder joins them back into exactly the recorded text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_recorded_block_is_replayed_in_pieces_that_join_to_it_exactly() {
    use cuca_events::{Message, SessionBackend, SessionEvent, SessionRecord};
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("sessions");
    let backend = cuca_store_file::FileBackend::new(&sessions).unwrap();
    // 200 KiB and a bit, with multi-byte characters where the pieces are cut.
    let long: String = "añ€".repeat(200 * 1024 / 6 + 7);
    let events = [
        SessionEvent::Message(Message::user("LONG: say a lot")),
        SessionEvent::Output { text: long.clone() },
        SessionEvent::Latency { duration_ms: 5 },
        SessionEvent::TokenUsage {
            prompt_tokens: 3,
            completion_tokens: 9,
        },
    ];
    for (sequence, event) in events.into_iter().enumerate() {
        backend
            .append(SessionRecord {
                session_id: "long".into(),
                sequence: sequence as u64,
                timestamp_ms: 1,
                event,
            })
            .unwrap();
    }
    drop(backend);
    let proxy = replaying(dir.path()).await;
    let body = json!({
        "model": "tiny", "stream": true,
        "messages": [{"role": "user", "content": "LONG: say a lot"}],
    });
    let (status, _, answer) = post(
        &proxy.chat_url(Some("long")),
        serde_json::to_vec(&body).unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    let text = String::from_utf8(answer.clone()).unwrap();
    let events: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with("data: {"))
        .collect();
    let pieces = events
        .iter()
        .filter(|line| line.contains("\"content\":\""))
        .count();
    // 200 KiB in pieces of 64 KiB at most: four of them, and no event much longer than one.
    assert_eq!(pieces, 4, "{pieces} content events");
    assert!(
        events.iter().all(|line| line.len() < 64 * 1024 + 1024),
        "an event is longer than a piece"
    );
    assert_eq!(joined(&blocks_of_sse(&answer), false), long);
}

/// "A header (`X-Cuca-Conversation`) lets a caller that knows its
/// conversations name them": two calls with the same request, named apart, are recorded in
/// two conversations and each replays with its own answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_conversation_is_recorded_and_replayed_as_named() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream().await;
    let proxy = recording(&upstream, dir.path()).await;
    for (name, answer) in [("a", None), ("b", Some("tools"))] {
        let mut builder = client()
            .post(proxy.chat_url(Some("named")))
            .header("X-Cuca-Conversation", name)
            .body(request("stream-basic"));
        if let Some(answer) = answer {
            builder = builder.header("X-Test-Answer", answer);
        }
        let response = builder.send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["x-cuca-session"],
            format!("named:conv:{name}").as_str()
        );
        response.bytes().await.unwrap();
    }
    drop(proxy);
    upstream.stop().await;
    let replay = replaying(dir.path()).await;
    let replayed = client()
        .post(replay.chat_url(Some("named")))
        .header("X-Cuca-Conversation", "b")
        .body(request("stream-basic"))
        .send()
        .await
        .unwrap();
    assert_eq!(replayed.status(), 200);
    assert_eq!(replayed.headers()["x-cuca-session"], "named:conv:b");
    let body = replayed.bytes().await.unwrap();
    assert_eq!(blocks_of_sse(&body), blocks_of_sse(TOOL_STREAM.as_bytes()));
    let refused = client()
        .post(replay.chat_url(Some("named")))
        .header("X-Cuca-Conversation", "x:y")
        .body(request("stream-basic"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
}

/// "Tool results are recorded" and "Replay compares the whole
/// conversation … tool calls and tool results … the first difference is the 409, naming the
/// position and showing both sides clipped"; a pattern in `ignore` blanks what differs by
/// nature, and the same replay then matches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_result_is_a_409_naming_it_unless_ignored() {
    use cuca_events::SessionEvent;
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream().await;
    let proxy = recording(&upstream, dir.path()).await;
    let first: serde_json::Value = serde_json::from_slice(&request("stream-basic")).unwrap();
    let with_result = |output: &str| {
        let mut next = first.clone();
        let messages = next["messages"].as_array_mut().unwrap();
        messages.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_7", "type": "function", "function": {"name": "lookup", "arguments": "{\"city\":\"Lisbon\"}"}}
        ]}));
        messages
            .push(serde_json::json!({"role": "tool", "tool_call_id": "call_7", "content": output}));
        serde_json::to_vec(&next).unwrap()
    };
    let calls = [
        (request("stream-basic"), Some("tools")),
        (with_result("ALPHA"), None),
    ];
    for (body, answer) in &calls {
        let mut builder = client()
            .post(proxy.chat_url(Some("tool")))
            .body(body.clone());
        if let Some(answer) = answer {
            builder = builder.header("X-Test-Answer", *answer);
        }
        let response = builder.send().await.unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
    }
    proxy.proxy.settled("tool").await;
    let results: Vec<SessionEvent> = proxy
        .records("tool")
        .into_iter()
        .map(|r| r.event)
        .filter(|e| matches!(e, SessionEvent::ToolResult { .. }))
        .collect();
    assert_eq!(
        results,
        vec![SessionEvent::ToolResult {
            tool_call_id: "call_7".into(),
            content: "ALPHA".into(),
            is_error: false,
            stdout: None,
            stderr: None,
            exit_code: None,
        }]
    );
    drop(proxy);
    upstream.stop().await;

    let replay = replaying(dir.path()).await;
    let url = replay.chat_url(Some("tool"));
    assert_eq!(post(&url, request("stream-basic")).await.0, 200);
    assert_eq!(post(&url, with_result("ALPHA")).await.0, 200);
    let (status, _, body) = post(&url, with_result("BETA")).await;
    assert_eq!(status, 409, "{}", String::from_utf8_lossy(&body));
    let error: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(error["error"]["param"], "messages[3]");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("ALPHA") && message.contains("BETA"),
        "{message}"
    );
    drop(replay);

    let mut config = cuca_proxy::ProxyConfig::new(cuca_proxy::Mode::Replay, None).unwrap();
    config.ignore.push("ALPHA|BETA".into());
    let lenient = start(config, dir.path()).await;
    let url = lenient.chat_url(Some("tool"));
    assert_eq!(post(&url, request("stream-basic")).await.0, 200);
    let (status, _, body) = post(&url, with_result("BETA")).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
}

/// "The tools offered" and "Sampling parameters are compared too, unless
/// `--ignore-params`."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_tools_or_sampling_parameters_are_a_409_unless_parameters_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream().await;
    let proxy = recording(&upstream, dir.path()).await;
    let mut sent: serde_json::Value = serde_json::from_slice(&request("stream-basic")).unwrap();
    sent["tools"] = serde_json::json!([{"type": "function", "function": {"name": "lookup", "description": "Finds a city.", "parameters": {"type": "object"}}}]);
    let response = client()
        .post(proxy.chat_url(Some("knobs")))
        .json(&sent)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.bytes().await.unwrap();
    drop(proxy);
    upstream.stop().await;

    let replay = replaying(dir.path()).await;
    let url = replay.chat_url(Some("knobs"));
    let mut hotter = sent.clone();
    hotter["temperature"] = serde_json::json!(0.9);
    let (status, _, body) = post(&url, serde_json::to_vec(&hotter).unwrap()).await;
    assert_eq!(status, 409);
    let error: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(error["error"]["param"], "temperature");
    let mut other_tools = sent.clone();
    other_tools["tools"][0]["function"]["name"] = serde_json::json!("search");
    let (status, _, body) = post(&url, serde_json::to_vec(&other_tools).unwrap()).await;
    assert_eq!(status, 409);
    let error: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(error["error"]["param"], "tools");
    assert!(error["error"]["message"]
        .as_str()
        .unwrap()
        .contains("search"));
    assert_eq!(post(&url, serde_json::to_vec(&sent).unwrap()).await.0, 200);
    drop(replay);

    let mut config = cuca_proxy::ProxyConfig::new(cuca_proxy::Mode::Replay, None).unwrap();
    config.compare_parameters = false;
    let lenient = start(config, dir.path()).await;
    let (status, _, _) = post(
        &lenient.chat_url(Some("knobs")),
        serde_json::to_vec(&hotter).unwrap(),
    )
    .await;
    assert_eq!(status, 200);
}

/// "Fork on divergence … Replay what matches; at the first call that
/// diverges, fork the recorded conversation at the last matching point …, forward that call
/// live, and record it and everything after it into the fork. The response headers name the
/// fork."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_mode_replays_what_matches_and_records_the_changed_run_in_a_fork() {
    use cuca_events::SessionEvent;
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream().await;
    let first: serde_json::Value = serde_json::from_slice(&request("stream-basic")).unwrap();
    let with_result = |output: &str, follow_up: bool| {
        let mut next = first.clone();
        let messages = next["messages"].as_array_mut().unwrap();
        messages.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_7", "type": "function", "function": {"name": "lookup", "arguments": "{\"city\":\"Lisbon\"}"}}
        ]}));
        messages
            .push(serde_json::json!({"role": "tool", "tool_call_id": "call_7", "content": output}));
        if follow_up {
            messages.push(serde_json::json!({"role": "assistant", "content": "It is BETA."}));
            messages
                .push(serde_json::json!({"role": "user", "content": "Thanks. Reply with: noted"}));
        }
        serde_json::to_vec(&next).unwrap()
    };
    {
        let proxy = recording(&upstream, dir.path()).await;
        for (body, answer) in [
            (request("stream-basic"), Some("tools")),
            (with_result("ALPHA", false), None),
        ] {
            let mut builder = client().post(proxy.chat_url(Some("run"))).body(body);
            if let Some(answer) = answer {
                builder = builder.header("X-Test-Answer", answer);
            }
            let response = builder.send().await.unwrap();
            assert_eq!(response.status(), 200);
            response.bytes().await.unwrap();
        }
        proxy.proxy.settled("run").await;
    }
    let recorded_calls = upstream.calls();
    let config =
        cuca_proxy::ProxyConfig::new(cuca_proxy::Mode::Fork, Some(upstream.url.clone())).unwrap();
    let proxy = start(config, dir.path()).await;
    let url = proxy.chat_url(Some("run"));
    // The unchanged first call is served from the recording: nothing reaches the upstream.
    let (status, headers, _) = post(&url, request("stream-basic")).await;
    assert_eq!(status, 200);
    assert_eq!(headers["x-cuca-session"], "run");
    assert_eq!(upstream.calls(), recorded_calls);
    // The tool now returns BETA: the call goes live, into a fork of the recording.
    let (status, headers, body) = post(&url, with_result("BETA", false)).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(upstream.calls(), recorded_calls + 1);
    let fork = headers["x-cuca-session"].to_str().unwrap().to_owned();
    assert_eq!(cuca_events::fork_parent(&fork).map(|(p, _)| p), Some("run"));
    let point = headers[cuca_proxy::FORKED_FROM_HEADER].to_str().unwrap();
    assert!(point.starts_with("run:"), "{point}");
    // And the run goes on in the fork.
    let (status, headers, _) = post(&url, with_result("BETA", true)).await;
    assert_eq!(status, 200);
    assert_eq!(headers["x-cuca-session"].to_str().unwrap(), fork);
    assert_eq!(upstream.calls(), recorded_calls + 2);
    proxy.proxy.settled(&fork).await;
    // "the call log marks the divergence": the diverging call's rows say where it left the
    // recording and where it went; the call that continued the fork's carry no such note.
    let notes: Vec<String> = proxy
        .rows()
        .into_iter()
        .filter(|row| row.node == fork)
        .map(|row| row.note)
        .collect();
    assert_eq!(notes.len(), 4, "two calls, a start and an end row each");
    for note in &notes[..2] {
        assert!(
            note.contains("diverged from the recording of run after")
                && note.contains(point)
                && note.contains(&fork),
            "{note}"
        );
    }
    assert_eq!(&notes[2..], ["", ""]);
    let outputs: Vec<String> = proxy
        .records(&fork)
        .into_iter()
        .filter_map(|r| match r.event {
            SessionEvent::ToolResult { content, .. } => Some(content),
            _ => None,
        })
        .collect();
    assert_eq!(outputs, ["BETA"]);
    // The original is untouched but for the fork's audit record.
    let original: Vec<String> = proxy
        .records("run")
        .into_iter()
        .filter_map(|r| match r.event {
            SessionEvent::ToolResult { content, .. } => Some(content),
            _ => None,
        })
        .collect();
    assert_eq!(original, ["ALPHA"]);
}
