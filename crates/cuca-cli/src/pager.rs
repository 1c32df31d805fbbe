//! A pager for long output on a terminal: `$PAGER` (default `less -R`), off with `--no-pager`
//! or when stdout is not a terminal.
//!
//! The commands write to the process's stdout; while a pager runs, stdout (fd 1) is the write
//! end of a pipe into the pager's stdin, and at the end it is put back, which closes the pipe,
//! and the pager is waited for. So no command needs to know whether it is paged.

use std::ffi::OsStr;
use std::io::{IsTerminal, Write};
use std::os::fd::OwnedFd;
use std::process::{Child, Command, Stdio};

/// What runs when `PAGER` is unset: `-R` shows the escapes of colour (a grep hit) as colour.
const DEFAULT_PAGER: &str = "less -R";

/// `less`'s options when `LESS` is unset, as git sets them: `F` quits at once when the output
/// fits on one screen (short output is printed as if no pager ran), `R` passes colour, `X`
/// leaves the output on the screen after quitting.
const DEFAULT_LESS: &str = "FRX";

/// The pager's command line (a program and its options, split at spaces), or `None` for no
/// pager: `--no-pager`, stdout not a
/// terminal, or `PAGER` set empty or to `cat` turn it off.
pub(crate) fn command(
    no_pager: bool,
    stdout_is_terminal: bool,
    pager: Option<&OsStr>,
) -> Option<String> {
    if no_pager || !stdout_is_terminal {
        return None;
    }
    let pager = match pager {
        Some(pager) => pager.to_str()?.trim().to_owned(),
        None => DEFAULT_PAGER.to_owned(),
    };
    if pager.is_empty() || pager == "cat" {
        return None;
    }
    Some(pager)
}

/// A running pager and the stdout it replaced.
#[derive(Debug)]
pub(crate) struct Pager {
    child: Child,
    terminal: OwnedFd,
}

/// Starts the pager [`command`] decides on, with stdout redirected into it; `None` when there
/// is none, or when it cannot be started (the output then goes to the terminal directly).
pub(crate) fn start(no_pager: bool) -> Option<Pager> {
    let line = command(
        no_pager,
        std::io::stdout().is_terminal(),
        std::env::var_os("PAGER").as_deref(),
    )?;
    // The program and its options, split at spaces and run directly, not through a shell: a
    // pager that is not installed then fails to start, and the output goes to the terminal,
    // where a shell would start, fail, and leave the output in a pipe nobody reads.
    let mut words = line.split_whitespace();
    let mut pager = Command::new(words.next()?);
    pager.args(words).stdin(Stdio::piped());
    if std::env::var_os("LESS").is_none() {
        pager.env("LESS", DEFAULT_LESS);
    }
    let mut child = pager.spawn().ok()?;
    let terminal = rustix::io::dup(std::io::stdout()).ok()?;
    let into_pager = child.stdin.take()?;
    if rustix::stdio::dup2_stdout(&into_pager).is_err() {
        drop(into_pager);
        let _ = child.wait();
        return None;
    }
    // fd 1 now holds the pipe's write end; this copy must not keep it open past `finish`.
    drop(into_pager);
    Some(Pager { child, terminal })
}

/// Flushes stdout into the pager, closes the pipe (stdout is the terminal again) and waits
/// until the person quits the pager.
pub(crate) fn finish(pager: Option<Pager>) {
    let Some(mut pager) = pager else {
        return;
    };
    let _ = std::io::stdout().flush();
    let _ = rustix::stdio::dup2_stdout(&pager.terminal);
    let _ = pager.child.wait();
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::command;

    #[test]
    fn the_pager_runs_only_on_a_terminal_and_not_with_no_pager() {
        // Long output on a terminal goes through `less -R`; `--no-pager` or a pipe turns
        // the pager off.
        assert_eq!(command(false, true, None).as_deref(), Some("less -R"));
        assert_eq!(command(true, true, None), None);
        assert_eq!(command(false, false, None), None);
        assert_eq!(
            command(false, true, Some(OsStr::new("most -s"))).as_deref(),
            Some("most -s")
        );
        assert_eq!(command(false, true, Some(OsStr::new(""))), None);
        assert_eq!(command(false, true, Some(OsStr::new("cat"))), None);
        assert_eq!(command(true, false, Some(OsStr::new("less"))), None);
    }
}
