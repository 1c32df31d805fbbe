//! `cuca compare STORE SESSION --from POINT --models A,B[,…] [--verify CMD] -- AGENT…`: would
//! another model have done better from a point on? For each model, a directory of its own
//! holding the workspace as the session started (restored from its first snapshot by `cuca
//! run --in-place`; a session recorded without snapshots gets a copy of the working
//! directory), the agent run again in it through `cuca run --mode fork --from POINT --model M`
//! (the calls before the point replayed, so the agent redoes the recorded steps on the
//! recorded files and reaches the point on the files the point saw; the rest live on M,
//! recorded in a fork that says so), then CMD run in that directory; one table of the runs. The recorded session keeps its records
//! (fork mode adds only the `Fork` audit record a fork leaves in its parent).

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clap::Args;
use cuca::{fork_parent, PluginError, SessionEvent};
use serde_json::json;

use crate::error::CliError;
use crate::store::{Store, StoreArg};
use crate::term::line;

/// The most bytes of the working directory copied for one model: a source tree with its
/// dependencies fits many times over, and a directory past it (a build cache, a data set) is
/// refused by name rather than filling the disk once per model.
pub(crate) const MAX_WORKSPACE_BYTES: u64 = 1 << 30;

/// The most files copied for one model, for the same reason.
const MAX_WORKSPACE_FILES: u64 = 200_000;

/// The most models one compare runs.
const MAX_MODELS: usize = 32;

/// `cuca compare` arguments; `docs/agents.md` has the long form.
#[derive(Debug, Args)]
#[command(
    after_help = "Each model's run: a directory of its own (temporary, kept; its path is in \
                  --json) holding the workspace the session started from (restored from its \
                  first snapshot, or a copy of the current directory when it has none), then `cuca run --mode fork --from POINT --model \
                  MODEL` of AGENT in it, then `sh -c CMD` in it. Exit status 0 once the table is \
                  printed, whatever the verdicts."
)]
pub(crate) struct CompareArgs {
    /// Where the session is: a directory of `.cslog` files, or a PostgreSQL URL.
    #[arg(value_name = "STORE")]
    store: StoreArg,
    /// The recorded session the agent is re-run against.
    session: String,
    /// The first call sent to each model, by number from 1, or a point
    /// `{session}:{sequence}` (as `cuca run --from` takes it).
    #[arg(long, value_name = "POINT")]
    from: String,
    /// The models to compare, comma-separated.
    #[arg(long, value_name = "A,B,…", value_delimiter = ',', required = true)]
    models: Vec<String>,
    /// A shell command run in each model's copy after its run: exit 0 is a pass.
    #[arg(long, value_name = "CMD")]
    verify: Option<String>,
    /// How many models run at once.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    jobs: u32,
    /// One JSON object per model, one a line.
    #[arg(long)]
    json: bool,
    /// The model server the live calls go to.
    #[arg(long)]
    upstream: Option<String>,
    /// The agent to run and its arguments.
    #[arg(required = true, last = true, value_name = "AGENT")]
    agent: Vec<OsString>,
}

/// One model's run, as the table shows it.
#[derive(Debug, Clone, Default)]
struct Outcome {
    model: String,
    /// CMD's verdict: `Some(true)` pass, `Some(false)` fail, `None` without `--verify`.
    verdict: Option<bool>,
    /// The agent's exit code (`cuca run`'s).
    agent_exit: Option<i32>,
    /// The calls made on the model (those after the point), with their tokens.
    turns: u64,
    prompt_tokens: u64,
    completion_tokens: u64,
    /// In US dollars, when the price table knows the model.
    cost: Option<f64>,
    wall: Duration,
    /// The fork the model's calls are recorded in.
    fork: Option<String>,
    workspace: PathBuf,
    log: PathBuf,
    /// Why the run did not happen (a copy or a start that failed).
    error: Option<String>,
}

