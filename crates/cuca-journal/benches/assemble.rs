//! Host assembly throughput, against a plain gzip of the same journal, and the peak resident set
//! of assembling a journal of a gibibyte or more.
//!
//! `cargo bench -p cuca-journal --bench assemble -- --warm-up-time 1 --measurement-time 3`
//! measures MB/s of journal assembled on a generated 16 MiB journal, beside two baselines run
//! in the same process: gzip of the journal's bytes at the same level (the floor: assembly
//! cannot write its artifact faster than it can compress that much JSON), and the same
//! assembly at the default gzip level 6.
//!
//! `CUCA_BENCH_RSS_GIB=1 cargo bench -p cuca-journal --bench assemble -- rss` additionally
//! generates a journal of that many GiB on disk, assembles it in a child process (this same
//! binary, re-executed with `CUCA_ASSEMBLE_RSS_CHILD` set, so the generator's memory is not
//! counted), reads the child's `VmHWM` from `/proc/self/status`, and fails unless it stays under
//! 64 MiB. It is opt-in because it writes about 2.5 GiB of scratch and takes a minute.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, Throughput};
use cuca_events::{Role, ToolChoice, ToolDefinition};
use cuca_journal::assemble::{assemble_journal, AssembleOptions};
use cuca_journal::format::*;

/// Set in the child process: `<journal>\n<run_dir>`.
const CHILD_ENV: &str = "CUCA_ASSEMBLE_RSS_CHILD";
/// Opt-in size, in GiB, of the peak-RSS run.
const RSS_ENV: &str = "CUCA_BENCH_RSS_GIB";
/// The bound on the resident set of a 1 GiB assembly: it must not grow with the journal.
const RSS_LIMIT_KIB: u64 = 64 * 1024;

/// A xorshift generator: deterministic, dependency-free, fast enough not to be the bench.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const WORDS: &[&str] = &[
    "fn", "let", "mut", "impl", "struct", "pub", "use", "crate", "self", "match", "Some", "None",
    "Ok", "Err", "return", "async", "await", "journal", "record", "agent", "window", "turn",
    "pool", "index", "message", "tool", "shell", "cargo", "test", "error", "warning", "line",
    "the", "a", "of", "to", "and", "in", "is", "that", "for", "with", "on", "file", "path",
];

/// Text that compresses like source code and tool output do (a few times), not like zeros.
fn prose(rng: &mut Rng, bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 16);
    while out.len() < bytes {
        out.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
        match rng.below(12) {
            0 => out.push('\n'),
            1 => {
                out.push_str(&rng.below(100_000).to_string());
                out.push(' ');
            }
            _ => out.push(' '),
        }
    }
    out
}

fn cid(rng: &mut Rng) -> ContentId {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&rng.next().to_le_bytes());
    id[8..].copy_from_slice(&rng.next().to_le_bytes());
    ContentId(id)
}

