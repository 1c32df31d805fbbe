//! Why a set of rules could not be built or a rules file could not be read.

use std::path::PathBuf;

/// Why [`crate::Rules::new`] or a [`crate::Config`] constructor refused. Redacting itself
/// never fails: every error is found when the rules are built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A rule's regular expression is not one the `regex` crate accepts (or is too large).
    #[error("rule {rule:?} has a regular expression that does not compile: {source}")]
    InvalidRegex {
        /// The rule's name.
        rule: String,
        /// The regex crate's reason.
        #[source]
        source: Box<regex::Error>,
    },
    /// A rule's regular expression matches the empty string, so it would put markers between
    /// every two characters.
    #[error("rule {rule:?} matches the empty string")]
    MatchesEmpty {
        /// The rule's name.
        rule: String,
    },
    /// A rule's JSON path is not in the path syntax [`crate::JsonPath`] reads.
    #[error("rule {rule:?} has a JSON path that cannot be read: {source}")]
    InvalidJsonPath {
        /// The rule's name.
        rule: String,
        /// Where and why reading the path stopped.
        #[source]
        source: crate::JsonPathError,
    },
    /// A rule name that cannot name a marker: 1 to 64 of `A-Z a-z 0-9 _ . -`.
    #[error("rule name {name:?} is not 1 to 64 of the characters A-Z a-z 0-9 _ . -")]
    InvalidRuleName {
        /// The name as given.
        name: String,
    },
    /// Two rules with one name (a user rule may not take a default rule's name either), so a
    /// marker would not say which rule replaced the value.
    #[error("rule {name:?} is defined twice")]
    DuplicateRule {
        /// The name both rules have.
        name: String,
    },
    /// `disable` names a default rule that does not exist: a misspelt name would otherwise
    /// leave the rule on in silence.
    #[error("cannot disable {name:?}: there is no default rule of that name (the defaults are {})", crate::DEFAULT_RULES.iter().map(|rule| rule.name).collect::<Vec<_>>().join(", "))]
    UnknownDefaultRule {
        /// The name as given.
        name: String,
    },
    /// A rule that has neither a `regex` nor a `json_path`, or has both.
    #[error("rule {rule:?} must have exactly one of `regex` and `json_path`")]
    RuleKind {
        /// The rule's name.
        rule: String,
    },
    /// A flag that is not `NAME=VALUE`.
    #[error("flag {flag:?} is not NAME=VALUE")]
    InvalidFlag {
        /// The flag as given.
        flag: String,
    },
    /// The rules file could not be read.
    #[error("rules file {} cannot be read: {source}", path.display())]
    ReadConfig {
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        #[source]
        source: std::io::Error,
    },
    /// The rules file is larger than [`crate::MAX_CONFIG_BYTES`].
    #[error("rules file {} is {len} bytes, more than the {max} a rules file may have", path.display())]
    ConfigTooLarge {
        /// The file.
        path: PathBuf,
        /// Its length in bytes.
        len: u64,
        /// The bound.
        max: u64,
    },
    /// The rules file's name ends neither in `.toml` nor in `.json`.
    #[error("rules file {} is neither .toml nor .json", path.display())]
    ConfigFormat {
        /// The file.
        path: PathBuf,
    },
    /// The rules text is not TOML of the rules file's shape.
    #[error("rules in {origin} are not valid: {source}")]
    ParseToml {
        /// Where the text came from (a path, or `"a TOML string"`).
        origin: String,
        /// The TOML reader's reason, with the line.
        #[source]
        source: Box<toml::de::Error>,
    },
    /// The rules text is not JSON of the rules file's shape.
    #[error("rules in {origin} are not valid: {source}")]
    ParseJson {
        /// Where the text came from (a path, or `"a JSON string"`).
        origin: String,
        /// The JSON reader's reason, with the line and column.
        #[source]
        source: serde_json::Error,
    },
}
