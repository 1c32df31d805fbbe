//! `cuca export-otlp`: sessions and call-log rows sent to an OpenTelemetry collector through `cuca::otel`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cuca::otel::opentelemetry_proto::tonic::trace::v1::Span;
use cuca::otel::{self, ExportOptions, Exporter};
use cuca::SessionBackend;
use serde_json::json;

use crate::error::CliError;
use crate::ui;

/// The options of `cuca export-otlp`.
#[derive(Debug, clap::Args)]
pub(crate) struct ExportOtlpArgs {
    /// The collector's OTLP/HTTP endpoint (`http://localhost:4318`; `/v1/traces` is appended
    /// unless the URL already ends with it).
    #[arg(long, value_name = "URL", env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    endpoint: String,
    /// A directory of `.cslog` files, or a PostgreSQL URL: each model call its sessions made
    /// becomes a trace of its own, grouped by `session.id`.
    #[arg(long, value_name = "STORE")]
    sessions: Option<crate::store::StoreArg>,
    /// A call log (`calls.jsonl`): each call in it becomes a trace of its own (its attempts
    /// child spans), grouped by `session.id` (the row's node, else its run).
    #[arg(long, value_name = "FILE")]
    calls: Option<PathBuf>,
    /// Only what happened within this long before now (`90s`, `15m`, `2h`, `1day`):
    /// sessions whose last record is that recent, call-log rows written that recently.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    since: Option<Duration>,
    /// Also send messages, system prompts and answers (and call-log bodies recorded under
    /// the bodies pin), as the GenAI conventions' opt-in content attributes.
    #[arg(long)]
    with_content: bool,
    /// `gen_ai.provider.name` for every call (`openai`, `llamacpp`, …); the records do not
    /// hold it, so it is left off unless named.
    #[arg(long, value_name = "NAME")]
    provider: Option<String>,
    /// The resource's `service.name`.
    #[arg(long, value_name = "NAME", default_value = "cuca")]
    service_name: String,
    /// The project the spans belong to (`openinference.project.name`, which Phoenix files
    /// them under); the service name when not given.
    #[arg(long, value_name = "NAME")]
    project: Option<String>,
    /// Print one JSON summary object.
    #[arg(long)]
    json: bool,
}

/// What was gathered, sent and skipped.
#[derive(Debug, Default)]
struct Summary {
    sessions: usize,
    sessions_skipped: usize,
    sessions_failed: usize,
    /// Model calls the sessions hold, of every kind below.
    turns: usize,
    turns_sent: usize,
    turns_in_flight: usize,
    inherited: usize,
    cut_off: usize,
    /// Session calls sent with the call log's call merged in.
    merged: usize,
    /// Shell commands the sessions recorded, sent as spans.
    commands_sent: usize,
    runs: usize,
    calls: usize,
    calls_sent: usize,
    attempts: usize,
    in_flight: usize,
    spans: usize,
    requests: usize,
    rejected: u64,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `cuca export-otlp`.
pub(crate) fn run(args: &ExportOtlpArgs, schema: Option<&str>) -> Result<(), CliError> {
    if args.sessions.is_none() && args.calls.is_none() {
        return Err(CliError::Usage(
            "nothing to export: give --sessions DIR, --calls FILE, or both".to_owned(),
        ));
    }
    let exporter = Exporter::new(
        &args.endpoint,
        &args.service_name,
        otel::DEFAULT_REQUEST_TIMEOUT,
    )
    .map_err(|error| match error {
        otel::Error::Endpoint { .. } => CliError::Usage(error.to_string()),
        other => CliError::Failed(other.to_string()),
    })?
    .with_project(project(args));
    let options = ExportOptions {
        with_content: args.with_content,
        provider: args.provider.clone(),
        since_ms: args.since.map(|since| {
            now_ms().saturating_sub(u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
        }),
    };

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| CliError::Failed(format!("start the async runtime: {error}")))?;
    let mut sink = Sink {
        runtime,
        exporter: &exporter,
        pending: Vec::new(),
        summary: Summary::default(),
    };
    // The call log is read first, so that a call a session also holds is claimed by the
    // session's span and sent once (`session_spans_with_calls`).
    let rows = match &args.calls {
        Some(file) => Some(read_calls(file)?),
        None => None,
    };
    let mut calls = rows.as_deref().map(|rows| otel::Calls::new(rows, &options));
    if let Some(store) = &args.sessions {
        session_spans(
            &store.open(schema, false)?,
            &options,
            calls.as_mut(),
            &mut sink,
        )?;
    }
    if let (Some(file), Some(calls)) = (&args.calls, &calls) {
        call_spans(file, calls, &options, &mut sink)?;
    }
    sink.flush()?;
    let summary = sink.summary;
    print_summary(args, exporter.url(), &summary)?;
    if summary.rejected > 0 {
        return Err(CliError::Failed(format!(
            "the collector rejected {} of {} spans",
            summary.rejected, summary.spans
        )));
    }
    if summary.sessions_failed > 0 {
        return Err(CliError::Failed(format!(
            "{} sessions could not be read and were not sent (see the lines above)",
            summary.sessions_failed
        )));
    }
    Ok(())
}

/// Spans on their way out: sent a request's worth at a time, so a directory of many sessions
/// is never held whole in memory.
struct Sink<'a> {
    runtime: tokio::runtime::Runtime,
    exporter: &'a Exporter,
    pending: Vec<Span>,
    summary: Summary,
}

