//! One base URL, many conversations: apps that hold several
//! conversations on one client and one base URL — the two-question app, `asyncio.gather` of
//! four streamed calls, a LangChain `ChatOpenAI` — are recorded through the proxy against the
//! stand-in upstream (which answers each question, and each asking of it, with an answer of its
//! own: `support::answer_to`), then replayed with the upstream gone: "every call getting its
//! own recorded answer, no 409, no prompt missing from the recording". And a property test:
//! "any interleaving of N conversations' calls records N conversations whose replay matches
//! each call".
//!
//! The SDK parts run the real Python `openai` package and `langchain-openai` (pinned in
//! `.ci/run`, which makes the virtual environment and sets `CUCA_TEST_PYTHON`), and the npm
//! `openai` package (`CUCA_TEST_NODE_MODULES`, also set by `.ci/run`). Without those variables
//! (a developer's `cargo test`) they are skipped with a line saying why; under `CI` a missing
//! interpreter or package fails the test. The property test needs no
//! Python: it drives the proxy with reqwest.
// Test helpers unwrap: a failure there should stop the test at once.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};

use cuca_events::{Role, SessionEvent};
use proptest::prelude::*;
use serde_json::{json, Value};
use support::*;

const SYSTEM: &str = "You are terse.";

/// The path in `variable`; without it, a line saying why the test is skipped (`what` is what
/// `.ci/run` sets it to), and under `CI` a failure.
fn installed(variable: &str, what: &str) -> Option<PathBuf> {
    let path = std::env::var_os(variable).map(PathBuf::from);
    if path.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but {variable} is not: the conversations' proof needs {what}, which .ci/run installs"
        );
        eprintln!("skipping: {variable} is not set (.ci/run sets it to {what})");
    }
    path
}

/// The interpreter of the virtual environment `.ci/run` makes, if it has `module`.
fn python_with(module: &str) -> Option<PathBuf> {
    let path = installed(
        "CUCA_TEST_PYTHON",
        "a venv with the pinned openai and langchain-openai packages",
    )?;
    assert!(
        path.exists(),
        "CUCA_TEST_PYTHON={} does not exist",
        path.display()
    );
    let found = std::process::Command::new(&path)
        .args(["-c", &format!("import {module}")])
        .output()
        .unwrap()
        .status
        .success();
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but {} cannot import {module}: .ci/run installs it, pinned, in the venv",
            path.display()
        );
        eprintln!(
            "skipping: {} cannot import {module} (.ci/run installs it, pinned)",
            path.display()
        );
        return None;
    }
    Some(path)
}

/// Runs `command` (a script named `what`) and returns the JSON object it printed.
async fn printed(mut command: std::process::Command, what: String) -> Value {
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        output.status.success(),
        "{what} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// A script of `tests/sdk/`.
fn script_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/sdk")
        .join(name)
}

/// Runs `tests/sdk/conversations.py SCENARIO PHASE PROXY` and returns what it printed.
async fn script(python: &Path, scenario: &str, phase: &str, proxy: &str) -> Value {
    let mut command = std::process::Command::new(python);
    command
        .arg(script_path("conversations.py"))
        .arg(scenario)
        .arg(phase)
        .arg(proxy);
    printed(command, format!("conversations.py {scenario} {phase}")).await
}

/// A call's answer as the script reports it.
fn answered(text: &str, session: &str) -> Value {
    json!({"status": 200, "text": text, "session": session})
}

/// The user messages and system prompts recorded in `session`, in order.
fn prompts(proxy: &Running, session: &str) -> (Vec<String>, Vec<String>) {
    let records = proxy.records(session);
    let users = records
        .iter()
        .filter_map(|r| match &r.event {
            SessionEvent::Message(m) if m.role == Role::User => Some(m.text()),
            _ => None,
        })
        .collect();
    let systems = records
        .iter()
        .filter_map(|r| match &r.event {
            SessionEvent::SystemPrompt { text } => Some(text.clone()),
            _ => None,
        })
        .collect();
    (users, systems)
}

