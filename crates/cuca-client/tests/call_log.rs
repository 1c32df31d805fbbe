//! The call log the client writes (seed 003): one start row and one end row per
//! attempt, against a loopback server serving real llama-server transcripts.
//!
//! Every test hands the client its own `CallLog` in a temporary directory, so nothing here
//! can land in the state root of the person running the tests.

// Helpers outside #[test] functions unwrap too: a broken fixture should stop the test.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::PathBuf;
use std::time::Duration;

use cuca_calllog::{read_rows, CallLog, Record, MAX_ERROR_CHARS};
use cuca_client::{CucaClient, CucaClientBuilder, RetryPolicy};
use cuca_events::{Message, PluginError, ToolDefinition, UnifiedRequest};
use futures::StreamExt;
use support::{Reply, TestServer};

const SYSTEM_TEXT: &str = "You are terse.";
const USER_TEXT: &str = "The vault is in Lisbon. Reply with: noted";

/// A call log in a fresh temporary directory; the directory lives as long as the value.
struct TempLog {
    _dir: tempfile::TempDir,
    path: PathBuf,
    log: CallLog,
}

impl TempLog {
    fn new(bodies: bool) -> TempLog {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs").join("calls.jsonl");
        let log = CallLog::builder()
            .path(Some(path.clone()))
            .bodies(bodies)
            .build();
        TempLog {
            _dir: dir,
            path,
            log,
        }
    }

    fn rows(&self) -> Vec<Record> {
        let report = read_rows(&self.path).unwrap();
        assert!(report.torn_tail.is_none() && report.skipped.is_empty());
        report.rows
    }

    /// The raw lines, to look for what the parsed rows cannot show: absent fields, and
    /// prompt text anywhere in a line.
    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn client(&self, base_url: &str, retry: RetryPolicy) -> CucaClient {
        self.builder(base_url)
            .with_model("tiny")
            .with_retry_policy(retry)
            .build()
            .unwrap()
    }

    /// A client builder writing to this log, with no retries.
    fn builder(&self, base_url: &str) -> CucaClientBuilder {
        CucaClient::builder()
            .with_base_url(base_url)
            .with_retry_policy(RetryPolicy::none())
            .with_call_log(self.log.clone())
    }
}

/// The seed's first turn, with every knob the row records set.
fn request(max_tokens: u32) -> UnifiedRequest {
    let mut request =
        UnifiedRequest::new(vec![Message::system(SYSTEM_TEXT), Message::user(USER_TEXT)]);
    request.max_tokens = Some(max_tokens);
    request.reasoning_effort = Some("low".into());
    request.tools = vec![ToolDefinition {
        name: "lookup".into(),
        description: "Looks a word up.".into(),
        parameters: serde_json::json!({"type": "object"}),
    }];
    request.metadata.run = Some("run-7".into());
    request.metadata.tag = Some("turn".into());
    request.metadata.node = Some("node-3".into());
    request
}

/// Retries with no back-off; a `Retry-After` is honoured up to 1 s.
fn fast_retries(max_retries: u32) -> RetryPolicy {
    RetryPolicy::new(
        max_retries,
        Duration::ZERO,
        Duration::ZERO,
        Duration::from_secs(1),
    )
    .unwrap()
}

fn first_events(n_lines: usize) -> Vec<u8> {
    support::STREAM_BASIC
        .split_inclusive(|&b| b == b'\n')
        .take(n_lines)
        .flatten()
        .copied()
        .collect()
}

/// Seed 003: "WHAT IS NEVER IN IT: the prompts." No line may hold either message's text.
fn assert_no_prompt_text(lines: &[String]) {
    for line in lines {
        assert!(!line.contains(USER_TEXT), "prompt text in {line}");
        assert!(!line.contains("Lisbon"), "prompt text in {line}");
        assert!(!line.contains(SYSTEM_TEXT), "prompt text in {line}");
    }
}

