//! Reading an assembled record (`replay.json.gz`) back as a summary, streaming.
//!
//! This is what `cuca journal show` prints: the identity, the outcome, the agent table, the pool
//! sizes and the entries by kind. The record is read element by element straight out of the gzip
//! stream, so a summary of a record of any size costs one array element plus the agent table.
//!
//! "Format 1 is the one format this build reads, and every other value is refused ...
//! formatVersion is required: a record that states no format at all is malformed and does not
//! parse."
//!
//! What this module does not do: it does not rebuild windows or resolve pool references (a
//! summary counts what the record holds; it does not replay it), and it never writes.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

mod clip_strings;

use clip_strings::ClipStrings;

use crate::assemble::Outcome;
use crate::format::{AgentRow, Entry, RecorderBuild, Seed, FORMAT_VERSION};

/// How many bytes of any one string a summary keeps (the first ones, then `…`).
///
/// A summary is for showing: 64 KiB is more of a prompt or a name than a terminal shows, and it
/// bounds what reading a record costs — serde_json holds each string it parses whole, and a
/// record with a 1 GiB field cost `cuca journal show` 2.1 GB before strings were clipped.
pub const SUMMARY_STRING_BYTES: usize = 64 * 1024;

/// What a record holds, counted while streaming through it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RecordSummary {
    /// The record's format; always [`FORMAT_VERSION`] (any other value does not parse).
    pub format_version: u32,
    /// The session the record belongs to.
    pub session_id: String,
    /// The run's routing key, when the journal carried one.
    pub routing_key: Option<String>,
    /// The build that recorded the session (explanatory only).
    pub recorder: RecorderBuild,
    /// How capture ended.
    pub outcome: Outcome,
    /// The seed, when the journal carried one.
    pub seed: Option<Seed>,
    /// The agent table, in creation order.
    pub agents: Vec<AgentRow>,
    /// Message-pool entries.
    pub n_messages: u64,
    /// Toolset-pool entries.
    pub n_toolsets: u64,
    /// Text-pool entries.
    pub n_texts: u64,
    /// Clip-table rows.
    pub n_clips: u64,
    /// Entries in the input log.
    pub n_entries: u64,
    /// Entries by kind (`model_io`, `clock`, …).
    pub entries_by_kind: BTreeMap<String, u64>,
    /// The seq of the last entry, when there is one.
    pub last_seq: Option<u64>,
    /// The input log's first [`MAX_TIMELINE`] entries in order: which agent consumed which
    /// kind of input, for a timeline (the count above covers every entry).
    pub timeline: Vec<TimelineEntry>,
}

/// How many entries [`RecordSummary::timeline`] keeps: enough for a page, bounded whatever
/// the run's length.
pub const MAX_TIMELINE: usize = 1000;

/// One input of the timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineEntry {
    /// The entry's global seq.
    pub seq: u64,
    /// The agent that consumed it.
    pub agent: String,
    /// Its kind (`model_io`, `shell`, …).
    pub kind: &'static str,
}

/// Why a record could not be read.
///
/// Defined here rather than in the crate's `error.rs`, which belongs to the capture side.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The record file could not be opened.
    #[error("open {path}: {source}")]
    Io {
        /// The record.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The record states a format other than 1.
    #[error("record {path} is in format {found}; this build reads format 1 only")]
    UnsupportedFormat {
        /// The record.
        path: PathBuf,
        /// The `formatVersion` as written (JSON).
        found: String,
    },
    /// The record is not gzip, not JSON, or not shaped like a format-1 record (a record with
    /// no `formatVersion` at all included).
    #[error("record {path} is malformed: {source}")]
    Malformed {
        /// The record.
        path: PathBuf,
        /// Where and why the parse failed.
        #[source]
        source: serde_json::Error,
    },
}

/// Reads the summary of the gzipped record at `path`, streaming.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::io::Write;
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("replay.json.gz");
/// let mut gz = flate2::write::GzEncoder::new(std::fs::File::create(&path)?, Default::default());
/// gz.write_all(br#"{"formatVersion":2,"sessionId":"s"}"#)?;
/// gz.finish()?;
/// // A record in another format does not parse, whatever it holds.
/// let err = cuca_journal::record::read_record(&path).unwrap_err();
/// assert!(matches!(err, cuca_journal::record::RecordError::UnsupportedFormat { .. }));
/// # Ok(()) }
/// ```
pub fn read_record(path: &Path) -> Result<RecordSummary, RecordError> {
    let file = File::open(path).map_err(|source| RecordError::Io {
        path: path.to_owned(),
        source,
    })?;
    read_record_from(GzDecoder::new(BufReader::new(file)), path)
}

/// Reads the summary of a record from its decoded JSON bytes; `path` only names it in errors.
///
/// Every string is clipped to its first [`SUMMARY_STRING_BYTES`] bytes (ending in `…`) before
/// it is parsed, so the memory a summary costs is bounded whatever a field holds.
pub fn read_record_from(reader: impl Read, path: &Path) -> Result<RecordSummary, RecordError> {
    let bad_format = RefCell::new(None);
    let clipped = ClipStrings::new(BufReader::new(reader), SUMMARY_STRING_BYTES);
    let mut de = serde_json::Deserializer::from_reader(clipped);
    let parsed = SummarySeed {
        bad_format: &bad_format,
    }
    .deserialize(&mut de)
    .and_then(|summary| de.end().map(|()| summary));
    if let Some(found) = bad_format.into_inner() {
        return Err(RecordError::UnsupportedFormat {
            path: path.to_owned(),
            found,
        });
    }
    parsed.map_err(|source| RecordError::Malformed {
        path: path.to_owned(),
        source,
    })
}

