//! Where reads resume: the read mark each live page's next poll starts from, so a poll reads
//! only what was appended since, not the session.
//!
//! A poll names the last sequence it has (`?after=N`); the mark after that record is kept
//! here, keyed by the store's place and the session, and the next poll of any page at that
//! sequence reads on from the mark's byte offset. A session page that shows the last page
//! leaves the mark after its last record, so the page's first poll is as cheap as the rest.
//! A mark that no longer describes its file (the file was replaced or repaired) is told by
//! the store ([`cuca_events::ReadAfter::Stale`]) and the read starts over.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use cuca_events::ReadMark;

/// Marks kept for the whole process: a few per open live page, for a few hundred pages. Each is
/// a key and four numbers, so the cache is tens of KiB at most.
const LIVE_MARKS: usize = 256;

/// The kept marks, least recently used first.
static LIVE: Mutex<VecDeque<(String, ReadMark)>> = Mutex::new(VecDeque::new());

/// The cache key of a session in a store.
pub(crate) fn key(place: &str, session: &str) -> String {
    format!("{place}\u{0}{session}")
}

/// The kept mark to read on from for a poll that has every record up to `after`: the one at
/// the highest sequence not past it, or the start.
pub(crate) fn live_from(key: &str, after: Option<u64>) -> ReadMark {
    let Some(after) = after else {
        return ReadMark::START;
    };
    let live = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
    live.iter()
        .filter(|(k, mark)| k == key && mark.sequence.is_some_and(|s| s <= after))
        .max_by_key(|(_, mark)| mark.sequence)
        .map_or(ReadMark::START, |(_, mark)| *mark)
}

/// Keeps `mark` (after the record it names) for the next poll of `key`.
pub(crate) fn remember_live(key: &str, mark: ReadMark) {
    if mark.sequence.is_none() {
        return;
    }
    let mut live = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
    live.retain(|(k, m)| !(k == key && m.sequence == mark.sequence));
    if live.len() >= LIVE_MARKS {
        live.pop_front();
    }
    live.push_back((key.to_owned(), mark));
}
