//! The user's rules: a rules file (TOML or JSON) and flags, before they are compiled.

use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::Error;

/// The largest rules file [`Config::load`] reads. A rules file is a few named patterns; the
/// bound keeps a wrong path (a log, a device) from being read into memory.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// What the user asked for: default rules to turn off and rules of their own. Compiled by
/// [`crate::Rules::new`]. `docs/redaction.md` shows the file.
///
/// ```
/// use cuca_redact::{Config, Rules};
/// let mut config = Config::from_toml_str(r#"
/// disable = ["jwt"]
///
/// [[rules]]
/// name = "employee-id"
/// regex = "EMP-[0-9]{6}"
///
/// [[rules]]
/// name = "request-id"
/// json_path = "$.metadata.request_id"
/// "#)?;
/// config.add_regex_flag("ticket=TCK-[0-9]+")?;
/// let rules = Rules::new(&config)?;
/// assert_eq!(rules.redact_text("EMP-004211 on TCK-77").0, "[REDACTED:employee-id] on [REDACTED:ticket]");
/// # Ok::<(), cuca_redact::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Default rules turned off, by name ([`crate::DEFAULT_RULES`]).
    #[serde(default)]
    pub disable: Vec<String>,
    /// The user's own rules.
    #[serde(default)]
    pub rules: Vec<RuleSpec>,
}

/// One user rule: a name (what its markers say) and either a regular expression, applied to
/// every text, or a JSON path, applied to every JSON document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// The rule's name: 1 to 64 of `A-Z a-z 0-9 _ . -`.
    pub name: String,
    /// A regular expression (the `regex` crate's syntax). With a group named `secret`, only
    /// that group is replaced; otherwise the whole match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// A JSON path ([`crate::JsonPath`]): the values it selects are replaced whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_path: Option<String>,
}

impl RuleSpec {
    /// A regular-expression rule.
    pub fn regex(name: impl Into<String>, regex: impl Into<String>) -> RuleSpec {
        RuleSpec {
            name: name.into(),
            regex: Some(regex.into()),
            json_path: None,
        }
    }

    /// A JSON-path rule.
    pub fn json_path(name: impl Into<String>, path: impl Into<String>) -> RuleSpec {
        RuleSpec {
            name: name.into(),
            regex: None,
            json_path: Some(path.into()),
        }
    }
}

/// `NAME=VALUE` split at the first `=`, both sides non-empty.
fn split_flag(flag: &str) -> Result<(&str, &str), Error> {
    match flag.split_once('=') {
        Some((name, value)) if !name.is_empty() && !value.is_empty() => Ok((name, value)),
        _ => Err(Error::InvalidFlag {
            flag: flag.to_owned(),
        }),
    }
}

impl Config {
    /// Reads the rules file's shape from TOML text.
    pub fn from_toml_str(text: &str) -> Result<Config, Error> {
        Config::parse_toml(text, "a TOML string")
    }

    /// Reads the rules file's shape from JSON text.
    pub fn from_json_str(text: &str) -> Result<Config, Error> {
        Config::parse_json(text, "a JSON string")
    }

    fn parse_toml(text: &str, origin: &str) -> Result<Config, Error> {
        toml::from_str(text).map_err(|source| Error::ParseToml {
            origin: origin.to_owned(),
            source: Box::new(source),
        })
    }

    fn parse_json(text: &str, origin: &str) -> Result<Config, Error> {
        serde_json::from_str(text).map_err(|source| Error::ParseJson {
            origin: origin.to_owned(),
            source,
        })
    }

    /// Reads a rules file: TOML if its name ends in `.toml`, JSON if in `.json`. At most
    /// [`MAX_CONFIG_BYTES`] are read.
    pub fn load(path: &Path) -> Result<Config, Error> {
        let extension = path.extension().and_then(|e| e.to_str());
        let is_json = match extension {
            Some(e) if e.eq_ignore_ascii_case("toml") => false,
            Some(e) if e.eq_ignore_ascii_case("json") => true,
            _ => {
                return Err(Error::ConfigFormat {
                    path: path.to_owned(),
                })
            }
        };
        let read_error = |source| Error::ReadConfig {
            path: path.to_owned(),
            source,
        };
        let file = std::fs::File::open(path).map_err(read_error)?;
        let mut text = String::new();
        // One byte past the bound tells a file at the bound from one beyond it.
        file.take(MAX_CONFIG_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(read_error)?;
        if text.len() as u64 > MAX_CONFIG_BYTES {
            let len = std::fs::metadata(path)
                .map(|m| m.len())
                .unwrap_or(text.len() as u64);
            return Err(Error::ConfigTooLarge {
                path: path.to_owned(),
                len,
                max: MAX_CONFIG_BYTES,
            });
        }
        let origin = path.display().to_string();
        if is_json {
            Config::parse_json(&text, &origin)
        } else {
            Config::parse_toml(&text, &origin)
        }
    }

    /// Adds a regular-expression rule given as a flag, `NAME=REGEX` (split at the first `=`).
    pub fn add_regex_flag(&mut self, flag: &str) -> Result<(), Error> {
        let (name, regex) = split_flag(flag)?;
        self.rules.push(RuleSpec::regex(name, regex));
        Ok(())
    }

    /// Adds a JSON-path rule given as a flag, `NAME=PATH` (`request-id=$.metadata.request_id`).
    pub fn add_json_path_flag(&mut self, flag: &str) -> Result<(), Error> {
        let (name, path) = split_flag(flag)?;
        self.rules.push(RuleSpec::json_path(name, path));
        Ok(())
    }

    /// Adds what `other` disables and its rules to these (a file, then flags).
    pub fn extend(&mut self, other: Config) {
        self.disable.extend(other.disable);
        self.rules.extend(other.rules);
    }
}