#[tokio::test]
async fn a_streamed_call_leaves_one_start_row_and_one_end_row_with_its_shape_and_outcome() {
    let server = TestServer::start(vec![Reply::sse(support::STREAM_BASIC)]).await;
    let log = TempLog::new(false);
    let client = log.client(&server.base_url, RetryPolicy::none());
    let response = client.generate(request(12)).await.unwrap();
    assert!(response
        .text()
        .starts_with("phas temporal succeed Captain LEFT"));

    let rows = log.rows();
    assert_eq!(rows.len(), 2, "{rows:#?}");
    let (start, end) = (&rows[0], &rows[1]);
    // "a start row and an end row per attempt paired by an 8-hex id, the run id on both rows"
    assert_eq!(start.phase, "start");
    assert_eq!(end.phase, "");
    assert_eq!(start.id.len(), 8);
    assert!(start.id.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(end.id, start.id);
    for row in &rows {
        assert_eq!(row.run, "run-7");
        assert_eq!(row.tag, "turn");
        assert_eq!(row.node, "node-3");
        assert_eq!(row.model, "tiny");
        assert_eq!(row.effort, "low");
        assert_eq!(row.max_tokens, 12);
        assert_eq!(row.messages, 2);
        assert_eq!(row.tools, 1);
        assert!(row.stream);
        assert_eq!(row.attempt, 1);
    }
    // The test server closes every connection: the one this attempt rode was opened for it
    // (tests/conn_reuse.rs has the keep-alive side).
    assert_eq!(start.conn_reused, None, "nothing is known before sending");
    assert_eq!(end.conn_reused, Some(false));
    assert!(end.connect_ms >= 1, "{end:?}");
    assert_eq!(start.status, 0);
    assert_eq!(end.status, 200);
    assert_eq!(end.served, "cuca-tiny-random");
    assert_eq!(end.finish, "length");
    assert!(end.ms >= 1, "{end:?}");
    assert!(end.ttft_ms >= 1 && end.ttft_ms <= end.ms, "{end:?}");
    // The transcript's usage chunk: completion 12, prompt 40, cached 0 (absent).
    assert_eq!(end.prompt_tokens, 40);
    assert_eq!(end.completion_tokens, 12);
    assert_eq!(end.cached_tokens, 0);
    assert_eq!(end.reasoning_tokens, 0);
    assert_eq!(end.cost, 0.0);
    // Text came back, so the ceiling being spent is not the empty-at-ceiling signature.
    assert!(!end.empty_at_ceiling);
    assert_eq!(end.ended, "");
    assert_eq!(end.error, "");
    assert_eq!(end.request_body, "");
    assert_eq!(end.response_body, "");

    let lines = log.lines();
    assert_no_prompt_text(&lines);
    for line in &lines {
        for absent in ["request_body", "response_body", "cached_tokens"] {
            assert!(!line.contains(absent), "{absent} in {line}");
        }
    }
    assert_eq!(log.log.calls_for("run-7"), 1);
    assert_eq!(
        log.log.last_call().map(|c| c.model),
        Some("cuca-tiny-random".to_owned())
    );
}

#[tokio::test]
async fn a_reasoning_stream_that_spent_its_whole_ceiling_is_empty_at_ceiling() {
    // stream-reasoning: every token is reasoning_content, finish "length", and its usage
    // chunk says completion_tokens 24. With max_tokens 24 the whole ceiling was spent.
    let server = TestServer::start(vec![
        Reply::sse(support::STREAM_REASONING),
        Reply::sse(support::STREAM_REASONING),
    ])
    .await;
    let log = TempLog::new(false);
    let client = log.client(&server.base_url, RetryPolicy::none());
    client.generate(request(24)).await.unwrap();
    // The same answer under a ceiling it did not reach is not the signature.
    client.generate(request(100)).await.unwrap();

    let rows = log.rows();
    assert_eq!(rows.len(), 4);
    let at_ceiling = &rows[1];
    assert_eq!(at_ceiling.finish, "length");
    assert_eq!(at_ceiling.completion_tokens, 24);
    assert_eq!(at_ceiling.max_tokens, 24);
    assert!(at_ceiling.empty_at_ceiling, "{at_ceiling:?}");
    assert!(log.lines()[1].contains("\"empty_at_ceiling\":true"));
    let below = &rows[3];
    assert_eq!(below.max_tokens, 100);
    assert!(!below.empty_at_ceiling, "{below:?}");
    assert_no_prompt_text(&log.lines());
}

#[tokio::test]
async fn a_request_without_a_run_gets_the_clients_run_on_every_row() {
    let server = TestServer::start(vec![
        Reply::sse(support::STREAM_BASIC),
        Reply::sse(support::STREAM_BASIC),
    ])
    .await;
    let log = TempLog::new(false);
    let client = log.client(&server.base_url, RetryPolicy::none());
    let mut plain = UnifiedRequest::new(vec![Message::user(USER_TEXT)]);
    client.generate(plain.clone()).await.unwrap();
    plain.metadata.tag = Some("brief".into());
    client.generate(plain).await.unwrap();

    let rows = log.rows();
    assert_eq!(rows.len(), 4);
    let run = rows[0].run.clone();
    assert_eq!(run.len(), 8, "one minted per client: {run:?}");
    assert!(rows.iter().all(|row| row.run == run));
    assert_eq!(rows[0].tag, "", "an untagged call leaves the tag off");
    assert_eq!(rows[3].tag, "brief");
    assert_ne!(rows[0].id, rows[2].id);
    assert_eq!(log.log.calls_for(&run), 2);
}

#[tokio::test]
async fn a_dropped_stream_leaves_a_start_row_and_a_cancelled_end_row() {
    let (closed_tx, mut closed_rx) = tokio::sync::mpsc::unbounded_channel();
    let server = TestServer::start(vec![Reply::SseHold(vec![first_events(4)], closed_tx)]).await;
    let log = TempLog::new(false);
    let client = log.client(&server.base_url, RetryPolicy::none());
    let mut stream = client.generate_stream(request(12));
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(first, cuca_events::MessageContentBlock::text("phas"));
    drop(stream);
    // The end row is written as the stream is dropped, before the server notices.
    let rows = log.rows();
    assert_eq!(rows.len(), 2, "{rows:#?}");
    assert_eq!(rows[0].phase, "start");
    let end = &rows[1];
    assert_eq!(end.id, rows[0].id);
    assert_eq!(end.ended, "cancelled");
    assert_eq!(end.run, "run-7");
    assert_eq!(end.attempt, 1);
    assert!(cuca_calllog::in_flight(&rows).is_empty());
    let seen = tokio::time::timeout(Duration::from_secs(10), closed_rx.recv())
        .await
        .unwrap();
    assert_eq!(seen, Some("client closed the connection"));
}

#[tokio::test]
async fn a_stream_dropped_before_its_status_arrived_is_cancelled_too() {
    // The server reads the request and never answers: the attempt is dropped while the
    // client still awaits the status line, inside the retry loop.
    let (read_tx, mut read_rx) = tokio::sync::mpsc::unbounded_channel();
    let server = TestServer::start(vec![Reply::Hang(read_tx)]).await;
    let log = TempLog::new(false);
    let client = log.client(&server.base_url, RetryPolicy::none());
    let mut stream = client.generate_stream(request(12));
    tokio::select! {
        item = stream.next() => panic!("the server never answers, yet got {item:?}"),
        read = read_rx.recv() => assert_eq!(read, Some("request read")),
    }
    drop(stream);
    let rows = log.rows();
    assert_eq!(rows.len(), 2, "{rows:#?}");
    assert_eq!(rows[0].phase, "start");
    assert_eq!(rows[1].ended, "cancelled");
    assert_eq!(rows[1].id, rows[0].id);
    assert_eq!(rows[1].status, 0, "no status arrived");
}

/// Decision (docs/client.md): a retried attempt's end row is written by the retry loop
/// itself, before the back-off begins, with the refusal's status, clipped error and
/// `retry_after`, and no `ended`; `hopped` would say nobody wrote the row, and here the
/// path always does.
#[tokio::test]
async fn a_429_then_200_leaves_attempts_1_and_2_and_the_first_end_row_carries_the_429() {
    let server = TestServer::start(vec![
        Reply::Status {
            status: 429,
            content_type: "application/json",
            headers: vec![("Retry-After", "0.05".into())],
            body: br#"{"error":{"code":429,"message":"slots busy"}}"#.to_vec(),
        },
        Reply::sse(support::STREAM_BASIC),
    ])
    .await;
    let log = TempLog::new(false);
    let client = log.client(&server.base_url, fast_retries(2));
    client.generate(request(12)).await.unwrap();

    let rows = log.rows();
    assert_eq!(rows.len(), 4, "{rows:#?}");
    let phases: Vec<(&str, u32)> = rows.iter().map(|r| (r.phase.as_str(), r.attempt)).collect();
    assert_eq!(phases, [("start", 1), ("", 1), ("start", 2), ("", 2)]);
    assert_eq!(rows[1].id, rows[0].id);
    assert_eq!(rows[3].id, rows[2].id);
    assert_ne!(rows[0].id, rows[2].id);
    let refused = &rows[1];
    assert_eq!(refused.status, 429);
    // The provider's own words, which quote nothing of the request, are kept.
    assert_eq!(refused.error, "slots busy");
    assert_eq!(refused.retry_after, 0.05);
    assert_eq!(refused.ended, "");
    assert_eq!(rows[3].status, 200);
    assert_eq!(rows[3].finish, "length");
    assert!(rows.iter().all(|r| r.run == "run-7"));
    assert_eq!(log.log.calls_for("run-7"), 2);
}

#[tokio::test]
async fn the_clients_first_token_timeout_ends_the_attempt_as_deadline() {
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let server = TestServer::start(vec![Reply::SseHold(vec![first_events(2)], tx)]).await;
    let log = TempLog::new(false);
    let client = CucaClient::builder()
        .with_base_url(&server.base_url)
        .with_first_token_timeout(Duration::from_millis(150))
        .with_retry_policy(RetryPolicy::none())
        .with_call_log(log.log.clone())
        .build()
        .unwrap();
    let err = client.generate(request(12)).await.unwrap_err();
    assert!(matches!(err, PluginError::Timeout { .. }), "{err:?}");

    let rows = log.rows();
    assert_eq!(rows.len(), 2, "{rows:#?}");
    let end = &rows[1];
    assert_eq!(end.ended, "deadline");
    assert_eq!(end.applied, "first_token");
    assert_eq!(end.applied_ms, 150);
    assert_eq!(end.status, 200);
    assert_eq!(end.ttft_ms, 0, "no first token arrived");
    assert!(end.ms >= 150, "{end:?}");
    assert_eq!(
        end.error,
        format!(
            "{}/v1/chat/completions: no first token within 150 ms",
            server.base_url
        )
    );
}

#[tokio::test]
async fn the_clients_total_timeout_mid_stream_is_a_deadline_with_its_ttft() {
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let server = TestServer::start(vec![Reply::SseHold(vec![first_events(4)], tx)]).await;
    let log = TempLog::new(false);
    let client = CucaClient::builder()
        .with_base_url(&server.base_url)
        .with_total_timeout(Duration::from_millis(150))
        .with_retry_policy(RetryPolicy::none())
        .with_call_log(log.log.clone())
        .build()
        .unwrap();
    client.generate(request(12)).await.unwrap_err();
    let rows = log.rows();
    assert_eq!(rows.len(), 2, "{rows:#?}");
    assert_eq!(rows[1].ended, "deadline");
    assert_eq!(rows[1].applied, "total");
    assert!(rows[1].ttft_ms >= 1, "a block arrived before the deadline");
}

#[tokio::test]
async fn a_server_error_gives_its_status_and_its_clipped_sentence() {
    let page = format!(
        r#"{{"error":{{"code":500,"message":"{}"}}}}"#,
        "overloaded ".repeat(200)
    );
    let server = TestServer::start(vec![
        Reply::json_error(400, support::ERROR_NO_MESSAGES),
        Reply::json_error(500, page.as_bytes()),
    ])
    .await;
    let log = TempLog::new(false);
    let client = log.client(&server.base_url, RetryPolicy::none());
    let err = client.generate(request(12)).await.unwrap_err();
    assert!(matches!(err, PluginError::Provider { status: 400, .. }));
    client.generate(request(12)).await.unwrap_err();

    let rows = log.rows();
    assert_eq!(rows.len(), 4, "{rows:#?}");
    assert_eq!(rows[1].status, 400);
    // Seed 003: "ClipError is how a provider's message becomes a record's Error field";
    // without the bodies pin it is kept too, less what quotes the request.
    assert_eq!(rows[1].error, "'messages' is required");
    assert_eq!(rows[1].ended, "");
    assert_eq!(rows[1].served, "");
    assert_eq!(rows[3].status, 500);
    assert_eq!(
        rows[3].error,
        cuca_calllog::clip_error(&"overloaded ".repeat(200))
    );
    assert!(rows[3].error.ends_with('…'));
    // A failed call is not "heard back from".
    assert_eq!(log.log.last_call(), None);
    assert_no_prompt_text(&log.lines());
}

#[tokio::test]
async fn with_the_bodies_pin_a_provider_error_is_clipped_once_the_seeds_way() {
    // The server's message is clipped once, by `clip_error` alone (not first to 240
    // characters with "… (N bytes in all)" and then again). Seed 003: ClipError is here "so that every writer
    // clips the same way and a reader can trust what a trailing ellipsis means."
    let page = format!(
        r#"{{"error":{{"code":500,"message":"{}"}}}}"#,
        "overloaded ".repeat(200)
    );
    let html = format!(
        "<html><body><h1>502 Bad Gateway</h1><p>{}</p></body></html>",
        "upstream down ".repeat(100)
    );
    let server = TestServer::start(vec![
        Reply::json_error(500, page.as_bytes()),
        Reply::Status {
            status: 502,
            content_type: "text/html",
            headers: Vec::new(),
            body: html.into_bytes(),
        },
        Reply::json_error(400, support::ERROR_NO_MESSAGES),
    ])
    .await;
    let log = TempLog::new(true);
    let client = log.client(&server.base_url, RetryPolicy::none());
    for _ in 0..3 {
        client.generate(request(12)).await.unwrap_err();
    }
    let rows = log.rows();
    assert_eq!(rows.len(), 6, "{rows:#?}");
    let json = &rows[1].error;
    assert_eq!(json.chars().count(), MAX_ERROR_CHARS, "{json}");
    assert!(json.ends_with('…'), "{json}");
    assert!(!json.contains("bytes in all"), "{json}");
    assert_eq!(json, &cuca_calllog::clip_error(&"overloaded ".repeat(200)));
    let page = &rows[3].error;
    assert_eq!(page.chars().count(), MAX_ERROR_CHARS, "{page}");
    assert!(page.starts_with("502 Bad Gateway upstream down"), "{page}");
    assert!(
        page.ends_with('…') && !page.contains("bytes in all"),
        "{page}"
    );
    // A message within the bound is the server's sentence, whole.
    assert_eq!(rows[5].error, "'messages' is required");
}

#[tokio::test]
async fn without_the_bodies_pin_a_providers_sentence_is_kept_and_what_it_quotes_is_not() {
    // The client does not withhold the provider's message: in one place shared by the client
    // and the proxy, the provider's own sentence is kept, clipped by `clip_error` (ending in
    // its ellipsis), with every stretch that quotes the request replaced by a marker. What is
    // not a provider's sentence is still never written: a malformed chunk and a nameless tool call's
    // arguments are the answer's bytes, named by kind only.
    const ANSWER: &str = "the vault code is 4471";
    let malformed =
        format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{ANSWER}\"}}}}]\n\n");
    // An in-stream error that quotes the answer decoded before it.
    let error_event = format!(
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{ANSWER}\"}}}}]}}\n\n\
         data: {{\"error\":{{\"message\":\"cannot continue after: {ANSWER}\"}}}}\n\n"
    );
    // The documented OpenAI tool-call chunk shape (llama-server does not stream tool calls
    // for the test model), with the function name missing.
    let nameless_tool = format!(
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"arguments\":\"{{\\\"code\\\":\\\"{ANSWER}\\\"}}\"}}}}]}},\"finish_reason\":\"tool_calls\"}}]}}\n\ndata: [DONE]\n\n"
    );
    let replies = || {
        vec![
            Reply::json_error(400, support::ERROR_PARSE_MESSAGES),
            Reply::json_error(400, support::ERROR_CONTEXT_OVERFLOW),
            Reply::json_error(400, support::ERROR_BAD_JSON),
            Reply::sse(malformed.as_bytes()),
            Reply::sse(error_event.as_bytes()),
            Reply::sse(nameless_tool.as_bytes()),
        ]
    };
    let server = TestServer::start(replies()).await;
    let log = TempLog::new(false);
    let client = log.client(&server.base_url, RetryPolicy::none());
    let mut errors = Vec::new();
    for _ in 0..6 {
        errors.push(client.generate(request(12)).await.unwrap_err());
    }
    // The caller's error keeps the server's words whole: only the log redacts them.
    assert!(errors[0].to_string().contains("Failed to parse messages"));

    let rows = log.rows();
    assert_eq!(rows.len(), 12, "{rows:#?}");
    let ends: Vec<&str> = rows
        .iter()
        .skip(1)
        .step_by(2)
        .map(|r| r.error.as_str())
        .collect();
    // llama-server's parse error dumps the whole conversation after its sentence: the
    // sentence stays, the system prompt and the user's text become markers.
    assert!(
        ends[0].starts_with(
            "Failed to parse messages: Expected 'content' (ref: \
             https://github.com/ggml-org/llama.cpp/issues/8367); messages = ["
        ),
        "{}",
        ends[0]
    );
    assert!(ends[0].contains("\"content\": \"[quoted]\""), "{}", ends[0]);
    assert_eq!(
        ends[1],
        "request (15014 tokens) exceeds the available context size (2048 tokens), try increasing it"
    );
    assert_eq!(
        ends[2],
        "[json.exception.parse_error.101] parse error at line 2, column 1: syntax error while \
         parsing object key - unexpected end of input; expected string literal"
    );
    let withheld = "withheld without CUCA_CALL_LOG_BODIES";
    assert_eq!(
        ends[3],
        format!("the server sent a response cuca cannot read; its bytes are {withheld}")
    );
    assert_eq!(ends[4], "cannot continue after: [quoted]");
    assert_eq!(
        ends[5],
        format!("the server sent a response cuca cannot read; its bytes are {withheld}")
    );
    let lines = log.lines();
    assert_no_prompt_text(&lines);
    for line in &lines {
        assert!(!line.contains("4471"), "answer text in {line}");
    }

    // With the pin, the same errors keep their words, clipped once.
    let server = TestServer::start(replies()).await;
    let pinned = TempLog::new(true);
    let client = pinned.client(&server.base_url, RetryPolicy::none());
    for _ in 0..6 {
        client.generate(request(12)).await.unwrap_err();
    }
    let rows = pinned.rows();
    let ends: Vec<&str> = rows
        .iter()
        .skip(1)
        .step_by(2)
        .map(|r| r.error.as_str())
        .collect();
    assert!(
        ends[0].starts_with("Failed to parse messages: Expected 'content'"),
        "{}",
        ends[0]
    );
    assert!(ends[0].contains(USER_TEXT), "{}", ends[0]);
    assert_eq!(
        ends[1],
        "request (15014 tokens) exceeds the available context size (2048 tokens), try increasing it"
    );
    assert!(ends[3].contains(ANSWER), "{}", ends[3]);
    assert_eq!(ends[4], format!("cannot continue after: {ANSWER}"));
    assert!(ends[5].contains(ANSWER), "{}", ends[5]);
    for end in &ends {
        assert!(!end.contains("bytes in all"), "{end}");
    }
}

