//! The fuzz targets: each takes arbitrary bytes, runs one reader over them, checks what must
//! hold whatever the bytes, and returns a small summary a test can assert on.
//!
//! They are plain functions so the same code runs under cargo-fuzz (`fuzz/fuzz_targets/`),
//! under the stable-toolchain harness (`cuca-fuzz-harness`, what `cargo xtask fuzz` falls back
//! to) and in `tests/fuzz.rs` over the committed corpus. A target "fails" by panicking: that is
//! what every fuzzer detects. The properties checked beyond "no panic":
//!
//! * `.cslog`: the in-memory scan, the streaming scan fed in odd-sized pieces and the file
//!   scan agree; the report's length is the input's; a load succeeds exactly when the verdict
//!   is not refused.
//! * SSE: splitting the bytes into chunks anywhere does not change the events or the blocks.
//! * journal: a line that parses re-serializes and parses to the same value; assembly of any
//!   bytes returns a report or an error, never a panic, and leaves the journal as it was.
//! * call log: `read_rows` keeps exactly the complete lines that parse, and a torn tail is
//!   never parsed.
// A fuzz target's whole job is to panic when an invariant breaks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::path::{Path, PathBuf};

use cuca_client::{ChatStreamDecoder, SseDecoder};
use cuca_journal::assemble::{assemble_journal, AssembleOptions};
use cuca_journal::format::JournalLine;
use cuca_store_file::{scan, scan_bytes, scan_reader, Verdict};

/// A scratch directory the disk-based targets reuse across inputs.
#[derive(Debug)]
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    /// A fresh scratch directory under the system temp dir.
    pub fn new() -> std::io::Result<Self> {
        Ok(Scratch {
            dir: tempfile::Builder::new().prefix("cuca-fuzz-").tempdir()?,
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }
}

/// A reader that hands out its bytes in pieces of 1 to 13 bytes, so a streaming reader meets
/// every chunk boundary a real read could give it.
struct Trickle<'a> {
    bytes: &'a [u8],
    step: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.step = self.step % 13 + 1;
        let n = self.step.min(buf.len()).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

/// What the `.cslog` target found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CslogSummary {
    /// Records decoded.
    pub n_records: usize,
    /// Frames skipped.
    pub n_skipped: usize,
    /// Whether a load would succeed.
    pub loadable: bool,
}

/// The `.cslog` reader over arbitrary bytes (in memory and streamed).
pub fn cslog_reader(data: &[u8]) -> CslogSummary {
    let path = Path::new("fuzz.cslog");
    let whole = scan_bytes(data, path);
    let streamed = scan_reader(
        Trickle {
            bytes: data,
            step: data.first().copied().unwrap_or(0) as usize,
        },
        path,
    )
    .unwrap();
    assert_eq!(
        whole, streamed,
        "the chunked scan disagrees with the in-memory scan"
    );
    assert_eq!(whole.file_len, data.len() as u64);
    let loadable = whole.is_loadable();
    assert_eq!(loadable, !matches!(whole.verdict, Verdict::Refused { .. }));
    let summary = CslogSummary {
        n_records: whole.records.len(),
        n_skipped: whole.skipped.len(),
        loadable,
    };
    assert_eq!(whole.into_records().is_ok(), loadable);
    summary
}

/// The `.cslog` reader over a real file, the way `FileBackend` and `cuca verify` read it.
pub fn cslog_file(scratch: &Scratch, data: &[u8]) -> CslogSummary {
    let path = scratch.file("fuzz.cslog", data);
    let report = scan(&path).unwrap();
    let in_memory = scan_bytes(data, &path);
    assert_eq!(
        report, in_memory,
        "the file scan disagrees with the in-memory scan"
    );
    CslogSummary {
        n_records: report.records.len(),
        n_skipped: report.skipped.len(),
        loadable: report.is_loadable(),
    }
}

/// What the SSE target found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseSummary {
    /// Events the raw SSE decoder dispatched.
    pub n_events: usize,
    /// Blocks the chat-stream decoder produced.
    pub n_blocks: usize,
    /// Whether the chat-stream decoder accepted the whole stream.
    pub accepted: bool,
}

fn sse_events(chunks: &[&[u8]]) -> Result<Vec<(String, String)>, String> {
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    let mut push = |event: cuca_client::SseEvent<'_>| {
        events.push((event.event.to_owned(), event.data.to_owned()));
        Ok(())
    };
    for chunk in chunks {
        decoder.feed(chunk, &mut push).map_err(|e| e.to_string())?;
    }
    decoder.finish(&mut push).map_err(|e| e.to_string())?;
    Ok(events)
}

