//! The process the crash and full-disk tests kill or starve: it records in a loop and prints
//! `ack <n>` on stdout after each record the store acknowledged, then exits on the first error
//! with `error <message>` (a crash test ends it with `SIGKILL` long before that).
//!
//! ```text
//! cuca-reliability-child session  <dir> <session_id> <buffered|sync> [max_records]
//! cuca-reliability-child calllog  <file> <first_call> [max_calls]
//! cuca-reliability-child journal  <workspace> [max_entries]
//! cuca-reliability-child calllog-full <file> <calls>
//! cuca-reliability-child journal-full <workspace> <entries>
//! cuca-reliability-child lock     <dir> <session_id>
//! cuca-reliability-child share    <dir> <session_id> <writer> <records> <hold|close> [gate_after]
//! cuca-reliability-child verify   <dir> <session_id>
//! ```
//!
//! The `-full` modes are for a disk that fills up: they make every call whatever the log does,
//! print `ack <n>` per call, then `silenced <bool>` or the journal's `stopped <reason>` and
//! `error <message>` lines, and exit 0 — the run they observe must not notice.
//!
//! `lock` opens the session for append, prints `locked`, and holds it until stdin closes.
//! `share` is one of two programs recording to one session through a `SessionLogPlugin`: it
//! appends `records` records (`Output "<writer> <i>"`), printing `ack <sequence>` for each,
//! and meets the other writer's lock by trying again: it prints `locked` the first time, and
//! the caller of a real program would do the same. `close` gives the lock up after every
//! record (the two take turns), `hold` keeps it to the end. With `gate_after`, it prints `gate`
//! after that many records and waits, lock held, for a line on stdin.
//! `verify` prints what a fresh `FileBackend` reads back: `verdict <clean|recovered|refused>`
//! and `records <n>` (the full-disk test runs it inside the small file system it mounted).

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow_free::Result;
use cuca_events::{PluginError, SessionBackend, SessionEvent, SessionRecord};
use cuca_reliability::payload;
use cuca_session_log::SessionLogPlugin;
use cuca_store_file::{Durability, FileBackend, Verdict};

/// The child's own tiny error plumbing: a string is all the parent reads.
mod anyhow_free {
    pub(crate) type Result<T> = std::result::Result<T, String>;
}

fn arg(args: &[String], i: usize, what: &str) -> Result<String> {
    args.get(i)
        .cloned()
        .ok_or_else(|| format!("missing argument: {what}"))
}

fn limit(args: &[String], i: usize) -> Result<u64> {
    match args.get(i) {
        None => Ok(u64::MAX),
        Some(text) => text.parse().map_err(|e| format!("bad limit {text:?}: {e}")),
    }
}

fn ack(out: &mut impl Write, n: u64) -> Result<()> {
    // The parent may have stopped reading (it is about to kill us): a broken pipe ends the loop.
    writeln!(out, "ack {n}")
        .and_then(|()| out.flush())
        .map_err(|e| format!("stdout: {e}"))
}

fn session(args: &[String]) -> Result<()> {
    let dir = PathBuf::from(arg(args, 2, "dir")?);
    let session_id = arg(args, 3, "session_id")?;
    let durability = match arg(args, 4, "durability")?.as_str() {
        "sync" => Durability::Sync,
        _ => Durability::Buffered,
    };
    let max = limit(args, 5)?;
    let backend = FileBackend::new(&dir)
        .map_err(|e| e.to_string())?
        .with_durability(durability);
    let backend: Arc<dyn SessionBackend> = Arc::new(backend);
    // The payload of a record is chosen from its sequence so the parent can check every byte
    // it reads back; the plugin picks the sequence itself (last + 1 after a restart), and this
    // checks it picked the one the session's length says.
    let first = backend
        .replay(&session_id)
        .map_err(|e| e.to_string())?
        .len() as u64;
    let plugin = SessionLogPlugin::new(backend).with_session_id(session_id);
    let mut out = std::io::stdout().lock();
    for next in first..first.saturating_add(max) {
        let record = plugin
            .append_log(payload::session_event(next))
            .map_err(|e| e.to_string())?;
        if record.sequence != next {
            return Err(format!(
                "the plugin chose sequence {} where the session's length says {next}",
                record.sequence
            ));
        }
        ack(&mut out, next)?;
    }
    Ok(())
}

