//! The `cuca` command-line tool: inspect, verify, fork, replay, export and import sessions;
//! read the call log; assemble, salvage and summarise capture journals; serve records.
//!
//! The binary (`src/main.rs`) is `std::process::exit(cuca_cli::run(std::env::args_os()))`.
//! Every command reads through the library crates' public APIs (`FileBackend::verify_each`
//! and `replay_each`, `cuca_replay::TurnSplitter`, `cuca_calllog::read_rows`,
//! `cuca_journal::assemble`, …): the CLI holds no knowledge of an on-disk format of its own.
//! Session commands keep no session in memory: a first pass checks and counts, a second
//! prints, so a session of any length reads in the memory of one record. What a recording
//! holds is printed with its control characters escaped (`--json` stays exact).
//! `docs/cli.md` documents every subcommand.
//!
//! Exit codes: [`EXIT_OK`] (0) success, including a session that was damaged but recovered
//! with nothing lost (a warning line says so); [`EXIT_FAILED`] (1) damage a load refuses, a
//! journal or record in another format, or an operation that failed; [`EXIT_USAGE`] (2) bad
//! arguments, a missing directory, a session that does not exist, a malformed point id.
//!
//! ```
//! use cuca::{SessionEvent, SessionRecord};
//!
//! // The per-kind counts `cuca show --kinds` prints, in the seed's order and wording.
//! let record = |sequence, event| SessionRecord { session_id: "demo".into(), sequence, timestamp_ms: 0, event };
//! let records = [
//!     record(0, SessionEvent::SystemPrompt { text: "You are terse.".into() }),
//!     record(1, SessionEvent::Output { text: "no".into() }),
//!     record(2, SessionEvent::Output { text: "ted".into() }),
//! ];
//! assert_eq!(cuca_cli::kinds_line(&records), "SystemPrompt 1, Output 2");
//!
//! // The parent point a fork id names: `{session}:fork:{point}:{n}`.
//! assert_eq!(cuca_cli::fork_parent("demo:fork:demo:1:0"), Some(("demo", "demo:1")));
//! assert_eq!(cuca_cli::fork_parent("demo"), None);
//!
//! // A bad command line is a usage error: exit code 2, and nothing panics.
//! assert_eq!(cuca_cli::run(["cuca", "fork"]), cuca_cli::EXIT_USAGE);
//! ```
//!
//! # What it does not do
//!
//! It never repairs a file unasked: `verify` reports damage, `repair` is the one command that
//! rewrites a damaged session (into a new file, the old one kept aside), and `import` refuses
//! to write into a session that exists (`import claude-code|codex` appends only to the sessions
//! an earlier import of the same transcripts made). It does not talk to a model server (recording is the library's job,
//! see `fixtures/sessions/README.md`). It reads sessions from `FileBackend` directories and,
//! with the default `postgres` feature, from PostgreSQL (`--store postgres://…`, `--schema`);
//! `compact` and `repair` work on directories only. `cuca serve` serves assembled records and nothing else: no listing,
//! no authentication, so keep it on loopback or behind a proxy.
#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

mod compare;
mod completions;
mod cost;
mod error;
mod grep;
mod journal;
mod logs;
mod objects;
mod otel;
mod pager;
mod proxy;
mod quickstart;
mod redaction;
mod repair;
mod run;
mod serve;
mod sessions;
mod shell;
mod store;
mod strict;
mod swap;
mod term;
mod transcripts;
mod ui;
mod view;
mod workspace;

#[cfg(test)]
mod tests;

pub use error::{CliError, EXIT_FAILED, EXIT_OK, EXIT_USAGE};
pub use sessions::{fork_parent, kinds_line};

/// `cuca`: inspect, verify, fork, replay and serve what cuca recorded.
#[derive(Debug, Parser)]
#[command(
    name = "cuca",
    version,
    about = "Inspect, verify, fork, replay and serve what cuca recorded",
    after_help = "Exit codes: 0 success (recovered-but-loadable damage included, with a warning), \
                  1 damage a load refuses or a failed operation, 2 usage errors."
)]
pub struct Cli {
    /// The PostgreSQL schema of a `postgres://…` store (default `cuca`); one schema per fleet,
    /// tenant or environment.
    #[arg(long, global = true, value_name = "NAME")]
    schema: Option<String>,
    #[command(subcommand)]
    command: Command,
    /// Never page: write straight to stdout even on a terminal (piped output never pages).
    #[arg(long, global = true)]
    no_pager: bool,
}

