//! `cargo xtask fixtures [--check]`: writes (or checks) the golden `.cslog` files.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

/// Where the `.cslog` golden files live, from the workspace root.
const CSLOG_FIXTURES: &str = "crates/cuca-store-file/tests/fixtures";

fn workspace_root() -> PathBuf {
    // xtask's manifest is `{root}/xtask/Cargo.toml`.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Writes every golden file, or with `check` compares them and fails on any difference.
pub(crate) fn run(check: bool) -> anyhow::Result<()> {
    let dir = workspace_root().join(CSLOG_FIXTURES);
    let files = cuca_store_file::golden::golden_files().context("building the .cslog fixtures")?;
    let mut stale = Vec::new();
    if !check {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    for golden in &files {
        let path = dir.join(golden.name);
        if check {
            let current = std::fs::read(&path).ok();
            if current.as_deref() != Some(golden.bytes.as_slice()) {
                stale.push(path.display().to_string());
            }
        } else {
            std::fs::write(&path, &golden.bytes)
                .with_context(|| format!("writing {}", path.display()))?;
            println!(
                "wrote {} ({} bytes): {}",
                path.display(),
                golden.bytes.len(),
                golden.about
            );
        }
    }
    if !stale.is_empty() {
        bail!(
            "{} fixture(s) differ from the generator: {}; run `cargo xtask fixtures`",
            stale.len(),
            stale.join(", ")
        );
    }
    if check {
        println!("{} .cslog fixtures are current", files.len());
    }
    Ok(())
}
