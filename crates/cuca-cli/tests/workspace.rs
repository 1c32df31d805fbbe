//! `cuca run` records the agent's workspace and shell: a snapshot before every model call
//! with what changed, each command run through a shell with its exit status and streams;
//! `cuca checkout` gives the files back as they stood at a point, and a replay run starts in
//! a restored copy, leaving the original workspace alone.
// A failed step is a failed test.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn cuca() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cuca"));
    command.env_remove("NO_COLOR").env_remove("CUCA_CALL_LOG");
    command
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
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

/// A tiny tool loop: a model call, an edit of notes.txt, a second call, a failing command run
/// through `bash -c` (as a coding agent's shell tool runs it), a third call.
const AGENT: &str = r#"
import json, os, subprocess, urllib.request as u
def call(messages):
    request = u.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        json.dumps({"model": "m", "messages": messages}).encode(),
        {"Content-Type": "application/json"})
    return json.load(u.urlopen(request))["choices"][0]["message"]["content"]
print("cwd " + os.getcwd())
print("notes at start " + json.dumps(open("notes.txt").read()))
messages = [{"role": "user", "content": "step one"}]
answer = call(messages)
messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": "step two"}]
with open("notes.txt", "w") as notes:
    notes.write("line one\nline two, edited\nline three\n")
answer = call(messages)
messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": "step three"}]
failed = subprocess.run(["bash", "-c", "echo cuca-out; echo cuca-failure >&2; exit 3"],
    capture_output=True, text=True)
print("exit " + str(failed.returncode) + " " + failed.stderr.strip())
call(messages)
"#;

const OLD_NOTES: &str = "line one\nline two\n";
const NEW_NOTES: &str = "line one\nline two, edited\nline three\n";

fn records(store: &Path, session: &str) -> Vec<serde_json::Value> {
    let shown = cuca()
        .args(["show", "--json"])
        .arg(store)
        .arg(session)
        .output()
        .unwrap();
    assert!(shown.status.success(), "{}", stderr(&shown));
    String::from_utf8_lossy(&shown.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn kind(record: &serde_json::Value) -> &str {
    let event = &record["event"];
    event
        .as_object()
        .and_then(|o| o.keys().next())
        .map(String::as_str)
        .or(event.as_str())
        .unwrap()
}

/// Every file under `dir` (not `.git`, not the session store) with its bytes.
fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if !path.ends_with("cuca-sessions") {
                    pending.push(path);
                }
            } else {
                let name = path.strip_prefix(dir).unwrap().display().to_string();
                found.push((name, std::fs::read(&path).unwrap()));
            }
        }
    }
    found.sort();
    found
}