/// Session `base`'s conversations, as the proxy names them: `base`, `base:conv:1`, ….
fn conversation(base: &str, n: u64) -> String {
    if n == 0 {
        base.to_owned()
    } else {
        cuca_events::conversation_session_id(base, n)
    }
}

/// How many conversations of `base` hold records.
fn conversations_of(proxy: &Running, base: &str) -> u64 {
    (0..)
        .find(|&n| proxy.records(&conversation(base, n)).is_empty())
        .unwrap()
}

/// "an ordinary app, one OpenAI client, one base URL (`…/s/app/v1`), asking two unrelated
/// questions with the same system prompt ("Name a colour.", then "Name a planet.")": recorded
/// as two conversations with every prompt, and replayed with the upstream gone, each call gets
/// its own answer (not "the first call with the second call's answer, 200 OK", nor a 409), and
/// `X-Cuca-Session` says which conversation answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_two_question_app_records_two_conversations_and_replays_each_call_with_its_own_answer()
{
    let Some(python) = python_with("openai") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream().await;
    let proxy = recording(&upstream, dir.path()).await;
    let record = script(&python, "app", "record", &proxy.url).await;
    let expected = json!([
        answered(&answer_to("Name a colour.", 1), "app"),
        answered(&answer_to("Name a planet.", 1), "app:conv:1"),
    ]);
    assert_eq!(record["calls"], expected);
    proxy.proxy.settled("app").await;
    for (session, question) in [("app", "Name a colour."), ("app:conv:1", "Name a planet.")] {
        assert_eq!(
            prompts(&proxy, session),
            (vec![question.to_owned()], vec![SYSTEM.to_owned()]),
            "{session}"
        );
    }
    assert_eq!(conversations_of(&proxy, "app"), 2);

    drop(proxy);
    upstream.stop().await;
    let replay = replaying(dir.path()).await;
    let replayed = script(&python, "app", "replay", &replay.url).await;
    assert_eq!(replayed["calls"], expected);
}

/// What drives the four parallel calls: the Python SDK's `asyncio.gather` or npm's
/// `Promise.all`.
enum Driver {
    Python(PathBuf),
    Node(PathBuf),
}

impl Driver {
    /// The base session the driver's script calls on.
    fn base(&self) -> &'static str {
        match self {
            Driver::Python(_) => "gather",
            Driver::Node(_) => "all",
        }
    }

    async fn run(&self, phase: &str, proxy: &str) -> Value {
        let modules = match self {
            Driver::Python(python) => return script(python, "gather", phase, proxy).await,
            Driver::Node(modules) => modules.clone(),
        };
        let mut command = std::process::Command::new("node");
        command
            .arg(script_path("conversations.mjs"))
            .arg(phase)
            .arg(proxy)
            .env("CUCA_TEST_NODE_MODULES", modules);
        printed(command, format!("conversations.mjs {phase}")).await
    }
}

/// The npm `openai` package `.ci/run` installs (`CUCA_TEST_NODE_MODULES`), if there.
fn node_modules() -> Option<PathBuf> {
    let modules = installed(
        "CUCA_TEST_NODE_MODULES",
        "the pinned npm packages, openai among them",
    )?;
    assert!(
        modules.join("openai/package.json").is_file(),
        "CUCA_TEST_NODE_MODULES={} has no openai package",
        modules.display()
    );
    Some(modules)
}

