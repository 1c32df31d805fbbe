//! Record mode, driven over HTTP with reqwest against the stand-in upstream that serves the
//! committed llama-server transcripts: transparent in record mode, and recorded as cuca
//! records.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod support;

use cuca_events::SessionEvent;
use support::*;

/// "every byte the upstream streams reaches the caller unchanged"; "every field the caller
/// sends reaches the upstream unchanged (tools, response_format, temperature, seed, logprobs,
/// unknown fields)"; "The response says which session and point it was recorded at".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_call_passes_byte_for_byte_both_ways_and_says_where_it_was_recorded() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording(&upstream, dir.path()).await;
    // The transcript's own request, plus fields cuca has no name for, in the caller's order.
    let mut sent = request("stream-basic");
    while sent.last() != Some(&b'}') {
        sent.pop();
    }
    sent.pop();
    sent.extend_from_slice(
        br#","seed":7,"logprobs":true,"response_format":{"type":"text"},"x_unknown":[1,{"a":null}]}"#,
    );
    let response = client()
        .post(proxy.chat_url(Some("s1")))
        .header("Content-Type", "application/json")
        .body(sent.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert_eq!(response.headers()["x-cuca-session"], "s1");
    assert_eq!(response.headers()["x-cuca-point"], "s1:0");
    let got = response.bytes().await.unwrap();
    assert_eq!(got.as_ref(), fixture("stream-basic.body").as_slice());
    assert_eq!(upstream.last().body.as_ref(), sent.as_slice());

    // What is recorded is what the caller got.
    let kinds = proxy.kinds("s1");
    let n_outputs = kinds.iter().filter(|k| **k == "Output").count();
    assert!(n_outputs > 0);
    let mut expected = vec!["SystemPrompt", "Message", "CallRequest", "RequestDigest"];
    expected.extend(std::iter::repeat_n("Output", n_outputs));
    expected.extend(["CallFinish", "TokenDetail", "Latency", "TokenUsage"]);
    assert_eq!(kinds, expected);
    let records = proxy.records("s1");
    let text: String = records
        .iter()
        .filter_map(|r| match &r.event {
            SessionEvent::Output { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, joined(&blocks_of_sse(&got), false));
    let SessionEvent::CallRequest {
        model, parameters, ..
    } = &records[2].event
    else {
        panic!("{:?}", records[2].event)
    };
    assert_eq!(model, "tiny");
    // "Record, per call, the model, the sampling parameters": every field the caller sent
    // beyond the messages, model, tools and transport, as sent (the transcript's integer
    // `temperature` stays 0, not the unified request's f32).
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(parameters).unwrap(),
        serde_json::json!({
            "max_tokens": 12,
            "temperature": 0,
            "seed": 7,
            "logprobs": true,
            "response_format": {"type": "text"},
            "x_unknown": [1, {"a": null}],
        })
    );
    assert!(records.iter().any(|r| r.event
        == SessionEvent::CallFinish {
            finish_reason: Some("length".into()),
            model: "cuca-tiny-random".into(),
        }));
    assert_eq!(
        records.last().unwrap().event,
        SessionEvent::TokenUsage {
            prompt_tokens: 40,
            completion_tokens: 12
        }
    );
}

/// "`stream: false`", "reasoning content", "usage": a non-streamed answer is forwarded whole
/// and recorded block by block; reasoning becomes Reasoning records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_streamed_and_reasoning_answers_are_forwarded_unchanged_and_recorded() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording(&upstream, dir.path()).await;
    for (name, session) in [
        ("nonstream-basic", "plain"),
        ("nonstream-reasoning", "think"),
        ("stream-reasoning", "think-stream"),
        ("stream-no-usage", "no-usage"),
    ] {
        let response = client()
            .post(proxy.chat_url(Some(session)))
            .body(request(name))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{name}");
        let got = response.bytes().await.unwrap();
        assert_eq!(
            got.as_ref(),
            fixture(&format!("{name}.body")).as_slice(),
            "{name}"
        );
    }
    let body: serde_json::Value = serde_json::from_slice(&fixture("nonstream-basic.body")).unwrap();
    let text = body["choices"][0]["message"]["content"].as_str().unwrap();
    let records = proxy.records("plain");
    assert!(records
        .iter()
        .any(|r| r.event == SessionEvent::Output { text: text.into() }));

    let body: serde_json::Value =
        serde_json::from_slice(&fixture("nonstream-reasoning.body")).unwrap();
    let reasoning = body["choices"][0]["message"]["reasoning_content"]
        .as_str()
        .unwrap();
    let kinds = proxy.kinds("think");
    assert_eq!(
        kinds,
        [
            "Message",
            "CallRequest",
            "RequestDigest",
            "Reasoning",
            "CallFinish",
            "TokenDetail",
            "Latency",
            "TokenUsage"
        ]
    );
    assert_eq!(
        proxy.records("think")[3].event,
        SessionEvent::Reasoning {
            text: reasoning.into()
        }
    );
    assert_eq!(
        proxy.records("think").last().unwrap().event,
        SessionEvent::TokenUsage {
            prompt_tokens: 34,
            completion_tokens: 24
        }
    );

    let streamed = blocks_of_sse(&fixture("stream-reasoning.body"));
    let recorded: String = proxy
        .records("think-stream")
        .iter()
        .filter_map(|r| match &r.event {
            SessionEvent::Reasoning { text } => Some(text.clone()),
            SessionEvent::Output { .. } => panic!("the transcript has no text"),
            _ => None,
        })
        .collect();
    assert_eq!(recorded, joined(&streamed, true));

    // No usage chunk: llama.cpp's timings give the counts, as in the client.
    let SessionEvent::TokenUsage {
        completion_tokens, ..
    } = proxy.records("no-usage").last().unwrap().event
    else {
        panic!()
    };
    assert_eq!(completion_tokens, 8);

    // The call log: two rows a call, the end row with status, finish and tokens.
    let rows = proxy.rows();
    assert_eq!(rows.len(), 8);
    let think_end = rows
        .iter()
        .find(|r| r.node == "think-stream" && r.phase.is_empty())
        .unwrap();
    assert_eq!(think_end.status, 200);
    assert_eq!(think_end.finish, "length");
    assert_eq!(think_end.served, "cuca-tiny-random");
    assert!(think_end.stream);
    assert_eq!(think_end.tag, "proxy");
    assert_eq!(think_end.run, proxy.proxy.run_id());
    // The thinking-ate-the-answer signature the transcript was captured to show.
    assert!(think_end.empty_at_ceiling);
}

