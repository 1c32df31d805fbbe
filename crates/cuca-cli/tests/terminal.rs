//! No progress frame is drawn under the threshold. On a terminal (a pty made by
//! `script(1)`), `cuca verify` of fewer than eight sessions draws no progress bar; of eight or
//! more it does (which shows the check can see one).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

/// What a terminal shows while `cuca verify DIR` runs on it.
fn on_a_terminal(dir: &Path) -> Option<String> {
    let command = format!(
        "{} verify {}",
        assert_cmd::cargo::cargo_bin("cuca").display(),
        dir.display()
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env_remove("NO_COLOR")
        // The bar is stderr's; stdout's pager is off, or `less` would wait on
        // this pty for a key nobody presses once the output outgrows a screen.
        .env("PAGER", "")
        .env("TERM", "xterm")
        .output();
    match out {
        Ok(out) if out.status.success() => Some(String::from_utf8_lossy(&out.stdout).into_owned()),
        Ok(out) => panic!("script failed: {}", String::from_utf8_lossy(&out.stderr)),
        Err(error) => {
            eprintln!("skipping: script(1) cannot run ({error}); it makes the terminal");
            None
        }
    }
}

#[test]
fn a_short_verify_on_a_terminal_draws_no_progress_frame() {
    let few = common::fixtures_dir();
    let n_few = std::fs::read_dir(&few).unwrap().count();
    assert!(n_few < 8, "{n_few} fixture sessions");
    let Some(shown) = on_a_terminal(&few) else {
        return;
    };
    assert!(shown.contains("clean"), "{shown}");
    assert!(!shown.contains("verifying"), "a progress frame: {shown:?}");

    // Eight sessions or more: the bar is drawn.
    let many = tempfile::tempdir().unwrap();
    let source = std::fs::read_dir(&few)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "cslog"))
        .unwrap();
    for n in 0..8 {
        std::fs::copy(&source, many.path().join(format!("s{n}.cslog"))).unwrap();
    }
    let shown = on_a_terminal(many.path()).unwrap();
    assert!(shown.contains("verifying"), "no progress frame: {shown:?}");
}