impl Sink<'_> {
    fn push(&mut self, spans: Vec<Span>) -> Result<(), CliError> {
        self.pending.extend(spans);
        if self.pending.len() >= otel::MAX_SPANS_PER_REQUEST {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), CliError> {
        let spans = std::mem::take(&mut self.pending);
        let report = self
            .runtime
            .block_on(self.exporter.send(spans))
            .map_err(|error| CliError::Failed(error.to_string()))?;
        self.summary.spans += report.spans;
        self.summary.requests += report.requests;
        self.summary.rejected += report.rejected;
        Ok(())
    }
}

/// The project the spans are filed under: `--project`, else the service name.
fn project(args: &ExportOtlpArgs) -> String {
    args.project
        .clone()
        .unwrap_or_else(|| args.service_name.clone())
}

fn session_spans(
    store: &crate::store::Store,
    options: &ExportOptions,
    mut calls: Option<&mut otel::Calls<'_>>,
    sink: &mut Sink<'_>,
) -> Result<(), CliError> {
    // `StoreArg::open` refused a directory that does not exist: a typo must not read as an
    // empty store.
    let ids = store.backend().sessions()?;
    let backend: Arc<dyn SessionBackend> = store.shared();
    for id in ids {
        let export = match calls.as_deref_mut() {
            Some(calls) => {
                otel::session_spans_with_calls(Arc::clone(&backend), &id, options, calls)
            }
            None => otel::session_spans(Arc::clone(&backend), &id, options),
        };
        match export {
            Ok(export) if export.skipped_by_since => sink.summary.sessions_skipped += 1,
            Ok(export) => {
                let summary = &mut sink.summary;
                summary.sessions += 1;
                summary.turns += export.n_turns;
                summary.turns_sent += export.n_calls;
                summary.turns_in_flight += export.n_in_flight;
                summary.inherited += export.n_inherited;
                summary.cut_off += export.n_cut_off;
                summary.merged += export.n_merged;
                summary.commands_sent += export.n_commands;
                sink.push(export.spans)?;
            }
            Err(error) => {
                ui::warn(&error.to_string());
                sink.summary.sessions_failed += 1;
            }
        }
    }
    Ok(())
}

