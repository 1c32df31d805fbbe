//! Strict replay for CI: `--strict` fails a replay whose agent left recorded calls unasked or
//! was refused a call (even a 409 it swallowed), `--report FILE` writes what happened as JUnit
//! XML or JSON, and `--max-age` warns of or fails on a recording older than it.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use clap::Args;
use cuca_proxy::{Divergence, RecordedCall, ReplayReport, SessionOutcome};
use serde_json::{json, Value};

use crate::error::CliError;

/// `--strict`, `--report` and `--report-format`, for `cuca run` and `cuca proxy`.
#[derive(Debug, Args)]
pub(crate) struct StrictArgs {
    /// Replay mode: exit non-zero, with a report on stderr, when a recorded call was never
    /// asked for or a call was refused (a divergence, a call past the recording), even if
    /// the agent swallowed the refusal and exited 0.
    #[arg(long)]
    strict: bool,
    /// Replay mode: write what each recorded call became (consumed, never asked for,
    /// diverged) to FILE, for CI to show.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// The report's format: JUnit XML (one testcase per recorded call) or JSON.
    #[arg(long, value_name = "FORMAT", default_value = "junit", value_parser = ["junit", "json"])]
    report_format: String,
}

/// `--max-age` and `--on-expiry`, for `cuca run`.
#[derive(Debug, Args)]
pub(crate) struct ExpiryArgs {
    /// A recording whose first record is older than this (`30d`, `12h`) is expired: warned
    /// of on stderr, or failed with `--on-expiry fail`, before COMMAND runs.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    max_age: Option<Duration>,
    /// What an expired recording does: warn (COMMAND runs) or fail (it does not).
    #[arg(long, value_name = "ACTION", default_value = "warn", value_parser = ["warn", "fail"])]
    on_expiry: String,
}

impl StrictArgs {
    /// Whether the proxy's replay report is wanted at the end.
    pub(crate) fn wanted(&self) -> bool {
        self.strict || self.report.is_some()
    }

    /// Refuses `--strict` and `--report` outside replay mode, where nothing is replayed
    /// strictly.
    pub(crate) fn check_mode(&self, mode: cuca_proxy::Mode) -> Result<(), CliError> {
        if self.wanted() && mode != cuca_proxy::Mode::Replay {
            return Err(CliError::Usage(format!(
                "--strict and --report check a replay: use them with --mode replay, not {mode}"
            )));
        }
        Ok(())
    }
}

/// How old a recording is, against `--max-age`.
#[derive(Debug, Clone)]
pub(crate) struct Age {
    session: String,
    first_record: SystemTime,
    age: Duration,
    max_age: Duration,
    /// `--on-expiry fail`.
    fails: bool,
}

impl Age {
    fn expired(&self) -> bool {
        self.age > self.max_age
    }

    /// Whether the run must stop here: expired, under `--on-expiry fail`.
    pub(crate) fn stops(&self) -> bool {
        self.fails && self.expired()
    }

    fn sentence(&self) -> String {
        // Whole minutes: a person reads "45days 3h 12m", not the seconds.
        let age = Duration::from_secs(self.age.as_secs() / 60 * 60);
        format!(
            "the recording of session {:?} is {} old (its first record was made {}), older than --max-age {}",
            self.session,
            humantime::format_duration(age),
            humantime::format_rfc3339_seconds(self.first_record),
            humantime::format_duration(self.max_age),
        )
    }
}

impl ExpiryArgs {
    /// Reads the session's first record's time and compares it with `--max-age`; warns on
    /// stderr when it is older and `--on-expiry warn`. `None` without `--max-age`, and for a
    /// session with no records in a mode that records one (auto, fork); in replay mode such a
    /// session is a usage error.
    pub(crate) fn check(
        &self,
        store: &crate::store::Store,
        session: &str,
        mode: cuca_proxy::Mode,
    ) -> Result<Option<Age>, CliError> {
        let Some(max_age) = self.max_age else {
            return Ok(None);
        };
        let Some(first_record) = first_record_time(store, session)? else {
            if mode.forwards() {
                return Ok(None);
            }
            return Err(CliError::Usage(format!(
                "session {session:?} and its conversations have no records in {}, so --max-age has no age to check",
                store.describe()
            )));
        };
        let age = SystemTime::now()
            .duration_since(first_record)
            .unwrap_or(Duration::ZERO);
        let age = Age {
            session: session.to_owned(),
            first_record,
            age,
            max_age,
            fails: self.on_expiry == "fail",
        };
        if age.expired() && !age.fails {
            eprintln!("cuca run: warning: {}; record it again", age.sentence());
        }
        Ok(Some(age))
    }
}

