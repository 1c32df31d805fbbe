//! Fork mode onto another model (`cuca run --mode fork --from POINT --model MODEL`), `cuca
//! compare` and `cuca diff`'s word on a model switch, against a scripted upstream that answers
//! as the model each request names and logs every call it gets.
// A failed step is a failed test.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn cuca() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cuca"));
    command
        .env_remove("NO_COLOR")
        .env_remove("CUCA_CALL_LOG")
        .env("CUCA_CALL_LOG", "off");
    command
}

fn agents() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents")
}

/// Kills the upstream when the test ends, whichever way it ends.
struct Upstream {
    child: std::process::Child,
    url: String,
    log: PathBuf,
}

impl Upstream {
    fn start(dir: &Path) -> Upstream {
        let log = dir.join("upstream.log");
        let mut child = Command::new("python3")
            .arg(agents().join("per_model_upstream.py"))
            .arg(&log)
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
        Upstream { child, url, log }
    }

    /// The calls that reached it since the last look, as `MODEL N` (N: the user messages the
    /// call carried, so the call's number), and forgets them.
    fn calls(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let _ = std::fs::remove_file(&self.log);
        text.lines().map(str::to_owned).collect()
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `cuca run --store STORE --session s ARGS -- python3 three_calls.py` in `work`.
fn run_agent(store: &Path, work: &Path, args: &[&str]) -> Output {
    let output = cuca()
        .arg("run")
        .arg("--store")
        .arg(store)
        .args(["--session", "s"])
        .args(args)
        .arg("--")
        .arg("python3")
        .arg(agents().join("three_calls.py"))
        .current_dir(work)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    output
}

fn json_lines(output: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn records(store: &Path, session: &str) -> Vec<serde_json::Value> {
    let output = cuca()
        .args(["--no-pager", "show", "--json"])
        .arg(store)
        .arg(session)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    json_lines(&output)
}

fn sessions(store: &Path) -> Vec<String> {
    let output = cuca()
        .args(["--no-pager", "sessions", "--json", "--sort", "name"])
        .arg(store)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    json_lines(&output)
        .iter()
        .map(|row| row["session"].as_str().unwrap().to_owned())
        .collect()
}

/// The original's records, less the `Fork` audit records a fork leaves in its parent.
fn own_records(store: &Path, session: &str) -> Vec<serde_json::Value> {
    records(store, session)
        .into_iter()
        .filter(|record| record["event"].get("Fork").is_none())
        .collect()
}

/// Records session `s` in `store`: three calls, all to model a.
fn record(store: &Path, work: &Path, upstream: &Upstream) {
    run_agent(store, work, &["--upstream", &upstream.url]);
    assert_eq!(upstream.calls(), ["a 1", "a 2", "a 3"]);
}

#[test]
fn a_fork_onto_another_model_replays_before_the_point_and_sends_the_rest_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let (store, work) = (dir.path().join("store"), dir.path().join("work"));
    std::fs::create_dir_all(&work).unwrap();
    let upstream = Upstream::start(dir.path());
    record(&store, &work, &upstream);
    let before = records(&store, "s");

    let swap = [
        "--mode",
        "fork",
        "--from",
        "2",
        "--model",
        "b",
        "--upstream",
    ];
    let forked = run_agent(
        &store,
        &work,
        &[&swap[..], &[upstream.url.as_str()]].concat(),
    );
    // The first call was replayed; the second and third went to model b, and only they.
    assert_eq!(upstream.calls(), ["b 2", "b 3"], "{}", stderr(&forked));
    assert_eq!(
        std::fs::read_to_string(work.join("answer.txt")).unwrap(),
        "b-answer-3\n"
    );

    let forks: Vec<String> = sessions(&store)
        .into_iter()
        .filter(|id| id.starts_with("s:fork:"))
        .collect();
    assert_eq!(forks.len(), 1, "{forks:?}");
    let fork = &forks[0];
    let prefix = &before[..before
        .iter()
        .position(|r| r["event"].get("CallRequest").is_some())
        .unwrap()];
    let events: Vec<serde_json::Value> = records(&store, fork)
        .into_iter()
        .map(|r| r["event"].clone())
        .collect();
    // The fork begins with the recording's records up to the point, then says which model
    // it goes on with, before the first call it sent live.
    let swap_at = events
        .iter()
        .position(|e| e.get("ModelSwap").is_some())
        .expect("a ModelSwap record");
    assert_eq!(events[swap_at]["ModelSwap"]["from"], "a");
    assert_eq!(events[swap_at]["ModelSwap"]["to"], "b");
    assert!(swap_at > prefix.len());
    let asked: Vec<&str> = events
        .iter()
        .filter_map(|e| e.get("CallRequest"))
        .map(|c| c["model"].as_str().unwrap())
        .collect();
    // The recorded requests show the model actually sent.
    assert_eq!(asked, ["a", "b", "b"]);
    // The recording itself is as it was: only the fork's audit record was added.
    assert_eq!(own_records(&store, "s"), before);

    // The same swap again, from a new process: every call is replayed, from the recording up
    // to the point and from the fork after it; the upstream gets none.
    std::fs::remove_file(work.join("answer.txt")).unwrap();
    let again = run_agent(
        &store,
        &work,
        &[&swap[..], &[upstream.url.as_str()]].concat(),
    );
    assert_eq!(upstream.calls(), Vec::<String>::new(), "{}", stderr(&again));
    assert_eq!(
        std::fs::read_to_string(work.join("answer.txt")).unwrap(),
        "b-answer-3\n"
    );
    assert_eq!(
        sessions(&store)
            .iter()
            .filter(|id| id.starts_with("s:fork:"))
            .count(),
        1
    );

    // `cuca diff` names the switch.
    let diff = cuca()
        .args(["--no-pager", "diff"])
        .arg(&store)
        .args(["s", fork])
        .output()
        .unwrap();
    assert!(diff.status.success(), "{}", stderr(&diff));
    let text = String::from_utf8_lossy(&diff.stdout);
    assert!(
        text.contains(&format!("model switch: s asked for a, {fork} for b")),
        "{text}"
    );
    let diff_json = cuca()
        .args(["--no-pager", "diff", "--json"])
        .arg(&store)
        .args(["s", fork])
        .output()
        .unwrap();
    let lines = json_lines(&diff_json);
    let b_tail = lines.iter().find_map(|l| l.get("b_tail")).unwrap();
    assert_eq!(b_tail["model"], "b");
    assert_eq!(b_tail["model_switched"], true);

    let verify = cuca().arg("verify").arg(&store).output().unwrap();
    assert!(verify.status.success(), "{}", stderr(&verify));
}

#[test]
fn a_call_that_differs_before_the_point_is_a_divergence_and_reaches_no_model() {
    let dir = tempfile::tempdir().unwrap();
    let (store, work) = (dir.path().join("store"), dir.path().join("work"));
    std::fs::create_dir_all(&work).unwrap();
    let upstream = Upstream::start(dir.path());
    record(&store, &work, &upstream);
    // A point past the first call: the first two calls must match the recording, and the
    // agent's calls do; one that asks something else before the point is refused.
    let output = cuca()
        .arg("run")
        .arg("--store")
        .arg(&store)
        .args(["--session", "s", "--mode", "fork", "--from", "3", "--model", "b"])
        .args(["--upstream", &upstream.url, "--", "sh", "-c"])
        .arg(format!(
            "curl -s -o /dev/null -w '%{{http_code}}' \"$OPENAI_BASE_URL/chat/completions\" -H 'content-type: application/json' -d '{}'",
            r#"{"model":"a","messages":[{"role":"system","content":"You do three steps."},{"role":"user","content":"something else"}]}"#
        ))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "409",
        "{}",
        stderr(&output)
    );
    assert_eq!(upstream.calls(), Vec::<String>::new());
    // `--from` needs `--model`, and a swap needs fork mode.
    for args in [
        &["--mode", "fork", "--from", "2"][..],
        &["--mode", "record", "--from", "2", "--model", "b"][..],
        &["--mode", "fork", "--from", "1", "--model", "b"][..],
    ] {
        let refused = cuca()
            .arg("run")
            .arg("--store")
            .arg(&store)
            .args(["--session", "s", "--upstream", &upstream.url])
            .args(args)
            .args(["--", "true"])
            .output()
            .unwrap();
        assert_eq!(
            refused.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&refused)
        );
    }
}