#[tokio::test]
async fn an_upstream_that_echoes_the_key_leaves_no_run_of_it_in_the_row() {
    // An upstream that echoes `Authorization`/`api-key` in its error never leaves any 8+
    // char run of the key in the row.
    const KEY: &str = "sk-test-Qm7Rt2Vx9Lp4Zc8N";
    let body = format!(
        r#"{{"error":{{"code":401,"message":"invalid api key: Authorization: Bearer {KEY} (key {}…) for model tiny","type":"authentication_error"}}}}"#,
        &KEY[..12]
    );
    let server = TestServer::start(vec![Reply::json_error(401, body.as_bytes())]).await;
    let log = TempLog::new(false);
    let client = log
        .builder(&server.base_url)
        .with_model("tiny")
        .with_api_key(KEY)
        .build()
        .unwrap();
    client.generate(request(12)).await.unwrap_err();
    let rows = log.rows();
    assert_eq!(
        rows[1].error,
        "invalid api key: Authorization: [quoted] (key[quoted]…) for model tiny"
    );
    let file = std::fs::read_to_string(&log.path).unwrap();
    for run in KEY.as_bytes().windows(cuca_calllog::MIN_QUOTED_BYTES) {
        let run = std::str::from_utf8(run).unwrap();
        assert!(!file.contains(run), "{run:?} of the key in {file}");
    }
    assert_no_prompt_text(&log.lines());
}

