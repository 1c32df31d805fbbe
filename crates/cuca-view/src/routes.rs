//! The routes: every one is `GET`, reads through the library crates, and answers HTML (or the
//! live poll's JSON) with the viewer's security headers.

use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::{Path, Query, RawQuery, State};
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
        .route("/sessions/{id}/turns", get(turns))
        .route("/sessions/{id}/timeline", get(timeline))
        .route("/compare/{fork}", get(compare))
        .route("/runs/{id}/entries/{seq}", get(entry))
        .route("/points/{point}", get(point))
        .route("/api/sessions/{id}/records", get(records))
        .route("/calls", get(calls))
        .route("/search", get(search))
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
    /// The turn to show, from 1: the page holding it.
    turn: Option<usize>,
}

/// The 0-based first turn of the page holding turn `number` (from 1).
fn page_start(number: usize) -> usize {
    let idx = number.saturating_sub(1);
    idx - idx % TURNS_PER_PAGE
}

async fn session(
    State(config): State<Config>,
    Path(id): Path<String>,
    Query(query): Query<TurnQuery>,
) -> Response {
    let first_turn = page_start(query.turn.unwrap_or(1));
    let title = id.clone();
    let read = blocking(move || {
        let backend = sessions::locate(&config, &id)?;
        let index = crate::index::of(&backend, &id)?;
        // A turn past the end goes to the last page, not to an empty one.
        let first_turn = first_turn.min(page_start(index.turns.len().max(1)));
        let from = index.page_mark(first_turn);
        let page = sessions::page_from(&backend, &id, first_turn, TURNS_PER_PAGE, from)?;
        if let Some(end) = page.end {
            // The last page: its live poll reads on from here.
            crate::marks::remember_live(&crate::marks::key(&backend.place(), &id), end);
        }
        let children = sessions::children(&config, &id)?;
        let tree = sessions::fork_tree(&config, &id)?;
        let failures = match &config.call_log {
            Some(path) => crate::calls::failures_of(path, &id)?,
            None => Vec::new(),
        };
        let dir = backend.absolute_place();
        let diffs =
            crate::diffs::Diffs::of(&config, &backend).with_sibling_base(&config, &id, &index);
        Ok((
            page,
            children,
            tree,
            sessions::parent_of(&id),
            index,
            failures,
            dir,
            first_turn,
            diffs,
        ))
    })
    .await;
    match read {
        Ok((page, children, tree, parent, index, failures, dir, first_turn, diffs)) => {
            let context = pages::SessionContext {
                parent,
                children: &children,
                tree: &tree,
                first_turn,
                index: &index,
                failures: &failures,
                dir,
                links: pages::Links::Server,
                diffs,
            };
            Html(pages::layout(&title, pages::session(&page, &context)).into_string())
                .into_response()
        }
        Err(response) => response,
    }
}

#[derive(Debug, Deserialize)]
struct SortQuery {
    sort: Option<String>,
    page: Option<usize>,
}

/// `/sessions/{id}/turns?sort=latency|tokens&page=P`: every turn, sorted, a page at a time.
async fn turns(
    State(config): State<Config>,
    Path(id): Path<String>,
    Query(query): Query<SortQuery>,
) -> Response {
    let key = crate::index::SortKey::parse(query.sort.as_deref().unwrap_or("latency"))
        .unwrap_or(crate::index::SortKey::Latency);
    let page = query.page.unwrap_or(1).max(1);
    let title = id.clone();
    match blocking(move || {
        let backend = sessions::locate(&config, &id)?;
        crate::index::of(&backend, &id)
    })
    .await
    {
        Ok(index) => Html(
            pages::layout(&title, pages::sorted_turns(&title, &index, key, page)).into_string(),
        )
        .into_response(),
        Err(response) => response,
    }
}

#[derive(Debug, Deserialize)]
struct TimelineQuery {
    /// A window of the run, milliseconds since the Unix epoch.
    from: Option<u64>,
    to: Option<u64>,
    /// The page of the calls table, from 1.
    page: Option<usize>,
}

/// `/sessions/{id}/timeline?from=MS&to=MS&page=P`: the calls of a session and of its
/// conversations on one timeline (the whole run, or a window of it), the table a page at a
/// time.
async fn timeline(
    State(config): State<Config>,
    Path(id): Path<String>,
    Query(query): Query<TimelineQuery>,
) -> Response {
    let title = id.clone();
    let view = pages::timeline::View {
        from: query.from,
        to: query.to,
        page: query.page.unwrap_or(1),
    };
    match blocking(move || crate::timeline::lanes(&config, &id)).await {
        Ok(lanes) => {
            Html(pages::layout(&title, pages::timeline::page(&title, &lanes, view)).into_string())
                .into_response()
        }
        Err(response) => response,
    }
}

