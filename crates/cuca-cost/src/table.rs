//! The price table: reading LiteLLM's list, the bundled snapshot, and name matching.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::sync::OnceLock;

use serde_json::{Map, Value};

use crate::error::PricesError;
use crate::price::{ModelPrice, Rates, Tier};

/// The largest price table read, in bytes. LiteLLM's whole list is about 3.5 MB; 64 MiB leaves
/// room for years of growth and keeps a wrong `--prices` file (a log, a dump) from being read
/// whole into memory. ccusage bounds its download the same way.
pub const MAX_TABLE_BYTES: u64 = 64 * 1024 * 1024;

/// The trimmed snapshot, gzip-compressed (see `data/SOURCE.md`).
const BUNDLED_GZ: &[u8] = include_bytes!("../data/litellm-prices.json.gz");
/// Where the snapshot came from and when it was taken.
const BUNDLED_SOURCE: &str = include_str!("../data/source.json");

/// The fields the table reads from an entry; everything else in LiteLLM's list (context
/// windows, feature flags, batch, flex and priority prices, per-image and per-second prices) is
/// not about what a chat call's tokens cost here, and the trimmed snapshot drops it.
const PROVIDER: &str = "litellm_provider";
const INPUT: &str = "input_cost_per_token";
const OUTPUT: &str = "output_cost_per_token";
const CACHE_READ: &str = "cache_read_input_token_cost";
const CACHE_WRITE_5M: &str = "cache_creation_input_token_cost";
const CACHE_WRITE_1H: &str = "cache_creation_input_token_cost_above_1hr";
const REASONING: &str = "output_cost_per_reasoning_token";
/// LiteLLM's own nested pricing form, which it prefers over the flat fields when present. This
/// crate does not implement it, so an entry that has it is left out (priced as unknown) rather
/// than priced by the flat fields LiteLLM would not use.
const TIERED_PRICING: &str = "tiered_pricing";

/// The kinds a long-context tier may name, as the prefix of `<prefix>_above_<N>[k]_tokens`.
/// The 1-hour write is listed before the 5-minute one so that the longer prefix wins.
const TIER_PREFIXES: [&str; 5] = [INPUT, OUTPUT, CACHE_READ, CACHE_WRITE_1H, CACHE_WRITE_5M];

/// Which table priced a figure: its name and the date of its prices.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct PriceSource {
    /// For the bundled snapshot, the list and the release it was taken from; for a file, its
    /// path.
    pub name: String,
    /// The day the prices were taken (`YYYY-MM-DD`): for the bundled snapshot the day of the
    /// snapshot, for a file the day it was last modified, for JSON given in memory none.
    pub date: Option<String>,
}

impl std::fmt::Display for PriceSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.date {
            Some(date) => write!(f, "{} ({date})", self.name),
            None => write!(f, "{}", self.name),
        }
    }
}

/// A table of per-token prices by model name, in LiteLLM's `model_prices_and_context_window.json`
/// format.
#[derive(Debug, Clone)]
pub struct PriceTable {
    source: PriceSource,
    models: HashMap<String, ModelPrice>,
}