/// When the recording of `session` began: the earliest first record of the session and of
/// its conversations (`S:conv:N`, `S:conv:NAME`, which hold every call of a recording whose
/// callers named their conversations); `None` when none has a record.
fn first_record_time(
    store: &crate::store::Store,
    session: &str,
) -> Result<Option<SystemTime>, CliError> {
    let prefix = format!("{session}:conv:");
    let conversations = store
        .backend()
        .sessions()?
        .into_iter()
        .filter(|id| id.starts_with(&prefix));
    let mut earliest = first_record_of(store, session)?;
    for id in conversations {
        if let Some(time) = first_record_of(store, &id)? {
            earliest = Some(earliest.map_or(time, |e: SystemTime| e.min(time)));
        }
    }
    Ok(earliest)
}

/// The time of `session`'s own first record, read without reading the rest; `None` when it
/// has none.
fn first_record_of(
    store: &crate::store::Store,
    session: &str,
) -> Result<Option<SystemTime>, CliError> {
    let mut first = None;
    let read = store.backend().replay_each(session, &mut |record| {
        first = Some(record.timestamp_ms);
        // Stops the read at the first record: the rest of a long session is not needed.
        Err(cuca::PluginError::validation(session, "first record read"))
    });
    match (first, read) {
        (Some(ms), _) => Ok(Some(SystemTime::UNIX_EPOCH + Duration::from_millis(ms))),
        (None, Ok(())) => Ok(None),
        (None, Err(cuca::PluginError::NotFound { .. })) => Ok(None),
        (None, Err(error)) => Err(error.into()),
    }
}

/// What `cuca run` or `cuca proxy` (`tool`) does once the replay is over: writes the report
/// when asked, prints what failed on stderr, and under `--strict` fails when anything did.
/// `age` is `--max-age`'s finding, reported with the session it is about.
pub(crate) fn finish(
    args: &StrictArgs,
    tool: &str,
    report: &ReplayReport,
    age: Option<&Age>,
) -> Result<(), CliError> {
    if let Some(path) = &args.report {
        let text = match args.report_format.as_str() {
            "json" => {
                let mut text = json_report(report, age).to_string();
                text.push('\n');
                text
            }
            _ => junit(report, age),
        };
        std::fs::write(path, text).map_err(|error| {
            CliError::Failed(format!("write the report to {}: {error}", path.display()))
        })?;
    }
    let stopped = age.is_some_and(Age::stops);
    if report.passed() && !stopped {
        if args.strict {
            let n: usize = report.sessions.iter().map(|s| s.calls.len()).sum();
            eprintln!(
                "{tool}: strict replay passed: all {n} recorded calls consumed, none refused"
            );
        }
        return Ok(());
    }
    if !args.strict && !stopped {
        return Ok(());
    }
    eprint!("{}", readable(tool, report, age));
    let (unconsumed, refused) = totals(report);
    Err(CliError::Failed(if stopped && report.passed() {
        "strict replay failed: the recording is past --max-age".to_owned()
    } else {
        format!(
            "strict replay failed: recorded calls not consumed: {unconsumed}, calls refused: {refused}"
        )
    }))
}

/// Recorded calls not consumed, and calls refused, over every session.
fn totals(report: &ReplayReport) -> (usize, u64) {
    let unconsumed = report.sessions.iter().map(|s| s.unconsumed().count()).sum();
    let refused = report.sessions.iter().map(|s| s.n_divergences).sum();
    (unconsumed, refused)
}

/// The refusals of `session` about the recorded call `call`.
fn refusals_of<'a>(
    session: &'a SessionOutcome,
    call: &'a RecordedCall,
) -> impl Iterator<Item = &'a Divergence> {
    session
        .divergences
        .iter()
        .filter(move |d| d.point.as_deref() == Some(call.point.as_str()))
}

/// The refusals of `session` about no call it lists (a call past the recording, a request
/// that could not be read).
fn loose_refusals(session: &SessionOutcome) -> impl Iterator<Item = &Divergence> {
    session.divergences.iter().filter(|d| {
        !d.point
            .as_deref()
            .is_some_and(|p| session.calls.iter().any(|c| c.point == p))
    })
}

/// A refusal in a few words: its status, code and field, then its sentence.
fn refusal_line(divergence: &Divergence) -> String {
    let param = divergence
        .param
        .as_deref()
        .map_or(String::new(), |p| format!(" at {p}"));
    format!(
        "refused ({} {}{param}): {}",
        divergence.status,
        divergence.code,
        divergence.sentence()
    )
}

