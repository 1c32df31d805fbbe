//! Reading a call log back: rows, a torn last line, and lines that do not parse.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use crate::{Error, Record};

/// What [`read_rows`] found in one file.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ReadReport {
    /// Every complete line that parsed, in file order.
    pub rows: Vec<Record>,
    /// The unterminated last line, if the file ends without `\n`: a row torn by a crash
    /// mid-write. It is never parsed, because a prefix of a row can parse into a different,
    /// shorter row.
    pub torn_tail: Option<TornTail>,
    /// Complete lines that did not parse as a row, such as a torn row a later writer sealed
    /// with a newline.
    pub skipped: Vec<SkippedLine>,
}

/// The unterminated bytes at the end of a call log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TornTail {
    /// Byte offset where the torn line starts.
    pub offset: u64,
    /// How many bytes it holds.
    pub len: u64,
}

/// A complete line that is not a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedLine {
    /// 1-based line number.
    pub line: u64,
    /// Byte offset where the line starts.
    pub offset: u64,
    /// Why it was skipped, in the JSON parser's words.
    pub reason: String,
}

/// Reads every row of the call log at `path`, streaming it line by line.
///
/// A torn last line and unparseable lines are skipped and reported, never an error: a reader
/// of a log other processes may be writing must get every complete row. Blank lines are
/// ignored. The error is only for a file that cannot be read at all (missing, a directory).
pub fn read_rows(path: impl AsRef<Path>) -> Result<ReadReport, Error> {
    let path = path.as_ref();
    let read_error = |source| Error::Read {
        path: PathBuf::from(path),
        source,
    };
    let file = File::open(path).map_err(read_error)?;
    let mut reader = BufReader::new(file);
    let mut report = ReadReport::default();
    let mut line = Vec::new();
    let mut offset = 0u64;
    let mut line_no = 0u64;
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(read_error)?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let start = offset;
        offset += n as u64;
        if line.last() != Some(&b'\n') {
            report.torn_tail = Some(TornTail {
                offset: start,
                len: n as u64,
            });
            break;
        }
        let body = &line[..line.len() - 1];
        if body.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Record>(body) {
            Ok(record) => report.rows.push(record),
            Err(error) => report.skipped.push(SkippedLine {
                line: line_no,
                offset: start,
                reason: error.to_string(),
            }),
        }
    }
    Ok(report)
}

/// The start rows with no end row beside them (no later row with the same id and no phase):
/// calls still in flight, or calls a crashed process never closed.
pub fn in_flight(rows: &[Record]) -> Vec<&Record> {
    let ended: HashSet<&str> = rows
        .iter()
        .filter(|row| !row.is_start() && !row.id.is_empty())
        .map(|row| row.id.as_str())
        .collect();
    rows.iter()
        .filter(|row| row.is_start() && !ended.contains(row.id.as_str()))
        .collect()
}

/// Calls per run: the start rows carrying each run id, the same count
/// [`CallLog::calls_for`](crate::CallLog::calls_for) keeps in memory. Rows with no run id
/// are counted under `""`.
pub fn calls_per_run(rows: &[Record]) -> BTreeMap<&str, u64> {
    let mut counts = BTreeMap::new();
    for row in rows.iter().filter(|row| row.is_start()) {
        *counts.entry(row.run.as_str()).or_insert(0) += 1;
    }
    counts
}
