//! A session page saved as one file (`cuca export --format html`): opens from disk with no server.
//!
//! It is the viewer's own session page ([`crate::pages`]), rendered with its links turned into
//! anchors within the file ([`crate::pages::Links::Offline`]) and the parts that need a server
//! left out: the live poll, the pager, the timeline and comparison links. The stylesheet and
//! the script are written into the file, and a Content-Security-Policy in the page lets
//! nothing else load: no script, style, font, image or request from anywhere, so the file
//! shows the same thing on a machine with no network. Every turn is written, up to
//! [`MAX_TURNS`] and [`MAX_BYTES`], read a page of turns at a time and streamed to the writer,
//! so memory stays one page of turns (each clipped as the viewer clips it) however long the
//! session is; a session past the bounds ends with a note naming the turns left out and the
//! command that prints them.
//!
//! Every record is shown by [`crate::pages`]' own boxes, so a record kind gets its place in
//! this file where it gets one in the viewer: a turn's file changes with their diffs (read
//! from the workspace objects beside the store when the file is written, so the file holds
//! them) and its shell commands with their streams' tails.

use std::io::Write;

use maud::{html, Markup, PreEscaped, DOCTYPE};
use sha2::{Digest, Sha256};

use crate::assets::{SCRIPT, STYLE};
use crate::error::ViewError;
use crate::pages::{self, Links, SessionContext};
use crate::sessions::{self, TURNS_PER_PAGE};
use crate::ViewConfig;

/// The most turns one file holds: a browser opens a page of a thousand turns (each at most
/// [`sessions::MAX_TURN_TEXT_BYTES`] of text) in seconds; a longer session is better read
/// with `cuca replay`, which the file's note names for the rest.
pub const MAX_TURNS: usize = 1_000;

/// The bytes one file holds at most (checked after each page of turns): 48 MiB is what a
/// browser still opens and searches without stalling, and what a bug tracker still takes as
/// an attachment.
pub const MAX_BYTES: u64 = 48 * 1024 * 1024;

/// The script a saved page adds to the viewer's: search within the page.
const SEARCH_SCRIPT: &str = include_str!("assets/standalone.js");
/// What a saved page adds to the viewer's stylesheet.
const EXTRA_STYLE: &str = include_str!("assets/standalone.css");

/// What one saved page holds.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Written {
    /// Turns written (a final block of notes is not a turn).
    pub n_turns: usize,
    /// Turns of the session left out by [`MAX_TURNS`] or [`MAX_BYTES`].
    pub n_turns_left_out: usize,
    /// Bytes written.
    pub bytes: u64,
}

/// Writes `session`, found in `config`'s stores, as one self-contained HTML page to `out`.
///
/// `store` is the store as a command line takes it (a directory, or a database's URL without
/// its password and `--schema NAME`), for the commands the page prints: replaying the
/// recording, printing it, forking it. Failed calls come from `config`'s call log when it
/// has one; forks are named from the ids in `config`'s stores.
pub fn write_session(
    config: &ViewConfig,
    session: &str,
    store: &str,
    out: &mut dyn Write,
) -> Result<Written, ViewError> {
    let backend = sessions::locate(config, session)?;
    let index = crate::index::of(&backend, session)?;
    let children = sessions::children(config, session)?;
    let tree = sessions::fork_tree(config, session)?;
    let failures = match &config.call_log {
        Some(path) => crate::calls::failures_of(path, session)?,
        None => Vec::new(),
    };
    let context = SessionContext {
        parent: sessions::parent_of(session),
        children: &children,
        tree: &tree,
        first_turn: 0,
        index: &index,
        failures: &failures,
        dir: store.to_owned(),
        links: Links::Offline { session },
        diffs: crate::diffs::Diffs::of(config, &backend).with_sibling_base(config, session, &index),
    };
    let marks = pages::error_marks(&context);
    let n_turns = index.turns.len();
    let mut out = Counted {
        out,
        bytes: 0,
        session,
    };
    out.put(&head(session))?;
    out.put(&top_bar())?;
    out.put(&pages::session_top(session, &context, &marks))?;
    out.put(&reproduce(store, session))?;
    out.put(&html! {
        p.muted.export-note #export-note {
            "Saved by cuca " (env!("CARGO_PKG_VERSION")) " from " code { (store) } " · "
            (pages::thousands(n_turns as u64)) (if n_turns == 1 { " turn" } else { " turns" })
            @if n_turns > MAX_TURNS { ", the first " (pages::thousands(MAX_TURNS as u64)) " in this file" }
            ". Each turn keeps at most " (sessions::MAX_TURN_TEXT_BYTES / 1024)
            " KiB of text, as the viewer's pages do."
        }
    })?;
    let mut written = 0usize;
    let mut first_turn = 0usize;
    let mut whole = true;
    loop {
        let wanted = TURNS_PER_PAGE.min(MAX_TURNS - first_turn);
        let from = index.page_mark(first_turn);
        let page = sessions::page_from(&backend, session, first_turn, wanted, from)?;
        out.put(&pages::turns_with_failures(session, &page.turns, &context))?;
        written += page.turns.iter().filter(|t| !t.is_notes()).count();
        first_turn += wanted;
        if !page.more {
            break;
        }
        if first_turn >= MAX_TURNS || out.bytes >= MAX_BYTES {
            whole = false;
            break;
        }
    }
    let left_out = n_turns.saturating_sub(written);
    if whole {
        out.put(&pages::failures_after(&context, written))?;
    } else {
        out.put(&left_out_note(store, session, written, n_turns))?;
    }
    out.put(&bottom())?;
    out.out.flush().map_err(|source| ViewError::Write {
        session: session.to_owned(),
        source,
    })?;
    Ok(Written {
        n_turns: written,
        n_turns_left_out: left_out,
        bytes: out.bytes,
    })
}

