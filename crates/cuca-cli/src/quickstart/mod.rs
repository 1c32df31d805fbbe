//! `cuca quickstart`: cuca's main job, shown offline on a fresh clone in one command. A
//! coding agent's run was recorded through `cuca run` and committed (`fixtures/quickstart`):
//! the model's answers, the workspace before every call, the shell commands. The quickstart
//! replays it — the workspace restored into a new directory and the agent re-running for
//! real, its edit and its commands included, against the recording, with no model and no
//! network — then forks it at its second call with a changed tool result: the unchanged first
//! call is replayed, and from the change on the agent talks to a scripted model on loopback,
//! recorded into a fork. Every step is checked; what to look at next is printed at the end.
//!
//! The agent (`agent.rs`, run as the hidden `cuca quickstart-agent`) and the scripted model
//! (`model.rs`) are part of the binary, so the quickstart needs nothing but cargo.

pub(crate) mod agent;
mod model;
mod start;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use clap::Args;
use cuca::SessionEvent;

use crate::error::CliError;
use crate::store::StoreArg;

/// The committed recording's session.
pub(crate) const SESSION: &str = "quickstart";

/// Where the committed recording lives, from the repository's root.
const FIXTURE: &str = "fixtures/quickstart";

/// What the fork's `check.sh` expects instead: the changed tool result at the second call.
const FORK_WANT: &str = "Hello, world!";

/// `cuca quickstart` arguments.
#[derive(Debug, Args)]
pub(crate) struct QuickstartArgs {
    /// Where the copy of the recording, the replay's workspace and the fork are made: a new
    /// or empty directory (default: a new one under the temporary directory, kept).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Record the quickstart's run afresh into STORE (a directory without a `quickstart`
    /// session) against the scripted model, instead of replaying the committed one: how
    /// `fixtures/quickstart` is made.
    #[arg(long, value_name = "STORE", conflicts_with = "dir")]
    record: Option<PathBuf>,
}

