//! Binary detection and line counts of a file's change.

use std::collections::HashMap;

/// How much of a file is looked at for a NUL byte: git's own heuristic looks at the first
/// 8000 bytes, and agreeing with it keeps `git diff --stat` and cuca's counts alike.
const SNIFF_BYTES: usize = 8000;

/// Whether `bytes` are binary: a NUL in the first 8000 bytes, or not UTF-8.
pub fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(SNIFF_BYTES)].contains(&0) || std::str::from_utf8(bytes).is_err()
}

/// The lines of `bytes` (a last line without a newline counts).
fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let trimmed = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let empty = bytes.is_empty();
    trimmed.split(|b| *b == b'\n').filter(move |_| !empty)
}

/// Lines added and removed going from `old` to `new`: each line counted as often as it
/// occurs more on one side than on the other. That is a diff's count for every edit that
/// does not move lines around (a moved line counts nothing here, one added and one removed
/// in a diff), got in linear time with no diff algorithm's worst case.
pub fn line_changes(old: &[u8], new: &[u8]) -> (u64, u64) {
    let mut balance: HashMap<&[u8], i64> = HashMap::new();
    for line in lines(new) {
        *balance.entry(line).or_default() += 1;
    }
    for line in lines(old) {
        *balance.entry(line).or_default() -= 1;
    }
    let (mut added, mut removed) = (0u64, 0u64);
    for n in balance.values() {
        if *n > 0 {
            added += n.unsigned_abs();
        } else {
            removed += n.unsigned_abs();
        }
    }
    (added, removed)
}