fn chat_blocks(chunks: &[&[u8]]) -> (Vec<cuca_events::MessageContentBlock>, Result<(), String>) {
    let mut decoder = ChatStreamDecoder::new();
    let mut blocks = Vec::new();
    for chunk in chunks {
        if let Err(error) = decoder.feed(chunk, &mut blocks) {
            return (blocks, Err(error.to_string()));
        }
    }
    let finished = decoder
        .finish(&mut blocks)
        .map(|_| ())
        .map_err(|e| e.to_string());
    (blocks, finished)
}

/// Splits `data` into chunks whose sizes the data's own first bytes choose.
fn chunks(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    let mut i = 0;
    while !rest.is_empty() {
        let size = (data.get(i).copied().unwrap_or(7) as usize % 17 + 1).min(rest.len());
        out.push(&rest[..size]);
        rest = &rest[size..];
        i += 1;
    }
    out
}

/// The SSE decoder and the chat-stream decoder over arbitrary bytes, whole and in chunks.
pub fn sse_decoder(data: &[u8]) -> SseSummary {
    let pieces = chunks(data);
    let whole = sse_events(&[data]);
    let split = sse_events(&pieces);
    assert_eq!(whole, split, "chunking changed the SSE events");
    let (blocks_whole, done_whole) = chat_blocks(&[data]);
    let (blocks_split, done_split) = chat_blocks(&pieces);
    assert_eq!(
        done_whole.is_ok(),
        done_split.is_ok(),
        "chunking changed whether the stream is accepted: {done_whole:?} vs {done_split:?}"
    );
    if done_whole.is_ok() {
        assert_eq!(blocks_whole, blocks_split, "chunking changed the blocks");
    }
    SseSummary {
        n_events: whole.map_or(0, |events| events.len()),
        n_blocks: blocks_whole.len(),
        accepted: done_whole.is_ok(),
    }
}

/// What the journal target found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalSummary {
    /// Lines that parsed as journal lines.
    pub n_lines_parsed: usize,
    /// The assembly outcome's kind, or `None` when assembly refused the journal.
    pub outcome: Option<&'static str>,
}

/// The journal line parser over every line of `data`, then assembly of `data` as a journal.
pub fn journal(scratch: &Scratch, data: &[u8]) -> JournalSummary {
    let mut n_lines_parsed = 0;
    for line in data.split(|&b| b == b'\n') {
        if let Ok(parsed) = serde_json::from_slice::<JournalLine>(line) {
            n_lines_parsed += 1;
            let again = serde_json::to_vec(&parsed).unwrap();
            let reparsed: JournalLine = serde_json::from_slice(&again).unwrap();
            assert_eq!(parsed, reparsed, "a journal line does not round-trip");
        }
    }
    let path = scratch.file("replay.ndjson", data);
    let run_dir = scratch.path().join("run");
    let options = AssembleOptions {
        // Small enough that an input over it reaches the over-long-line path.
        max_line_bytes: 64 * 1024,
        compression_level: 0,
        ..AssembleOptions::default()
    };
    let outcome = assemble_journal(&path, &run_dir, &options)
        .ok()
        .map(|report| report.outcome.kind());
    assert_eq!(
        std::fs::read(&path).unwrap(),
        data,
        "assembly changed the journal"
    );
    JournalSummary {
        n_lines_parsed,
        outcome,
    }
}

/// What the call-log target found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLogSummary {
    /// Rows read.
    pub n_rows: usize,
    /// Complete lines skipped.
    pub n_skipped: usize,
    /// Whether the last line was torn.
    pub torn: bool,
}

/// The call-log reader over arbitrary bytes.
pub fn calllog_reader(scratch: &Scratch, data: &[u8]) -> CallLogSummary {
    let path = scratch.file("calls.jsonl", data);
    let report = cuca_calllog::read_rows(&path).unwrap();
    // The rows are exactly the complete, non-blank lines that parse on their own.
    let complete = match data.iter().rposition(|&b| b == b'\n') {
        Some(last) => &data[..=last],
        None => &[][..],
    };
    let expected: Vec<cuca_calllog::Record> = complete
        .split(|&b| b == b'\n')
        .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
        .filter_map(|line| serde_json::from_slice(line).ok())
        .collect();
    assert_eq!(
        report.rows, expected,
        "read_rows kept other rows than the lines that parse"
    );
    let torn = report.torn_tail.is_some();
    assert_eq!(torn, complete.len() < data.len(), "torn tail misreported");
    CallLogSummary {
        n_rows: report.rows.len(),
        n_skipped: report.skipped.len(),
        torn,
    }
}

