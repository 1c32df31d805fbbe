//! `cargo xtask`: cuca's repository tasks (see `cargo xtask --help`).

use clap::{Parser, Subcommand};

mod bench;
mod ci;
mod e2e;
mod e2e_phoenix;
mod e2e_proxy;
mod fixtures;
mod fuzz;

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
    /// The checks CI runs: format, clippy -D warnings, every crate checked on its own, and
    /// the whole test suite.
    Ci,
    /// Regenerate the golden on-disk fixtures (or, with --check, verify they are current).
    Fixtures {
        /// Compare instead of writing; fail if any fixture differs from the generator.
        #[arg(long)]
        check: bool,
    },
    /// Run both seed example commands against a real llama-server and check their .cslog
    /// files (opt-in, not in CI: needs CUCA_BASE_URL, or llama-server on PATH and CUCA_GGUF).
    E2e,
    /// Export the fixture sessions and a call log into a real Arize Phoenix server and read
    /// model, token counts and latency back through its API (opt-in, not in CI: needs
    /// `pip install arize-phoenix==20.26.1`, found as CUCA_PHOENIX or `phoenix` on PATH).
    E2ePhoenix,
    /// Run every criterion bench and print one table: each figure beside its baseline
    /// measured in the same run, the ratio, the target and whether it is met.
    Bench {
        /// A smoke run (short criterion settings, only the benches the table reads): under
        /// two minutes on a warm build.
        #[arg(long)]
        quick: bool,
        /// Run nothing; print the table from the results already under `target/` (which may
        /// come from different runs).
        #[arg(long)]
        no_run: bool,
    },
    /// Run each fuzz target for a fixed time: cargo-fuzz (libFuzzer) when installed, else the
    /// stable mutation harness; a crash fails and leaves its input under fuzz/artifacts/.
    Fuzz {
        /// Seconds per target.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Use the stable harness even when cargo-fuzz is installed.
        #[arg(long)]
        harness: bool,
        /// Targets to run (all when none): cslog_reader, sse_decoder, journal, calllog_reader.
        targets: Vec<String>,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().task {
        Task::Ci => ci::run(),
        Task::Fixtures { check } => fixtures::run(check),
        Task::E2e => e2e::run(),
        Task::E2ePhoenix => e2e_phoenix::run(),
        Task::Bench { quick, no_run } => bench::run(quick, no_run),
        Task::Fuzz {
            seconds,
            harness,
            targets,
        } => fuzz::run(seconds, targets, harness),
    }
}
