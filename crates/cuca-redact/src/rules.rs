//! `Rules`: the compiled rules, and redacting and scanning text and JSON with them.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;
use std::ops::Range;

use regex::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};
use serde_json::Value;

use crate::defaults::{DEFAULT_RULES, PASSWORD_FIELD, PASSWORD_KEY};
use crate::json_path::child_pointer;
use crate::{Config, Counts, Error, JsonPath};

/// The bound on one compiled rule (the `regex` crate's `size_limit`): well above what any
/// secret pattern needs, well below what would let a pasted rule take the recorder's memory.
const REGEX_SIZE_LIMIT: usize = 2 * 1024 * 1024;

/// The bound on the compiled set of every text rule, which is the first pass over every text.
const SET_SIZE_LIMIT: usize = 16 * 1024 * 1024;

/// How many times a text is passed over at most. Replacing a default rule's match with its
/// marker never makes a new match (the property tests hold the rules to that), so the second
/// pass over a redacted text finds nothing; the bound stops a user rule that matches around
/// its own marker from going on for ever.
const MAX_PASSES: usize = 4;

/// A marker anywhere in a text: `[REDACTED:` a rule name `]`.
const MARKER_PATTERN: &str = r"\[REDACTED:[A-Za-z0-9_.-]{1,64}\]";

/// The marker that replaces a value `rule` found.
pub fn marker(rule: &str) -> String {
    format!("[REDACTED:{rule}]")
}

/// Which part of a text rule's match is replaced.
#[derive(Debug, Clone, Copy)]
enum Part {
    /// The whole match.
    Whole,
    /// The first capture group that took part in the match (default rules with context).
    FirstGroup,
    /// The capture group of this index (a user rule's `(?P<secret>…)`).
    Group(usize),
}

/// A compiled text rule.
#[derive(Debug, Clone)]
struct TextRule {
    name: String,
    marker: String,
    regex: Regex,
    part: Part,
    check: Option<fn(&str) -> bool>,
}

/// A compiled JSON-path rule.
#[derive(Debug, Clone)]
struct PathRule {
    name: String,
    marker: String,
    path: JsonPath,
}

/// One stretch of text a rule replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
    rule: usize,
}

/// Where a rule still matches, from [`Rules::scan`], [`Rules::scan_json`] and
/// [`Rules::scan_event`]: the rule and the place, never the value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Finding {
    /// The rule's name.
    pub rule: String,
    /// Where in the scanned thing: empty for a text; a JSON pointer (`/messages/0/content`)
    /// in a JSON document; the field of a session event (`ToolResult.stdout`,
    /// `Message.content[1].text`), followed by the pointer in a field that holds JSON text.
    pub field: String,
    /// The bytes of the field's text that would be replaced; `None` when a JSON-path rule or
    /// a password-like key selects a whole value.
    pub range: Option<Range<usize>>,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let field = if self.field.is_empty() {
            "text"
        } else {
            &self.field
        };
        match &self.range {
            Some(range) => write!(
                f,
                "{field} bytes {}..{}: {}",
                range.start, range.end, self.rule
            ),
            None => write!(f, "{field}: {}", self.rule),
        }
    }
}

/// The compiled rules: the default rules not disabled, then the user's, each regular
/// expression compiled once. Build once and share (`Clone` is cheap, and `&Rules` is all
/// redacting takes): redacting never fails and never allocates for a text it leaves alone.
///
/// ```
/// use cuca_redact::Rules;
/// let rules = Rules::defaults()?;
/// let (text, counts) = rules.redact_text("use sk-proj-4fRq8ZtN0aLw2XyB7cVd1EeK please");
/// assert_eq!(text, "use [REDACTED:openai-key] please");
/// assert_eq!(counts.to_string(), "openai-key=1");
/// // A text without secrets comes back borrowed.
/// assert!(matches!(rules.redact_text("hello").0, std::borrow::Cow::Borrowed(_)));
/// # Ok::<(), cuca_redact::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Rules {
    text: Vec<TextRule>,
    /// Every text rule's pattern, in `text`'s order: one pass tells which rules match at
    /// all, and a text no rule matches is left after that one pass.
    set: RegexSet,
    paths: Vec<PathRule>,
    /// The key test of the JSON walk's password-like fields, when that default is on.
    password_key: Option<(usize, Regex)>,
    markers: Regex,
}

/// Compiles one rule's pattern.
fn compile(rule: &str, pattern: &str) -> Result<Regex, Error> {
    RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|source| Error::InvalidRegex {
            rule: rule.to_owned(),
            source: Box::new(source),
        })
}

/// Whether `name` can name a marker.
fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

