//! The workspace's records as OTLP: a shell command is a span of its own, a file change an
//! event on the span of the call whose request saw it.

use cuca_events::SessionEvent;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, Span};

use crate::conventions as c;
use crate::ids::{self, SpanId, TraceId};
use crate::span::{kv, SpanBuilder};
use crate::ExportOptions;

/// The most file-change events one call's span carries: the OpenTelemetry SDKs' default
/// span-event limit, which backends are built around. The first snapshot of a big workspace
/// may name thousands of files; `cuca.workspace.files_changed` counts them all.
pub const MAX_FILE_EVENTS: usize = 128;

/// A workspace record read from a session: when, where, what.
#[derive(Debug, Clone)]
pub(crate) struct Outside {
    pub(crate) sequence: u64,
    pub(crate) at_ms: u64,
    pub(crate) event: SessionEvent,
}

/// Whether `event` is one of the workspace's records.
pub(crate) fn is_outside(event: &SessionEvent) -> bool {
    matches!(
        event,
        SessionEvent::WorkspaceSnapshot { .. } | SessionEvent::ShellCommand { .. }
    )
}

/// A recorded shell command as a span: named `shell`, from its start to its end, its exit
/// status the span's status (0 OK; any other, or a command that never ran, an error), its
/// command line, working directory and exit code under OpenTelemetry's process names. It is
/// a child of `parent`, the call whose answer came before it (the one that asked for it),
/// or, with none, the root of a trace of its own. The streams' recorded tails are content,
/// sent only when asked. `None` for any other record.
pub(crate) fn shell_span(
    session_id: &str,
    record: &Outside,
    parent: Option<(TraceId, SpanId)>,
    options: &ExportOptions,
) -> Option<Span> {
    let SessionEvent::ShellCommand {
        command,
        cwd,
        origin,
        exit_status,
        duration_ms,
        stdout,
        stderr,
    } = &record.event
    else {
        return None;
    };
    let trace = parent.map_or_else(
        || ids::shell_trace_id(session_id, record.sequence),
        |(trace, _)| trace,
    );
    let mut span = SpanBuilder::new(
        trace,
        ids::shell_span_id(session_id, record.sequence),
        parent.map(|(_, id)| id),
        c::SPAN_SHELL.to_owned(),
        SpanKind::Internal,
    )
    .times_ms(record.at_ms.saturating_sub(*duration_ms), record.at_ms)
    .str(c::OPENINFERENCE_SPAN_KIND, c::KIND_TOOL)
    .str(c::SESSION_ID, session_id)
    .str(c::GEN_AI_CONVERSATION_ID, session_id)
    .str(c::PROCESS_COMMAND_LINE, command.as_str())
    .str(c::PROCESS_WORKING_DIRECTORY, cwd.as_str())
    .str_nonempty(c::CUCA_SHELL_ORIGIN, origin)
    .int(c::CUCA_DURATION_MS, *duration_ms)
    .int(c::CUCA_SEQUENCE, record.sequence)
    .int(c::CUCA_SHELL_STDOUT_BYTES, stdout.bytes)
    .int(c::CUCA_SHELL_STDERR_BYTES, stderr.bytes);
    if options.with_content {
        span = span
            .str_nonempty(c::CUCA_SHELL_STDOUT, &stdout.tail)
            .str_nonempty(c::CUCA_SHELL_STDERR, &stderr.tail);
    }
    span = match exit_status {
        Some(0) => span.int(c::PROCESS_EXIT_CODE, 0).ok(),
        Some(code) => span
            .signed(c::PROCESS_EXIT_CODE, i64::from(*code))
            .str(c::ERROR_TYPE, code.to_string())
            .error(format!("exit status {code}")),
        None => span
            .str(c::ERROR_TYPE, "did_not_run")
            .error("the command did not run"),
    };
    Some(span.build())
}

/// `span` with the snapshots its call's request reflects: the last one's address, how many
/// files they say changed, and an event per changed file (at most [`MAX_FILE_EVENTS`]) at
/// the snapshot's time, held within the span.
pub(crate) fn file_events(
    mut span: SpanBuilder,
    snapshots: &[&Outside],
    start_ms: u64,
    end_ms: u64,
) -> SpanBuilder {
    let mut n_changes = 0u64;
    let mut n_events = 0usize;
    let mut last = None;
    for record in snapshots {
        let SessionEvent::WorkspaceSnapshot {
            snapshot, changes, ..
        } = &record.event
        else {
            continue;
        };
        last = Some(snapshot);
        n_changes += changes.len() as u64;
        // A snapshot is taken just before its call is forwarded: its event is at the span's
        // start when the clocks put it a little before.
        let at = record.at_ms.clamp(start_ms, end_ms.max(start_ms));
        for change in changes {
            if n_events == MAX_FILE_EVENTS {
                break;
            }
            n_events += 1;
            span = span.event_kv(
                c::EVENT_FILE_CHANGE,
                at,
                vec![
                    kv(c::CUCA_FILE_PATH, Value::StringValue(change.path.clone())),
                    kv(
                        c::CUCA_FILE_CHANGE,
                        Value::StringValue(change.kind.word().to_owned()),
                    ),
                    kv(
                        c::CUCA_FILE_ADDED_LINES,
                        Value::IntValue(i64::try_from(change.added_lines).unwrap_or(i64::MAX)),
                    ),
                    kv(
                        c::CUCA_FILE_REMOVED_LINES,
                        Value::IntValue(i64::try_from(change.removed_lines).unwrap_or(i64::MAX)),
                    ),
                    kv(c::CUCA_FILE_BINARY, Value::BoolValue(change.binary)),
                ],
            );
        }
    }
    if let Some(snapshot) = last {
        span = span
            .str(c::CUCA_WORKSPACE_SNAPSHOT, snapshot.as_str())
            .int(c::CUCA_WORKSPACE_FILES_CHANGED, n_changes);
    }
    span
}