/// The report a person reads on stderr: each session, what failed in it.
fn readable(tool: &str, report: &ReplayReport, age: Option<&Age>) -> String {
    let mut out = String::new();
    for session in &report.sessions {
        let consumed = session.calls.iter().filter(|c| c.consumed).count();
        let _ = writeln!(
            out,
            "{tool}: strict replay of session {:?}: {consumed} of {} recorded calls consumed, {} refused",
            session.session,
            session.calls.len(),
            session.n_divergences
        );
        if let Some(why) = &session.unreadable {
            let _ = writeln!(out, "  the recording: {why}");
        }
        for call in &session.calls {
            let mut refusals = refusals_of(session, call).peekable();
            if call.consumed && refusals.peek().is_none() {
                continue;
            }
            let what = match refusals.next() {
                Some(first) => refusal_line(first),
                None => "never asked for".to_owned(),
            };
            let _ = writeln!(
                out,
                "  {} (turn {} of {}): {what}",
                call.point, call.turn, call.conversation
            );
        }
        for divergence in loose_refusals(session) {
            let _ = writeln!(out, "  a call: {}", refusal_line(divergence));
        }
        let dropped = session.n_divergences - session.divergences.len() as u64;
        if dropped > 0 {
            let _ = writeln!(out, "  and {dropped} more refused calls, not kept");
        }
    }
    if report.n_untracked > 0 {
        let _ = writeln!(
            out,
            "  {} calls on sessions past the proxy's bound of followed sessions, not checked",
            report.n_untracked
        );
    }
    if let Some(age) = age.filter(|a| a.expired()) {
        let _ = writeln!(out, "  {}", age.sentence());
    }
    out
}

/// Escapes `text` for an XML attribute or element: the five specials, tab and line ends as
/// character references, and the characters XML 1.0 forbids (the other controls) as `?`,
/// since a prompt may hold any.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // As references, so an attribute keeps them (a parser turns a raw one into a
            // space there).
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

/// One JUnit testcase: passed when `failure` is `None`, else failed with its type, message
/// and text.
fn testcase(out: &mut String, class: &str, name: &str, failure: Option<(&str, String, String)>) {
    let _ = write!(
        out,
        "    <testcase classname=\"{}\" name=\"{}\"",
        xml(class),
        xml(name)
    );
    match failure {
        None => out.push_str("/>\n"),
        Some((kind, message, text)) => {
            let _ = write!(
                out,
                ">\n      <failure type=\"{}\" message=\"{}\">{}</failure>\n    </testcase>\n",
                xml(kind),
                xml(&message),
                xml(&text)
            );
        }
    }
}