/// One subcommand each; `docs/cli.md` has the long form.
#[derive(Debug, Subcommand)]
enum Command {
    /// One row per session in STORE: records, bytes, first/last time, forks.
    Sessions {
        /// A directory of `.cslog` files, or a PostgreSQL URL (`postgres://…`).
        #[arg(value_name = "STORE")]
        store: store::StoreArg,
        /// JSON Lines, one object per session.
        #[arg(long)]
        json: bool,
        /// Row order: `activity` (most recent last record first) or `name`.
        #[arg(long, value_enum, default_value_t = sessions::SortBy::Activity)]
        sort: sessions::SortBy,
        /// Print only the id of the session with the most recent record.
        #[arg(long)]
        last: bool,
    },
    /// The records of one session, one line each.
    Show {
        /// A directory of `.cslog` files, or a PostgreSQL URL (`postgres://…`).
        #[arg(value_name = "STORE")]
        store: store::StoreArg,
        /// The session id.
        session: String,
        /// Per-kind counts only ("SystemPrompt 1, Message 1, Reasoning 72, …").
        #[arg(long)]
        kinds: bool,
        /// JSON Lines, one `SessionRecord` per line.
        #[arg(long)]
        json: bool,
    },
    /// A session's turns through SessionReplay: system prompts, messages, blocks, completion.
    Replay {
        /// A directory of `.cslog` files, or a PostgreSQL URL (`postgres://…`).
        #[arg(value_name = "STORE")]
        store: store::StoreArg,
        /// The session id.
        session: String,
        /// Only this turn, numbered from 1 (as `cuca grep` and the viewer number them).
        #[arg(long)]
        turn: Option<usize>,
        /// Only the prefix up to and including this point (`{session}:{sequence}`).
        #[arg(long)]
        at: Option<String>,
        /// JSON Lines, one object per turn.
        #[arg(long)]
        json: bool,
    },
    /// Where two sessions part (a fork and its parent): the records they share, the first
    /// difference, then both tails side by side.
    Diff {
        /// A directory of `.cslog` files, or a PostgreSQL URL (`postgres://…`).
        #[arg(value_name = "STORE")]
        store: store::StoreArg,
        /// The first session.
        a: String,
        /// The second session.
        b: String,
        /// One JSON object: the shared count and both tails' records and totals.
        #[arg(long)]
        json: bool,
    },
    /// Branch a session at POINT_ID; prints the new session id.
    Fork {
        /// A directory of `.cslog` files, or a PostgreSQL URL (`postgres://…`).
        #[arg(value_name = "STORE")]
        store: store::StoreArg,
        /// `{session}:{sequence}`; the session is the part before the last `:`.
        point_id: String,
        /// Print `{"session": …}` instead of the bare id.
        #[arg(long)]
        json: bool,
    },
    /// Scan session files: records, skipped frames, torn tails. Exit 1 if a load would refuse.
    Verify {
        /// A directory of `.cslog` files, or a PostgreSQL URL (`postgres://…`).
        #[arg(value_name = "STORE")]
        store: store::StoreArg,
        /// Sessions to scan (default: every session in STORE).
        sessions: Vec<String>,
        /// JSON Lines, one report per session.
        #[arg(long)]
        json: bool,
    },
    /// Gzip finished sessions into `{id}.cslog.gz` (read as before; expanded when written to).
    Compact {
        /// A directory of `.cslog` files (a PostgreSQL store is refused: it keeps no files).
        #[arg(value_name = "DIR")]
        dir: store::StoreArg,
        /// Sessions to compact (default: every session in DIR).
        sessions: Vec<String>,
        /// JSON Lines, one object per session.
        #[arg(long)]
        json: bool,
    },
    /// Accept a damaged session's loss: a new file of its good records, the damaged one kept
    /// aside as `{file}.damaged`; prints what was dropped.
    Repair {
        /// A directory of `.cslog` files (a PostgreSQL store is refused: it keeps no files).
        #[arg(value_name = "DIR")]
        dir: store::StoreArg,
        /// The session id.
        session: String,
        /// Print a JSON summary.
        #[arg(long)]
        json: bool,
    },
    /// Write a session as JSON Lines (one serde_json `SessionRecord` per line), or as one
    /// HTML page that opens with no server (`--format html`), to stdout or `-o FILE`.
    Export {
        /// A directory of `.cslog` files, or a PostgreSQL URL (`postgres://…`).
        #[arg(value_name = "STORE")]
        store: store::StoreArg,
        /// The session id.
        session: String,
        /// The interchange format.
        #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
        format: ExportFormat,
        /// Write to FILE (replaced whole once written) instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// The call log whose failed calls the HTML page shows (default: this machine's).
        #[arg(long, value_name = "FILE")]
        calls: Option<PathBuf>,
        /// Export even when a default redaction rule still matches the session (the scan
        /// that refuses it otherwise names the points).
        #[arg(long)]
        allow_secrets: bool,
    },
    /// Rewrite stored sessions under redaction rules: every value a rule matches becomes
    /// `[REDACTED:rule]`, a session at a time, atomically; `--dry-run` lists the points.
    Scrub(redaction::ScrubArgs),
    /// Read a JSON Lines export into a new session (refuses a session that exists), or an
    /// agent's transcripts (`cuca import claude-code|codex [DIR] --store STORE`).
    Import(transcripts::ImportArgs),
    /// Search every session in STORE: message text, outputs, tools, results, models, errors.
    Grep(grep::GrepArgs),
    /// What the recorded calls cost, by day, week, month, session or model, with the cache
    /// split, from a dated price table.
    Cost(cost::CostArgs),
    /// The call log: in-flight calls, per-run counts and tokens, failures, ttft percentiles.
    Logs(logs::LogsArgs),
    /// Capture journals: assemble, salvage, show a record.
    #[command(subcommand)]
    Journal(journal::JournalCommand),
    /// Send sessions and call-log rows to an OpenTelemetry collector as OTLP traces.
    ExportOtlp(otel::ExportOtlpArgs),
    /// Record any agent's model calls through an OpenAI-compatible proxy, or replay them.
    Proxy(proxy::ProxyArgs),
    /// Run an agent with its SDKs pointed at a recording proxy started for it, or replaying.
    Run(run::RunArgs),
    /// Re-run an agent from a point of a recorded session on each of several models, each
    /// in its own copy of the working directory, and grade each run with a command.
    Compare(compare::CompareArgs),
    /// Write the workspace as it stood at a point of a session into DIR.
    Checkout(workspace::CheckoutArgs),
    /// cuca's main job offline, in one command: a committed coding-agent run replayed with its
    /// workspace restored, then forked at its second call.
    Quickstart(quickstart::QuickstartArgs),
    /// The quickstart's example agent (run by `cuca quickstart` under `cuca run`).
    #[command(name = "quickstart-agent", hide = true)]
    QuickstartAgent,
    /// The shell shim `cuca run` puts on COMMAND's PATH: runs the real shell, reports the
    /// command to the proxy.
    #[command(name = "shell-shim", hide = true)]
    ShellShim(shell::ShimArgs),
    /// Serve `GET /runs/{id}/replay` from a directory of run directories.
    Serve(serve::ServeArgs),
    /// A local web viewer: sessions, turns, forks, live records, the call log, journal runs.
    View(view::ViewArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// The session ids of STORE, one a line: what the bash and fish completion scripts
    /// offer where a command takes a session.
    #[command(name = "complete-sessions", hide = true)]
    CompleteSessions {
        /// A directory of `.cslog` files, or a PostgreSQL URL (`postgres://…`).
        #[arg(value_name = "STORE")]
        store: store::StoreArg,
    },
}

impl Command {
    /// Whether the command's output is long enough to page on a terminal: listings,
    /// records, turns, reports and hits, not data (export), servers or one-line results.
    fn pages(&self) -> bool {
        matches!(
            self,
            Command::Sessions { .. }
                | Command::Show { .. }
                | Command::Replay { .. }
                | Command::Diff { .. }
                | Command::Verify { .. }
                | Command::Grep(_)
                | Command::Cost(_)
                | Command::Logs(_)
        )
    }
}

/// The interchange formats of `cuca export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ExportFormat {
    /// JSON Lines: one serde_json `SessionRecord` per line.
    Jsonl,
    /// One self-contained HTML page: the viewer's session page, searchable, offline.
    Html,
}