#[tokio::test]
async fn a_plugins_error_is_named_without_its_words() {
    // A plugin's message is whatever the plugin said (a redaction plugin may quote what it
    // refused), so without the pin the row names the plugin only.
    struct Refuser;
    #[async_trait::async_trait]
    impl cuca_events::CucaPlugin for Refuser {
        fn name(&self) -> &str {
            "refuser"
        }
        async fn on_stream_chunk(
            &self,
            block: &cuca_events::MessageContentBlock,
        ) -> Result<(), PluginError> {
            Err(PluginError::Plugin {
                plugin: "refuser".into(),
                message: format!("refused the block {block:?} for Lisbon"),
            })
        }
    }
    let server = TestServer::start(vec![Reply::sse(support::STREAM_BASIC)]).await;
    let log = TempLog::new(false);
    let client = log
        .builder(&server.base_url)
        .register_plugin(std::sync::Arc::new(Refuser))
        .build()
        .unwrap();
    client.generate(request(12)).await.unwrap_err();
    let rows = log.rows();
    assert_eq!(
        rows[1].error,
        "plugin refuser failed; its message is withheld without CUCA_CALL_LOG_BODIES"
    );
    assert_no_prompt_text(&log.lines());
}

#[tokio::test]
async fn a_refused_connection_leaves_an_end_row_with_the_error_and_no_status() {
    let base_url = support::refused_base_url().await;
    let log = TempLog::new(false);
    let client = log.client(&base_url, RetryPolicy::none());
    client.generate(request(12)).await.unwrap_err();
    let rows = log.rows();
    assert_eq!(rows.len(), 2, "{rows:#?}");
    assert_eq!(rows[1].status, 0);
    assert!(
        rows[1]
            .error
            .contains("connection refused: cuca expected a llama.cpp llama-server"),
        "{}",
        rows[1].error
    );
    assert!(!log.lines()[1].contains("\"status\""));
}

