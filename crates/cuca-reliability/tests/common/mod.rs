//! Shared helpers of the reliability tests: the child binary, killing it, the seed.
// Each test binary uses a different part of this module.
// A helper that cannot spawn or read its child should stop the test at once.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

use rand::rngs::StdRng;
use rand::SeedableRng;

/// The child process the crash tests kill.
pub fn child() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cuca-reliability-child"));
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    command
}

/// How many kills each crash test does: `CUCA_RELIABILITY_KILLS`, else `default`.
pub fn kills(default: usize) -> usize {
    std::env::var("CUCA_RELIABILITY_KILLS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(default)
}

/// A seeded generator: `CUCA_RELIABILITY_SEED`, else a fresh seed, printed so a failure can be
/// run again with the same kill points.
pub fn rng(test: &str) -> StdRng {
    let seed = std::env::var("CUCA_RELIABILITY_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("{test}: CUCA_RELIABILITY_SEED={seed}");
    StdRng::seed_from_u64(seed)
}

/// What one killed child said before it died.
#[derive(Debug, Default)]
pub struct Killed {
    /// Every `ack <n>` line, in order: each one acknowledged before the kill.
    pub acks: Vec<u64>,
    /// Any other line.
    pub other: Vec<String>,
}

/// Runs `command`, `SIGKILL`s it as soon as it has acknowledged `kill_after` records (it keeps
/// running while the signal is on its way, so the kill lands at an arbitrary point of its
/// loop), then reads every ack it printed before dying.
pub fn run_and_kill(mut command: Command, kill_after: usize) -> Killed {
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut killed = Killed::default();
    let mut sent = false;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        match cuca_reliability::parse_ack(&line) {
            Some(n) => killed.acks.push(n),
            None => killed.other.push(line),
        }
        if !sent && killed.acks.len() >= kill_after {
            // `Child::kill` is SIGKILL on Unix: no handler, no unwinding, no flush.
            child.kill().unwrap();
            sent = true;
        }
    }
    let status = child.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(9),
        "the child was to die of SIGKILL, but ended with {status:?} after {} acks: {:?}",
        killed.acks.len(),
        killed.other
    );
    killed
}

/// Runs `command` to completion and returns its stdout lines.
pub fn run_to_end(mut command: Command) -> (std::process::ExitStatus, Vec<String>) {
    let output = command.output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    (output.status, text.lines().map(str::to_owned).collect())
}
