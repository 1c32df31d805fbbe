//! `cargo xtask ci`: the checks `.ci/run` runs, in the same order, from one command.

use std::process::Command;

use anyhow::{bail, Context};

/// Every workspace package, checked on its own: a workspace build merges features and would
/// hide a crate that forgot one (STYLE.md, "Check each crate on its own").
fn packages() -> anyhow::Result<Vec<String>> {
    let output = Command::new(env!("CARGO"))
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).context("reading cargo metadata")?;
    let mut names: Vec<String> = metadata["packages"]
        .as_array()
        .map(|packages| {
            packages
                .iter()
                .filter_map(|package| package["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    Ok(names)
}

fn cargo(args: &[&str]) -> anyhow::Result<()> {
    eprintln!("$ cargo {}", args.join(" "));
    let status = Command::new(env!("CARGO"))
        .args(args)
        .status()
        .with_context(|| format!("running cargo {}", args.join(" ")))?;
    if !status.success() {
        bail!("cargo {} failed ({status})", args.join(" "));
    }
    Ok(())
}

/// Runs format, clippy, a per-crate check and the whole test suite; stops at the first failure.
pub(crate) fn run() -> anyhow::Result<()> {
    cargo(&["fmt", "--all", "--", "--check"])?;
    cargo(&[
        "clippy",
        "--workspace",
        "--all-targets",
        "--all-features",
        "--",
        "-D",
        "warnings",
    ])?;
    for package in packages()? {
        cargo(&["check", "--quiet", "-p", &package])?;
    }
    cargo(&["test", "--workspace", "--all-features"])?;
    eprintln!("xtask ci: all checks passed");
    Ok(())
}