fn calllog(args: &[String]) -> Result<()> {
    let path = PathBuf::from(arg(args, 2, "file")?);
    let first: u64 = arg(args, 3, "first_call")?
        .parse()
        .map_err(|e| format!("bad first_call: {e}"))?;
    let max = limit(args, 4)?;
    let log = cuca_calllog::CallLog::builder()
        .path(Some(path))
        .bodies(true)
        .build();
    let mut out = std::io::stdout().lock();
    let mut n = first;
    while n - first < max {
        let call = log.start(cuca_calllog::Record {
            id: payload::call_id(n),
            run: "crash".into(),
            model: "m".into(),
            request_body: payload::call_body(n),
            ..Default::default()
        });
        call.finish(cuca_calllog::Record {
            status: 200,
            completion_tokens: n,
            ..Default::default()
        });
        if log.is_silenced() {
            return Err("the call log went silent".into());
        }
        ack(&mut out, n)?;
        n += 1;
    }
    Ok(())
}

fn journal(args: &[String]) -> Result<()> {
    let workspace = PathBuf::from(arg(args, 2, "workspace")?);
    let max = limit(args, 3)?;
    let config =
        cuca_journal::RecorderConfig::new(&workspace, "crash").map_err(|e| e.to_string())?;
    let recorder = cuca_journal::Recorder::start(config).map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    let mut n = 0;
    while n < max {
        if n % 3 == 0 {
            let output = payload::session_text(n);
            recorder.tool_result(
                "root",
                &cuca_journal::ToolOutcome {
                    call_id: &payload::call_id(n),
                    name: "shell",
                    arguments: "{}",
                    output: &output,
                    is_error: false,
                },
            );
        } else {
            recorder.clock("root", Duration::from_millis(n), None);
        }
        let status = recorder.status();
        if let Some(reason) = status.stopped {
            return Err(format!("capture stopped: {reason:?} {:?}", status.error));
        }
        ack(&mut out, status.entries)?;
        n += 1;
    }
    let status = recorder.finish();
    writeln!(out, "finished {} {:?}", status.entries, status.stopped).map_err(|e| e.to_string())
}

fn calllog_full(args: &[String]) -> Result<()> {
    let path = PathBuf::from(arg(args, 2, "file")?);
    let calls = limit(args, 3)?;
    let log = cuca_calllog::CallLog::builder()
        .path(Some(path))
        .bodies(true)
        .build();
    let mut out = std::io::stdout().lock();
    for n in 0..calls {
        // The "call": its result must not depend on the log.
        let call = log.start(cuca_calllog::Record {
            id: payload::call_id(n),
            run: "full".into(),
            request_body: payload::call_body(n),
            ..Default::default()
        });
        call.finish(cuca_calllog::Record {
            status: 200,
            completion_tokens: n,
            ..Default::default()
        });
        ack(&mut out, n)?;
    }
    writeln!(out, "silenced {}", log.is_silenced()).map_err(|e| e.to_string())
}

fn journal_full(args: &[String]) -> Result<()> {
    let workspace = PathBuf::from(arg(args, 2, "workspace")?);
    let entries = limit(args, 3)?;
    let config =
        cuca_journal::RecorderConfig::new(&workspace, "full").map_err(|e| e.to_string())?;
    let recorder = cuca_journal::Recorder::start(config).map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    for n in 0..entries {
        let output = payload::session_text(n);
        recorder.tool_result(
            "root",
            &cuca_journal::ToolOutcome {
                call_id: &payload::call_id(n),
                name: "shell",
                arguments: "{}",
                output: &output,
                is_error: false,
            },
        );
        ack(&mut out, n)?;
    }
    let status = recorder.finish();
    writeln!(out, "stopped {:?}", status.stopped).map_err(|e| e.to_string())?;
    writeln!(out, "entries {}", status.entries).map_err(|e| e.to_string())?;
    writeln!(out, "reason {}", status.error.unwrap_or_default()).map_err(|e| e.to_string())
}

