//! The shell shim of `cuca run`: `bash` and `sh` scripts first on COMMAND's `PATH` (and
//! `SHELL`), each running `cuca shell-shim`, which runs the real shell, passes its streams
//! through while keeping their tail and address, and reports the command to the proxy
//! (`POST /cuca/shell`) when it ends.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use cuca::CapturedStream;
use sha2::{Digest, Sha256};

use crate::error::CliError;

mod wrappers;

/// The environment variables the shim reads: where the workspace is (for the working
/// directory relative to it) and where the whole streams go.
pub(crate) const WORKSPACE_ENV: &str = "CUCA_WORKSPACE";
pub(crate) const OBJECTS_ENV: &str = "CUCA_WORKSPACE_OBJECTS";

/// How much of each stream the record keeps inline: the last 16 KiB, what a shell tool shows
/// a model of a command's output (seed 004's rule), so what the model saw is in the session.
const TAIL_BYTES: usize = 16 << 10;

/// The largest stream kept whole in the workspace object store: 8 MiB is a very long build
/// log; past it only the address and the tail are kept, so a command that prints without end
/// does not fill the memory of its shim or the store.
const STORE_BYTES: usize = 8 << 20;

/// How long the shim waits for the proxy to take its report: a command's end must not wait
/// on a proxy that is gone (the agent goes on; the command is not recorded).
const REPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Set in the shell a shim runs, so that the shells it starts in turn (`make` running
/// `sh -c`) run as they are: the command the agent asked for is recorded once, whole.
const DEPTH_ENV: &str = "CUCA_SHELL_DEPTH";

/// The caller's own BASH_ENV, read by the shell that runs a command once the shim's file has
/// passed it on.
const CALLER_BASH_ENV: &str = "CUCA_CALLER_BASH_ENV";

/// `cuca shell-shim` arguments (hidden: run by the shim scripts, not by people).
#[derive(Debug, Args)]
pub(crate) struct ShimArgs {
    /// The real shell.
    #[arg(long, value_name = "PATH")]
    real: PathBuf,
    /// Run by the `BASH_ENV` file of a bash started by absolute path (the origin says so).
    #[arg(long)]
    via_bash_env: bool,
    /// The shell's arguments, as the shim was given them.
    #[arg(last = true, allow_hyphen_values = true)]
    args: Vec<OsString>,
}

/// Writes the `bash` and `sh` shims into a new temporary directory and puts it first on
/// `PATH` in `env`, with `SHELL` pointing at the `bash` shim (the `sh` one when there is no
/// bash). Returns the directory.
pub(crate) fn write_shims(env: &mut Vec<(String, OsString)>) -> Result<PathBuf, CliError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let cuca = std::env::current_exe()
        .map_err(|error| CliError::Failed(format!("where cuca is: {error}")))?;
    let dir = std::env::temp_dir().join(format!(
        "cuca-shims-{}-{:08x}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&dir)
        .map_err(|error| CliError::Failed(format!("create {}: {error}", dir.display())))?;
    let mut shell = None;
    for name in ["sh", "bash"] {
        let Some(real) = find_in(&path, name) else {
            continue;
        };
        let script = format!(
            "#!/bin/sh\n# Written by cuca run: records the command, then runs it in the real {name}.\nexec {} shell-shim --real {} -- \"$@\"\n",
            quoted(&cuca),
            quoted(&real)
        );
        let at = dir.join(name);
        std::fs::write(&at, script)
            .map_err(|error| CliError::Failed(format!("write {}: {error}", at.display())))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o755))
            .map_err(|error| CliError::Failed(format!("write {}: {error}", at.display())))?;
        shell = Some(at);
    }
    // A bash started by absolute path (`/bin/bash -lc …`: Codex runs its shell tool in the
    // login shell of the user's passwd entry, whatever PATH and SHELL say) finds no shim, but
    // reads BASH_ENV before its `-c` command: the file runs that command again through the
    // shim, once (the depth variable), with the options it was given. A script, an
    // interactive shell and a shell inside a recorded command go on as they are; a BASH_ENV
    // of the caller's own is read by the shell that runs the command.
    let bash_env = dir.join("bash_env");
    let script = format!(
        r#"# Written by cuca run: a `bash -c` not started through the shim is run again through it.
if [ -n "${{BASH_EXECUTION_STRING+set}}" ] && [ -z "${{{DEPTH_ENV}:-}}" ]; then
  cuca_o=
  case $- in *e*) cuca_o="$cuca_o -e";; esac
  case $- in *u*) cuca_o="$cuca_o -u";; esac
  case $- in *x*) cuca_o="$cuca_o -x";; esac
  case :$SHELLOPTS: in *:pipefail:*) cuca_o="$cuca_o -o pipefail";; esac
  exec {} shell-shim --real "$BASH" --via-bash-env -- $cuca_o -c "$BASH_EXECUTION_STRING" "$0" "$@"