#[test]
fn a_run_records_snapshots_and_commands_and_checkout_and_replay_restore_them() {
    let workspace = tempfile::tempdir().unwrap();
    let tools = tempfile::tempdir().unwrap();
    let root = workspace.path();
    std::fs::write(root.join("notes.txt"), OLD_NOTES).unwrap();
    std::fs::write(root.join(".gitignore"), "*.log\n").unwrap();
    std::fs::write(root.join("build.log"), "ignored\n").unwrap();
    let agent = tools.path().join("agent.py");
    std::fs::write(&agent, AGENT).unwrap();
    let upstream = scripted_upstream();

    // Recorded with the store at its default, `cuca-sessions` inside the workspace.
    let recorded = cuca()
        .current_dir(root)
        .args([
            "run",
            "--upstream",
            &upstream.1,
            "--session",
            "ws-1",
            "--",
            "python3",
        ])
        .arg(&agent)
        .output()
        .unwrap();
    assert!(recorded.status.success(), "{}", stderr(&recorded));
    let said = String::from_utf8_lossy(&recorded.stdout);
    assert!(said.contains("exit 3 cuca-failure"), "{said}");
    let store = root.join("cuca-sessions");
    let records = records(&store, "ws-1");
    let kinds: Vec<&str> = records.iter().map(kind).collect();

    // A snapshot before every call's request records: three calls, three snapshots, each
    // right before its call's first request record.
    let snapshots: Vec<usize> = (0..records.len())
        .filter(|&i| kinds[i] == "WorkspaceSnapshot")
        .collect();
    assert_eq!(snapshots.len(), 3, "{kinds:?}");
    for &at in &snapshots {
        assert!(
            matches!(kinds[at + 1], "SystemPrompt" | "Message" | "CallRequest"),
            "{kinds:?}"
        );
    }
    let first = &records[snapshots[0]]["event"]["WorkspaceSnapshot"];
    assert_eq!(
        first["changes"],
        serde_json::json!([]),
        "the first is the base"
    );
    let second = &records[snapshots[1]]["event"]["WorkspaceSnapshot"];
    assert_eq!(
        second["changes"],
        serde_json::json!([{
            "path": "notes.txt", "kind": "Modified",
            "added_lines": 2, "removed_lines": 1, "binary": false
        }]),
        "the edit, and nothing of the session store or the ignored log"
    );

    // The failing command, with its status, streams and where it ran.
    let shell: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| kind(r) == "ShellCommand")
        .map(|r| &r["event"]["ShellCommand"])
        .collect();
    assert_eq!(shell.len(), 1, "{kinds:?}");
    let command = shell[0];
    assert_eq!(
        command["command"],
        "echo cuca-out; echo cuca-failure >&2; exit 3"
    );
    assert_eq!(command["exit_status"], 3);
    assert_eq!(command["cwd"], ".");
    assert_eq!(command["origin"], "bash -c");
    assert_eq!(command["stderr"]["tail"], "cuca-failure\n");
    assert_eq!(command["stdout"]["tail"], "cuca-out\n");
    assert_eq!(command["stderr"]["cut"], 0);
    // Recorded after the second call and before the third call's snapshot.
    let shell_at = kinds.iter().position(|k| *k == "ShellCommand").unwrap();
    assert!(
        snapshots[1] < shell_at && shell_at < snapshots[2],
        "{kinds:?}"
    );

    let verify = cuca()
        .arg("verify")
        .arg(&store)
        .arg("ws-1")
        .output()
        .unwrap();
    assert!(verify.status.success(), "{}", stderr(&verify));

    // `cuca replay --turn N` lists what the call saw: turn 2 the edit, turn 3 the failed
    // command with its status and the first lines of its stderr.
    let replay = |turn: &str, json: bool| {
        let mut command = cuca();
        command
            .arg("replay")
            .arg(&store)
            .args(["ws-1", "--turn", turn]);
        if json {
            command.arg("--json");
        }
        let out = command.output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let turn2 = replay("2", false);
    assert!(
        turn2.contains("  workspace: 1 file changed (snapshot sha256:"),
        "{turn2}"
    );
    assert!(turn2.contains("    modified notes.txt +2 -1\n"), "{turn2}");
    let turn3 = replay("3", false);
    assert!(
        turn3.contains("  shell: echo cuca-out; echo cuca-failure >&2; exit 3 (exit status 3, "),
        "{turn3}"
    );
    assert!(
        turn3.contains(" ms, in ., bash -c)\n    stderr: cuca-failure\n"),
        "{turn3}"
    );
    assert!(turn3.contains("  workspace: no file changed"), "{turn3}");
    let turn3: serde_json::Value = serde_json::from_str(&replay("3", true)).unwrap();
    assert_eq!(turn3["shell"][0]["exit_status"], 3, "{turn3}");
    assert_eq!(turn3["shell"][0]["stderr"]["tail"], "cuca-failure\n");
    assert_eq!(turn3["workspace"][0]["changes"], serde_json::json!([]));

    // `cuca grep` finds a command by its line and by what it printed.
    let grep = |pattern: &str| {
        let out = cuca()
            .arg("grep")
            .arg(&store)
            .args([pattern, "--json", "--no-calls"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
            .map(|hit| {
                let kind = format!(
                    "{} {}",
                    hit["kind"].as_str().unwrap(),
                    hit["field"].as_str().unwrap()
                );
                (kind, hit["turn"].clone())
            })
            .collect::<Vec<_>>()
    };
    let in_stderr = grep("cuca-failure");
    assert!(
        in_stderr.contains(&("ShellCommand stderr".to_owned(), serde_json::json!(3))),
        "{in_stderr:?}"
    );
    assert!(
        grep("exit 3").contains(&("ShellCommand command".to_owned(), serde_json::json!(3))),
        "the command line is searched"
    );

    // Checkout at the first call (before the edit): the old file; at the end: the new one.
    let first_point = format!("ws-1:{}", records[snapshots[0]]["sequence"]);
    let before = tempfile::tempdir().unwrap();
    let out = cuca()
        .arg("checkout")
        .arg(&store)
        .arg(&first_point)
        .arg(before.path().join("copy"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let copy = before.path().join("copy");
    assert_eq!(
        std::fs::read_to_string(copy.join("notes.txt")).unwrap(),
        OLD_NOTES
    );
    assert!(
        !copy.join("build.log").exists(),
        "ignored files are not snapshotted"
    );
    assert!(
        !copy.join("cuca-sessions").exists(),
        "nor the session store"
    );
    let after = tempfile::tempdir().unwrap();
    let out = cuca()
        .arg("checkout")
        .arg(&store)
        .arg("ws-1")
        .arg(after.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(after.path().join("notes.txt")).unwrap(),
        NEW_NOTES
    );
    // A non-empty target is refused unless forced.
    let refused = cuca()
        .arg("checkout")
        .arg(&store)
        .arg(&first_point)
        .arg(after.path())
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("not empty"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(
        std::fs::read_to_string(after.path().join("notes.txt")).unwrap(),
        NEW_NOTES
    );

    // Replayed with the upstream gone: the agent starts in a restored copy of the workspace
    // as the first call saw it, and the original is left as the record run left it.
    drop(upstream);
    let original = contents(root);
    let replayed = cuca()
        .current_dir(root)
        .args([
            "run",
            "--mode",
            "replay",
            "--session",
            "ws-1",
            "--",
            "python3",
        ])
        .arg(&agent)
        .output()
        .unwrap();
    assert!(replayed.status.success(), "{}", stderr(&replayed));
    let said = String::from_utf8_lossy(&replayed.stdout);
    let cwd = said
        .lines()
        .next()
        .unwrap()
        .strip_prefix("cwd ")
        .unwrap()
        .to_owned();
    assert_ne!(Path::new(&cwd), root.canonicalize().unwrap());
    assert!(
        stderr(&replayed).contains(&format!("restored into {cwd}")),
        "{}",
        stderr(&replayed)
    );
    assert!(
        said.contains(&format!("notes at start {}", serde_json::json!(OLD_NOTES))),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(Path::new(&cwd).join("notes.txt")).unwrap(),
        NEW_NOTES,
        "the agent's edit happened in the copy"
    );
    assert_eq!(
        contents(root),
        original,
        "the original workspace is untouched"
    );
    std::fs::remove_dir_all(&cwd).unwrap();
}

/// A schema of its own on the test server `CUCA_PG_URL` names, dropped with the backend;
/// `None` (the test skips) without a server, unless `CI` is set.
fn postgres() -> Option<(String, String, cuca::PostgresBackend)> {
    let Some(url) = std::env::var("CUCA_PG_URL").ok().filter(|u| !u.is_empty()) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but CUCA_PG_URL is not"
        );
        eprintln!("skipped: CUCA_PG_URL is unset (bash .ci/postgres.sh start env; . ./env)");
        return None;
    };
    let config = cuca::PostgresConfig::new(&url)
        .unwrap()
        .with_throwaway_schema();
    let backend = cuca::PostgresBackend::connect(config).unwrap();
    Some((url, backend.schema().to_owned(), backend))
}

#[test]
fn on_postgresql_the_snapshots_live_in_the_database_and_any_machine_restores_them() {
    let Some((url, schema, _backend)) = postgres() else {
        return;
    };
    let workspace = tempfile::tempdir().unwrap();
    let tools = tempfile::tempdir().unwrap();
    let root = workspace.path();
    std::fs::write(root.join("notes.txt"), OLD_NOTES).unwrap();
    let agent = tools.path().join("agent.py");
    std::fs::write(&agent, AGENT).unwrap();
    let upstream = scripted_upstream();
    let recorded = cuca()
        .current_dir(root)
        .args(["--schema", &schema, "run", "--store", &url])
        .args([
            "--upstream",
            &upstream.1,
            "--session",
            "ws-pg",
            "--",
            "python3",
        ])
        .arg(&agent)
        .output()
        .unwrap();
    assert!(recorded.status.success(), "{}", stderr(&recorded));
    drop(upstream);
    // Nothing of the recording is on this machine's disk: the workspace holds its own files
    // only, and no object directory was made anywhere beside it.
    let mut names: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["notes.txt"]);

    // Another machine: only the URL. The first call's files, then the last.
    let elsewhere = tempfile::tempdir().unwrap();
    let checkout = |point: &str, into: &Path| {
        let out = cuca()
            .current_dir(elsewhere.path())
            .args(["--schema", &schema, "checkout", &url, point])
            .arg(into)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    };
    let shown = cuca()
        .args(["--schema", &schema, "show", "--json", &url, "ws-pg"])
        .output()
        .unwrap();
    assert!(shown.status.success(), "{}", stderr(&shown));
    let first = String::from_utf8_lossy(&shown.stdout)
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .find(|record| kind(record) == "WorkspaceSnapshot")
        .unwrap()["sequence"]
        .clone();
    checkout(&format!("ws-pg:{first}"), &elsewhere.path().join("before"));
    checkout("ws-pg", &elsewhere.path().join("after"));
    assert_eq!(
        std::fs::read_to_string(elsewhere.path().join("before/notes.txt")).unwrap(),
        OLD_NOTES
    );
    assert_eq!(
        std::fs::read_to_string(elsewhere.path().join("after/notes.txt")).unwrap(),
        NEW_NOTES
    );

    // And a replay run from the database starts the agent in a copy restored from it.
    let replayed = cuca()
        .current_dir(elsewhere.path())
        .args(["--schema", &schema, "run", "--store", &url])
        .args(["--mode", "replay", "--session", "ws-pg", "--", "python3"])
        .arg(&agent)
        .output()
        .unwrap();
    assert!(replayed.status.success(), "{}", stderr(&replayed));
    let said = String::from_utf8_lossy(&replayed.stdout);
    assert!(
        said.contains(&format!("notes at start {}", serde_json::json!(OLD_NOTES))),
        "{said}"
    );
    let cwd = said.lines().next().unwrap().strip_prefix("cwd ").unwrap();
    std::fs::remove_dir_all(cwd).unwrap();
}

/// An agent that runs its shell by absolute path (`/bin/bash`, as Codex runs the login shell
/// of the user's passwd entry): no shim on `PATH` is found, and the command is recorded all
/// the same, through `BASH_ENV`, with its options, status and streams, once.
const ABSOLUTE_AGENT: &str = r#"
import json, os, subprocess, urllib.request as u
def call(content):
    request = u.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        json.dumps({"model": "m", "messages": [{"role": "user", "content": content}]}).encode(),
        {"Content-Type": "application/json"})
    u.urlopen(request).read()
call("one")
ran = subprocess.run(["/bin/bash", "-o", "pipefail", "-lc",
    "echo cuca-piped | false; echo cuca-said >&2; bash -c 'exit 4'", "cuca-zero"],
    capture_output=True, text=True)
print("exit " + str(ran.returncode) + " " + ran.stderr.strip())
call("two")
"#;

#[test]
fn a_bash_started_by_absolute_path_is_recorded_through_bash_env() {
    if !Path::new("/bin/bash").exists() {
        eprintln!("skipping: no /bin/bash");
        return;
    }
    let workspace = tempfile::tempdir().unwrap();
    let tools = tempfile::tempdir().unwrap();
    let agent = tools.path().join("agent.py");
    std::fs::write(&agent, ABSOLUTE_AGENT).unwrap();
    let upstream = scripted_upstream();
    let recorded = cuca()
        .current_dir(workspace.path())
        .args(["run", "--upstream", &upstream.1, "--session", "abs", "--"])
        .arg("python3")
        .arg(&agent)
        .output()
        .unwrap();
    assert!(recorded.status.success(), "{}", stderr(&recorded));
    // The command ran as it would have: its own status (the last command's), its stderr.
    let said = String::from_utf8_lossy(&recorded.stdout);
    assert!(said.contains("exit 4 cuca-said"), "{said}");
    let records = records(&workspace.path().join("cuca-sessions"), "abs");
    let shell: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| kind(r) == "ShellCommand")
        .map(|r| &r["event"]["ShellCommand"])
        .collect();
    // Once: the `bash -c 'exit 4'` inside it is part of the command, not one of its own. (A
    // `python3` that is a version manager's script may run `-c` commands of its own: they
    // are recorded too, and looked past here.)
    let ran = "echo cuca-piped | false; echo cuca-said >&2; bash -c 'exit 4'";
    let mine: Vec<&&serde_json::Value> = shell.iter().filter(|c| c["command"] == ran).collect();
    assert_eq!(mine.len(), 1, "{shell:?}");
    assert!(shell.iter().all(|c| c["command"] != "exit 4"), "{shell:?}");
    let command = mine[0];
    assert_eq!(
        command["origin"],
        "bash -o pipefail -c, by absolute path (BASH_ENV)"
    );
    assert_eq!(command["exit_status"], 4);
    assert_eq!(command["stderr"]["tail"], "cuca-said\n");
    assert_eq!(command["cwd"], ".");
}