#[tokio::test]
async fn with_the_bodies_pin_the_rows_carry_the_request_sent_and_the_response_bytes() {
    let server = TestServer::start(vec![
        Reply::Sse(support::split_at(support::STREAM_BASIC, &[100, 1000, 2500])),
        Reply::json_error(400, support::ERROR_NO_MESSAGES),
    ])
    .await;
    let log = TempLog::new(true);
    let client = log.client(&server.base_url, RetryPolicy::none());
    client.generate(request(12)).await.unwrap();
    client.generate(request(12)).await.unwrap_err();

    let rows = log.rows();
    assert_eq!(rows.len(), 4);
    let sent = server.requests();
    // The request body exactly as it went out, on the start row.
    assert_eq!(rows[0].request_body.as_bytes(), sent[0].body.as_slice());
    assert!(rows[0].request_body.contains(USER_TEXT));
    assert_eq!(rows[1].request_body, "");
    // The raw response bytes, whole, on the end row.
    assert_eq!(rows[1].response_body.as_bytes(), support::STREAM_BASIC);
    assert_eq!(rows[1].note, "");
    // An error answer's body too.
    assert_eq!(rows[2].request_body.as_bytes(), sent[1].body.as_slice());
    assert_eq!(rows[3].response_body.as_bytes(), support::ERROR_NO_MESSAGES);
}

