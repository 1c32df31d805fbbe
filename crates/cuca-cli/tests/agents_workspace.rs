//! Claude Code and Codex, unmodified, given back whole: the files their edit tool changed and
//! the command that failed, not only their model calls.
//!
//! Each agent runs through `cuca run` against the scripted upstream's edit script
//! (`tests/agents/scripted_upstream.py`, chosen by `cuca-edit-script` in the prompt) inside
//! its own network namespace, as `agents.rs` runs it: it looks at the world (a command printing
//! `$CUCA_TEST_STATUS`), edits notes.txt with its edit tool (Claude Code's `Read` then `Edit`,
//! Codex's `apply_patch`), runs a command that fails with exit status 3 and a line on stderr,
//! and answers. The session must hold a workspace snapshot before every call, notes.txt's
//! change, and the command with its status and stderr; `cuca checkout` gives notes.txt as it
//! was at the call before the edit and as the run left it.
//!
//! Then the same agent in fork mode with `CUCA_TEST_STATUS` changed: its first command's result
//! differs, so the fork goes live at the second call, before the edit, restored into a fresh
//! copy of the recorded start; the request of the call before the edit must carry notes.txt as
//! it was then (the copy's, not the edited original), the fork edits the copy, and the
//! original workspace is as the record left it, byte for byte. Last, the recording replays
//! offline in a restored copy, both agents' (Claude Code's recorded `Read` and `Edit` name the
//! recorded workspace by absolute path: the replayed answers name the copy's instead, so its
//! edit happens in the copy).
// A failed step is a failed test.
#![allow(clippy::unwrap_used)]

#[path = "agents/harness.rs"]
mod harness;

use std::path::PathBuf;

use harness::*;
use serde_json::Value;

const PROMPT: &str = "Edit notes.txt, then run its check (cuca-edit-script).";
const OLD_NOTES: &str = "line one\nline two\n";
const NEW_NOTES: &str = "line one\nline two, edited\nline three\n";
/// The edit script's failing command and what it says on stderr.
const FAIL_COMMAND: &str = "{ cat notes.txt; echo cuca-check-failed; } >&2; exit 3";
const FAILED: &str = "cuca-check-failed\n";

/// How an agent's edit-script run went: the record, the fork, the replay.
struct Edited {
    run: Run,
}

impl Edited {
    fn story(&self) -> String {
        let mut story = self.run.story();
        for name in ["fork.status", "fork.out", "fork.err"] {
            story.push_str(&format!("--- {name}\n{}\n", self.run.read(name)));
        }
        story
    }

    fn dir(&self) -> String {
        self.run.sessions().to_str().unwrap().to_owned()
    }

    fn work(&self) -> PathBuf {
        self.run.out.path().join("work")
    }