/// Runs `cuca compare`.
pub(crate) fn run(args: &CompareArgs, schema: Option<&str>) -> Result<(), CliError> {
    let mut models: Vec<String> = Vec::new();
    for model in &args.models {
        let model = model.trim();
        if model.is_empty() {
            return Err(CliError::Usage("--models names an empty model".into()));
        }
        if models.iter().any(|m| m == model) {
            return Err(CliError::Usage(format!(
                "--models names {model:?} twice; each model is run once"
            )));
        }
        models.push(model.to_owned());
    }
    if models.len() > MAX_MODELS {
        return Err(CliError::Usage(format!(
            "--models names {} models; at most {MAX_MODELS} are compared at once",
            models.len()
        )));
    }
    // The point is checked before anything is copied, as each run will check it.
    let from = args
        .from
        .parse::<cuca_proxy::SwapPoint>()
        .map_err(|error| CliError::Usage(error.to_string()))?;
    for model in &models {
        cuca_proxy::ModelSwap {
            from: from.clone(),
            model: model.clone(),
        }
        .validate()
        .map_err(|error| CliError::Usage(error.to_string()))?;
    }
    let store = args.store.open(schema, false)?;
    if store
        .backend()
        .sessions()?
        .binary_search(&args.session)
        .is_err()
    {
        return Err(CliError::Usage(format!(
            "session {:?} is not in {}",
            args.session,
            store.describe()
        )));
    }
    let exe = std::env::current_exe()
        .map_err(|error| CliError::Failed(format!("find the cuca executable: {error}")))?;
    let store_word = match &args.store {
        StoreArg::Dir(dir) => std::path::absolute(dir)
            .map_err(|error| CliError::Failed(format!("{}: {error}", dir.display())))?
            .into_os_string(),
        StoreArg::Postgres(url) => OsString::from(url),
    };
    // A session that recorded its workspace starts each model from the recorded start,
    // never from today's files, which may be the end of the run compared.
    let restored = crate::workspace::has_snapshot(&store, &args.session)?;
    let source = std::env::current_dir()
        .map_err(|error| CliError::Failed(format!("read the working directory: {error}")))?;
    let scratch = std::env::temp_dir().join(format!(
        "cuca-compare-{}-{:08x}",
        std::process::id(),
        rand_word()
    ));
    std::fs::create_dir_all(&scratch)
        .map_err(|error| CliError::Failed(format!("create {}: {error}", scratch.display())))?;
    let outcomes: Vec<Mutex<Option<Outcome>>> = models.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let jobs = usize::try_from(args.jobs).unwrap_or(1).min(models.len());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let at = next.fetch_add(1, Ordering::SeqCst);
                let Some(model) = models.get(at) else { break };
                let run = Run {
                    args,
                    schema,
                    exe: &exe,
                    store_word: &store_word,
                    source: &source,
                    restored,
                    scratch: &scratch,
                };
                let outcome = run.one(model, at);
                if let Some(slot) = outcomes.get(at) {
                    *slot
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(outcome);
                }
            });
        }
    });
    let mut rows: Vec<Outcome> = outcomes
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .unwrap_or_default()
        })
        .collect();
    for row in &mut rows {
        summarise(&store, &args.session, row)?;
    }
    let mut out = crate::sessions::stdout();
    if args.json {
        for row in &rows {
            writeln!(out, "{}", row_json(row))?;
        }
    } else {
        table(&mut out, &rows)?;
    }
    out.flush()?;
    Ok(())
}

/// A random word, so that two compares started in one second by one process id (a
/// container's pid 1) never share a scratch directory.
fn rand_word() -> u32 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    now.subsec_nanos() ^ (now.as_secs() as u32)
}

/// What every model's run shares.
struct Run<'a> {
    args: &'a CompareArgs,
    schema: Option<&'a str>,
    exe: &'a Path,
    store_word: &'a OsString,
    source: &'a Path,
    /// Whether `cuca run` restores the session's start into each model's directory (the
    /// session has a workspace snapshot); otherwise `source` is copied there.
    restored: bool,
    scratch: &'a Path,
}