/// Four streamed calls with different questions at once on one client: four conversations,
/// each with its own question, and replayed in another order (reversed, one at a time, then
/// all four at once again) each call gets its own answer.
async fn four_parallel_calls_record_four_conversations_and_replay_in_any_order(driver: Driver) {
    let base = driver.base();
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream().await;
    let proxy = recording(&upstream, dir.path()).await;
    let record = driver.run("record", &proxy.url).await;
    let calls = record["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 4);
    let mut sessions = Vec::new();
    for call in calls {
        let question = call["question"].as_str().unwrap();
        assert_eq!(call["status"], 200, "{call}");
        assert_eq!(call["text"], answer_to(question, 1), "{call}");
        sessions.push(call["session"].as_str().unwrap().to_owned());
    }
    // Which conversation is which depends on the order the calls reached the proxy; that
    // there are four, one question each, does not.
    let mut sorted = sessions.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        (0..4).map(|n| conversation(base, n)).collect::<Vec<_>>()
    );
    proxy.proxy.settled(base).await;
    for (call, session) in calls.iter().zip(&sessions) {
        assert_eq!(
            prompts(&proxy, session),
            (
                vec![call["question"].as_str().unwrap().to_owned()],
                vec![SYSTEM.to_owned()]
            ),
            "{session}"
        );
    }
    assert_eq!(conversations_of(&proxy, base), 4);

    drop(proxy);
    upstream.stop().await;
    let replay = replaying(dir.path()).await;
    let replayed = driver.run("replay", &replay.url).await;
    let by_question = |q: &str| calls.iter().find(|c| c["question"] == q).unwrap().clone();
    for round in ["reversed", "again"] {
        let got = replayed[round].as_array().unwrap();
        assert_eq!(got.len(), 4, "{round}");
        for call in got {
            assert_eq!(
                *call,
                by_question(call["question"].as_str().unwrap()),
                "{round}"
            );
        }
    }
}

/// "`asyncio.gather` … of 4 streamed calls" on one `AsyncOpenAI` client.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_gathered_streamed_calls_record_four_conversations_and_replay_in_any_order() {
    if let Some(python) = python_with("openai") {
        four_parallel_calls_record_four_conversations_and_replay_in_any_order(Driver::Python(
            python,
        ))
        .await;
    }
}

/// "`Promise.all` of 4 streamed calls" on one npm `openai` client.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_streamed_calls_in_promise_all_record_four_conversations_and_replay_in_any_order() {
    if let Some(modules) = node_modules() {
        four_parallel_calls_record_four_conversations_and_replay_in_any_order(Driver::Node(
            modules,
        ))
        .await;
    }
}

/// "The same happens with LangChain (`invoke`, then `stream` …) on one `ChatOpenAI`": the
/// `invoke` and the `stream` of one question are two answers in one conversation, replayed in
/// the recorded order; the follow-up continues that conversation; an unrelated question starts
/// another. Replayed with the upstream gone, "the LangChain app replays whole".
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_langchain_app_on_one_chat_openai_replays_whole() {
    let Some(python) = python_with("langchain_openai") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream().await;
    let proxy = recording(&upstream, dir.path()).await;
    let record = script(&python, "langchain", "record", &proxy.url).await;
    let colour = "Name a colour.";
    assert_eq!(record["invoke"], answered(&answer_to(colour, 1), "lc"));
    // The same question asked again is answered again, and recorded in the same conversation.
    assert_eq!(record["stream"], answered(&answer_to(colour, 2), "lc"));
    assert_eq!(
        record["follow_up"],
        answered(&answer_to("Name another colour.", 1), "lc")
    );
    assert_eq!(
        record["planet"],
        answered(&answer_to("Name a planet.", 1), "lc:conv:1")
    );
    proxy.proxy.settled("lc").await;
    assert_eq!(
        prompts(&proxy, "lc").0,
        [colour, "Name another colour."],
        "the conversation's user messages, each position once"
    );
    assert_eq!(prompts(&proxy, "lc:conv:1").0, ["Name a planet."]);
    assert_eq!(conversations_of(&proxy, "lc"), 2);

    drop(proxy);
    upstream.stop().await;
    let replay = replaying(dir.path()).await;
    let replayed = script(&python, "langchain", "replay", &replay.url).await;
    for call in ["invoke", "stream", "follow_up", "planet"] {
        assert_eq!(replayed[call], record[call], "{call}");
    }
}

/// Conversations in the property test, calls in each.
const N: usize = 3;
const CALLS: usize = 2;

/// The question of call `k` of conversation `c`.
fn question(c: usize, k: usize) -> String {
    format!("Name thing {k} of conversation {c}.")
}

