//! The workspace side of a run: `cuca checkout`, the snapshots `cuca run` and `cuca proxy
//! --workspace` take before each recorded call, the restored copy a replay or fork run
//! starts in, and the shell shim that records the commands an agent runs.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use cuca::{SessionEvent, SessionRecord};
use cuca_workspace::{
    restore, DirObjects, ObjectId, ObjectStore, RestoreOptions, SnapshotConfig, Snapshotter,
};

use crate::error::CliError;
use crate::objects::objects_for;
use crate::store::{Store, StoreArg};

use crate::shell::{OBJECTS_ENV, WORKSPACE_ENV};

mod roots;

/// `cuca checkout` arguments.
#[derive(Debug, Args)]
pub(crate) struct CheckoutArgs {
    /// A directory of `.cslog` files (its workspace objects are in `STORE/.cuca-workspace`).
    #[arg(value_name = "STORE")]
    store: StoreArg,
    /// `SESSION:SEQUENCE` (the workspace as the last snapshot at or before that record
    /// had it), or a session id alone (its last snapshot).
    #[arg(value_name = "SESSION:POINT")]
    point: String,
    /// Where the files are written; created if missing, refused if not empty.
    #[arg(value_name = "DIR")]
    dir: PathBuf,
    /// Write into a directory that is not empty (files the snapshot holds are overwritten,
    /// others are left as they are).
    #[arg(long)]
    force: bool,
}

/// The workspace flags of `cuca run`.
#[derive(Debug, Args)]
pub(crate) struct RunWorkspaceArgs {
    /// The agent's workspace, snapshotted before every recorded model call (default: the
    /// current directory).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Record no workspace snapshots and no shell commands.
    #[arg(long, conflicts_with_all = ["workspace", "in_place"])]
    no_workspace: bool,
    /// Files larger than this many bytes are left out of snapshots (named in the record).
    #[arg(long, value_name = "BYTES", default_value_t = cuca_workspace::DEFAULT_MAX_FILE_BYTES)]
    max_file_bytes: u64,
    /// Replay and fork: restore the recorded start into the workspace itself instead of a
    /// fresh copy (refused when it is a git work tree with uncommitted changes).
    #[arg(long)]
    in_place: bool,
    /// With --in-place: restore over uncommitted changes.
    #[arg(long, requires = "in_place")]
    force: bool,
}

/// What `cuca run` does for the workspace, prepared before COMMAND starts.
pub(crate) struct Prepared {
    /// Where COMMAND runs (the restored copy), when not the current directory.
    pub(crate) cwd: Option<PathBuf>,
    /// The variables COMMAND gets: the shim first on `PATH`, `SHELL`, and the shim's own.
    pub(crate) env: Vec<(String, OsString)>,
    /// The shim's directory, removed when the run ends.
    shims: Option<PathBuf>,
}

