//! `cargo xtask`: cuca's repository tasks (see `cargo xtask --help`).

use clap::{Parser, Subcommand};

mod fixtures;

/// cuca's repository tasks.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "cuca's repository tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

/// One subcommand per task; add new tasks as variants here and arms in `main`.
#[derive(Debug, Subcommand)]
enum Task {
    /// Regenerate the golden on-disk fixtures (or, with --check, verify they are current).
    Fixtures {
        /// Compare instead of writing; fail if any fixture differs from the generator.
        #[arg(long)]
        check: bool,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().task {
        Task::Fixtures { check } => fixtures::run(check),
    }
}
