//! The always-on JSONL call log: one row when a model call starts and one when it ends.
//!
//! It exists because of what debugging used to cost: a headless run that sits on "still
//! waiting" for fifteen minutes writes nothing anywhere that says which call is in flight,
//! what shape it had, or how it ended. A logging proxy in front of the provider answers that,
//! but nobody running an agent on a laptop can be asked to build one, so the record is built
//! in. The provider (in `cuca-client`) writes it, because every model call passes through it.
//!
//! One JSON line per row, appended with one `write` each to `logs/calls.jsonl` under the
//! state root (`$CUCA_HOME`, else `$XDG_STATE_HOME/cuca`, else `~/.local/state/cuca`) or a
//! profile directory; [`ENV_VAR`] (`CUCA_CALL_LOG`) turns it `off` or moves it. An attempt writes a
//! start row as it goes out and an end row when it comes back, paired by an 8-hex
//! [`Record::id`]; [`Attempt`] is the drop guard that makes sure the end row is written.
//!
//! ```
//! use cuca_calllog::{read_rows, CallLog, Env, Record};
//!
//! let tmp = tempfile::tempdir()?;
//! let mut env = Env::default(); // injected: the real state root is never touched
//! env.home = Some(tmp.path().to_path_buf());
//! let log = CallLog::from_env(&env, None);
//! let path = tmp.path().join(".local/state/cuca/logs/calls.jsonl");
//! assert_eq!(log.path(), Some(path.as_path()));
//! assert!(!path.exists()); // nothing on disk until the first row
//!
//! let call = log.start(Record {
//!     run: "run-1".into(),
//!     tag: "turn".into(),
//!     model: "qwen3".into(),
//!     messages: 2,
//!     ..Default::default()
//! });
//! call.finish(Record { status: 200, prompt_tokens: 31, cost: f64::NAN, ..Default::default() });
//!
//! let rows = read_rows(&path)?.rows;
//! assert_eq!(rows.len(), 2);
//! assert_eq!(rows[0].phase, "start");
//! assert_eq!(rows[1].id, rows[0].id);
//! assert_eq!(rows[1].run, "run-1");
//! assert_eq!(rows[1].note, "cost was NaN, which JSON cannot spell: taken off the row");
//! assert_eq!(log.calls_for("run-1"), 1);
//! assert_eq!(log.last_call().map(|c| c.model), Some("qwen3".to_string()));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The process-global functions ([`open`], [`append`], [`start`], [`path`], [`bodies`],
//! [`calls_for`], [`last_call`], [`close`]) act on one global [`CallLog`] built from the real
//! environment; code that can take a handle should, so its tests can inject one.
//!
//! # What it does not do
//!
//! It never holds the prompts: a row carries the shape of a request (counts, knobs, the
//! ceiling) and the bodies only under [`BODIES_ENV_VAR`]. It never fails a call: a write
//! failure silences the log for the process (one stderr line naming the path), and
//! [`CallLog::append`] has no error to return. It does not sync to disk (a row survives a
//! process crash, not a power cut), does not buffer (every row is written as it happens), and
//! does not lock the file across threads or processes: each line is one `write` to a file
//! opened for appending, which a local filesystem lands whole at the end (on NFS, which does
//! not honour appends atomically, rows from concurrent writers may interleave). Each process
//! rotates on its own count of bytes, and only one predecessor is kept.
#![forbid(unsafe_code)]

mod attempt;
mod body;
mod env;
mod error;
mod finite;
mod log;
mod read;
mod record;
mod redact;
mod time;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

pub use attempt::Attempt;
pub use body::ResponseBody;
pub use env::{
    is_cargo_test_binary, previous_path, Env, OffReason, BODIES_ENV_VAR, BODIES_MAX_BYTES,
    DIR_NAME, ENV_VAR, FILE_NAME, HOME_ENV_VAR, MAX_BYTES, OFF_VALUE, PREVIOUS_FILE_NAME,
};
pub use error::Error;
pub use log::{Builder, CallLog, LastCall, SilenceScope, WarnSink};
pub use read::{calls_per_run, in_flight, read_rows, ReadReport, SkippedLine, TornTail};
pub use record::{clip_error, new_id, Ended, Record, MAX_ERROR_CHARS, PHASE_START};
pub use redact::{
    redact_error, Quoted, MAX_REDACTED_BYTES, MIN_QUOTED_BYTES, QUOTE_MARKER, WIRE_WORDS,
};

/// The process-global log; `None` until first used or [`open`]ed.
static GLOBAL: Mutex<Option<CallLog>> = Mutex::new(None);

/// The process-global log: the one [`open`] pointed, or, before any `open`, the log for the
/// state root under this process's environment. A clone, so holding it holds no lock.
pub fn global() -> CallLog {
    let mut global = GLOBAL.lock().unwrap_or_else(PoisonError::into_inner);
    global.get_or_insert_with(|| CallLog::open(None)).clone()
}

/// Points the global log at profile directory `dir` (the state root when `None`), under this
/// process's environment. Called once at startup. It opens nothing: the file is opened by the
/// first row, so a process that makes no call leaves no file and no empty `logs/` behind.
/// [`calls_for`] and [`last_call`] carry over from the log it replaces; attempts already
/// started finish into the old one.
pub fn open(dir: Option<&Path>) {
    let mut global = GLOBAL.lock().unwrap_or_else(PoisonError::into_inner);
    let mut builder = CallLog::builder_from_env(&Env::from_process(), dir);
    if let Some(previous) = global.take() {
        previous.close();
        builder = builder.memory(previous.memory());
    }
    *global = Some(builder.build());
}

/// Appends one row to the global log; see [`CallLog::append`].
pub fn append(record: Record) {
    global().append(record);
}

/// Writes a start row to the global log and returns its guard; see [`CallLog::start`].
pub fn start(record: Record) -> Attempt {
    global().start(record)
}

/// Where the global log's rows are going, or `None` when it is off.
pub fn path() -> Option<PathBuf> {
    global().path().map(Path::to_path_buf)
}

/// The global log's file for profile directory `dir`, resolved from this process's
/// environment; `None` when the log is switched off.
pub fn path_for(dir: Option<&Path>) -> Option<PathBuf> {
    Env::from_process().path_for(dir)
}

/// Whether this process was asked to record the request and response bodies.
pub fn bodies() -> bool {
    global().bodies()
}

/// How many calls run `run` has made through the global log; see [`CallLog::calls_for`].
pub fn calls_for(run: &str) -> u64 {
    global().calls_for(run)
}

/// The newest call the global log heard back from; see [`CallLog::last_call`].
pub fn last_call() -> Option<LastCall> {
    global().last_call()
}

/// Releases the global log's file; see [`CallLog::close`].
pub fn close() {
    global().close();
}
