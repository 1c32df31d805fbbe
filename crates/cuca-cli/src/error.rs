//! `CliError`: what a command can fail with, and the exit code each failure maps to.

use cuca::PluginError;

/// Exit code of a command that did what it was asked.
pub const EXIT_OK: i32 = 0;
/// Exit code when data is damaged or refused (a `.cslog` file a load refuses, a journal in
/// another format, a malformed record), or the operation itself failed (I/O, a port in use).
pub const EXIT_FAILED: i32 = 1;
/// Exit code for usage errors: bad arguments, a missing directory or file, a session that does
/// not exist, a malformed point id, a session that already exists on import.
pub const EXIT_USAGE: i32 = 2;

/// A command's failure: one line for stderr and an exit code.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// What the person typed names nothing, or is malformed (exit code [`EXIT_USAGE`]).
    #[error("{0}")]
    Usage(String),
    /// The data is damaged or refused, or the operation failed (exit code [`EXIT_FAILED`]).
    #[error("{0}")]
    Failed(String),
    /// `cuca run`'s COMMAND exited with this non-zero code (128+N for signal N): passed
    /// through as `cuca run`'s own, with nothing printed (COMMAND said what it had to).
    #[error("the command exited with status {0}")]
    Exit(i32),
    /// `cuca export` found what a default redaction rule matches in the session, and was not
    /// given `--allow-secrets` (exit code [`EXIT_FAILED`]): the points, never the values.
    #[error("session {session:?} still holds what default redaction rules match, at {n_points} point(s): {}{}; nothing was exported (`cuca scrub STORE {session}` replaces them; `--allow-secrets` exports anyway)", points.join(", "), if *n_points > points.len() { format!(", and {} more", n_points - points.len()) } else { String::new() })]
    Secrets {
        /// The session.
        session: String,
        /// The first points, each `session:sequence rule (field)`.
        points: Vec<String>,
        /// How many points in all.
        n_points: usize,
    },
    /// Stdout was closed by the reader (`cuca show … | head`): not an error, exit 0.
    #[error("stdout closed")]
    StdoutClosed,
}

impl CliError {
    /// The process exit code this failure maps to.
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) => EXIT_USAGE,
            CliError::Failed(_) | CliError::Secrets { .. } => EXIT_FAILED,
            CliError::Exit(code) => *code,
            CliError::StdoutClosed => EXIT_OK,
        }
    }
}

impl From<PluginError> for CliError {
    /// Validation and not-found errors are usage errors (the person named something that is not
    /// there or not well formed); everything else — damage, I/O, locks — is a failure.
    fn from(error: PluginError) -> Self {
        match error {
            PluginError::Validation { .. } | PluginError::NotFound { .. } => {
                CliError::Usage(error.to_string())
            }
            // The library's advice (close the FileBackend) is for a program; a person at the
            // shell can only wait for the writer or stop it.
            PluginError::Locked { path, .. } => CliError::Failed(format!(
                "{} is open for append by another writer (a running agent or another cuca command); try again once it has finished",
                path.display()
            )),
            other => CliError::Failed(other.to_string()),
        }
    }
}

impl From<std::io::Error> for CliError {
    /// Writing to stdout is the only I/O that reaches this conversion: a closed pipe ends the
    /// command quietly, anything else is a failure.
    fn from(error: std::io::Error) -> Self {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            CliError::StdoutClosed
        } else {
            CliError::Failed(format!("write to stdout: {error}"))
        }
    }
}

/// The exit code a process that ended with `status` reports to a shell: its code, or 128+N
/// for a death by signal N.
pub(crate) fn process_exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        // Neither a code nor a signal is not a state a reaped child can be in.
        (None, None) => EXIT_FAILED,
    }
}
