//! The search box: a text across every session of the viewer's stores, through
//! `cuca-search` (the same search as `cuca grep`), each hit linking to its point.

use std::collections::HashSet;
use std::ops::ControlFlow;

use cuca_events::SessionBackend;
use cuca_store_file::FileBackend;

use crate::error::ViewError;
use crate::ViewConfig;

/// Most hits a results page lists; it says when there were more.
pub const MAX_HITS: usize = 200;

/// What a search found.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Results {
    /// The text searched for.
    pub query: String,
    /// Whether it was a regular expression (otherwise a fixed string).
    pub regex: bool,
    /// The hits, session by session, at most [`MAX_HITS`].
    pub hits: Vec<cuca_search::Hit>,
    /// Whether the search stopped at [`MAX_HITS`].
    pub limited: bool,
    /// Records read.
    pub records: u64,
    /// Sessions searched.
    pub sessions: usize,
}

/// Searches every session for `query`, ignoring case; a fixed string unless `regex`.
pub fn search(config: &ViewConfig, query: &str, regex: bool) -> Result<Results, ViewError> {
    let mut results = Results {
        query: query.to_owned(),
        regex,
        ..Results::default()
    };
    if query.is_empty() {
        return Ok(results);
    }
    let search = cuca_search::Search::new(query)
        .fixed_strings(!regex)
        .ignore_case(true);
    // A session id held by two directories is the first directory's, as everywhere else;
    // the stores that are not directories (a fleet's database) come after them.
    let mut seen: HashSet<String> = HashSet::new();
    for dir in &config.session_dirs {
        let backend = FileBackend::new(dir.clone())?;
        let ids: Vec<String> = backend.sessions()?;
        let more = gather(&mut results, &seen, |visit| search.run(dir, visit))?;
        seen.extend(ids);
        if !more {
            return Ok(results);
        }
    }
    for (_, backend) in &config.session_stores {
        let ids: Vec<String> = backend.sessions()?;
        let more = gather(&mut results, &seen, |visit| {
            search.run_backend(&**backend, visit)
        })?;
        seen.extend(ids);
        if !more {
            break;
        }
    }
    Ok(results)
}

/// One store's hits into `results` (sessions an earlier store holds left out), up to
/// [`MAX_HITS`] in all; returns whether there is room for more.
fn gather(
    results: &mut Results,
    earlier: &HashSet<String>,
    run: impl FnOnce(
        &mut dyn FnMut(cuca_search::Hit) -> ControlFlow<()>,
    ) -> Result<cuca_search::Outcome, cuca_search::SearchError>,
) -> Result<bool, ViewError> {
    let mut room = MAX_HITS.saturating_sub(results.hits.len());
    if room == 0 {
        results.limited = true;
        return Ok(false);
    }
    let hits = &mut results.hits;
    let outcome = run(&mut |hit| {
        if earlier.contains(&hit.session_id) {
            return ControlFlow::Continue(());
        }
        hits.push(hit);
        room -= 1;
        if room == 0 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })?;
    results.records += outcome.records;
    results.sessions += outcome.sessions;
    results.limited |= outcome.stopped || outcome.limited;
    Ok(true)
}