impl Run<'_> {
    /// `model`'s run: its directory, the agent through fork mode, then CMD.
    fn one(&self, model: &str, at: usize) -> Outcome {
        let home = self.scratch.join(format!("{at}-{}", file_word(model)));
        let mut outcome = Outcome {
            model: model.to_owned(),
            log: home.join("agent.log"),
            ..Outcome::default()
        };
        let prepared = if self.restored {
            empty_workspace(&home)
        } else {
            prepare_workspace(self.source, &home)
        };
        let workspace = match prepared {
            Ok(workspace) => workspace,
            Err(error) => {
                outcome.error = Some(error);
                return outcome;
            }
        };
        outcome.workspace = workspace.clone();
        let log = match std::fs::File::create(&outcome.log) {
            Ok(log) => log,
            Err(error) => {
                outcome.error = Some(format!("create {}: {error}", outcome.log.display()));
                return outcome;
            }
        };
        let mut command = Command::new(self.exe);
        if let Some(schema) = self.schema {
            command.args(["--schema", schema]);
        }
        command
            .arg("run")
            .arg("--store")
            .arg(self.store_word)
            .args(["--mode", "fork", "--session", &self.args.session])
            .args(["--from", &self.args.from, "--model", model]);
        if self.restored {
            // Into this model's own directory, which holds nothing to lose.
            command.args(["--in-place", "--force"]);
        }
        if let Some(upstream) = &self.args.upstream {
            command.args(["--upstream", upstream]);
        }
        command
            .arg("--")
            .args(&self.args.agent)
            .current_dir(&workspace)
            .stdin(Stdio::null());
        match log.try_clone() {
            Ok(err) => command.stdout(log).stderr(err),
            Err(_) => command.stdout(Stdio::null()).stderr(Stdio::null()),
        };
        let started = Instant::now();
        match command.status() {
            Ok(status) => outcome.agent_exit = Some(crate::error::process_exit_code(status)),
            Err(error) => {
                outcome.error = Some(format!("start cuca run: {error}"));
                return outcome;
            }
        }
        outcome.wall = started.elapsed();
        if let Some(verify) = &self.args.verify {
            let verdict = Command::new("sh")
                .args(["-c", verify])
                .current_dir(&workspace)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            outcome.verdict = Some(verdict.is_ok_and(|status| status.success()));
        }
        outcome
    }
}

/// A model name as a file name: what is not a letter, digit, `-`, `_` or `.` becomes `_`.
fn file_word(model: &str) -> String {
    model
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The directory a model's agent runs in when `cuca run` restores the session's start into
/// it: new and empty.
fn empty_workspace(home: &Path) -> Result<PathBuf, String> {
    let work = home.join("work");
    std::fs::create_dir_all(&work)
        .map_err(|error| format!("create {}: {error}", work.display()))?;
    Ok(work)
}

/// The directory a model's agent runs in for a session with no snapshot: a copy of `source` (the working directory), made
/// under `home`. Everything is copied (hidden files and `.git` too; symbolic links as links),
/// up to [`MAX_WORKSPACE_BYTES`] and [`MAX_WORKSPACE_FILES`]. This is the one place that
/// decides what the agent starts from, so a restore of the files as they were at the point
/// can take its place.
pub(crate) fn prepare_workspace(source: &Path, home: &Path) -> Result<PathBuf, String> {
    let work = home.join("work");
    std::fs::create_dir_all(&work)
        .map_err(|error| format!("create {}: {error}", work.display()))?;
    let mut budget = (MAX_WORKSPACE_BYTES, MAX_WORKSPACE_FILES);
    copy_tree(source, &work, &mut budget, home)?;
    Ok(work)
}

/// Copies the directory `from` into `to` (which exists), as a model's copy is made, within
/// the same bounds.
pub(crate) fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    let mut budget = (MAX_WORKSPACE_BYTES, MAX_WORKSPACE_FILES);
    copy_tree(from, to, &mut budget, to)
}

