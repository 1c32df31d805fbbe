//! The journal-runs pages, from the journal's streaming record reader.

use std::path::Path;

use cuca_journal::format::ErrorClass;
use cuca_journal::record::{read_record, RecordSummary};

use crate::error::ViewError;

/// The file a run directory holds its assembled record in (what `cuca journal assemble`
/// writes and `cuca serve` serves).
pub const RECORD_FILE: &str = "replay.json.gz";

/// One row of the runs list: a run id and its summary, or why it could not be read.
#[derive(Debug)]
pub struct RunRow {
    /// The run's directory name.
    pub id: String,
    /// What its record holds, or the reader's refusal in words.
    pub summary: Result<RecordSummary, String>,
}

/// Every run under `dir` that has a record, by id.
pub fn list(dir: &Path) -> Result<Vec<RunRow>, ViewError> {
    let entries = std::fs::read_dir(dir).map_err(|error| ViewError::Run {
        run: dir.display().to_string(),
        reason: error.to_string(),
    })?;
    let mut rows = Vec::new();
    for entry in entries.flatten() {
        let Ok(id) = entry.file_name().into_string() else {
            continue;
        };
        let Some(record) = record_of(&entry.path()) else {
            continue;
        };
        rows.push(RunRow {
            summary: read_record(&record).map_err(|error| error.to_string()),
            id,
        });
    }
    rows.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(rows)
}

/// The record file of the run directory `run`, when `run` is a real directory (not a symlink)
/// holding a regular file of that name.
///
/// A symlinked run directory is refused as a symlinked session file is: following it would
/// show a record from anywhere on the disk under the runs directory's name. Regular files
/// only: a FIFO or a device named like a record would hang the read.
fn record_of(run: &Path) -> Option<std::path::PathBuf> {
    if !std::fs::symlink_metadata(run).is_ok_and(|m| m.is_dir()) {
        return None;
    }
    let record = run.join(RECORD_FILE);
    std::fs::symlink_metadata(&record)
        .is_ok_and(|m| m.is_file())
        .then_some(record)
}

/// The summary of run `id` under `dir`.
pub fn show(dir: &Path, id: &str) -> Result<RecordSummary, ViewError> {
    let record = checked_record(dir, id)?;
    read_record(&record).map_err(|error| ViewError::Run {
        run: id.to_owned(),
        reason: error.to_string(),
    })
}

/// One journal entry with the pool entries it names resolved: what a run page shows on
/// demand: each entry's content (the command, its exit status, streams, the model call's
/// request and response).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct EntryView {
    /// The entry as the record holds it.
    pub entry: cuca_journal::format::Entry,
    /// Message-pool entries it names, by index.
    pub messages: BTreeMap<u64, cuca_journal::format::StoredMessage>,
    /// Text-pool entries it (or its messages) name, by index.
    pub texts: BTreeMap<u64, String>,
}

