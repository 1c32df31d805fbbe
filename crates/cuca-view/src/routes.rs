//! The routes: every one is `GET`, reads through the library crates, and answers HTML (or the
//! live poll's JSON) with the viewer's security headers.

use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;

use crate::assets::{CSP, SCRIPT, SCRIPT_PATH, STYLE, STYLE_PATH};
use crate::error::ViewError;
use crate::sessions::{self, TURNS_PER_PAGE};
use crate::{pages, ViewConfig};

type Config = Arc<ViewConfig>;

pub(crate) fn router(config: Config) -> Router {
    Router::new()
        .route("/", get(list))
        .route("/sessions/{id}", get(session))
        .route("/points/{point}", get(point))
        .route("/api/sessions/{id}/records", get(records))
        .route("/calls", get(calls))
        .route("/runs", get(runs))
        .route("/runs/{id}", get(run))
        .route(STYLE_PATH, get(style))
        .route(SCRIPT_PATH, get(script))
        .fallback(not_found)
        .layer(axum::middleware::map_response(security_headers))
        .with_state(config)
}

/// Every response: the CSP, no MIME sniffing, no referrer (ids in URLs stay on this machine),
/// and no framing.
async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// Runs a blocking read off the async workers, so a slow disk never stalls other requests.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ViewError> + Send + 'static,
) -> Result<T, Response> {
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(error_response(&error)),
        Err(join) => Err(html_error(500, &format!("the read failed: {join}"))),
    }
}

fn error_response(error: &ViewError) -> Response {
    html_error(error.status(), &error.to_string())
}

fn html_error(status: u16, message: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, Html(pages::error_page(status, message).into_string())).into_response()
}

async fn not_found() -> Response {
    html_error(404, "no such page")
}

async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}

async fn list(State(config): State<Config>) -> Response {
    match blocking(move || sessions::list(&config)).await {
        Ok(rows) => Html(pages::sessions(&rows).into_string()).into_response(),
        Err(response) => response,
    }
}

#[derive(Debug, Deserialize)]
struct TurnQuery {
    turn: Option<usize>,
}

async fn session(
    State(config): State<Config>,
    Path(id): Path<String>,
    Query(query): Query<TurnQuery>,
) -> Response {
    let first_turn = query.turn.unwrap_or(0);
    let title = id.clone();
    let read = blocking(move || {
        let backend = sessions::locate(&config, &id)?;
        let page = sessions::page(&backend, &id, first_turn, TURNS_PER_PAGE)?;
        let children = sessions::children(&config, &id)?;
        let tree = sessions::fork_tree(&config, &id)?;
        Ok((page, children, tree, sessions::parent_of(&id)))
    })
    .await;
    match read {
        Ok((page, children, tree, parent)) => {
            let context = pages::SessionContext {
                parent,
                children: &children,
                tree: &tree,
                first_turn,
            };
            Html(pages::layout(&title, pages::session(&page, &context)).into_string())
                .into_response()
        }
        Err(response) => response,
    }
}

/// `/points/{session}:{sequence}`: the page holding that record, scrolled to it.
async fn point(State(config): State<Config>, Path(point): Path<String>) -> Response {
    let read = blocking(move || {
        let (session, sequence) =
            cuca_events::parse_point_id(&point).map_err(|error| ViewError::UnknownPoint {
                point: point.clone(),
                reason: error.to_string(),
            })?;
        let backend = sessions::locate(&config, session)?;
        let turn = sessions::turn_of(&backend, session, sequence)?.ok_or_else(|| {
            ViewError::UnknownPoint {
                point: point.clone(),
                reason: format!("session {session:?} has no record {sequence}"),
            }
        })?;
        let first_turn = turn - turn % TURNS_PER_PAGE;
        Ok(format!(
            "{}?turn={first_turn}#p-{sequence}",
            pages::session_href(session)
        ))
    })
    .await;
    match read {
        Ok(location) => Redirect::to(&location).into_response(),
        Err(response) => response,
    }
}

#[derive(Debug, Deserialize)]
struct AfterQuery {
    after: Option<u64>,
}

/// The live poll: records after `after`, as JSON.
async fn records(
    State(config): State<Config>,
    Path(id): Path<String>,
    Query(query): Query<AfterQuery>,
) -> Response {
    let read = blocking(move || {
        let backend = sessions::locate(&config, &id)?;
        sessions::records_after(&backend, &id, query.after)
    })
    .await;
    match read {
        Ok(records) => {
            let full = records.len() >= sessions::MAX_LIVE_BATCH;
            (
                [(header::CONTENT_TYPE, "application/json")],
                pages::live_json(&records, full).to_string(),
            )
                .into_response()
        }
        Err(response) => response,
    }
}

async fn calls(State(config): State<Config>) -> Response {
    let Some(path) = config.call_log.clone() else {
        return error_response(&ViewError::NotConfigured {
            what: "a call log (--calls FILE)",
        });
    };
    let now = SystemTime::now();
    match blocking(move || crate::calls::summarise(&path, now)).await {
        Ok(summary) => Html(pages::calls(&summary).into_string()).into_response(),
        Err(response) => response,
    }
}

async fn runs(State(config): State<Config>) -> Response {
    let Some(dir) = config.runs_dir.clone() else {
        return error_response(&ViewError::NotConfigured {
            what: "a journal runs directory (--runs DIR)",
        });
    };
    match blocking(move || crate::runs::list(&dir)).await {
        Ok(rows) => Html(pages::runs(&rows).into_string()).into_response(),
        Err(response) => response,
    }
}

async fn run(State(config): State<Config>, Path(id): Path<String>) -> Response {
    let Some(dir) = config.runs_dir.clone() else {
        return error_response(&ViewError::NotConfigured {
            what: "a journal runs directory (--runs DIR)",
        });
    };
    let title = id.clone();
    match blocking(move || crate::runs::show(&dir, &id)).await {
        Ok(summary) => Html(pages::run(&title, &summary).into_string()).into_response(),
        Err(response) => response,
    }
}
