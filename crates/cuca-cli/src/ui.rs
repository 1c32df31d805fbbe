//! Terminal output helpers: warnings, colour (off under `NO_COLOR`), progress bars on a tty.

use std::io::IsTerminal;
use std::sync::OnceLock;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::term;

/// Whether `NO_COLOR` asks for no colour (<https://no-color.org>: "when present and not an
/// empty string").
fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty())
}

/// Whether colour may be used on stderr: it is a terminal and `NO_COLOR` is unset or empty.
pub(crate) fn color() -> bool {
    !no_color() && std::io::stderr().is_terminal()
}

/// What the command's output went to when it started: a pager, once started, holds stdout
/// through a pipe, and what is written into it is still read on the terminal.
#[derive(Debug, Clone, Copy)]
struct Terminal {
    /// Whether stdout was a terminal.
    stdout: bool,
    /// The terminal's width in columns, from stdout or else stderr; `None` with neither.
    columns: Option<usize>,
}

static TERMINAL: OnceLock<Terminal> = OnceLock::new();

fn probe() -> Terminal {
    let width = |fd: std::os::fd::BorrowedFd<'_>| {
        rustix::termios::tcgetwinsize(fd)
            .ok()
            .map(|size| usize::from(size.ws_col))
            .filter(|columns| *columns > 0)
    };
    Terminal {
        stdout: std::io::stdout().is_terminal(),
        columns: width(rustix::stdio::stdout()).or_else(|| width(rustix::stdio::stderr())),
    }
}

/// Notes what stdout is before a pager takes it over; called once, first thing.
pub(crate) fn note_terminal() {
    TERMINAL.get_or_init(probe);
}

/// Whether colour may be used on stdout: it was a terminal when the command started (a pager
/// in between passes colour on, `less -R`) and `NO_COLOR` is unset or empty.
pub(crate) fn stdout_color() -> bool {
    !no_color() && TERMINAL.get_or_init(probe).stdout
}

/// The width output may fill when it is not a terminal and `COLUMNS` does not say: wide
/// enough for two 58-column sides of `cuca diff`, and what a file or a pipe reader scrolls.
pub(crate) const DEFAULT_COLUMNS: usize = 120;

/// The narrowest width honoured: two sides of 18 columns show a kind and a few words each.
const MIN_COLUMNS: usize = 40;

/// The width output may fill: `COLUMNS` when set to a number (as shells export it), else the
/// terminal's width, else [`DEFAULT_COLUMNS`]; never under 40.
pub(crate) fn columns() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|value| value.trim().parse::<usize>().ok())
        .filter(|columns| *columns > 0)
        .or(TERMINAL.get_or_init(probe).columns)
        .unwrap_or(DEFAULT_COLUMNS)
        .max(MIN_COLUMNS)
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

/// `n` with a comma every three digits, as people read counts: `1,000,000`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// `n` and the noun, singular for one: "1 turn", "2 turns", "1,000 records".
pub(crate) fn count(n: impl Into<u64>, singular: &str, plural: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {singular}")
    } else {
        format!("{} {plural}", thousands(n))
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