fn copy_tree(from: &Path, to: &Path, budget: &mut (u64, u64), skip: &Path) -> Result<(), String> {
    let entries =
        std::fs::read_dir(from).map_err(|error| format!("read {}: {error}", from.display()))?;
    for entry in entries {
        let entry = entry.map_err(|error| format!("read {}: {error}", from.display()))?;
        let path = entry.path();
        // The copy may be made inside the directory copied (a temporary directory under it):
        // it is not copied into itself.
        if skip.starts_with(&path) {
            continue;
        }
        let target = to.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|error| format!("read {}: {error}", path.display()))?;
        budget.1 = budget.1.checked_sub(1).ok_or_else(|| {
            format!(
                "the working directory holds more than {MAX_WORKSPACE_FILES} files; copy a smaller one"
            )
        })?;
        if kind.is_symlink() {
            let link = std::fs::read_link(&path)
                .map_err(|error| format!("read {}: {error}", path.display()))?;
            std::os::unix::fs::symlink(&link, &target)
                .map_err(|error| format!("create {}: {error}", target.display()))?;
        } else if kind.is_dir() {
            std::fs::create_dir(&target)
                .map_err(|error| format!("create {}: {error}", target.display()))?;
            copy_tree(&path, &target, budget, skip)?;
        } else if kind.is_file() {
            let size = entry
                .metadata()
                .map_err(|error| format!("read {}: {error}", path.display()))?
                .len();
            budget.0 = budget.0.checked_sub(size).ok_or_else(|| {
                format!(
                    "the working directory holds more than {MAX_WORKSPACE_BYTES} bytes; copy a smaller one"
                )
            })?;
            std::fs::copy(&path, &target).map_err(|error| {
                format!("copy {} to {}: {error}", path.display(), target.display())
            })?;
        }
        // Sockets, pipes and devices are not files an agent works on: left out.
    }
    Ok(())
}

/// Fills `row` with what its fork recorded: the newest fork of `session` (or of one of its
/// conversations, or of a fork of them) that begins its live calls with a `ModelSwap` to the
/// row's model, and the calls, tokens and cost after that record.
fn summarise(store: &Store, session: &str, row: &mut Outcome) -> Result<(), CliError> {
    if row.error.is_some() {
        return Ok(());
    }
    let backend = store.backend();
    let mut best: Option<(u64, String, Tail)> = None;
    for id in backend.sessions()? {
        if !descends_from(&id, session) {
            continue;
        }
        let tail = tail_after_swap(backend, &id, &row.model)?;
        if let Some(tail) = tail {
            if best.as_ref().is_none_or(|(at, _, _)| tail.swapped_at > *at) {
                best = Some((tail.swapped_at, id, tail));
            }
        }
    }
    if let Some((_, id, tail)) = best {
        row.fork = Some(id);
        row.turns = tail.turns;
        row.prompt_tokens = tail.prompt;
        row.completion_tokens = tail.completion;
        row.cost = cuca_cost::PriceTable::bundled()
            .ok()
            .and_then(|table| table.price(&row.model))
            .map(|price| {
                price
                    .cost(&cuca_cost::Usage {
                        input: tail.prompt,
                        output: tail.completion,
                        ..cuca_cost::Usage::default()
                    })
                    .total()
            });
    }
    Ok(())
}

/// Whether `id` is a fork of `session` or of one of its conversations
/// (`{session}:conv:{n}`), at any depth.
fn descends_from(id: &str, session: &str) -> bool {
    let mut at = id;
    while let Some((parent, _)) = fork_parent(at) {
        if parent == session
            || parent
                .strip_prefix(session)
                .is_some_and(|rest| rest.starts_with(":conv:"))
        {
            return true;
        }
        at = parent;
    }
    false
}

/// What a fork recorded after its `ModelSwap`.
struct Tail {
    /// When the swap was recorded, milliseconds since the epoch.
    swapped_at: u64,
    turns: u64,
    prompt: u64,
    completion: u64,
}

