//! Recordings and replays that never break under what real callers do: an upstream that
//! refuses a conversation's first call, and identical first calls sent at once
//! (self-consistency, best-of-n, a client retrying while its first call still streams).
//! Driven over HTTP against a scripted upstream of this file's own.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use support::{client, recording_at, replaying};

/// A scripted Chat Completions upstream: a question holding `refuse` is a 400 (a prompt over
/// the context, say), after `delay_ms` when the request says so; any other question gets
/// `Answer {nth} to {question}`, the `nth` time those messages were asked, whole.
struct Scripted {
    url: String,
    asked: Arc<Mutex<HashMap<String, usize>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Scripted {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn scripted() -> Scripted {
    let asked: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let counts = Arc::clone(&asked);
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move |body: Bytes| {
            let counts = Arc::clone(&counts);
            async move {
                let request: Value = serde_json::from_slice(&body).unwrap();
                let question = request["messages"]
                    .as_array()
                    .and_then(|m| m.last())
                    .and_then(|m| m["content"].as_str())
                    .unwrap_or_default()
                    .to_owned();
                if let Some(ms) = request["delay_ms"].as_u64() {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                if question.contains("refuse") {
                    let error = json!({"error": {"message": "the prompt is over the context",
                        "type": "invalid_request_error", "code": "context_length_exceeded"}});
                    return Response::builder()
                        .status(StatusCode::BAD_REQUEST)
                        .header("content-type", "application/json")
                        .body(Body::from(error.to_string()))
                        .unwrap();
                }
                let nth = {
                    let mut counts = counts.lock().unwrap();
                    let n = counts.entry(request["messages"].to_string()).or_default();
                    *n += 1;
                    *n
                };
                let answer = json!({
                    "id": "s1", "object": "chat.completion", "created": 1, "model": "scripted",
                    "choices": [{"index": 0, "finish_reason": "stop",
                        "message": {"role": "assistant", "content": format!("Answer {nth} to {question}")}}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9},
                });
                Response::builder()
                    .header("content-type", "application/json")
                    .body(Body::from(answer.to_string()))
                    .unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    Scripted {
        url: format!("http://{addr}"),
        asked,
        stop: Some(stop),
    }
}

/// One question as the first call of its own conversation.
fn asking(question: &str, delay_ms: Option<u64>) -> Value {
    let mut body = json!({"model": "m", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": question},
    ]});
    if let Some(ms) = delay_ms {
        body["delay_ms"] = json!(ms);
    }
    body
}

/// Sends `body` to `url`: the status, the answer's text (or the error body) and
/// `X-Cuca-Session`. Never waits more than 20 s: a call that hangs is a failed test, not a
/// hung one.
async fn send(url: &str, body: &Value) -> (u16, String, String) {
    let call = async {
        let response = client().post(url).json(body).send().await.unwrap();
        let status = response.status().as_u16();
        let session = response
            .headers()
            .get("x-cuca-session")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let value: Value = response.json().await.unwrap();
        let text = value["choices"][0]["message"]["content"]
            .as_str()
            .map_or_else(|| value.to_string(), str::to_owned);
        (status, text, session)
    };
    tokio::time::timeout(Duration::from_secs(20), call)
        .await
        .expect("the call was answered within 20 s")
}

/// "Record Q0 (200), Q1 (400), Q2, Q3 (200): Q2 and Q3 replay" — a refused first call leaves
/// no conversation id empty before the ones that hold conversations, and its answer and its
/// call-log row name a session that exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_first_call_hides_no_later_conversation_from_replay() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = scripted().await;
    let proxy = recording_at(&upstream.url, dir.path()).await;
    let url = proxy.chat_url(Some("g"));
    let questions = [
        "Name a colour.",
        "Please refuse this.",
        "Name a fish.",
        "Name a tree.",
    ];
    let mut recorded = Vec::new();
    for question in questions {
        recorded.push(send(&url, &asking(question, None)).await);
    }
    assert_eq!(
        recorded[0],
        (200, "Answer 1 to Name a colour.".into(), "g".into())
    );
    assert_eq!(recorded[1].0, 400);
    assert_eq!(
        recorded[1].2, "g",
        "the refused call names the session it came in on"
    );
    assert_eq!(
        recorded[2],
        (200, "Answer 1 to Name a fish.".into(), "g:conv:1".into())
    );
    assert_eq!(
        recorded[3],
        (200, "Answer 1 to Name a tree.".into(), "g:conv:2".into())
    );
    proxy.proxy.settled("g").await;
    for row in proxy.rows().iter().filter(|r| !r.ended.is_empty()) {
        assert!(
            !proxy.records(&row.node).is_empty(),
            "row {row:?} names session {:?}, which holds nothing",
            row.node
        );
    }
    drop(proxy);
    drop(upstream);

    let replay = replaying(dir.path()).await;
    let url = replay.chat_url(Some("g"));
    for (i, question) in questions.iter().enumerate().filter(|(i, _)| *i != 1) {
        assert_eq!(
            send(&url, &asking(question, None)).await,
            recorded[i],
            "{question}"
        );
    }
}

/// A refused first call still waiting for its upstream while a later conversation begins and
/// is recorded: the id it held is not left empty before that conversation for good — the next
/// conversation that begins takes it, and every conversation replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_first_call_overtaken_by_another_conversation_leaves_its_id_to_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = scripted().await;
    let proxy = recording_at(&upstream.url, dir.path()).await;
    let url = proxy.chat_url(Some("h"));
    assert_eq!(send(&url, &asking("Name a colour.", None)).await.0, 200);
    let slow_refusal = {
        let url = url.clone();
        tokio::spawn(async move { send(&url, &asking("Please refuse this.", Some(400))).await })
    };
    // The refusal holds `h:conv:1` while the upstream thinks; a fish begins `h:conv:2`.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let fish = send(&url, &asking("Name a fish.", None)).await;
    assert_eq!(fish.2, "h:conv:2");
    assert_eq!(slow_refusal.await.unwrap().0, 400);
    let tree = send(&url, &asking("Name a tree.", None)).await;
    assert_eq!(
        tree.2, "h:conv:1",
        "the next conversation takes the id given back"
    );
    proxy.proxy.settled("h").await;
    drop(proxy);
    drop(upstream);

    let replay = replaying(dir.path()).await;
    let url = replay.chat_url(Some("h"));
    assert_eq!(send(&url, &asking("Name a fish.", None)).await, fish);
    assert_eq!(send(&url, &asking("Name a tree.", None)).await, tree);
}

/// Identical first calls at once on one base URL: each gets its answer, every one recorded,
/// and none waits behind another's writer for good (before, the second re-placed itself into
/// the writer it held, and every later call of the conversation hung with it).
async fn identical_first_calls_at_once(n: usize) {
    let dir = tempfile::tempdir().unwrap();
    let upstream = scripted().await;
    let proxy = recording_at(&upstream.url, dir.path()).await;
    let url = proxy.chat_url(Some("same"));
    let calls: Vec<_> = (0..n)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { send(&url, &asking("Name a colour.", Some(50))).await })
        })
        .collect();
    let mut answers = Vec::new();
    for call in calls {
        let (status, text, _) = call.await.unwrap();
        assert_eq!(status, 200, "{text}");
        answers.push(text);
    }
    answers.sort();
    let mut expected: Vec<String> = (1..=n)
        .map(|nth| format!("Answer {nth} to Name a colour."))
        .collect();
    expected.sort();
    assert_eq!(answers, expected, "each call got an answer of its own");
    // A later call of the conversation is not stuck behind them.
    let follow_up = json!({"model": "m", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Answer 1 to Name a colour."},
        {"role": "user", "content": "Another?"},
    ]});
    assert_eq!(send(&url, &follow_up).await.0, 200);
    proxy.proxy.settled_all().await;
    let recorded: usize = ["same", "same:conv:1", "same:conv:2"]
        .iter()
        .map(|id| {
            proxy
                .records(id)
                .iter()
                .filter(|r| r.event.kind() == "CallFinish")
                .count()
        })
        .sum();
    assert_eq!(recorded, n + 1, "every answered call is recorded");
    assert_eq!(upstream.asked.lock().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_identical_first_calls_at_once_each_get_their_answer() {
    identical_first_calls_at_once(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_identical_first_calls_at_once_each_get_their_answer() {
    identical_first_calls_at_once(8).await;
}

/// The request of call `k` of a run whose call `changed` (if any) asks variant `variant`'s
/// question instead: each earlier question followed by the answer the scripted upstream gave
/// it (the first asking of each question).
fn run_call(k: usize, changed: Option<(usize, usize)>) -> Value {
    let question = |j: usize| match changed {
        Some((at, variant)) if at == j => format!("Name thing {j}, variant {variant}."),
        _ => format!("Name thing {j}."),
    };
    let mut messages = vec![json!({"role": "system", "content": "Be brief."})];
    for j in 0..k {
        messages.push(json!({"role": "user", "content": question(j)}));
        messages
            .push(json!({"role": "assistant", "content": format!("Answer 1 to {}", question(j))}));
    }
    messages.push(json!({"role": "user", "content": question(k)}));
    json!({"model": "m", "messages": messages})
}

/// Every session of the store (the recording and each fork) holds one conversation: no two
/// calls at one position carried different messages (what `cuca verify` reports as not
/// replayable), and every id is within the session-id rule's 200 bytes.
fn assert_each_branch_is_one_conversation(proxy: &support::Running) {
    for id in proxy.backend.sessions().unwrap() {
        assert!(id.len() <= 200, "session id of {} bytes: {id}", id.len());
        let mut check = cuca_replay::AmbiguityCheck::new();
        for record in proxy.records(&id) {
            check.observe(&record.event);
        }
        let ambiguities = check.finish();
        assert!(ambiguities.is_empty(), "{id}: {ambiguities:?}");
    }
}

/// Re-runs that diverge at one call, one after another and at once: a re-run that matches a
/// branch replays it or continues it, a new variant forks the recording at its own divergence
/// point (the id does not grow with the number of variants), and no branch holds calls of
/// two re-runs that differ. Before, every re-run recorded into the newest branch without
/// comparing its history, and each variant forked the one before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_mode_keeps_each_variant_in_a_branch_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = scripted().await;
    {
        let proxy = recording_at(&upstream.url, dir.path()).await;
        let url = proxy.chat_url(Some("run"));
        for k in 0..3 {
            assert_eq!(send(&url, &run_call(k, None)).await.0, 200);
        }
        proxy.proxy.settled_all().await;
    }
    let config =
        cuca_proxy::ProxyConfig::new(cuca_proxy::Mode::Fork, Some(upstream.url.clone())).unwrap();
    let proxy = support::start(config, dir.path()).await;
    let url = proxy.chat_url(Some("run"));
    // Twenty variants one after another, then eight at once, each changing call 1.
    let variant = |v: usize| {
        let url = url.clone();
        async move {
            for k in 0..3 {
                let (status, text, session) = send(&url, &run_call(k, Some((1, v)))).await;
                assert_eq!(status, 200, "variant {v}, call {k}: {text}");
                let question = if k == 1 {
                    format!("Name thing 1, variant {v}.")
                } else {
                    format!("Name thing {k}.")
                };
                assert_eq!(
                    text,
                    format!("Answer 1 to {question}"),
                    "variant {v}, call {k} in {session}"
                );
            }
        }
    };
    for v in 0..20 {
        variant(v).await;
    }
    let at_once: Vec<_> = (20..28).map(|v| tokio::spawn(variant(v))).collect();
    for run in at_once {
        run.await.unwrap();
    }
    // A variant run again replays its branch: the upstream is asked nothing more.
    let asked = || upstream.asked.lock().unwrap().values().sum::<usize>();
    let before = asked();
    variant(3).await;
    assert_eq!(asked(), before);
    proxy.proxy.settled_all().await;
    assert_each_branch_is_one_conversation(&proxy);
    drop(proxy);

    // So does a new process: the forks in the store are the tree's as much as its own.
    let config =
        cuca_proxy::ProxyConfig::new(cuca_proxy::Mode::Fork, Some(upstream.url.clone())).unwrap();
    let proxy = support::start(config, dir.path()).await;
    let url = proxy.chat_url(Some("run"));
    let variant = |v: usize| {
        let url = url.clone();
        async move {
            for k in 0..3 {
                assert_eq!(send(&url, &run_call(k, Some((1, v)))).await.0, 200);
            }
        }
    };
    variant(5).await;
    variant(24).await;
    assert_eq!(
        asked(),
        before,
        "re-runs recorded by another process replay, free"
    );
    variant(99).await;
    assert_eq!(
        asked(),
        before + 2,
        "a new variant goes live from its change on"
    );
    proxy.proxy.settled_all().await;
    assert_each_branch_is_one_conversation(&proxy);
}

/// "The 409 cannot show where a long prompt differs": a system prompt that differs on its
/// 22nd line is answered with the path, the character and the text around it on both sides,
/// in the body (`error.divergence`) and the message — and told not to be retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_divergence_late_in_a_long_prompt_shows_where_it_differs() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = scripted().await;
    let lines: Vec<String> = (1..=30).map(|n| format!("Rule {n}: be careful.")).collect();
    let ask = |system: &str| {
        json!({"model": "m", "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": "Name a colour."},
        ]})
    };
    {
        let proxy = recording_at(&upstream.url, dir.path()).await;
        let url = proxy.chat_url(Some("long"));
        assert_eq!(send(&url, &ask(&lines.join("\n"))).await.0, 200);
        proxy.proxy.settled_all().await;
    }
    let replay = replaying(dir.path()).await;
    let mut changed = lines.clone();
    changed[21] = "Rule 22: be bold.".to_owned();
    let response = client()
        .post(replay.chat_url(Some("long")))
        .json(&ask(&changed.join("\n")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 409);
    assert_eq!(
        response
            .headers()
            .get("x-should-retry")
            .and_then(|v| v.to_str().ok()),
        Some("false")
    );
    let body: Value = response.json().await.unwrap();
    let divergence = &body["error"]["divergence"];
    assert_eq!(divergence["path"], "messages[0].content", "{body}");
    assert!(
        divergence["expected"]
            .as_str()
            .unwrap()
            .contains("Rule 22: be careful."),
        "{body}"
    );
    assert!(
        divergence["got"]
            .as_str()
            .unwrap()
            .contains("Rule 22: be bold."),
        "{body}"
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("first difference at messages[0].content, character"),
        "{message}"
    );
}

/// A non-streamed call's answer comes whole, at its end: its request is still stamped with
/// when the call began, and its latency is the call's, not 0 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_streamed_call_records_when_it_began_and_how_long_it_took() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = scripted().await;
    let proxy = recording_at(&upstream.url, dir.path()).await;
    let url = proxy.chat_url(Some("slow"));
    assert_eq!(
        send(&url, &asking("Name a colour.", Some(300))).await.0,
        200
    );
    proxy.proxy.settled_all().await;
    let records = proxy.records("slow");
    let latency = records
        .iter()
        .find_map(|r| match r.event {
            cuca_events::SessionEvent::Latency { duration_ms } => Some(duration_ms),
            _ => None,
        })
        .unwrap();
    assert!(latency >= 300, "latency {latency} ms for a 300 ms call");
    let request_at = records
        .iter()
        .find(|r| r.event.kind() == "CallRequest")
        .unwrap()
        .timestamp_ms;
    let finished_at = records.last().unwrap().timestamp_ms;
    assert!(
        finished_at - request_at >= 300,
        "the request is stamped {} ms before the call's end",
        finished_at - request_at
    );
}
