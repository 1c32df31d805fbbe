//! `cargo xtask`: cuca's repository tasks (see `cargo xtask --help`).

fn main() -> anyhow::Result<()> {
    Ok(())
}
