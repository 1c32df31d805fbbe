//! Completions complete session ids: the bash script `cuca completions bash` prints offers the
//! store's sessions where a command takes one (the part after a `:` already typed, which is
//! what bash replaces), and `cuca complete-sessions STORE` lists them.

#![allow(clippy::unwrap_used)]

mod common;

use common::cuca;
use cuca::{FileBackend, SessionBackend, SessionEvent, SessionRecord};

fn store() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let backend = FileBackend::new(dir.path()).unwrap();
    for session in ["demo", "reasoning"] {
        backend
            .append(SessionRecord {
                session_id: session.into(),
                sequence: 0,
                timestamp_ms: 1_700_000_000_000,
                event: SessionEvent::Output { text: "ok".into() },
            })
            .unwrap();
    }
    let fork = backend.fork("demo", "demo:0").unwrap();
    (dir, fork)
}

/// What bash offers for the command line `line`, the cursor at its end.
fn offered(line: &str) -> Option<Vec<String>> {
    let script = cuca()
        .args(["completions", "bash"])
        .output()
        .unwrap()
        .stdout;
    let bin = assert_cmd::cargo::cargo_bin("cuca");
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cuca.bash");
    std::fs::write(&file, script).unwrap();
    let program = format!(
        r#"source {}; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; read -ra COMP_WORDS <<< "$COMP_LINE"; COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); _cuca_sessions cuca "${{COMP_WORDS[-1]}}" "${{COMP_WORDS[-2]}}"; printf '%s\n' "${{COMPREPLY[@]}}""#,
        file.display()
    );
    let output = std::process::Command::new("bash")
        .args(["-c", &program])
        .env("PATH", path)
        .output()
        .ok()?;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(
        String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect(),
    )
}

#[test]
fn bash_completes_session_ids_from_the_store_typed_before_them() {
    let (dir, fork) = store();
    let d = dir.path().to_str().unwrap();
    let listed = cuca().args(["complete-sessions", d]).output().unwrap();
    let listed = String::from_utf8(listed.stdout).unwrap();
    assert_eq!(listed, format!("demo\n{fork}\nreasoning\n"));

    let Some(sessions) = offered(&format!("cuca replay {d} de")) else {
        eprintln!("skipping: bash cannot run");
        return;
    };
    assert_eq!(sessions, ["demo".to_owned(), fork.clone()]);
    // After a `:`, bash replaces only what follows it.
    let after_colon = offered(&format!("cuca show --json {d} demo:fork:de")).unwrap();
    assert_eq!(after_colon, [fork["demo:fork:".len()..].to_owned()]);
    // A point: the session and its `:`.
    let point = offered(&format!("cuca fork {d} rea")).unwrap();
    assert_eq!(point, ["reasoning:"]);
    // Elsewhere, clap's own completion: the subcommands.
    let commands = offered("cuca sho").unwrap();
    assert!(commands.contains(&"show".to_owned()), "{commands:?}");
}
