//! Recording the agents and SDKs people run, unmodified: Claude Code, Codex
//! CLI, the Agents SDK (default model) and the `anthropic` SDK are recorded through `cuca
//! proxy` into sessions that `cuca verify` calls clean and `cuca replay` / `cuca view` show
//! with the right text, tool calls and usage, and each replays offline with the same final
//! output".
//!
//! Each test runs `tests/agents/record_replay.sh` inside its own network namespace with only
//! loopback (`unshare --net`: "Claude Code and Codex try to reach their vendors' servers"):
//! the scripted upstream (`tests/agents/scripted_upstream.py`: "one tool call while the
//! request has no tool result, then text" quoting the result), `cuca run` in record mode in
//! front of it with the client under it, then the upstream stopped and `cuca run` in replay
//! mode with the same client. Both runs must print the same final output; the session must
//! verify clean and replay with the tool call and the final text.
//!
//! The clients come from `.ci/run`: the npm packages pinned in `tests/agents/package.json`
//! under `CUCA_TEST_NODE_MODULES`, the Python SDKs in the venv of `CUCA_TEST_PYTHON`. Without
//! them (a developer's `cargo test`) a test prints why and passes having checked nothing;
//! under `CI` a missing client or a missing `unshare` fails the test.
// A failed step is a failed test.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

#[path = "agents/harness.rs"]
mod harness;

use harness::*;

/// The final answer of a tool loop: the scripted upstream quotes the tool's result.
const ANSWER: &str = "The tool returned: cuca-tool-ok";

impl Run {
    /// The proof every agent shares: both runs succeeded, replay printed what record printed,
    /// the upstream saw `route`, and the session verifies clean, holds the tool call, output
    /// and usage, and `cuca replay` and `cuca view` show the tool call and the final text.
    fn assert_recorded_and_replayed(&self, route: &str, tool: &str, answer: &str) -> String {
        let story = self.story();
        assert_eq!(
            self.read("record.status").trim(),
            "0",
            "record failed\n{story}"
        );
        let recorded = self.read("record.out");
        assert!(
            recorded.contains(answer),
            "the recorded run's final output lacks {answer:?}\n{story}"
        );
        // A call the proxy cannot read is forwarded and recorded nowhere: say so before the
        // replay's 400 or 404 does.
        let file = self.sessions().join(format!("{SESSION}.cslog"));
        assert!(
            file.exists(),
            "record mode answered the agent but recorded no session at {}\n{story}",
            file.display()
        );
        assert_eq!(
            self.read("replay.status").trim(),
            "0",
            "replay failed\n{story}"
        );
        assert_eq!(
            self.read("replay.out"),
            recorded,
            "replay printed another final output\n{story}"
        );
        assert!(
            self.read("upstream.log").contains(route),
            "the upstream never saw {route}\n{story}"
        );
        let sessions = self.sessions();
        let dir = sessions.to_str().unwrap();
        self.cuca(&["verify", dir, SESSION]);
        // "with the right text, tool calls and usage"
        let kinds = self.cuca(&["show", dir, SESSION, "--kinds"]);
        for kind in [
            "ToolCall 1",
            "ToolResult 1",
            "Output",
            "TokenUsage",
            "CallFinish",
        ] {
            assert!(
                kinds.contains(kind),
                "the session lacks {kind}: {kinds}\n{story}"
            );
        }
        let shown = self.cuca(&["replay", dir, SESSION]);
        assert!(
            shown.contains(tool),
            "cuca replay shows no call of {tool}:\n{shown}\n{story}"
        );
        assert!(
            shown.contains(answer),
            "cuca replay shows no final text {answer:?}:\n{shown}\n{story}"
        );
        let page = self.view_page(dir);
        assert!(
            page.contains(tool),
            "cuca view shows no call of {tool}\n{story}"
        );
        assert!(
            page.contains(answer),
            "cuca view shows no final text {answer:?}\n{story}"
        );
        recorded
    }

