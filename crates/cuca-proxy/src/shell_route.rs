//! `POST /cuca/shell`: the route the shell shim of `cuca run` reports each command to, and
//! where the proxy records it ([`crate::workspace::WorkspaceWatch`] says which session).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cuca_events::{CapturedStream, SessionEvent};
use serde::Deserialize;

use crate::state::Shared;

/// What the shell shim reports: a [`SessionEvent::ShellCommand`]'s fields.
#[derive(Debug, Deserialize)]
struct ShellReport {
    command: String,
    cwd: String,
    origin: String,
    exit_status: Option<i32>,
    duration_ms: u64,
    stdout: CapturedStream,
    stderr: CapturedStream,
}

/// `POST /cuca/shell`: one shell command, recorded in the session of the latest recorded
/// call (held for the next call's records when none was recorded yet). 200 with
/// `{"recorded": SESSION}` or `{"held": true}`; 404 when the proxy watches no workspace or
/// records nothing (replay mode); 400 for a body that is not a report.
pub(crate) async fn shell(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let Some(watch) = shared.workspace.get() else {
        return answer(
            StatusCode::NOT_FOUND,
            serde_json::json!({"error": "this proxy watches no workspace"}),
        );
    };
    if !shared.config.mode.forwards() {
        return answer(
            StatusCode::NOT_FOUND,
            serde_json::json!({"error": "a replaying proxy records no shell commands"}),
        );
    }
    let report: ShellReport = match serde_json::from_slice(&body) {
        Ok(report) => report,
        Err(error) => {
            return answer(
                StatusCode::BAD_REQUEST,
                serde_json::json!({"error": format!("not a shell report: {error}")}),
            )
        }
    };
    let event = SessionEvent::ShellCommand {
        command: report.command,
        cwd: report.cwd,
        origin: report.origin,
        exit_status: report.exit_status,
        duration_ms: report.duration_ms,
        stdout: report.stdout,
        stderr: report.stderr,
    };
    let session = match watch.session_for(event.clone()) {
        Some(session) => session,
        None => return answer(StatusCode::OK, serde_json::json!({"held": true})),
    };
    let written = match crate::placement::recording(&shared, &session).await {
        Ok(recording) => recording
            .slot
            .plugin
            .append_log(event)
            .map_err(|error| error.to_string()),
        Err(error) => Err(error.message),
    };
    match written {
        Ok(record) => answer(
            StatusCode::OK,
            serde_json::json!({"recorded": record.point_id()}),
        ),
        Err(message) => {
            tracing::error!(session, "a shell command could not be recorded: {message}");
            answer(
                StatusCode::INTERNAL_SERVER_ERROR,
                serde_json::json!({"error": message}),
            )
        }
    }
}

/// A JSON answer (the proxy's axum is built without its JSON extractor and response).
fn answer(status: StatusCode, body: serde_json::Value) -> Response {
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}
