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

/// `PATH` with the built `cuca` first, so the scripts' `cuca complete-sessions` runs it.
fn path_with_cuca() -> String {
    let bin = assert_cmd::cargo::cargo_bin("cuca");
    format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Runs `program` with `shell` (`zsh -f` or `elvish`), the completion script for it in a file
/// whose path replaces `SCRIPT` in the program; `None` when the shell is not installed.
fn run_shell(shell: &str, args: &[&str], program: &str) -> Option<String> {
    let script = cuca().args(["completions", shell]).output().unwrap().stdout;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cuca.completion");
    std::fs::write(&file, script).unwrap();
    let program = program.replace("SCRIPT", file.to_str().unwrap());
    let output = std::process::Command::new(shell)
        .args(args)
        .arg(&program)
        .env("PATH", path_with_cuca())
        .output()
        .ok()?;
    assert!(
        output.status.success(),
        "{shell}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Some(String::from_utf8(output.stdout).unwrap())
}

#[test]
fn zsh_completes_session_ids_from_the_store_typed_before_them() {
    let (dir, fork) = store();
    let d = dir.path().to_str().unwrap();
    // compadd and clap's `_cuca` are stood in for, so what the script would offer is printed;
    // zsh itself matches the offered ids against what was typed.
    let program = format!(
        r#"autoload -U compinit; compinit -u -d "$(mktemp)"
source SCRIPT
compadd() {{ print -r -- "compadd $*" }}
_cuca() {{ print -r -- clap }}
words=(cuca replay {d} de); CURRENT=4; _cuca_sessions
words=(cuca show --json {d} ''); CURRENT=5; _cuca_sessions
words=(cuca fork {d} rea); CURRENT=4; _cuca_sessions
words=(cuca sho); CURRENT=2; _cuca_sessions
words=(cuca replay {d} --tu); CURRENT=4; _cuca_sessions
print -r -- "registered ${{_comps[cuca]}}""#
    );
    let Some(out) = run_shell("zsh", &["-f", "-c"], &program) else {
        eprintln!("skipping: zsh is not installed");
        return;
    };
    let lines: Vec<&str> = out.lines().collect();
    let all = format!("compadd -- demo {fork} reasoning");
    assert_eq!(
        lines,
        [
            all.as_str(),
            all.as_str(),
            &format!("compadd -S : -- demo {fork} reasoning"),
            "clap",
            "clap",
            "registered _cuca_sessions",
        ],
        "{out}"
    );
}

#[test]
fn elvish_completes_session_ids_from_the_store_typed_before_them() {
    let (dir, fork) = store();
    let d = dir.path().to_str().unwrap();
    // Outside an interactive elvish there is no `edit:` module; the script is evaluated in a
    // namespace holding a stand-in for the two names it uses.
    let program = format!(
        r#"var completion = (ns [&arg-completer=[&]])
fn candidate {{|text &display='' &code-suffix=''| put $text$code-suffix }}
var edit = (ns [&completion:=$completion &complex-candidate~=$candidate~])
eval &ns=(ns [&edit:=$edit]) (slurp < SCRIPT)
for words [[cuca replay {d} de] [cuca fork {d} rea] [cuca sho]] {{
    echo (str:join ' ' [($completion[arg-completer][cuca] (all $words))])
}}"#
    );
    let program = format!("use str\n{program}");
    let Some(out) = run_shell("elvish", &["-norc", "-c"], &program) else {
        eprintln!("skipping: elvish is not installed");
        return;
    };
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], format!("demo {fork} reasoning"), "{out}");
    assert_eq!(lines[1], format!("demo: {fork}: reasoning:"), "{out}");
    assert!(lines[2].split(' ').any(|c| c == "show"), "{out}");
}

#[test]
fn fish_completes_session_ids_from_the_store_typed_before_them() {
    let (dir, fork) = store();
    let d = dir.path().to_str().unwrap();
    let program = format!(
        "source SCRIPT; complete -C 'cuca replay {d} de'; echo ---; complete -C 'cuca fork {d} rea'; echo ---; complete -C 'cuca sho'"
    );
    let Some(out) = run_shell("fish", &["-N", "-c"], &program) else {
        eprintln!("skipping: fish is not installed");
        return;
    };
    let parts: Vec<Vec<&str>> = out
        .split("---\n")
        .map(|part| {
            part.lines()
                .map(|l| l.split('\t').next().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(parts[0], ["demo", fork.as_str()], "{out}");
    assert_eq!(parts[1], ["reasoning:"], "{out}");
    assert!(parts[2].contains(&"show"), "{out}");
}