/// Runs the command line `args` (the first item is the program name) and returns the exit
/// code. Failures print one `cuca: …` line on stderr; help and version print to stdout.
pub fn run<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let parsed = command()
        .try_get_matches_from(&args)
        .and_then(|mut matches| Cli::from_arg_matches_mut(&mut matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(error) => {
            // The subcommand as typed, for the `--help` a refusal without a usage points to.
            let command = args
                .get(1)
                .and_then(|arg| arg.to_str())
                .filter(|arg| !arg.starts_with('-'))
                .map_or_else(|| "cuca".to_owned(), |arg| format!("cuca {arg}"));
            return usage_error(&error, &command);
        }
    };
    // Before a pager takes stdout: whether it is a terminal decides colour, its width the
    // width of `cuca diff`.
    ui::note_terminal();
    let pager = if cli.command.pages() {
        pager::start(cli.no_pager)
    } else {
        None
    };
    let result = dispatch(cli.command, cli.schema.as_deref());
    // The pager is waited for before the error line, which then shows after it, not under it.
    pager::finish(pager);
    match result {
        Ok(()) => EXIT_OK,
        Err(error) => {
            if !matches!(error, CliError::StdoutClosed | CliError::Exit(_)) {
                ui::error(&error.to_string());
            }
            error.exit_code()
        }
    }
}