/// The entry `seq` of run `id` under `dir`, with its pool references resolved.
///
/// The record is read twice, streamed, holding only what is asked for: once to find the
/// entry (the entries come after the pools), once for the pool entries it names.
pub fn entry(dir: &Path, id: &str, seq: u64) -> Result<EntryView, ViewError> {
    // The same checks as `show`: one directory name, a real directory, a regular file.
    show(dir, id)?;
    let record = dir.join(id).join(RECORD_FILE);
    let fail = |reason: String| ViewError::Run {
        run: id.to_owned(),
        reason,
    };
    let wanted = Wanted {
        entry: Some(seq),
        ..Wanted::default()
    };
    let found = walk(&record, &wanted).map_err(|e| fail(e.to_string()))?;
    let Some(value) = found.entry else {
        return Err(ViewError::UnknownRun {
            run: format!("{id} entry {seq}"),
        });
    };
    let entry: cuca_journal::format::Entry =
        serde_json::from_value(value).map_err(|e| fail(format!("entry {seq}: {e}")))?;
    let mut wanted = Wanted::default();
    use cuca_journal::format::{Input, StoredBlock};
    match &entry.input {
        Input::ModelIo(io) => {
            wanted.messages.extend(io.request.messages.iter().copied());
            wanted.messages.insert(io.response.message);
        }
        Input::ModelError(error) => wanted
            .messages
            .extend(error.request.messages.iter().copied()),
        Input::Shell(shell) => {
            wanted.texts.extend([shell.stdout, shell.stderr]);
        }
        Input::ToolResult(tool) => {
            wanted.texts.extend([tool.arguments, tool.output]);
        }
        _ => {}
    }
    // Entry kinds not listed above name their text-pool entries in fields this page shows
    // as JSON; only messages', shells' and tool results' references are resolved.
    let first = walk(&record, &wanted).map_err(|e| fail(e.to_string()))?;
    let mut messages = BTreeMap::new();
    let mut texts = BTreeMap::new();
    let mut more = Wanted::default();
    for (index, value) in first.messages {
        if let Some(body) = value.get("body") {
            if let Ok(message) =
                serde_json::from_value::<cuca_journal::format::StoredMessage>(body.clone())
            {
                for block in &message.content {
                    match block {
                        StoredBlock::ToolCall { arguments, .. } => {
                            more.texts.insert(*arguments);
                        }
                        StoredBlock::ToolResult { content, .. } => {
                            more.texts.insert(*content);
                        }
                        _ => {}
                    }
                }
                messages.insert(index, message);
            }
        }
    }
    let text_of = |value: &serde_json::Value| {
        value
            .get("text")
            .and_then(|t| t.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    for (index, value) in first.texts {
        texts.insert(index, text_of(&value));
    }
    if !more.texts.is_empty() {
        for (index, value) in walk(&record, &more).map_err(|e| fail(e.to_string()))?.texts {
            texts.insert(index, text_of(&value));
        }
    }
    Ok(EntryView {
        entry,
        messages,
        texts,
    })
}

/// The failed entries among a run's first [`cuca_journal::record::MAX_TIMELINE`] (the
/// entries its timeline lists), by seq, each with why in words: a shell command's exit status
/// other than 0 or its ending by a signal, a model call's failure class, a tool's reported
/// failure.
///
/// One more streamed pass over the record, reading the timeline's entries one at a time and
/// no pool: the summary says which kind each entry is, not whether it failed.
pub fn failures(dir: &Path, id: &str) -> Result<BTreeMap<u64, String>, ViewError> {
    let record = checked_record(dir, id)?;
    let wanted = Wanted {
        failures: true,
        ..Wanted::default()
    };
    walk(&record, &wanted)
        .map(|found| found.failures)
        .map_err(|e| ViewError::Run {
            run: id.to_owned(),
            reason: e.to_string(),
        })
}

/// The record of run `id` under `dir`, when `id` is one directory name (nothing that could
/// climb out of the runs directory) of a real directory holding a regular record file.
fn checked_record(dir: &Path, id: &str) -> Result<std::path::PathBuf, ViewError> {
    if id.is_empty() || id == "." || id == ".." || id.contains(['/', '\\', '\0']) {
        return Err(ViewError::UnknownRun { run: id.to_owned() });
    }
    record_of(&dir.join(id)).ok_or_else(|| ViewError::UnknownRun { run: id.to_owned() })
}

/// Why one entry failed, in words, or `None` when it did not.
pub(crate) fn failure_of(input: &cuca_journal::format::Input) -> Option<String> {
    use cuca_journal::format::Input;
    match input {
        Input::Shell(shell) => match shell.exit_status {
            Some(0) => None,
            Some(code) => Some(format!("exit status {code}")),
            None => Some("ended by a signal".to_owned()),
        },
        Input::Git(git) => match git.exit_status {
            Some(0) => None,
            Some(code) => Some(format!("exit status {code}")),
            None => Some("ended by a signal".to_owned()),
        },
        Input::ModelError(error) => Some(error_class_words(error.class)),
        Input::ToolResult(tool) if tool.is_error => Some("the tool reported failure".to_owned()),
        _ => None,
    }
}

/// What one pass over a record keeps.
#[derive(Debug, Default)]
struct Wanted {
    /// Whether to note the failed entries of the timeline ([`failures`]).
    failures: bool,
    entry: Option<u64>,
    messages: BTreeSet<u64>,
    texts: BTreeSet<u64>,
}

/// What one pass found.
#[derive(Debug, Default)]
struct Found {
    failures: BTreeMap<u64, String>,
    entry: Option<serde_json::Value>,
    messages: BTreeMap<u64, serde_json::Value>,
    texts: BTreeMap<u64, serde_json::Value>,
}

fn walk(record: &Path, wanted: &Wanted) -> Result<Found, serde_json::Error> {
    let file = std::fs::File::open(record).map_err(serde_json::Error::io)?;
    let reader =
        std::io::BufReader::new(flate2::read::GzDecoder::new(std::io::BufReader::new(file)));
    let mut de = serde_json::Deserializer::from_reader(reader);
    let found = TopSeed(wanted).deserialize(&mut de)?;
    Ok(found)
}

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::collections::{BTreeMap, BTreeSet};

struct TopSeed<'a>(&'a Wanted);

impl<'de> DeserializeSeed<'de> for TopSeed<'_> {
    type Value = Found;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Found, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for TopSeed<'_> {
    type Value = Found;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a journal record object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Found, A::Error> {
        let mut found = Found::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "pools" => {
                    let (messages, texts) = map.next_value_seed(PoolsSeed(self.0))?;
                    found.messages = messages;
                    found.texts = texts;
                }
                "entries" if self.0.failures => {
                    found.failures = map.next_value_seed(FailureSeed)?;
                }
                "entries" => {
                    found.entry = map
                        .next_value_seed(Pick {
                            wanted: &self.0.entry.into_iter().collect(),
                            by_seq: true,
                        })?
                        .into_values()
                        .next();
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(found)
    }
}

type Pools = (
    BTreeMap<u64, serde_json::Value>,
    BTreeMap<u64, serde_json::Value>,
);

struct PoolsSeed<'a>(&'a Wanted);