/// "upstream errors keep their status and body": the 400 context overflow and the bad-JSON
/// 400 reach the caller byte for byte, the call log has the status and the server's
/// sentence, and nothing is recorded in the session (a refused call never became a turn).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_errors_keep_status_and_body_and_write_call_log_rows_only() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording(&upstream, dir.path()).await;
    for name in ["error-context-overflow", "error-bad-json"] {
        let response = client()
            .post(proxy.chat_url(Some("errors")))
            .body(request(name))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{name}");
        assert_eq!(
            response.headers()["content-type"],
            "application/json; charset=utf-8"
        );
        let got = response.bytes().await.unwrap();
        assert_eq!(got.as_ref(), fixture(&format!("{name}.body")).as_slice());
        // The bad body went upstream exactly as sent, though it is not JSON.
        assert_eq!(upstream.last().body.as_ref(), request(name).as_slice());
    }
    assert!(proxy.records("errors").is_empty());
    let ends: Vec<_> = proxy
        .rows()
        .into_iter()
        .filter(|r| r.phase.is_empty())
        .collect();
    assert_eq!(ends.len(), 2);
    assert_eq!(ends[0].status, 400);
    assert!(
        ends[0].error.contains("exceeds the available context size"),
        "{}",
        ends[0].error
    );
    assert_eq!(ends[0].messages, 1);
    assert_eq!(ends[1].status, 400);
    assert!(ends[1].error.contains("parse error"), "{}", ends[1].error);
}

