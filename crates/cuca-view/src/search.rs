//! The search box: a text across every session of the viewer's stores, through
//! `cuca-search` (the same search as `cuca grep`), each hit linking to its point.

use std::collections::HashSet;
use std::ops::ControlFlow;

use cuca_events::SessionBackend;
use cuca_store_file::FileBackend;

use crate::error::ViewError;
use crate::ViewConfig;

/// Most hits a results page lists; a next page lists the hits after them.
pub const MAX_HITS: usize = 200;

/// What a search found.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Results {
    /// The text searched for.
    pub query: String,
    /// Whether it was a regular expression (otherwise a fixed string).
    pub regex: bool,
    /// Hits passed over before the first one listed (the pages before this one).
    pub offset: usize,
    /// The hits, session by session, at most [`MAX_HITS`]: those after the first `offset`.
    pub hits: Vec<cuca_search::Hit>,
    /// Whether there are hits after these (a next page).
    pub limited: bool,
    /// Records read.
    pub records: u64,
    /// Sessions searched.
    pub sessions: usize,
}

/// Searches every session for `query`, ignoring case; a fixed string unless `regex`; lists
/// the hits after the first `offset`, at most [`MAX_HITS`].
///
/// A hit in a fork's copied prefix is listed once, the parent's, with
/// [`cuca_search::Hit::also_in_forks`] counting the forks that hold it too.
pub fn search(
    config: &ViewConfig,
    query: &str,
    regex: bool,
    offset: usize,
) -> Result<Results, ViewError> {
    let mut results = Results {
        query: query.to_owned(),
        regex,
        offset,
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
    // Hits still to pass over. The first directory's search passes them over itself
    // (`Search::offset`); a later store's hits are passed over here, after the sessions an
    // earlier store holds are left out, so those never count toward a page.
    let mut skip = offset;
    for (i, dir) in config.session_dirs.iter().enumerate() {
        let backend = FileBackend::new(dir.clone())?;
        let ids: Vec<String> = backend.sessions()?;
        let more = if i == 0 {
            let first = search.clone().offset(skip);
            let outcome = gather(&mut results, &seen, &mut 0, |visit| first.run(dir, visit))?;
            skip = skip.saturating_sub(outcome.1);
            outcome.0
        } else {
            gather(&mut results, &seen, &mut skip, |visit| {
                search.run(dir, visit)
            })?
            .0
        };
        seen.extend(ids);
        if !more {
            return Ok(results);
        }
    }
    for (_, backend) in &config.session_stores {
        let ids: Vec<String> = backend.sessions()?;
        let (more, _) = gather(&mut results, &seen, &mut skip, |visit| {
            search.run_backend(&**backend, visit)
        })?;
        seen.extend(ids);
        if !more {
            break;
        }
    }
    Ok(results)
}

/// One store's hits into `results` (sessions an earlier store holds left out, then the first
/// `skip` passed over), up to [`MAX_HITS`] in all. Returns whether there is room for more,
/// and how many hits the store's search passed over itself.
///
/// One hit past [`MAX_HITS`] is looked for, so [`Results::limited`] says there is a next
/// page only when there is one.
fn gather(
    results: &mut Results,
    earlier: &HashSet<String>,
    skip: &mut usize,
    run: impl FnOnce(
        &mut dyn FnMut(cuca_search::Hit) -> ControlFlow<()>,
    ) -> Result<cuca_search::Outcome, cuca_search::SearchError>,
) -> Result<(bool, usize), ViewError> {
    if results.hits.len() >= MAX_HITS {
        return Ok((false, 0));
    }
    let hits = &mut results.hits;
    let mut next_page = false;
    let outcome = run(&mut |hit| {
        if earlier.contains(&hit.session_id) {
            return ControlFlow::Continue(());
        }
        if *skip > 0 {
            *skip -= 1;
            return ControlFlow::Continue(());
        }
        if hits.len() == MAX_HITS {
            next_page = true;
            return ControlFlow::Break(());
        }
        hits.push(hit);
        ControlFlow::Continue(())
    })?;
    results.records += outcome.records;
    results.sessions += outcome.sessions;
    results.limited |= next_page || outcome.limited;
    Ok((!next_page, outcome.skipped))
}