/// Runs `cuca quickstart`.
pub(crate) fn run(args: &QuickstartArgs) -> Result<(), CliError> {
    let exe = std::env::current_exe()
        .map_err(|error| CliError::Failed(format!("find the cuca executable: {error}")))?;
    if let Some(store) = &args.record {
        return record(&exe, store);
    }
    let fixture = find_fixture()?;
    let home = match &args.dir {
        Some(dir) => empty_dir(dir)?,
        None => new_temp_dir()?,
    };
    let store = home.join("store");
    make_dir(&store)?;
    crate::compare::copy_dir(&fixture, &store).map_err(CliError::Failed)?;

    println!(
        "1. The recording: a coding agent fixing a failing check, recorded through `cuca run`"
    );
    println!("   (committed in {FIXTURE}; copied to {})", store.display());
    let recorded = summary(&store, SESSION, None)?;
    println!("   {recorded}");

    println!();
    println!("2. Replay, offline: the workspace restored, the agent re-run against the recording");
    let replay_from = home.join("replay");
    make_dir(&replay_from)?;
    let mut replay = cuca(&exe);
    replay
        .arg("run")
        .arg("--store")
        .arg(&store)
        .args(["--session", SESSION, "--mode", "replay", "--strict", "--"])
        .arg(&exe)
        .arg("quickstart-agent")
        .current_dir(&replay_from)
        // The restored copy is made under the quickstart's directory.
        .env("TMPDIR", &home);
    println!(
        "   $ cuca run --store {} --session {SESSION} --mode replay --strict -- AGENT",
        store.display()
    );
    let replayed = checked(replay, "the replay")?;
    show(&replayed);

    println!();
    println!("3. Fork at the second call: the check changed, so its result does; the first call replays,");
    println!("   the rest goes live to a scripted model on loopback and is recorded into a fork");
    let start = first_snapshot(&store)?;
    let fork_dir = home.join("fork");
    let mut checkout = cuca(&exe);
    checkout
        .arg("checkout")
        .arg(&store)
        .arg(format!("{SESSION}:{start}"))
        .arg(&fork_dir);
    println!(
        "   $ cuca checkout {} {SESSION}:{start} {}",
        store.display(),
        fork_dir.display()
    );
    checked(checkout, "the checkout")?;
    std::fs::write(fork_dir.join(start::CHECK), start::check_script(FORK_WANT))
        .map_err(|error| CliError::Failed(format!("change check.sh: {error}")))?;
    println!("   (check.sh now expects {FORK_WANT:?})");
    let model = model::ScriptedModel::start()?;
    let mut fork = cuca(&exe);
    fork.arg("run")
        .arg("--store")
        .arg(&store)
        .args([
            "--session",
            SESSION,
            "--mode",
            "fork",
            "--no-workspace",
            "--upstream",
        ])
        .arg(model.url())
        .arg("--")
        .arg(&exe)
        .arg("quickstart-agent")
        .current_dir(&fork_dir);
    println!(
        "   $ cuca run --store {} --session {SESSION} --mode fork --upstream MODEL -- AGENT",
        store.display()
    );
    let forked = checked(fork, "the fork")?;
    drop(model);
    show(&forked);
    let greeting = std::fs::read_to_string(fork_dir.join(start::GREETING)).unwrap_or_default();
    if greeting.trim_end() != FORK_WANT {
        return Err(CliError::Failed(format!(
            "the fork's agent left greeting.txt as {greeting:?}, not {FORK_WANT:?}"
        )));
    }
    let fork_id = newest_fork(&store)?;
    let point = cuca::fork_parent(&fork_id)
        .and_then(|(_, point)| point.rsplit_once(':'))
        .and_then(|(_, sequence)| sequence.parse::<u64>().ok());
    println!(
        "   recorded into {fork_id}: records up to {SESSION}:{} shared with the recording (the first call, replayed), then {}",
        point.map_or("?".to_owned(), |p| p.to_string()),
        summary(&store, &fork_id, point)?
    );

    println!();
    println!("Look next:");
    let s = store.display();
    for (what, command) in [
        (
            "the run and its fork in a browser",
            format!("cuca view {s}"),
        ),
        (
            "the second call, its tool result and the command behind it",
            format!("cuca replay {s} {SESSION} --turn 2"),
        ),
        (
            "where the fork parts from the recording",
            format!("cuca diff {s} {SESSION} {fork_id}"),
        ),
        (
            "the files as the run began",
            format!("cuca checkout {s} {SESSION}:{start} DIR"),
        ),
    ] {
        println!("   # {what}");
        println!("   {command}");
    }
    Ok(())
}

/// `cuca` with no pager and no colour, its output captured.
fn cuca(exe: &Path) -> Command {
    let mut command = Command::new(exe);
    command
        .arg("--no-pager")
        .env("NO_COLOR", "1")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_BASE_URL")
        .stdin(Stdio::null());
    command
}

