//! CLI polish: `cuca completions SHELL`; a pager for long output on a terminal (`less -R`,
//! off with `--no-pager` or when piped); usage errors in the one-line form.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::*;

#[test]
fn completions_are_printed_for_bash_and_zsh_and_name_every_command() {
    for (shell, opening) in [("bash", "_cuca() {"), ("zsh", "#compdef cuca")] {
        let output = cuca().args(["completions", shell]).output().unwrap();
        assert!(output.status.success(), "{shell}");
        let script = String::from_utf8(output.stdout).unwrap();
        assert!(script.contains(opening), "{shell}: {script:.200}");
        for command in [
            "grep",
            "replay",
            "sessions",
            "completions",
            "--no-pager",
            "--fixed-strings",
        ] {
            assert!(script.contains(command), "{shell} completes no {command}");
        }
    }
    let unknown = cuca().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(unknown.status.code(), Some(2));
}

#[test]
fn a_usage_error_is_one_cuca_error_line_naming_the_usage() {
    // "clap usage errors are not the documented one-line `cuca: error:` form".
    let cases: [(&[&str], &str); 5] = [
        (
            &["show", "dir", "s", "--bogus"],
            "cuca: error: unexpected argument '--bogus' found (usage: cuca show <STORE> <SESSION>; `--help` for more)\n",
        ),
        (
            &["fork"],
            "cuca: error: the following required arguments were not provided: <STORE> <POINT_ID> (usage: cuca fork <STORE> <POINT_ID>; `--help` for more)\n",
        ),
        (
            // grep takes a STORE as every session command does.
            &["grep"],
            "cuca: error: the following required arguments were not provided: <STORE> <PATTERN> (usage: cuca grep <STORE> <PATTERN>; `--help` for more)\n",
        ),
        (
            &["replay", "d", "s", "--turn", "x"],
            "cuca: error: invalid value 'x' for '--turn <TURN>': invalid digit found in string (`cuca replay --help` for usage)\n",
        ),
        (
            &["nosuch"],
            "cuca: error: unrecognized subcommand 'nosuch' (usage: cuca [OPTIONS] <COMMAND>; `--help` for more)\n",
        ),
    ];
    for (args, expected) in cases {
        let output = cuca().args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert_eq!(
            String::from_utf8(output.stderr).unwrap(),
            expected,
            "{args:?}"
        );
        assert!(output.stdout.is_empty());
    }
    // Help and version are not errors.
    let help = cuca().args(["grep", "--help"]).output().unwrap();
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8(help.stdout)
        .unwrap()
        .contains("Usage: cuca grep"));
}

/// A fake pager: a script that copies what it is given into `paged`; the `PAGER` that runs it.
fn fake_pager(paged: &Path) -> String {
    let pager = paged.with_extension("sh");
    std::fs::write(
        &pager,
        format!(
            "#!/bin/sh\necho \"pager got LESS=$LESS\" > {0}\ncat >> {0}\n",
            paged.display()
        ),
    )
    .unwrap();
    format!("sh {}", pager.display())
}

/// Runs `cuca ARGS` on a terminal (a pty made by `script(1)`) with `PAGER` set to `pager`;
/// returns what the terminal showed.
fn on_a_terminal(args: &str, pager: &str) -> Option<String> {
    let mut command = std::process::Command::new("script");
    let line = format!("{} {args}", assert_cmd::cargo::cargo_bin("cuca").display());
    command
        .args(["-qec", &line, "/dev/null"])
        .env("TERM", "xterm")
        .env("NO_COLOR", "1")
        .env("PAGER", pager)
        .env_remove("LESS");
    match command.output() {
        Ok(out) if out.status.success() => Some(String::from_utf8_lossy(&out.stdout).into_owned()),
        Ok(out) => panic!("script failed: {}", String::from_utf8_lossy(&out.stderr)),
        Err(error) => {
            eprintln!("skipping: script(1) cannot run ({error}); it makes the terminal");
            None
        }
    }
}

#[test]
fn long_output_on_a_terminal_goes_through_the_pager_unless_no_pager_or_piped() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = fixtures_dir();
    let show = format!("show {} demo", fixtures.display());

    let paged = dir.path().join("paged.txt");
    let Some(shown) = on_a_terminal(&show, &fake_pager(&paged)) else {
        return;
    };
    let got = std::fs::read_to_string(&paged).unwrap();
    assert!(got.starts_with("pager got LESS=FRX\n"), "{got}");
    assert!(got.contains("SystemPrompt  \"You are terse.\""), "{got}");
    assert!(
        !shown.contains("SystemPrompt"),
        "printed past the pager: {shown}"
    );

    // --no-pager: straight to the terminal, the pager never runs.
    let unpaged = dir.path().join("unpaged.txt");
    let shown = on_a_terminal(&format!("{show} --no-pager"), &fake_pager(&unpaged)).unwrap();
    assert!(!unpaged.exists(), "the pager ran under --no-pager");
    assert!(
        shown.contains("SystemPrompt  \"You are terse.\""),
        "{shown}"
    );

    // PAGER set empty: no pager either.
    let shown = on_a_terminal(&show, "").unwrap();
    assert!(shown.contains("SystemPrompt"), "{shown}");

    // A pager that is not installed: the output still reaches the terminal.
    let shown = on_a_terminal(&show, "/nonexistent/pager -R").unwrap();
    assert!(
        shown.contains("SystemPrompt  \"You are terse.\""),
        "{shown}"
    );

    // Piped: never paged, whatever PAGER says.
    let piped = dir.path().join("piped.txt");
    let pager = piped.with_extension("sh");
    std::fs::write(&pager, format!("#!/bin/sh\ncat > {}\n", piped.display())).unwrap();
    let output = cuca()
        .args(["show", fixtures.to_str().unwrap(), "demo"])
        .env("PAGER", format!("sh {}", pager.display()))
        .output()
        .unwrap();
    assert!(!piped.exists(), "a pipe was paged");
    assert!(String::from_utf8(output.stdout)
        .unwrap()
        .contains("SystemPrompt"));
}

#[test]
fn compact_leaves_a_file_it_would_grow_and_says_so() {
    // "`cuca compact` of a 135-byte file grows it to 158 bytes and keeps it".
    let dir = tempfile::tempdir().unwrap();
    let backend = cuca::FileBackend::new(dir.path()).unwrap();
    cuca::SessionBackend::append(
        &backend,
        cuca::SessionRecord {
            session_id: "short".into(),
            sequence: 0,
            timestamp_ms: 1_795_975_017_906,
            event: cuca::SessionEvent::Output {
                text: "noted".into(),
            },
        },
    )
    .unwrap();
    drop(backend);
    std::fs::copy(
        fixtures_dir().join("demo.cslog"),
        dir.path().join("demo.cslog"),
    )
    .unwrap();
    let live = dir.path().join("short.cslog");
    let before = std::fs::metadata(&live).unwrap().len();
    let output = cuca()
        .args(["compact", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("demo: 35 records, 997 -> "),
        "{stdout}"
    );
    assert!(
        lines[1].starts_with(&format!(
            "short: left as it is: gzip would grow it from {before} to "
        )),
        "{stdout}"
    );
    assert!(
        lines[2].starts_with("1 of 2 sessions compacted, 1 left as they are (gzip would grow them), 0 refused: 997 -> "),
        "{stdout}"
    );
    assert_eq!(
        std::fs::metadata(&live).unwrap().len(),
        before,
        "the file is untouched"
    );
    assert!(!dir.path().join("short.cslog.gz").exists());
    assert!(dir.path().join("demo.cslog.gz").is_file());
}
