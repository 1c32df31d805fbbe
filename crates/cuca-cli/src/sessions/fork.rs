//! `cuca fork STORE POINT_ID`: branch a session.

use std::io::Write;
use std::path::Path;

use cuca::parse_point_id;
use serde_json::json;

use super::{require_session, stdout};
use crate::error::CliError;
use crate::store::Store;
use crate::term::line;

/// `cuca fork STORE POINT_ID`.
pub(crate) fn fork(store: &Store, point_id: &str, as_json: bool) -> Result<(), CliError> {
    let (session, _) = parse_point_id(point_id)?;
    // A missing session is named as such before the backend is asked to fork it (another
    // store's fork says "session not found" itself).
    if let Some(file) = store.file() {
        require_session(file, session)?;
    }
    let new_id = match store.backend().fork(session, point_id) {
        Ok(new_id) => new_id,
        Err(cuca::PluginError::Locked { path, .. }) => {
            return Err(held(store, session, point_id, &path))
        }
        Err(error) => return Err(error.into()),
    };
    let mut out = stdout();
    if as_json {
        writeln!(
            out,
            "{}",
            json!({"session": new_id, "from_point": point_id})
        )?;
    } else {
        writeln!(out, "{}", crate::term::line(&new_id))?;
    }
    out.flush()?;
    Ok(())
}

/// Longest command line of the holding process a refusal quotes.
const MAX_COMMAND_CHARS: usize = 120;

/// The refusal of a fork whose parent another process holds open for append (an idle proxy
/// keeps the sessions it recorded open while it runs): which process, when the kernel's lock
/// table says, and the two ways to fork anyway.
fn held(store: &Store, session: &str, point_id: &str, path: &Path) -> CliError {
    let found = lock_holder(path);
    let (holder, stop) = match &found {
        Some((pid, command)) => (
            format!(
                "process {pid}{}",
                command
                    .as_ref()
                    .map_or_else(String::new, |command| format!(" (`{}`)", line(command)))
            ),
            format!(
                "stop it (`kill {pid}`: a proxy closes its recordings on SIGTERM) and fork again"
            ),
        ),
        None => (
            "another process".to_owned(),
            "stop the process that records it and fork again".to_owned(),
        ),
    };
    let sequence = point_id.rsplit_once(':').map_or("", |(_, n)| n);
    let typed = store.command_form();
    CliError::Failed(format!(
        "session {session:?} is held open for append by {holder}, so its fork record cannot be written; {stop}, or fork a copy: `cuca export {typed} {session} > copy.jsonl && cuca import copy.jsonl {typed} {session}-copy && cuca fork {typed} {session}-copy:{sequence}`",
    ))
}

/// The process holding `path`'s `flock`, from the kernel's lock table (`/proc/locks`, Linux),
/// and its command line when `/proc/PID/cmdline` is readable.
fn lock_holder(path: &Path) -> Option<(u32, Option<String>)> {
    use std::os::unix::fs::MetadataExt;
    let metadata = std::fs::metadata(path).ok()?;
    let dev = metadata.dev();
    // glibc's `major` and `minor` of a `dev_t`.
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let table = std::fs::read_to_string("/proc/locks").ok()?;
    let pid = table.lines().find_map(|entry| {
        // `1: FLOCK  ADVISORY  WRITE 12345 fe:00:6078528 0 EOF`
        let fields: Vec<&str> = entry.split_whitespace().collect();
        if fields.get(1) != Some(&"FLOCK") {
            return None;
        }
        let mut id = fields.get(5)?.split(':');
        let same = u64::from_str_radix(id.next()?, 16).ok()? == major
            && u64::from_str_radix(id.next()?, 16).ok()? == minor
            && id.next()?.parse::<u64>().ok()? == metadata.ino();
        same.then(|| fields.get(4)?.parse::<u32>().ok())?
    })?;
    let command = std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .map(|bytes| {
            let words: Vec<String> = bytes
                .split(|byte| *byte == 0)
                .filter(|word| !word.is_empty())
                .map(|word| String::from_utf8_lossy(word).into_owned())
                .collect();
            let command = words.join(" ");
            match command.char_indices().nth(MAX_COMMAND_CHARS) {
                Some((cut, _)) => format!("{}…", &command[..cut]),
                None => command,
            }
        })
        .filter(|command| !command.is_empty());
    Some((pid, command))
}