    /// The records of `session` as `cuca show --json` prints them.
    fn records(&self, session: &str) -> Vec<Value> {
        self.run
            .cuca(&["show", &self.dir(), session, "--json"])
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    /// notes.txt as `cuca checkout` writes the workspace of `point`.
    fn checked_out(&self, point: &str) -> String {
        let into = tempfile::tempdir().unwrap();
        let copy = into.path().join("copy");
        self.run
            .cuca(&["checkout", &self.dir(), point, copy.to_str().unwrap()]);
        std::fs::read_to_string(copy.join("notes.txt")).unwrap()
    }

    /// The request bodies the upstream was sent by the fork, in order.
    fn forked_bodies(&self) -> Vec<Value> {
        let before: usize = self.run.read("fork.before").trim().parse().unwrap();
        let mut bodies: Vec<PathBuf> = std::fs::read_dir(self.run.out.path().join("bodies"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        bodies.sort();
        bodies[before..]
            .iter()
            .map(|path| serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap())
            .collect()
    }

    /// Where the fork ran: the copy `cuca run` says it restored.
    fn fork_copy(&self) -> PathBuf {
        let said = self.run.read("fork.err");
        let line = said
            .lines()
            .find(|line| line.contains("restored into "))
            .unwrap_or_else(|| panic!("the fork restored no copy\n{}", self.story()));
        PathBuf::from(line.rsplit("restored into ").next().unwrap().trim())
    }
}

fn kind(record: &Value) -> &str {
    let event = &record["event"];
    event
        .as_object()
        .and_then(|o| o.keys().next())
        .map(String::as_str)
        .or(event.as_str())
        .unwrap()
}

/// `client` through the edit script: recorded from a workspace holding notes.txt, forked with
/// the first command's result changed, replayed.
fn edit_script(client: &[&str], env: &[(&str, String)]) -> Edited {
    let mut env = env.to_vec();
    env.push(("FORK_STATUS", "forked".to_owned()));
    let run = record_then_replay_in(client, &env, |work| {
        std::fs::write(work.join("notes.txt"), OLD_NOTES).unwrap();
    });
    Edited { run }
}

/// The record's proof, the same for both agents: a snapshot before every call, the edit in
/// the snapshot after it, the failing command with its status and stderr, and `cuca
/// checkout` before the edit and at the end. `origins`: what the shell command's origin may
/// be.
fn assert_recorded(edited: &Edited, origins: &[&str]) {
    let story = edited.story();
    assert_eq!(
        edited.run.read("record.status").trim(),
        "0",
        "record failed\n{story}"
    );
    assert_eq!(
        std::fs::read_to_string(edited.work().join("notes.txt")).unwrap(),
        NEW_NOTES,
        "the agent did not edit notes.txt\n{story}"
    );
    let records = edited.records(SESSION);
    let kinds: Vec<&str> = records.iter().map(kind).collect();
    let calls = kinds.iter().filter(|k| **k == "CallRequest").count();
    let snapshots: Vec<usize> = (0..records.len())
        .filter(|&i| kinds[i] == "WorkspaceSnapshot")
        .collect();
    assert!(calls >= 4, "{kinds:?}\n{story}");
    assert_eq!(snapshots.len(), calls, "a snapshot per call: {kinds:?}");

    // The edit: the first snapshot that holds a change names notes.txt, two lines added and
    // one removed; the snapshot before it is the call before the edit.
    let changes = |at: usize| &records[at]["event"]["WorkspaceSnapshot"]["changes"];
    let edited_at = snapshots
        .iter()
        .position(|&at| changes(at) != &serde_json::json!([]))
        .unwrap_or_else(|| panic!("no snapshot holds the edit: {kinds:?}\n{story}"));
    assert!(edited_at >= 1, "the first snapshot is the base");
    assert_eq!(
        changes(snapshots[edited_at]),
        &serde_json::json!([{
            "path": "notes.txt", "kind": "Modified",
            "added_lines": 2, "removed_lines": 1, "binary": false
        }])
    );
    let before_edit = format!(
        "{SESSION}:{}",
        records[snapshots[edited_at - 1]]["sequence"]
    );
    assert_eq!(edited.checked_out(&before_edit), OLD_NOTES, "{before_edit}");
    assert_eq!(edited.checked_out(SESSION), NEW_NOTES);

    // The failing command, as the model asked for it, after the edit.
    let failed: Vec<(usize, &Value)> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| kind(r) == "ShellCommand")
        .map(|(at, r)| (at, &r["event"]["ShellCommand"]))
        .filter(|(_, c)| c["command"] == FAIL_COMMAND)
        .collect();
    let commands: Vec<&Value> = records
        .iter()
        .filter(|r| kind(r) == "ShellCommand")
        .map(|r| &r["event"]["ShellCommand"]["command"])
        .collect();
    assert_eq!(
        failed.len(),
        1,
        "the failing command is not recorded once: {commands:?}\n{story}"
    );
    let (at, command) = failed[0];
    assert_eq!(command["exit_status"], 3, "{command}");
    // One stream, so its order is the command's: Codex hands the model both streams as one
    // text, in the order they arrived, and two pipes would race.
    assert_eq!(
        command["stderr"]["tail"],
        format!("{NEW_NOTES}{FAILED}"),
        "{command}"
    );
    assert_eq!(command["stdout"]["tail"], "", "{command}");
    assert_eq!(command["cwd"], ".", "{command}");
    assert!(
        origins.iter().any(|origin| command["origin"] == *origin),
        "{command}"
    );
    assert!(at > snapshots[edited_at], "{kinds:?}");
    edited.run.cuca(&["verify", &edited.dir()]);
}

/// The fork's proof: it went live at the second call (the first command's result changed)
/// in a restored copy, the request of the call before the edit carried notes.txt as the
/// copy held it then, and the fork edited the copy and not the original. `carried` finds
/// notes.txt's text in a request.
fn assert_forked(edited: &Edited, carried: impl Fn(&Value) -> Option<String>) {
    let story = edited.story();
    assert_eq!(
        edited.run.read("fork.status").trim(),
        "0",
        "fork failed\n{story}"
    );
    let sent: Vec<Value> = edited
        .forked_bodies()
        .into_iter()
        .filter(|body| body.to_string().contains("cuca-edit-script"))
        .collect();
    assert!(!sent.is_empty(), "the fork never went live\n{story}");
    for body in &sent {
        assert!(
            body.to_string().contains("status: forked"),
            "a call before the changed result went live: {body}"
        );
    }
    // The call before the edit is the last the fork sent before notes.txt changed: the
    // request that carries the file's text.
    let read: Vec<String> = sent.iter().filter_map(&carried).collect();
    assert!(
        !read.is_empty(),
        "no live request carries notes.txt\n{story}"
    );
    assert!(
        read[0].contains("line two\n") || read[0].contains("line two\\n"),
        "the fork was sent notes.txt as the original holds it now, not as it was: {:?}\n{story}",
        read[0]
    );
    assert!(!read[0].contains("edited"), "{:?}", read[0]);
    let copy = edited.fork_copy();
    assert_ne!(copy, edited.work().canonicalize().unwrap());
    assert_eq!(
        std::fs::read_to_string(copy.join("notes.txt")).unwrap(),
        NEW_NOTES,
        "the fork's edit is in the copy\n{story}"
    );
    // The original workspace: as the record left it, every file and byte.
    let after_record = edited.run.read("record.work");
    assert!(after_record.contains(" ./notes.txt\n"), "{after_record}");
    assert_eq!(
        edited.run.read("fork.work"),
        after_record,
        "the fork changed the original workspace\n{story}"
    );
    // The fork holds its own snapshots and the command it ran.
    let listed = edited.run.cuca(&["sessions", &edited.dir(), "--json"]);
    let fork = listed
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter_map(|row| row["session"].as_str().map(str::to_owned))
        .find(|id| id.contains(":fork:"))
        .unwrap_or_else(|| panic!("no fork: {listed}\n{story}"));
    let kinds = edited.run.cuca(&["show", &edited.dir(), &fork, "--kinds"]);
    assert!(kinds.contains("WorkspaceSnapshot"), "{kinds}");
    assert!(kinds.contains("ShellCommand"), "{kinds}");
    let _ = std::fs::remove_dir_all(&copy);
}

/// Offline, the recording replays with the same final output, and leaves notes.txt edited
/// where it ran.
fn assert_replayed(edited: &Edited) {
    let story = edited.story();
    let said = edited.run.read("replay.err");
    let ran_in = said
        .lines()
        .find_map(|line| line.split("restored into ").nth(1))
        .map(|dir| PathBuf::from(dir.trim()))
        .unwrap_or_else(|| panic!("the replay restored nothing\n{story}"));
    // In a copy of its own, restored to the recorded start: the agent's replayed edit (by
    // the recorded absolute path, for Claude Code) happened there.
    assert_ne!(ran_in, edited.work().canonicalize().unwrap(), "{story}");
    assert_eq!(
        std::fs::read_to_string(ran_in.join("notes.txt")).unwrap(),
        NEW_NOTES,
        "{story}"
    );
    let _ = std::fs::remove_dir_all(&ran_in);
    assert_eq!(
        edited.run.read("replay.status").trim(),
        "0",
        "replay failed\n{story}"
    );
    assert_eq!(
        edited.run.read("replay.out"),
        edited.run.read("record.out"),
        "{story}"
    );
}

/// The text of the last `Read` result a Claude Code request carries.
fn claude_read(body: &Value) -> Option<String> {
    let messages = body["messages"].as_array()?;
    let reads: Vec<&str> = messages
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|block| block["type"] == "tool_use" && block["name"] == "Read")
        .filter_map(|block| block["id"].as_str())
        .collect();
    messages
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|block| {
            block["type"] == "tool_result"
                && block["tool_use_id"]
                    .as_str()
                    .is_some_and(|id| reads.contains(&id))
        })
        .map(|block| block["content"].to_string())
        .next_back()
}