/// The calls `id` recorded after a `ModelSwap` to `model`; `None` when it holds none.
fn tail_after_swap(
    backend: &dyn cuca::SessionBackend,
    id: &str,
    model: &str,
) -> Result<Option<Tail>, PluginError> {
    let mut tail: Option<Tail> = None;
    backend.replay_each(id, &mut |record| {
        match (&record.event, tail.as_mut()) {
            (SessionEvent::ModelSwap { to, .. }, None) if to == model => {
                tail = Some(Tail {
                    swapped_at: record.timestamp_ms,
                    turns: 0,
                    prompt: 0,
                    completion: 0,
                });
            }
            (
                SessionEvent::TokenUsage {
                    prompt_tokens,
                    completion_tokens,
                },
                Some(tail),
            ) => {
                tail.turns += 1;
                tail.prompt += prompt_tokens;
                tail.completion += completion_tokens;
            }
            _ => {}
        }
        Ok(())
    })?;
    Ok(tail)
}

/// A row's verdict in a word.
fn verdict_word(row: &Outcome) -> &'static str {
    match (&row.error, row.verdict) {
        (Some(_), _) => "error",
        (None, Some(true)) => "pass",
        (None, Some(false)) => "fail",
        (None, None) => "—",
    }
}

/// A cost in dollars, or `unknown` when the price table does not know the model. A cost
/// under a cent keeps six decimals, so a cheap run never reads as `$0.0000`.
fn cost_word(cost: Option<f64>) -> String {
    match cost {
        None => "unknown".to_owned(),
        Some(cost) if cost < 0.01 => format!("${cost:.6}"),
        Some(cost) => format!("${cost:.4}"),
    }
}

fn row_json(row: &Outcome) -> serde_json::Value {
    json!({
        "model": row.model,
        "verdict": match (&row.error, row.verdict) {
            (Some(_), _) => json!("error"),
            (None, Some(true)) => json!("pass"),
            (None, Some(false)) => json!("fail"),
            (None, None) => serde_json::Value::Null,
        },
        "agent_exit": row.agent_exit,
        "turns": row.turns,
        "prompt_tokens": row.prompt_tokens,
        "completion_tokens": row.completion_tokens,
        "cost_usd": row.cost,
        "wall_ms": u64::try_from(row.wall.as_millis()).unwrap_or(u64::MAX),
        "fork": row.fork,
        "workspace": row.workspace.display().to_string(),
        "log": row.log.display().to_string(),
        "error": row.error,
    })
}

/// The text table: a header, then one aligned row per model; a row that failed to run says
/// why under the table.
fn table(out: &mut dyn Write, rows: &[Outcome]) -> Result<(), CliError> {
    let header = [
        "model",
        "verdict",
        "turns",
        "tokens in",
        "tokens out",
        "cost",
        "wall",
        "fork",
    ];
    let cells: Vec<[String; 8]> = rows
        .iter()
        .map(|row| {
            [
                line(&row.model).to_string(),
                verdict_word(row).to_owned(),
                row.turns.to_string(),
                row.prompt_tokens.to_string(),
                row.completion_tokens.to_string(),
                cost_word(row.cost),
                format!("{:.1} s", row.wall.as_secs_f64()),
                row.fork
                    .as_deref()
                    .map_or_else(|| "—".to_owned(), |fork| line(fork).to_string()),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let render = |cells: Vec<&str>| {
        let mut text = String::new();
        for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
            let pad = width.saturating_sub(cell.chars().count());
            // Numbers are right-aligned, words left.
            if (2..=4).contains(&i) {
                text.push_str(&" ".repeat(pad));
                text.push_str(cell);
            } else {
                text.push_str(cell);
                text.push_str(&" ".repeat(pad));
            }
            text.push_str("  ");
        }
        text.trim_end().to_owned()
    };
    writeln!(out, "{}", render(header.to_vec()))?;
    for row in &cells {
        writeln!(out, "{}", render(row.iter().map(String::as_str).collect()))?;
    }
    for row in rows {
        if let Some(error) = &row.error {
            writeln!(out, "{}: {}", line(&row.model), line(error))?;
        } else if row.agent_exit.is_some_and(|code| code != 0) {
            writeln!(
                out,
                "{}: the agent exited with status {} (its output: {})",
                line(&row.model),
                row.agent_exit.unwrap_or_default(),
                row.log.display()
            )?;
        }
    }
    Ok(())
}