impl PriceTable {
    /// The snapshot shipped in this crate, unpacked and parsed once per process.
    pub fn bundled() -> Result<&'static PriceTable, PricesError> {
        static BUNDLED: OnceLock<Result<PriceTable, String>> = OnceLock::new();
        BUNDLED
            .get_or_init(|| load_bundled().map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|problem| PricesError::Bundled {
                problem: problem.clone(),
            })
    }

    /// Reads a price table from a file in LiteLLM's format: the whole list as LiteLLM publishes
    /// it, or a trimmed one like the bundled snapshot.
    pub fn from_file(path: impl AsRef<Path>) -> Result<PriceTable, PricesError> {
        let path = path.as_ref();
        let read_err = |source| PricesError::Read {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::open(path).map_err(read_err)?;
        let meta = file.metadata().map_err(read_err)?;
        let name = path.display().to_string();
        if meta.len() > MAX_TABLE_BYTES {
            return Err(PricesError::TooLarge {
                name,
                bytes: meta.len(),
                max: MAX_TABLE_BYTES,
            });
        }
        let mut text = String::new();
        // `take` holds the bound even if the file grows between `metadata` and the read.
        file.take(MAX_TABLE_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(read_err)?;
        let date = meta.modified().ok().and_then(utc_date);
        parse(&text, PriceSource { name, date })
    }

    /// Reads a price table from JSON in LiteLLM's format held in memory; its source is named
    /// `JSON given in memory` and has no date.
    pub fn from_json(json: &str) -> Result<PriceTable, PricesError> {
        Self::from_json_named(
            json,
            PriceSource {
                name: "JSON given in memory".to_owned(),
                date: None,
            },
        )
    }

    /// Reads a price table from JSON, with the name and date its figures will cite.
    pub fn from_json_named(json: &str, source: PriceSource) -> Result<PriceTable, PricesError> {
        if json.len() as u64 > MAX_TABLE_BYTES {
            return Err(PricesError::TooLarge {
                name: source.name,
                bytes: json.len() as u64,
                max: MAX_TABLE_BYTES,
            });
        }
        parse(json, source)
    }

    /// Which table this is, to cite beside every figure it priced.
    pub fn source(&self) -> &PriceSource {
        &self.source
    }

    /// How many models the table prices.
    pub fn len(&self) -> usize {
        self.models.len()
    }

    /// Whether the table prices no model (never true of a table this crate read).
    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    /// The entry that prices `model`, or `None` when the table does not know it (its cost is
    /// then unknown, never 0). Names are tried in this order, the first found wins:
    ///
    /// 1. the name as given (`claude-sonnet-4-5-20250929`, `openrouter/openai/gpt-4o`);
    /// 2. the name without its provider prefixes, dropping one `provider/` at a time
    ///    (`anthropic/claude-sonnet-4-5` → `claude-sonnet-4-5`);
    /// 3. each of those without a date suffix (`-20250929`, `@20250929`, `-2024-08-06`), so a
    ///    dated release not yet in the list is priced as its undated alias;
    /// 4. each of those with `.` and `@` read as `-` (`claude-sonnet-4.5` →
    ///    `claude-sonnet-4-5`), as ccusage normalises names.
    pub fn price(&self, model: &str) -> Option<&ModelPrice> {
        if let Some(found) = self.models.get(model) {
            return Some(found);
        }
        let mut candidates: Vec<&str> = Vec::with_capacity(4);
        let mut rest = model;
        while let Some((_, tail)) = rest.split_once('/') {
            if tail.is_empty() {
                break;
            }
            if let Some(found) = self.models.get(tail) {
                return Some(found);
            }
            candidates.push(tail);
            rest = tail;
        }
        candidates.insert(0, model);
        for name in &candidates {
            if let Some(undated) = without_date_suffix(name) {
                if let Some(found) = self.models.get(undated) {
                    return Some(found);
                }
            }
        }
        for name in &candidates {
            if name.contains(['.', '@']) {
                let normalised = name.replace(['.', '@'], "-");
                let base = without_date_suffix(&normalised).unwrap_or(&normalised);
                if let Some(found) = self
                    .models
                    .get(normalised.as_str())
                    .or_else(|| self.models.get(base))
                {
                    return Some(found);
                }
            }
        }
        None
    }

    /// Every model the table prices, in no particular order.
    pub fn models(&self) -> impl Iterator<Item = &ModelPrice> {
        self.models.values()
    }
}

/// `name` without a trailing release date, or `None` when it has none. A date is eight digits
/// (`YYYYMMDD`, Anthropic's form) or `YYYY-MM-DD` (OpenAI's), after `-` or `@`. Other numeric
/// suffixes (`-0613`, `-v1:0`) are versions, not dates, and stay.
fn without_date_suffix(name: &str) -> Option<&str> {
    let bytes = name.as_bytes();
    let digits = |s: &[u8]| s.iter().all(u8::is_ascii_digit);
    let n = bytes.len();
    if n > 9 && matches!(bytes[n - 9], b'-' | b'@') && digits(&bytes[n - 8..]) {
        return Some(&name[..n - 9]);
    }
    if n > 11
        && bytes[n - 11] == b'-'
        && digits(&bytes[n - 10..n - 6])
        && bytes[n - 6] == b'-'
        && digits(&bytes[n - 5..n - 3])
        && bytes[n - 3] == b'-'
        && digits(&bytes[n - 2..])
    {
        return Some(&name[..n - 11]);
    }
    None
}

fn load_bundled() -> Result<PriceTable, PricesError> {
    let source: PriceSource =
        serde_json::from_str(BUNDLED_SOURCE).map_err(|e| PricesError::Bundled {
            problem: format!("data/source.json: {e}"),
        })?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(BUNDLED_GZ)
        .take(MAX_TABLE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| PricesError::Bundled {
            problem: format!("data/litellm-prices.json.gz: {e}"),
        })?;
    parse(&text, source)
}

fn parse(json: &str, source: PriceSource) -> Result<PriceTable, PricesError> {
    let entries = parse_entries(json, &source.name)?;
    let mut models = HashMap::with_capacity(entries.len());
    for (model, entry) in entries {
        if let Some(price) = model_price(&source.name, &model, &entry)? {
            models.insert(model, price);
        }
    }
    if models.is_empty() {
        return Err(PricesError::NoPrices { name: source.name });
    }
    Ok(PriceTable { source, models })
}

fn parse_entries(json: &str, name: &str) -> Result<Map<String, Value>, PricesError> {
    let value: Value = serde_json::from_str(json).map_err(|source| PricesError::Json {
        name: name.to_owned(),
        source,
    })?;
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(PricesError::NotAnObject {
            name: name.to_owned(),
        }),
    }
}