/// The streaming reader of the top-level object. `bad_format` receives the stated format when
/// it is not 1, so the caller can tell a refusal from a malformed record.
struct SummarySeed<'a> {
    bad_format: &'a RefCell<Option<String>>,
}

impl<'de> DeserializeSeed<'de> for SummarySeed<'_> {
    type Value = RecordSummary;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for SummarySeed<'_> {
    type Value = RecordSummary;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a session record object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error;
        let mut format_version = None;
        let mut session_id = None;
        let mut routing_key = None;
        let mut recorder = None;
        let mut outcome = None;
        let mut seed = None;
        let mut agents = None;
        let mut pools = PoolCounts::default();
        let mut n_clips = 0;
        let mut entries = EntryCounts::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "formatVersion" => {
                    let value: serde_json::Value = map.next_value()?;
                    if value.as_u64() != Some(u64::from(FORMAT_VERSION)) {
                        // Stop at once: nothing after this key can be read as format 1.
                        *self.bad_format.borrow_mut() = Some(value.to_string());
                        return Err(A::Error::custom(format!("format {value} is not 1")));
                    }
                    format_version = Some(FORMAT_VERSION);
                }
                "sessionId" => session_id = Some(map.next_value::<String>()?),
                "routingKey" => routing_key = map.next_value::<Option<String>>()?,
                "recorder" => recorder = Some(map.next_value::<RecorderBuild>()?),
                "outcome" => outcome = Some(map.next_value::<Outcome>()?),
                "seed" => seed = map.next_value::<Option<Seed>>()?,
                "agents" => agents = Some(map.next_value::<Vec<AgentRow>>()?),
                "pools" => pools = map.next_value_seed(PoolsSeed)?,
                "clips" => n_clips = map.next_value_seed(CountSeed)?,
                "entries" => entries = map.next_value_seed(EntriesSeed)?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        // "formatVersion is required: a record that states no format at all is malformed and
        // does not parse." Malformed, not another format: it states none.
        let Some(format_version) = format_version else {
            return Err(A::Error::missing_field("formatVersion"));
        };
        Ok(RecordSummary {
            format_version,
            session_id: session_id.ok_or_else(|| A::Error::missing_field("sessionId"))?,
            routing_key,
            recorder: recorder.ok_or_else(|| A::Error::missing_field("recorder"))?,
            outcome: outcome.ok_or_else(|| A::Error::missing_field("outcome"))?,
            seed,
            agents: agents.unwrap_or_default(),
            n_messages: pools.messages,
            n_toolsets: pools.toolsets,
            n_texts: pools.texts,
            n_clips,
            n_entries: entries.n_entries,
            entries_by_kind: entries.by_kind,
            last_seq: entries.last_seq,
            timeline: entries.timeline,
        })
    }
}

/// Counts the elements of an array without keeping any of them.
struct CountSeed;

impl<'de> DeserializeSeed<'de> for CountSeed {
    type Value = u64;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<u64, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for CountSeed {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<u64, A::Error> {
        let mut n = 0;
        while seq.next_element::<IgnoredAny>()?.is_some() {
            n += 1;
        }
        Ok(n)
    }
}

/// The three pool sizes.
#[derive(Default)]
struct PoolCounts {
    messages: u64,
    toolsets: u64,
    texts: u64,
}

/// Reads the `pools` object, counting each pool.
struct PoolsSeed;

impl<'de> DeserializeSeed<'de> for PoolsSeed {
    type Value = PoolCounts;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<PoolCounts, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for PoolsSeed {
    type Value = PoolCounts;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the pools object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PoolCounts, A::Error> {
        let mut counts = PoolCounts::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "messages" => counts.messages = map.next_value_seed(CountSeed)?,
                "toolsets" => counts.toolsets = map.next_value_seed(CountSeed)?,
                "texts" => counts.texts = map.next_value_seed(CountSeed)?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(counts)
    }
}

/// The input log's tallies.
#[derive(Default)]
struct EntryCounts {
    n_entries: u64,
    by_kind: BTreeMap<String, u64>,
    last_seq: Option<u64>,
    timeline: Vec<TimelineEntry>,
}

/// Reads the `entries` array one typed entry at a time: an entry of a kind format 1 does not
/// have does not parse.
struct EntriesSeed;

impl<'de> DeserializeSeed<'de> for EntriesSeed {
    type Value = EntryCounts;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<EntryCounts, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EntriesSeed {
    type Value = EntryCounts;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the entries array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<EntryCounts, A::Error> {
        let mut counts = EntryCounts::default();
        while let Some(entry) = seq.next_element::<Entry>()? {
            counts.n_entries += 1;
            counts.last_seq = Some(entry.seq);
            let kind = entry.input.kind();
            if counts.timeline.len() < MAX_TIMELINE {
                counts.timeline.push(TimelineEntry {
                    seq: entry.seq,
                    agent: entry.agent,
                    kind,
                });
            }
            match counts.by_kind.get_mut(kind) {
                Some(n) => *n += 1,
                None => {
                    counts.by_kind.insert(kind.to_owned(), 1);
                }
            }
        }
        Ok(counts)
    }
}

#[cfg(test)]
mod tests;