impl Drop for Prepared {
    fn drop(&mut self) {
        if let Some(dir) = &self.shims {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// COMMAND as `cuca run`'s own `PATH` finds it: with the shim first on COMMAND's `PATH`, a
/// COMMAND named `sh` or `bash` (`cuca run -- sh -c '…'`) would otherwise be the shim, and
/// the whole agent one recorded command.
pub(crate) fn program(program: &std::ffi::OsStr, prepared: Option<&Prepared>) -> PathBuf {
    let as_given = PathBuf::from(program);
    if prepared.is_none_or(|p| p.shims.is_none()) || as_given.components().count() != 1 {
        return as_given;
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .unwrap_or(as_given)
}

/// The records of `session` that are workspace snapshots, with their sequences.
fn snapshots(store: &Store, session: &str) -> Result<Vec<(u64, ObjectId)>, CliError> {
    let records: Vec<SessionRecord> = store.backend().replay(session)?;
    let mut found = Vec::new();
    for record in records {
        if let SessionEvent::WorkspaceSnapshot { snapshot, .. } = &record.event {
            let id = ObjectId::parse(snapshot).map_err(|error| {
                CliError::Failed(format!("record {}: {error}", record.point_id()))
            })?;
            found.push((record.sequence, id));
        }
    }
    Ok(found)
}

/// Whether `session` recorded its workspace (holds a snapshot to restore).
pub(crate) fn has_snapshot(store: &Store, session: &str) -> Result<bool, CliError> {
    Ok(!snapshots(store, session)?.is_empty())
}

/// Runs `cuca checkout`.
pub(crate) fn checkout(args: &CheckoutArgs, schema: Option<&str>) -> Result<(), CliError> {
    let store = args.store.open(schema, false)?;
    let objects = objects_for(&args.store, &store)?;
    let sessions = store.backend().sessions()?;
    // A session id may itself end in `:N` (a conversation, `run:conv:1`): a name that is a
    // session is taken whole, anything else as `SESSION:SEQUENCE`.
    let (session, up_to) = if sessions.contains(&args.point) {
        (args.point.as_str(), u64::MAX)
    } else {
        cuca::parse_point_id(&args.point)?
    };
    let found = snapshots(&store, session)?;
    let Some((sequence, id)) = found.iter().rev().find(|(sequence, _)| *sequence <= up_to) else {
        return Err(CliError::Usage(format!(
            "session {session:?} has no workspace snapshot at or before {} (it was recorded without a watched workspace, or the point is before its first call)",
            args.point
        )));
    };
    let options = RestoreOptions {
        force: args.force,
        prune: None,
    };
    let restored = restore(objects.as_ref(), id, &args.dir, &options).map_err(workspace_error)?;
    eprintln!(
        "cuca checkout: {} files of {session}:{sequence} ({id}) written to {}",
        restored.n_written,
        args.dir.display()
    );
    Ok(())
}

fn workspace_error(error: cuca_workspace::WorkspaceError) -> CliError {
    match error {
        cuca_workspace::WorkspaceError::NotEmpty { .. } => {
            CliError::Usage(format!("{error} (--force writes into it anyway)"))
        }
        other => CliError::Failed(other.to_string()),
    }
}

/// Prepares the workspace of a `cuca run` in `mode`: a replay or fork run is restored to the
/// session's first snapshot (in a fresh copy, or in place), the workspace is watched by
/// `proxy` unless the mode records nothing, and the shell shim is written.
pub(crate) fn prepare(
    args: &RunWorkspaceArgs,
    store_arg: &StoreArg,
    store: &Store,
    mode: cuca_proxy::Mode,
    session: &str,
    proxy: &cuca_proxy::Proxy,
) -> Result<Option<Prepared>, CliError> {
    if args.no_workspace {
        return Ok(None);
    }
    let objects: Arc<dyn ObjectStore> = match objects_for(store_arg, store) {
        Ok(objects) => objects,
        Err(CliError::Usage(why)) if args.workspace.is_none() && !args.in_place => {
            eprintln!("cuca run: no workspace recorded: {why}");
            return Ok(None);
        }
        Err(error) => return Err(error),
    };
    let given = match &args.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()
            .map_err(|error| CliError::Failed(format!("the current directory: {error}")))?,
    };
    let mut workspace = given
        .canonicalize()
        .map_err(|error| CliError::Usage(format!("workspace {}: {error}", given.display())))?;
    let mut cwd = None;
    let mut start = None;
    if matches!(mode, cuca_proxy::Mode::Replay | cuca_proxy::Mode::Fork) {
        match snapshots(store, session)?.first() {
            None => eprintln!(
                "cuca run: session {session} has no workspace snapshot; COMMAND runs in {} as it is",
                workspace.display()
            ),
            Some((sequence, id)) => {
                let target = if args.in_place {
                    refuse_uncommitted(&workspace, args.force)?;
                    workspace.clone()
                } else {
                    fresh_copy_dir(session)?
                };
                let options = RestoreOptions {
                    force: args.in_place,
                    prune: args.in_place.then(|| SnapshotConfig {
                        max_file_bytes: args.max_file_bytes,
                        exclude: excluded(store_arg),
                    }),
                };
                let restored =
                    restore(objects.as_ref(), id, &target, &options).map_err(workspace_error)?;
                eprintln!(
                    "cuca run: the workspace of {session}:{sequence} ({} files) restored into {}",
                    restored.n_written,
                    target.display()
                );
                if !args.in_place {
                    // The agent runs in the copy and says so in its requests (its working
                    // directory is in Claude Code's and Codex's prompts), and the recorded
                    // answers name the recorded workspace's files: the proxy reads the copy's
                    // path as the recorded workspace's in requests, and the other way round in
                    // replayed answers. The recorded path is the one the record run wrote
                    // down; without it, the directory the run was started in.
                    let copy = target.canonicalize().unwrap_or_else(|_| target.clone());
                    let recorded = match store_arg {
                        StoreArg::Dir(dir) => roots::recorded(dir, session),
                        StoreArg::Postgres(_) => None,
                    }
                    .unwrap_or_else(|| workspace.clone());
                    proxy.read_requests_with(cuca_proxy::Aliases::workspace(
                        &copy.to_string_lossy(),
                        &recorded.to_string_lossy(),
                    ));
                    cwd = Some(target.clone());
                    workspace = target;
                }
                start = Some(*id);
            }
        }
    }
    if let (StoreArg::Dir(dir), true) = (store_arg, start.is_none() && mode.forwards()) {
        roots::remember(dir, session, &workspace)?;
    }
    if mode.forwards() {
        let config = SnapshotConfig {
            max_file_bytes: args.max_file_bytes,
            exclude: excluded(store_arg),
        };
        let snapshotter = Snapshotter::new(&workspace, Arc::clone(&objects), config)
            .map_err(|error| CliError::Failed(error.to_string()))?;
        proxy.watch_workspace(cuca_proxy::WorkspaceWatch::new(snapshotter, start));
    }
    let mut env = vec![(WORKSPACE_ENV.to_owned(), workspace.clone().into_os_string())];
    if let StoreArg::Dir(dir) = store_arg {
        let objects_dir = std::path::absolute(dir.join(DirObjects::DIR_NAME).join("objects"))
            .unwrap_or_else(|_| dir.join(DirObjects::DIR_NAME).join("objects"));
        env.push((OBJECTS_ENV.to_owned(), objects_dir.into_os_string()));
    }
    let shims = if mode.forwards() {
        Some(crate::shell::write_shims(&mut env)?)
    } else {
        crate::shell::point_shell_as_recorded(&mut env);
        None
    };
    Ok(Some(Prepared { cwd, env, shims }))
}

/// What a snapshot never walks: the session store, when it is inside the workspace (the
/// default `cuca-sessions` is), so the recording does not record itself.
fn excluded(store: &StoreArg) -> Vec<PathBuf> {
    match store {
        StoreArg::Dir(dir) => vec![std::path::absolute(dir).unwrap_or_else(|_| dir.clone())],
        StoreArg::Postgres(_) => Vec::new(),
    }
}

/// A new directory for a restored copy: `$TMPDIR/cuca-run-SESSION-PID-N`, kept after the
/// run so what the agent did there can be looked at.
fn fresh_copy_dir(session: &str) -> Result<PathBuf, CliError> {
    new_numbered_dir(&copy_prefix(session))
}

/// A directory made new: `PREFIX` and the first number from 0 that names none (another
/// process or run may have taken the ones before).
pub(crate) fn new_numbered_dir(prefix: &Path) -> Result<PathBuf, CliError> {
    for n in 0..1000 {
        let mut dir = prefix.as_os_str().to_owned();
        dir.push(n.to_string());
        let dir = PathBuf::from(dir);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(error) => {
                return Err(CliError::Failed(format!(
                    "create {}: {error}",
                    dir.display()
                )))
            }
        }
    }
    Err(CliError::Failed(format!(
        "no free directory name {}N",
        prefix.display()
    )))
}

/// What every restored copy of `session` this process makes starts with:
/// `$TMPDIR/cuca-run-SESSION-PID-`, the copy's number after it (the session id with every
/// character but letters, digits, `-` and `_` made `_`).
fn copy_prefix(session: &str) -> PathBuf {
    let safe: String = session
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    std::env::temp_dir().join(format!("cuca-run-{safe}-{}-", std::process::id()))
}

/// Refuses to restore over a git work tree's uncommitted changes unless `force`: asks
/// `git status --porcelain` (read-only), and a directory that is no work tree (or no git)
/// has nothing to lose that git would know of.
fn refuse_uncommitted(workspace: &Path, force: bool) -> Result<(), CliError> {
    if force {
        return Ok(());
    }
    let status = std::process::Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(workspace)
        .stderr(std::process::Stdio::null())
        .output();
    match status {
        Ok(output) if output.status.success() && !output.stdout.is_empty() => {
            Err(CliError::Usage(format!(
                "{} has uncommitted changes: restoring in place would overwrite them (commit them, or --force)",
                workspace.display()
            )))
        }
        _ => Ok(()),
    }
}

/// `cuca proxy --workspace DIR`: the proxy snapshots DIR before every recorded call.
pub(crate) fn watch(
    proxy: &cuca_proxy::Proxy,
    dir: &Path,
    store: &StoreArg,
    opened: &Store,
    max_file_bytes: u64,
) -> Result<(), CliError> {
    let objects = objects_for(store, opened)?;
    let config = SnapshotConfig {
        max_file_bytes,
        exclude: excluded(store),
    };
    let snapshotter = Snapshotter::new(dir, objects, config)
        .map_err(|error| CliError::Usage(error.to_string()))?;
    proxy.watch_workspace(cuca_proxy::WorkspaceWatch::new(snapshotter, None));
    Ok(())
}