/// Runs `command`; its output, or an error that shows it when it failed.
fn checked(mut command: Command, what: &str) -> Result<Output, CliError> {
    let output = command
        .output()
        .map_err(|error| CliError::Failed(format!("start {what}: {error}")))?;
    if !output.status.success() {
        return Err(CliError::Failed(format!(
            "{what} failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    Ok(output)
}

/// A command's stdout and stderr, indented under its step.
fn show(output: &Output) {
    for stream in [&output.stderr, &output.stdout] {
        for line in String::from_utf8_lossy(stream).lines() {
            println!("   | {line}");
        }
    }
}

/// Records the quickstart's run into `store` against the scripted model.
fn record(exe: &Path, store: &Path) -> Result<(), CliError> {
    if store.join(format!("{SESSION}.cslog")).exists() {
        return Err(CliError::Usage(format!(
            "{} already holds a session {SESSION}; record into another directory",
            store.display()
        )));
    }
    make_dir(store)?;
    let work = new_temp_dir()?;
    start::write(&work).map_err(|error| CliError::Failed(format!("write the start: {error}")))?;
    let model = model::ScriptedModel::start()?;
    let mut command = cuca(exe);
    command
        .arg("run")
        .arg("--store")
        .arg(std::path::absolute(store).unwrap_or_else(|_| store.to_owned()))
        .args(["--session", SESSION, "--upstream"])
        .arg(model.url())
        .arg("--")
        .arg(exe)
        .arg("quickstart-agent")
        .current_dir(&work);
    let output = checked(command, "the recording")?;
    show(&output);
    println!(
        "recorded {}: {}",
        store.display(),
        summary(store, SESSION, None)?
    );
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

/// `fixtures/quickstart` under the working directory or one above it (a clone's root), else
/// where the source tree the binary was built from has it.
fn find_fixture() -> Result<PathBuf, CliError> {
    let here = std::env::current_dir().unwrap_or_default();
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    here.ancestors()
        .chain(std::iter::once(built.as_path()))
        .map(|dir| dir.join(FIXTURE))
        .find(|dir| dir.join(format!("{SESSION}.cslog")).is_file())
        .ok_or_else(|| {
            CliError::Usage(format!(
                "the committed recording {FIXTURE} is not here: run `cuca quickstart` in a clone of cuca"
            ))
        })
}

/// The recorded calls, workspace snapshots and shell commands of `session` (those after
/// sequence `after`, when given), in words.
fn summary(store: &Path, session: &str, after: Option<u64>) -> Result<String, CliError> {
    let opened = StoreArg::Dir(store.to_owned()).open(None, false)?;
    let mut records = opened.backend().replay(session)?;
    if let Some(after) = after {
        records.retain(|record| record.sequence > after);
    }
    let (mut calls, mut snapshots, mut commands, mut failed) = (0, 0, 0, 0);
    for record in &records {
        match &record.event {
            SessionEvent::TokenUsage { .. } => calls += 1,
            SessionEvent::WorkspaceSnapshot { .. } => snapshots += 1,
            SessionEvent::ShellCommand { exit_status, .. } => {
                commands += 1;
                if *exit_status != Some(0) {
                    failed += 1;
                }
            }
            _ => {}
        }
    }
    Ok(format!(
        "{} records: {calls} model calls, {snapshots} workspace snapshots, {commands} shell commands ({failed} failed)",
        records.len()
    ))
}

/// The sequence of the recording's first workspace snapshot: where the run began.
fn first_snapshot(store: &Path) -> Result<u64, CliError> {
    let opened = StoreArg::Dir(store.to_owned()).open(None, false)?;
    opened
        .backend()
        .replay(SESSION)?
        .iter()
        .find(|record| matches!(record.event, SessionEvent::WorkspaceSnapshot { .. }))
        .map(|record| record.sequence)
        .ok_or_else(|| CliError::Failed(format!("{FIXTURE} holds no workspace snapshot")))
}

/// The fork the quickstart's fork run recorded into.
fn newest_fork(store: &Path) -> Result<String, CliError> {
    let opened = StoreArg::Dir(store.to_owned()).open(None, false)?;
    opened
        .backend()
        .sessions()?
        .into_iter()
        .rfind(|id| id.starts_with(&format!("{SESSION}:fork:")))
        .ok_or_else(|| CliError::Failed("the fork run recorded no fork".into()))
}

fn make_dir(dir: &Path) -> Result<(), CliError> {
    std::fs::create_dir_all(dir)
        .map_err(|error| CliError::Failed(format!("create {}: {error}", dir.display())))
}

/// `dir`, made if missing; refused when it holds anything.
fn empty_dir(dir: &Path) -> Result<PathBuf, CliError> {
    make_dir(dir)?;
    let mut entries = std::fs::read_dir(dir)
        .map_err(|error| CliError::Failed(format!("read {}: {error}", dir.display())))?;
    if entries.next().is_some() {
        return Err(CliError::Usage(format!(
            "{} is not empty; give a new or empty --dir",
            dir.display()
        )));
    }
    std::path::absolute(dir)
        .map_err(|error| CliError::Failed(format!("{}: {error}", dir.display())))
}

/// A new directory under the temporary directory: `cuca-quickstart-PID-N`.
fn new_temp_dir() -> Result<PathBuf, CliError> {
    let prefix = format!("cuca-quickstart-{}-", std::process::id());
    crate::workspace::new_numbered_dir(&std::env::temp_dir().join(prefix))
}