/// [`write_session`] into a string, for a caller that wants the page in memory (a page is at
/// most about [`MAX_BYTES`]).
pub fn session_html(config: &ViewConfig, session: &str, store: &str) -> Result<String, ViewError> {
    let mut bytes = Vec::new();
    write_session(config, session, store, &mut bytes)?;
    // The page is built from `String`s only.
    String::from_utf8(bytes).map_err(|error| ViewError::Write {
        session: session.to_owned(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, error),
    })
}

/// The writer, counting what it was given and naming the session when it fails.
struct Counted<'a, 'w> {
    out: &'w mut dyn Write,
    bytes: u64,
    session: &'a str,
}

impl Counted<'_, '_> {
    fn put(&mut self, markup: &Markup) -> Result<(), ViewError> {
        let text = markup.0.as_str();
        self.out
            .write_all(text.as_bytes())
            .map_err(|source| ViewError::Write {
                session: self.session.to_owned(),
                source,
            })?;
        self.bytes += text.len() as u64;
        Ok(())
    }
}

/// The script the page runs: the viewer's (copy buttons) and the search within the page.
fn script() -> String {
    format!("{SCRIPT}\n{SEARCH_SCRIPT}")
}

/// The stylesheet: the viewer's and the saved page's own.
fn style() -> String {
    format!("{STYLE}\n{EXTRA_STYLE}")
}

/// The policy the page carries: its one script and one stylesheet, named by their SHA-256, and
/// nothing else, from anywhere. Recorded text that slipped into markup could neither run nor
/// load anything, and the page makes no request.
fn policy() -> String {
    format!(
        "default-src 'none'; script-src '{}'; style-src '{}'; img-src data:; \
         base-uri 'none'; form-action 'none'",
        source_hash(&script()),
        source_hash(&style())
    )
}

/// A CSP hash source: `sha256-` and the base64 of the text's SHA-256.
fn source_hash(text: &str) -> String {
    format!("sha256-{}", base64(&Sha256::digest(text.as_bytes())))
}

/// Standard base64 with padding (RFC 4648 §4), as CSP hash sources are written.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The document's start: the policy, the title, the stylesheet written in.
fn head(session: &str) -> Markup {
    // The stylesheet is this crate's own text, never recorded data (a test checks it cannot
    // close its element).
    html! {
        (DOCTYPE)
        (PreEscaped("<html lang=\"en\">"))
        head {
            meta charset="utf-8";
            meta http-equiv="Content-Security-Policy" content=(policy());
            meta name="viewport" content="width=device-width, initial-scale=1";
            meta name="generator" content=(concat!("cuca ", env!("CARGO_PKG_VERSION")));
            title { "Session " (session) " · cuca" }
            style { (PreEscaped(style())) }
        }
        (PreEscaped("<body>"))
    }
}

/// The bar above the page: what the file is, and the search within it.
fn top_bar() -> Markup {
    html! {
        header.top {
            span.brand { "cuca" }
            span.muted { "one session, saved as a file" }
            span.search-box {
                input #page-search .search type="search" placeholder="Search this session"
                    aria-label="Search this session";
                span #page-search-count .search-count aria-live="polite" {}
            }
        }
        (PreEscaped("<main>"))
    }
}

/// The document's end: the script, written in, after the page it works on.
fn bottom() -> Markup {
    // The script is this crate's own text, never recorded data (a test checks it cannot
    // close its element).
    html! {
        (PreEscaped("</main>"))
        script { (PreEscaped(script())) }
        (PreEscaped("</body></html>\n"))
    }
}

/// A word as a POSIX shell reads it back: as it is when it holds nothing a shell treats
/// specially, else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@%+=,".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The commands that use the recording again: replay the agent against it, print it.
fn reproduce(store: &str, session: &str) -> Markup {
    let id = shell_word(session);
    let run = format!("cuca run --mode replay --store {store} --session {id} -- AGENT_COMMAND…");
    let replay = format!("cuca replay {store} {id}");
    let show = format!("cuca show {store} {id} --json");
    html! {
        section.reproduce #reproduce {
            h2 { "Reproduce" }
            p { "Run the agent again with its model calls answered from this recording (no model, no network), "
                "replacing " code { "AGENT_COMMAND…" } " with the command that started it:" }
            pre #reproduce-run { code { (run) } }
            p { (copy_button(&run, "copy replay command")) }
            p { "Print the recorded turns, or every record whole:" }
            pre #reproduce-replay { code { (replay) } }
            pre #reproduce-show { code { (show) } }
        }
    }
}

/// The viewer's copy button (its script copies `text`).
fn copy_button(text: &str, label: &str) -> Markup {
    html! { button.copy type="button" data-copy=(text) title=(text) { (label) } }
}

/// The note that ends a file that could not hold every turn.
fn left_out_note(store: &str, session: &str, written: usize, n_turns: usize) -> Markup {
    let next = written + 1;
    html! {
        p.clipped #left-out {
            "Turns " (pages::thousands(next as u64)) "–" (pages::thousands(n_turns as u64))
            " are not in this file (it holds at most " (pages::thousands(MAX_TURNS as u64))
            " turns and " (MAX_BYTES / (1024 * 1024)) " MiB); "
            code { "cuca replay " (store) " " (shell_word(session)) " --turn " (next) }
            " prints the next one."
        }
    }
}

#[cfg(test)]
mod tests;