fi
if [ -n "${{{CALLER_BASH_ENV}:-}}" ]; then . "${CALLER_BASH_ENV}"; fi
"#,
        quoted(&cuca)
    );
    std::fs::write(&bash_env, script)
        .map_err(|error| CliError::Failed(format!("write {}: {error}", bash_env.display())))?;
    if let Some(caller) = std::env::var_os("BASH_ENV") {
        env.push((CALLER_BASH_ENV.into(), caller));
    }
    env.push(("BASH_ENV".into(), bash_env.into_os_string()));
    let mut new_path = dir.clone().into_os_string();
    if !path.is_empty() {
        new_path.push(":");
        new_path.push(&path);
    }
    env.push(("PATH".into(), new_path));
    if let Some(shell) = shell {
        env.push(("SHELL".into(), shell.into_os_string()));
    }
    Ok(dir)
}

/// Points `SHELL` in `env` at the real shell a recording's shim stands for (`bash`, else
/// `sh`), for a run that writes no shims (replay): agents name their shell in their prompts
/// (Claude Code's "Shell: bash"), and one left to choose on its own (no `SHELL`, or another
/// shell) would ask differently from the run it replays.
pub(crate) fn point_shell_as_recorded(env: &mut Vec<(String, OsString)>) {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if let Some(real) = find_in(&path, "bash").or_else(|| find_in(&path, "sh")) {
        env.push(("SHELL".into(), real.into_os_string()));
    }
}

fn rand_suffix() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.subsec_nanos());
    nanos ^ std::process::id().rotate_left(16)
}

/// The first `name` on `path` that is a file.
fn find_in(path: &OsStr, name: &str) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// `path` single-quoted for `/bin/sh`.
fn quoted(path: &Path) -> String {
    let text = path.to_string_lossy();
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// What the shell was asked to run: the command text and how it was given.
fn read_invocation(shell: &str, args: &[OsString]) -> Option<(String, String)> {
    let mut flags = Vec::new();
    let mut command_mode = false;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let bytes = arg.as_bytes();
        if bytes == b"--" || bytes == b"-" {
            break;
        }
        if bytes.starts_with(b"--") {
            flags.push(arg.to_string_lossy().into_owned());
            if bytes == b"--rcfile" || bytes == b"--init-file" {
                rest.next();
            }
            continue;
        }
        if bytes.len() > 1 && (bytes[0] == b'-' || bytes[0] == b'+') {
            flags.push(arg.to_string_lossy().into_owned());
            if bytes[1..].contains(&b'c') && bytes[0] == b'-' {
                command_mode = true;
            }
            // `-o OPTION` and `-O OPTION` take the next argument, kept in the origin.
            if bytes[1..].iter().any(|b| *b == b'o' || *b == b'O') {
                if let Some(option) = rest.next() {
                    flags.push(option.to_string_lossy().into_owned());
                }
            }
            continue;
        }
        // A script (`bash build.sh`, or a `#!/usr/bin/env bash` line) is not a command of
        // its own: wrappers are scripts (a version manager's `python3`, an agent's launcher),
        // and recording one would record the whole agent as one command and hide the
        // commands it runs. The `-c` commands a script runs are recorded.
        if !command_mode {
            return None;
        }
        let text = arg.to_string_lossy().into_owned();
        if let Some(command) = wrappers::claude_code_command(&text) {
            return Some((command, wrappers::CLAUDE_CODE_BASH.to_owned()));
        }
        if let Some(command) = wrappers::codex_command(&text) {
            return Some((command, wrappers::CODEX_SHELL.to_owned()));
        }
        let origin = format!("{shell} {}", flags.join(" "));
        return Some((text, origin));
    }
    None
}

