//! `cuca quickstart`: the committed coding-agent run replays offline with its workspace
//! restored, forks at its second call, and is what the quickstart's agent records today.

// The helpers below are test code: unwrapping is how they fail the test.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};

fn cuca() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cuca"));
    command
        .arg("--no-pager")
        .env("NO_COLOR", "1")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_BASE_URL");
    command
}

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn the_quickstart_replays_the_committed_run_with_its_files_and_forks_it_at_the_second_call() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("qs");
    let output = cuca()
        .arg("quickstart")
        .arg("--dir")
        .arg(&home)
        .current_dir(repo())
        .output()
        .unwrap();
    let shown = text(&output);
    assert!(output.status.success(), "{shown}");
    // The replay: every recorded call consumed, the agent's own edit and commands re-run on
    // the restored files, its last answer the recorded one.
    assert!(
        shown.contains("strict replay passed: all 4 recorded calls consumed, none refused"),
        "{shown}"
    );
    assert!(
        shown.contains("the workspace of quickstart:0 (2 files) restored"),
        "{shown}"
    );
    let restored = std::fs::read_dir(&home)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| {
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("cuca-run-")
        })
        .unwrap_or_else(|| panic!("no restored copy under {}: {shown}", home.display()));
    assert_eq!(
        std::fs::read_to_string(restored.join("greeting.txt")).unwrap(),
        "hello world\n",
        "the agent re-ran its edit on the restored file"
    );
    // The fork: the first call replayed, the rest live on the scripted model, which read the
    // changed check.
    assert!(
        shown.contains(r#"agent: edited greeting.txt: "helo world" -> "Hello, world!""#),
        "{shown}"
    );
    assert_eq!(
        std::fs::read_to_string(home.join("fork/greeting.txt")).unwrap(),
        "Hello, world!\n"
    );
    let sessions = cuca()
        .args(["sessions", "--json", "--sort", "name"])
        .arg(home.join("store"))
        .output()
        .unwrap();
    let ids: Vec<String> = String::from_utf8_lossy(&sessions.stdout)
        .lines()
        .map(|line| {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            row["session"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(ids[0], "quickstart");
    assert!(ids[1].starts_with("quickstart:fork:quickstart:"), "{ids:?}");
    assert!(
        shown.contains(&format!("recorded into {}", ids[1])),
        "{shown}"
    );
    assert!(
        shown.contains(": 3 model calls, 0 workspace snapshots"),
        "{shown}"
    );
    // A --dir that holds something is refused before anything is written.
    let refused = cuca()
        .arg("quickstart")
        .arg("--dir")
        .arg(&home)
        .current_dir(repo())
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
}

/// The committed recording's records with what changes from run to run (times, durations)
/// taken out.
fn comparable(store: &Path) -> Vec<serde_json::Value> {
    let output = cuca()
        .args(["show", "--json"])
        .arg(store)
        .arg("quickstart")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            let mut record: serde_json::Value = serde_json::from_str(line).unwrap();
            record["timestamp_ms"] = 0.into();
            let event = &mut record["event"];
            for kind in ["Latency", "ShellCommand"] {
                if let Some(fields) = event.get_mut(kind) {
                    fields["duration_ms"] = 0.into();
                }
            }
            record
        })
        .collect()
}

#[test]
fn the_committed_recording_is_what_the_quickstart_agent_records_today() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let output = cuca()
        .arg("quickstart")
        .arg("--record")
        .arg(&store)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    // When this fails the agent, the scripted model or the recording changed: record the
    // fixture again with `cuca quickstart --record DIR` (fixtures/quickstart/README.md).
    assert_eq!(
        comparable(&store),
        comparable(&repo().join("fixtures/quickstart"))
    );
}
