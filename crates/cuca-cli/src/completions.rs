//! `cuca completions SHELL`: the shell's completion script for every command and option,
//! generated from the same definitions clap parses with, so it never falls behind them.

use std::io::Write;

use crate::error::CliError;

/// Writes `shell`'s completion script for `cuca` to stdout (`cuca completions bash >
/// ~/.local/share/bash-completion/completions/cuca`).
pub(crate) fn write(shell: clap_complete::Shell) -> Result<(), CliError> {
    let mut command = crate::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "cuca", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(())
}