/// Runs `cuca shell-shim`: the real shell with the shim's arguments; a command (`-c`) is
/// timed, its streams passed through and kept, and reported; anything else (an interactive
/// shell, a script, a script on stdin, a shell inside a recorded command) is the real shell
/// as it is.
pub(crate) fn run_shim(args: ShimArgs) -> Result<(), CliError> {
    let shell = args
        .real
        .file_name()
        .map_or_else(|| "sh".into(), |name| name.to_string_lossy().into_owned());
    let invocation = if std::env::var_os(DEPTH_ENV).is_some() {
        None
    } else {
        read_invocation(&shell, &args.args).map(|(command, origin)| {
            if args.via_bash_env {
                (command, format!("{origin}, by absolute path (BASH_ENV)"))
            } else {
                (command, origin)
            }
        })
    };
    let Some((command, origin)) = invocation else {
        use std::os::unix::process::CommandExt;
        let error = std::process::Command::new(&args.real)
            .args(&args.args)
            .exec();
        return Err(CliError::Failed(format!(
            "run {}: {error}",
            args.real.display()
        )));
    };
    let started = Instant::now();
    let mut child = std::process::Command::new(&args.real)
        .args(&args.args)
        .env(DEPTH_ENV, "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|error| CliError::Failed(format!("run {}: {error}", args.real.display())))?;
    let out = child
        .stdout
        .take()
        .map(|pipe| std::thread::spawn(move || tee(pipe, std::io::stdout())));
    let err = child
        .stderr
        .take()
        .map(|pipe| std::thread::spawn(move || tee(pipe, std::io::stderr())));
    let status = child
        .wait()
        .map_err(|error| CliError::Failed(format!("wait for {}: {error}", args.real.display())))?;
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let stdout = out.and_then(|t| t.join().ok()).unwrap_or_default();
    let stderr = err.and_then(|t| t.join().ok()).unwrap_or_default();
    let code = crate::error::process_exit_code(status);
    report(&command, &origin, code, duration_ms, stdout, stderr);
    match code {
        0 => Ok(()),
        code => Err(CliError::Exit(code)),
    }
}

/// A stream as kept: its address and length, its tail, and its whole bytes up to
/// [`STORE_BYTES`].
#[derive(Default)]
struct Kept {
    hasher: Sha256,
    bytes: u64,
    tail: Vec<u8>,
    whole: Option<Vec<u8>>,
}

/// Copies `pipe` to `to` as it comes, keeping what the record needs.
fn tee(mut pipe: impl Read, mut to: impl Write) -> Kept {
    let mut kept = Kept {
        whole: Some(Vec::new()),
        ..Kept::default()
    };
    let mut buffer = [0u8; 8192];
    loop {
        let n = match pipe.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let chunk = &buffer[..n];
        // The agent reads the command's output from us: it gets every byte, whatever the
        // recording does with them.
        let _ = to.write_all(chunk).and_then(|()| to.flush());
        kept.hasher.update(chunk);
        kept.bytes += n as u64;
        kept.tail.extend_from_slice(chunk);
        if kept.tail.len() > 2 * TAIL_BYTES {
            let cut = kept.tail.len() - TAIL_BYTES;
            kept.tail.drain(..cut);
        }
        if let Some(whole) = &mut kept.whole {
            if whole.len() + n > STORE_BYTES {
                kept.whole = None;
            } else {
                whole.extend_from_slice(chunk);
            }
        }
    }
    kept
}

impl Kept {
    /// The record's form of the stream; its whole bytes go to the object store when there
    /// is one and they fit.
    fn captured(self, objects: Option<&cuca_workspace::DirObjects>) -> CapturedStream {
        let sha256 = format!("sha256:{}", hex::encode(self.hasher.finalize()));
        if let (Some(objects), Some(whole)) = (objects, &self.whole) {
            if let Err(error) = cuca_workspace::put_object(objects, whole) {
                eprintln!("cuca shell-shim: a stream was not kept: {error}");
            }
        }
        let start = self.tail.len().saturating_sub(TAIL_BYTES);
        let tail = String::from_utf8_lossy(&self.tail[start..]).into_owned();
        CapturedStream {
            sha256,
            bytes: self.bytes,
            cut: self.bytes - (self.tail.len() - start) as u64,
            tail,
        }
    }
}

/// Where the command ran: relative to the workspace when inside it.
fn relative_cwd() -> String {
    let Ok(cwd) = std::env::current_dir() else {
        return String::new();
    };
    let workspace = std::env::var_os(WORKSPACE_ENV).map(PathBuf::from);
    match workspace.as_deref().and_then(|w| cwd.strip_prefix(w).ok()) {
        Some(relative) if relative.as_os_str().is_empty() => ".".into(),
        Some(relative) => relative.to_string_lossy().into_owned(),
        None => cwd.to_string_lossy().into_owned(),
    }
}

/// Posts the command to the proxy of `cuca run` (`CUCA_PROXY_URL`); a proxy that is gone or
/// refuses is said on stderr, and the command's own result stands.
fn report(command: &str, origin: &str, code: i32, duration_ms: u64, stdout: Kept, stderr: Kept) {
    let Some(base) = std::env::var_os("CUCA_PROXY_URL") else {
        return;
    };
    let objects = std::env::var_os(OBJECTS_ENV).map(cuca_workspace::DirObjects::at);
    let body = serde_json::json!({
        "command": command,
        "cwd": relative_cwd(),
        "origin": origin,
        "exit_status": code,
        "duration_ms": duration_ms,
        "stdout": stdout.captured(objects.as_ref()),
        "stderr": stderr.captured(objects.as_ref()),
    })
    .to_string();
    if let Err(why) = post(&base.to_string_lossy(), "/cuca/shell", &body) {
        eprintln!("cuca shell-shim: the command was not recorded: {why}");
    }
}

/// One HTTP/1.1 POST to a loopback proxy, by hand: the shim runs for every command an agent
/// runs, and a blocking socket costs less to start than an HTTP client and a runtime.
fn post(base: &str, path: &str, body: &str) -> Result<(), String> {
    let authority = base
        .strip_prefix("http://")
        .ok_or_else(|| format!("{base} is not an http:// URL"))?
        .trim_end_matches('/');
    let address = std::net::ToSocketAddrs::to_socket_addrs(authority)
        .map_err(|error| format!("{authority}: {error}"))?
        .next()
        .ok_or_else(|| format!("{authority} has no address"))?;
    let mut stream = std::net::TcpStream::connect_timeout(&address, REPORT_TIMEOUT)
        .map_err(|error| format!("connect to {authority}: {error}"))?;
    stream
        .set_read_timeout(Some(REPORT_TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(REPORT_TIMEOUT)))
        .map_err(|error| error.to_string())?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body.as_bytes()))
        .map_err(|error| format!("send to {authority}: {error}"))?;
    let mut answer = Vec::new();
    let _ = stream.take(64 << 10).read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    let status = answer.split(' ').nth(1).unwrap_or("");
    if status == "200" {
        Ok(())
    } else {
        let first = answer.lines().next().unwrap_or("no answer");
        let body = answer.split("\r\n\r\n").nth(1).unwrap_or("");
        Err(format!("the proxy answered {first} {body}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_command_and_its_origin_are_read_from_the_shell_arguments() {
        assert_eq!(
            read_invocation("bash", &os(&["-lc", "cargo test"])),
            Some(("cargo test".into(), "bash -lc".into()))
        );
        assert_eq!(
            read_invocation("bash", &os(&["-o", "pipefail", "-c", "a | b"])),
            Some(("a | b".into(), "bash -o pipefail -c".into()))
        );
        assert_eq!(read_invocation("sh", &os(&["build.sh", "fast"])), None);
        assert_eq!(read_invocation("bash", &os(&["-l"])), None);
        assert_eq!(read_invocation("bash", &os(&[])), None);
    }

    #[test]
    fn a_stream_keeps_its_tail_address_and_length() {
        let input: Vec<u8> = (0..40_000u32).map(|n| b'a' + (n % 26) as u8).collect();
        let mut passed = Vec::new();
        let kept = tee(input.as_slice(), &mut passed);
        assert_eq!(passed, input);
        let captured = kept.captured(None);
        assert_eq!(captured.bytes, 40_000);
        assert_eq!(captured.tail.len(), TAIL_BYTES);
        assert_eq!(captured.cut, 40_000 - TAIL_BYTES as u64);
        assert!(input.ends_with(captured.tail.as_bytes()));
        assert_eq!(
            captured.sha256,
            format!("sha256:{}", hex::encode(Sha256::digest(&input)))
        );
    }
}
