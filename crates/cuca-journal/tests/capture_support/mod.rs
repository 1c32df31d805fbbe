//! Shared helpers of the capture tests: read a journal back and check its structural laws.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;

use cuca_journal::format::{Input, JournalLine, PooledRequest, StoredBlock};

/// Every line of the journal at `path`, parsed.
pub(crate) fn read_journal(path: &Path) -> Vec<JournalLine> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.is_empty() || text.ends_with('\n'), "a torn last line");
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// The entries, in file order.
pub(crate) fn entries(lines: &[JournalLine]) -> Vec<&cuca_journal::format::Entry> {
    lines
        .iter()
        .filter_map(|l| match l {
            JournalLine::Entry(e) => Some(e),
            _ => None,
        })
        .collect()
}

/// The terminating line, if there is one (and it is last).
pub(crate) fn end(lines: &[JournalLine]) -> Option<cuca_journal::format::End> {
    match lines.last() {
        Some(JournalLine::End(end)) => Some(*end),
        _ => None,
    }
}

/// (messages, toolsets, texts, clips) line counts.
pub(crate) fn pool_counts(lines: &[JournalLine]) -> (usize, usize, usize, usize) {
    let mut counts = (0, 0, 0, 0);
    for line in lines {
        match line {
            JournalLine::Message(_) => counts.0 += 1,
            JournalLine::Toolset(_) => counts.1 += 1,
            JournalLine::Text(_) => counts.2 += 1,
            JournalLine::Clip(_) => counts.3 += 1,
            _ => {}
        }
    }
    counts
}

/// The text of text-pool entry `index`.
pub(crate) fn text_at(lines: &[JournalLine], index: u64) -> String {
    lines
        .iter()
        .find_map(|l| match l {
            JournalLine::Text(t) if t.index == index => Some(t.text.clone()),
            _ => None,
        })
        .unwrap()
}

fn request_refs(request: &PooledRequest, messages: &mut Vec<u64>, toolsets: &mut Vec<u64>) {
    messages.extend(&request.messages);
    toolsets.extend(request.toolset);
}

/// The laws every journal obeys: a header first; each pool's indices contiguous from 0 in file
/// order; every reference to a pool entry written before it; seq 0, 1, 2, … in file order; a
/// clip row right after the entry it describes; and, when present, an end whose count is the
/// number of entries.
pub(crate) fn check_laws(lines: &[JournalLine]) {
    assert!(
        matches!(lines.first(), Some(JournalLine::Header(h)) if h.format_version == 1),
        "the header is first"
    );
    let (mut n_messages, mut n_toolsets, mut n_texts) = (0u64, 0u64, 0u64);
    let mut n_entries = 0u64;
    let mut previous: Option<&JournalLine> = None;
    for (at, line) in lines.iter().enumerate() {
        match line {
            JournalLine::Header(_) => assert_eq!(at, 0, "one header, first"),
            JournalLine::Message(m) => {
                assert_eq!(m.index, n_messages, "message pool contiguous");
                for block in &m.body.content {
                    match block {
                        StoredBlock::ToolCall { arguments, .. } => assert!(*arguments < n_texts),
                        StoredBlock::ToolResult { content, .. } => assert!(*content < n_texts),
                        _ => {}
                    }
                }
                n_messages += 1;
            }
            JournalLine::Toolset(t) => {
                assert_eq!(t.index, n_toolsets, "toolset pool contiguous");
                n_toolsets += 1;
            }
            JournalLine::Text(t) => {
                assert_eq!(t.index, n_texts, "text pool contiguous");
                n_texts += 1;
            }
            JournalLine::Clip(c) => match previous {
                Some(JournalLine::Text(t)) => {
                    assert_eq!(t.index, c.index);
                    assert_eq!(t.id, c.original_id);
                    assert!(c.original_bytes > t.text.len() as u64);
                }
                other => panic!("a clip row after {other:?}"),
            },
            JournalLine::Entry(e) => {
                assert_eq!(e.seq, n_entries, "seq minted in file order without gaps");
                let (mut messages, mut toolsets, mut texts) = (Vec::new(), Vec::new(), Vec::new());
                match &e.input {
                    Input::ModelIo(io) => {
                        request_refs(&io.request, &mut messages, &mut toolsets);
                        messages.push(io.response.message);
                    }
                    Input::ModelError(err) => {
                        request_refs(&err.request, &mut messages, &mut toolsets)
                    }
                    Input::ToolResult(t) => texts.extend([t.arguments, t.output]),
                    Input::PromptFrame(f) => messages.extend(f.items.iter().map(|i| i.message)),
                    Input::Shell(s) => texts.extend([s.stdout, s.stderr]),
                    Input::Git(g) => texts.extend([g.stdout, g.stderr]),
                    Input::CancelProbe(_) | Input::Clock(_) => {}
                }
                assert!(messages.iter().all(|&m| m < n_messages), "{e:?}");
                assert!(toolsets.iter().all(|&t| t < n_toolsets), "{e:?}");
                assert!(texts.iter().all(|&t| t < n_texts), "{e:?}");
                n_entries += 1;
            }
            JournalLine::End(end) => {
                assert_eq!(at, lines.len() - 1, "the end is last");
                assert_eq!(end.entries, n_entries, "the end counts the entries");
            }
            JournalLine::Seed(_) | JournalLine::Agent(_) => {}
        }
        previous = Some(line);
    }
}