impl<'de> DeserializeSeed<'de> for PoolsSeed<'_> {
    type Value = Pools;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Pools, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for PoolsSeed<'_> {
    type Value = Pools;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the pools object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Pools, A::Error> {
        let mut pools = Pools::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "messages" => {
                    pools.0 = map.next_value_seed(Pick {
                        wanted: &self.0.messages,
                        by_seq: false,
                    })?
                }
                "texts" => {
                    pools.1 = map.next_value_seed(Pick {
                        wanted: &self.0.texts,
                        by_seq: false,
                    })?
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(pools)
    }
}

/// Keeps the array elements wanted (by position, or by their `seq` field), skipping the
/// rest without building them.
struct Pick<'a> {
    wanted: &'a BTreeSet<u64>,
    by_seq: bool,
}

impl<'de> DeserializeSeed<'de> for Pick<'_> {
    type Value = BTreeMap<u64, serde_json::Value>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Pick<'_> {
    type Value = BTreeMap<u64, serde_json::Value>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = BTreeMap::new();
        let mut position = 0u64;
        if self.by_seq {
            // Entries are in seq order, but the seq is inside each element: read each one
            // (entries are small; pool bodies are what is large).
            while let Some(value) = seq.next_element::<serde_json::Value>()? {
                let at = value.get("seq").and_then(serde_json::Value::as_u64);
                if let Some(at) = at.filter(|at| self.wanted.contains(at)) {
                    out.insert(at, value);
                }
            }
            return Ok(out);
        }
        loop {
            if self.wanted.contains(&position) {
                match seq.next_element::<serde_json::Value>()? {
                    Some(value) => out.insert(position, value),
                    None => break,
                };
            } else if seq.next_element::<IgnoredAny>()?.is_none() {
                break;
            }
            position += 1;
        }
        Ok(out)
    }
}

/// Reads the first [`cuca_journal::record::MAX_TIMELINE`] entries one at a time, keeping why
/// each failed one failed; skips the rest without building them.
struct FailureSeed;

impl<'de> DeserializeSeed<'de> for FailureSeed {
    type Value = BTreeMap<u64, String>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for FailureSeed {
    type Value = BTreeMap<u64, String>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the entries array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = BTreeMap::new();
        let mut read = 0usize;
        while read < cuca_journal::record::MAX_TIMELINE {
            // An entry of a kind this build does not know is passed over, not a failed page.
            let Some(value) = seq.next_element::<serde_json::Value>()? else {
                return Ok(out);
            };
            read += 1;
            if let Ok(entry) = serde_json::from_value::<cuca_journal::format::Entry>(value) {
                if let Some(why) = failure_of(&entry.input) {
                    out.insert(entry.seq, why);
                }
            }
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(out)
    }
}

/// Why a model call failed, in words: the class the loop branches on, then what it means.
pub(crate) fn error_class_words(class: ErrorClass) -> String {
    match class {
        ErrorClass::MissingCredential => "missing credential: no credential for the provider",
        ErrorClass::FatalStatus => {
            "fatal status: the provider answered a status the client does not retry"
        }
        ErrorClass::RetryExhaustion => {
            "retries exhausted: the client retried over its whole schedule"
        }
        ErrorClass::UnsupportedImage => "unsupported image: the model refused an image",
        ErrorClass::UnparseableResponse => "unparseable response: the answer could not be parsed",
        ErrorClass::LoopAbandoned => {
            "loop abandoned: loop detection abandoned the answer on every attempt"
        }
    }
    .to_owned()
}
