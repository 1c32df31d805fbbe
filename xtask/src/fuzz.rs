//! `cargo xtask fuzz`: run every fuzz target for a fixed time.
//!
//! With cargo-fuzz installed it runs libFuzzer on each target of `fuzz/` (built on the stable
//! toolchain with `RUSTC_BOOTSTRAP=1` and no sanitizer, because the workspace pins stable),
//! starting from the committed corpus `fuzz/corpus/<target>/` (seeded from
//! `cuca_reliability::fuzz::seeds` when empty), with a 1 s per-input timeout, a 512 MiB
//! allocation limit per input and a 2 GiB RSS limit, then minimizes the corpus (`cmin`).
//! Without cargo-fuzz, or with `--harness`, it runs the stable mutation harness
//! (`cuca-fuzz-harness`) instead. Either way a crash fails the task and leaves the input under
//! `fuzz/artifacts/<target>/`: turn it into a regression test.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

const TARGETS: [&str; 4] = ["cslog_reader", "sse_decoder", "journal", "calllog_reader"];

fn root() -> PathBuf {
    // xtask lives at <root>/xtask.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

fn has_cargo_fuzz() -> bool {
    Command::new(cargo())
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|output| output.status.success())
}

fn harness(root: &Path, args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new(cargo())
        .current_dir(root)
        .args([
            "run",
            "--release",
            "--quiet",
            "-p",
            "cuca-reliability",
            "--bin",
            "cuca-fuzz-harness",
            "--",
        ])
        .args(args)
        .status()
        .context("running cuca-fuzz-harness")?;
    if !status.success() {
        bail!("cuca-fuzz-harness failed ({status}); the input is under fuzz/artifacts/");
    }
    Ok(())
}

/// Runs each of `targets` (all when empty) for `seconds`.
pub(crate) fn run(seconds: u64, targets: Vec<String>, force_harness: bool) -> anyhow::Result<()> {
    let root = root();
    let targets: Vec<String> = if targets.is_empty() {
        TARGETS.iter().map(|t| (*t).to_owned()).collect()
    } else {
        targets
    };
    for target in &targets {
        if !TARGETS.contains(&target.as_str()) {
            bail!("unknown fuzz target {target:?}; the targets are {TARGETS:?}");
        }
    }
    let corpus = root.join("fuzz/corpus");
    let seconds_text = seconds.to_string();
    if force_harness || !has_cargo_fuzz() {
        if !force_harness {
            eprintln!("xtask fuzz: cargo-fuzz is not installed (cargo install cargo-fuzz); running the stable harness");
        }
        let mut args: Vec<&str> = targets.iter().map(String::as_str).collect();
        args.extend(["--seconds", &seconds_text, "--corpus"]);
        let corpus_text = corpus.to_string_lossy().into_owned();
        args.push(&corpus_text);
        return harness(&root, &args);
    }
    for target in &targets {
        let dir = corpus.join(target);
        let empty = std::fs::read_dir(&dir).map_or(true, |mut entries| entries.next().is_none());
        if empty {
            let corpus_text = corpus.to_string_lossy().into_owned();
            harness(&root, &[target, "--write-seeds", &corpus_text])?;
        }
        let fuzz = |args: &[&str]| -> anyhow::Result<std::process::ExitStatus> {
            Command::new(cargo())
                .current_dir(root.join("fuzz"))
                .env("RUSTC_BOOTSTRAP", "1")
                .args(["fuzz"])
                .args(args)
                .status()
                .with_context(|| format!("running cargo fuzz {}", args.join(" ")))
        };
        let max_time = format!("-max_total_time={seconds}");
        let status = fuzz(&[
            "run",
            "-s",
            "none",
            "-O",
            target,
            "--",
            &max_time,
            "-timeout=1",
            "-malloc_limit_mb=512",
            "-rss_limit_mb=2048",
            "-max_len=65536",
            "-print_final_stats=1",
        ])?;
        if !status.success() {
            bail!("fuzz target {target} failed ({status}); the input is under fuzz/artifacts/{target}/");
        }
        let status = fuzz(&["cmin", "-s", "none", "-O", target])?;
        if !status.success() {
            bail!("minimizing the corpus of {target} failed ({status})");
        }
    }
    Ok(())
}