impl Rules {
    /// The default rules, all of them.
    pub fn defaults() -> Result<Rules, Error> {
        Rules::new(&Config::default())
    }

    /// The default rules but those `config` disables, then `config`'s rules.
    pub fn new(config: &Config) -> Result<Rules, Error> {
        let mut disabled = HashSet::new();
        for name in &config.disable {
            if !DEFAULT_RULES.iter().any(|rule| rule.name == name) {
                return Err(Error::UnknownDefaultRule { name: name.clone() });
            }
            disabled.insert(name.as_str());
        }
        let mut names: HashSet<&str> = DEFAULT_RULES.iter().map(|rule| rule.name).collect();
        let mut text = Vec::new();
        let mut password_key = None;
        for rule in DEFAULT_RULES {
            if disabled.contains(rule.name) {
                continue;
            }
            if rule.name == PASSWORD_FIELD {
                password_key = Some((text.len(), compile(rule.name, PASSWORD_KEY)?));
            }
            text.push(TextRule {
                name: rule.name.to_owned(),
                marker: marker(rule.name),
                regex: compile(rule.name, rule.pattern)?,
                part: if rule.group {
                    Part::FirstGroup
                } else {
                    Part::Whole
                },
                check: rule.check,
            });
        }
        let mut paths = Vec::new();
        for spec in &config.rules {
            if !valid_name(&spec.name) {
                return Err(Error::InvalidRuleName {
                    name: spec.name.clone(),
                });
            }
            if !names.insert(&spec.name) {
                return Err(Error::DuplicateRule {
                    name: spec.name.clone(),
                });
            }
            match (&spec.regex, &spec.json_path) {
                (Some(pattern), None) => {
                    let regex = compile(&spec.name, pattern)?;
                    if regex.is_match("") {
                        return Err(Error::MatchesEmpty {
                            rule: spec.name.clone(),
                        });
                    }
                    let part = regex
                        .capture_names()
                        .position(|name| name == Some("secret"))
                        .map_or(Part::Whole, Part::Group);
                    text.push(TextRule {
                        name: spec.name.clone(),
                        marker: marker(&spec.name),
                        regex,
                        part,
                        check: None,
                    });
                }
                (None, Some(path)) => {
                    let path = JsonPath::parse(path).map_err(|source| Error::InvalidJsonPath {
                        rule: spec.name.clone(),
                        source,
                    })?;
                    paths.push(PathRule {
                        name: spec.name.clone(),
                        marker: marker(&spec.name),
                        path,
                    });
                }
                _ => {
                    return Err(Error::RuleKind {
                        rule: spec.name.clone(),
                    })
                }
            }
        }
        let set = RegexSetBuilder::new(text.iter().map(|rule| rule.regex.as_str()))
            .size_limit(SET_SIZE_LIMIT)
            .build()
            .map_err(|source| Error::InvalidRegex {
                rule: text
                    .iter()
                    .map(|rule| rule.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                source: Box::new(source),
            })?;
        Ok(Rules {
            text,
            set,
            paths,
            password_key,
            markers: compile("marker", MARKER_PATTERN)?,
        })
    }

    /// The names of the rules in force, text rules (defaults first) then JSON-path rules.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.text
            .iter()
            .map(|rule| rule.name.as_str())
            .chain(self.paths.iter().map(|rule| rule.name.as_str()))
    }

