//! The `cuca` binary: everything lives in the `cuca_cli` library so tests and docs reach it.

fn main() {
    std::process::exit(cuca_cli::run(std::env::args_os()));
}
