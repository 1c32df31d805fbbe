//! A line diff of two versions of a file, as a reader is shown it: hunks with context lines,
//! bounded in the work it does and the lines it answers with.

/// One line of a diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffLine {
    /// A hunk's header: `@@ -old_start,old_len +new_start,new_len @@` (1-based lines).
    Hunk {
        /// The first old line the hunk covers.
        old_start: usize,
        /// Old lines it covers.
        old_len: usize,
        /// The first new line it covers.
        new_start: usize,
        /// New lines it covers.
        new_len: usize,
    },
    /// A line both versions have.
    Context(String),
    /// A line only the old version has.
    Removed(String),
    /// A line only the new version has.
    Added(String),
}

/// What a diff may cost and say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiffLimits {
    /// Unchanged lines shown around each change (3, as `diff -u`).
    pub context: usize,
    /// The most lines the answer holds; the rest is counted in [`TextDiff::lines_left_out`].
    pub max_lines: usize,
    /// The most cells (old lines × new lines of the part that differs) the alignment
    /// compares: past it, the differing part is shown as all removed then all added, which
    /// is still a true diff, only not the shortest.
    pub max_cells: usize,
}

impl Default for DiffLimits {
    /// 3 lines of context; 2,000 lines, a long page of a browser or a terminal; 4 million
    /// cells, some 10 ms and 4 MB for two versions that differ over 2,000 lines each.
    fn default() -> Self {
        DiffLimits {
            context: 3,
            max_lines: 2_000,
            max_cells: 4_000_000,
        }
    }
}

/// A diff as [`text_diff`] answers it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TextDiff {
    /// Its lines, hunk headers first in each hunk.
    pub lines: Vec<DiffLine>,
    /// Lines of the whole diff left out by [`DiffLimits::max_lines`].
    pub lines_left_out: usize,
    /// Whether the differing part was too large to align ([`DiffLimits::max_cells`]).
    pub coarse: bool,
}

/// The line diff of `old` to `new` (text; invalid UTF-8 is replaced). Equal texts give no
/// lines. A missing side is an empty text: an added file is all added lines.
pub fn text_diff(old: &[u8], new: &[u8], limits: DiffLimits) -> TextDiff {
    let old_text = String::from_utf8_lossy(old);
    let new_text = String::from_utf8_lossy(new);
    let a: Vec<&str> = split_lines(&old_text);
    let b: Vec<&str> = split_lines(&new_text);
    let (ops, coarse) = align(&a, &b, limits.max_cells);
    let mut diff = hunks(&ops, &a, &b, limits.context);
    diff.coarse = coarse;
    if diff.lines.len() > limits.max_lines {
        diff.lines_left_out = diff.lines.len() - limits.max_lines;
        diff.lines.truncate(limits.max_lines);
    }
    diff
}

fn split_lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    text.strip_suffix('\n')
        .unwrap_or(text)
        .split('\n')
        .collect()
}

/// One step of an alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// Old line `.0` equals new line `.1`.
    Same(usize, usize),
    Remove(usize),
    Add(usize),
}