/// The fuzz targets by name, as `cargo xtask fuzz`, cargo-fuzz and the harness call them.
pub const TARGETS: [&str; 4] = ["cslog_reader", "sse_decoder", "journal", "calllog_reader"];

/// Runs target `name` over `data`; `false` for an unknown name.
pub fn run(name: &str, scratch: &Scratch, data: &[u8]) -> bool {
    match name {
        "cslog_reader" => {
            cslog_reader(data);
        }
        "sse_decoder" => {
            sse_decoder(data);
        }
        "journal" => {
            journal(scratch, data);
        }
        "calllog_reader" => {
            calllog_reader(scratch, data);
        }
        _ => return false,
    }
    true
}

/// Well-formed inputs a fuzzer starts from: real files the writers make (and, for the
/// `.cslog` reader, the damaged corpus), so mutation starts where the interesting code is.
pub fn seeds(name: &str, scratch: &Scratch) -> Vec<Vec<u8>> {
    match name {
        "cslog_reader" => crate::corpus::cases()
            .into_iter()
            .map(|case| case.bytes)
            .collect(),
        "sse_decoder" => vec![
            SSE_BASIC.to_vec(),
            SSE_REASONING.to_vec(),
            SSE_TOOL_CALL.to_vec(),
            b"event: ping\r\ndata: x\r\n\r\n: comment\n\ndata: [DONE]\n\n".to_vec(),
        ],
        "journal" => vec![journal_seed(scratch)],
        "calllog_reader" => vec![calllog_seed(scratch)],
        _ => Vec::new(),
    }
}

const SSE_BASIC: &[u8] = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"no\"}}]}\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ted\"}}]}\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":2,\"total_tokens\":14}}\n\n\
data: [DONE]\n\n";

const SSE_REASONING: &[u8] = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"hmm\"}}]}\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}],\"timings\":{\"prompt_n\":3,\"predicted_n\":2}}\n\n\
data: [DONE]\n\n";

const SSE_TOOL_CALL: &[u8] = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"ls\",\"arguments\":\"{\\\"pa\"}}]}}]}\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"th\\\":\\\".\\\"}\"}}]}}]}\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n\
data: [DONE]\n\n";

fn journal_seed(scratch: &Scratch) -> Vec<u8> {
    use cuca_events::{Message, MessageContentBlock, UnifiedRequest, UnifiedResponse};
    let workspace = scratch.path().join("seed-workspace");
    let _ = std::fs::remove_dir_all(&workspace);
    let config = cuca_journal::RecorderConfig::new(&workspace, "seed").unwrap();
    let recorder = cuca_journal::Recorder::start(config).unwrap();
    let request = UnifiedRequest::new(vec![Message::system("be terse"), Message::user("hello")]);
    let response = UnifiedResponse {
        content: vec![MessageContentBlock::text("hi")],
        ..Default::default()
    };
    recorder.model_io(
        "root",
        &request,
        cuca_journal::format::RequestRole::AgentTurn,
        &response,
        std::time::Duration::from_millis(5),
    );
    recorder.tool_result(
        "root",
        &cuca_journal::ToolOutcome {
            call_id: "call_1",
            name: "shell",
            arguments: "{\"cmd\":\"ls\"}",
            output: "a\nb\n",
            is_error: false,
        },
    );
    recorder.clock("root", std::time::Duration::from_secs(3), None);
    recorder.finish();
    std::fs::read(recorder.path()).unwrap()
}

fn calllog_seed(scratch: &Scratch) -> Vec<u8> {
    let path = scratch.path().join("seed-calls.jsonl");
    let _ = std::fs::remove_file(&path);
    let log = cuca_calllog::CallLog::builder()
        .path(Some(path.clone()))
        .build();
    let call = log.start(cuca_calllog::Record {
        run: "seed".into(),
        model: "qwen3".into(),
        messages: 2,
        ..Default::default()
    });
    call.finish(cuca_calllog::Record {
        status: 200,
        prompt_tokens: 31,
        completion_tokens: 4,
        ..Default::default()
    });
    log.close();
    std::fs::read(&path).unwrap()
}
