//! Strict replay for CI: `cuca run --mode replay --strict` fails when the agent left a
//! recorded call unasked or was refused a call (even one it swallowed), `--report` writes
//! JUnit XML or JSON naming them, `--max-age` warns of or fails on an old recording, and
//! `--ignore-json-path` leaves a named request field out of the match. The agent is a small
//! standard-library Python script (tests/strict/dialogue.py) against the scripted upstream;
//! the pytest proof with the `openai` SDK is in tests/ci_docs.rs.
// A failed step is a failed test.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn cuca() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cuca"));
    command.env_remove("NO_COLOR").env_remove("CUCA_CALL_LOG");
    command
}

/// Kills the scripted upstream when the test ends, whichever way it ends.
struct Upstream(std::process::Child, String);

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn scripted_upstream() -> Upstream {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/scripted_upstream.py");
    let mut child = Command::new("python3")
        .arg(script)
        .arg("0")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_owned();
    Upstream(child, url)
}

fn dialogue() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/strict/dialogue.py")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `cuca run ARGS -- dialogue.py PARAMETERS PROMPTS…` on session `demo` in `dir`.
fn run(dir: &Path, args: &[&str], parameters: &str, prompts: &[&str]) -> Output {
    cuca()
        .arg("run")
        .arg("--store")
        .arg(dir)
        .args(["--session", "demo"])
        .args(args)
        .arg("--")
        .arg("python3")
        .arg(dialogue())
        .arg(parameters)
        .args(prompts)
        .output()
        .unwrap()
}

const PROMPTS: [&str; 3] = [
    "Name the capital of Portugal.",
    "And its river?",
    "Thank you.",
];

/// Records the three-turn dialogue with `parameters` into a new store.
fn recorded(parameters: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let upstream = scripted_upstream();
    let output = run(
        dir.path(),
        &["--mode", "record", "--upstream", &upstream.1],
        parameters,
        &PROMPTS,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout)
            .matches("Hello from the scripted upstream.")
            .count(),
        3
    );
    dir
}

fn replay(dir: &Path, args: &[&str], parameters: &str, prompts: &[&str]) -> Output {
    let mut all = vec!["--mode", "replay"];
    all.extend_from_slice(args);
    run(dir, &all, parameters, prompts)
}

#[test]
fn strict_replay_passes_when_every_recorded_call_is_asked_for_again() {
    let dir = recorded("{}");
    let output = replay(dir.path(), &["--strict"], "{}", &PROMPTS);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("strict replay passed: all 3 recorded calls consumed"),
        "{}",
        stderr(&output)
    );
}

/// "strict replay fails for an unconsumed call": the agent stops a call short of the
/// recording and exits 0; without `--strict` that is a pass as before.
#[test]
fn strict_replay_fails_when_a_recorded_call_is_never_asked_for() {
    let dir = recorded("{}");
    let lax = replay(dir.path(), &[], "{}", &PROMPTS[..2]);
    assert_eq!(lax.status.code(), Some(0), "{}", stderr(&lax));
    let strict = replay(dir.path(), &["--strict"], "{}", &PROMPTS[..2]);
    let said = stderr(&strict);
    assert_eq!(strict.status.code(), Some(1), "{said}");
    assert!(
        said.contains("2 of 3 recorded calls consumed, 0 refused"),
        "{said}"
    );
    let unasked: Vec<&str> = said
        .lines()
        .filter(|l| l.starts_with("  ") && l.contains("never asked for"))
        .collect();
    assert_eq!(unasked.len(), 1, "{said}");
    assert!(unasked[0].contains("(turn 3 of demo)"), "{said}");
    assert!(unasked[0].trim_start().starts_with("demo:"), "{said}");
}

