//! `cuca grep STORE PATTERN`: every session of a store (a directory, or a PostgreSQL
//! database) searched (`cuca-search`), one hit a line, with the point and the turn that reach
//! it; exit status as grep's.

use std::io::{BufWriter, Write};
use std::ops::ControlFlow;
use std::path::PathBuf;

use cuca_search::{Hit, Search, SearchError};
use serde_json::json;

use crate::error::CliError;
use crate::term::line;
use crate::ui;

/// grep's exit status when nothing matched.
const EXIT_NO_MATCH: i32 = 1;
/// grep's exit status when something could not be read (even if hits were printed).
const EXIT_TROUBLE: i32 = 2;

/// `cuca grep`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct GrepArgs {
    /// A directory of `.cslog` files, or a PostgreSQL URL (`postgres://…`); every session in
    /// it is searched.
    #[arg(value_name = "STORE")]
    store: crate::store::StoreArg,
    /// A regular expression (Rust `regex` syntax), or with `--fixed-strings` a plain text.
    pattern: String,
    /// JSON Lines, one object per hit.
    #[arg(long)]
    json: bool,
    /// Take PATTERN as a plain text, not a regular expression.
    #[arg(long, short = 'F')]
    fixed_strings: bool,
    /// Match letters in either case.
    #[arg(long, short = 'i')]
    ignore_case: bool,
    /// Search only these record kinds (repeat, or comma-separated): SystemPrompt, Message,
    /// Reasoning, Output, ToolCall, ToolResult, CallRequest, CallFinish, CallIncomplete,
    /// ShellCommand (a command's line and its streams' recorded tails), WorkspaceSnapshot (the
    /// paths it says changed), and CallLog (the call log's failed calls).
    #[arg(long, value_delimiter = ',')]
    kind: Vec<String>,
    /// Stop after N hits.
    #[arg(long, short = 'm', value_name = "N")]
    limit: Option<usize>,
    /// Pass over the first N hits: the next page after `--limit N`.
    #[arg(long, value_name = "N", default_value_t = 0)]
    offset: usize,
    /// The call log whose failed calls' errors are searched too (default: this machine's
    /// call log, when there is one).
    #[arg(long, value_name = "FILE", conflicts_with = "no_calls")]
    calls: Option<PathBuf>,
    /// Search the sessions only, not the call log.
    #[arg(long)]
    no_calls: bool,
}

/// The `--kind` name of a call log's failed calls.
const CALL_LOG_KIND: &str = "CallLog";

/// Runs `cuca grep`: hits to stdout as found, unreadable sessions as warnings; exit 0 with a
/// hit, 1 with none, 2 when a session could not be read or the pattern is bad.
pub(crate) fn run(args: &GrepArgs, schema: Option<&str>) -> Result<(), CliError> {
    search(args, schema).map_err(|error| match error {
        // grep's 1 means "nothing matched": a store that cannot be reached or listed must not
        // read as that to a script, so every failure is grep's trouble status, 2.
        CliError::Failed(message) => CliError::Usage(message),
        other => other,
    })
}

