//! Redaction on the command line: the rules flags `cuca proxy` and `cuca run` take, the
//! secret scan every `cuca export` runs before a session leaves, and `cuca scrub`, which
//! rewrites what is already stored under the rules (`docs/redaction.md`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use cuca::{SessionBackend, SessionEvent, SessionRecord};
use cuca_proxy::ProxyConfig;
use cuca_redact::{Config, Counts, Rules, DEFAULT_RULES};

use crate::error::CliError;
use crate::store::{Store, StoreArg};

/// The word `--no-default-redaction` takes to turn every default rule off.
const ALL: &str = "all";

/// How many points a refused export names one by one; the rest are counted.
const MAX_NAMED_POINTS: usize = 20;

/// What `cuca proxy` and `cuca run` redact before a record is stored: the default rules
/// unless turned off by name, plus the user's.
#[derive(Debug, Args)]
pub(crate) struct RedactionArgs {
    /// A rule of your own, NAME=REGEX (repeatable): every match in what is recorded becomes
    /// `[REDACTED:NAME]` (a group named `secret` limits it to that group).
    #[arg(long = "redact-rule", value_name = "NAME=REGEX")]
    rules: Vec<String>,
    /// A JSON-path rule of your own, NAME=PATH (repeatable; `request-id=$.metadata.request_id`):
    /// the values it selects in every JSON document recorded are replaced whole.
    #[arg(long = "redact-json-path", value_name = "NAME=PATH")]
    json_paths: Vec<String>,
    /// A rules file (`.toml` or `.json`, `docs/redaction.md`): rules to add and default rules
    /// to turn off.
    #[arg(long = "redact-rules", value_name = "FILE")]
    file: Option<PathBuf>,
    /// Turn a default rule off, by name (repeatable), or every one of them with `all`.
    #[arg(long = "no-default-redaction", value_name = "RULE")]
    no_default: Vec<String>,
}

impl RedactionArgs {
    /// The rules these flags ask for, checked: a rule that does not compile, a name that is
    /// not a default rule's, a file that cannot be read are usage errors.
    pub(crate) fn config(&self) -> Result<Config, CliError> {
        let usage = |error: cuca_redact::Error| CliError::Usage(error.to_string());
        let mut config = match &self.file {
            Some(path) => Config::load(path).map_err(usage)?,
            None => Config::default(),
        };
        for name in &self.no_default {
            if name == ALL {
                config
                    .disable
                    .extend(DEFAULT_RULES.iter().map(|rule| rule.name.to_owned()));
            } else {
                config.disable.push(name.clone());
            }
        }
        config.disable.sort();
        config.disable.dedup();
        for flag in &self.rules {
            config.add_regex_flag(flag).map_err(usage)?;
        }
        for flag in &self.json_paths {
            config.add_json_path_flag(flag).map_err(usage)?;
        }
        Rules::new(&config).map_err(usage)?;
        Ok(config)
    }

    /// Puts these rules into the proxy's config.
    pub(crate) fn apply(&self, config: &mut ProxyConfig) -> Result<(), CliError> {
        config.redaction = self.config()?;
        Ok(())
    }
}

/// Where a default rule still matches a session about to be exported: the point
/// (`session:sequence`), the rule and the field, never the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SecretPoint {
    pub(crate) point: String,
    pub(crate) rule: String,
    pub(crate) field: String,
}

/// Reads `session` record by record and returns where `rules` still match.
fn scan_session(
    backend: &dyn SessionBackend,
    session: &str,
    rules: &Rules,
) -> Result<Vec<SecretPoint>, CliError> {
    let mut points = Vec::new();
    backend.replay_each(session, &mut |record| {
        for finding in rules.scan_event(&record.event) {
            points.push(SecretPoint {
                point: record.point_id(),
                rule: finding.rule,
                field: finding.field,
            });
        }
        Ok(())
    })?;
    Ok(points)
}

/// The secret scan before anything leaves: `cuca export`, whatever the format, refuses a
/// session a default rule still matches, naming the points, unless `--allow-secrets`.
pub(crate) fn refuse_secrets(store: &Store, session: &str) -> Result<(), CliError> {
    let rules = Rules::defaults().map_err(|error| CliError::Failed(error.to_string()))?;
    let points = scan_session(store.backend(), session, &rules)?;
    if points.is_empty() {
        return Ok(());
    }
    Err(CliError::Secrets {
        session: session.to_owned(),
        points: points
            .iter()
            .take(MAX_NAMED_POINTS)
            .map(|p| format!("{} {} ({})", p.point, p.rule, p.field))
            .collect(),
        n_points: points.len(),
    })
}