/// One entry's prices, or `None` when it is not priced per token (an image model, LiteLLM's
/// `sample_spec`, an entry with `tiered_pricing`).
fn model_price(name: &str, model: &str, entry: &Value) -> Result<Option<ModelPrice>, PricesError> {
    let Value::Object(fields) = entry else {
        return Ok(None);
    };
    if fields.contains_key(TIERED_PRICING) {
        return Ok(None);
    }
    let rate = |field: &str| rate(name, model, field, fields.get(field));
    let (Some(input), Some(output)) = (rate(INPUT)?, rate(OUTPUT)?) else {
        return Ok(None);
    };
    let rates = Rates {
        input: Some(input),
        output: Some(output),
        cache_read: rate(CACHE_READ)?,
        cache_write_5m: rate(CACHE_WRITE_5M)?,
        cache_write_1h: rate(CACHE_WRITE_1H)?,
        reasoning: rate(REASONING)?,
    };
    let mut tiers: Vec<Tier> = Vec::new();
    for (field, value) in fields {
        let Some((kind, above_tokens)) = tier_key(field) else {
            continue;
        };
        let Some(value) = rate_of(name, model, field, value)? else {
            continue;
        };
        let idx = match tiers.iter().position(|t| t.above_tokens == above_tokens) {
            Some(idx) => idx,
            None => {
                tiers.push(Tier {
                    above_tokens,
                    rates: Rates::default(),
                });
                tiers.len() - 1
            }
        };
        let slot = &mut tiers[idx].rates;
        match kind {
            INPUT => slot.input = Some(value),
            OUTPUT => slot.output = Some(value),
            CACHE_READ => slot.cache_read = Some(value),
            CACHE_WRITE_5M => slot.cache_write_5m = Some(value),
            _ => slot.cache_write_1h = Some(value),
        }
    }
    tiers.sort_by_key(|t| t.above_tokens);
    let provider = fields
        .get(PROVIDER)
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(Some(ModelPrice {
        model: model.to_owned(),
        provider,
        rates,
        tiers,
    }))
}