/// The report as JUnit XML: a testsuite per session, a testcase per recorded call (failed
/// when it was never asked for or a call diverged from it, the failure naming the point and
/// the first difference), one per refused call that names no recorded call, and one for the
/// recording's age under `--max-age`. CI test reporters show a testcase per line, so each
/// recorded call is one line there.
pub(crate) fn junit(report: &ReplayReport, age: Option<&Age>) -> String {
    let mut suites = String::new();
    let (mut all_tests, mut all_failures) = (0usize, 0usize);
    for session in &report.sessions {
        let class = format!("cuca.replay.{}", session.session);
        let mut cases = String::new();
        let (mut tests, mut failures) = (0usize, 0usize);
        let mut case = |cases: &mut String, name: &str, failure: Option<(&str, String, String)>| {
            tests += 1;
            failures += usize::from(failure.is_some());
            testcase(cases, &class, name, failure);
        };
        if let Some(why) = &session.unreadable {
            case(
                &mut cases,
                "the recording",
                Some(("unreadable", why.clone(), why.clone())),
            );
        }
        for call in &session.calls {
            let refusals: Vec<&Divergence> = refusals_of(session, call).collect();
            let name = format!(
                "turn {} of {} ({})",
                call.turn, call.conversation, call.point
            );
            let failure = match refusals.first() {
                Some(first) => Some((
                    "diverged",
                    format!("{}: {}", call.point, first.sentence()),
                    refusals
                        .iter()
                        .map(|d| d.message.clone())
                        .collect::<Vec<_>>()
                        .join("\n"),
                )),
                None if !call.consumed => Some((
                    "unconsumed",
                    format!(
                        "{}: the recorded call (turn {} of {}) was never asked for",
                        call.point, call.turn, call.conversation
                    ),
                    format!(
                        "session {:?}: no request was answered with the recorded call at {}; the agent made fewer or other calls than were recorded",
                        session.session, call.point
                    ),
                )),
                None => None,
            };
            case(&mut cases, &name, failure);
        }
        for (n, divergence) in loose_refusals(session).enumerate() {
            let name = format!(
                "refused call {} ({} {})",
                n + 1,
                divergence.status,
                divergence.code
            );
            let message = match &divergence.point {
                Some(point) => format!("{point}: {}", divergence.sentence()),
                None => divergence.sentence(),
            };
            case(
                &mut cases,
                &name,
                Some(("diverged", message, divergence.message.clone())),
            );
        }
        let dropped = session.n_divergences - session.divergences.len() as u64;
        if dropped > 0 {
            let message = format!("{dropped} more refused calls, not kept");
            case(
                &mut cases,
                "further refused calls",
                Some(("diverged", message.clone(), message)),
            );
        }
        if let Some(age) = age.filter(|a| a.session == session.session) {
            let failure = age
                .stops()
                .then(|| ("expired", age.sentence(), age.sentence()));
            case(&mut cases, "recording age", failure);
        }
        all_tests += tests;
        all_failures += failures;
        let _ = write!(
            suites,
            "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\">\n{cases}  </testsuite>\n",
            xml(&format!("cuca replay {}", session.session))
        );
    }
    if let Some(age) = age.filter(|a| !report.sessions.iter().any(|s| s.session == a.session)) {
        // The run stopped before its replay (an expired recording under `--on-expiry fail`):
        // the age is all there is to report.
        let failure = age
            .stops()
            .then(|| ("expired", age.sentence(), age.sentence()));
        let mut cases = String::new();
        testcase(
            &mut cases,
            &format!("cuca.replay.{}", age.session),
            "recording age",
            failure,
        );
        let failed = usize::from(age.stops());
        all_tests += 1;
        all_failures += failed;
        let _ = write!(
            suites,
            "  <testsuite name=\"{}\" tests=\"1\" failures=\"{failed}\" errors=\"0\" skipped=\"0\">\n{cases}  </testsuite>\n",
            xml(&format!("cuca replay {}", age.session))
        );
    }
    if report.n_untracked > 0 {
        let message = format!(
            "{} calls on sessions past the proxy's bound of followed sessions, not checked",
            report.n_untracked
        );
        let mut cases = String::new();
        testcase(
            &mut cases,
            "cuca.replay",
            "untracked sessions",
            Some(("untracked", message.clone(), message)),
        );
        all_tests += 1;
        all_failures += 1;
        let _ = write!(
            suites,
            "  <testsuite name=\"cuca replay\" tests=\"1\" failures=\"1\" errors=\"0\" skipped=\"0\">\n{cases}  </testsuite>\n"
        );
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"cuca replay\" tests=\"{all_tests}\" failures=\"{all_failures}\" errors=\"0\">\n{suites}</testsuites>\n"
    )
}

/// The report as JSON: every session's calls and refusals, as `docs/ci.md` lists the fields.
pub(crate) fn json_report(report: &ReplayReport, age: Option<&Age>) -> Value {
    let sessions: Vec<Value> = report
        .sessions
        .iter()
        .map(|session| {
            let calls: Vec<Value> = session
                .calls
                .iter()
                .map(|call| {
                    json!({
                        "conversation": call.conversation,
                        "turn": call.turn,
                        "point": call.point,
                        "consumed": call.consumed,
                    })
                })
                .collect();
            let divergences: Vec<Value> = session
                .divergences
                .iter()
                .map(|d| {
                    json!({
                        "conversation": d.conversation,
                        "point": d.point,
                        "status": d.status,
                        "code": d.code,
                        "param": d.param,
                        "message": d.message,
                        "sentence": d.sentence(),
                        "difference": d.difference.as_ref().map(cuca_proxy::FirstDifference::json),
                    })
                })
                .collect();
            let age = age.filter(|a| a.session == session.session).map(|a| {
                json!({
                    "first_record": humantime::format_rfc3339_seconds(a.first_record).to_string(),
                    "age_seconds": a.age.as_secs(),
                    "max_age_seconds": a.max_age.as_secs(),
                    "expired": a.expired(),
                    "fails": a.fails,
                })
            });
            json!({
                "session": session.session,
                "passed": session.passed(),
                "calls": calls,
                "unconsumed": session.unconsumed().count(),
                "divergences": divergences,
                "n_divergences": session.n_divergences,
                "unreadable": session.unreadable,
                "age": age,
            })
        })
        .collect();
    json!({
        "passed": report.passed() && !age.is_some_and(Age::stops),
        "sessions": sessions,
        "n_untracked": report.n_untracked,
    })
}

#[cfg(test)]
mod tests;