    /// The session's page as `cuca view DIR` serves it.
    fn view_page(&self, dir: &str) -> String {
        use std::io::{BufRead, BufReader, Read, Write};
        let mut view = Command::new(env!("CARGO_BIN_EXE_cuca"))
            .args(["view", dir, "--listen", "127.0.0.1:0"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(view.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let address = line
            .trim()
            .rsplit("http://")
            .next()
            .unwrap()
            .trim_end_matches('/')
            .to_owned();
        let mut page = String::new();
        let fetched = std::net::TcpStream::connect(&address).and_then(|mut stream| {
            write!(
                stream,
                "GET /sessions/{SESSION} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
            )?;
            stream.read_to_string(&mut page)
        });
        let _ = view.kill();
        let _ = view.wait();
        fetched.unwrap();
        assert!(page.starts_with("HTTP/1.1 200"), "cuca view: {page}");
        page
    }
}

#[test]
fn claude_code_runs_one_bash_command_recorded_then_replayed_offline() {
    let (Some(modules), true) = (node_modules(), can_unshare()) else {
        return;
    };
    let claude = modules.join(".bin/claude");
    let scratch = tempfile::tempdir().unwrap();
    let env = claude_env(scratch.path(), 1024);
    let run = record_then_replay(
        &[
            claude.to_str().unwrap(),
            "-p",
            "Run: echo cuca-tool-ok",
            "--output-format",
            "text",
            "--allowedTools",
            "Bash",
        ],
        &env,
    );
    let output = run.assert_recorded_and_replayed("/v1/messages", "Bash", ANSWER);
    assert_eq!(output.trim(), ANSWER);
    // The cache usage the upstream reported (Claude Code marks cache breakpoints), every kind
    // apart in the session, never folded: reads, and the writes by TTL.
    let sessions = run.sessions();
    let shown = run.cuca(&["show", sessions.to_str().unwrap(), "agent", "--json"]);
    let details: Vec<Value> = shown
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter_map(|record| record["event"].get("TokenDetail").cloned())
        .collect();
    assert!(!details.is_empty(), "{shown}");
    for detail in &details {
        assert_eq!(detail["cache_read"], 3401, "{detail}");
        assert_eq!(detail["cache_write"], 1201, "{detail}");
        assert_eq!(detail["cache_write_5m"], 1000, "{detail}");
        assert_eq!(detail["cache_write_1h"], 201, "{detail}");
    }
}

/// Claude Code forked at its second call onto another model: the upstream is sent that
/// model from the second call on and never the first call, and the fork says so; the same
/// run from a new process then costs no upstream call.
#[test]
fn claude_code_forked_at_its_second_call_onto_another_model() {
    let (Some(modules), true) = (node_modules(), can_unshare()) else {
        return;
    };
    let claude = modules.join(".bin/claude");
    let scratch = tempfile::tempdir().unwrap();
    let mut env = claude_env(scratch.path(), 1024);
    env.push(("SWAP_MODEL", "claude-swapped-in".to_owned()));
    let run = record_then_replay(
        &[
            claude.to_str().unwrap(),
            "-p",
            "Run: echo cuca-tool-ok",
            "--output-format",
            "text",
            "--allowedTools",
            "Bash",
        ],
        &env,
    );
    let story = || {
        format!(
            "{}--- swap.out\n{}\n--- swap.err\n{}",
            run.story(),
            run.read("swap.out"),
            run.read("swap.err")
        )
    };
    assert_eq!(run.read("swap.status").trim(), "0", "{}", story());
    assert_eq!(run.read("swap.out").trim(), ANSWER, "{}", story());
    let before: usize = run.read("swap.before").trim().parse().unwrap();
    let mut bodies: Vec<PathBuf> = std::fs::read_dir(run.out.path().join("bodies"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    bodies.sort();
    let sent: Vec<Value> = bodies[before..]
        .iter()
        .filter(|path| path.to_string_lossy().ends_with("_messages.json"))
        .map(|path| serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap())
        .collect();
    assert!(!sent.is_empty(), "{}", story());
    for body in &sent {
        assert_eq!(body["model"], "claude-swapped-in", "{}", story());
        // Not the first call: each carries the first call's tool result.
        assert!(body.to_string().contains("tool_result"), "{body}");
    }
    let sessions = run.sessions();
    let dir = sessions.to_str().unwrap();
    let listed = run.cuca(&["sessions", dir, "--json", "--sort", "name"]);
    let fork = listed
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .map(|row| row["session"].as_str().unwrap().to_owned())
        .find(|id| id.contains(":fork:"))
        .unwrap_or_else(|| panic!("no fork: {listed}\n{}", story()));
    let shown = run.cuca(&["show", dir, &fork, "--json"]);
    assert!(
        shown.contains(r#""ModelSwap":{"from":"#) && shown.contains(r#""to":"claude-swapped-in""#),
        "{shown}"
    );
    // The same swap from a new process replays the fork whole: the upstream gets nothing.
    assert_eq!(run.read("swap2.status").trim(), "0", "{}", story());
    assert_eq!(run.read("swap2.out").trim(), ANSWER, "{}", story());
    let again: Vec<String> = run.read("swap.again").lines().map(str::to_owned).collect();
    assert_eq!(again.len(), 2);
    assert_eq!(again[0], again[1], "the second swap reached the upstream");
    run.cuca(&["verify", dir]);
}

#[test]
fn codex_runs_one_shell_command_recorded_then_replayed_offline() {
    let (Some(modules), true) = (node_modules(), can_unshare()) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let env = codex_env(scratch.path());
    let args = codex_args(&modules.join(".bin/codex"), "Run: echo cuca-tool-ok");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = record_then_replay(&args, &env);
    let output =
        run.assert_recorded_and_replayed("/v1/responses", "exec_command", "The tool returned:");
    // The command ran and its output travelled back to the model and into the answer.
    assert!(output.contains("cuca-tool-ok"), "{output}");
}

/// How much longer than the whole replayed run a replay the recording does not hold may take
/// to end: one refused call and no retry, on a machine where the agent's own start may take
/// seconds (measured beside it, in the same run). Before the refusal said `x-should-retry:
/// false`, the Anthropic SDK retried it ten times over three minutes, and Codex five times
/// with back-off (about six seconds).
const DIVERGENCE_REACHES_THE_USER_MS: u64 = 3_000;

impl Run {
    /// The third run of [`record_then_replay`] (a changed prompt): it failed, said why, and
    /// ended within [`DIVERGENCE_REACHES_THE_USER_MS`] of the whole replayed run's time.
    fn assert_divergence_heard_at_once(&self) {
        let story = format!(
            "{}--- diverge.out\n{}\n--- diverge.err\n{}\n",
            self.story(),
            self.read("diverge.out"),
            self.read("diverge.err")
        );
        assert_ne!(self.read("diverge.status").trim(), "0", "{story}");
        let said = format!("{}{}", self.read("diverge.out"), self.read("diverge.err"));
        assert!(
            said.contains("409") || said.contains("404"),
            "the agent did not show the proxy's refusal\n{story}"
        );
        let ms: u64 = self.read("diverge.ms").trim().parse().unwrap();
        let whole: u64 = self.read("replay.ms").trim().parse().unwrap();
        assert!(
            ms < whole + DIVERGENCE_REACHES_THE_USER_MS,
            "the divergence took {ms} ms to reach the user, the whole replayed run {whole} ms\n{story}"
        );
    }
}

#[test]
fn claude_code_hears_of_a_replay_divergence_at_once() {
    let (Some(modules), true) = (node_modules(), can_unshare()) else {
        return;
    };
    let claude = modules.join(".bin/claude");
    let scratch = tempfile::tempdir().unwrap();
    let mut env = claude_env(scratch.path(), 1024);
    env.push(("DIVERGE_FROM", "Run: echo cuca-tool-ok".to_owned()));
    env.push(("DIVERGE_TO", "Run: echo something-else".to_owned()));
    let run = record_then_replay(
        &[
            claude.to_str().unwrap(),
            "-p",
            "Run: echo cuca-tool-ok",
            "--output-format",
            "text",
            "--allowedTools",
            "Bash",
        ],
        &env,
    );
    run.assert_divergence_heard_at_once();
}

#[test]
fn codex_hears_of_a_replay_divergence_at_once() {
    let (Some(modules), true) = (node_modules(), can_unshare()) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let mut env = codex_env(scratch.path());
    env.push(("DIVERGE_FROM", "Run: echo cuca-tool-ok".to_owned()));
    env.push(("DIVERGE_TO", "Run: echo something-else".to_owned()));
    let args = codex_args(&modules.join(".bin/codex"), "Run: echo cuca-tool-ok");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = record_then_replay(&args, &env);
    run.assert_divergence_heard_at_once();
}

/// The real llama-server and its tiny random-weight model (`shared/tools/llama-server.sh
/// build`, run by `.ci/run`): the binary and the GGUF, as an environment for
/// `record_replay.sh`.
fn llama_server() -> Option<Vec<(&'static str, String)>> {
    let server = installed(
        "CUCA_TEST_LLAMA_SERVER",
        "the llama-server binary that shared/tools/llama-server.sh builds",
    )?;
    let model = installed(
        "CUCA_TEST_LLAMA_MODEL",
        "the tiny GGUF model that shared/tools/llama-server.sh makes",
    )?;
    Some(vec![
        ("LLAMA_SERVER", server.display().to_string()),
        ("LLAMA_MODEL", model.display().to_string()),
    ])
}

impl Run {
    /// Both runs exited 0 and the replay printed exactly what the recording printed (a call
    /// served another's answer shows here): the failure story and the recorded output.
    fn both_succeeded_alike(&self) -> (String, String) {
        let story = self.story();
        assert_eq!(
            self.read("record.status").trim(),
            "0",
            "record failed\n{story}"
        );
        assert_eq!(
            self.read("replay.status").trim(),
            "0",
            "replay failed\n{story}"
        );
        let recorded = self.read("record.out");
        assert_eq!(
            self.read("replay.out"),
            recorded,
            "replay printed another output: a call got another's answer\n{story}"
        );
        (story, recorded)
    }

    /// The proof against a real model server: both runs succeeded and printed the same
    /// final output, and the session verifies clean and holds the answers, their finish and
    /// usage, recorded in wire format `format` (its `CallWire` record).
    fn assert_same_offline(&self, format: &str) -> String {
        let (story, recorded) = self.both_succeeded_alike();
        let sessions = self.sessions();
        let dir = sessions.to_str().unwrap();
        self.cuca(&["verify", dir]);
        // An agent's calls may land in several conversations of the session (Claude Code's
        // title call beside its answer): the records are looked for in all of them.
        let (mut kinds, mut shown) = (String::new(), String::new());
        for id in self.session_ids(dir) {
            kinds += &self.cuca(&["show", dir, &id, "--kinds"]);
            shown += &self.cuca(&["replay", dir, &id]);
        }
        for kind in [
            "Output",
            "TokenUsage",
            "CallFinish",
            "CallRequest",
            "CallWire",
        ] {
            assert!(
                kinds.contains(kind),
                "the session lacks {kind}: {kinds}\n{story}"
            );
        }
        assert!(
            shown.contains(&format!("wire ({format})")),
            "the calls were not recorded as {format}:\n{shown}\n{story}"
        );
        recorded
    }

    /// The ids of every session in `dir`, as `cuca sessions --json` lists them.
    fn session_ids(&self, dir: &str) -> Vec<String> {
        self.cuca(&["sessions", dir, "--json"])
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|row| row["session"].as_str().map(str::to_owned))
            .collect()
    }
}

/// Claude Code: `claude -p` with `ANTHROPIC_BASE_URL` at the proxy, in record mode
/// in front of a real llama-server; then replay mode with the upstream gone: the same final
/// output." llama-server runs with a 64k context for Claude Code's prompt (the tiny model's
/// trained 4k overridden), `CLAUDE_CODE_MAX_OUTPUT_TOKENS` caps the answer, and the
/// end-of-text token is favoured so the random-weight model ends it (`record_replay.sh`).
#[test]
fn claude_code_against_a_real_llama_server_recorded_then_replayed_offline() {
    let (Some(modules), Some(llama), true) = (node_modules(), llama_server(), can_unshare()) else {
        return;
    };
    let claude = modules.join(".bin/claude");
    let scratch = tempfile::tempdir().unwrap();
    let mut env = claude_env(scratch.path(), 256);
    env.extend(llama);
    env.push(("LLAMA_EOS_BIAS", "2".to_owned()));
    let run = record_then_replay(
        &[
            claude.to_str().unwrap(),
            "-p",
            "Say hello.",
            "--output-format",
            "text",
        ],
        &env,
    );
    run.assert_same_offline("messages");
}

/// Codex CLI: `codex exec` with a custom model provider (`wire_api =
/// "responses"`, `base_url` at the proxy), the same record-then-replay."
#[test]
fn codex_against_a_real_llama_server_recorded_then_replayed_offline() {
    let (Some(modules), Some(llama), true) = (node_modules(), llama_server(), can_unshare()) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let mut env = codex_env(scratch.path());
    env.extend(llama);
    let args = codex_args(&modules.join(".bin/codex"), "Say hello.");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = record_then_replay(&args, &env);
    run.assert_same_offline("responses");
}

/// One tool loop of `drive_sdk.py CASE`, recorded then replayed; the SDK reads the base URL
/// `cuca run` set.
fn python_sdk(case: &str, route: &str) {
    let (Some(python), true) = (python(), can_unshare()) else {
        return;
    };
    let script = agents_dir().join("drive_sdk.py");
    let run = record_then_replay(
        &[python.to_str().unwrap(), script.to_str().unwrap(), case],
        &[("OPENAI_AGENTS_DISABLE_TRACING", "1".to_owned())],
    );
    let output = run.assert_recorded_and_replayed(route, "lookup_word", ANSWER);
    let answer: serde_json::Value = serde_json::from_str(&output).unwrap();
    assert_eq!(answer["text"], ANSWER, "{output}");
    assert_eq!(
        answer["tool_calls"],
        serde_json::json!([["lookup_word", {"word": "cuca"}]]),
        "{output}"
    );
}

#[test]
fn agents_sdk_default_model_runs_one_function_tool_recorded_then_replayed() {
    python_sdk("agents", "/v1/responses");
}

#[test]
fn anthropic_sdk_messages_create_with_one_tool_recorded_then_replayed() {
    python_sdk("anthropic-create", "/v1/messages");
}

#[test]
fn anthropic_sdk_messages_stream_with_one_tool_recorded_then_replayed() {
    python_sdk("anthropic-stream", "/v1/messages");
}

#[test]
fn python_openai_responses_create_with_one_tool_recorded_then_replayed() {
    python_sdk("responses-create", "/v1/responses");
}

#[test]
fn python_openai_responses_streamed_with_one_tool_recorded_then_replayed() {
    python_sdk("responses-stream", "/v1/responses");
}

/// The same loop with the npm `openai` package.
fn npm_openai(case: &str) {
    let (Some(modules), true) = (node_modules(), can_unshare()) else {
        return;
    };
    let script = agents_dir().join("drive_openai.mjs");
    let run = record_then_replay(
        &["node", script.to_str().unwrap(), case],
        &[("NODE_PATH", modules.display().to_string())],
    );
    let output = run.assert_recorded_and_replayed("/v1/responses", "lookup_word", ANSWER);
    let answer: serde_json::Value = serde_json::from_str(&output).unwrap();
    assert_eq!(answer["text"], ANSWER, "{output}");
}

#[test]
fn npm_openai_responses_create_with_one_tool_recorded_then_replayed() {
    npm_openai("responses-create");
}

#[test]
fn npm_openai_responses_streamed_with_one_tool_recorded_then_replayed() {
    npm_openai("responses-stream");
}

impl Run {
    /// The proof for an app that holds several conversations on one base URL:
    /// both runs succeeded and printed the same output, holding each of `answers`; the
    /// recording holds `conversations` conversations of the session, each verifying clean,
    /// and the tool `tool` was called in them.
    fn assert_conversations_replayed(&self, conversations: u64, tool: &str, answers: &[&str]) {
        let (story, recorded) = self.both_succeeded_alike();
        for answer in answers {
            assert!(
                recorded.contains(answer),
                "the run's output lacks {answer:?}\n{story}"
            );
        }
        let sessions = self.sessions();
        let dir = sessions.to_str().unwrap();
        self.cuca(&["verify", dir]);
        let ids = self.session_ids(dir);
        let expected: Vec<String> = (0..conversations)
            .map(|n| match n {
                0 => SESSION.to_owned(),
                n => cuca::conversation_session_id(SESSION, n),
            })
            .collect();
        for id in &expected {
            assert!(ids.contains(id), "no conversation {id} in {ids:?}\n{story}");
        }
        let shown: String = expected
            .iter()
            .map(|id| self.cuca(&["replay", dir, id]))
            .collect();
        assert!(
            shown.contains(tool),
            "no call of {tool} recorded:\n{shown}\n{story}"
        );
    }
}

/// Two Agents SDK runners on one client (Chat Completions model), each recorded through one
/// base URL, then replayed with the upstream gone: every call gets its own recorded answer. The runners run at once; each one's tool returns its own word.
#[test]
fn two_agents_sdk_runners_on_one_client_record_two_conversations_and_replay_each_its_own() {
    let (Some(python), true) = (python(), can_unshare()) else {
        return;
    };
    let script = agents_dir().join("drive_sdk.py");
    let run = record_then_replay(
        &[
            python.to_str().unwrap(),
            script.to_str().unwrap(),
            "agents-two-runners",
        ],
        &[("OPENAI_AGENTS_DISABLE_TRACING", "1".to_owned())],
    );
    run.assert_conversations_replayed(
        2,
        "lookup_word",
        &[
            "The tool returned: cuca-tool-ok-ada",
            "The tool returned: cuca-tool-ok-bob",
        ],
    );
}

/// LangChain (`invoke`, then `stream`, then a `bind_tools` loop on one `ChatOpenAI`): the two answers to one question in one conversation, the tool loop in
/// another, and the app replayed whole.
#[test]
fn a_langchain_app_with_a_bind_tools_loop_on_one_chat_openai_replays_whole() {
    let (Some(python), true) = (python(), can_unshare()) else {
        return;
    };
    let script = agents_dir().join("drive_sdk.py");
    let run = record_then_replay(
        &[
            python.to_str().unwrap(),
            script.to_str().unwrap(),
            "langchain",
        ],
        &[],
    );
    run.assert_conversations_replayed(
        2,
        "lookup_word",
        &["Hello from the scripted upstream.", ANSWER],
    );
}