/// The steps from `a` to `b`: their common prefix and suffix kept, the part between aligned
/// by a longest common subsequence when it fits `max_cells`, else removed and added whole.
fn align(a: &[&str], b: &[&str], max_cells: usize) -> (Vec<Op>, bool) {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (a_mid, b_mid) = (prefix..a.len() - suffix, prefix..b.len() - suffix);
    let mut ops: Vec<Op> = (0..prefix).map(|i| Op::Same(i, i)).collect();
    let (n, m) = (a_mid.len(), b_mid.len());
    let coarse = n.saturating_mul(m) > max_cells;
    if coarse || n == 0 || m == 0 {
        ops.extend(a_mid.clone().map(Op::Remove));
        ops.extend(b_mid.clone().map(Op::Add));
    } else {
        // lcs[i][j]: the common subsequence's length of a_mid[i..] and b_mid[j..].
        let width = m + 1;
        let mut lcs = vec![0u32; (n + 1) * width];
        for i in (0..n).rev() {
            for j in (0..m).rev() {
                lcs[i * width + j] = if a[a_mid.start + i] == b[b_mid.start + j] {
                    lcs[(i + 1) * width + j + 1] + 1
                } else {
                    lcs[(i + 1) * width + j].max(lcs[i * width + j + 1])
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < n || j < m {
            if i < n && j < m && a[a_mid.start + i] == b[b_mid.start + j] {
                ops.push(Op::Same(a_mid.start + i, b_mid.start + j));
                i += 1;
                j += 1;
            } else if i < n && (j == m || lcs[(i + 1) * width + j] >= lcs[i * width + j + 1]) {
                // Removals before additions where either keeps the alignment, as `diff -u`.
                ops.push(Op::Remove(a_mid.start + i));
                i += 1;
            } else {
                ops.push(Op::Add(b_mid.start + j));
                j += 1;
            }
        }
    }
    let (a_end, b_end) = (a.len() - suffix, b.len() - suffix);
    ops.extend((0..suffix).map(|k| Op::Same(a_end + k, b_end + k)));
    (ops, coarse)
}

/// The steps grouped into hunks of changes with `context` unchanged lines around each.
fn hunks(ops: &[Op], a: &[&str], b: &[&str], context: usize) -> TextDiff {
    let changed: Vec<usize> = ops
        .iter()
        .enumerate()
        .filter(|(_, op)| !matches!(op, Op::Same(..)))
        .map(|(k, _)| k)
        .collect();
    let mut diff = TextDiff::default();
    let mut k = 0;
    while k < changed.len() {
        // A hunk runs from the change's context to the last change whose context touches it.
        let start = changed[k].saturating_sub(context);
        let mut end = changed[k];
        while k < changed.len() && changed[k] <= end + 2 * context + 1 {
            end = changed[k];
            k += 1;
        }
        let end = (end + context + 1).min(ops.len());
        let slice = &ops[start..end];
        let old_start = slice.iter().find_map(|op| match op {
            Op::Same(i, _) | Op::Remove(i) => Some(*i),
            Op::Add(_) => None,
        });
        let new_start = slice.iter().find_map(|op| match op {
            Op::Same(_, j) | Op::Add(j) => Some(*j),
            Op::Remove(_) => None,
        });
        let old_len = slice.iter().filter(|op| !matches!(op, Op::Add(_))).count();
        let new_len = slice
            .iter()
            .filter(|op| !matches!(op, Op::Remove(_)))
            .count();
        // As `diff -u` numbers an empty side: the line before it.
        let number =
            |start: Option<usize>, len: usize| start.map_or(0, |s| s + usize::from(len > 0));
        diff.lines.push(DiffLine::Hunk {
            old_start: number(old_start, old_len),
            old_len,
            new_start: number(new_start, new_len),
            new_len,
        });
        for op in slice {
            diff.lines.push(match *op {
                Op::Same(i, _) => DiffLine::Context(a[i].to_owned()),
                Op::Remove(i) => DiffLine::Removed(a[i].to_owned()),
                Op::Add(j) => DiffLine::Added(b[j].to_owned()),
            });
        }
    }
    diff
}

impl std::fmt::Display for DiffLine {
    /// The line as `diff -u` writes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DiffLine::Hunk {
                old_start,
                old_len,
                new_start,
                new_len,
            } => write!(f, "@@ -{old_start},{old_len} +{new_start},{new_len} @@"),
            DiffLine::Context(line) => write!(f, " {line}"),
            DiffLine::Removed(line) => write!(f, "-{line}"),
            DiffLine::Added(line) => write!(f, "+{line}"),
        }
    }
}

/// What changed in one file between two snapshots ([`file_diff`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileDiff {
    /// Both sides are text (or absent): their line diff.
    Text(TextDiff),
    /// One side is binary ([`crate::is_binary`]): sizes only.
    Binary {
        /// The old side's bytes (0 when absent).
        old_bytes: u64,
        /// The new side's bytes (0 when absent).
        new_bytes: u64,
    },
}

/// The diff of `path` from the snapshot `old` (none: the file is new) to the snapshot `new`
/// (none: the file is gone), read from `store`. A side the snapshot has no file for is empty.
pub fn file_diff(
    store: &dyn crate::ObjectStore,
    old: Option<&crate::ObjectId>,
    new: Option<&crate::ObjectId>,
    path: &str,
    limits: DiffLimits,
) -> Result<FileDiff, crate::WorkspaceError> {
    let side = |root: Option<&crate::ObjectId>| -> Result<Vec<u8>, crate::WorkspaceError> {
        let Some(root) = root else {
            return Ok(Vec::new());
        };
        match crate::find_file(store, root, path)? {
            Some(entry) => crate::get_object(store, &entry.id),
            None => Ok(Vec::new()),
        }
    };
    let (old_bytes, new_bytes) = (side(old)?, side(new)?);
    if crate::is_binary(&old_bytes) || crate::is_binary(&new_bytes) {
        return Ok(FileDiff::Binary {
            old_bytes: old_bytes.len() as u64,
            new_bytes: new_bytes.len() as u64,
        });
    }
    Ok(FileDiff::Text(text_diff(&old_bytes, &new_bytes, limits)))
}