/// The output of the Codex shell call that printed notes.txt, in a request.
fn codex_cat(body: &Value) -> Option<String> {
    body["input"]
        .as_array()?
        .iter()
        .filter(|item| item["type"] == "function_call_output")
        .map(|item| item["output"].to_string())
        .find(|output| output.contains("line one"))
}

#[test]
fn claude_code_edits_a_file_and_runs_a_failing_command_given_back_and_forked() {
    let (Some(modules), true) = (node_modules(), can_unshare()) else {
        return;
    };
    let claude = modules.join(".bin/claude");
    let scratch = tempfile::tempdir().unwrap();
    let env = claude_env(scratch.path(), 1024);
    let edited = edit_script(
        &[
            claude.to_str().unwrap(),
            "-p",
            PROMPT,
            "--output-format",
            "text",
            "--allowedTools",
            "Bash,Read,Edit",
        ],
        &env,
    );
    assert_recorded(&edited, &["Claude Code Bash tool"]);
    assert_forked(&edited, claude_read);
    // Replayed in a copy: the recorded `Read` and `Edit` name notes.txt by the recorded
    // workspace's absolute path, which the replayed answers name as the copy's; read as
    // recorded, the replay would read the original (edited since) and diverge.
    assert_replayed(&edited);
}

#[test]
fn codex_edits_a_file_and_runs_a_failing_command_given_back_and_forked() {
    let (Some(modules), true) = (node_modules(), can_unshare()) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let env = codex_env(scratch.path());
    let args = codex_args(&modules.join(".bin/codex"), PROMPT);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let edited = edit_script(&args, &env);
    // Codex wraps the command in a script of its own once its shell snapshot is ready, and
    // runs it as it is before: either way the model's command is recorded.
    assert_recorded(
        &edited,
        &[
            "Codex shell tool, by absolute path (BASH_ENV)",
            "bash -c, by absolute path (BASH_ENV)",
        ],
    );
    assert_forked(&edited, codex_cat);
    assert_replayed(&edited);
}