/// The request of call `k` of conversation `c`: the system prompt, then the conversation so
/// far (each earlier question with the answer the stand-in gives it), then its question;
/// streamed for every other call, so both kinds of answer are placed.
fn turn(c: usize, k: usize) -> Value {
    let mut messages = vec![json!({"role": "system", "content": SYSTEM})];
    for j in 0..k {
        messages.push(json!({"role": "user", "content": question(c, j)}));
        messages.push(json!({"role": "assistant", "content": answer_to(&question(c, j), 1)}));
    }
    messages.push(json!({"role": "user", "content": question(c, k)}));
    json!({"model": "tiny", "messages": messages, "stream": (c + k).is_multiple_of(2)})
}

/// Sends call `k` of conversation `c` to session `base`: its text and `X-Cuca-Session`.
async fn call(url: &str, c: usize, k: usize) -> (u16, String, String) {
    let body = turn(c, k);
    let response = client().post(url).json(&body).send().await.unwrap();
    let status = response.status().as_u16();
    let session = response
        .headers()
        .get("x-cuca-session")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let bytes = response.bytes().await.unwrap();
    let text = if status != 200 {
        String::from_utf8_lossy(&bytes).into_owned()
    } else if body["stream"] == true {
        joined(&blocks_of_sse(&bytes), false)
    } else {
        let answer: Value = serde_json::from_slice(&bytes).unwrap();
        answer["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    (status, text, session)
}

/// An interleaving of `N` conversations' `CALLS` calls each: which conversation's next call
/// comes next.
fn interleaving() -> impl Strategy<Value = Vec<usize>> {
    Just((0..N).flat_map(|c| [c; CALLS]).collect::<Vec<_>>()).prop_shuffle()
}

/// Records the calls in `order` on one session, then replays them in `replay_order`: the
/// checks of the property below.
async fn record_and_replay(order: &[usize], replay_order: &[usize]) {
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream().await;
    let proxy = recording(&upstream, dir.path()).await;
    let url = proxy.chat_url(Some("mix"));
    // A conversation is named in the order conversations began.
    let mut began: Vec<usize> = Vec::new();
    let mut next = [0; N];
    for &c in order {
        if !began.contains(&c) {
            began.push(c);
        }
        let k = next[c];
        next[c] += 1;
        let name = conversation("mix", began.iter().position(|&b| b == c).unwrap() as u64);
        let got = call(&url, c, k).await;
        assert_eq!(got, (200, answer_to(&question(c, k), 1), name.clone()));
    }
    proxy.proxy.settled("mix").await;
    assert_eq!(conversations_of(&proxy, "mix"), N as u64);
    for (n, &c) in began.iter().enumerate() {
        let name = conversation("mix", n as u64);
        let (users, systems) = prompts(&proxy, &name);
        assert_eq!(
            users,
            (0..CALLS).map(|k| question(c, k)).collect::<Vec<_>>()
        );
        assert_eq!(systems, vec![SYSTEM.to_owned(); CALLS], "{name}");
    }
    drop(proxy);
    upstream.stop().await;

    let replay = replaying(dir.path()).await;
    let url = replay.chat_url(Some("mix"));
    let mut next = [0; N];
    for &c in replay_order {
        let k = next[c];
        next[c] += 1;
        let name = conversation("mix", began.iter().position(|&b| b == c).unwrap() as u64);
        assert_eq!(
            call(&url, c, k).await,
            (200, answer_to(&question(c, k), 1), name)
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// "A property test: any interleaving of N conversations' calls records N conversations
    /// whose replay matches each call" — here replayed in another interleaving, drawn apart.
    #[test]
    fn any_interleaving_of_three_conversations_records_three_and_replays_each_call_with_its_own_answer(
        order in interleaving(),
        replay_order in interleaving(),
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(record_and_replay(&order, &replay_order));
    }
}

/// The question of call `k` of a run that changed at call `change` (`None`: the recorded run).
fn run_question(k: usize, change: Option<usize>) -> String {
    match change {
        Some(at) if k == at => format!("Name thing {k}, changed."),
        _ => question(0, k),
    }
}

/// Call `k` of a run whose question `change` was changed: the conversation so far with the
/// answers the stand-in gives (a changed prefix is asked fresh, so its answers are each `1`).
fn run_turn(k: usize, change: Option<usize>) -> Value {
    let mut messages = vec![json!({"role": "system", "content": SYSTEM})];
    for j in 0..k {
        let asked = run_question(j, change);
        messages.push(json!({"role": "user", "content": asked}));
        messages.push(json!({"role": "assistant", "content": answer_to(&asked, 1)}));
    }
    messages.push(json!({"role": "user", "content": run_question(k, change)}));
    json!({"model": "tiny", "messages": messages, "stream": k.is_multiple_of(2)})
}

/// Records a `calls`-call run, then runs it in fork mode with question `change` changed: the
/// checks of the property below.
async fn fork_at_the_change(calls: usize, change: usize) {
    let dir = tempfile::tempdir().unwrap();
    let upstream = upstream().await;
    {
        let proxy = recording(&upstream, dir.path()).await;
        let url = proxy.chat_url(Some("run"));
        for k in 0..calls {
            let response = client()
                .post(&url)
                .json(&run_turn(k, None))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
            response.bytes().await.unwrap();
        }
        proxy.proxy.settled("run").await;
    }
    let recorded = upstream.calls();
    assert_eq!(recorded, calls);
    let config =
        cuca_proxy::ProxyConfig::new(cuca_proxy::Mode::Fork, Some(upstream.url.clone())).unwrap();
    let proxy = start(config, dir.path()).await;
    let url = proxy.chat_url(Some("run"));
    let mut sessions = Vec::new();
    for k in 0..calls {
        let body = run_turn(k, Some(change));
        let response = client().post(&url).json(&body).send().await.unwrap();
        assert_eq!(response.status(), 200, "call {k}");
        let session = response.headers()["x-cuca-session"]
            .to_str()
            .unwrap()
            .to_owned();
        let bytes = response.bytes().await.unwrap();
        let text = if body["stream"] == true {
            joined(&blocks_of_sse(&bytes), false)
        } else {
            let answer: Value = serde_json::from_slice(&bytes).unwrap();
            answer["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        // Each call is answered as its own conversation was: from the recording before the
        // change, live after it.
        assert_eq!(
            text,
            answer_to(&run_question(k, Some(change)), 1),
            "call {k}"
        );
        // "fork mode forwards exactly the calls from the first difference on"
        assert_eq!(
            upstream.calls() - recorded,
            (k + 1).saturating_sub(change),
            "upstream calls after call {k} with the change at {change}"
        );
        sessions.push(session);
    }
    // Before the change the recording answers; from it on, one branch holds the run.
    assert!(
        sessions[..change].iter().all(|s| s == "run"),
        "{sessions:?}"
    );
    let branch = &sessions[change];
    assert_ne!(branch, "run");
    assert!(
        sessions[change..].iter().all(|s| s == branch),
        "{sessions:?}"
    );
    match change {
        // Nothing matched: the changed run is a conversation of its own.
        0 => assert_eq!(
            cuca_events::conversation_parent(branch).map(|(p, _)| p),
            Some("run")
        ),
        _ => assert_eq!(
            cuca_events::fork_parent(branch).map(|(p, _)| p),
            Some("run")
        ),
    }
    proxy.proxy.settled(branch).await;
    let (users, _) = prompts(&proxy, branch);
    assert_eq!(
        users,
        (0..calls)
            .map(|k| run_question(k, Some(change)))
            .collect::<Vec<_>>(),
        "the branch holds the whole changed run, the recorded prefix included"
    );
    drop(proxy);
    upstream.stop().await;
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// "A property test: for random recorded conversations and a random point of
    /// change, fork mode forwards exactly the calls from the first difference on."
    #[test]
    fn fork_mode_forwards_exactly_the_calls_from_the_first_difference_on(
        (calls, change) in (1usize..6).prop_flat_map(|calls| (Just(calls), 0..calls)),
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(fork_at_the_change(calls, change));
    }
}