/// `/compare/{fork}`: a fork against its parent (or `?with=` another session); with
/// `&and=B&and=C…`, those sessions too, side by side, each against the same one.
async fn compare(
    State(config): State<Config>,
    Path(fork): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let title = fork.clone();
    let query = CompareQuery::parse(raw.as_deref().unwrap_or(""));
    match blocking(move || {
        let with = match query.with {
            Some(with) => with,
            None => sessions::parent_of(&fork)
                .map(|(parent, _)| parent)
                .ok_or_else(|| ViewError::UnknownSession {
                    session: format!("the parent of {fork}"),
                })?,
        };
        let mut forks = vec![fork];
        for also in query.and {
            if !forks.contains(&also) && forks.len() < crate::compare::MAX_COMPARED {
                forks.push(also);
            }
        }
        crate::compare::compare_many(&config, &with, &forks)
    })
    .await
    {
        Ok(comparisons) => Html(
            pages::layout(
                &format!("{title} against its parent"),
                pages::compare_many(&comparisons),
            )
            .into_string(),
        )
        .into_response(),
        Err(response) => response,
    }
}

/// `/compare`'s query: `with=` once, `and=` any number of times (serde's query reader keeps
/// one value per key, so it is read here).
#[derive(Debug, Default)]
struct CompareQuery {
    with: Option<String>,
    and: Vec<String>,
}

impl CompareQuery {
    fn parse(raw: &str) -> CompareQuery {
        let mut query = CompareQuery::default();
        for pair in raw.split('&').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = value.replace('+', " ");
            let value = percent_encoding::percent_decode_str(&value)
                .decode_utf8_lossy()
                .into_owned();
            match key {
                "with" => query.with = Some(value),
                // Bounded before anything is read: past the cap the rest are dropped.
                "and" if query.and.len() < crate::compare::MAX_COMPARED => query.and.push(value),
                _ => {}
            }
        }
        query
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
        Ok(format!(
            "{}?turn={}#p-{sequence}",
            pages::session_href(session),
            turn + 1
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

/// Live polls reading at once, at most. A read holds the frame it is decoding and the decoded
/// record (each up to `cuca_store_file::MAX_FRAME_LEN`, 32 MiB) before it clips it: four polls
/// of 31 MiB records at once took the process to 300 MB, two keep it under 256 MiB. A poll
/// from a mark is a few records, so waiting here is short.
static LIVE_READS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

/// The live poll: records after `after`, as JSON.
async fn records(
    State(config): State<Config>,
    Path(id): Path<String>,
    Query(query): Query<AfterQuery>,
) -> Response {
    // The semaphore is never closed, so acquiring fails only in theory; a poll then reads
    // without waiting rather than failing.
    let _permit = LIVE_READS.acquire().await.ok();
    let read = blocking(move || {
        let backend = sessions::locate(&config, &id)?;
        let batch = sessions::live_poll(&backend, &id, query.after)?;
        // The forks too, so a fork made while the page is open appears in its list.
        let forks = sessions::children(&config, &id)?;
        Ok((batch, forks))
    })
    .await;
    match read {
        Ok((batch, forks)) => (
            [(header::CONTENT_TYPE, "application/json")],
            pages::live_json(&batch, &forks).to_string(),
        )
            .into_response(),
        Err(response) => response,
    }
}

async fn calls(
    State(config): State<Config>,
    Query(filter): Query<crate::calls::CallFilter>,
) -> Response {
    let Some(path) = config.call_log.clone() else {
        return error_response(&ViewError::NotConfigured {
            what: "a call log (--calls FILE)",
        });
    };
    let now = SystemTime::now();
    let shown = filter.clone();
    match blocking(move || {
        Ok((
            crate::calls::summarise(&path, now)?,
            crate::calls::table(&path, &filter)?,
        ))
    })
    .await
    {
        Ok((summary, table)) => {
            Html(pages::calls(&summary, &table, &shown).into_string()).into_response()
        }
        Err(response) => response,
    }
}

/// `/runs/{id}/entries/{seq}`: one journal entry's content.
async fn entry(State(config): State<Config>, Path((id, seq)): Path<(String, u64)>) -> Response {
    let Some(dir) = config.runs_dir.clone() else {
        return error_response(&ViewError::NotConfigured {
            what: "a journal runs directory (--runs DIR)",
        });
    };
    let title = id.clone();
    match blocking(move || crate::runs::entry(&dir, &id, seq)).await {
        Ok(view) => Html(pages::layout(&title, pages::journal::entry(&title, &view)).into_string())
            .into_response(),
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
    let read = blocking(move || {
        let summary = crate::runs::show(&dir, &id)?;
        let failures = crate::runs::failures(&dir, &id)?;
        Ok((summary, failures))
    });
    match read.await {
        Ok((summary, failures)) => {
            Html(pages::run(&title, &summary, &failures).into_string()).into_response()
        }
        Err(response) => response,
    }
}

#[derive(Debug, Deserialize)]
struct SearchQuery {
    #[serde(default)]
    q: String,
    #[serde(default)]
    re: Option<String>,
    /// Hits passed over: the pages before this one.
    #[serde(default)]
    offset: usize,
}

/// `/search?q=TEXT[&re=1][&offset=N]`: every session searched, hits linking to their points,
/// a page at a time.
async fn search(State(config): State<Config>, Query(query): Query<SearchQuery>) -> Response {
    let regex = query.re.is_some_and(|re| !re.is_empty() && re != "0");
    let offset = query.offset;
    match blocking(move || crate::search::search(&config, &query.q, regex, offset)).await {
        Ok(results) => Html(pages::search(&results).into_string()).into_response(),
        Err(response) => response,
    }
}