/// Writes a realistic multi-agent journal of at least `target_bytes` into `out`: per turn a
/// tool output and a shell stream in the text pool, a user and an assistant message, and
/// `model_io`, `prompt_frame`, `tool_result`, `shell` and `clock` entries whose windows reference
/// the last 40 messages. Returns the journal's size.
fn generate(out: &mut impl Write, target_bytes: u64) -> u64 {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut written = 0u64;
    let mut line = |out: &mut dyn Write, l: &JournalLine| {
        let mut bytes = serde_json::to_vec(l).unwrap();
        bytes.push(b'\n');
        out.write_all(&bytes).unwrap();
        written += bytes.len() as u64;
        written
    };
    line(
        out,
        &JournalLine::Header(Header {
            format_version: FORMAT_VERSION,
            session_id: "bench".into(),
            routing_key: Some("bench/1".into()),
            capabilities: serde_json::json!({}),
            recorder: RecorderBuild {
                version: "bench".into(),
                commit: None,
            },
        }),
    );
    line(
        out,
        &JournalLine::Seed(Seed {
            baseline_commit: None,
            build_prompt: prose(&mut rng, 2000),
            slots: vec![SlotSeed {
                slot: "main".into(),
                model: "qwen3".into(),
                context_window: 131_072,
                modalities: vec![Modality::Text],
            }],
        }),
    );
    line(
        out,
        &JournalLine::Toolset(ToolsetLine {
            index: 0,
            id: cid(&mut rng),
            tools: vec![ToolDefinition {
                name: "shell".into(),
                description: prose(&mut rng, 300),
                parameters: serde_json::json!({"type": "object", "properties": {"cmd": {"type": "string"}}}),
            }],
        }),
    );
    let (mut n_texts, mut n_messages, mut seq, mut turn) = (0u64, 0u64, 0u64, 0u64);
    let mut agent = String::from("a0");
    let mut written_now = 0;
    while written_now < target_bytes {
        // A new agent every 1000 turns: the agent table grows with the run, O(agents).
        if turn % 1000 == 0 {
            agent = format!("a{}", turn / 1000);
            line(
                out,
                &JournalLine::Agent(AgentRow {
                    id: agent.clone(),
                    profile_id: "p".into(),
                    profile_name: "coder".into(),
                    origin: AgentOrigin::Spawn {
                        parent: "a0".into(),
                        position: turn / 1000,
                    },
                    status: AgentStatus::Started,
                    ceiling: None,
                }),
            );
        }
        let output = n_texts;
        line(
            out,
            &JournalLine::Text(TextLine {
                index: output,
                id: cid(&mut rng),
                text: prose(&mut rng, 3000),
            }),
        );
        let stdout = n_texts + 1;
        line(
            out,
            &JournalLine::Text(TextLine {
                index: stdout,
                id: cid(&mut rng),
                text: prose(&mut rng, 1200),
            }),
        );
        n_texts += 2;
        let user = n_messages;
        line(
            out,
            &JournalLine::Message(MessageLine {
                index: user,
                id: cid(&mut rng),
                body: StoredMessage {
                    role: Role::Tool,
                    content: vec![StoredBlock::ToolResult {
                        tool_call_id: format!("c{turn}"),
                        content: output,
                        is_error: false,
                    }],
                },
            }),
        );
        let answer = n_messages + 1;
        line(
            out,
            &JournalLine::Message(MessageLine {
                index: answer,
                id: cid(&mut rng),
                body: StoredMessage {
                    role: Role::Assistant,
                    content: vec![StoredBlock::Text {
                        text: prose(&mut rng, 600),
                    }],
                },
            }),
        );
        n_messages += 2;
        let window: Vec<u64> = (n_messages.saturating_sub(41)..n_messages - 1).collect();
        let mut entry = |out: &mut dyn Write, input: Input| {
            let l = JournalLine::Entry(Entry {
                seq,
                agent: agent.clone(),
                input,
            });
            seq += 1;
            line(out, &l)
        };
        entry(
            out,
            Input::ModelIo(ModelIo {
                request: PooledRequest {
                    model: "qwen3".into(),
                    messages: window.clone(),
                    toolset: Some(0),
                    tool_choice: Some(ToolChoice::Auto),
                    max_tokens: Some(4096),
                    temperature: Some(0.5),
                    reasoning_effort: None,
                    role: RequestRole::AgentTurn,
                    shape: RequestShape::Free,
                },
                response: PooledResponse {
                    model: "qwen3".into(),
                    provider: "llamacpp".into(),
                    message: answer,
                    finish_reason: Some("stop".into()),
                    prompt_tokens: 9000 + rng.below(1000),
                    completion_tokens: rng.below(500),
                    reasoning_tokens: None,
                    cost: None,
                    cached_tokens: Some(8000),
                },
                latency_ms: rng.below(5000),
            }),
        );
        entry(
            out,
            Input::PromptFrame(PromptFrame {
                turn,
                items: window
                    .iter()
                    .map(|&message| FrameItem {
                        message,
                        retention: Retention::Compactable,
                        region: None,
                        turn,
                        slot: Slot::Conversation,
                    })
                    .collect(),
            }),
        );
        entry(
            out,
            Input::ToolResult(ToolResult {
                call_id: format!("c{turn}"),
                name: "shell".into(),
                arguments: stdout,
                output,
                is_error: false,
            }),
        );
        entry(
            out,
            Input::Shell(Shell {
                origin: ShellOrigin::ShellTool,
                command: "cargo test".into(),
                cwd: ".".into(),
                exit_status: Some(0),
                stdout,
                stderr: output,
            }),
        );
        written_now = entry(
            out,
            Input::Clock(Clock {
                elapsed_ms: turn * 1000,
                remaining_ms: Some(3_600_000),
            }),
        );
        turn += 1;
    }
    let end = JournalLine::End(End {
        entries: seq,
        stop_reason: None,
    });
    line(out, &end)
}