fn lock(args: &[String]) -> Result<()> {
    let dir = PathBuf::from(arg(args, 2, "dir")?);
    let session_id = arg(args, 3, "session_id")?;
    let backend = FileBackend::new(&dir).map_err(|e| e.to_string())?;
    backend
        .append(SessionRecord {
            session_id,
            sequence: 0,
            timestamp_ms: 0,
            event: payload::session_event(0),
        })
        .map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "locked")
        .and_then(|()| out.flush())
        .map_err(|e| e.to_string())?;
    // Hold the lock until the parent closes our stdin.
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    drop(backend);
    Ok(())
}

fn share(args: &[String]) -> Result<()> {
    let dir = PathBuf::from(arg(args, 2, "dir")?);
    let session_id = arg(args, 3, "session_id")?;
    let writer = arg(args, 4, "writer")?;
    let records = limit(args, 5)?;
    let close = match arg(args, 6, "hold|close")?.as_str() {
        "close" => true,
        "hold" => false,
        other => return Err(format!("expected hold or close, got {other:?}")),
    };
    let gate_after = limit(args, 7)?;
    let backend = Arc::new(FileBackend::new(&dir).map_err(|e| e.to_string())?);
    let plugin = SessionLogPlugin::new(Arc::clone(&backend) as Arc<dyn SessionBackend>)
        .with_session_id(session_id.clone());
    let mut out = std::io::stdout().lock();
    let mut said_locked = false;
    for i in 0..records {
        if i == gate_after {
            writeln!(out, "gate")
                .and_then(|()| out.flush())
                .map_err(|e| e.to_string())?;
            let mut line = String::new();
            let _ = std::io::stdin().lock().read_line(&mut line);
        }
        let event = SessionEvent::Output {
            text: format!("{writer} {i}"),
        };
        let record = loop {
            match plugin.append_log(event.clone()) {
                Ok(record) => break record,
                // The other program has the session: try again until it gives it up.
                Err(PluginError::Locked { .. }) => {
                    if !said_locked {
                        said_locked = true;
                        writeln!(out, "locked")
                            .and_then(|()| out.flush())
                            .map_err(|e| e.to_string())?;
                    }
                    std::thread::yield_now();
                }
                Err(error) => return Err(error.to_string()),
            }
        };
        if close {
            backend.close(&session_id);
        }
        ack(&mut out, record.sequence)?;
    }
    Ok(())
}

fn verify(args: &[String]) -> Result<()> {
    let dir = PathBuf::from(arg(args, 2, "dir")?);
    let session_id = arg(args, 3, "session_id")?;
    let backend = FileBackend::new(&dir).map_err(|e| e.to_string())?;
    let report = backend.verify(&session_id).map_err(|e| e.to_string())?;
    let verdict = match report.verdict {
        Verdict::Clean => "clean",
        Verdict::Recovered => "recovered",
        _ => "refused",
    };
    let intact = report.records.iter().enumerate().all(|(i, record)| {
        record.sequence == i as u64 && record.event == payload::session_event(i as u64)
    });
    println!("verdict {verdict}");
    println!("records {}", report.records.len());
    println!("intact {intact}");
    println!("torn_tail_bytes {}", report.torn_tail_bytes);
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = match args.get(1).map(String::as_str) {
        Some("session") => session(&args),
        Some("calllog") => calllog(&args),
        Some("journal") => journal(&args),
        Some("calllog-full") => calllog_full(&args),
        Some("journal-full") => journal_full(&args),
        Some("lock") => lock(&args),
        Some("share") => share(&args),
        Some("verify") => verify(&args),
        other => Err(format!("unknown mode {other:?}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            println!("error {message}");
            ExitCode::FAILURE
        }
    }
}
