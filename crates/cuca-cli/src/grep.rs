//! `cuca grep STORE PATTERN`: every session of a store (a directory, or a PostgreSQL
//! database) searched (`cuca-search`), one hit a line, with the point and the turn that reach
//! it; exit status as grep's.

use std::io::{BufWriter, Write};
use std::ops::ControlFlow;

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
    /// Reasoning, Output, ToolCall, ToolResult, CallRequest, CallFinish, CallIncomplete.
    #[arg(long, value_delimiter = ',')]
    kind: Vec<String>,
    /// Stop after N hits.
    #[arg(long, short = 'm', value_name = "N")]
    limit: Option<usize>,
}

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
    let mut search = Search::new(args.pattern.clone())
        .fixed_strings(args.fixed_strings)
        .ignore_case(args.ignore_case)
        .kinds(&args.kind)
        .map_err(usage)?;
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
    let outcome = match store.file() {
        Some(backend) => search.run(backend.dir(), &mut visit),
        None => search.run_backend(store.backend(), &mut visit),
    }
    .map_err(usage)?;
    if let Some(error) = failed {
        return Err(error);
    }
    out.flush()?;
    for unreadable in &outcome.unreadable {
        ui::warn(&format!(
            "session {:?} could not be read through: {}",
            unreadable.session_id, unreadable.reason
        ));
    }
    if outcome.limited {
        ui::warn(&format!(
            "stopped at {} (--limit); there may be more",
            ui::count(outcome.hits as u64, "hit", "hits")
        ));
    }
    if !outcome.unreadable.is_empty() {
        Err(CliError::Exit(EXIT_TROUBLE))
    } else if outcome.hits == 0 {
        Err(CliError::Exit(EXIT_NO_MATCH))
    } else {
        Ok(())
    }
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
    writeln!(
        out,
        "{}  turn {}  {}  \"{}{on}{}{off}{}\"  (cuca replay {} {} --turn {})",
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
        "match": {
            "start": hit.matched.start,
            "end": hit.matched.end,
            "text": &hit.snippet[hit.matched.clone()],
        },
    });
    writeln!(out, "{row}")
}