fn search(args: &GrepArgs, schema: Option<&str>) -> Result<(), CliError> {
    let store = args.store.open(schema, false)?;
    // `CallLog` is the call log's kind, not a record kind: the sessions are searched for the
    // others, the call log when it is asked for or no kind is.
    let (call_log_kind, record_kinds): (Vec<&String>, Vec<&String>) = args
        .kind
        .iter()
        .partition(|kind| kind.eq_ignore_ascii_case(CALL_LOG_KIND));
    let search_sessions = call_log_kind.is_empty() || !record_kinds.is_empty();
    let search_calls = !args.no_calls && (args.kind.is_empty() || !call_log_kind.is_empty());
    let mut search = Search::new(args.pattern.clone())
        .fixed_strings(args.fixed_strings)
        .ignore_case(args.ignore_case)
        .kinds(&record_kinds)
        .map_err(usage)?
        .offset(args.offset);
    if let Some(limit) = args.limit {
        search = search.limit(limit);
    }
    let highlight = !args.json && ui::stdout_color();
    let typed = store.command_form().to_owned();
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut failed: Option<CliError> = None;
    let mut visit = |hit: Hit| {
        let written = if args.json {
            write_json(&mut out, &hit)
        } else {
            write_text(&mut out, &hit, &typed, highlight)
        };
        match written {
            Ok(()) => ControlFlow::Continue(()),
            Err(error) => {
                failed = Some(error.into());
                ControlFlow::Break(())
            }
        }
    };
    // A directory's files are skimmed (damage reported by byte offset); any other store is
    // read through the trait.
    let mut outcome = if search_sessions {
        match store.file() {
            Some(backend) => search.run(backend.dir(), &mut visit),
            None => search.run_backend(store.backend(), &mut visit),
        }
        .map_err(usage)?
    } else {
        search.matcher().map_err(usage)?;
        cuca_search::Outcome::default()
    };
    if let Some(error) = failed {
        return Err(error);
    }
    let mut hits = outcome.hits;
    let mut limited = outcome.limited;
    if search_calls && !outcome.limited && !outcome.stopped {
        let calls = args
            .calls
            .clone()
            .or_else(|| cuca::calllog::Env::from_process().path_for(None));
        if let Some(path) = calls {
            let page = Page {
                offset: args.offset.saturating_sub(outcome.skipped),
                limit: args.limit.map(|limit| limit.saturating_sub(hits)),
            };
            let found = call_log(
                &search,
                &path,
                args.calls.is_some(),
                page,
                &mut |row, snippet| {
                    if args.json {
                        write_call_json(&mut out, row, snippet)
                    } else {
                        write_call_text(&mut out, row, snippet, highlight)
                    }
                },
            )?;
            hits += found.hits;
            limited |= found.limited;
        }
    }
    outcome.hits = hits;
    out.flush()?;
    for unreadable in &outcome.unreadable {
        ui::warn(&format!(
            "session {:?} could not be read through: {}",
            unreadable.session_id, unreadable.reason
        ));
    }
    if limited {
        ui::warn(&format!(
            "stopped at {} (--limit); there may be more (--offset {} shows the next)",
            ui::count(hits as u64, "hit", "hits"),
            args.offset + hits
        ));
    }
    if !outcome.unreadable.is_empty() {
        Err(CliError::Exit(EXIT_TROUBLE))
    } else if hits == 0 {
        Err(CliError::Exit(EXIT_NO_MATCH))
    } else {
        Ok(())
    }
}

/// Which hits of the call log to show: those after the first `offset`, at most `limit`.
#[derive(Debug, Clone, Copy)]
struct Page {
    offset: usize,
    limit: Option<usize>,
}

/// What the call log's search handed over.
#[derive(Debug, Default)]
struct CallLogOutcome {
    hits: usize,
    limited: bool,
}

/// A hit in the call log: the matched row and the snippet around the match in its error.
type CallHit = (String, std::ops::Range<usize>);

/// Searches the error of every failed call in the call log at `path` (a call that failed
/// before the upstream answered left no record in any session, only this row), handing each
/// matching row to `write`. A missing file is no call log yet, unless the person `named` it.
fn call_log(
    search: &Search,
    path: &std::path::Path,
    named: bool,
    page: Page,
    write: &mut dyn FnMut(&cuca::calllog::Record, &CallHit) -> std::io::Result<()>,
) -> Result<CallLogOutcome, CliError> {
    let mut outcome = CallLogOutcome::default();
    if !path.exists() {
        if named {
            return Err(CliError::Usage(format!(
                "call log {} does not exist",
                path.display()
            )));
        }
        return Ok(outcome);
    }
    let matcher = search.matcher().map_err(usage)?;
    // Torn and skipped lines are `cuca logs`'s to report; the search reads the rows it can.
    let report = cuca::calllog::read_rows(path)
        .map_err(|error| CliError::Usage(format!("call log {}: {error}", path.display())))?;
    let mut skipped = 0;
    for row in report
        .rows
        .iter()
        .filter(|row| !row.is_start() && !row.error.is_empty())
    {
        let Some(found) = matcher.find(&row.error) else {
            continue;
        };
        if skipped < page.offset {
            skipped += 1;
            continue;
        }
        if page.limit.is_some_and(|limit| outcome.hits >= limit) {
            outcome.limited = true;
            break;
        }
        write(row, &found)?;
        outcome.hits += 1;
    }
    Ok(outcome)
}