#[test]
fn compare_runs_each_model_in_its_own_copy_and_grades_it() {
    let dir = tempfile::tempdir().unwrap();
    let (store, work) = (dir.path().join("store"), dir.path().join("work"));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("task.md"), "three steps\n").unwrap();
    let upstream = Upstream::start(dir.path());
    record(&store, &work, &upstream);
    std::fs::remove_file(work.join("answer.txt")).unwrap();
    let before = records(&store, "s");

    let compare = |json: bool| {
        let mut command = cuca();
        command
            .args(["--no-pager", "compare"])
            .arg(&store)
            .args(["s", "--from", "2", "--models", "a,b", "--jobs", "2"])
            .args(["--verify", "grep -q b-answer answer.txt && test -f task.md"])
            .args(["--upstream", &upstream.url]);
        if json {
            command.arg("--json");
        }
        let output = command
            .arg("--")
            .arg("python3")
            .arg(agents().join("three_calls.py"))
            .current_dir(&work)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        output
    };
    let shown = compare(false);
    let text = String::from_utf8_lossy(&shown.stdout).into_owned();
    let mut calls = upstream.calls();
    calls.sort();
    // Each model got the calls from the point on, and nothing before it.
    assert_eq!(calls, ["a 2", "a 3", "b 2", "b 3"], "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("model"), "{text}");
    for word in [
        "verdict",
        "turns",
        "tokens in",
        "tokens out",
        "cost",
        "wall",
        "fork",
    ] {
        assert!(lines[0].contains(word), "{text}");
    }
    let row = |model: &str| {
        *lines
            .iter()
            .find(|l| l.split_whitespace().next() == Some(model))
            .unwrap_or_else(|| panic!("no row for {model}: {text}"))
    };
    let (a, b) = (row("a"), row("b"));
    assert_eq!(a.split_whitespace().nth(1), Some("fail"), "{text}");
    assert_eq!(b.split_whitespace().nth(1), Some("pass"), "{text}");
    // Models the price table does not know cost "unknown", never 0.
    assert!(a.contains("unknown") && b.contains("unknown"), "{text}");
    assert!(b.contains("s:fork:s:"), "{text}");
    // The working directory the compare ran from is left as it was.
    assert!(!work.join("answer.txt").exists());

    let rows = json_lines(&compare(true));
    assert_eq!(rows.len(), 2);
    // The second compare replays each model's fork: nothing reaches the upstream.
    assert_eq!(upstream.calls(), Vec::<String>::new());
    for row in &rows {
        let model = row["model"].as_str().unwrap();
        assert_eq!(row["verdict"], if model == "b" { "pass" } else { "fail" });
        assert_eq!(row["turns"], 2, "{row}");
        assert_eq!(row["prompt_tokens"], 50, "{row}");
        assert_eq!(row["completion_tokens"], 6, "{row}");
        assert!(row["cost_usd"].is_null(), "{row}");
        let fork = row["fork"].as_str().unwrap();
        let swapped = records(&store, fork)
            .into_iter()
            .find_map(|r| r["event"].get("ModelSwap").cloned())
            .unwrap();
        assert_eq!(swapped["to"], model);
        let answer = std::fs::read_to_string(
            Path::new(row["workspace"].as_str().unwrap()).join("answer.txt"),
        )
        .unwrap();
        assert_eq!(answer, format!("{model}-answer-3\n"));
    }
    assert_eq!(own_records(&store, "s"), before);
    let verify = cuca().arg("verify").arg(&store).output().unwrap();
    assert!(verify.status.success(), "{}", stderr(&verify));
}
