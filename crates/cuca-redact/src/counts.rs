//! How many values each rule replaced: what a call-log row and a scrub record carry.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

/// How many values each rule replaced, by rule name; never the values. Empty (and not
/// allocated) when nothing was replaced. Displayed in name order as `jwt=1, openai-key=2`,
/// serialized as a JSON object `{"jwt":1,"openai-key":2}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Counts {
    by_rule: BTreeMap<String, u64>,
}

impl Counts {
    /// No replacements.
    pub fn new() -> Counts {
        Counts::default()
    }

    /// Whether nothing was replaced.
    pub fn is_empty(&self) -> bool {
        self.by_rule.is_empty()
    }

    /// How many values `rule` replaced.
    pub fn get(&self, rule: &str) -> u64 {
        self.by_rule.get(rule).copied().unwrap_or(0)
    }

    /// How many values were replaced, all rules together.
    pub fn total(&self) -> u64 {
        self.by_rule.values().sum()
    }

    /// Each rule that replaced something and how many values, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        self.by_rule.iter().map(|(rule, n)| (rule.as_str(), *n))
    }

    /// Adds `n` replacements by `rule`.
    pub fn add(&mut self, rule: &str, n: u64) {
        if n == 0 {
            return;
        }
        match self.by_rule.get_mut(rule) {
            Some(count) => *count = count.saturating_add(n),
            None => {
                self.by_rule.insert(rule.to_owned(), n);
            }
        }
    }

    /// Adds every count of `other` to these.
    pub fn merge(&mut self, other: &Counts) {
        for (rule, n) in other.iter() {
            self.add(rule, n);
        }
    }
}

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (rule, n)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{rule}={n}")?;
        }
        Ok(())
    }
}