fn write_journal(path: &Path, target_bytes: u64) -> u64 {
    let file = std::fs::File::create(path).unwrap();
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let n = generate(&mut out, target_bytes);
    out.flush().unwrap();
    n
}

/// `VmHWM` and `VmRSS` of this process, in KiB.
fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// The child side of the peak-RSS run: assemble, then report the resident set as one line.
fn child(spec: &str) {
    let (journal, run_dir) = spec.split_once('\n').expect("journal and run dir");
    let (hwm_before, _) = rss_kib();
    let started = Instant::now();
    let report = assemble_journal(
        Path::new(journal),
        Path::new(run_dir),
        &AssembleOptions::default(),
    )
    .expect("assembly");
    let seconds = started.elapsed().as_secs_f64();
    let (hwm, rss) = rss_kib();
    println!(
        "{{\"journalBytes\":{},\"artifactBytes\":{},\"entries\":{},\"agents\":{},\"messages\":{},\"texts\":{},\"seconds\":{seconds:.2},\"vmHwmKib\":{hwm},\"vmRssKib\":{rss},\"vmHwmBeforeKib\":{hwm_before},\"outcome\":\"{}\"}}",
        report.journal_bytes,
        report.artifact_bytes,
        report.n_entries,
        report.n_agents,
        report.n_messages,
        report.n_texts,
        report.outcome.kind()
    );
}

/// The parent side: generate, run the child, check the bound.
fn rss_run(gib: f64) {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("replay.ndjson");
    let run_dir: PathBuf = dir.path().join("run");
    let started = Instant::now();
    let bytes = write_journal(&journal, (gib * (1u64 << 30) as f64) as u64);
    eprintln!(
        "generated {bytes} journal bytes in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .env(
            CHILD_ENV,
            format!("{}\n{}", journal.display(), run_dir.display()),
        )
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "child failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line = String::from_utf8(output.stdout).unwrap();
    println!("peak-RSS run: {}", line.trim());
    let report: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    let hwm = report["vmHwmKib"].as_u64().unwrap();
    assert!(
        hwm < RSS_LIMIT_KIB,
        "assembling {bytes} bytes peaked at {hwm} KiB, over the {RSS_LIMIT_KIB} KiB bound"
    );
}

fn gzip_baseline(journal: &Path, level: u32) {
    let mut reader =
        std::io::BufReader::with_capacity(64 * 1024, std::fs::File::open(journal).unwrap());
    let mut gz = flate2::write::GzEncoder::new(std::io::sink(), flate2::Compression::new(level));
    std::io::copy(&mut reader, &mut gz).unwrap();
    gz.finish().unwrap();
}

fn bench_assembly(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("replay.ndjson");
    let bytes = write_journal(&journal, 16 << 20);
    let run_dir = dir.path().join("run");

    let mut group = c.benchmark_group("assemble");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(bytes));
    for level in [1u32, 6] {
        let options = AssembleOptions {
            compression_level: level,
            ..AssembleOptions::default()
        };
        let report = assemble_journal(&journal, &run_dir, &options).unwrap();
        eprintln!(
            "level {level}: {bytes} journal bytes -> {} record bytes ({:.1}x)",
            report.artifact_bytes,
            bytes as f64 / report.artifact_bytes as f64
        );
        group.bench_with_input(
            BenchmarkId::new("assemble_16MiB", level),
            &options,
            |b, options| {
                b.iter(|| assemble_journal(&journal, &run_dir, options).unwrap());
            },
        );
        group.bench_with_input(
            BenchmarkId::new("gzip_copy_16MiB_baseline", level),
            &level,
            |b, &level| {
                b.iter(|| gzip_baseline(&journal, level));
            },
        );
    }
    group.finish();
}

fn main() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        child(&spec);
        return;
    }
    if let Some(gib) = std::env::var(RSS_ENV)
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
    {
        rss_run(gib);
    }
    let mut c = Criterion::default().configure_from_args();
    bench_assembly(&mut c);
    c.final_summary();
}