/// "the caller's `Authorization` is forwarded and never written to disk or logs".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_is_forwarded_and_never_written_to_disk() {
    let secret = "sk-cuca-secret-4c1d";
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording(&upstream, dir.path()).await;
    for name in ["stream-basic", "error-context-overflow"] {
        let response = client()
            .post(proxy.chat_url(Some("auth")))
            .bearer_auth(secret)
            .header("OpenAI-Organization", "org-1")
            .body(request(name))
            .send()
            .await
            .unwrap();
        response.bytes().await.unwrap();
        let seen = upstream.last();
        assert_eq!(seen.headers["authorization"], format!("Bearer {secret}"));
        assert_eq!(seen.headers["openai-organization"], "org-1");
    }
    let models = client()
        .get(format!("{}/v1/models", proxy.url))
        .bearer_auth(secret)
        .send()
        .await
        .unwrap();
    assert_eq!(models.status(), 200);
    assert_eq!(models.text().await.unwrap(), MODELS);
    assert_eq!(
        upstream.last().headers["authorization"],
        format!("Bearer {secret}")
    );
    let mut n_files = 0;
    for entry in walk(dir.path()) {
        n_files += 1;
        let bytes = std::fs::read(&entry).unwrap();
        let found = bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
        assert!(!found, "{} holds the key", entry.display());
    }
    assert!(
        n_files >= 2,
        "the session file and the call log were written"
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// "a caller that disconnects cancels the upstream request (the call log says `cancelled`)".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_hangs_up_cancels_the_upstream_call() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording(&upstream, dir.path()).await;
    let body = serde_json::json!({
        "model": "tiny", "stream": true,
        "messages": [{"role": "user", "content": "HANG please"}],
    });
    let mut response = client()
        .post(proxy.chat_url(Some("hang")))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let first = response.chunk().await.unwrap().unwrap();
    assert!(first.starts_with(b"data: "));
    upstream.hang_started.notified().await;
    drop(response);
    // The upstream's body is dropped only when the proxy closes its connection.
    tokio::time::timeout(
        std::time::Duration::from_secs(30),
        upstream.hang_dropped.notified(),
    )
    .await
    .expect("the proxy did not close the upstream connection");
    proxy.proxy.settled("hang").await;
    let ends: Vec<_> = proxy
        .rows()
        .into_iter()
        .filter(|r| r.phase.is_empty())
        .collect();
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0].ended, "cancelled");
    assert_eq!(ends[0].status, 200);
    // The turn is marked incomplete ("a real cancel keeps everything the decoder
    // had" and says it was cut) and closed without a finish reason, so the next call starts
    // its own.
    let records = proxy.records("hang");
    let kinds: Vec<_> = records.iter().map(|r| r.event.kind()).collect();
    assert_eq!(
        kinds,
        [
            "Message",
            "CallRequest",
            "RequestDigest",
            "CallIncomplete",
            "CallFinish",
            "Latency",
            "TokenUsage"
        ]
    );
    let SessionEvent::CallIncomplete { reason } = &records[3].event else {
        unreachable!()
    };
    assert!(
        reason.starts_with("cut short: the caller hung up, after 1 event(s)"),
        "{reason}"
    );
    // The model is the one the stream said answered, as for a whole answer.
    assert_eq!(
        records[4].event,
        SessionEvent::CallFinish {
            finish_reason: None,
            model: "cuca-tiny-random".into()
        }
    );
}