/// The subcommands whose output never pages (servers, data, one-line results): their help
/// does not offer `--no-pager`, which the command line still accepts everywhere.
const NEVER_PAGED: [&str; 15] = [
    "fork",
    "scrub",
    "compact",
    "repair",
    "export",
    "import",
    "journal",
    "export-otlp",
    "proxy",
    "run",
    "compare",
    "serve",
    "view",
    "completions",
    "complete-sessions",
];

/// The command line's definition: [`Cli`]'s, with `--no-pager` hidden from the help of the
/// commands that never page (it is a global flag, so clap would list it on every one).
pub(crate) fn command() -> clap::Command {
    let mut command = Cli::command();
    for name in NEVER_PAGED {
        // The subcommand's own hidden `--no-pager` stands in for the global one, which clap
        // then does not copy into it: still accepted, no longer listed.
        command = command.mut_subcommand(name, |sub| {
            sub.arg(
                clap::Arg::new("no_pager")
                    .long("no-pager")
                    .action(clap::ArgAction::SetTrue)
                    .global(true)
                    .hide(true),
            )
        });
    }
    command
}

/// Why `cuca compact` has nothing to do on a database.
const COMPACT_ON_POSTGRES: &str =
    "it keeps no files to gzip (PostgreSQL compresses large rows itself; `VACUUM` reclaims space)";

/// Why `cuca repair` has nothing to do on a database.
const REPAIR_ON_POSTGRES: &str = "it has no damaged frames to drop: a session there loads whole or is refused whole (`cuca verify STORE` says why)";