#[tokio::test]
async fn a_deadline_the_caller_stated_ends_the_call_as_deadline_not_cancelled() {
    // A caller can state its own deadline, and a call it ends reads `deadline`, not
    // `cancelled`. Seed: "`cancelled` and `deadline` when the
    // caller's own context ended the call".
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let server = TestServer::start(vec![Reply::SseHold(vec![first_events(4)], tx)]).await;
    let log = TempLog::new(false);
    let client = log.client(&server.base_url, RetryPolicy::none());
    let deadline = tokio::time::Instant::now() + Duration::from_millis(200);
    let err = client.generate_by(request(12), deadline).await.unwrap_err();
    match &err {
        PluginError::Timeout {
            phase, after_ms, ..
        } => {
            assert_eq!(phase, "answer by the caller's deadline");
            assert!((195..=200).contains(after_ms), "{after_ms}");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    let rows = log.rows();
    assert_eq!(rows.len(), 2, "{rows:#?}");
    let end = &rows[1];
    assert_eq!(end.ended, "deadline");
    assert_eq!(end.applied, "caller");
    assert!((195..=200).contains(&end.applied_ms), "{end:?}");
    assert_eq!(end.status, 200);
    assert!(end.ttft_ms >= 1, "the first blocks came: {end:?}");
    assert_eq!((end.messages, end.max_tokens, end.tools), (2, 12, 1));
}

#[tokio::test]
async fn a_callers_own_timeout_at_its_stated_deadline_reads_deadline_and_keeps_what_was_known() {
    // The caller wraps the call in its own timer and states the same deadline: the drop
    // comes at the deadline, and the guard's row says `deadline` with the status, ttft and
    // shape already known.
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let server = TestServer::start(vec![Reply::SseHold(vec![first_events(4)], tx)]).await;
    let log = TempLog::new(false);
    let client = log.client(&server.base_url, RetryPolicy::none());
    let deadline = tokio::time::Instant::now() + Duration::from_millis(200);
    let mut stream = client.generate_stream_by(request(12), deadline);
    // Read the blocks the server sent; then the stream waits for more, which never come.
    assert_eq!(
        stream.next().await.unwrap().unwrap(),
        cuca_events::MessageContentBlock::text("phas")
    );
    // The caller stops polling and its own timer fires at the deadline: it drops the stream.
    tokio::time::sleep_until(deadline).await;
    drop(stream);

    let rows = log.rows();
    assert_eq!(rows.len(), 2, "{rows:#?}");
    let end = &rows[1];
    assert_eq!(end.ended, "deadline");
    assert_eq!(end.applied, "caller");
    assert_eq!(end.status, 200);
    assert!(end.ttft_ms >= 1, "{end:?}");
    assert_eq!(end.conn_reused, Some(false));
    assert_eq!(
        (end.effort.as_str(), end.max_tokens, end.messages, end.tools),
        ("low", 12, 2, 1)
    );
}

#[tokio::test]
async fn a_drop_before_the_stated_deadline_is_still_cancelled_with_what_was_known() {
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let server = TestServer::start(vec![Reply::SseHold(vec![first_events(4)], tx)]).await;
    let log = TempLog::new(false);
    let client = log.client(&server.base_url, RetryPolicy::none());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    let mut stream = client.generate_stream_by(request(12), deadline);
    stream.next().await.unwrap().unwrap();
    drop(stream);
    let rows = log.rows();
    let end = &rows[1];
    assert_eq!(end.ended, "cancelled");
    assert_eq!(end.applied, "");
    // The `cancelled` row keeps the status, ttft and request shape.
    assert_eq!(end.status, 200);
    assert!(end.ttft_ms >= 1, "{end:?}");
    assert_eq!((end.max_tokens, end.messages, end.tools), (12, 2, 1));
    assert!(end.stream);
}

#[tokio::test]
async fn with_the_bodies_pin_a_long_stream_and_a_long_error_body_are_kept_whole() {
    // `response_body` does not stop at 4 MiB (with a note), nor error bodies at 64 KiB.
    // Seed 003: "They are whole and unclipped, because the reason to turn them on is that
    // something in the exact bytes is what is wrong."
    let mut stream = Vec::new();
    while stream.len() < 5 << 20 {
        stream
            .extend_from_slice(b": keep-alive comment the decoder skips, as llama-server's are\n");
    }
    stream.extend_from_slice(support::STREAM_BASIC);
    let error_page = format!(
        "<html><body><pre>{}</pre></body></html>",
        "stack frame\n".repeat(10_000)
    );
    assert!(error_page.len() > 100 * 1024);
    let server = TestServer::start(vec![
        Reply::Sse(support::split_at(&stream, &[7, 70_000, 3_000_000])),
        Reply::Status {
            status: 500,
            content_type: "text/html",
            headers: Vec::new(),
            body: error_page.clone().into_bytes(),
        },
    ])
    .await;
    let log = TempLog::new(true);
    let client = log.client(&server.base_url, RetryPolicy::none());
    client.generate(request(12)).await.unwrap();
    client.generate(request(12)).await.unwrap_err();
    let rows = log.rows();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[1].response_body.len(), stream.len());
    assert_eq!(rows[1].response_body.as_bytes(), stream.as_slice());
    assert_eq!(rows[1].note, "");
    assert_eq!(rows[3].response_body, error_page);
}
