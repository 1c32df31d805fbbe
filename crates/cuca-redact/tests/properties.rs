//! Properties: redacting never panics, leaves nothing any rule matches, is idempotent and
//! deterministic, on texts made of secrets, their pieces, markers and JSON punctuation.

// Test helpers outside `#[test]` functions: a failure is the test failing.
#![allow(clippy::unwrap_used)]

mod common;

use std::borrow::Cow;

use common::{assert_gone, FAKES};
use cuca_redact::Rules;
use proptest::prelude::*;
use serde_json::Value;

/// Pieces that make secrets, near misses and the contexts the rules look at.
const PIECES: &[&str] = &[
    " ",
    "\n",
    "\\n",
    "\\",
    "\"",
    "\\\"",
    ":",
    "=",
    "-",
    "_",
    ".",
    "/",
    "+",
    "[",
    "]",
    "{",
    "}",
    "Bearer ",
    "bearer\t",
    "\"password\": \"",
    "\\\"token\\\": \\\"",
    "\"api_key\":\"",
    "aws_secret_access_key = ",
    "sk-",
    "sk-proj-",
    "sk-ant-",
    "AKIA",
    "ASIA",
    "ghp_",
    "github_pat_",
    "xoxb-",
    "sk_live_",
    "rk_test_",
    "eyJ",
    "eyJhbGciOiJIUzI1NiJ9.",
    "https://hooks.slack.com/services/",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "[REDACTED:openai-key]",
    "[REDACTED:",
    "REDACTED",
    "Zk9Xq2Lm7Wn4Rt8Yp3Vb6Hc1Jd5Gf0Sa9Ue2Io7Q",
    "0123456789",
    "abcdefghij",
    "ABCDEFGHIJ",
];

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(PIECES).prop_map(str::to_owned),
        2 => prop::sample::select(FAKES).prop_map(|fake| fake.text.to_owned()),
        2 => (prop::sample::select(FAKES), any::<prop::sample::Index>()).prop_map(|(fake, cut)| {
            let text = fake.text;
            let mut at = cut.index(text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            text[..at].to_owned()
        }),
        2 => "[ -~]{0,12}",
        1 => "\\PC{0,4}",
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(fragment(), 0..24).prop_map(|parts| parts.concat())
}

/// The default rules, compiled once for every case.
fn rules() -> &'static Rules {
    static RULES: std::sync::OnceLock<Rules> = std::sync::OnceLock::new();
    RULES.get_or_init(|| Rules::defaults().unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn redacted_text_matches_no_rule_and_redacts_to_itself(input in text()) {
        let rules = rules();
        let (once, counts) = rules.redact_text(&input);
        prop_assert_eq!(rules.scan(&once), vec![], "in {:?}", once);
        let (twice, again) = rules.redact_text(&once);
        prop_assert!(matches!(twice, Cow::Borrowed(_)), "{:?} became {:?}", once, twice);
        prop_assert!(again.is_empty());
        let (other, other_counts) = rules.redact_text(&input);
        prop_assert_eq!(&once, &other);
        prop_assert_eq!(&counts, &other_counts);
        prop_assert_eq!(counts.is_empty(), matches!(once, Cow::Borrowed(_)));
        prop_assert_eq!(rules.scan(&input).is_empty(), counts.is_empty());
    }

    #[test]
    fn secrets_between_separators_never_survive(
        picks in prop::collection::vec(
            (prop::sample::select(FAKES), prop::sample::select(&[" ", "\n", ", ", "\t", "; ", "\\n", "(", "'"][..])),
            1..6,
        ),
    ) {
        let rules = rules();
        let mut input = String::new();
        for (fake, separator) in &picks {
            input.push_str(separator);
            input.push_str(fake.text);
        }
        input.push(' ');
        let (out, counts) = rules.redact_text(&input);
        for (fake, _) in &picks {
            assert_gone(fake, &out, "between separators");
        }
        prop_assert!(counts.total() >= 1);
    }

    #[test]
    fn redacted_json_matches_no_rule_and_redacts_to_itself(
        strings in prop::collection::vec(text(), 1..6),
        keys in prop::collection::vec(prop_oneof![Just("password".to_owned()), Just("content".to_owned()), text()], 1..6),
    ) {
        let rules = rules();
        let mut object = serde_json::Map::new();
        for (i, key) in keys.iter().enumerate() {
            let value = strings[i % strings.len()].clone();
            object.insert(key.clone(), Value::Array(vec![Value::String(value.clone()), serde_json::json!({ "inner": value })]));
        }
        let mut value = Value::Object(object);
        rules.redact_json(&mut value);
        prop_assert_eq!(rules.scan_json(&value), vec![]);
        let before = value.clone();
        prop_assert!(rules.redact_json(&mut value).is_empty());
        prop_assert_eq!(value, before);
    }
}