fn dispatch(command: Command, schema: Option<&str>) -> Result<(), CliError> {
    let open = |store: &store::StoreArg| store.open(schema, false);
    match command {
        Command::Sessions {
            store,
            json,
            sort,
            last,
        } => sessions::list(&open(&store)?, json, sort, last),
        Command::Show {
            store,
            session,
            kinds,
            json,
        } => sessions::show(&open(&store)?, &session, kinds, json),
        Command::Replay {
            store,
            session,
            turn,
            at,
            json,
        } => sessions::replay(&open(&store)?, &session, turn, at.as_deref(), json),
        Command::Fork {
            store,
            point_id,
            json,
        } => sessions::fork(&open(&store)?, &point_id, json),
        Command::Diff { store, a, b, json } => sessions::diff(&open(&store)?, &a, &b, json),
        Command::Verify {
            store,
            sessions,
            json,
        } => sessions::verify(&open(&store)?, &sessions, json),
        Command::Compact {
            dir,
            sessions,
            json,
        } => sessions::compact(
            dir.directory_only(schema, "compact", COMPACT_ON_POSTGRES)?,
            &sessions,
            json,
        ),
        Command::Repair { dir, session, json } => repair::repair(
            dir.directory_only(schema, "repair", REPAIR_ON_POSTGRES)?,
            &session,
            json,
        ),
        Command::Export {
            store: store_arg,
            session,
            format,
            output,
            calls,
            allow_secrets,
        } => {
            let store = open(&store_arg)?;
            // An HTML page's file diffs: a database keeps its workspace objects itself (a
            // directory's are found beside it). Without them the page says so.
            let objects = match (&format, &store_arg) {
                (ExportFormat::Html, crate::store::StoreArg::Postgres(_)) => {
                    crate::objects::objects_for(&store_arg, &store)
                        .ok()
                        .map(cuca_view::diffs::Objects)
                }
                _ => None,
            };
            // Before the format is chosen: no format lets a secret leave unasked.
            if !allow_secrets {
                redaction::refuse_secrets(&store, &session)?;
            }
            sessions::export(
                &store,
                &session,
                &sessions::ExportTo {
                    format,
                    output,
                    calls,
                    objects,
                },
            )
        }
        Command::Scrub(args) => redaction::scrub(&args, schema),
        Command::Import(args) => match (&args.agent, args.file, args.store, args.session) {
            (Some(agent), ..) => transcripts::run(agent, schema),
            (None, Some(file), Some(store), Some(session)) => {
                sessions::import(&file, &store, schema, &session, args.json)
            }
            _ => Err(CliError::Usage(
                "import takes FILE STORE SESSION, or claude-code|codex [DIR] --store STORE".into(),
            )),
        },
        Command::Grep(args) => grep::run(&args, schema),
        Command::Cost(args) => cost::run(&args, schema),
        Command::Logs(args) => logs::run(&args),
        Command::Journal(command) => journal::run(command),
        Command::Serve(args) => serve::run(&args),
        Command::View(args) => view::run(args, schema),
        Command::ExportOtlp(args) => otel::run(&args, schema),
        Command::Proxy(args) => proxy::run(&args, schema),
        Command::Run(args) => run::run(args, schema),
        Command::Compare(args) => compare::run(&args, schema),
        Command::Checkout(args) => workspace::checkout(&args, schema),
        Command::Quickstart(args) => quickstart::run(&args),
        Command::QuickstartAgent => quickstart::agent::run(),
        Command::ShellShim(args) => shell::run_shim(args),
        Command::Completions { shell } => completions::write(shell),
        Command::CompleteSessions { store } => completions::sessions(&open(&store)?),
    }
}

/// What a command line clap refused prints: help and version as clap renders them (exit 0),
/// the help a bare `cuca` gets (exit 2), and every other refusal as the one documented line,
/// `cuca: error: {what} (usage: {usage}; `--help` for more)`, or `(`cuca CMD --help` for
/// usage)` when clap names no usage (exit 2).
fn usage_error(error: &clap::Error, command: &str) -> i32 {
    use clap::error::ErrorKind;
    match error.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = error.print();
            EXIT_OK
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = error.print();
            EXIT_USAGE
        }
        _ => {
            ui::error(&usage_line(&error.to_string(), command));
            EXIT_USAGE
        }
    }
}

/// clap's rendered refusal (`error: …`, a tip, `Usage: …`, a pointer to `--help`) folded
/// into one line: the refusal and the usage it names.
fn usage_line(rendered: &str, command: &str) -> String {
    let plain = strip_ansi(rendered);
    // The refusal is the first paragraph: a list of missing arguments continues it on
    // indented lines; a tip follows after a blank line.
    let what = plain
        .lines()
        .skip_while(|line| line.trim().is_empty())
        .take_while(|line| !line.trim().is_empty())
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    let what = match what.trim_start_matches("error:").trim() {
        "" => "bad arguments",
        what => what,
    };
    match plain
        .lines()
        .find_map(|line| line.trim().strip_prefix("Usage:"))
    {
        Some(usage) => format!("{what} (usage: {}; `--help` for more)", usage.trim()),
        None => format!("{what} (`{} --help` for usage)", term::line(command)),
    }
}

/// `text` without the colour escapes (`\x1b[…m`) clap may style its message with.
fn strip_ansi(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}
