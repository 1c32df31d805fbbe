//! The default rules: the secrets every recording is redacted of unless a rule is disabled.

/// One default rule: its name (the one its markers carry, and `disable` takes) and what it
/// replaces. The list is [`DEFAULT_RULES`]; `docs/redaction.md` has it as a table.
#[derive(Debug, Clone, Copy)]
pub struct DefaultRule {
    /// The rule's name, as in `[REDACTED:openai-key]`.
    pub name: &'static str,
    /// What the rule finds, in words.
    pub finds: &'static str,
    /// The regular expression.
    pub(crate) pattern: &'static str,
    /// Whether the replaced text is the pattern's first capture group that took part in the
    /// match rather than the whole match: the pattern needs context around the secret (its
    /// name, `Bearer `, a boundary) that is not itself secret and stays.
    pub(crate) group: bool,
    /// A check a candidate must pass besides the pattern, where the pattern alone would take
    /// ordinary words. It is monotone (a text that passes, extended, still passes), so a
    /// rejected candidate never hides a secret inside it.
    pub(crate) check: Option<fn(&str) -> bool>,
}

/// What comes before a key the pattern starts without a distinctive prefix of its own: the
/// start of the text, a character that is not an ASCII letter or digit, or a JSON escape such
/// as `\n` (whose letter would otherwise look like part of a word). A leading `\b` would
/// miss `\nsk-…` in JSON text, which is exactly where recorded keys are found.
macro_rules! key_start {
    () => {
        r"(?:^|[^A-Za-z0-9]|\\[nrt])"
    };
}

/// The key names whose string values the `password-field` rule replaces, as the end of a key
/// (`"password"`, `"db_password"`, `"clientSecret"`, `"api_key"`, `"access_token"` …),
/// case-insensitive. Shared by the text pattern and the JSON walk so they agree.
macro_rules! password_keys {
    () => {
        r"(?i:passw(?:or)?d|passphrase|secret|token|(?:api|private|access|secret)[_-]?key|authorization|credentials?)"
    };
}

/// The same key names as the end of a JSON object's key, for the JSON walk.
pub(crate) const PASSWORD_KEY: &str = concat!(password_keys!(), "$");

/// The password-field rule's name, which the JSON walk also replaces by key.
pub(crate) const PASSWORD_FIELD: &str = "password-field";

/// Whether an OpenAI key candidate (after `sk-`) has an ASCII digit, an upper-case and a
/// lower-case letter, as every generated key has and hyphenated words (`sk-learn-pipeline-…`)
/// do not.
fn mixed_case_and_digit(candidate: &str) -> bool {
    let body = candidate.strip_prefix("sk-").unwrap_or(candidate);
    body.bytes().any(|b| b.is_ascii_digit())
        && body.bytes().any(|b| b.is_ascii_uppercase())
        && body.bytes().any(|b| b.is_ascii_lowercase())
}

/// Every default rule, in priority order: where two rules replace the same text, the marker
/// names the one listed first (an Anthropic key also looks like an OpenAI key to the
/// `sk-` pattern, and a key after `Bearer` is named for its kind, not `bearer`).
pub const DEFAULT_RULES: &[DefaultRule] = &[
    DefaultRule {
        name: "private-key",
        finds: "PEM private key blocks (`-----BEGIN … PRIVATE KEY-----` to its END line, or to the end of the base64 when the END line is missing), also JSON-escaped",
        pattern: r"-----BEGIN[A-Z0-9 ]{0,32}PRIVATE KEY-----[A-Za-z0-9+/=\s\\]*(?:-----END[A-Z0-9 ]{0,32}PRIVATE KEY-----)?",
        group: false,
        check: None,
    },
    DefaultRule {
        name: "anthropic-key",
        finds: "Anthropic API keys, `sk-ant-…`",
        pattern: r"sk-ant-[A-Za-z0-9_-]{20,}",
        group: false,
        check: None,
    },
    DefaultRule {
        name: "openai-key",
        finds: "OpenAI API keys, `sk-…`, `sk-proj-…`, `sk-svcacct-…`, `sk-admin-…` (with a digit, an upper- and a lower-case letter)",
        pattern: concat!(key_start!(), r"(sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,})"),
        group: true,
        check: Some(mixed_case_and_digit),
    },
    DefaultRule {
        name: "aws-access-key-id",
        finds: "AWS access key ids, `AKIA…`, `ASIA…`, `ABIA…`, `ACCA…`",
        pattern: concat!(key_start!(), r"((?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16,})"),
        group: true,
        check: None,
    },
    DefaultRule {
        name: "aws-secret-key",
        finds: "AWS secret access keys next to their name (`aws_secret_access_key = …`, `\"SecretAccessKey\": \"…\"`); the name stays",
        pattern: r#"(?i:aws[_-]?secret[_-]?access[_-]?key|secret[_-]?access[_-]?key|aws[_-]?secret[_-]?key)(?:\\?["'])?\s*[:=]\s*(?:\\?["'])?([A-Za-z0-9/+]{40,})"#,
        group: true,
        check: None,
    },
    DefaultRule {
        name: "github-token",
        finds: "GitHub tokens, `ghp_`, `gho_`, `ghs_`, `ghu_`, `ghr_`, `github_pat_`",
        pattern: r"gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}",
        group: false,
        check: None,
    },
    DefaultRule {
        name: "slack-token",
        finds: "Slack tokens, `xoxa-`, `xoxb-`, `xoxp-`, `xoxr-`, `xoxs-`, `xoxe-`",
        pattern: r"xox[abprse]-[A-Za-z0-9-]{10,}",
        group: false,
        check: None,
    },
    DefaultRule {
        name: "slack-webhook",
        finds: "Slack incoming-webhook and workflow URLs, `https://hooks.slack.com/services/…`",
        pattern: r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{8,}",
        group: false,
        check: None,
    },
    DefaultRule {
        name: "stripe-key",
        finds: "Stripe secret and restricted keys, `sk_live_`, `rk_live_`, `sk_test_`, `rk_test_`",
        pattern: concat!(key_start!(), r"([sr]k_(?:live|test)_[A-Za-z0-9]{16,})"),
        group: true,
        check: None,
    },
    DefaultRule {
        name: "jwt",
        finds: "JSON Web Tokens: three base64url parts, the first two JSON objects (`eyJ…`)",
        pattern: r"eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]+",
        group: false,
        check: None,
    },
    DefaultRule {
        name: "bearer",
        finds: "the token after `Bearer ` (16 characters or more); `Bearer ` stays",
        pattern: r"(?i:bearer)\s+([A-Za-z0-9._~+/-]{16,}=*)",
        group: true,
        check: None,
    },
    DefaultRule {
        name: PASSWORD_FIELD,
        finds: "the string value of a JSON field whose key ends in password, passwd, passphrase, secret, token, api_key, private_key, access_key, secret_key, authorization or credential(s), any case, `_` or `-` or none before `key`; also in JSON text and JSON escaped inside a string",
        // The value of `"key": "value"`, or of `\"key\": \"value\"` (JSON inside a JSON
        // string), to its closing quote or, cut short as a streamed chunk may be, to the
        // end of the text.
        pattern: concat!(
            password_keys!(),
            r#"(?:"\s*:\s*"((?:[^"\\]|\\.)*)(?:"|$)|\\"\s*:\s*\\"((?:[^"\\]|\\[^"])*)(?:\\"|$))"#
        ),
        group: true,
        check: None,
    },
];
