//! Terminal output helpers: warnings, colour (off under `NO_COLOR`), progress bars on a tty.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::term;

/// Whether colour may be used on stderr: it is a terminal and `NO_COLOR` is unset or empty
/// (<https://no-color.org>: "when present and not an empty string").
pub(crate) fn color() -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
    !no_color && std::io::stderr().is_terminal()
}

/// Writes `cuca: warning: {message}` to stderr, in yellow where colour is allowed. The
/// message is written on one line with its control characters escaped: it may quote a
/// recording.
pub(crate) fn warn(message: &str) {
    let message = term::line(message);
    if color() {
        eprintln!("cuca: \x1b[33mwarning\x1b[0m: {message}");
    } else {
        eprintln!("cuca: warning: {message}");
    }
}

/// Writes `cuca: error: {message}` to stderr, the word in red where colour is allowed: the
/// one line a failed command prints, the same words on a terminal and in a pipe.
pub(crate) fn error(message: &str) {
    let message = term::line(message);
    if color() {
        eprintln!("cuca: \x1b[31merror\x1b[0m: {message}");
    } else {
        eprintln!("cuca: error: {message}");
    }
}

/// `n` and the noun, singular for one: "1 turn", "2 turns".
pub(crate) fn count(n: impl Into<u64>, singular: &str, plural: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {singular}")
    } else {
        format!("{n} {plural}")
    }
}

/// Work of at least this many steps (sessions) gets a progress bar on a terminal: a handful
/// of files is scanned in well under a second.
pub(crate) const PROGRESS_MIN_STEPS: u64 = 8;

/// A progress bar of `len` steps drawn on stderr, or a hidden one when stderr is not a
/// terminal (piped output and test runs never see bar frames) or the work is shorter than
/// [`PROGRESS_MIN_STEPS`]. Decided here, before anything is drawn: a bar made visible and
/// hidden afterwards has already drawn its first frame.
pub(crate) fn progress(len: u64, what: &str) -> ProgressBar {
    if len < PROGRESS_MIN_STEPS || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let template = if color() {
        "{msg} [{bar:30.cyan/blue}] {pos}/{len} ({eta})"
    } else {
        "{msg} [{bar:30}] {pos}/{len} ({eta})"
    };
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_owned());
    bar
}

/// A spinner for work with no step count (journal assembly), on a terminal only.
pub(crate) fn spinner(what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    bar.set_draw_target(ProgressDrawTarget::stderr());
    bar.set_message(what.to_owned());
    // The tick runs on indicatif's own thread, so the spinner moves while assembly blocks.
    bar.enable_steady_tick(std::time::Duration::from_millis(100));
    bar
}