/// The call log's rows, with what could not be read named on stderr.
fn read_calls(file: &Path) -> Result<Vec<cuca::calllog::Record>, CliError> {
    if !file.is_file() {
        return Err(CliError::Usage(format!(
            "call log {} is not a file",
            file.display()
        )));
    }
    let read =
        cuca::calllog::read_rows(file).map_err(|error| CliError::Failed(error.to_string()))?;
    if let Some(torn) = read.torn_tail {
        ui::warn(&format!(
            "{}: a torn last line at byte {} ({} bytes) was not sent",
            file.display(),
            torn.offset,
            torn.len
        ));
    }
    if !read.skipped.is_empty() {
        ui::warn(&format!(
            "{}: {} lines that are not rows were not sent",
            file.display(),
            read.skipped.len()
        ));
    }
    Ok(read.rows)
}

fn call_spans(
    file: &Path,
    calls: &otel::Calls<'_>,
    options: &ExportOptions,
    sink: &mut Sink<'_>,
) -> Result<(), CliError> {
    let export = calls.spans(options);
    if export.n_untimed > 0 {
        ui::warn(&format!(
            "{}: {} attempts have no readable timestamp and were not sent",
            file.display(),
            export.n_untimed
        ));
    }
    sink.summary.runs += export.n_runs;
    sink.summary.calls += export.n_calls;
    sink.summary.calls_sent += export.n_sent;
    sink.summary.attempts += export.n_attempts;
    sink.summary.in_flight += export.n_in_flight;
    sink.push(export.spans)
}

fn print_summary(args: &ExportOtlpArgs, url: &str, summary: &Summary) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    if args.json {
        let value = json!({
            "url": url,
            "project": project(args),
            "spans": summary.spans,
            "requests": summary.requests,
            "rejected": summary.rejected,
            "sessions": summary.sessions,
            "sessions_skipped": summary.sessions_skipped,
            "sessions_failed": summary.sessions_failed,
            "turns": summary.turns,
            "turns_sent": summary.turns_sent,
            "turns_in_flight": summary.turns_in_flight,
            "inherited": summary.inherited,
            "cut_off": summary.cut_off,
            "merged": summary.merged,
            "commands_sent": summary.commands_sent,
            "runs": summary.runs,
            "calls": summary.calls,
            "calls_sent": summary.calls_sent,
            "attempts": summary.attempts,
            "in_flight": summary.in_flight,
            "with_content": args.with_content,
        });
        writeln!(out, "{value}")?;
        return Ok(());
    }
    if args.sessions.is_some() {
        writeln!(
            out,
            "{} sessions, {} model calls ({} older than --since left out): {} sent",
            summary.sessions, summary.turns, summary.sessions_skipped, summary.turns_sent
        )?;
        let skipped = [
            (
                summary.turns_in_flight,
                "in flight (sent by an export after they end)",
            ),
            (
                summary.inherited,
                "copied by a fork (sent by the session that made them, and linked)",
            ),
            (
                summary.cut_off,
                "cut off where a fork cut its parent (no call was made)",
            ),
        ];
        for (n, why) in skipped.iter().filter(|(n, _)| *n > 0) {
            writeln!(out, "  not sent: {n} {why}")?;
        }
        if summary.merged > 0 {
            writeln!(
                out,
                "  {} also in the call log: one span each, with the call log's fields",
                summary.merged
            )?;
        }
        if summary.commands_sent > 0 {
            writeln!(
                out,
                "  and {} shell commands, a span each under the call that asked for it",
                summary.commands_sent
            )?;
        }
    }
    if args.calls.is_some() {
        writeln!(
            out,
            "{} runs, {} calls, {} attempts: {} sent",
            summary.runs, summary.calls, summary.attempts, summary.calls_sent
        )?;
        let skipped = [
            (
                summary.in_flight,
                "in flight (sent by an export after they end)",
            ),
            (
                summary.merged,
                "held by a session (sent once, as the session's span)",
            ),
        ];
        for (n, why) in skipped.iter().filter(|(n, _)| *n > 0) {
            writeln!(out, "  not sent: {n} {why}")?;
        }
    }
    writeln!(
        out,
        "sent {} spans in {} requests to {url}, project {}{}",
        summary.spans,
        summary.requests,
        project(args),
        if args.with_content {
            ", with content"
        } else {
            " (no message content; --with-content sends it)"
        }
    )?;
    Ok(())
}