/// "Choosing the session: a base-URL prefix `/s/{session}/v1/...`, or an `X-Cuca-Session`
/// header, else a default from the command line."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_is_the_path_prefix_then_the_header_then_the_default() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording(&upstream, dir.path()).await;
    let call = |url: String, header: Option<&'static str>| {
        let mut builder = client().post(url).body(request("nonstream-basic"));
        if let Some(header) = header {
            builder = builder.header("X-Cuca-Session", header);
        }
        async move {
            let response = builder.send().await.unwrap();
            let session = response.headers()["x-cuca-session"]
                .to_str()
                .unwrap()
                .to_owned();
            response.bytes().await.unwrap();
            session
        }
    };
    assert_eq!(
        call(proxy.chat_url(Some("from-path")), Some("from-header")).await,
        "from-path"
    );
    assert_eq!(
        call(proxy.chat_url(None), Some("from-header")).await,
        "from-header"
    );
    assert_eq!(call(proxy.chat_url(None), None).await, "default");
    for session in ["from-path", "from-header", "default"] {
        assert_eq!(proxy.kinds(session)[0], "SystemPrompt", "{session}");
    }
    // The header is not forwarded: it is cuca's, not the upstream's.
    assert!(upstream.last().headers.get("x-cuca-session").is_none());

    // A session id a file cannot be named by is refused before anything is forwarded.
    let calls = upstream.calls();
    let response = client()
        .post(proxy.chat_url(None))
        .header("X-Cuca-Session", "../etc")
        .body(request("nonstream-basic"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let error: serde_json::Value = response.json().await.unwrap();
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert_eq!(error["error"]["code"], "cuca_invalid_session");
    assert_eq!(upstream.calls(), calls);
}

/// "bounded request body size"; errors "in OpenAI's error JSON shape with the right HTTP
/// status"; unknown routes too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_body_and_an_unknown_route_get_openai_shaped_errors() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config =
        cuca_proxy::ProxyConfig::new(cuca_proxy::Mode::Record, Some(upstream.url.clone())).unwrap();
    config.max_body_bytes = 64;
    let proxy = start(config, dir.path()).await;
    let response = client()
        .post(proxy.chat_url(Some("big")))
        .body(request("stream-basic"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    let error: serde_json::Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "cuca_request_too_large");
    assert!(error["error"]["message"]
        .as_str()
        .unwrap()
        .contains("64 bytes"));
    assert_eq!(upstream.calls(), 0);

    let response = client()
        .get(format!("{}/v2/other", proxy.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    let error: serde_json::Value = response.json().await.unwrap();
    assert_eq!(error["error"]["type"], "not_found_error");
}

/// An upstream that is not there is a 502 in OpenAI's shape, and the call log says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_upstream_is_a_502() {
    let upstream = upstream().await;
    let url = upstream.url.clone();
    upstream.stop().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = start(
        cuca_proxy::ProxyConfig::new(cuca_proxy::Mode::Record, Some(url)).unwrap(),
        dir.path(),
    )
    .await;
    let response = client()
        .post(proxy.chat_url(Some("gone")))
        .body(request("stream-basic"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 502);
    let error: serde_json::Value = response.json().await.unwrap();
    assert_eq!(error["error"]["type"], "upstream_error");
    assert!(proxy.records("gone").is_empty());
    let ends: Vec<_> = proxy
        .rows()
        .into_iter()
        .filter(|r| r.phase.is_empty())
        .collect();
    assert_eq!(ends.len(), 1);
    assert!(
        ends[0].error.contains("did not answer"),
        "{}",
        ends[0].error
    );
}

/// "a slow or stuck caller never blocks other callers; many concurrent sessions": one caller
/// stops reading mid-stream, and 16 calls on 16 other sessions all finish meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_caller_blocks_nobody_and_sixteen_sessions_record_at_once() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording(&upstream, dir.path()).await;
    let stuck = client()
        .post(proxy.chat_url(Some("stuck")))
        .json(&serde_json::json!({
            "model": "tiny", "stream": true,
            "messages": [{"role": "user", "content": "HANG"}],
        }))
        .send()
        .await
        .unwrap();
    upstream.hang_started.notified().await;
    let mut calls = Vec::new();
    for i in 0..16 {
        let url = proxy.chat_url(Some(&format!("c{i}")));
        calls.push(tokio::spawn(async move {
            let response = client()
                .post(url)
                .body(request("stream-basic"))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
            response.bytes().await.unwrap()
        }));
    }
    for call in calls {
        assert_eq!(
            call.await.unwrap().as_ref(),
            fixture("stream-basic.body").as_slice()
        );
    }
    for i in 0..16 {
        let kinds = proxy.kinds(&format!("c{i}"));
        assert_eq!(kinds.last(), Some(&"TokenUsage"));
        assert_eq!(kinds.iter().filter(|k| **k == "Message").count(), 1);
    }
    drop(stuck);
}

/// Tool-call streams (documented OpenAI shape; the tiny model cannot emit one) are recorded
/// as whole ToolCall records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_stream_is_recorded_as_one_tool_call() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = recording(&upstream, dir.path()).await;
    let body = serde_json::json!({
        "model": "tiny", "stream": true,
        "messages": [{"role": "user", "content": "TOOLS: where is the vault?"}],
        "tools": [{"type": "function", "function": {"name": "lookup", "description": "Finds a city.", "parameters": {"type": "object"}}}],
    });
    let response = client()
        .post(proxy.chat_url(Some("tools")))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.bytes().await.unwrap().as_ref(),
        TOOL_STREAM.as_bytes()
    );
    let records = proxy.records("tools");
    assert!(records.iter().any(|r| r.event
        == SessionEvent::ToolCall {
            id: "call_7".into(),
            name: "lookup".into(),
            arguments: "{\"city\":\"Lisbon\"}".into(),
        }));
    let SessionEvent::CallRequest { tools, .. } = &records[1].event else {
        panic!("{:?}", records[1].event)
    };
    let tools: serde_json::Value = serde_json::from_str(tools).unwrap();
    assert_eq!(tools[0]["name"], "lookup");
}

/// "many concurrent sessions (one writer per session)": a full table of session writers
/// never drops one still in use, so a second writer for a busy session cannot appear; a new
/// session waits for room with a 503 instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_writer_table_refuses_a_new_session_rather_than_drop_a_busy_writer() {
    let upstream = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config =
        cuca_proxy::ProxyConfig::new(cuca_proxy::Mode::Record, Some(upstream.url.clone())).unwrap();
    config.max_sessions = 1;
    let proxy = start(config, dir.path()).await;
    let mut busy = client()
        .post(proxy.chat_url(Some("busy")))
        .json(&serde_json::json!({
            "model": "tiny", "stream": true,
            "messages": [{"role": "user", "content": "HANG"}],
        }))
        .send()
        .await
        .unwrap();
    busy.chunk().await.unwrap();
    upstream.hang_started.notified().await;
    let response = client()
        .post(proxy.chat_url(Some("other")))
        .body(request("stream-basic"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    let error: serde_json::Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "cuca_too_many_sessions");
    // Once the busy call ends, its writer is idle and gives way.
    drop(busy);
    upstream.hang_dropped.notified().await;
    proxy.proxy.settled("busy").await;
    let response = client()
        .post(proxy.chat_url(Some("other")))
        .body(request("stream-basic"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.bytes().await.unwrap().as_ref(),
        fixture("stream-basic.body").as_slice()
    );

    // A chat completion is POSTed: another method is a 405 in OpenAI's shape.
    let response = client().get(proxy.chat_url(None)).send().await.unwrap();
    assert_eq!(response.status(), 405);
    let error: serde_json::Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "cuca_method_not_allowed");
}