/// `cuca scrub` arguments.
#[derive(Debug, Args)]
pub(crate) struct ScrubArgs {
    /// A directory of `.cslog` files, or a PostgreSQL URL (`postgres://…`).
    #[arg(value_name = "STORE")]
    store: StoreArg,
    /// Sessions to scrub, each with its forks and conversations (`SESSION:…`); default:
    /// every session in STORE.
    sessions: Vec<String>,
    /// A rules file (`.toml` or `.json`): rules to add to the default rules, and default
    /// rules to turn off.
    #[arg(long, value_name = "FILE")]
    rules: Option<PathBuf>,
    /// List what would be replaced (session:sequence, rule, field), never the value, and
    /// change nothing.
    #[arg(long)]
    dry_run: bool,
    /// JSON Lines, one object per point (dry run) or per session.
    #[arg(long)]
    json: bool,
}

/// `cuca scrub STORE [SESSIONS…] [--rules FILE] [--dry-run]`.
pub(crate) fn scrub(args: &ScrubArgs, schema: Option<&str>) -> Result<(), CliError> {
    let config = match &args.rules {
        Some(path) => Config::load(path).map_err(|error| CliError::Usage(error.to_string()))?,
        None => Config::default(),
    };
    let rules = Rules::new(&config).map_err(|error| CliError::Usage(error.to_string()))?;
    let store = args.store.open(schema, false)?;
    let all = store.backend().sessions()?;
    let chosen: Vec<&String> = if args.sessions.is_empty() {
        all.iter().collect()
    } else {
        for session in &args.sessions {
            if !all.contains(session) {
                return Err(CliError::Usage(format!(
                    "session {session:?} not found in {} (`cuca sessions {}` lists them)",
                    store.describe(),
                    store.command_form()
                )));
            }
        }
        all.iter()
            .filter(|id| {
                args.sessions.iter().any(|named| {
                    *id == named
                        || id
                            .strip_prefix(named.as_str())
                            .is_some_and(|rest| rest.starts_with(':'))
                })
            })
            .collect()
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut total = Counts::new();
    let mut n_changed = 0u64;
    for session in chosen {
        if args.dry_run {
            for point in scan_session(store.backend(), session, &rules)? {
                if args.json {
                    let line = serde_json::json!({
                        "point": point.point, "rule": point.rule, "field": point.field,
                    });
                    writeln!(out, "{line}")?;
                } else {
                    writeln!(out, "{} {} {}", point.point, point.rule, point.field)?;
                }
            }
            continue;
        }
        let counts = scrub_session(&store, session, &rules)?;
        if counts.is_empty() {
            continue;
        }
        n_changed += 1;
        total.merge(&counts);
        if args.json {
            let by_rule: BTreeMap<&str, u64> = counts.iter().collect();
            writeln!(
                out,
                "{}",
                serde_json::json!({"session": session, "replaced": by_rule})
            )?;
        } else {
            writeln!(out, "{session}: replaced {counts}")?;
        }
    }
    if !args.dry_run && !args.json {
        if n_changed == 0 {
            writeln!(out, "nothing to scrub: no rule matches")?;
        } else {
            writeln!(
                out,
                "scrubbed {}: {total}",
                crate::ui::count(n_changed, "session", "sessions")
            )?;
        }
    }
    out.flush()?;
    Ok(())
}

/// Rewrites one session under `rules`, atomically, with a [`SessionEvent::Scrubbed`] record
/// at its tail saying what was replaced; a session no rule matches is left as it is.
fn scrub_session(store: &Store, session: &str, rules: &Rules) -> Result<Counts, CliError> {
    let mut records = store.backend().replay(session)?;
    let Some(last) = records.last().map(|record| record.sequence) else {
        return Ok(Counts::new());
    };
    let mut counts = Counts::new();
    let mut changed = Vec::new();
    for record in &mut records {
        let found = rules.redact_record(record);
        if !found.is_empty() {
            counts.merge(&found);
            changed.push(record.clone());
        }
    }
    if counts.is_empty() {
        return Ok(counts);
    }
    let next = last.checked_add(1).ok_or_else(|| {
        CliError::Failed(format!(
            "session {session:?} has no sequence left for the record of its scrub"
        ))
    })?;
    let scrubbed = SessionRecord {
        session_id: session.to_owned(),
        sequence: next,
        timestamp_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| {
                u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
            }),
        event: SessionEvent::Scrubbed {
            replaced: counts
                .iter()
                .map(|(rule, n)| (rule.to_owned(), n))
                .collect(),
        },
    };
    if let Some(file) = store.file() {
        records.push(scrubbed);
        file.rewrite(session, last, &records)?;
        return Ok(counts);
    }
    #[cfg(feature = "postgres")]
    if let Some(postgres) = store.postgres() {
        postgres.rewrite(session, last, changed, vec![scrubbed])?;
        return Ok(counts);
    }
    let _ = changed;
    Err(CliError::Usage(format!(
        "{} cannot be scrubbed: only a directory or a PostgreSQL store is rewritten",
        store.describe()
    )))
}