    /// Whether no rule is in force (every default turned off and none of the user's): a
    /// recorder then has nothing to do and skips redacting altogether.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty() && self.paths.is_empty()
    }

    /// Whether `rule` names a JSON-path rule.
    pub(crate) fn is_path_rule(&self, rule: &str) -> bool {
        self.paths.iter().any(|path| path.name == rule)
    }

    /// Whether any JSON-path rule is in force (a JSON text field is parsed only then).
    pub fn has_json_paths(&self) -> bool {
        !self.paths.is_empty()
    }

    /// The stretches of `text` the rules replace, in order, overlapping ones merged (the
    /// merged stretch keeps the rule of its first, longest part). Empty, and not allocated,
    /// for a text no rule matches.
    fn spans(&self, text: &str) -> Vec<Span> {
        // `is_match` first: it allocates nothing, where `matches` allocates the set of hits,
        // and a clean text (nearly every text) needs no more than the answer no.
        if !self.set.is_match(text) {
            return Vec::new();
        }
        let hits = self.set.matches(text);
        // Text already inside a marker is not matched again: a password-like field whose
        // value is a marker, or a user rule that would match a marker's letters.
        let markers: Vec<Range<usize>> = self.markers.find_iter(text).map(|m| m.range()).collect();
        let inside_marker = |range: &Range<usize>| {
            let i = markers.partition_point(|m| m.start <= range.start);
            i > 0 && markers[i - 1].end >= range.end
        };
        let mut spans = Vec::new();
        for index in hits.iter() {
            let rule = &self.text[index];
            let mut keep = |range: Range<usize>| {
                if range.is_empty() || inside_marker(&range) {
                    return;
                }
                if rule.check.is_some_and(|check| !check(&text[range.clone()])) {
                    return;
                }
                spans.push(Span {
                    start: range.start,
                    end: range.end,
                    rule: index,
                });
            };
            match rule.part {
                Part::Whole => rule.regex.find_iter(text).for_each(|m| keep(m.range())),
                Part::FirstGroup => {
                    for captures in rule.regex.captures_iter(text) {
                        let group = captures.iter().skip(1).flatten().next();
                        if let Some(group) = group {
                            keep(group.range());
                        }
                    }
                }
                Part::Group(i) => {
                    for captures in rule.regex.captures_iter(text) {
                        if let Some(group) = captures.get(i) {
                            keep(group.range());
                        }
                    }
                }
            }
        }
        spans.sort_unstable_by_key(|span| (span.start, std::cmp::Reverse(span.end), span.rule));
        let mut merged: Vec<Span> = Vec::with_capacity(spans.len());
        for span in spans {
            match merged.last_mut() {
                Some(last) if span.start < last.end => last.end = last.end.max(span.end),
                _ => merged.push(span),
            }
        }
        merged
    }

    /// One pass: `text` with every span replaced, or `None` when no rule matches.
    fn pass(&self, text: &str, counts: &mut Counts) -> Option<String> {
        let spans = self.spans(text);
        if spans.is_empty() {
            return None;
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for span in spans {
            let rule = &self.text[span.rule];
            out.push_str(&text[at..span.start]);
            out.push_str(&rule.marker);
            counts.add(&rule.name, 1);
            at = span.end;
        }
        out.push_str(&text[at..]);
        Some(out)
    }

    /// `text` with every match of a text rule replaced by its rule's marker, and how many
    /// values each rule replaced. A text no rule matches comes back borrowed. Redacting a
    /// redacted text changes nothing, and the same text always gives the same result.
    pub fn redact_text<'a>(&self, text: &'a str) -> (Cow<'a, str>, Counts) {
        let mut counts = Counts::new();
        let Some(mut out) = self.pass(text, &mut counts) else {
            return (Cow::Borrowed(text), counts);
        };
        for _ in 1..MAX_PASSES {
            match self.pass(&out, &mut counts) {
                Some(next) => out = next,
                None => break,
            }
        }
        (Cow::Owned(out), counts)
    }

    /// Redacts `text` in place; the counts, as [`Rules::redact_text`].
    pub fn redact_string(&self, text: &mut String) -> Counts {
        let (redacted, counts) = self.redact_text(text);
        if let Cow::Owned(redacted) = redacted {
            *text = redacted;
        }
        counts
    }

    /// Where the text rules match `text` (the stretches [`Rules::redact_text`] would replace,
    /// in its first pass), with `field` left empty. Empty exactly when `redact_text` would
    /// return `text` borrowed.
    pub fn scan(&self, text: &str) -> Vec<Finding> {
        self.scan_field(text, "")
    }

    pub(crate) fn scan_field(&self, text: &str, field: &str) -> Vec<Finding> {
        self.spans(text)
            .into_iter()
            .map(|span| Finding {
                rule: self.text[span.rule].name.clone(),
                field: field.to_owned(),
                range: Some(span.start..span.end),
            })
            .collect()
    }

    /// Whether `value` is a password-like field's value to replace whole: a non-empty
    /// string that is not already a marker, under a password-like key.
    fn password_value(&self, key: &str, value: &Value) -> Option<usize> {
        let (rule, regex) = self.password_key.as_ref()?;
        match value {
            Value::String(s) if !s.is_empty() && !self.is_marker(s) && regex.is_match(key) => {
                Some(*rule)
            }
            _ => None,
        }
    }

    /// Whether `text` is one marker, whole.
    fn is_marker(&self, text: &str) -> bool {
        self.markers
            .find(text)
            .is_some_and(|m| m.start() == 0 && m.end() == text.len())
    }

    /// Whether a JSON-path rule replaces `value`: anything but `null`, an empty string and a
    /// marker.
    fn path_replaces(&self, value: &Value) -> bool {
        match value {
            Value::Null => false,
            Value::String(s) => !s.is_empty() && !self.is_marker(s),
            _ => true,
        }
    }

    /// Applies the JSON-path rules to `value`; returns whether anything was replaced.
    pub(crate) fn redact_paths(&self, value: &mut Value, counts: &mut Counts) -> bool {
        let mut changed = false;
        for rule in &self.paths {
            for pointer in rule.path.pointers(value) {
                if let Some(target) = value.pointer_mut(&pointer) {
                    if self.path_replaces(target) {
                        *target = Value::String(rule.marker.clone());
                        counts.add(&rule.name, 1);
                        changed = true;
                    }
                }
            }
        }
        changed
    }

    /// Redacts a JSON document in place: the JSON-path rules first (a selected value, of any
    /// type but `null`, becomes its marker string), then the string value of every
    /// password-like key (when the `password-field` rule is on), then the text rules on every
    /// other string, object keys included. Returns how many values each rule replaced.
    ///
    /// The walk keeps its own stack, so a document of any depth is walked without recursion.
    pub fn redact_json(&self, value: &mut Value) -> Counts {
        let mut counts = Counts::new();
        self.redact_paths(value, &mut counts);
        let mut stack = vec![value];
        while let Some(value) = stack.pop() {
            match value {
                Value::String(s) => counts.merge(&self.redact_string(s)),
                Value::Array(items) => stack.extend(items.iter_mut()),
                Value::Object(map) => {
                    if map.keys().any(|key| !self.spans(key).is_empty()) {
                        self.redact_keys(map, &mut counts);
                    }
                    for (key, child) in map.iter_mut() {
                        match self.password_value(key, child) {
                            Some(rule) => {
                                let rule = &self.text[rule];
                                *child = Value::String(rule.marker.clone());
                                counts.add(&rule.name, 1);
                            }
                            None => stack.push(child),
                        }
                    }
                }
                Value::Null | Value::Bool(_) | Value::Number(_) => {}
            }
        }
        counts
    }

    /// Rebuilds an object whose keys hold secrets with its keys redacted. Two keys that
    /// redact to the same text would collide, so a later one gets `#2`, `#3` … after it (in
    /// the map's own, deterministic, order) rather than overwrite the first.
    fn redact_keys(&self, map: &mut serde_json::Map<String, Value>, counts: &mut Counts) {
        let old = std::mem::take(map);
        for (key, child) in old {
            let (redacted, key_counts) = self.redact_text(&key);
            counts.merge(&key_counts);
            let mut key = redacted.into_owned();
            if map.contains_key(&key) {
                let mut n = 2u64;
                while map.contains_key(&format!("{key}#{n}")) {
                    n += 1;
                }
                key = format!("{key}#{n}");
            }
            map.insert(key, child);
        }
    }

    /// Where the rules match in a JSON document, as [`Rules::redact_json`] would replace:
    /// each finding's `field` is the JSON pointer of the value (or of the object whose key
    /// matches), prefixed by `field`.
    pub fn scan_json(&self, value: &Value) -> Vec<Finding> {
        self.scan_json_at(value, "")
    }

    pub(crate) fn scan_json_at(&self, value: &Value, field: &str) -> Vec<Finding> {
        let mut findings = Vec::new();
        let mut by_path: HashSet<String> = HashSet::new();
        for rule in &self.paths {
            for pointer in rule.path.pointers(value) {
                if value
                    .pointer(&pointer)
                    .is_some_and(|v| self.path_replaces(v))
                {
                    findings.push(Finding {
                        rule: rule.name.clone(),
                        field: format!("{field}{pointer}"),
                        range: None,
                    });
                    by_path.insert(pointer);
                }
            }
        }
        let mut stack = vec![(String::new(), value)];
        while let Some((pointer, value)) = stack.pop() {
            if by_path.contains(&pointer) {
                continue;
            }
            match value {
                Value::String(s) => {
                    findings.extend(self.scan_field(s, &format!("{field}{pointer}")))
                }
                Value::Array(items) => {
                    for (i, child) in items.iter().enumerate().rev() {
                        stack.push((format!("{pointer}/{i}"), child));
                    }
                }
                Value::Object(map) => {
                    for key in map.keys() {
                        findings.extend(self.scan_field(key, &format!("{field}{pointer}")));
                    }
                    let mut children = Vec::with_capacity(map.len());
                    for (key, child) in map {
                        let child_pointer = child_pointer(&pointer, key);
                        match self.password_value(key, child) {
                            Some(rule) if !by_path.contains(&child_pointer) => {
                                findings.push(Finding {
                                    rule: self.text[rule].name.clone(),
                                    field: format!("{field}{child_pointer}"),
                                    range: None,
                                });
                            }
                            Some(_) => {}
                            None => children.push((child_pointer, child)),
                        }
                    }
                    stack.extend(children.into_iter().rev());
                }
                Value::Null | Value::Bool(_) | Value::Number(_) => {}
            }
        }
        findings
    }
}
