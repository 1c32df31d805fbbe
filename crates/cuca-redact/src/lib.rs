//! `cuca-redact`: redaction at write time — secrets and the user's own rules replaced, before
//! a record reaches any store, by a marker naming the rule that found them.
//!
//! A recording holds prompts, tool outputs and answers exactly as they passed, so a key pasted
//! into a prompt or printed by a tool would go into the store and every copy of it. [`Rules`]
//! are the default rules ([`DEFAULT_RULES`]: OpenAI, Anthropic, AWS, GitHub, Slack and Stripe
//! keys, JWTs, `Bearer` tokens, PEM private keys, password-like JSON fields) minus those a
//! [`Config`] disables, plus the user's regular expressions and [JSON paths](JsonPath), from a
//! rules file ([`Config::load`], TOML or JSON) and flags (`NAME=REGEX`). Each replaced value
//! becomes `[REDACTED:rule-name]`:
//!
//! * [`Rules::redact_text`] → the text (borrowed when nothing matched) and [`Counts`] per rule;
//! * [`Rules::redact_json`] → a JSON document redacted in place: JSON-path rules, password-like
//!   keys, and the text rules on every string;
//! * [`Rules::redact_event`] → every text-bearing field of a `SessionEvent`
//!   ([`REDACTED_FIELDS`]);
//! * [`Rules::scan`], [`Rules::scan_json`], [`Rules::scan_event`] → where the rules still
//!   match ([`Finding`]: the rule and the place, never the value), for refusing to export.
//!
//! ```
//! use cuca_events::{Message, SessionEvent};
//! use cuca_redact::{Config, Rules};
//!
//! let mut config = Config::default();
//! config.disable.push("jwt".into());
//! config.add_regex_flag("employee=EMP-[0-9]{6}")?;
//! let rules = Rules::new(&config)?;
//!
//! let mut event = SessionEvent::Message(Message::user(
//!     "EMP-004211 says the key is AKIAIOSFODNN7EXAMPLE",
//! ));
//! let counts = rules.redact_event(&mut event);
//! assert_eq!(
//!     event,
//!     SessionEvent::Message(Message::user(
//!         "[REDACTED:employee] says the key is [REDACTED:aws-access-key-id]",
//!     ))
//! );
//! assert_eq!(counts.to_string(), "aws-access-key-id=1, employee=1");
//! // Redacted against redacted: the same rules give the same bytes again, and find nothing.
//! assert!(rules.redact_event(&mut event).is_empty());
//! assert!(rules.scan_event(&event).is_empty());
//! # Ok::<(), cuca_redact::Error>(())
//! ```
//!
//! # Determinism
//!
//! A marker depends on the rule alone, never on the value, so two recordings of one request
//! redact to the same bytes, and replay compares a redacted recording with an incoming request
//! redacted by the same rules. Redacting is idempotent: a marker never matches a rule again.
//!
//! # Cost
//!
//! Every text rule is compiled once, and a `RegexSet` of them all is the first pass over a
//! text: a text no rule matches (nearly every streamed chunk) costs that one pass and no
//! allocation. `benches/redact.rs` measures a streamed chunk, a 4 KiB text and a 200 KB
//! prompt.
//!
//! # What it does not do
//!
//! It does no I/O but reading a rules file, and knows no store, client or proxy: the recorder
//! calls it on what it is about to write. It looks at one text at a time, so a secret split
//! across two streamed `Output` events is not seen by a recorder that redacts each event as it
//! comes; a recorder that must catch those redacts what a call streamed as one text. It does
//! not read images.
#![forbid(unsafe_code)]

mod config;
mod counts;
mod defaults;
mod error;
mod event;
mod json_path;
mod rules;

pub use config::{Config, RuleSpec, MAX_CONFIG_BYTES};
pub use counts::Counts;
pub use defaults::{DefaultRule, DEFAULT_RULES};
pub use error::Error;
pub use event::REDACTED_FIELDS;
pub use json_path::{JsonPath, JsonPathError};
pub use rules::{marker, Finding, Rules};