/// `call log  2026-12-02T10:00:00.000Z  session demo  run 1a2b3c4d  status 502  "…"  (cuca
/// logs --failed --run 1a2b3c4d)`: where the failed call is, and the command that lists it.
fn write_call_text(
    out: &mut impl Write,
    row: &cuca::calllog::Record,
    (snippet, matched): &CallHit,
    highlight: bool,
) -> std::io::Result<()> {
    let (on, off) = if highlight {
        ("\x1b[1;31m", "\x1b[0m")
    } else {
        ("", "")
    };
    let session = if row.node.is_empty() {
        String::new()
    } else {
        format!("  session {}", line(&row.node))
    };
    let status = if row.status == 0 {
        "no response".to_owned()
    } else {
        format!("status {}", row.status)
    };
    let run = if row.run.is_empty() {
        ("".to_owned(), String::new())
    } else {
        (
            format!("  run {}", line(&row.run)),
            format!(" --run {}", line(&row.run)),
        )
    };
    writeln!(
        out,
        "call log  {}{session}{}  {status}  {CALL_LOG_KIND} error  \"{}{on}{}{off}{}\"  (cuca logs --failed{})",
        line(&row.ts),
        run.0,
        line(&snippet[..matched.start]),
        line(&snippet[matched.clone()]),
        line(&snippet[matched.end..]),
        run.1
    )
}

fn write_call_json(
    out: &mut impl Write,
    row: &cuca::calllog::Record,
    (snippet, matched): &CallHit,
) -> std::io::Result<()> {
    let value = json!({
        "source": "call_log",
        "ts": row.ts,
        "session": (!row.node.is_empty()).then_some(&row.node),
        "run": row.run,
        "status": row.status,
        "kind": CALL_LOG_KIND,
        "field": "error",
        "snippet": snippet,
        "match": {
            "start": matched.start,
            "end": matched.end,
            "text": &snippet[matched.clone()],
        },
    });
    writeln!(out, "{value}")
}

fn usage(error: SearchError) -> CliError {
    match error {
        SearchError::Store(error) => error.into(),
        other => CliError::Usage(other.to_string()),
    }
}

/// `demo:14  turn 2  Output  "… the vault is in Lisbon …"  (cuca replay STORE demo --turn 2)`:
/// the point (what `cuca fork` takes), the turn, the kind (with the role and the field where
/// they say more), the snippet on one line, escaped, and the command that shows the turn.
fn write_text(
    out: &mut impl Write,
    hit: &Hit,
    store: &str,
    highlight: bool,
) -> std::io::Result<()> {
    let mut kind = hit.kind.to_owned();
    if let Some(role) = hit.role {
        kind.push(' ');
        kind.push_str(role);
    }
    if hit.field != "text" {
        kind.push(' ');
        kind.push_str(hit.field);
    }
    let before = &hit.snippet[..hit.matched.start];
    let matched = &hit.snippet[hit.matched.clone()];
    let after = &hit.snippet[hit.matched.end..];
    let (on, off) = if highlight {
        ("\x1b[1;31m", "\x1b[0m")
    } else {
        ("", "")
    };
    let forks = match hit.also_in_forks {
        0 => String::new(),
        1 => "  also in 1 fork".to_owned(),
        n => format!("  also in {n} forks"),
    };
    writeln!(
        out,
        "{}  turn {}  {}  \"{}{on}{}{off}{}\"{forks}  (cuca replay {} {} --turn {})",
        line(&hit.point_id()),
        hit.turn,
        kind,
        line(before),
        line(matched),
        line(after),
        line(store),
        line(&hit.session_id),
        hit.turn
    )
}

fn write_json(out: &mut impl Write, hit: &Hit) -> std::io::Result<()> {
    let row = json!({
        "session": hit.session_id,
        "sequence": hit.sequence,
        "point": hit.point_id(),
        "turn": hit.turn,
        "timestamp_ms": hit.timestamp_ms,
        "kind": hit.kind,
        "field": hit.field,
        "role": hit.role,
        "snippet": hit.snippet,
        "also_in_forks": hit.also_in_forks,
        "match": {
            "start": hit.matched.start,
            "end": hit.matched.end,
            "text": &hit.snippet[hit.matched.clone()],
        },
    });
    writeln!(out, "{row}")
}