/// Reads `<kind>_above_<N>[k]_tokens` into its kind and threshold. Keys with a further suffix
/// (`_batches`, `_flex`, `_priority`) are other service tiers' prices and are not read, as
/// LiteLLM does not read them for a standard call.
fn tier_key(field: &str) -> Option<(&'static str, u64)> {
    let kind = TIER_PREFIXES
        .iter()
        .copied()
        .find(|p| field.starts_with(p) && field[p.len()..].starts_with("_above_"))?;
    let threshold = field[kind.len() + "_above_".len()..].strip_suffix("_tokens")?;
    let (digits, scale) = match threshold.strip_suffix('k') {
        Some(d) => (d, 1000),
        None => (threshold, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some((kind, n.checked_mul(scale)?))
}

fn rate(
    name: &str,
    model: &str,
    field: &str,
    value: Option<&Value>,
) -> Result<Option<f64>, PricesError> {
    match value {
        None => Ok(None),
        Some(value) => rate_of(name, model, field, value),
    }
}

/// A price field's value: a finite, non-negative number, or `null` (absent).
fn rate_of(
    name: &str,
    model: &str,
    field: &str,
    value: &Value,
) -> Result<Option<f64>, PricesError> {
    let problem = match value {
        Value::Null => return Ok(None),
        Value::Number(n) => match n.as_f64() {
            Some(v) if v.is_finite() && v >= 0.0 => return Ok(Some(v)),
            _ => format!("is {n}, not a non-negative price"),
        },
        other => format!("is {other}, not a number"),
    };
    Err(PricesError::Field {
        name: name.to_owned(),
        model: model.to_owned(),
        field: field.to_owned(),
        problem,
    })
}

/// The snapshot format: LiteLLM's JSON with only the entries priced per token and only the
/// fields [`PriceTable`] reads, keys sorted so a regenerated snapshot diffs cleanly. The same
/// parser reads both, so the bundled table and a `--prices` file of the whole list price alike.
pub fn trim_litellm_json(json: &str, name: &str) -> Result<String, PricesError> {
    let entries = parse_entries(json, name)?;
    let mut out: std::collections::BTreeMap<&str, std::collections::BTreeMap<&str, &Value>> =
        std::collections::BTreeMap::new();
    for (model, entry) in &entries {
        if model_price(name, model, entry)?.is_none() {
            continue;
        }
        let Value::Object(fields) = entry else {
            continue;
        };
        let kept = fields
            .iter()
            .filter(|(field, value)| {
                !value.is_null()
                    && ([
                        PROVIDER,
                        INPUT,
                        OUTPUT,
                        CACHE_READ,
                        CACHE_WRITE_5M,
                        CACHE_WRITE_1H,
                        REASONING,
                    ]
                    .contains(&field.as_str())
                        || tier_key(field).is_some())
            })
            .map(|(field, value)| (field.as_str(), value))
            .collect();
        out.insert(model.as_str(), kept);
    }
    let mut text = serde_json::to_string_pretty(&out).map_err(|source| PricesError::Json {
        name: name.to_owned(),
        source,
    })?;
    text.push('\n');
    Ok(text)
}

/// The UTC calendar day of `time` as `YYYY-MM-DD` (Howard Hinnant's `civil_from_days`), so the
/// crate needs no date library for a file's modification day.
fn utc_date(time: std::time::SystemTime) -> Option<String> {
    let secs = time.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
    let days = i64::try_from(secs / 86_400).ok()?;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    Some(format!("{year:04}-{month:02}-{day:02}"))
}

#[cfg(test)]
mod tests;