/// "strict replay fails for a swallowed divergence": the agent's second prompt changed, it
/// got a 409, printed it and exited 0.
#[test]
fn strict_replay_fails_on_a_divergence_the_agent_swallowed() {
    let dir = recorded("{}");
    let changed = [PROMPTS[0], "And its bridges?", PROMPTS[2]];
    let lax = replay(dir.path(), &[], "{}", &changed);
    assert_eq!(lax.status.code(), Some(0), "{}", stderr(&lax));
    assert!(stderr(&lax).contains("swallowed 409"), "{}", stderr(&lax));
    let strict = replay(dir.path(), &["--strict"], "{}", &changed);
    let said = stderr(&strict);
    assert_eq!(strict.status.code(), Some(1), "{said}");
    assert!(said.contains("swallowed 409"), "{said}");
    let refused = said
        .lines()
        .find(|l| l.contains("refused (409 cuca_replay_diverged at messages[2])"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(refused.contains("(turn 2 of demo)"), "{said}");
    assert!(
        refused.contains("first difference at messages[2].content[0].text, character 8: expected \"And its river?\", got \"And its bridges?\""),
        "{said}"
    );
    assert!(said.contains("(turn 3 of demo): never asked for"), "{said}");
    assert!(
        said.contains("1 of 3 recorded calls consumed, 1 refused"),
        "{said}"
    );
}

/// The JUnit file a CI reporter reads: well formed, one testcase per recorded call, the
/// failures naming the session, the point and the first difference.
#[test]
fn the_junit_report_is_well_formed_and_names_each_failure() {
    let dir = recorded("{}");
    let report = dir.path().join("report.xml");
    let changed = [PROMPTS[0], "And its bridges?", PROMPTS[2]];
    let output = replay(
        dir.path(),
        &["--strict", "--report", report.to_str().unwrap()],
        "{}",
        &changed,
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let text = std::fs::read_to_string(&report).unwrap();
    let xml = roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let root = xml.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    assert_eq!(
        (root.attribute("tests"), root.attribute("failures")),
        (Some("3"), Some("2")),
        "{text}"
    );
    let suite = root
        .children()
        .find(|n| n.has_tag_name("testsuite"))
        .unwrap();
    assert_eq!(suite.attribute("name"), Some("cuca replay demo"));
    let cases: Vec<roxmltree::Node> = suite
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), 3, "{text}");
    assert!(cases
        .iter()
        .all(|c| c.attribute("classname") == Some("cuca.replay.demo")));
    let failure = |case: &roxmltree::Node| {
        case.children()
            .find(|n| n.has_tag_name("failure"))
            .map(|f| {
                (
                    f.attribute("type").unwrap().to_owned(),
                    f.attribute("message").unwrap().to_owned(),
                )
            })
    };
    assert_eq!(failure(&cases[0]), None, "{text}");
    let (kind, message) = failure(&cases[1]).unwrap();
    assert_eq!(kind, "diverged");
    let point = cases[1]
        .attribute("name")
        .unwrap()
        .split_once('(')
        .unwrap()
        .1
        .trim_end_matches(')')
        .to_owned();
    assert!(point.starts_with("demo:"), "{text}");
    assert!(
        message.starts_with(&format!(
            "{point}: first difference at messages[2].content[0].text"
        )),
        "{message}"
    );
    assert!(message.contains("\"And its bridges?\""), "{message}");
    let (kind, message) = failure(&cases[2]).unwrap();
    assert_eq!(kind, "unconsumed");
    assert!(
        message.contains("(turn 3 of demo) was never asked for"),
        "{message}"
    );
}

#[test]
fn the_json_report_lists_every_call_and_the_divergence() {
    let dir = recorded("{}");
    let report = dir.path().join("report.json");
    let output = replay(
        dir.path(),
        &[
            "--report",
            report.to_str().unwrap(),
            "--report-format",
            "json",
        ],
        "{}",
        &[PROMPTS[0], "And its bridges?"],
    );
    // No `--strict`: the report is written and the run keeps the agent's status.
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(json["passed"], false);
    let session = &json["sessions"][0];
    assert_eq!(session["session"], "demo");
    assert_eq!(session["unconsumed"], 2);
    let consumed: Vec<bool> = session["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["consumed"].as_bool().unwrap())
        .collect();
    assert_eq!(consumed, [true, false, false]);
    let divergence = &session["divergences"][0];
    assert_eq!(divergence["status"], 409);
    assert_eq!(divergence["point"], session["calls"][1]["point"]);
    assert_eq!(
        divergence["difference"]["path"],
        "messages[2].content[0].text"
    );
}

/// `--max-age`: an old recording is warned of (the agent runs) or, with `--on-expiry fail`,
/// fails the run before the agent runs; a young one says nothing.
#[test]
fn max_age_warns_of_or_fails_on_an_old_recording() {
    let dir = recorded("{}");
    let young = replay(dir.path(), &["--max-age", "30d"], "{}", &PROMPTS);
    assert_eq!(young.status.code(), Some(0), "{}", stderr(&young));
    assert!(!stderr(&young).contains("--max-age"), "{}", stderr(&young));
    // The recording was made before this line: a millisecond is long past.
    let warned = replay(dir.path(), &["--max-age", "1ms"], "{}", &PROMPTS);
    let said = stderr(&warned);
    assert_eq!(warned.status.code(), Some(0), "{said}");
    assert!(
        said.contains("cuca run: warning: the recording of session \"demo\" is")
            && said.contains("older than --max-age 1ms"),
        "{said}"
    );
    assert_eq!(
        String::from_utf8_lossy(&warned.stdout)
            .matches("Hello")
            .count(),
        3
    );
    let report = dir.path().join("age.xml");
    let failed = replay(
        dir.path(),
        &[
            "--max-age",
            "1ms",
            "--on-expiry",
            "fail",
            "--report",
            report.to_str().unwrap(),
        ],
        "{}",
        &PROMPTS,
    );
    let said = stderr(&failed);
    assert_eq!(failed.status.code(), Some(1), "{said}");
    assert!(said.contains("older than --max-age 1ms"), "{said}");
    assert!(failed.stdout.is_empty(), "the agent ran: {said}");
    let text = std::fs::read_to_string(&report).unwrap();
    let xml = roxmltree::Document::parse(&text).unwrap();
    let expired = xml
        .descendants()
        .find(|n| n.has_tag_name("failure"))
        .unwrap();
    assert_eq!(expired.attribute("type"), Some("expired"), "{text}");
    assert_eq!(
        expired.parent().unwrap().attribute("name"),
        Some("recording age")
    );
}

/// `--ignore-json-path '$.seed'`: a seed that changes every run matches; a changed
/// temperature beside it still diverges.
#[test]
fn an_ignored_json_path_matches_a_changed_field_and_nothing_beside_it() {
    let dir = recorded(r#"{"seed": 1, "temperature": 0.2}"#);
    let reseeded = r#"{"seed": 2, "temperature": 0.2}"#;
    let strict = ["--strict"];
    let unignored = replay(dir.path(), &strict, reseeded, &PROMPTS);
    assert_eq!(unignored.status.code(), Some(1), "{}", stderr(&unignored));
    assert!(
        stderr(&unignored).contains("the request's \"seed\" differs"),
        "{}",
        stderr(&unignored)
    );
    let ignored = ["--strict", "--ignore-json-path", "$.seed"];
    let passed = replay(dir.path(), &ignored, reseeded, &PROMPTS);
    assert_eq!(passed.status.code(), Some(0), "{}", stderr(&passed));
    let warmer = replay(
        dir.path(),
        &ignored,
        r#"{"seed": 2, "temperature": 0.7}"#,
        &PROMPTS,
    );
    assert_eq!(warmer.status.code(), Some(1), "{}", stderr(&warmer));
    assert!(
        stderr(&warmer).contains("the request's \"temperature\" differs"),
        "{}",
        stderr(&warmer)
    );
    let bad = replay(
        dir.path(),
        &["--ignore-json-path", "$..seed"],
        "{}",
        &PROMPTS,
    );
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("invalid json path \"$..seed\" at character 1"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn strict_is_refused_outside_replay_mode() {
    let dir = tempfile::tempdir().unwrap();
    let output = run(
        dir.path(),
        &[
            "--mode",
            "record",
            "--upstream",
            "http://127.0.0.1:9",
            "--strict",
        ],
        "{}",
        &[],
    );
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("use them with --mode replay"));
}

/// `cuca proxy --mode replay --strict`: checked when it shuts down, over every session a
/// call came in on.
#[test]
fn a_strict_replaying_proxy_reports_on_shutdown() {
    let dir = recorded("{}");
    let report = dir.path().join("proxy.xml");
    let mut proxy = cuca()
        .arg("proxy")
        .arg("--store")
        .arg(dir.path())
        .args(["--mode", "replay", "--listen", "127.0.0.1:0", "--strict"])
        .arg("--report")
        .arg(&report)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(proxy.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_owned();
    let agent = Command::new("python3")
        .arg(dialogue())
        .arg("{}")
        .args(&PROMPTS[..2])
        .env("OPENAI_BASE_URL", format!("{base}/s/demo/v1"))
        .output()
        .unwrap();
    assert!(agent.status.success(), "{}", stderr(&agent));
    let sent = Command::new("kill")
        .args(["-TERM", &proxy.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let stopped = proxy.wait_with_output().unwrap();
    let said = stderr(&stopped);
    assert_eq!(stopped.status.code(), Some(1), "{said}");
    assert!(
        said.contains("cuca proxy: strict replay of session \"demo\": 2 of 3 recorded calls consumed, 0 refused"),
        "{said}"
    );
    let text = std::fs::read_to_string(&report).unwrap();
    let xml = roxmltree::Document::parse(&text).unwrap();
    let failures: Vec<_> = xml
        .descendants()
        .filter(|n| n.has_tag_name("failure"))
        .map(|f| f.attribute("type").unwrap().to_owned())
        .collect();
    assert_eq!(failures, ["unconsumed"], "{text}");
}
